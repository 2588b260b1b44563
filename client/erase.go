package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// EraseRow erases every cell of rowKey on every replica (DELETE /v1/{ds}/cells/{row_key}): the
// cells are deleted from the datastore's tables, a tombstone takes their place in the row's
// shard log (a wire.Cell with Erased set, which trigger consumers see), and the index
// maintainers then delete the row's index entries. Reads of the row find nothing afterwards;
// a later write of the row creates new cells. It blocks until a node answers for good, the
// attempts are exhausted or ctx is done, and is retried as a write: erasing is idempotent, so
// a retry after an attempt that erased the row answers Erased 0.
//
// On success the result names the row, Erased counts the cells deleted (0: the row had none)
// and AddedID is the tombstone's position in the shard log (0 when nothing was erased). In
// async mode an erasure is never buffered: with the row's primary master (or a buffer
// cluster's) down it fails with ErrUnavailable.
//
// WithOrigin in opts makes it a replicator's erasure from that cluster (?origin=; the
// replicator or admin role): the tombstone stores the origin. Other options are ignored.
//
// Errors: ErrNotFound (unknown datastore), ErrUnavailable (not applied), ErrIndeterminate (may
// have been applied: call again), ErrInternal, ErrBadResponse (an answer for another row, or
// counts that do not fit), or ctx's error.
func (c *Client) EraseRow(ctx context.Context, rowKey uuid.UUID, opts ...WriteOption) (wire.EraseResult, error) {
	const op = "erase_row"
	if err := c.checkDatastore(op); err != nil {
		return wire.EraseResult{}, err
	}
	var q url.Values
	if o := writeOptionsOf(opts).origin; o != "" {
		if err := cells.ValidateClusterName("origin", o); err != nil {
			return wire.EraseResult{}, invalid(op, "", err)
		}
		q = url.Values{"origin": {o}}
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodDelete, write: true, query: q,
		path: c.dsPath("cells", rowKey.String()), ok: []int{http.StatusOK},
		routeDS: c.datastore, routeRow: rowKey,
	})
	if err != nil {
		return wire.EraseResult{}, err
	}
	var res wire.EraseResult
	if err := decode(op, ans, &res); err != nil {
		return wire.EraseResult{}, err
	}
	if !sameRow(res.RowKey, rowKey) {
		return wire.EraseResult{}, badResponse(op, ans, "result for row %s, want %s", res.RowKey, rowKey)
	}
	if res.Erased < 0 || res.AddedID < 0 || (res.Erased == 0) != (res.AddedID == 0) {
		return wire.EraseResult{}, badResponse(op, ans, "erased %d with tombstone added_id %d: want both zero or both positive", res.Erased, res.AddedID)
	}
	return res, nil
}
