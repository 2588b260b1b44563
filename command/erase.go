package command

import (
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// Erase is an erase command: erase every cell of row RowKey, which lives in shard Shard, and
// record the erasure in the shard's log with a tombstone (cells.NewTombstone) created at
// CreatedAt, the proposer's clock. Its outcome is an EraseResult.
type Erase struct {
	_msgpack  struct{} `msgpack:",as_array"`
	CreatedAt time.Time
	Shard     int32
	RowKey    uuid.UUID
}

func (*Erase) isCommand() {}

// CheckShards checks Shard against r.
func (e *Erase) CheckShards(r cells.ShardRange) error {
	if !r.Contains(int(e.Shard)) {
		return outOfRange("erase", int(e.Shard), r)
	}
	return nil
}

// EraseResult is the outcome of an erase command: how many cells it deleted (0 when the row had
// none: an unknown row, or one erased before and not written since) and the added_id of the
// tombstone it appended to the shard's log (0 when it deleted nothing: no tombstone then).
type EraseResult struct {
	Erased  int
	AddedID int64
}
