package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
)

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
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	return c
}

var (
	row1 = uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	row2 = uuid.MustParse("00000000-0000-4000-8000-000000000002")
)

func TestConfigValidate(t *testing.T) {
	ok := client.DefaultConfig()
	ok.Endpoints = []string{"http://127.0.0.1:7070/", "https://node2.example:7070/prefix"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(valid config): got %v, want nil", err)
	}
	zero := client.Config{Endpoints: []string{"http://a:1"}}
	if err := zero.Validate(); err != nil {
		t.Fatalf("Validate(zero fields take defaults): got %v, want nil", err)
	}
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
			cfg := ok
			tc.mod(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, client.ErrInvalidConfig) {
				t.Fatalf("Validate: got %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: got %q, want it to mention %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "invalid config"); got != len(tc.want) {
				t.Errorf("Validate: got %d violations in %q, want %d", got, err, len(tc.want))
			}
			if _, err := client.New(cfg); !errors.Is(err, client.ErrInvalidConfig) {
				t.Errorf("New: got %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestRequestShapes checks method, path, query and body of every call against the API table.
func TestRequestShapes(t *testing.T) {
	ctx := context.Background()
	n := newFakeNode(t, newFakeStore())
	c := newClient(t, nil, n)

	body := json.RawMessage(`{"origin":"LAX","n":1}`)
	if _, err := c.PutCell(ctx, row1, "BASE", 7, body); err != nil {
		t.Fatalf("PutCell: %v", err)
	}
	if _, err := c.PutCells(ctx, []client.CellWrite{
		{Key: cells.Key{RowKey: row2, ColumnKey: "STATUS", RefKey: 1}, Body: json.RawMessage(`{"s":"ok"}`)},
	}); err != nil {
		t.Fatalf("PutCells: %v", err)
	}
	if _, err := c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 7}); err != nil {
		t.Fatalf("GetCell: %v", err)
	}
	if _, err := c.GetCellLatest(ctx, row1, "BASE", client.WithConsistency(client.ConsistencyStale)); err != nil {
		t.Fatalf("GetCellLatest: %v", err)
	}
	if _, err := c.GetRow(ctx, row1); err != nil {
		t.Fatalf("GetRow: %v", err)
	}
	if _, err := c.GetCells(ctx, []client.GetKey{
		{RowKey: row1, ColumnKey: "BASE", RefKey: 7},
		{RowKey: row2, ColumnKey: "STATUS", Latest: true},
	}, client.WithConsistency(client.ConsistencyStale)); err != nil {
		t.Fatalf("GetCells: %v", err)
	}
	if _, err := c.ShardCells(ctx, 3, 5, 10); err != nil {
		t.Fatalf("ShardCells: %v", err)
	}
	if _, err := c.ShardCells(ctx, 2, 0, 0); err != nil {
		t.Fatalf("ShardCells without limit: %v", err)
	}
	if _, err := c.Cluster(ctx); err != nil {
		t.Fatalf("Cluster: %v", err)
	}
	if err := c.Ready(ctx, n.URL()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if err := c.Healthy(ctx, n.URL()+"/"); err != nil {
		t.Fatalf("Healthy: %v", err)
	}

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
		{"GET", "/v1/trips/cells/" + r1, url.Values{"consistency": {"strong"}}, ""},
		{"POST", "/v1/trips/cells/get", url.Values{"consistency": {"stale"}},
			`{"keys":[{"row_key":"` + r1 + `","column_key":"BASE","ref_key":7},{"row_key":"` + r2 + `","column_key":"STATUS"}]}`},
		{"GET", "/v1/trips/shards/3/cells", url.Values{"location": {"5"}, "limit": {"10"}, "consistency": {"strong"}}, ""},
		{"GET", "/v1/trips/shards/2/cells", url.Values{"location": {"0"}, "consistency": {"strong"}}, ""},
		{"GET", "/v1/cluster", nil, ""},
		{"GET", "/readyz", nil, ""},
		{"GET", "/healthz", nil, ""},
	}
	got := n.requests()
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		write := w.method == "PUT" || w.path == "/v1/trips/cells"
		if key := g.Header.Get("Idempotency-Key"); (key != "") != write {
			t.Errorf("request %d (%s %s): got Idempotency-Key %q, want one on writes only", i, w.method, w.path, key)
		}
		if g.Method != w.method || g.Path != w.path {
			t.Errorf("request %d: got %s %s, want %s %s", i, g.Method, g.Path, w.method, w.path)
		}
		q, _ := url.ParseQuery(g.RawQuery)
		if len(q) == 0 {
			q = nil
		}
		if !reflect.DeepEqual(q, w.query) {
			t.Errorf("request %d (%s): got query %v, want %v", i, w.path, q, w.query)
		}
		if w.body == "" {
			if len(g.Body) != 0 {
				t.Errorf("request %d (%s): got body %s, want none", i, w.path, g.Body)
			}
			continue
		}
		if !jsonEqual(t, g.Body, []byte(w.body)) {
			t.Errorf("request %d (%s): got body %s, want %s", i, w.path, g.Body, w.body)
		}
		if ct := g.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("request %d (%s): got Content-Type %q, want application/json", i, w.path, ct)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Errorf("bad JSON %s: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestPutAndGet(t *testing.T) {
	ctx := context.Background()
	n := newFakeNode(t, newFakeStore())
	c := newClient(t, nil, n)

	res, err := c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(`{"a":1}`))
	if err != nil || res.Status != wire.StatusCreated || res.AddedID == 0 {
		t.Fatalf("PutCell new: got %+v, %v, want status created with an added_id", res, err)
	}
	again, err := c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(` { "a" : 1 } `))
	if err != nil || again.Status != wire.StatusExists || again.AddedID != res.AddedID {
		t.Fatalf("PutCell same body: got %+v, %v, want status exists with added_id %d", again, err, res.AddedID)
	}
	conf, err := c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(`{"a":2}`))
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("PutCell other body: got %v, want ErrConflict", err)
	}
	wantConf := wire.PutResult{RowKey: row1.String(), ColumnKey: "BASE", RefKey: 1, Status: wire.StatusConflict}
	if conf != wantConf {
		t.Errorf("PutCell other body: got result %+v, want %+v", conf, wantConf)
	}
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.Code != wire.CodeConflict || ae.Endpoint != n.URL() {
		t.Errorf("PutCell other body: got %#v, want *APIError 409 conflict from %s", ae, n.URL())
	}
	if _, err := c.PutCell(ctx, row1, "BASE", 5, json.RawMessage(`{"a":5}`)); err != nil {
		t.Fatal(err)
	}

	got, err := c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 1})
	if err != nil || !jsonEqual(t, got.Body, []byte(`{"a":1}`)) || got.AddedID != res.AddedID {
		t.Fatalf("GetCell: got %+v, %v, want body {\"a\":1} added_id %d", got, err, res.AddedID)
	}
	_, err = c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 2})
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetCell missing: got %v, want ErrNotFound", err)
	}
	latest, err := c.GetCellLatest(ctx, row1, "BASE")
	if err != nil || latest.RefKey != 5 {
		t.Errorf("GetCellLatest: got %+v, %v, want ref_key 5", latest, err)
	}
	if _, err := c.GetCellLatest(ctx, row2, "BASE"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetCellLatest missing: got %v, want ErrNotFound", err)
	}

	results, err := c.PutCells(ctx, []client.CellWrite{
		{Key: cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 5}, Body: json.RawMessage(`{"a":5}`)},
		{Key: cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{"a":9}`)},
		{Key: cells.Key{RowKey: row1, ColumnKey: "NOTES", RefKey: 3}, Body: json.RawMessage(`{"n":"x"}`)},
	})
	if err != nil {
		t.Fatalf("PutCells: %v", err)
	}
	var statuses []string
	for _, r := range results {
		statuses = append(statuses, r.Status)
	}
	if want := []string{wire.StatusExists, wire.StatusConflict, wire.StatusCreated}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("PutCells: got statuses %v, want %v", statuses, want)
	}
	if rs, err := c.PutCells(ctx, nil); rs != nil || err != nil {
		t.Errorf("PutCells(nil): got %v, %v, want nil, nil", rs, err)
	}

	rowCells, err := c.GetRow(ctx, row1)
	if err != nil || len(rowCells) != 2 || rowCells[0].RefKey != 5 || rowCells[1].ColumnKey != "NOTES" {
		t.Errorf("GetRow: got %+v, %v, want BASE@5 and NOTES@3", rowCells, err)
	}
	empty, err := c.GetRow(ctx, row2)
	if err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("GetRow of an empty row: got %#v, %v, want an empty slice", empty, err)
	}

	batch, err := c.GetCells(ctx, []client.GetKey{
		{RowKey: row1, ColumnKey: "BASE", RefKey: 1},
		{RowKey: row1, ColumnKey: "BASE", RefKey: 2},
		{RowKey: row1, ColumnKey: "NOTES", Latest: true},
	})
	if err != nil || len(batch.Cells) != 2 || len(batch.Missing) != 1 || batch.Cells[1].ColumnKey != "NOTES" {
		t.Fatalf("GetCells: got %+v, %v, want 2 cells and 1 missing", batch, err)
	}
	if m := batch.Missing[0]; m.RefKey == nil || m.RefKey.String() != "2" {
		t.Errorf("GetCells missing: got %+v, want BASE@2", m)
	}

	// The shard log holds every cell written, in added_id order, paged by NextLocation.
	total := 0
	for shard := range testShards {
		var after int64
		for {
			page, err := c.ShardCells(ctx, shard, after, 1)
			if err != nil {
				t.Fatalf("ShardCells(%d, %d): %v", shard, after, err)
			}
			total += len(page.Cells)
			if len(page.Cells) == 0 {
				if page.NextLocation != after {
					t.Errorf("ShardCells empty page: got next %d, want %d", page.NextLocation, after)
				}
				break
			}
			after = page.NextLocation
		}
	}
	if total != 3 {
		t.Errorf("ShardCells over all shards: got %d cells, want 3", total)
	}

	st, err := c.Cluster(ctx)
	if err != nil || len(st.Datastores) != 1 || st.Datastores[0].Shards != testShards {
		t.Errorf("Cluster: got %+v, %v, want one datastore of %d shards", st, err, testShards)
	}
}

func TestWithDatastore(t *testing.T) {
	ctx := context.Background()
	n := newFakeNode(t, newFakeStore())
	c := newClient(t, nil, n)
	other := c.WithDatastore("nope")
	if c.Datastore() != testDatastore || other.Datastore() != "nope" {
		t.Fatalf("WithDatastore: got %q and %q, want %q and %q", c.Datastore(), other.Datastore(), testDatastore, "nope")
	}
	_, err := other.GetCellLatest(ctx, row1, "BASE")
	var ae *client.APIError
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "nope") {
		t.Errorf("unknown datastore: got %v, want ErrNotFound naming it", err)
	}
	if got := n.requests()[0].Path; got != "/v1/nope/cells/"+row1.String()+"/BASE" {
		t.Errorf("WithDatastore path: got %s, want /v1/nope/...", got)
	}
	if _, err := c.PutCell(ctx, row1, "BASE", 1, json.RawMessage(`{}`)); err != nil {
		t.Errorf("original client after WithDatastore: got %v, want nil", err)
	}
	noDS := c.WithDatastore("")
	if _, err := noDS.GetRow(ctx, row1); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("no datastore: got %v, want ErrInvalidArgument", err)
	}
}

// TestClientSideValidation checks that requests the server would reject are not sent.
func TestClientSideValidation(t *testing.T) {
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
	}
	for _, tc := range calls {
		err := tc.call()
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", tc.name, err)
			continue
		}
		var fe *cells.FieldError
		if tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("%s: got field error %v, want field %q", tc.name, fe, tc.field)
		}
	}
	if h := n.hits.Load(); h != 0 {
		t.Errorf("got %d requests sent, want 0", h)
	}
}

// TestErrorMapping checks that each error answer maps to its sentinel and *APIError fields.
func TestErrorMapping(t *testing.T) {
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
			if !errors.Is(k.err, k.want) {
				t.Errorf("%d %q %s: got %v, want %v", tc.status, tc.code, k.kind, k.err, k.want)
			}
			for _, other := range []error{client.ErrNotFound, client.ErrConflict, client.ErrInvalidArgument,
				client.ErrTooLarge, client.ErrUnavailable, client.ErrIndeterminate, client.ErrInternal} {
				if other != k.want && errors.Is(k.err, other) {
					t.Errorf("%d %q %s: got %v, which also is %v; want only %v", tc.status, tc.code, k.kind, k.err, other, k.want)
				}
			}
			var ae *client.APIError
			if !errors.As(k.err, &ae) {
				t.Errorf("%d %q %s: got %v, want an *APIError", tc.status, tc.code, k.kind, k.err)
				continue
			}
			if ae.StatusCode != tc.status || ae.Code != tc.wantCode || ae.Field != tc.field || ae.Endpoint != n.URL() {
				t.Errorf("%d %q %s: got %+v, want status %d code %q field %q endpoint %s",
					tc.status, tc.code, k.kind, ae, tc.status, tc.wantCode, tc.field, n.URL())
			}
			if tc.raw != "" && !strings.Contains(ae.Message, tc.raw) {
				t.Errorf("%d %s: got message %q, want the body %q", tc.status, k.kind, ae.Message, tc.raw)
			}
			if tc.code != "" && ae.Message != "because "+tc.code {
				t.Errorf("%d %s: got message %q, want %q", tc.status, k.kind, ae.Message, "because "+tc.code)
			}
		}
	}
}

// TestBadResponses checks that answers breaking the API contract are errors, not retried.
func TestBadResponses(t *testing.T) {
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
			err := tc.call(c)
			if !errors.Is(err, client.ErrBadResponse) {
				t.Errorf("got %v, want ErrBadResponse", err)
			}
			if h := nodes[0].hits.Load() + nodes[1].hits.Load(); h != 1 {
				t.Errorf("got %d requests, want 1 (not retried)", h)
			}
		})
	}
}
