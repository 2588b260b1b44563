package cells

import (
	"fmt"
	"time"
)

// Status is the outcome of appending one cell, in either mode of a datastore.
type Status uint8

// Cell outcomes. The zero Status is no outcome.
const (
	// StatusCreated: the cell was appended by this write.
	StatusCreated Status = iota + 1
	// StatusExists: a cell with the same key and body was stored before; nothing changed (an
	// idempotent retry).
	StatusExists
	// StatusConflict: a cell with the same key and another body was stored before; nothing
	// changed.
	StatusConflict
	// StatusBuffered (async mode only): the cell is stored in the buffer table of another
	// storage cluster's master, but its primary master did not take it; the reaper replays it
	// there. It is durable but not readable until replayed. A raft partition never answers it.
	StatusBuffered
)

// String returns "created", "exists", "conflict" or "buffered".
func (s Status) String() string {
	switch s {
	case StatusCreated:
		return "created"
	case StatusExists:
		return "exists"
	case StatusConflict:
		return "conflict"
	case StatusBuffered:
		return "buffered"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Result is the outcome of appending one cell. AddedID and CreatedAt are those of the stored
// cell: the new one for StatusCreated, the one found for StatusExists and StatusConflict (in
// async mode, a conflict found in a buffer has neither). StatusBuffered has CreatedAt, the
// write's time, and no AddedID: it is assigned when the reaper replays the cell.
type Result struct {
	Status    Status
	AddedID   int64
	CreatedAt time.Time
}
