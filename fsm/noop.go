package fsm

import (
	"context"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
)

// Noop is a state machine that decodes each command and answers every cell "created" without
// storing anything. It exists for one purpose: the benchmark baseline "raft-noop", the same raft
// setup as a real partition minus the SQL apply, so the cost of the apply shows as a ratio. Its
// snapshots are empty; reads of a Noop replica find nothing.
type Noop struct {
	mu        sync.Mutex
	applied   storage.AppliedState
	appliedCh chan struct{}
	next      int64
}

var _ raft.BatchingFSM = (*Noop)(nil)

// NewNoop returns an empty Noop.
func NewNoop() *Noop { return &Noop{appliedCh: make(chan struct{})} }

// Apply applies one entry.
func (n *Noop) Apply(l *raft.Log) interface{} { return n.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch decodes each command and answers created with increasing added_ids.
func (n *Noop) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			out[i] = &Response{}
			continue
		}
		cmd, err := command.DecodeAs[*command.Append](l.Data)
		if err != nil {
			out[i] = &Response{Err: err}
			continue
		}
		ws := make([]command.WriteResult, len(cmd.Writes))
		for k, w := range cmd.Writes {
			rs := make([]cells.Result, len(w.Cells))
			for j := range rs {
				n.next++
				rs[j] = cells.Result{Status: cells.StatusCreated, AddedID: n.next, CreatedAt: cmd.CreatedAt}
			}
			ws[k] = command.WriteResult{Cells: rs}
		}
		out[i] = &Response{Result: ws}
	}
	if len(logs) > 0 {
		last := logs[len(logs)-1]
		n.mu.Lock()
		n.applied = storage.AppliedState{Index: last.Index, Term: last.Term}
		close(n.appliedCh)
		n.appliedCh = make(chan struct{})
		n.mu.Unlock()
	}
	return out
}

// Applied returns the last applied entry.
func (n *Noop) Applied() storage.AppliedState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.applied
}

// WaitApplied blocks until the applied index reaches index or ctx ends.
func (n *Noop) WaitApplied(ctx context.Context, index uint64) error {
	for {
		n.mu.Lock()
		a, ch := n.applied.Index, n.appliedCh
		n.mu.Unlock()
		if a >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Failed is always nil.
func (n *Noop) Failed() error { return nil }

// Snapshot returns an empty snapshot.
func (n *Noop) Snapshot() (raft.FSMSnapshot, error) { return noopSnapshot{}, nil }

// Restore discards the snapshot.
func (n *Noop) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	_, err := io.Copy(io.Discard, rc)
	return err
}

type noopSnapshot struct{}

func (noopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noopSnapshot) Release()                             {}

// HighWater knows no shard: a Noop stores nothing.
func (n *Noop) HighWater(int) (int64, bool) { return 0, false }

// AppliedChanged returns a channel closed the next time the applied index advances.
func (n *Noop) AppliedChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.appliedCh
}
