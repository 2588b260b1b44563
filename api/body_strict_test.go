package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// writesBackend serves one datastore, trips, and keeps the cells written to it. Any other
// method panics (the embedded nil interfaces).
type writesBackend struct {
	api.NodeBackend
	api.CellWriter
	mu    sync.Mutex
	cells []cells.Cell
}

func (b *writesBackend) ID() string { return "n1" }
func (b *writesBackend) Topology() *topology.Topology {
	return &topology.Topology{Datastores: []topology.DatastoreSpec{{Name: "trips", Shards: 8}}}
}
func (b *writesBackend) Ready() error                { return nil }
func (b *writesBackend) DatastoreReady(string) error { return nil }

func (b *writesBackend) Datastore(name string) (*topology.DatastoreSpec, error) {
	if name != "trips" {
		return nil, fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, name)
	}
	return &topology.DatastoreSpec{Name: name, Shards: 8}, nil
}

func (b *writesBackend) Write(_ context.Context, _ string, req cluster.WriteRequest) (cluster.WriteResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res cluster.WriteResponse
	res.Cells = make([]cells.Result, len(req.Cells))
	for i, c := range req.Cells {
		b.cells = append(b.cells, c)
		res.Cells[i] = cells.Result{Status: cells.StatusCreated, AddedID: int64(len(b.cells))}
	}
	return res, nil
}

func (b *writesBackend) written() []cells.Cell {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]cells.Cell(nil), b.cells...)
}

// TestBodyStrict: a body that would be stored as another value than it holds (a lone surrogate
// escape, a key twice in one object) is refused by put_cell, put_cells and a transaction with
// 400 invalid_argument naming the body, and a message saying what and where; nothing is
// written. Its neighbours that hold what they say are written as sent.
func TestBodyStrict(t *testing.T) {
	t.Parallel()
	b := &writesBackend{}
	srv, err := api.NewServer(api.Backends{Node: b, Writes: b}, api.Config{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	const row, other = "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "123e4567-e89b-12d3-a456-426614174000"
	send := func(t *testing.T, method, path, body string) (int, wire.ErrorBody) {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "%s %s", method, path)
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var eb wire.ErrorBody
		if res.StatusCode >= 300 {
			require.NoError(t, json.Unmarshal(raw, &eb), "an error envelope: %s", raw)
		}
		return res.StatusCode, eb
	}
	good := fmt.Sprintf(`{"row_key":%q,"column_key":"BASE","ref_key":1,"body":{"ok":true}}`, other)
	for _, c := range []struct{ name, body, want string }{
		{"lone high surrogate", `{"s":"\ud800"}`, `\ud800 at byte 6 is a high surrogate not followed by a low one`},
		{"lone low surrogate", `{"s":"\udc00"}`, `\udc00 at byte 6 is a low surrogate`},
		{"high surrogate, then no low one", `{"s":"\ud83d\u0041"}`, `\ud83d at byte 6 is a high surrogate`},
		{"duplicate key", `{"a":1,"a":2}`, `key "a" at byte 7 is given twice in one object`},
		{"duplicate key, nested", `{"x":[{"b":{"c":1,"c":1}}]}`, `key "c" at byte 18 is given twice`},
		{"duplicate key, escaped", `{"a":1,"\u0061":2}`, `key "a" at byte 7 is given twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []struct{ method, path, body, field string }{
				{"PUT", "/v1/trips/cells/" + row + "/BASE/1", c.body, "body"},
				{"POST", "/v1/trips/cells", `{"cells":[` + good + `,{"row_key":"` + row + `","column_key":"BASE","ref_key":1,"body":` + c.body + `}]}`, "cells[1].body"},
				{"POST", "/v1/trips/transactions", `{"writes":[` + good + `,{"row_key":"` + row + `","column_key":"BASE","ref_key":1,"body":` + c.body + `}]}`, "writes[1].body"},
			} {
				status, eb := send(t, r.method, r.path, r.body)
				assert.Equal(t, http.StatusBadRequest, status, "%s %s: status (%+v)", r.method, r.path, eb.Error)
				assert.Equal(t, wire.CodeInvalidArgument, eb.Error.Code, "%s %s: code", r.method, r.path)
				assert.Equal(t, r.field, eb.Error.Field, "%s %s: field", r.method, r.path)
				assert.Contains(t, eb.Error.Message, c.want, "%s %s: message", r.method, r.path)
			}
		})
	}
	assert.Empty(t, b.written(), "cells written by the refused requests")

	for _, body := range []string{`{"s":"\ud83d\ude00"}`, `{"s":"\\ud800"}`, `{"x":{"a":1},"y":{"a":2}}`} {
		status, eb := send(t, "PUT", "/v1/trips/cells/"+row+"/BASE/1", body)
		assert.Equal(t, http.StatusCreated, status, "put_cell %s: status (%+v)", body, eb.Error)
	}
	got := b.written()
	if assert.Len(t, got, 3, "cells written by the accepted bodies") {
		var texts []string
		for _, c := range got {
			text, err := c.Body.JSON()
			require.NoError(t, err)
			texts = append(texts, string(text))
		}
		assert.Equal(t, []string{`{"s":"😀"}`, `{"s":"\\ud800"}`, `{"x":{"a":1},"y":{"a":2}}`}, texts, "the stored bodies")
	}
}
