package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// WriteOption modifies one write call (PutCell, PutCells, Transact).
type WriteOption func(*writeOptions)

type writeOptions struct {
	key      string
	ifLatest *int64
	ifNoCell bool
	origin   string
	order    *wire.PutOrder
}

func writeOptionsOf(opts []WriteOption) writeOptions {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// query returns put_cell's query for the options (nil when unconditional).
func (o writeOptions) query() url.Values {
	switch {
	case o.ifNoCell:
		return url.Values{"if_latest_ref_key": {"none"}}
	case o.ifLatest != nil:
		return url.Values{"if_latest_ref_key": {strconv.FormatInt(*o.ifLatest, 10)}}
	}
	return nil
}

// WithOrigin makes PutCells carry cells first written in cluster (replication between
// clusters; the request's "origin"): the cells it creates store that origin and the receiving
// cluster does not send them on. The principal needs the replicator or admin role. A cluster
// that is not a valid cluster name fails the call with ErrInvalidArgument (Field "origin"),
// unsent. EraseRow takes it too (a replicated erasure). Ignored by PutCell and Transact.
func WithOrigin(cluster string) WriteOption {
	return func(o *writeOptions) { o.origin = cluster }
}

// WithOrder chains a PutCells call of a replicator (with WithOrigin) to the earlier calls of
// its stream (the request's "order", wire.PutOrder): the node applies it only after the
// stream's request seq after (0: none, the call starts the chain), else the call fails with
// ErrConflict and an *APIError of Code wire.CodeOutOfOrder, nothing written. stream is 1 to
// 64 bytes of [a-zA-Z0-9._:/-], seq positive and after from 0 to below seq; else the call
// fails with ErrInvalidArgument (Field "order"), unsent. The calls of one stream go first to
// the same endpoint (chosen by a hash of the datastore and stream, unless it is in
// cool-down), whose node keeps the chain. Ignored by PutCell, Transact and EraseRow.
func WithOrder(stream string, seq, after int64) WriteOption {
	return func(o *writeOptions) { o.order = &wire.PutOrder{Stream: stream, Seq: seq, After: after} }
}

// IfLatestRefKey makes PutCell conditional: the cell is written only if the column's latest
// ref key is refKey when the write is applied (?if_latest_ref_key=N), else the call fails with
// a *PreconditionError (ErrPreconditionFailed) naming the column's latest ref key. Ignored by
// PutCells and Transact.
func IfLatestRefKey(refKey int64) WriteOption {
	return func(o *writeOptions) { o.ifLatest, o.ifNoCell = &refKey, false }
}

// IfNoCell makes PutCell conditional: the cell is written only if the column has no cell when
// the write is applied (?if_latest_ref_key=none). Ignored by PutCells and Transact.
func IfNoCell() WriteOption {
	return func(o *writeOptions) { o.ifLatest, o.ifNoCell = nil, true }
}

// IdempotencyKey sets the write's idempotency key (the Idempotency-Key header: 1 to 128
// printable ASCII bytes). Without it the client makes a random key per call, so that its own
// retries of the call answer the first attempt's outcome; give one to make retries of your
// own (a new call after ErrIndeterminate, from another process) answer it too. The server
// keeps outcomes for 10 minutes; a key reused for a different request in that time fails with
// ErrKeyReused.
func IdempotencyKey(key string) WriteOption {
	return func(o *writeOptions) { o.key = key }
}

// TxCondition is one condition of a transaction: the latest ref key of RowKey's ColumnKey must
// be *LatestRefKey, or, with LatestRefKey nil, the column must have no cell.
type TxCondition struct {
	RowKey       uuid.UUID
	ColumnKey    string
	LatestRefKey *int64
}

// Transact runs a partition transaction (POST /v1/{ds}/transactions): the writes are applied
// all or none, atomically and linearizably, when every condition holds at apply time. Every
// row (of conditions and writes) must be in one partition: make related rows with RowKeysNear.
// It blocks like PutCell and is retried as a write; the idempotency key (opts, or one per
// call) makes a retry answer the first attempt's outcome.
//
// On success Committed is true and Results has one result per write (created, or exists for a
// cell stored before with the same body). Errors: ErrPreconditionFailed (a *PreconditionError
// listing the failed conditions and the columns' latest ref keys), ErrConflict (a write's key
// holds another body: an *APIError whose Conflicts lists the writes), ErrInvalidArgument
// (Field names the request field; code wire.CodeCrossPartition for rows of more than one
// partition), ErrTooLarge, ErrKeyReused, ErrNotFound, ErrUnavailable (nothing applied; in
// async mode also when the primary master is down), ErrIndeterminate (may have been applied),
// ErrInternal, ErrBadResponse, or ctx's error. Nothing is written on any error but the last
// three.
func (c *Client) Transact(ctx context.Context, conds []TxCondition, writes []CellWrite, opts ...WriteOption) (wire.TransactionResponse, error) {
	const op = "transaction"
	if err := c.checkDatastore(op); err != nil {
		return wire.TransactionResponse{}, err
	}
	if len(writes) == 0 {
		return wire.TransactionResponse{}, fmt.Errorf("client: %s: %w: no writes", op, ErrInvalidArgument)
	}
	req := wire.TransactionRequest{Conditions: make([]wire.TxCondition, len(conds)), Writes: make([]wire.PutCell, len(writes))}
	for i, cd := range conds {
		if err := cells.ValidateColumnKey(cd.ColumnKey); err != nil {
			return wire.TransactionResponse{}, invalid(op, fmt.Sprintf("conditions[%d].", i), err)
		}
		latest := json.RawMessage("null")
		if cd.LatestRefKey != nil {
			latest = json.RawMessage(strconv.FormatInt(*cd.LatestRefKey, 10))
		}
		req.Conditions[i] = wire.TxCondition{RowKey: cd.RowKey.String(), ColumnKey: cd.ColumnKey, LatestRefKey: latest}
	}
	for i, cw := range writes {
		prefix := fmt.Sprintf("writes[%d].", i)
		if err := cw.Key.Validate(); err != nil {
			return wire.TransactionResponse{}, invalid(op, prefix, err)
		}
		if err := checkBody(cw.Body); err != nil {
			return wire.TransactionResponse{}, invalid(op, prefix, err)
		}
		req.Writes[i] = wire.PutCell{RowKey: cw.Key.RowKey.String(), ColumnKey: cw.Key.ColumnKey,
			RefKey: json.Number(strconv.FormatInt(cw.Key.RefKey, 10)), Body: cw.Body}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return wire.TransactionResponse{}, fmt.Errorf("client: %s: encode request: %w", op, err)
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodPost, write: true, path: c.dsPath("transactions"),
		body: body, ok: []int{http.StatusOK}, idempotencyKey: writeOptionsOf(opts).key,
		routeDS: c.datastore, routeRow: writes[0].Key.RowKey,
	})
	if err != nil {
		return wire.TransactionResponse{}, asPrecondition(err)
	}
	var resp wire.TransactionResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.TransactionResponse{}, err
	}
	if !resp.Committed || len(resp.Results) != len(writes) {
		return wire.TransactionResponse{}, badResponse(op, ans, "committed %v with %d results for %d writes", resp.Committed, len(resp.Results), len(writes))
	}
	for i, r := range resp.Results {
		k := writes[i].Key
		if !sameRow(r.RowKey, k.RowKey) || r.ColumnKey != k.ColumnKey || r.RefKey != k.RefKey {
			return wire.TransactionResponse{}, badResponse(op, ans, "results[%d] is for %s/%s/%d, want %s", i, r.RowKey, r.ColumnKey, r.RefKey, k)
		}
		if r.Status != wire.StatusCreated && r.Status != wire.StatusExists {
			return wire.TransactionResponse{}, badResponse(op, ans, "results[%d] has status %q in a committed transaction", i, r.Status)
		}
	}
	return resp, nil
}

// RowKeysNear returns n (1 to 100) new random row keys in the shard of row (GET
// /v1/{ds}/row_keys?near=ROW&count=N), hence in its partition: rows that one transaction may
// write together, such as a trip's child rows. The keys are random UUIDs, not reserved: two
// calls may in principle return the same key (as two uuid.New calls may). Retried as a read.
func (c *Client) RowKeysNear(ctx context.Context, row uuid.UUID, n int) ([]uuid.UUID, error) {
	const op = "row_keys"
	if err := c.checkDatastore(op); err != nil {
		return nil, err
	}
	if n < 1 || n > 100 {
		return nil, fmt.Errorf("client: %s: %w: count %d, want 1 to 100", op, ErrInvalidArgument, n)
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodGet, path: c.dsPath("row_keys"),
		query: url.Values{"near": {row.String()}, "count": {strconv.Itoa(n)}}, ok: []int{http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	var resp wire.RowKeysResponse
	if err := decode(op, ans, &resp); err != nil {
		return nil, err
	}
	if len(resp.RowKeys) != n {
		return nil, badResponse(op, ans, "%d row keys, want %d", len(resp.RowKeys), n)
	}
	out := make([]uuid.UUID, n)
	for i, s := range resp.RowKeys {
		u, err := uuid.Parse(s)
		if err != nil {
			return nil, badResponse(op, ans, "row_keys[%d]: %v", i, err)
		}
		out[i] = u
	}
	return out, nil
}

// TransactionFromWire turns a transaction request in the API's JSON shape (as a file of
// `schemaless transact` holds it) into Transact's conditions and writes. A row key that is no
// UUID, a latest_ref_key that is neither null nor a non-negative integer, or a ref key that is
// no integer fails, naming the field ("conditions[1].latest_ref_key"); the rest is checked by
// Transact.
func TransactionFromWire(req wire.TransactionRequest) ([]TxCondition, []CellWrite, error) {
	conds := make([]TxCondition, len(req.Conditions))
	for i, c := range req.Conditions {
		rk, err := cells.ParseRowKey(c.RowKey)
		if err != nil {
			return nil, nil, fmt.Errorf("conditions[%d].row_key: %w", i, err)
		}
		conds[i] = TxCondition{RowKey: rk, ColumnKey: c.ColumnKey}
		if s := string(c.LatestRefKey); s != "" && s != "null" {
			var n int64
			if err := json.Unmarshal(c.LatestRefKey, &n); err != nil || n < 0 {
				return nil, nil, fmt.Errorf("conditions[%d].latest_ref_key: %s is not a ref key or null", i, s)
			}
			conds[i].LatestRefKey = &n
		}
	}
	writes := make([]CellWrite, len(req.Writes))
	for i, w := range req.Writes {
		rk, err := cells.ParseRowKey(w.RowKey)
		if err != nil {
			return nil, nil, fmt.Errorf("writes[%d].row_key: %w", i, err)
		}
		ref, err := w.RefKey.Int64()
		if err != nil {
			return nil, nil, fmt.Errorf("writes[%d].ref_key: %w", i, err)
		}
		writes[i] = CellWrite{Key: cells.Key{RowKey: rk, ColumnKey: w.ColumnKey, RefKey: ref}, Body: w.Body}
	}
	return conds, writes, nil
}
