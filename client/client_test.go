package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// The tests of this file and retry_test.go run against fake nodes (fake_test.go): each test has
// its own httptest servers on random ports and its own store, so most run in parallel.

// newClient returns a client of testDatastore over the nodes, with fast retries; mod adjusts
// the config first.
func newClient(t *testing.T, mod func(*client.Config), nodes ...*fakeNode) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	for _, n := range nodes {
		cfg.Endpoints = append(cfg.Endpoints, n.URL())
	}
	cfg.Datastore = testDatastore
	cfg.RequestTimeout = 2 * time.Second
	cfg.BackoffBase = time.Millisecond
	cfg.BackoffMax = 5 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	c, err := client.New(cfg)
	require.NoError(t, err, "client.New")
	return c
}

var (
	row1 = uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	row2 = uuid.MustParse("00000000-0000-4000-8000-000000000002")
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := client.DefaultConfig()
	ok.Endpoints = []string{"http://127.0.0.1:7070/", "https://node2.example:7070/prefix"}
	require.NoError(t, ok.Validate(), "Validate(valid config)")
	zero := client.Config{Endpoints: []string{"http://a:1"}}
	require.NoError(t, zero.Validate(), "Validate(zero fields take defaults)")
	cases := []struct {
		name string
		mod  func(*client.Config)
		want []string // substrings of the error, one per violation
	}{
		{"no endpoints", func(c *client.Config) { c.Endpoints = nil }, []string{"Endpoints is empty"}},
		{"bad scheme", func(c *client.Config) { c.Endpoints = []string{"ftp://a:1"} }, []string{"Endpoints[0]"}},
		{"no host", func(c *client.Config) { c.Endpoints = []string{"http://"} }, []string{"Endpoints[0]"}},
		{"query", func(c *client.Config) { c.Endpoints = []string{"http://a:1/?x=1"} }, []string{"Endpoints[0]"}},
		{"negative timeout", func(c *client.Config) { c.RequestTimeout = -1 }, []string{"RequestTimeout"}},
		{"negative attempts", func(c *client.Config) { c.MaxAttempts = -1 }, []string{"MaxAttempts"}},
		{"max below base", func(c *client.Config) { c.BackoffBase, c.BackoffMax = time.Second, time.Millisecond },
			[]string{"BackoffMax"}},
		{"consistency", func(c *client.Config) { c.Consistency = "eventual" }, []string{"Consistency"}},
		{"every violation", func(c *client.Config) {
			c.Endpoints = []string{"x", "http://ok:1", "y"}
			c.MaxAttempts = -3
			c.Consistency = "weak"
		}, []string{"Endpoints[0]", "Endpoints[2]", "MaxAttempts", "Consistency"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := ok
			tc.mod(&cfg)
			err := cfg.Validate()
			require.ErrorIs(t, err, client.ErrInvalidConfig, "Validate")
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w, "Validate: want the error to mention %q", w)
			}
			assert.Equal(t, len(tc.want), strings.Count(err.Error(), "invalid config"), "Validate: violations in %q", err)
			_, err = client.New(cfg)
			assert.ErrorIs(t, err, client.ErrInvalidConfig, "New")
		})
	}
}

// TestRequestShapes checks method, path, query and body of every call against the API table.
func TestRequestShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := newFakeNode(t, newFakeStore())
	c := newClient(t, nil, n)

	body := json.RawMessage(`{"origin":"LAX","n":1}`)
	_, err := c.PutCell(ctx, row1, "BASE", 7, body)
	require.NoError(t, err, "PutCell")
	_, err = c.PutCells(ctx, []client.CellWrite{
		{Key: cells.Key{RowKey: row2, ColumnKey: "STATUS", RefKey: 1}, Body: json.RawMessage(`{"s":"ok"}`)},
	})
	require.NoError(t, err, "PutCells")
	_, err = c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 7})
	require.NoError(t, err, "GetCell")
	_, err = c.GetCellLatest(ctx, row1, "BASE", client.WithConsistency(client.ConsistencyStale))
	require.NoError(t, err, "GetCellLatest")
	_, err = c.GetRow(ctx, row1, client.WithMaxStaleness(2*time.Second))
	require.NoError(t, err, "GetRow")
	_, err = c.GetCells(ctx, []client.GetKey{
		{RowKey: row1, ColumnKey: "BASE", RefKey: 7},
		{RowKey: row2, ColumnKey: "STATUS", Latest: true},
	}, client.WithConsistency(client.ConsistencyStale))
	require.NoError(t, err, "GetCells")
	_, err = c.ShardCells(ctx, 3, 5, 10)
	require.NoError(t, err, "ShardCells")
	_, err = c.ShardCells(ctx, 2, 0, 0)
	require.NoError(t, err, "ShardCells without limit")
	_, err = c.Cluster(ctx)
	require.NoError(t, err, "Cluster")
	require.NoError(t, c.Ready(ctx, n.URL()), "Ready")
	require.NoError(t, c.Healthy(ctx, n.URL()+"/"), "Healthy")

	r1, r2 := row1.String(), row2.String()
	want := []struct {
		method, path string
		query        url.Values
		body         string // JSON, compared as a value; "" for none
	}{
		{"PUT", "/v1/trips/cells/" + r1 + "/BASE/7", nil, `{"origin":"LAX","n":1}`},
		{"POST", "/v1/trips/cells", nil,
			`{"cells":[{"row_key":"` + r2 + `","column_key":"STATUS","ref_key":1,"body":{"s":"ok"}}]}`},
		{"GET", "/v1/trips/cells/" + r1 + "/BASE/7", url.Values{"consistency": {"strong"}}, ""},
		{"GET", "/v1/trips/cells/" + r1 + "/BASE", url.Values{"consistency": {"stale"}}, ""},
		{"GET", "/v1/trips/cells/" + r1, url.Values{"consistency": {"stale"}, "max_staleness": {"2s"}}, ""},
		{"POST", "/v1/trips/cells/get", url.Values{"consistency": {"stale"}},
			`{"keys":[{"row_key":"` + r1 + `","column_key":"BASE","ref_key":7},{"row_key":"` + r2 + `","column_key":"STATUS"}]}`},
		{"GET", "/v1/trips/shards/3/cells", url.Values{"location": {"5"}, "limit": {"10"}, "consistency": {"strong"}}, ""},
		{"GET", "/v1/trips/shards/2/cells", url.Values{"location": {"0"}, "consistency": {"strong"}}, ""},
		{"GET", "/v1/cluster", nil, ""},
		{"GET", "/readyz", nil, ""},
		{"GET", "/healthz", nil, ""},
	}
	got := n.requests()
	require.Len(t, got, len(want), "requests: %+v", got)
	for i, w := range want {
		g := got[i]
		write := w.method == "PUT" || w.path == "/v1/trips/cells"
		key := g.Header.Get("Idempotency-Key")
		assert.Equal(t, write, key != "", "request %d (%s %s): got Idempotency-Key %q, want one on writes only", i, w.method, w.path, key)
		assert.Equal(t, w.method+" "+w.path, g.Method+" "+g.Path, "request %d: method and path", i)
		q, _ := url.ParseQuery(g.RawQuery)
		if len(q) == 0 {
			q = nil
		}
		assert.Equal(t, w.query, q, "request %d (%s): query", i, w.path)
		if w.body == "" {
			assert.Empty(t, g.Body, "request %d (%s): want no body", i, w.path)
			continue
		}
		assert.JSONEq(t, w.body, string(g.Body), "request %d (%s): body", i, w.path)
		assert.Equal(t, "application/json", g.Header.Get("Content-Type"), "request %d (%s): Content-Type", i, w.path)
	}
}

func TestPutAndGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := newFakeNode(t, newFakeStore())
	c := newClient(t, nil, n)

	res, err := c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(`{"a":1}`))
	require.NoError(t, err, "PutCell new")
	require.Equal(t, wire.StatusCreated, res.Status, "PutCell new: status")
	require.NotZero(t, res.AddedID, "PutCell new: want an added_id")
	again, err := c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(` { "a" : 1 } `))
	require.NoError(t, err, "PutCell same body")
	require.Equal(t, wire.StatusExists, again.Status, "PutCell same body: status")
	require.Equal(t, res.AddedID, again.AddedID, "PutCell same body: added_id of the stored cell")
	conf, err := c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(`{"a":2}`))
	require.ErrorIs(t, err, client.ErrConflict, "PutCell other body")
	wantConf := wire.PutResult{RowKey: row1.String(), ColumnKey: "BASE", RefKey: 1, Status: wire.StatusConflict}
	assert.Equal(t, wantConf, conf, "PutCell other body: result")
	var ae *client.APIError
	if assert.ErrorAs(t, err, &ae, "PutCell other body: want an *APIError") {
		assert.Equal(t, http.StatusConflict, ae.StatusCode, "PutCell other body: status")
		assert.Equal(t, wire.CodeConflict, ae.Code, "PutCell other body: code")
		assert.Equal(t, n.URL(), ae.Endpoint, "PutCell other body: endpoint")
	}
	_, err = c.PutCell(ctx, row1, "BASE", 5, json.RawMessage(`{"a":5}`))
	require.NoError(t, err, "PutCell BASE/5")

	got, err := c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 1})
	require.NoError(t, err, "GetCell")
	require.JSONEq(t, `{"a":1}`, string(got.Body), "GetCell: body")
	require.Equal(t, res.AddedID, got.AddedID, "GetCell: added_id")
	_, err = c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 2})
	assert.ErrorIs(t, err, client.ErrNotFound, "GetCell missing")
	latest, err := c.GetCellLatest(ctx, row1, "BASE")
	assert.NoError(t, err, "GetCellLatest")
	assert.Equal(t, int64(5), latest.RefKey, "GetCellLatest: ref_key")
	_, err = c.GetCellLatest(ctx, row2, "BASE")
	assert.ErrorIs(t, err, client.ErrNotFound, "GetCellLatest missing")

	results, err := c.PutCells(ctx, []client.CellWrite{
		{Key: cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 5}, Body: json.RawMessage(`{"a":5}`)},
		{Key: cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{"a":9}`)},
		{Key: cells.Key{RowKey: row1, ColumnKey: "NOTES", RefKey: 3}, Body: json.RawMessage(`{"n":"x"}`)},
	})
	require.NoError(t, err, "PutCells")
	var statuses []string
	for _, r := range results {
		statuses = append(statuses, r.Status)
	}
	assert.Equal(t, []string{wire.StatusExists, wire.StatusConflict, wire.StatusCreated}, statuses, "PutCells: statuses")
	rs, err := c.PutCells(ctx, nil)
	assert.NoError(t, err, "PutCells(nil)")
	assert.Nil(t, rs, "PutCells(nil): results")

	rowCells, err := c.GetRow(ctx, row1)
	assert.NoError(t, err, "GetRow")
	if assert.Len(t, rowCells, 2, "GetRow: want BASE@5 and NOTES@3") {
		assert.Equal(t, int64(5), rowCells[0].RefKey, "GetRow: ref key of BASE")
		assert.Equal(t, "NOTES", rowCells[1].ColumnKey, "GetRow: second column")
	}
	empty, err := c.GetRow(ctx, row2)
	assert.NoError(t, err, "GetRow of an empty row")
	assert.NotNil(t, empty, "GetRow of an empty row: want an empty slice, not nil")
	assert.Empty(t, empty, "GetRow of an empty row")

	batch, err := c.GetCells(ctx, []client.GetKey{
		{RowKey: row1, ColumnKey: "BASE", RefKey: 1},
		{RowKey: row1, ColumnKey: "BASE", RefKey: 2},
		{RowKey: row1, ColumnKey: "NOTES", Latest: true},
	})
	require.NoError(t, err, "GetCells")
	require.Len(t, batch.Cells, 2, "GetCells: cells found")
	require.Len(t, batch.Missing, 1, "GetCells: keys missing")
	require.Equal(t, "NOTES", batch.Cells[1].ColumnKey, "GetCells: second cell")
	if m := batch.Missing[0]; assert.NotNil(t, m.RefKey, "GetCells missing: want BASE@2") {
		assert.Equal(t, "2", m.RefKey.String(), "GetCells missing: ref key")
	}

	// The shard log holds every cell written, in added_id order, paged by NextLocation.
	total := 0
	for shard := range testShards {
		var after int64
		for {
			page, err := c.ShardCells(ctx, shard, after, 1)
			require.NoError(t, err, "ShardCells(%d, %d)", shard, after)
			total += len(page.Cells)
			if len(page.Cells) == 0 {
				assert.Equal(t, after, page.NextLocation, "ShardCells(%d) empty page: next location", shard)
				break
			}
			after = page.NextLocation
		}
	}
	assert.Equal(t, 3, total, "ShardCells over all shards: cells")

	st, err := c.Cluster(ctx)
	assert.NoError(t, err, "Cluster")
	if assert.Len(t, st.Datastores, 1, "Cluster: datastores") {
		assert.Equal(t, testShards, st.Datastores[0].Shards, "Cluster: shards")
	}
}

func TestWithDatastore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := newFakeNode(t, newFakeStore())
	c := newClient(t, nil, n)
	other := c.WithDatastore("nope")
	require.Equal(t, testDatastore, c.Datastore(), "Datastore of the original")
	require.Equal(t, "nope", other.Datastore(), "Datastore of the copy")
	_, err := other.GetCellLatest(ctx, row1, "BASE")
	assert.ErrorIs(t, err, client.ErrNotFound, "unknown datastore")
	var ae *client.APIError
	if assert.ErrorAs(t, err, &ae, "unknown datastore: want an *APIError") {
		assert.Contains(t, ae.Message, "nope", "unknown datastore: the message names it")
	}
	reqs := n.requests()
	require.NotEmpty(t, reqs, "requests")
	assert.Equal(t, "/v1/nope/cells/"+row1.String()+"/BASE", reqs[0].Path, "WithDatastore path")
	_, err = c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(`{}`))
	assert.NoError(t, err, "original client after WithDatastore")
	_, err = c.WithDatastore("").GetRow(ctx, row1)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "no datastore")
}

// TestClientSideValidation checks that requests the server would reject are not sent.
func TestClientSideValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := newFakeNode(t, newFakeStore())
	c := newClient(t, nil, n)
	good := json.RawMessage(`{"a":1}`)
	calls := []struct {
		name  string
		call  func() error
		field string // the *cells.FieldError's field, "" when there is none
	}{
		{"column with a dash", func() error { _, err := c.PutCell(ctx, row1, "BAD-COL", 1, good); return err }, "column_key"},
		{"empty column", func() error { _, err := c.PutCell(ctx, row1, "", 1, good); return err }, "column_key"},
		{"long column", func() error { _, err := c.PutCell(ctx, row1, strings.Repeat("a", 65), 1, good); return err }, "column_key"},
		{"negative ref", func() error { _, err := c.PutCell(ctx, row1, "A", -1, good); return err }, "ref_key"},
		{"array body", func() error { _, err := c.PutCell(ctx, row1, "A", 1, json.RawMessage(`[1]`)); return err }, "body"},
		{"broken body", func() error { _, err := c.PutCell(ctx, row1, "A", 1, json.RawMessage(`{"a":`)); return err }, "body"},
		{"batch body", func() error {
			_, err := c.PutCells(ctx, []client.CellWrite{
				{Key: cells.Key{RowKey: row1, ColumnKey: "A", RefKey: 1}, Body: good},
				{Key: cells.Key{RowKey: row1, ColumnKey: "A", RefKey: 2}, Body: json.RawMessage(`null`)},
			})
			return err
		}, "cells[1].body"},
		{"batch column", func() error {
			_, err := c.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: row1, ColumnKey: "a b"}, Body: good}})
			return err
		}, "cells[0].column_key"},
		{"get column", func() error { _, err := c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "é"}); return err }, "column_key"},
		{"latest column", func() error { _, err := c.GetCellLatest(ctx, row1, "a/b"); return err }, "column_key"},
		{"batch get ref", func() error {
			_, err := c.GetCells(ctx, []client.GetKey{{RowKey: row1, ColumnKey: "A", RefKey: -2}})
			return err
		}, "keys[0].ref_key"},
		{"negative shard", func() error { _, err := c.ShardCells(ctx, -1, 0, 0); return err }, "shard"},
		{"consistency", func() error { _, err := c.GetRow(ctx, row1, client.WithConsistency("eventual")); return err }, ""},
		{"max staleness", func() error { _, err := c.GetRow(ctx, row1, client.WithMaxStaleness(-time.Second)); return err }, ""},
	}
	for _, tc := range calls {
		err := tc.call()
		if !assert.ErrorIs(t, err, client.ErrInvalidArgument, tc.name) || tc.field == "" {
			continue
		}
		var fe *cells.FieldError
		if assert.ErrorAs(t, err, &fe, "%s: want a *cells.FieldError", tc.name) {
			assert.Equal(t, tc.field, fe.Field, "%s: field of the error", tc.name)
		}
	}
	assert.Zero(t, n.hits.Load(), "requests sent")
}

// TestErrorMapping checks that each error answer maps to its sentinel and *APIError fields.
func TestErrorMapping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		status      int
		code, field string
		raw         string // a body that is not an wire.ErrorBody, instead of code/field
		read, write error  // the sentinel each kind of call gets
		wantCode    string
	}{
		{400, wire.CodeInvalidArgument, "cells[0].ref_key", "", client.ErrInvalidArgument, client.ErrInvalidArgument, wire.CodeInvalidArgument},
		{404, wire.CodeNotFound, "", "", client.ErrNotFound, client.ErrNotFound, wire.CodeNotFound},
		{409, wire.CodeConflict, "", "", client.ErrConflict, client.ErrConflict, wire.CodeConflict},
		{413, wire.CodeTooLarge, "cells", "", client.ErrTooLarge, client.ErrTooLarge, wire.CodeTooLarge},
		{503, wire.CodeUnavailable, "", "", client.ErrUnavailable, client.ErrUnavailable, wire.CodeUnavailable},
		{504, wire.CodeIndeterminate, "", "", client.ErrUnavailable, client.ErrIndeterminate, wire.CodeIndeterminate},
		{500, wire.CodeInternal, "", "", client.ErrInternal, client.ErrInternal, wire.CodeInternal},
		{502, "", "", "<html>bad gateway</html>", client.ErrInternal, client.ErrInternal, wire.CodeInternal},
		{404, "", "", "", client.ErrNotFound, client.ErrNotFound, wire.CodeNotFound},
		{429, "", "", "slow down", client.ErrUnavailable, client.ErrUnavailable, ""},
	}
	for _, tc := range cases {
		n := newFakeNode(t, newFakeStore())
		n.setFault(func(w http.ResponseWriter, r *http.Request) {
			if tc.raw != "" || tc.code == "" {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.raw))
				return
			}
			writeError(w, tc.status, tc.code, "because "+tc.code, tc.field)
		})
		c := newClient(t, func(c *client.Config) { c.MaxAttempts = 2 }, n)
		_, rerr := c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "A", RefKey: 1})
		_, werr := c.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: row1, ColumnKey: "A", RefKey: 1}, Body: json.RawMessage(`{}`)}})
		for _, k := range []struct {
			kind      string
			err, want error
		}{{"read", rerr, tc.read}, {"write", werr, tc.write}} {
			what := fmt.Sprintf("%d %q %s", tc.status, tc.code, k.kind)
			assert.ErrorIs(t, k.err, k.want, what)
			for _, other := range []error{client.ErrNotFound, client.ErrConflict, client.ErrInvalidArgument,
				client.ErrTooLarge, client.ErrUnavailable, client.ErrIndeterminate, client.ErrInternal} {
				if other != k.want {
					assert.NotErrorIs(t, k.err, other, "%s: want only %v", what, k.want)
				}
			}
			var ae *client.APIError
			if !assert.ErrorAs(t, k.err, &ae, "%s: want an *APIError", what) {
				continue
			}
			assert.Equal(t, tc.status, ae.StatusCode, "%s: status", what)
			assert.Equal(t, tc.wantCode, ae.Code, "%s: code", what)
			assert.Equal(t, tc.field, ae.Field, "%s: field", what)
			assert.Equal(t, n.URL(), ae.Endpoint, "%s: endpoint", what)
			if tc.raw != "" {
				assert.Contains(t, ae.Message, tc.raw, "%s: want the body in the message", what)
			}
			if tc.code != "" {
				assert.Equal(t, "because "+tc.code, ae.Message, "%s: message", what)
			}
		}
	}
}

// TestBadResponses checks that answers breaking the API contract are errors, not retried.
func TestBadResponses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	put := func(c *client.Client) error {
		_, err := c.PutCells(ctx, []client.CellWrite{
			{Key: cells.Key{RowKey: row1, ColumnKey: "A", RefKey: 1}, Body: json.RawMessage(`{}`)},
			{Key: cells.Key{RowKey: row1, ColumnKey: "A", RefKey: 2}, Body: json.RawMessage(`{}`)},
		})
		return err
	}
	result := func(ref int64, status string) wire.PutResult {
		return wire.PutResult{RowKey: row1.String(), ColumnKey: "A", RefKey: ref, Status: status, AddedID: 1}
	}
	cases := []struct {
		name   string
		status int
		body   any // JSON-encoded unless a string
		call   func(*client.Client) error
	}{
		{"one result for two cells", 200, wire.PutCellsResponse{Results: []wire.PutResult{result(1, "created")}}, put},
		{"results out of order", 200, wire.PutCellsResponse{Results: []wire.PutResult{result(2, "created"), result(1, "created")}}, put},
		{"unknown status", 200, wire.PutCellsResponse{Results: []wire.PutResult{result(1, "created"), result(2, "maybe")}}, put},
		{"not JSON", 200, "<html>", put},
		{"trailing data", 200, `{"results":[]} {}`, put},
		{"put_cell 201 says exists", 201, result(1, wire.StatusExists), func(c *client.Client) error {
			_, err := c.PutCell(ctx, row1, "A", 1, json.RawMessage(`{}`))
			return err
		}},
		{"put_cell other key", 201, result(3, wire.StatusCreated), func(c *client.Client) error {
			_, err := c.PutCell(ctx, row1, "A", 1, json.RawMessage(`{}`))
			return err
		}},
		{"get_cell other key", 200, wire.Cell{RowKey: row2.String(), ColumnKey: "A", RefKey: 1}, func(c *client.Client) error {
			_, err := c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "A", RefKey: 1})
			return err
		}},
		{"row of another row", 200, wire.CellsResponse{Cells: []wire.Cell{{RowKey: row2.String(), ColumnKey: "A"}}}, func(c *client.Client) error {
			_, err := c.GetRow(ctx, row1)
			return err
		}},
		{"batch get count", 200, wire.GetCellsResponse{}, func(c *client.Client) error {
			_, err := c.GetCells(ctx, []client.GetKey{{RowKey: row1, ColumnKey: "A", Latest: true}})
			return err
		}},
		{"shard out of order", 200, wire.ShardCellsResponse{Cells: []wire.Cell{{AddedID: 9}, {AddedID: 8}}, NextLocation: 8}, func(c *client.Client) error {
			_, err := c.ShardCells(ctx, 0, 0, 0)
			return err
		}},
		{"shard before after", 200, wire.ShardCellsResponse{Cells: []wire.Cell{{AddedID: 3}}, NextLocation: 3}, func(c *client.Client) error {
			_, err := c.ShardCells(ctx, 0, 5, 0)
			return err
		}},
		{"shard over limit", 200, wire.ShardCellsResponse{Cells: []wire.Cell{{AddedID: 6}, {AddedID: 7}}, NextLocation: 7}, func(c *client.Client) error {
			_, err := c.ShardCells(ctx, 0, 5, 1)
			return err
		}},
		{"unexpected 204", 204, "", func(c *client.Client) error {
			_, err := c.GetRow(ctx, row1)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nodes := []*fakeNode{newFakeNode(t, newFakeStore()), newFakeNode(t, newFakeStore())}
			for _, n := range nodes {
				n.setFault(func(w http.ResponseWriter, r *http.Request) {
					if s, ok := tc.body.(string); ok {
						w.WriteHeader(tc.status)
						w.Write([]byte(s))
						return
					}
					writeJSON(w, tc.status, tc.body)
				})
			}
			c := newClient(t, nil, nodes...)
			assert.ErrorIs(t, tc.call(c), client.ErrBadResponse)
			assert.Equal(t, int64(1), nodes[0].hits.Load()+nodes[1].hits.Load(), "requests (want 1: not retried)")
		})
	}
}
