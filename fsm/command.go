package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/vmihailenco/msgpack/v5"
)

// First bytes of the cell commands. Version 1 holds cells only (one write with no ID, not
// atomic); it is still read, and written for such commands, so that a replica of an older build
// can apply it. writeCommandVersion holds writes (Write: ID, conditions, atomicity). Other
// first bytes: groupCommandVersion (2), indexCommandVersion (3), schemaCommandVersion (4),
// eraseCommandVersion (5).
const (
	commandVersion      byte = 1
	writeCommandVersion byte = 6
)

// Errors of the command codec.
var (
	// ErrBadCommand: a log entry's data is not a command this version understands.
	ErrBadCommand = errors.New("fsm: bad command")
)

// Command is the data of one raft log entry: writes to apply in order, and the time the leader
// accepted them, which becomes every created cell's created_at (never a follower's clock).
type Command struct {
	// CreatedAt is the leader's clock when it proposed the entry; stored with microsecond
	// precision in UTC.
	CreatedAt time.Time
	// Writes are applied in order, each with its own outcome. A key may appear more than once
	// (in one write or several); the first occurrence wins and later ones report exists or
	// conflict against it.
	Writes []Write
}

// CellCount returns the number of cells of every write of c.
func (c *Command) CellCount() int {
	n := 0
	for i := range c.Writes {
		n += len(c.Writes[i].Cells)
	}
	return n
}

// CommandCell is one cell of a Command. Shard is computed by the proposer from the row key and
// the datastore's shard count and must lie in the partition's shard range.
type CommandCell struct {
	Shard int
	Key   cells.Key
	Body  cells.Body
}

type wireCommand struct {
	_msgpack        struct{} `msgpack:",as_array"`
	CreatedAtMicros int64
	Cells           []wireCell
}

type wireWriteCommand struct {
	_msgpack        struct{} `msgpack:",as_array"`
	CreatedAtMicros int64
	Writes          []wireWrite
}

type wireWrite struct {
	_msgpack   struct{} `msgpack:",as_array"`
	ID         []byte   // empty: no ID
	Atomic     bool
	Conditions []wireCondition
	Cells      []wireCell
}

type wireCondition struct {
	_msgpack     struct{} `msgpack:",as_array"`
	Shard        int32
	RowKey       []byte
	Column       string
	LatestRefKey int64
	None         bool
}

type wireCell struct {
	_msgpack struct{} `msgpack:",as_array"`
	Shard    int32
	RowKey   []byte
	Column   string
	RefKey   int64
	Body     []byte
}

func toWireCells(cs []CommandCell) []wireCell {
	out := make([]wireCell, len(cs))
	for i, cc := range cs {
		rk := cc.Key.RowKey
		out[i] = wireCell{Shard: int32(cc.Shard), RowKey: rk[:], Column: cc.Key.ColumnKey, RefKey: cc.Key.RefKey, Body: cc.Body}
	}
	return out
}

func fromWireCells(ws []wireCell, what string) ([]CommandCell, error) {
	out := make([]CommandCell, len(ws))
	for i, wc := range ws {
		rk, err := uuid.FromBytes(wc.RowKey)
		if err != nil {
			return nil, fmt.Errorf("%w: %scell %d: row key: %w", ErrBadCommand, what, i, err)
		}
		out[i] = CommandCell{Shard: int(wc.Shard), Key: cells.Key{RowKey: rk, ColumnKey: wc.Column, RefKey: wc.RefKey}, Body: wc.Body}
	}
	return out, nil
}

// plain reports whether c can be written in the version 1 format: one write (or none) with no
// ID, no conditions, not atomic.
func (c *Command) plain() bool {
	if len(c.Writes) > 1 {
		return false
	}
	for i := range c.Writes {
		w := &c.Writes[i]
		if w.ID != uuid.Nil || w.IsAtomic() {
			return false
		}
	}
	return true
}

// EncodeCommand returns the log entry data of c: a version byte, then MessagePack.
func EncodeCommand(c Command) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if c.plain() {
		w := wireCommand{CreatedAtMicros: c.CreatedAt.UnixMicro()}
		if len(c.Writes) == 1 {
			w.Cells = toWireCells(c.Writes[0].Cells)
		}
		b, err = msgpack.Marshal(&w)
		if err == nil {
			return append([]byte{commandVersion}, b...), nil
		}
	} else {
		w := wireWriteCommand{CreatedAtMicros: c.CreatedAt.UnixMicro(), Writes: make([]wireWrite, len(c.Writes))}
		for i := range c.Writes {
			src := &c.Writes[i]
			ww := wireWrite{Atomic: src.Atomic, Cells: toWireCells(src.Cells)}
			if src.ID != uuid.Nil {
				ww.ID = src.ID[:]
			}
			for _, cond := range src.Conditions {
				ww.Conditions = append(ww.Conditions, wireCondition{Shard: int32(cond.Shard), RowKey: cond.RowKey[:],
					Column: cond.ColumnKey, LatestRefKey: cond.LatestRefKey, None: cond.None})
			}
			w.Writes[i] = ww
		}
		b, err = msgpack.Marshal(&w)
		if err == nil {
			return append([]byte{writeCommandVersion}, b...), nil
		}
	}
	return nil, fmt.Errorf("fsm: encode command: %w", err)
}

// DecodeCommand parses log entry data written by EncodeCommand. Errors wrap ErrBadCommand.
func DecodeCommand(data []byte) (Command, error) {
	if len(data) == 0 || (data[0] != commandVersion && data[0] != writeCommandVersion) {
		return Command{}, fmt.Errorf("%w: unknown version", ErrBadCommand)
	}
	if data[0] == commandVersion {
		var w wireCommand
		if err := msgpack.Unmarshal(data[1:], &w); err != nil {
			return Command{}, fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
		cs, err := fromWireCells(w.Cells, "")
		if err != nil {
			return Command{}, err
		}
		return Command{CreatedAt: time.UnixMicro(w.CreatedAtMicros).UTC(), Writes: []Write{{Cells: cs}}}, nil
	}
	var w wireWriteCommand
	if err := msgpack.Unmarshal(data[1:], &w); err != nil {
		return Command{}, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	c := Command{CreatedAt: time.UnixMicro(w.CreatedAtMicros).UTC(), Writes: make([]Write, len(w.Writes))}
	for i, ww := range w.Writes {
		out := Write{Atomic: ww.Atomic}
		if len(ww.ID) > 0 {
			id, err := uuid.FromBytes(ww.ID)
			if err != nil {
				return Command{}, fmt.Errorf("%w: write %d: id: %w", ErrBadCommand, i, err)
			}
			out.ID = id
		}
		cs, err := fromWireCells(ww.Cells, fmt.Sprintf("write %d: ", i))
		if err != nil {
			return Command{}, err
		}
		out.Cells = cs
		for j, wc := range ww.Conditions {
			rk, err := uuid.FromBytes(wc.RowKey)
			if err != nil {
				return Command{}, fmt.Errorf("%w: write %d: condition %d: row key: %w", ErrBadCommand, i, j, err)
			}
			out.Conditions = append(out.Conditions, Condition{Shard: int(wc.Shard), RowKey: rk, ColumnKey: wc.Column,
				LatestRefKey: wc.LatestRefKey, None: wc.None})
		}
		c.Writes[i] = out
	}
	return c, nil
}
