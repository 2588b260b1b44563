package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/vmihailenco/msgpack/v5"
)

// commandVersion is the first byte of every encoded command.
const commandVersion byte = 1

// Errors of the command codec.
var (
	// ErrBadCommand: a log entry's data is not a command this version understands.
	ErrBadCommand = errors.New("fsm: bad command")
)

// Command is the data of one raft log entry: cells to append, and the time the leader accepted
// them, which becomes every created cell's created_at (never a follower's clock).
type Command struct {
	// CreatedAt is the leader's clock when it proposed the entry; stored with microsecond
	// precision in UTC.
	CreatedAt time.Time
	// Cells are appended in order. A key may appear more than once; the first occurrence wins
	// and later ones report exists or conflict against it.
	Cells []CommandCell
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

type wireCell struct {
	_msgpack struct{} `msgpack:",as_array"`
	Shard    int32
	RowKey   []byte
	Column   string
	RefKey   int64
	Body     []byte
}

// EncodeCommand returns the log entry data of c: a version byte, then MessagePack.
func EncodeCommand(c Command) ([]byte, error) {
	w := wireCommand{CreatedAtMicros: c.CreatedAt.UnixMicro(), Cells: make([]wireCell, len(c.Cells))}
	for i, cc := range c.Cells {
		rk := cc.Key.RowKey
		w.Cells[i] = wireCell{Shard: int32(cc.Shard), RowKey: rk[:], Column: cc.Key.ColumnKey, RefKey: cc.Key.RefKey, Body: cc.Body}
	}
	b, err := msgpack.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode command: %w", err)
	}
	return append([]byte{commandVersion}, b...), nil
}

// DecodeCommand parses log entry data written by EncodeCommand. Errors wrap ErrBadCommand.
func DecodeCommand(data []byte) (Command, error) {
	if len(data) == 0 || data[0] != commandVersion {
		return Command{}, fmt.Errorf("%w: unknown version", ErrBadCommand)
	}
	var w wireCommand
	if err := msgpack.Unmarshal(data[1:], &w); err != nil {
		return Command{}, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	c := Command{CreatedAt: time.UnixMicro(w.CreatedAtMicros).UTC(), Cells: make([]CommandCell, len(w.Cells))}
	for i, wc := range w.Cells {
		rk, err := uuid.FromBytes(wc.RowKey)
		if err != nil {
			return Command{}, fmt.Errorf("%w: cell %d: row key: %w", ErrBadCommand, i, err)
		}
		c.Cells[i] = CommandCell{Shard: int(wc.Shard), Key: cells.Key{RowKey: rk, ColumnKey: wc.Column, RefKey: wc.RefKey}, Body: wc.Body}
	}
	return c, nil
}
