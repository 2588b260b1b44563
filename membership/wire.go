package membership

import (
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Wire formats. Meta travels as JSON in memberlist's node meta. Replica states travel as one
// type byte followed by msgpack of []wireState, in push/pull (LocalState, every known state) and
// in user messages (a broadcast or a direct send of one node's state). Short keys keep a state
// small enough for a UDP broadcast; unknown keys are ignored, so fields can be added.
const (
	msgStates byte = 1
)

type wireReplica struct {
	Datastore    string `msgpack:"d"`
	Partition    int    `msgpack:"p"`
	Leader       bool   `msgpack:"l,omitempty"`
	AppliedIndex uint64 `msgpack:"a,omitempty"`
}

type wireState struct {
	ID       string        `msgpack:"id"`
	Epoch    int64         `msgpack:"e"`
	Seq      uint64        `msgpack:"s"`
	Leaving  bool          `msgpack:"lv,omitempty"`
	Replicas []wireReplica `msgpack:"r"`
}

func encodeStates(states []nodeState) ([]byte, error) {
	ws := make([]wireState, len(states))
	for i, s := range states {
		ws[i] = wireState{ID: s.ID, Epoch: s.Epoch, Seq: s.Seq, Leaving: s.Leaving,
			Replicas: make([]wireReplica, len(s.Replicas))}
		for j, r := range s.Replicas {
			ws[i].Replicas[j] = wireReplica(r)
		}
	}
	b, err := msgpack.Marshal(ws)
	if err != nil {
		return nil, fmt.Errorf("membership: encode states: %w", err)
	}
	return append([]byte{msgStates}, b...), nil
}

// decodeStates decodes what encodeStates produced. It does not retain buf.
func decodeStates(buf []byte) ([]nodeState, error) {
	if len(buf) == 0 {
		return nil, nil
	}
	if buf[0] != msgStates {
		return nil, fmt.Errorf("membership: unknown message type %d", buf[0])
	}
	var ws []wireState
	if err := msgpack.Unmarshal(buf[1:], &ws); err != nil {
		return nil, fmt.Errorf("membership: decode states: %w", err)
	}
	out := make([]nodeState, len(ws))
	for i, w := range ws {
		out[i] = nodeState{ID: w.ID, Epoch: w.Epoch, Seq: w.Seq, Leaving: w.Leaving,
			Replicas: make([]Replica, len(w.Replicas))}
		for j, r := range w.Replicas {
			out[i].Replicas[j] = Replica(r)
		}
	}
	return out, nil
}

func encodeMeta(m Meta) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("membership: encode meta: %w", err)
	}
	return b, nil
}

func decodeMeta(b []byte) (Meta, error) {
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("membership: decode meta: %w", err)
	}
	return m, nil
}
