package cells

import (
	"time"

	"github.com/google/uuid"
)

// TombstoneColumn is the column key of a tombstone: the entry that takes the place of an erased
// row's cells in its shard's log. It is outside [A-Za-z0-9_]{1,64}, so ValidateColumnKey (and
// Key.Validate) refuse it: a client can never write, read or filter on it as a normal column,
// and a tombstone can never be mistaken for a cell a client wrote.
//
// A tombstone is stored like a cell, in the shard's entity table: row key the erased row's,
// column key TombstoneColumn, ref key equal to its own added_id (so two erasures of one row
// never share a key), body the empty object, created_at the erasure's time.
const TombstoneColumn = "$erased"

// IsTombstone reports whether k is the key of a tombstone (its column is TombstoneColumn).
func (k Key) IsTombstone() bool { return k.ColumnKey == TombstoneColumn }

// tombstoneBody is the stored form of the empty JSON object, the body of every tombstone.
var tombstoneBody = func() Body {
	b, err := EncodeObject(map[string]any{})
	if err != nil {
		panic("cells: encode the empty object: " + err.Error())
	}
	return b
}()

// NewTombstone returns the tombstone of an erasure of rowKey that takes position addedID in the
// row's shard log, at time at (kept in UTC, as stored). Its body is the empty object; the Body
// is shared by every tombstone and must not be modified.
func NewTombstone(rowKey uuid.UUID, addedID int64, at time.Time) Cell {
	return Cell{
		Key:       Key{RowKey: rowKey, ColumnKey: TombstoneColumn, RefKey: addedID},
		Body:      tombstoneBody,
		AddedID:   addedID,
		CreatedAt: at.UTC(),
	}
}
