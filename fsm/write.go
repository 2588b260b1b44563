package fsm

import (
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// RequestWindow is how long the FSM keeps the outcome of a write that carries an idempotency
// key (Write.ID), measured in the leader's clock of the entries (Command.CreatedAt): a write
// whose ID was recorded by an entry at most RequestWindow older answers the recorded outcome
// (WriteResult.Replayed) and changes nothing. It is a constant, not a setting, because every
// replica must decide alike: a record older than the window is ignored by every replica
// whether or not it has been pruned from its table yet.
const RequestWindow = 10 * time.Minute

// Write is one client write request inside a Command: cells to append, with what the request
// asks of them.
//
//   - ID is the request's idempotency key (uuid.Nil: none; nothing is recorded). The FSM records
//     the outcome of a write with an ID, and answers a later write with the same ID within
//     RequestWindow with that outcome instead of applying it (a retry after an indeterminate
//     answer learns what its first attempt did: created stays created).
//   - Atomic writes all of Cells or none: a cell whose key holds another body makes the whole
//     write a conflict, and nothing of it is written. Conditions imply Atomic.
//   - Conditions must all hold when the entry is applied, else nothing is written and the
//     result lists the failed ones (WriteResult.Failed).
//
// A write's cells and conditions must name shards of the partition that applies it.
type Write struct {
	ID         uuid.UUID
	Atomic     bool
	Conditions []Condition
	Cells      []CommandCell
}

// IsAtomic reports whether the write is applied all or nothing (Atomic, or conditional).
func (w *Write) IsAtomic() bool { return w.Atomic || len(w.Conditions) > 0 }

// Condition is a compare part of a compare-and-append: the latest ref key of a column (the
// highest ref key of a row key and column key, in shard Shard) must be LatestRefKey, or, with
// None, the column must have no cell.
type Condition struct {
	Shard        int
	RowKey       uuid.UUID
	ColumnKey    string
	LatestRefKey int64
	None         bool
}

// WriteResult is the outcome of one Write, the same on every replica.
//
// A write that was applied has one cells.Result per cell in Cells (created, exists, or, for a
// write that is not atomic, conflict). A write that was refused has Failed (conditions that
// did not hold), Conflict (an atomic write met a stored key with another body; Cells tells
// which: those cells have StatusConflict and the added_id of the stored cell, the others an
// empty Status) or Violation (a cell its column's schema rejects) set, and nothing of it was
// written. Replayed says the outcome is the one recorded for an earlier write with the same
// ID (nothing was applied this time); KeyReused that the ID was recorded for a different
// write (other cells or conditions), which is refused and changes nothing.
type WriteResult struct {
	Cells     []cells.Result
	Failed    []ConditionFailure
	Conflict  bool
	Violation *SchemaViolation
	Replayed  bool
	KeyReused bool
}

// Applied reports whether the write's cells were stored (created or found stored): not
// refused by a condition, a conflict of an atomic write, a schema or a reused ID.
func (r *WriteResult) Applied() bool {
	return len(r.Failed) == 0 && !r.Conflict && r.Violation == nil && !r.KeyReused
}

// ConditionFailure is one condition of a write that did not hold: its index in
// Write.Conditions and the column's latest ref key at apply time (Found false: no cell).
type ConditionFailure struct {
	Index        int
	LatestRefKey int64
	Found        bool
}

// SchemaViolation says which cell of a write the latest schema of its column rejected: its
// index in Write.Cells, the schema version, the JSON pointer of the failing field in the body
// ("" for the whole body) and the validator's message.
type SchemaViolation struct {
	Cell    int
	Column  string
	Version int
	Pointer string
	Message string
}
