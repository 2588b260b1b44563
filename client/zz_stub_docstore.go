package client

// TEMPORARY STUB (branch jepsen-docstore): issue 18's client API, as announced, emulated on
// the existing API so that the jepsen cas and bank workloads compile and run until the real
// API lands on main. The emulation is NOT atomic (a condition is read, then the cells are
// written), which the jepsen checkers should catch. Delete this file when merging main.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
)

// ErrPreconditionFailed (stub): a condition did not hold (412).
var ErrPreconditionFailed = errors.New("client: precondition failed")

// PreconditionError (stub) lists the failed conditions.
type PreconditionError struct {
	Failures []wire.ConditionFailure
}

func (e *PreconditionError) Error() string {
	return fmt.Sprintf("client: precondition failed: %d conditions", len(e.Failures))
}

// Unwrap returns ErrPreconditionFailed.
func (e *PreconditionError) Unwrap() error { return ErrPreconditionFailed }

type writeOptions struct {
	cond    bool
	latest  *int64
	idemKey string
}

// WriteOption (stub) modifies one write call.
type WriteOption func(*writeOptions)

// IfLatestRefKey (stub): write only if the column's latest ref key is refKey.
func IfLatestRefKey(refKey int64) WriteOption {
	return func(o *writeOptions) { o.cond, o.latest = true, &refKey }
}

// IfNoCell (stub): write only if the column has no cell.
func IfNoCell() WriteOption { return func(o *writeOptions) { o.cond, o.latest = true, nil } }

// IdempotencyKey (stub): ignored.
func IdempotencyKey(key string) WriteOption { return func(o *writeOptions) { o.idemKey = key } }

// TxCondition (stub) is one condition of a transaction.
type TxCondition struct {
	RowKey       uuid.UUID
	ColumnKey    string
	LatestRefKey *int64
}

// PutCell (stub) writes one cell, checking a condition first (not atomically).
func (c *Client) PutCell(ctx context.Context, rowKey uuid.UUID, columnKey string, refKey int64,
	body json.RawMessage, opts ...WriteOption) (wire.PutResult, error) {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	if o.cond {
		if err := c.stubCheck(ctx, []TxCondition{{RowKey: rowKey, ColumnKey: columnKey, LatestRefKey: o.latest}}); err != nil {
			return wire.PutResult{}, err
		}
	}
	return c.putCell(ctx, rowKey, columnKey, refKey, body)
}

func (c *Client) stubCheck(ctx context.Context, conds []TxCondition) error {
	keys := make([]GetKey, len(conds))
	for i, cd := range conds {
		keys[i] = GetKey{RowKey: cd.RowKey, ColumnKey: cd.ColumnKey, Latest: true}
	}
	resp, err := c.GetCells(ctx, keys, WithConsistency(ConsistencyStrong))
	if err != nil {
		return err
	}
	latest := map[string]int64{}
	for _, cell := range resp.Cells {
		latest[cell.RowKey+"/"+cell.ColumnKey] = cell.RefKey
	}
	var pe PreconditionError
	for i, cd := range conds {
		got, ok := latest[cd.RowKey.String()+"/"+cd.ColumnKey]
		switch {
		case !ok && cd.LatestRefKey == nil:
		case ok && cd.LatestRefKey != nil && got == *cd.LatestRefKey:
		default:
			f := wire.ConditionFailure{Index: i}
			if ok {
				f.LatestRefKey = &got
			}
			pe.Failures = append(pe.Failures, f)
		}
	}
	if len(pe.Failures) > 0 {
		return &pe
	}
	return nil
}

// Transact (stub) checks the conditions, then writes the cells with one put_cells (not
// atomically).
func (c *Client) Transact(ctx context.Context, conds []TxCondition, writes []CellWrite, opts ...WriteOption) (wire.TransactionResponse, error) {
	if err := c.stubCheck(ctx, conds); err != nil {
		return wire.TransactionResponse{}, err
	}
	res, err := c.PutCells(ctx, writes)
	if err != nil {
		return wire.TransactionResponse{}, err
	}
	for _, r := range res {
		if r.Status == wire.StatusConflict {
			return wire.TransactionResponse{}, fmt.Errorf("client: transaction: %w", ErrConflict)
		}
	}
	return wire.TransactionResponse{Committed: true, Results: res}, nil
}

// RowKeysNear (stub) returns n new random row keys in the same shard as row.
func (c *Client) RowKeysNear(ctx context.Context, row uuid.UUID, n int) ([]uuid.UUID, error) {
	if _, err := c.GetCellLatest(ctx, row, "STUB", WithConsistency(ConsistencyStrong)); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	c.eps.routes.mu.Lock()
	sl := c.eps.routes.ds[c.datastore]
	c.eps.routes.mu.Unlock()
	if sl == nil {
		return nil, fmt.Errorf("client: row keys near: shard count unknown")
	}
	shards := len(sl.leader)
	out := make([]uuid.UUID, 0, n)
	for len(out) < n {
		k := uuid.New()
		if cells.ShardOf(k, shards) == cells.ShardOf(row, shards) {
			out = append(out, k)
		}
	}
	return out, nil
}
