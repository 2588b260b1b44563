package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/wire"
)

// TestIntegrationEraseRow erases a row through the client: reads find nothing afterwards, a
// second erasure erases nothing, and a log reader (the wire log and a trigger source) sees the
// tombstone in the row's shard log.
func TestIntegrationEraseRow(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	row := itRow(t, 1)
	shard := cells.ShardOf(row, c.Topology.Datastores[0].Shards)
	for _, col := range []string{"BASE", "STATUS"} {
		_, err := cl.PutCell(ctx, row, col, 1, json.RawMessage(`{"v":1}`))
		require.NoError(t, err, "PutCell %s", col)
	}
	res, err := cl.EraseRow(ctx, row)
	require.NoError(t, err, "EraseRow")
	require.Equal(t, row.String(), res.RowKey, "EraseRow: row key (%+v)", res)
	require.Equal(t, 2, res.Erased, "EraseRow: cells erased (%+v)", res)
	require.Positive(t, res.AddedID, "EraseRow: the tombstone's added_id (%+v)", res)

	got, err := cl.GetRow(ctx, row)
	require.NoError(t, err, "GetRow after the erasure")
	assert.Empty(t, got, "GetRow after the erasure")
	_, err = cl.GetCellLatest(ctx, row, "BASE")
	assert.ErrorIs(t, err, client.ErrNotFound, "GetCellLatest after the erasure")
	again, err := cl.EraseRow(ctx, row)
	require.NoError(t, err, "EraseRow again")
	assert.Equal(t, wire.EraseResult{RowKey: row.String()}, again, "EraseRow again: nothing erased")

	page, err := cl.ReadLog(ctx, client.LogRequest{Shard: shard, Location: res.AddedID - 1, ColumnKey: "BASE"})
	require.NoError(t, err, "ReadLog of the row's shard")
	require.NotEmpty(t, page.Cells, "ReadLog of the row's shard from the tombstone")
	assert.True(t, page.Cells[0].Erased && page.Cells[0].RowKey == row.String() && page.Cells[0].AddedID == res.AddedID,
		"ReadLog: %+v, want the row's tombstone at %d", page.Cells[0], res.AddedID)
	pages, err := cl.TriggerSource().ReadLogs(ctx, triggers.LogRead{Shards: []triggers.ShardLocation{{Shard: shard, Location: res.AddedID - 1}},
		Limit: 10, Consistency: triggers.ConsistencyStrong})
	require.NoError(t, err, "TriggerSource.ReadLogs")
	require.Len(t, pages, 1, "TriggerSource.ReadLogs: one page")
	require.NotEmpty(t, pages[0].Cells, "TriggerSource.ReadLogs from the tombstone")
	ts := pages[0].Cells[0]
	assert.True(t, ts.Key.IsTombstone() && ts.RowKey == row && ts.AddedID == res.AddedID, "trigger source: %+v, want the row's tombstone", ts)
}

// EraseRow sends DELETE to the row's path, retries a 503 as a write, and refuses answers that
// break the contract.
func TestEraseRowAnswers(t *testing.T) {
	t.Parallel()
	row := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	var answer atomic.Value // func(w http.ResponseWriter, r *http.Request)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		answer.Load().(func(http.ResponseWriter, *http.Request))(w, r)
	}))
	defer srv.Close()
	cl := itClient(t, []string{srv.URL}, func(cfg *client.Config) { cfg.NoLeaderRouting = true })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}

	answer.Store(func(w http.ResponseWriter, r *http.Request) {
		if calls.Load() == 1 {
			reply(w, 503, `{"error":{"code":"unavailable","message":"no leader"}}`)
			return
		}
		assert.Equal(t, http.MethodDelete, r.Method, "method")
		assert.Equal(t, "/v1/trips/cells/"+row.String(), r.URL.Path, "path")
		reply(w, 200, `{"row_key":"`+row.String()+`","erased":3,"added_id":17}`)
	})
	res, err := cl.EraseRow(ctx, row)
	require.NoError(t, err, "EraseRow after a 503")
	assert.Equal(t, wire.EraseResult{RowKey: row.String(), Erased: 3, AddedID: 17}, res, "EraseRow after a 503")
	assert.EqualValues(t, 2, calls.Load(), "attempts: the 503, then the answer")

	for _, bad := range []string{
		`{"row_key":"123e4567-e89b-12d3-a456-426614174000","erased":0,"added_id":0}`, // another row
		`{"row_key":"` + row.String() + `","erased":2,"added_id":0}`,                 // erased, no tombstone
		`{"row_key":"` + row.String() + `","erased":0,"added_id":5}`,                 // a tombstone, nothing erased
		`{"row_key":"` + row.String() + `","erased":-1,"added_id":-1}`,
	} {
		answer.Store(func(w http.ResponseWriter, r *http.Request) { reply(w, 200, bad) })
		_, err := cl.EraseRow(ctx, row)
		assert.ErrorIs(t, err, client.ErrBadResponse, "EraseRow answered %s", bad)
	}
	answer.Store(func(w http.ResponseWriter, r *http.Request) {
		reply(w, 404, `{"error":{"code":"not_found","message":"unknown datastore \"trips\""}}`)
	})
	_, err = cl.EraseRow(ctx, row)
	assert.ErrorIs(t, err, client.ErrNotFound, "EraseRow in an unknown datastore")
}
