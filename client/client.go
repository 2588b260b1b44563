package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// Client talks to a cluster over the HTTP API, addressing one datastore. It is safe for
// concurrent use by any number of goroutines; it holds no lock while waiting on the network.
// Every call blocks until it has an answer, its attempts are exhausted (Config.MaxAttempts) or
// ctx is done.
type Client struct {
	cfg       Config // defaults filled in
	datastore string
	eps       *endpoints
}

// New returns a Client for cfg, with every zero field of cfg set to its default. It returns
// the errors of cfg.Validate, wrapping ErrInvalidConfig. It does no I/O: an unreachable
// cluster shows on the first call.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	eps := &endpoints{
		urls:      make([]string, len(cfg.Endpoints)),
		http:      cfg.HTTPClient,
		downUntil: make([]atomic.Int64, len(cfg.Endpoints)),
	}
	for i, e := range cfg.Endpoints {
		eps.urls[i], _ = normalizeEndpoint(e) // checked by Validate
	}
	cfg.Endpoints = slices.Clone(eps.urls)
	if !cfg.NoLeaderRouting {
		eps.routes = newLeaderRoutes(eps.urls)
	}
	if eps.http == nil {
		t := NewTransport(cfg.TLS)
		t.MaxIdleConnsPerHost = 64
		eps.http = &http.Client{Transport: t}
	}
	return &Client{cfg: cfg, datastore: cfg.Datastore, eps: eps}, nil
}

// NewTransport returns the HTTP transport New builds when Config.HTTPClient is nil: a clone of
// http.DefaultTransport (proxy from the environment, keep-alive, its timeouts) trusting tlsCfg
// (a clone; nil: the system's roots) and speaking HTTP/1.1 only, also over TLS. Over TLS Go
// would otherwise negotiate HTTP/2, which multiplexes every request to a node over one
// connection: measured against HTTP/1.1 with the same TLS, get_cell_latest ran at about a
// third of the rate with 40-60% more CPU per read (BENCHMARKS.md, issue 19). Programs that set
// their own HTTPClient can start from it.
func NewTransport(tlsCfg *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		t.TLSClientConfig = tlsCfg.Clone()
	}
	var p http.Protocols
	p.SetHTTP1(true)
	t.Protocols = &p
	return t
}

// WithDatastore returns a Client for the datastore name that shares c's endpoints, transport,
// rotation and cool-downs. It is cheap (no I/O, no new connections); c is unchanged.
func (c *Client) WithDatastore(name string) *Client {
	cp := *c
	cp.datastore = name
	cp.cfg.Datastore = name
	return &cp
}

// Datastore returns the name of the datastore that c addresses.
func (c *Client) Datastore() string { return c.datastore }

// Endpoints returns a copy of c's endpoint base URLs, without trailing slashes.
func (c *Client) Endpoints() []string { return slices.Clone(c.eps.urls) }

// ReadOption adjusts one read call.
type ReadOption func(*readOptions)

type readOptions struct {
	consistency  string
	maxStaleness time.Duration
}

// WithMaxStaleness makes a read stale and bounded (?consistency=stale&max_staleness=d): the
// node answers from a replica whose data reflects every write acknowledged before d ago (a
// follower or learner that heard from its leader within d, else the leader), or refuses with
// ErrUnavailable when none can within the bound. d must be above 0 and at most an hour; another
// value makes the call fail with ErrInvalidArgument, unsent.
func WithMaxStaleness(d time.Duration) ReadOption {
	return func(o *readOptions) { o.consistency, o.maxStaleness = ConsistencyStale, d }
}

// WithConsistency makes a read use level (ConsistencyStrong or ConsistencyStale) instead of
// Config.Consistency. Another value makes the call fail with ErrInvalidArgument, unsent.
func WithConsistency(level string) ReadOption {
	return func(o *readOptions) { o.consistency = level }
}

// readQuery returns the query of a read with options opts, or an ErrInvalidArgument error.
func (c *Client) readQuery(op string, opts []ReadOption) (url.Values, error) {
	o := readOptions{consistency: c.cfg.Consistency}
	for _, opt := range opts {
		opt(&o)
	}
	if err := validateConsistency(o.consistency); err != nil {
		return nil, fmt.Errorf("client: %s: %w", op, err)
	}
	q := url.Values{"consistency": {o.consistency}}
	if o.maxStaleness != 0 {
		if o.maxStaleness < 0 || o.maxStaleness > time.Hour {
			return nil, fmt.Errorf("client: %s: %w: max staleness %s: want above 0 and at most 1h", op, ErrInvalidArgument, o.maxStaleness)
		}
		q.Set("max_staleness", o.maxStaleness.String())
	}
	return q, nil
}

// routeStrong makes a strong read of row r go first to the row's leader (leader routing): a
// strong read is served by the leader; a stale one by whichever node it reaches.
func (c *Client) routeStrong(r *request, row uuid.UUID) {
	if r.query.Get("consistency") == ConsistencyStrong {
		r.routeDS, r.routeRow = c.datastore, row
	}
}

// CellWrite is one cell to write with PutCells: its key and its body, a JSON object.
type CellWrite struct {
	Key  cells.Key
	Body json.RawMessage
}

// GetKey names one cell to read with GetCells: the cell with RefKey, or, when Latest is set, the
// cell of the column with the highest ref key (RefKey is then ignored).
type GetKey struct {
	RowKey    uuid.UUID
	ColumnKey string
	RefKey    int64
	Latest    bool
}

// invalid returns the error of a request that the client refuses to send: ErrInvalidArgument
// and the *cells.FieldError, its field prefixed with prefix.
func invalid(op, prefix string, err error) error {
	if fe, ok := err.(*cells.FieldError); ok && prefix != "" {
		err = &cells.FieldError{Field: prefix + fe.Field, Err: fe.Err}
	}
	return fmt.Errorf("client: %s: %w: %w", op, ErrInvalidArgument, err)
}

// checkBody checks that body is one JSON object (surrounding white space allowed).
func checkBody(body json.RawMessage) error {
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return &cells.FieldError{Field: "body", Err: cells.ErrInvalidBody}
	}
	return nil
}

func (c *Client) checkDatastore(op string) error {
	if c.datastore == "" {
		return fmt.Errorf("client: %s: %w: no datastore (see Config.Datastore, WithDatastore)", op, ErrInvalidArgument)
	}
	return nil
}

// dsPath returns "/v1/{datastore}" followed by the elements, each preceded by "/". Elements are
// row keys, validated column keys and integers: nothing to escape.
func (c *Client) dsPath(elems ...string) string {
	p := "/v1/" + url.PathEscape(c.datastore)
	for _, e := range elems {
		p += "/" + e
	}
	return p
}

// decode decodes one JSON value from an answer into v, rejecting trailing data.
func decode(op string, ans answer, v any) error {
	dec := json.NewDecoder(bytes.NewReader(ans.body))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("client: %s: %w from %s: %w", op, ErrBadResponse, ans.endpoint, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("client: %s: %w from %s: data after the JSON value", op, ErrBadResponse, ans.endpoint)
	}
	return nil
}

func badResponse(op string, ans answer, format string, args ...any) error {
	return fmt.Errorf("client: %s: %w from %s: %s", op, ErrBadResponse, ans.endpoint, fmt.Sprintf(format, args...))
}

// sameRow reports whether the wire row key s names row.
func sameRow(s string, row uuid.UUID) bool {
	u, err := uuid.Parse(s)
	return err == nil && u == row
}

// PutCell writes the cell (rowKey, columnKey, refKey) with body, a JSON object, through
// PUT /v1/{ds}/cells/{row_key}/{column_key}/{ref_key}. It blocks until a node answers for
// good, the attempts are exhausted or ctx is done; it is retried as a write (see the package
// documentation).
//
// On success the result's Status is wire.StatusCreated (201) or wire.StatusExists (200: the same
// body was already stored before this call), and AddedID is the stored cell's position in its
// shard's log. Every call sends an idempotency key (opts' IdempotencyKey, or a random one), so
// a retry of the call answers the outcome of the attempt that stored the cell (created). With
// IfLatestRefKey or IfNoCell the write is conditional; a refusal returns a *PreconditionError
// (ErrPreconditionFailed) and a zero result, and nothing is written. An async-mode datastore whose primary master is
// down answers wire.StatusBuffered (202, AddedID 0): the write is durable in a buffer on
// another cluster and becomes readable once the reaper replays it.
//
// When a cell with another body is stored, PutCell returns a result with Status
// wire.StatusConflict, the key filled in and AddedID 0 (the 409 answer does not carry it), and
// an error wrapping ErrConflict (an *APIError). Other errors come with a zero result:
// ErrInvalidArgument (unsent when the client sees it: bad column key, negative ref key, body not
// a JSON object), ErrTooLarge, ErrNotFound (unknown datastore), ErrUnavailable (not applied),
// ErrIndeterminate (may have been applied), ErrPreconditionFailed, ErrKeyReused, ErrInternal,
// ErrBadResponse, or ctx's error.
func (c *Client) PutCell(ctx context.Context, rowKey uuid.UUID, columnKey string, refKey int64,
	body json.RawMessage, opts ...WriteOption) (wire.PutResult, error) {
	const op = "put_cell"
	if err := c.checkDatastore(op); err != nil {
		return wire.PutResult{}, err
	}
	key := cells.Key{RowKey: rowKey, ColumnKey: columnKey, RefKey: refKey}
	if err := key.Validate(); err != nil {
		return wire.PutResult{}, invalid(op, "", err)
	}
	if err := checkBody(body); err != nil {
		return wire.PutResult{}, invalid(op, "", err)
	}
	wo := writeOptionsOf(opts)
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodPut, write: true,
		path:  c.dsPath("cells", rowKey.String(), columnKey, strconv.FormatInt(refKey, 10)),
		query: wo.query(), idempotencyKey: wo.key,
		body: body, ok: []int{http.StatusCreated, http.StatusOK, http.StatusAccepted},
		routeDS: c.datastore, routeRow: rowKey,
	})
	if err != nil {
		err = asPrecondition(err)
		if isConflict(err) {
			return wire.PutResult{RowKey: rowKey.String(), ColumnKey: columnKey, RefKey: refKey,
				Status: wire.StatusConflict}, err
		}
		return wire.PutResult{}, err
	}
	var res wire.PutResult
	if err := decode(op, ans, &res); err != nil {
		return wire.PutResult{}, err
	}
	if !sameRow(res.RowKey, rowKey) || res.ColumnKey != columnKey || res.RefKey != refKey {
		return wire.PutResult{}, badResponse(op, ans, "result for %s/%s/%d, want %s", res.RowKey,
			res.ColumnKey, res.RefKey, key)
	}
	want := wire.StatusExists
	switch ans.status {
	case http.StatusCreated:
		want = wire.StatusCreated
	case http.StatusAccepted:
		want = wire.StatusBuffered
	}
	if res.Status != want {
		return wire.PutResult{}, badResponse(op, ans, "status %q with HTTP %d, want %q", res.Status,
			ans.status, want)
	}
	return res, nil
}

// isConflict reports whether err is a conflict answer (and not, say, an indeterminate write).
func isConflict(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Unwrap() == ErrConflict
}

// PutCells writes cells in one request (POST /v1/{ds}/cells) and returns one result per cell of
// cs, in order. It blocks like PutCell and is retried as a write.
//
// A conflict is per cell: that result's Status is wire.StatusConflict and the call's error is
// nil; other cells of the batch are written. A retry of the call answers the outcome of the
// attempt that applied it (each partition's share is recorded under the call's idempotency key:
// opts' IdempotencyKey, or a random one). In async mode a cell may report wire.StatusBuffered
// (see PutCell).
//
// Errors concern the whole batch, with a nil slice: ErrInvalidArgument (Field names the cell,
// as "cells[3].ref_key"; unsent when the client sees it), ErrTooLarge, ErrNotFound,
// ErrUnavailable (nothing applied), ErrIndeterminate (any cell may have been applied),
// ErrInternal, ErrBadResponse (a result count, key or status that does not match the request:
// the batch was most likely applied), or ctx's error. An empty cs returns (nil, nil) with no
// request. PutCells does not modify cs.
func (c *Client) PutCells(ctx context.Context, cs []CellWrite, opts ...WriteOption) ([]wire.PutResult, error) {
	const op = "put_cells"
	if err := c.checkDatastore(op); err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, nil
	}
	wo := writeOptionsOf(opts)
	req := wire.PutCellsRequest{Cells: make([]wire.PutCell, len(cs)), Origin: wo.origin, Order: wo.order}
	if wo.origin != "" {
		if err := cells.ValidateClusterName("origin", wo.origin); err != nil {
			return nil, invalid(op, "", err)
		}
	}
	if o := wo.order; o != nil && (wo.origin == "" || o.Stream == "" || len(o.Stream) > 64 || o.Seq <= 0 || o.After < 0 || o.After >= o.Seq) {
		return nil, invalid(op, "", &cells.FieldError{Field: "order", Err: fmt.Errorf("want an origin, a stream of 1 to 64 bytes, seq > 0 and 0 <= after < seq (got %+v)", *o)})
	}
	for i, cw := range cs {
		prefix := fmt.Sprintf("cells[%d].", i)
		if err := cw.Key.Validate(); err != nil {
			return nil, invalid(op, prefix, err)
		}
		if err := checkBody(cw.Body); err != nil {
			return nil, invalid(op, prefix, err)
		}
		req.Cells[i] = wire.PutCell{
			RowKey:    cw.Key.RowKey.String(),
			ColumnKey: cw.Key.ColumnKey,
			RefKey:    json.Number(strconv.FormatInt(cw.Key.RefKey, 10)),
			Body:      cw.Body,
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s: encode request: %w", op, err)
	}
	r := &request{
		op: op, method: http.MethodPost, write: true, path: c.dsPath("cells"),
		body: body, ok: []int{http.StatusOK}, idempotencyKey: wo.key,
	}
	if wo.order != nil {
		r.sticky = c.datastore + "/" + wo.order.Stream // the stream's requests to one node
	}
	ans, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	var resp wire.PutCellsResponse
	if err := decode(op, ans, &resp); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(cs) {
		return nil, badResponse(op, ans, "%d results for %d cells", len(resp.Results), len(cs))
	}
	for i, r := range resp.Results {
		k := cs[i].Key
		if !sameRow(r.RowKey, k.RowKey) || r.ColumnKey != k.ColumnKey || r.RefKey != k.RefKey {
			return nil, badResponse(op, ans, "results[%d] is for %s/%s/%d, want %s", i, r.RowKey,
				r.ColumnKey, r.RefKey, k)
		}
		switch r.Status {
		case wire.StatusCreated, wire.StatusExists, wire.StatusConflict, wire.StatusBuffered:
		default:
			return nil, badResponse(op, ans, "results[%d] has unknown status %q", i, r.Status)
		}
	}
	return resp.Results, nil
}

// GetCell reads the cell at key (GET /v1/{ds}/cells/{row_key}/{column_key}/{ref_key}) with
// Config.Consistency or the consistency of opts. It blocks until a node answers, the attempts
// are exhausted or ctx is done; it is retried as a read. Errors: ErrNotFound (no such cell or
// datastore), ErrInvalidArgument (unsent when the client sees it), ErrUnavailable,
// ErrInternal, ErrBadResponse (including a cell whose key is not key), or ctx's error.
func (c *Client) GetCell(ctx context.Context, key cells.Key, opts ...ReadOption) (wire.Cell, error) {
	const op = "get_cell"
	if err := c.checkDatastore(op); err != nil {
		return wire.Cell{}, err
	}
	if err := key.Validate(); err != nil {
		return wire.Cell{}, invalid(op, "", err)
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.Cell{}, err
	}
	req := &request{
		op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK},
		path: c.dsPath("cells", key.RowKey.String(), key.ColumnKey, strconv.FormatInt(key.RefKey, 10)),
	}
	c.routeStrong(req, key.RowKey)
	ans, err := c.do(ctx, req)
	if err != nil {
		return wire.Cell{}, err
	}
	var cell wire.Cell
	if err := decode(op, ans, &cell); err != nil {
		return wire.Cell{}, err
	}
	if !sameRow(cell.RowKey, key.RowKey) || cell.ColumnKey != key.ColumnKey || cell.RefKey != key.RefKey {
		return wire.Cell{}, badResponse(op, ans, "cell %s/%s/%d, want %s", cell.RowKey, cell.ColumnKey,
			cell.RefKey, key)
	}
	return cell, nil
}

// GetCellLatest reads the cell of (rowKey, columnKey) with the highest ref key
// (GET /v1/{ds}/cells/{row_key}/{column_key}). It blocks, retries and fails like GetCell;
// ErrNotFound means the column has no cell in that row.
func (c *Client) GetCellLatest(ctx context.Context, rowKey uuid.UUID, columnKey string,
	opts ...ReadOption) (wire.Cell, error) {
	const op = "get_cell_latest"
	if err := c.checkDatastore(op); err != nil {
		return wire.Cell{}, err
	}
	if err := cells.ValidateColumnKey(columnKey); err != nil {
		return wire.Cell{}, invalid(op, "", err)
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.Cell{}, err
	}
	req := &request{
		op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK},
		path: c.dsPath("cells", rowKey.String(), columnKey),
	}
	c.routeStrong(req, rowKey)
	ans, err := c.do(ctx, req)
	if err != nil {
		return wire.Cell{}, err
	}
	var cell wire.Cell
	if err := decode(op, ans, &cell); err != nil {
		return wire.Cell{}, err
	}
	if !sameRow(cell.RowKey, rowKey) || cell.ColumnKey != columnKey {
		return wire.Cell{}, badResponse(op, ans, "cell %s/%s/%d, want column %s/%s", cell.RowKey,
			cell.ColumnKey, cell.RefKey, rowKey, columnKey)
	}
	return cell, nil
}

// VersionsPage is one page of a column's versions (GetVersions): its cells in the order asked,
// and Next, the from ref key of the next page (nil when this page is the last).
type VersionsPage struct {
	Cells []wire.Cell
	Next  *int64
}

// GetVersions reads a page of the versions of column columnKey of rowKey (GET
// /v1/{ds}/cells/{row_key}/{column_key}/versions): at most limit cells (0: the server's
// default) in ref key order, ascending from ref key from (inclusive; nil: the lowest) or, with
// desc, descending from from (nil: the highest). Read the next page with from = page.Next. It
// blocks, retries and fails like GetCell; ErrBadResponse includes a cell of another row or
// column, or out of the order asked.
func (c *Client) GetVersions(ctx context.Context, rowKey uuid.UUID, columnKey string, from *int64, limit int, desc bool, opts ...ReadOption) (VersionsPage, error) {
	const op = "get_versions"
	if err := c.checkDatastore(op); err != nil {
		return VersionsPage{}, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return VersionsPage{}, err
	}
	if from != nil {
		q.Set("from_ref_key", strconv.FormatInt(*from, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if desc {
		q.Set("order", "desc")
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK},
		path: c.dsPath("cells", rowKey.String(), columnKey, "versions"),
	})
	if err != nil {
		return VersionsPage{}, err
	}
	var resp wire.VersionsResponse
	if err := decode(op, ans, &resp); err != nil {
		return VersionsPage{}, err
	}
	for i, cell := range resp.Cells {
		if !sameRow(cell.RowKey, rowKey) || cell.ColumnKey != columnKey {
			return VersionsPage{}, badResponse(op, ans, "cells[%d] is %s/%s, want %s/%s", i, cell.RowKey, cell.ColumnKey, rowKey, columnKey)
		}
		if i > 0 && (cell.RefKey > resp.Cells[i-1].RefKey) == desc {
			return VersionsPage{}, badResponse(op, ans, "cells[%d] ref key %d out of order after %d", i, cell.RefKey, resp.Cells[i-1].RefKey)
		}
	}
	if resp.Cells == nil {
		resp.Cells = []wire.Cell{}
	}
	return VersionsPage{Cells: resp.Cells, Next: resp.NextRefKey}, nil
}

// GetRow reads the latest cell of every column of rowKey (GET /v1/{ds}/cells/{row_key}), in
// the server's order (by column key). A row with no cell gives an empty slice and a nil error.
// It blocks, retries and fails like GetCell; ErrBadResponse includes a cell of another row.
func (c *Client) GetRow(ctx context.Context, rowKey uuid.UUID, opts ...ReadOption) ([]wire.Cell, error) {
	const op = "get_row"
	if err := c.checkDatastore(op); err != nil {
		return nil, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return nil, err
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK},
		path: c.dsPath("cells", rowKey.String()),
	})
	if err != nil {
		return nil, err
	}
	var resp wire.CellsResponse
	if err := decode(op, ans, &resp); err != nil {
		return nil, err
	}
	for i, cell := range resp.Cells {
		if !sameRow(cell.RowKey, rowKey) {
			return nil, badResponse(op, ans, "cells[%d] has row key %s, want %s", i, cell.RowKey, rowKey)
		}
	}
	if resp.Cells == nil {
		resp.Cells = []wire.Cell{}
	}
	return resp.Cells, nil
}

// GetCells reads many cells in one request (POST /v1/{ds}/cells/get): the cells found, in the
// order of keys, the keys not found, as the server echoes them, and how each partition was read
// (Snapshots: the keys of one partition in one snapshot at a raft index; see docs/api.md). Every
// key is in exactly one of the first two. It blocks, retries (as a read) and fails like GetCell;
// a missing cell is not an error. An empty keys returns an empty response with no request.
func (c *Client) GetCells(ctx context.Context, keys []GetKey, opts ...ReadOption) (wire.GetCellsResponse, error) {
	const op = "get_cells"
	if err := c.checkDatastore(op); err != nil {
		return wire.GetCellsResponse{}, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.GetCellsResponse{}, err
	}
	if len(keys) == 0 {
		return wire.GetCellsResponse{Cells: []wire.Cell{}, Missing: []wire.GetKey{}, Snapshots: []wire.Snapshot{}}, nil
	}
	req := wire.GetCellsRequest{Keys: make([]wire.GetKey, len(keys))}
	for i, k := range keys {
		prefix := fmt.Sprintf("keys[%d].", i)
		if err := cells.ValidateColumnKey(k.ColumnKey); err != nil {
			return wire.GetCellsResponse{}, invalid(op, prefix, err)
		}
		req.Keys[i] = wire.GetKey{RowKey: k.RowKey.String(), ColumnKey: k.ColumnKey}
		if !k.Latest {
			if k.RefKey < 0 {
				return wire.GetCellsResponse{}, invalid(op, prefix,
					&cells.FieldError{Field: "ref_key", Err: cells.ErrInvalidRefKey})
			}
			n := json.Number(strconv.FormatInt(k.RefKey, 10))
			req.Keys[i].RefKey = &n
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return wire.GetCellsResponse{}, fmt.Errorf("client: %s: encode request: %w", op, err)
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodPost, query: q, body: body, ok: []int{http.StatusOK},
		path: c.dsPath("cells", "get"),
	})
	if err != nil {
		return wire.GetCellsResponse{}, err
	}
	var resp wire.GetCellsResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.GetCellsResponse{}, err
	}
	if n := len(resp.Cells) + len(resp.Missing); n != len(keys) {
		return wire.GetCellsResponse{}, badResponse(op, ans, "%d cells and %d missing for %d keys",
			len(resp.Cells), len(resp.Missing), len(keys))
	}
	if resp.Cells == nil {
		resp.Cells = []wire.Cell{}
	}
	if resp.Missing == nil {
		resp.Missing = []wire.GetKey{}
	}
	return resp, nil
}

// Cluster returns the cluster as the first node to answer sees it (GET /v1/cluster). It is
// retried as a read. Errors: ErrUnavailable, ErrInternal, ErrBadResponse, or ctx's error.
func (c *Client) Cluster(ctx context.Context) (wire.ClusterStatus, error) {
	const op = "cluster"
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, path: "/v1/cluster", ok: []int{http.StatusOK}})
	if err != nil {
		return wire.ClusterStatus{}, err
	}
	var st wire.ClusterStatus
	if err := decode(op, ans, &st); err != nil {
		return wire.ClusterStatus{}, err
	}
	return st, nil
}

// ClusterAt asks the node at endpoint (a base URL, one of Config.Endpoints or not) alone for
// its view of the cluster (GET /v1/cluster): one attempt, bounded by RequestTimeout and ctx,
// no failover, as Ready. It fails like Ready, and with ErrBadResponse for an undecodable answer.
func (c *Client) ClusterAt(ctx context.Context, endpoint string) (wire.ClusterStatus, error) {
	const op = "cluster"
	base, err := normalizeEndpoint(endpoint)
	if err != nil {
		return wire.ClusterStatus{}, fmt.Errorf("client: %s: %w: %w", op, ErrInvalidConfig, err)
	}
	res := c.attempt(ctx, base, &request{op: op, method: http.MethodGet, path: "/v1/cluster", ok: []int{http.StatusOK}})
	if res.err != nil {
		if err := ctx.Err(); err != nil {
			return wire.ClusterStatus{}, fmt.Errorf("client: %s: %w", op, err)
		}
		return wire.ClusterStatus{}, fmt.Errorf("client: %s: %w", op, res.err)
	}
	var st wire.ClusterStatus
	if err := decode(op, res.ans, &st); err != nil {
		return wire.ClusterStatus{}, err
	}
	return st, nil
}

// Ready asks the node at endpoint (a base URL, one of Config.Endpoints or not) whether it is
// ready to serve (GET /readyz). It makes exactly one attempt, bounded by RequestTimeout and
// ctx, and does not touch the cool-downs. It returns nil for a 200 answer; an *APIError for
// another status (a 503 wraps ErrUnavailable); an error wrapping ErrUnavailable when the node
// cannot be reached; ErrInvalidConfig for a malformed endpoint; or ctx's error.
func (c *Client) Ready(ctx context.Context, endpoint string) error {
	return c.probe(ctx, endpoint, "readyz", "/readyz")
}

// DatastoreReady asks the node at endpoint whether datastore ds is ready there (GET
// /readyz?datastore=ds): its partitions on that node know their leaders and, in async mode,
// every storage cluster of it has a master. A node can be Ready while one of its datastores
// is not. It behaves like Ready; an unknown datastore is an *APIError with status 404.
func (c *Client) DatastoreReady(ctx context.Context, endpoint, ds string) error {
	return c.probe(ctx, endpoint, "readyz", "/readyz?datastore="+url.QueryEscape(ds))
}

// Healthy asks the node at endpoint whether its process is alive (GET /healthz). It behaves
// like Ready.
func (c *Client) Healthy(ctx context.Context, endpoint string) error {
	return c.probe(ctx, endpoint, "healthz", "/healthz")
}

func (c *Client) probe(ctx context.Context, endpoint, name, path string) error {
	base, err := normalizeEndpoint(endpoint)
	if err != nil {
		return fmt.Errorf("client: %s: %w: %w", name, ErrInvalidConfig, err)
	}
	res := c.attempt(ctx, base, &request{op: name, method: http.MethodGet, path: path, ok: []int{http.StatusOK}})
	if res.err == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("client: %s: %w", name, err)
	}
	return fmt.Errorf("client: %s: %w", name, res.err)
}

var errNegative = errorString("must not be negative")

// errorString is a constant error for field reasons that have no sentinel of their own.
type errorString string

func (e errorString) Error() string { return string(e) }
