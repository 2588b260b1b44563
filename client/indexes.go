package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// checkIndexName refuses an empty index name (the server judges the rest: an invalid name is
// an unknown index, ErrNotFound).
func checkIndexName(op, name string) error {
	if name == "" {
		return invalid(op, "", &cells.FieldError{Field: "index", Err: errorString("an index name is required")})
	}
	return nil
}

// checkVersion refuses a version below 1.
func checkVersion(op string, version int) error {
	if version < 1 {
		return invalid(op, "", &cells.FieldError{Field: "version", Err: errorString("must be 1 or more")})
	}
	return nil
}

// DefineIndex defines an index of the datastore (POST /v1/{ds}/indexes) from definition, its
// YAML or JSON text in the Schemaless paper's form (table, optional datastore and shard_field,
// column_defs). A new definition creates a new version of the index, which the maintainers
// build in the background (State "building"; follow it with Index); an index whose newest live
// version has an equal definition answers that version with Created false. It is retried as a
// write: defining is idempotent. Errors: ErrInvalidArgument (the definition's mistake, named in
// the *APIError's Field, such as "column_defs[0].fields[1].type"), ErrTooLarge, ErrNotFound (no
// such datastore), ErrUnavailable, ErrIndeterminate, ErrInternal, ErrBadResponse, ctx's error.
func (c *Client) DefineIndex(ctx context.Context, definition []byte) (wire.IndexDefineResult, error) {
	const op = "define_index"
	if err := c.checkDatastore(op); err != nil {
		return wire.IndexDefineResult{}, err
	}
	if len(bytes.TrimSpace(definition)) == 0 {
		return wire.IndexDefineResult{}, invalid(op, "", &cells.FieldError{Field: "definition", Err: errorString("empty")})
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodPost, body: definition, write: true,
		ok: []int{http.StatusCreated, http.StatusOK}, path: c.dsPath("indexes")})
	if err != nil {
		return wire.IndexDefineResult{}, err
	}
	var res wire.IndexDefineResult
	if err := decode(op, ans, &res); err != nil {
		return wire.IndexDefineResult{}, err
	}
	if res.Version < 1 || res.Index == "" {
		return wire.IndexDefineResult{}, badResponse(op, ans, "index %q version %d", res.Index, res.Version)
	}
	if res.Created != (ans.status == http.StatusCreated) {
		return wire.IndexDefineResult{}, badResponse(op, ans, "created %t with HTTP %d", res.Created, ans.status)
	}
	return res, nil
}

// Indexes lists the datastore's indexes (GET /v1/{ds}/indexes), sorted by name, each with its
// alias and versions: state, definition, entries, violations and the maintainers' progress and
// lag (without per-shard offsets; see Index). It is retried as a read. Errors: ErrNotFound (no
// such datastore), ErrUnavailable, ErrInternal, ErrBadResponse, ctx's error.
func (c *Client) Indexes(ctx context.Context, opts ...ReadOption) (wire.IndexesResponse, error) {
	const op = "indexes"
	if err := c.checkDatastore(op); err != nil {
		return wire.IndexesResponse{}, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.IndexesResponse{}, err
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK}, path: c.dsPath("indexes")})
	if err != nil {
		return wire.IndexesResponse{}, err
	}
	var res wire.IndexesResponse
	if err := decode(op, ans, &res); err != nil {
		return wire.IndexesResponse{}, err
	}
	if res.Indexes == nil {
		res.Indexes = []wire.IndexStatus{}
	}
	return res, nil
}

// Index reads one index (GET /v1/{ds}/indexes/{index}) as Indexes does, with each live
// version's per-shard offsets, high-water marks and lag. ErrNotFound when there is no such
// index (or datastore); other errors as Indexes.
func (c *Client) Index(ctx context.Context, name string, opts ...ReadOption) (wire.IndexStatus, error) {
	const op = "index"
	if err := c.checkDatastore(op); err != nil {
		return wire.IndexStatus{}, err
	}
	if err := checkIndexName(op, name); err != nil {
		return wire.IndexStatus{}, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.IndexStatus{}, err
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK},
		path: c.dsPath("indexes", url.PathEscape(name))})
	if err != nil {
		return wire.IndexStatus{}, err
	}
	var res wire.IndexStatus
	if err := decode(op, ans, &res); err != nil {
		return wire.IndexStatus{}, err
	}
	if res.Name != name {
		return wire.IndexStatus{}, badResponse(op, ans, "index %q, want %q", res.Name, name)
	}
	return res, nil
}

// AliasIndex points the alias of index name at version (POST /v1/{ds}/indexes/{index}/alias):
// queries that name no version use it from then on (on every node within the server's
// IndexCatalogTTL, 500ms by default). It is retried as a write (idempotent). Errors:
// ErrConflict (the version is not ready: building, or being dropped; the message names the
// state), ErrNotFound (no such index, version or datastore), ErrInvalidArgument, ErrUnavailable,
// ErrIndeterminate, ErrInternal, ErrBadResponse, ctx's error.
func (c *Client) AliasIndex(ctx context.Context, name string, version int) (wire.IndexAliasResult, error) {
	const op = "alias_index"
	if err := c.checkDatastore(op); err != nil {
		return wire.IndexAliasResult{}, err
	}
	if err := checkIndexName(op, name); err != nil {
		return wire.IndexAliasResult{}, err
	}
	if err := checkVersion(op, version); err != nil {
		return wire.IndexAliasResult{}, err
	}
	body, err := json.Marshal(wire.IndexAliasRequest{Version: version})
	if err != nil {
		return wire.IndexAliasResult{}, err
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodPost, body: body, write: true, ok: []int{http.StatusOK},
		path: c.dsPath("indexes", url.PathEscape(name), "alias")})
	if err != nil {
		return wire.IndexAliasResult{}, err
	}
	var res wire.IndexAliasResult
	if err := decode(op, ans, &res); err != nil {
		return wire.IndexAliasResult{}, err
	}
	if res.Index != name || res.Alias != version {
		return wire.IndexAliasResult{}, badResponse(op, ans, "alias of %q is %d, want %q and %d", res.Index, res.Alias, name, version)
	}
	return res, nil
}

// DropIndexVersion drops version of index name (DELETE /v1/{ds}/indexes/{index}/versions/{v}):
// its maintainers stop and its tables are deleted, at once (State "dropped") or shortly by the
// maintainers (State "dropping"). Its number is never reused. It is retried as a write
// (idempotent). Errors: ErrConflict (the version is the alias while the index has other live
// versions: alias another one first), ErrNotFound, ErrInvalidArgument, ErrUnavailable,
// ErrIndeterminate, ErrInternal, ErrBadResponse, ctx's error.
func (c *Client) DropIndexVersion(ctx context.Context, name string, version int) (wire.IndexDropResult, error) {
	const op = "drop_index_version"
	if err := c.checkDatastore(op); err != nil {
		return wire.IndexDropResult{}, err
	}
	if err := checkIndexName(op, name); err != nil {
		return wire.IndexDropResult{}, err
	}
	if err := checkVersion(op, version); err != nil {
		return wire.IndexDropResult{}, err
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodDelete, write: true, ok: []int{http.StatusOK},
		path: c.dsPath("indexes", url.PathEscape(name), "versions", strconv.Itoa(version))})
	if err != nil {
		return wire.IndexDropResult{}, err
	}
	var res wire.IndexDropResult
	if err := decode(op, ans, &res); err != nil {
		return wire.IndexDropResult{}, err
	}
	if res.Index != name || res.Version != version || (res.State != wire.IndexDropping && res.State != wire.IndexDropped) {
		return wire.IndexDropResult{}, badResponse(op, ans, "index %q version %d state %q, want %q version %d dropping or dropped",
			res.Index, res.Version, res.State, name, version)
	}
	return res, nil
}

// QueryIndex runs q on index name (POST /v1/{ds}/indexes/{index}/query) and returns one page:
// the entries in q's order, each with its projected fields (strings, json.Number, bool or nil)
// and the latest cells of q.Columns, and NextCursor for the next page (empty on the last). To
// read every page, call again with q.Cursor = NextCursor until it is empty (and q.Version = the
// answer's Version, to stay on that version if the alias moves meanwhile). The index shard that
// holds q.ShardValue answers, with Config.Consistency or that of opts. It is retried as a read.
// Errors: ErrInvalidArgument (the field or op at fault is the *APIError's Field:
// "where[1].value", "order_by", "cursor", ...), ErrNotFound (no such index, version or
// datastore), ErrConflict (the version, or the index's alias, is not ready yet), ErrTooLarge,
// ErrUnavailable, ErrInternal, ErrBadResponse, ctx's error.
func (c *Client) QueryIndex(ctx context.Context, name string, q wire.IndexQuery, opts ...ReadOption) (wire.IndexQueryResult, error) {
	const op = "query_index"
	if err := c.checkDatastore(op); err != nil {
		return wire.IndexQueryResult{}, err
	}
	if err := checkIndexName(op, name); err != nil {
		return wire.IndexQueryResult{}, err
	}
	query, err := c.readQuery(op, opts)
	if err != nil {
		return wire.IndexQueryResult{}, err
	}
	body, err := json.Marshal(q)
	if err != nil {
		return wire.IndexQueryResult{}, invalid(op, "", &cells.FieldError{Field: "body", Err: err})
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodPost, query: query, body: body, ok: []int{http.StatusOK},
		path: c.dsPath("indexes", url.PathEscape(name), "query")})
	if err != nil {
		return wire.IndexQueryResult{}, err
	}
	var res wire.IndexQueryResult
	dec := json.NewDecoder(bytes.NewReader(ans.body))
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		return wire.IndexQueryResult{}, fmt.Errorf("client: %s: %w from %s: %w", op, ErrBadResponse, ans.endpoint, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return wire.IndexQueryResult{}, badResponse(op, ans, "data after the JSON value")
	}
	if res.Index != name || (q.Version != 0 && res.Version != q.Version) {
		return wire.IndexQueryResult{}, badResponse(op, ans, "answer of index %q version %d, want %q", res.Index, res.Version, name)
	}
	if q.Limit > 0 && len(res.Entries) > q.Limit {
		return wire.IndexQueryResult{}, badResponse(op, ans, "%d entries for limit %d", len(res.Entries), q.Limit)
	}
	for i, e := range res.Entries {
		if _, err := uuid.Parse(e.RowKey); err != nil {
			return wire.IndexQueryResult{}, badResponse(op, ans, "entries[%d] has row key %q", i, e.RowKey)
		}
		for col, cell := range e.Cells {
			if cell.RowKey != e.RowKey || cell.ColumnKey != col {
				return wire.IndexQueryResult{}, badResponse(op, ans, "entries[%d].cells[%s] is %s/%s", i, col, cell.RowKey, cell.ColumnKey)
			}
		}
	}
	if res.Entries == nil {
		res.Entries = []wire.IndexEntry{}
	}
	return res, nil
}

// WaitIndexVersion reads version of index name (Index, strong) every poll until it is ready,
// and returns its status then. progress, when not nil, is called with each status read, from
// WaitIndexVersion's goroutine. A read that finds no leader (ErrUnavailable) is tried again at
// the next poll. It fails when the index has no such version, when the version is dropping or
// dropped, on another failed read, or with ctx's error.
func (c *Client) WaitIndexVersion(ctx context.Context, name string, version int, poll time.Duration,
	progress func(wire.IndexVersionStatus)) (wire.IndexVersionStatus, error) {
	for {
		st, err := c.Index(ctx, name, WithConsistency(ConsistencyStrong))
		if err != nil && !errors.Is(err, ErrUnavailable) {
			return wire.IndexVersionStatus{}, err
		}
		if err == nil {
			i := slices.IndexFunc(st.Versions, func(v wire.IndexVersionStatus) bool { return v.Version == version })
			if i < 0 {
				return wire.IndexVersionStatus{}, fmt.Errorf("client: index %s has no version %d: %w", name, version, ErrNotFound)
			}
			v := st.Versions[i]
			if v.State == wire.IndexDropping || v.State == wire.IndexDropped {
				return v, fmt.Errorf("client: index %s version %d is %s", name, version, v.State)
			}
			if progress != nil {
				progress(v)
			}
			if v.State == wire.IndexReady {
				return v, nil
			}
		}
		select {
		case <-ctx.Done():
			return wire.IndexVersionStatus{}, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// QueryIndexPages runs QueryIndex for q and then, while fn returns true and the page has a
// NextCursor, for the next pages, each read from the version that answered the first (a cursor
// belongs to its version's order, so the pages hold together even if the alias moves
// meanwhile). fn gets every page in order, from QueryIndexPages' goroutine. It returns the
// NextCursor of the last page read ("" when that was the last page), or the first error of
// QueryIndex (an *APIError names the query's field at fault) or of fn.
func (c *Client) QueryIndexPages(ctx context.Context, name string, q wire.IndexQuery,
	fn func(wire.IndexQueryResult) (more bool, err error), opts ...ReadOption) (string, error) {
	for {
		res, err := c.QueryIndex(ctx, name, q, opts...)
		if err != nil {
			return "", err
		}
		more, err := fn(res)
		if err != nil {
			return "", err
		}
		if !more || res.NextCursor == "" {
			return res.NextCursor, nil
		}
		q.Cursor, q.Version = res.NextCursor, res.Version
	}
}
