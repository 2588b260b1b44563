package wire

// EraseResult answers DELETE /v1/{datastore}/cells/{row_key}, the erasure of a row: how many
// cells it deleted (0 when the row had none: a row never written, or erased before and not
// written since; erasing is idempotent) and AddedID, the added_id of the tombstone it appended
// to the row's shard log (0 when it deleted nothing).
type EraseResult struct {
	RowKey  string `json:"row_key"`
	Erased  int    `json:"erased"`
	AddedID int64  `json:"added_id"`
}

// TombstoneColumn is the column_key of a tombstone in a shard log (a Cell with Erased set). No
// client can write, read or filter on it: column keys are [A-Za-z0-9_]{1,64}.
const TombstoneColumn = "$erased"
