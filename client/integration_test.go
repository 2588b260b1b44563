package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// The tests in this file run the client against a real 3-node cluster (clustertest: loopback
// TCP on random ports, raft, SQLite stores in the test's own directories, the HTTP API on every
// node). Those that only read and write run in parallel; those that stop nodes or measure
// where requests go run alone.

// itRow returns a row key derived from the test's name and i.
func itRow(t *testing.T, i int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("%s/%d", t.Name(), i)))
}

// itClient returns a client of "trips" over endpoints with fast retries; mod adjusts the config.
func itClient(t *testing.T, endpoints []string, mod func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = "trips"
	cfg.RequestTimeout = 10 * time.Second
	cfg.BackoffBase = 10 * time.Millisecond
	cfg.BackoffMax = 100 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	c, err := client.New(cfg)
	require.NoError(t, err, "client.New")
	return c
}

// itWrite is a cell written in a test and what the cluster answered.
type itWrite struct {
	key     cells.Key
	body    string // canonical JSON: the server answers bodies with sorted keys, no spaces
	addedID int64
	err     error // the error of the write's first attempt, for failure messages
}

// readCell is what checkRead compares of a cell read back.
type readCell struct {
	RowKey, ColumnKey string
	RefKey            int64
	Body              string
	AddedID           int64
}

// checkRead compares a cell read back with what was written: exact body bytes, same added_id,
// and a created_at in UTC.
func checkRead(t *testing.T, what string, got wire.Cell, want itWrite) {
	t.Helper()
	assert.Equal(t, readCell{want.key.RowKey.String(), want.key.ColumnKey, want.key.RefKey, want.body, want.addedID},
		readCell{got.RowKey, got.ColumnKey, got.RefKey, string(got.Body), got.AddedID}, what)
	assert.False(t, got.CreatedAt.IsZero(), "%s: want a created_at", what)
	assert.Equal(t, time.UTC, got.CreatedAt.Location(), "%s: created_at's location", what)
}

func TestIntegrationRoundTrips(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{API: api.Config{MaxCellBodyBytes: 4096, MaxRequestBytes: 64 << 10, MaxBatchCells: 10}})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var written []itWrite

	// put_cell: created, exists (same JSON value, another spelling), conflict.
	row := itRow(t, 0)
	res, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{"fare": 10, "city": "SF"}`))
	require.NoError(t, err, "PutCell new")
	require.Equal(t, wire.PutResult{RowKey: row.String(), ColumnKey: "BASE", RefKey: 1, Status: wire.StatusCreated, AddedID: res.AddedID}, res,
		"PutCell new: want created for %s/BASE/1", row)
	require.GreaterOrEqual(t, res.AddedID, int64(1), "PutCell new: added_id")
	base := itWrite{key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, body: `{"city":"SF","fare":10}`, addedID: res.AddedID}
	written = append(written, base)
	again, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{"city":"SF","fare":10.0}`))
	assert.NoError(t, err, "PutCell same body")
	assert.Equal(t, wire.StatusExists, again.Status, "PutCell same body: status")
	assert.Equal(t, res.AddedID, again.AddedID, "PutCell same body: added_id of the stored cell")
	conf, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{"fare":11}`))
	var ae *client.APIError
	assert.ErrorIs(t, err, client.ErrConflict, "PutCell other body")
	if assert.ErrorAs(t, err, &ae, "PutCell other body: want an *APIError") {
		assert.Equal(t, http.StatusConflict, ae.StatusCode, "PutCell other body: status")
		assert.Equal(t, wire.CodeConflict, ae.Code, "PutCell other body: code")
	}
	assert.Equal(t, wire.StatusConflict, conf.Status, "PutCell other body: result status")
	assert.Equal(t, row.String(), conf.RowKey, "PutCell other body: result row key")
	got, err := cl.GetCell(ctx, base.key)
	require.NoError(t, err, "GetCell")
	checkRead(t, "GetCell after the conflict", got, base)

	// put_cells: one request over both partitions, with an existing cell and a conflict.
	var batch []client.CellWrite
	for i := 1; i <= 6; i++ {
		batch = append(batch, client.CellWrite{
			Key:  cells.Key{RowKey: itRow(t, i), ColumnKey: "TRIP", RefKey: int64(i)},
			Body: json.RawMessage(fmt.Sprintf(`{"i":%d,"tags":["a","b"],"x":{"y":null}}`, i)),
		})
	}
	batch = append(batch,
		client.CellWrite{Key: base.key, Body: json.RawMessage(`{"city":"SF","fare":10}`)},
		client.CellWrite{Key: base.key, Body: json.RawMessage(`{"city":"LA"}`)},
	)
	results, err := cl.PutCells(ctx, batch)
	require.NoError(t, err, "PutCells")
	require.Len(t, results, len(batch), "PutCells: results")
	for i, r := range results {
		want := wire.StatusCreated
		switch i {
		case 6:
			want = wire.StatusExists
		case 7:
			want = wire.StatusConflict
		}
		assert.Equal(t, want, r.Status, "PutCells result %d (%s): status", i, batch[i].Key)
		assert.Equal(t, batch[i].Key.RowKey.String(), r.RowKey, "PutCells result %d: row key", i)
		assert.Equal(t, batch[i].Key.RefKey, r.RefKey, "PutCells result %d: ref key", i)
		if i < 6 {
			written = append(written, itWrite{key: batch[i].Key, body: string(batch[i].Body), addedID: r.AddedID})
		} else {
			assert.Equal(t, base.addedID, r.AddedID, "PutCells result %d (stored cell): added_id", i)
		}
	}
	rs, err := cl.PutCells(ctx, nil)
	assert.NoError(t, err, "PutCells(nil)")
	assert.Nil(t, rs, "PutCells(nil): results")

	// get_cell and get_cell_latest, strong and (eventually) stale.
	status := map[int64]itWrite{}
	for _, ref := range []int64{1, 7, 3} {
		r, err := cl.PutCell(ctx, row, "STATUS", ref, json.RawMessage(fmt.Sprintf(`{"s":"v%d"}`, ref)))
		require.NoError(t, err, "PutCell STATUS/%d", ref)
		require.Equal(t, wire.StatusCreated, r.Status, "PutCell STATUS/%d: status", ref)
		status[ref] = itWrite{key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: ref}, body: fmt.Sprintf(`{"s":"v%d"}`, ref), addedID: r.AddedID}
		written = append(written, status[ref])
	}
	for _, w := range written {
		got, err := cl.GetCell(ctx, w.key)
		require.NoError(t, err, "GetCell(%s)", w.key)
		checkRead(t, "GetCell", got, w)
	}
	latest, err := cl.GetCellLatest(ctx, row, "STATUS")
	require.NoError(t, err, "GetCellLatest")
	checkRead(t, "GetCellLatest", latest, status[7])
	stale := itClient(t, c.URLs(), func(cfg *client.Config) { cfg.Consistency = client.ConsistencyStale })
	// Every cell a stale read returns is checked, in the attempts that found some cells missing
	// too; a missing cell is retried. The condition runs in one goroutine at a time, and
	// EventuallyWithT returns after its last run ends.
	var staleReads []wire.Cell
	var staleWant []itWrite
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, w := range written {
			got, err := stale.GetCell(ctx, w.key)
			if !assert.NoError(ct, err, "stale GetCell(%s)", w.key) {
				return
			}
			staleReads, staleWant = append(staleReads, got), append(staleWant, w)
		}
	}, 10*time.Second, 20*time.Millisecond, "stale reads see every cell")
	for i := range staleReads {
		checkRead(t, "stale GetCell", staleReads[i], staleWant[i])
	}

	// get_row: the latest cell of each column, by column key.
	rowCells, err := cl.GetRow(ctx, row)
	require.NoError(t, err, "GetRow")
	require.Len(t, rowCells, 2, "GetRow: want BASE and STATUS")
	checkRead(t, "GetRow cell 0", rowCells[0], base)
	checkRead(t, "GetRow cell 1", rowCells[1], status[7])
	empty, err := cl.GetRow(ctx, itRow(t, 999))
	assert.NoError(t, err, "GetRow(unwritten row)")
	assert.NotNil(t, empty, "GetRow(unwritten row): want an empty slice, not nil")
	assert.Empty(t, empty, "GetRow(unwritten row)")

	// get_cells: found in order, missing echoed as given.
	gc, err := cl.GetCells(ctx, []client.GetKey{
		{RowKey: row, ColumnKey: "STATUS", RefKey: 3},
		{RowKey: row, ColumnKey: "STATUS", RefKey: 4},
		{RowKey: row, ColumnKey: "STATUS", Latest: true},
		{RowKey: itRow(t, 3), ColumnKey: "TRIP", RefKey: 3},
		{RowKey: itRow(t, 3), ColumnKey: "NOPE", Latest: true},
	})
	require.NoError(t, err, "GetCells")
	require.Len(t, gc.Cells, 3, "GetCells: cells found")
	require.Len(t, gc.Missing, 2, "GetCells: keys missing")
	checkRead(t, "GetCells cell 0", gc.Cells[0], status[3])
	checkRead(t, "GetCells cell 1", gc.Cells[1], status[7])
	checkRead(t, "GetCells cell 2", gc.Cells[2], written[3])
	m := gc.Missing[0]
	assert.Equal(t, row.String()+"/STATUS", m.RowKey+"/"+m.ColumnKey, "GetCells missing 0")
	if assert.NotNil(t, m.RefKey, "GetCells missing 0: want ref key 4") {
		assert.Equal(t, "4", m.RefKey.String(), "GetCells missing 0: ref key")
	}
	m = gc.Missing[1]
	assert.Equal(t, itRow(t, 3).String()+"/NOPE", m.RowKey+"/"+m.ColumnKey, "GetCells missing 1")
	assert.Nil(t, m.RefKey, "GetCells missing 1: want no ref key")

	// get_cells_for_shard: paged with limit 2, every shard holds exactly the cells written to
	// it, in added_id order.
	shards := c.Topology.Datastores[0].Shards
	wantByShard := map[int][]itWrite{}
	for _, w := range written {
		s := cells.ShardOf(w.key.RowKey, shards)
		wantByShard[s] = append(wantByShard[s], w)
	}
	for shard := 0; shard < shards; shard++ {
		want := wantByShard[shard]
		sort.Slice(want, func(i, j int) bool { return want[i].addedID < want[j].addedID })
		var gotCells []wire.Cell
		var after int64
		for pages := 0; ; pages++ {
			page, err := cl.ShardCells(ctx, shard, after, 2)
			require.NoError(t, err, "ShardCells(%d, %d, 2)", shard, after)
			if len(page.Cells) == 0 {
				assert.Equal(t, after, page.NextLocation, "ShardCells(%d) empty page: next_location", shard)
				break
			}
			gotCells = append(gotCells, page.Cells...)
			after = page.NextLocation
			require.LessOrEqual(t, pages, len(want), "ShardCells(%d): more pages than cells", shard)
		}
		require.Len(t, gotCells, len(want), "ShardCells(%d): cells", shard)
		for i := range want {
			checkRead(t, fmt.Sprintf("ShardCells(%d) cell %d", shard, i), gotCells[i], want[i])
		}
	}

	// not_found.
	_, err = cl.GetCell(ctx, cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: 2})
	assert.ErrorIs(t, err, client.ErrNotFound, "GetCell(missing)")
	_, err = cl.GetCellLatest(ctx, row, "NOPE")
	assert.ErrorIs(t, err, client.ErrNotFound, "GetCellLatest(missing column)")
	nope := cl.WithDatastore("nope")
	_, err = nope.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{}`))
	assert.ErrorIs(t, err, client.ErrNotFound, "PutCell(unknown datastore)")
	_, err = nope.GetRow(ctx, row)
	assert.ErrorIs(t, err, client.ErrNotFound, "GetRow(unknown datastore)")

	// invalid_argument: refused by the client with a *cells.FieldError and no request ...
	for _, tc := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"negative ref key", func() error {
			_, err := cl.PutCell(ctx, itRow(t, 50), "BASE", -1, json.RawMessage(`{}`))
			return err
		}, "ref_key"},
		{"bad column key", func() error {
			_, err := cl.PutCell(ctx, itRow(t, 50), "BA-SE", 1, json.RawMessage(`{}`))
			return err
		}, "column_key"},
		{"body not an object", func() error {
			_, err := cl.PutCell(ctx, itRow(t, 50), "BASE", 1, json.RawMessage(`[1]`))
			return err
		}, "body"},
		{"batch: negative ref key", func() error {
			_, err := cl.PutCells(ctx, []client.CellWrite{
				{Key: cells.Key{RowKey: itRow(t, 50), ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{}`)},
				{Key: cells.Key{RowKey: itRow(t, 50), ColumnKey: "BASE", RefKey: -5}, Body: json.RawMessage(`{}`)},
			})
			return err
		}, "cells[1].ref_key"},
	} {
		err := tc.call()
		var fe *cells.FieldError
		assert.ErrorIs(t, err, client.ErrInvalidArgument, tc.name)
		if assert.ErrorAs(t, err, &fe, "%s: want a *cells.FieldError", tc.name) {
			assert.Equal(t, tc.field, fe.Field, "%s: field of the error", tc.name)
		}
		assert.False(t, errors.As(err, &ae), "%s: got %v, want no *APIError (not sent)", tc.name, err)
	}
	rc, err := cl.GetRow(ctx, itRow(t, 50))
	assert.NoError(t, err, "row of the refused writes")
	assert.Empty(t, rc, "row of the refused writes")
	// ... and refused by the server, with the field it names, when the client lets it through.
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		code   string
		field  string
		is     error
	}{
		{"shard out of range", func() error { _, err := cl.ShardCells(ctx, shards, 0, 0); return err },
			http.StatusBadRequest, wire.CodeInvalidArgument, "shard", client.ErrInvalidArgument},
		{"limit above the server's maximum", func() error { _, err := cl.ShardCells(ctx, 0, 0, 1001); return err },
			http.StatusBadRequest, wire.CodeInvalidArgument, "limit", client.ErrInvalidArgument},
		{"body too large", func() error {
			_, err := cl.PutCell(ctx, itRow(t, 51), "BASE", 1, json.RawMessage(`{"x":"`+strings.Repeat("y", 5000)+`"}`))
			return err
		}, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, "body", client.ErrTooLarge},
		{"too many cells", func() error {
			var many []client.CellWrite
			for i := 0; i < 11; i++ {
				many = append(many, client.CellWrite{Key: cells.Key{RowKey: itRow(t, 51), ColumnKey: "BASE", RefKey: int64(i)}, Body: json.RawMessage(`{}`)})
			}
			_, err := cl.PutCells(ctx, many)
			return err
		}, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, "cells", client.ErrTooLarge},
	} {
		err := tc.call()
		assert.ErrorIs(t, err, tc.is, tc.name)
		if assert.ErrorAs(t, err, &ae, "%s: want an *APIError", tc.name) {
			assert.Equal(t, tc.status, ae.StatusCode, "%s: status", tc.name)
			assert.Equal(t, tc.code, ae.Code, "%s: code", tc.name)
			assert.Equal(t, tc.field, ae.Field, "%s: field", tc.name)
		}
	}
	rc, err = cl.GetRow(ctx, itRow(t, 51))
	assert.NoError(t, err, "row of the rejected writes")
	assert.Empty(t, rc, "row of the rejected writes")

	// cluster status, readyz and healthz of every node.
	seen := map[string]bool{}
	for i := 0; i < 6; i++ { // successive calls rotate over the nodes
		st, err := cl.Cluster(ctx)
		require.NoError(t, err, "Cluster")
		seen[st.Node] = true
		require.Len(t, st.Nodes, 3, "Cluster from %s: nodes", st.Node)
		require.Len(t, st.Datastores, 1, "Cluster from %s: datastores", st.Node)
		for j, n := range st.Nodes {
			want := c.Topology.Nodes[j]
			assert.Equal(t, [3]string{want.ID, want.HTTPAddr, want.RaftAddr}, [3]string{n.ID, n.HTTPAddr, n.RaftAddr},
				"Cluster from %s: node %d's id, HTTP and raft addresses", st.Node, j)
		}
		d := st.Datastores[0]
		require.Equal(t, "trips", d.Name, "Cluster from %s: datastore", st.Node)
		require.Equal(t, "raft", d.Mode, "Cluster from %s: mode", st.Node)
		require.Equal(t, shards, d.Shards, "Cluster from %s: shards", st.Node)
		require.Len(t, d.Partitions, 2, "Cluster from %s: partitions", st.Node)
		for _, p := range d.Partitions {
			assert.Equal(t, c.Topology.Nodes[c.LeaderOf(p.ID)].ID, p.Leader, "Cluster from %s: partition %d's leader", st.Node, p.ID)
			assert.True(t, p.Local, "Cluster from %s: partition %d local", st.Node, p.ID)
			assert.Len(t, p.Replicas, 3, "Cluster from %s: partition %d's replicas", st.Node, p.ID)
			assert.NotZero(t, p.AppliedIndex, "Cluster from %s: partition %d's applied index", st.Node, p.ID)
		}
	}
	assert.Len(t, seen, 3, "Cluster over 6 calls: got answers from %v, want every node (calls rotate over endpoints)", seen)
	for _, u := range c.URLs() {
		assert.NoError(t, cl.Ready(ctx, u), "Ready(%s)", u)
		assert.NoError(t, cl.Healthy(ctx, u), "Healthy(%s)", u)
	}
}

// TestIntegrationFailover: with node 0 (the first endpoint) down, every call succeeds through
// nodes 1 and 2; with node 1 down too, stale reads still succeed through node 2 while writes
// and strong reads fail with ErrUnavailable, within their context. Not parallel: it stops
// nodes and bounds how long a call takes.
func TestIntegrationFailover(t *testing.T) {
	// Each node answers within 2s (503 when no leader answers in time), the client waits 3s.
	c := clustertest.Start(t, clustertest.Options{API: api.Config{RequestTimeout: 2 * time.Second}})
	cl := itClient(t, c.URLs(), func(cfg *client.Config) {
		cfg.RequestTimeout = 3 * time.Second
		cfg.MaxAttempts = 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var written []itWrite
	put := func(i int) itWrite {
		t.Helper()
		w := itWrite{key: cells.Key{RowKey: itRow(t, i), ColumnKey: "BASE", RefKey: int64(i)}, body: fmt.Sprintf(`{"i":%d}`, i)}
		res, err := cl.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		require.NoError(t, err, "PutCell %s", w.key)
		// exists: a retried attempt (504, timeout) had been applied; the cell is ours either way.
		require.Contains(t, []string{wire.StatusCreated, wire.StatusExists}, res.Status,
			"PutCell %s: want created (or exists after a retry)", w.key)
		w.addedID = res.AddedID
		written = append(written, w)
		return w
	}
	for i := 0; i < 4; i++ {
		put(i)
	}
	t.Logf("leaders before: partition 0 on node %d, partition 1 on node %d", c.LeaderOf(0), c.LeaderOf(1))

	c.StopNode(0)
	// Six rounds, so that calls start at every endpoint of the rotation, the stopped one too.
	for round := 0; round < 6; round++ {
		w := put(100 + round)
		batch := []client.CellWrite{
			{Key: cells.Key{RowKey: itRow(t, 200+round), ColumnKey: "B", RefKey: 1}, Body: json.RawMessage(`{"b":1}`)},
			{Key: cells.Key{RowKey: itRow(t, 300+round), ColumnKey: "B", RefKey: 1}, Body: json.RawMessage(`{"b":1}`)},
		}
		res, err := cl.PutCells(ctx, batch)
		require.NoError(t, err, "round %d: PutCells with node 0 down", round)
		require.Len(t, res, 2, "round %d: PutCells with node 0 down: results", round)
		for i, r := range res {
			require.NotEqual(t, wire.StatusConflict, r.Status, "round %d: PutCells with node 0 down: cell %d, want created (or exists)", round, i)
			written = append(written, itWrite{key: batch[i].Key, body: `{"b":1}`, addedID: r.AddedID})
		}
		got, err := cl.GetCell(ctx, w.key)
		require.NoError(t, err, "round %d: GetCell with node 0 down", round)
		checkRead(t, "GetCell with node 0 down", got, w)
		latest, err := cl.GetCellLatest(ctx, w.key.RowKey, "BASE")
		require.NoError(t, err, "round %d: GetCellLatest with node 0 down", round)
		checkRead(t, "GetCellLatest with node 0 down", latest, w)
		rc, err := cl.GetRow(ctx, w.key.RowKey)
		require.NoError(t, err, "round %d: GetRow with node 0 down", round)
		require.Len(t, rc, 1, "round %d: GetRow with node 0 down", round)
		gc, err := cl.GetCells(ctx, []client.GetKey{{RowKey: w.key.RowKey, ColumnKey: "BASE", Latest: true}})
		require.NoError(t, err, "round %d: GetCells with node 0 down", round)
		require.Len(t, gc.Cells, 1, "round %d: GetCells with node 0 down", round)
		sc, err := cl.ShardCells(ctx, cells.ShardOf(w.key.RowKey, c.Topology.Datastores[0].Shards), 0, 0)
		require.NoError(t, err, "round %d: ShardCells with node 0 down", round)
		require.NotEmpty(t, sc.Cells, "round %d: ShardCells with node 0 down", round)
		st, err := cl.Cluster(ctx)
		require.NoError(t, err, "round %d: Cluster with node 0 down", round)
		require.NotEqual(t, c.Topology.Nodes[0].ID, st.Node, "round %d: Cluster with node 0 down: want n2 or n3 to answer", round)
	}

	// Before stopping node 1, node 2 must have applied everything (a stale read reads what the
	// replica applied; node 2 alone cannot commit anything later).
	only2 := itClient(t, []string{c.URL(2)}, func(cfg *client.Config) { cfg.Consistency = client.ConsistencyStale })
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, w := range written {
			_, err := only2.GetCell(ctx, w.key)
			if !assert.NoError(ct, err, "stale GetCell(%s) from node 2", w.key) {
				return
			}
		}
	}, 10*time.Second, 20*time.Millisecond, "node 2 applies every write")
	c.StopNode(1)

	// Stale reads: served by node 2, through the client configured with all three endpoints.
	staleOpt := client.WithConsistency(client.ConsistencyStale)
	for round := 0; round < 3; round++ {
		for _, w := range written {
			got, err := cl.GetCell(ctx, w.key, staleOpt)
			require.NoError(t, err, "stale GetCell with only node 2 up")
			checkRead(t, "stale GetCell with only node 2 up", got, w)
		}
		w := written[round]
		latest, err := cl.GetCellLatest(ctx, w.key.RowKey, w.key.ColumnKey, staleOpt)
		require.NoError(t, err, "stale GetCellLatest with only node 2 up")
		checkRead(t, "stale GetCellLatest with only node 2 up", latest, w)
		rc, err := cl.GetRow(ctx, w.key.RowKey, staleOpt)
		require.NoError(t, err, "stale GetRow with only node 2 up")
		require.Len(t, rc, 1, "stale GetRow with only node 2 up")
		gc, err := cl.GetCells(ctx, []client.GetKey{{RowKey: w.key.RowKey, ColumnKey: w.key.ColumnKey, RefKey: w.key.RefKey}}, staleOpt)
		require.NoError(t, err, "stale GetCells with only node 2 up")
		require.Len(t, gc.Cells, 1, "stale GetCells with only node 2 up")
		_, err = cl.ShardCells(ctx, 0, 0, 0, staleOpt)
		require.NoError(t, err, "stale ShardCells with only node 2 up")
	}

	// Once node 2 leads nothing, no attempt can apply a write: each fails with ErrUnavailable
	// (never indeterminate) after MaxAttempts, well before ctx ends.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, r := range c.Node(2).Replicas() {
			assert.NotEqual(ct, "Leader", r.State, "node 2 still leads partition %d", r.Partition)
		}
	}, 10*time.Second, 20*time.Millisecond, "node 2 steps down")
	failed := []itWrite{
		{key: cells.Key{RowKey: itRow(t, 500), ColumnKey: "BASE", RefKey: 1}, body: `{"f":1}`},
		{key: cells.Key{RowKey: itRow(t, 501), ColumnKey: "BASE", RefKey: 1}, body: `{"f":2}`},
	}
	start := time.Now()
	_, err := cl.PutCell(ctx, failed[0].key.RowKey, "BASE", 1, json.RawMessage(failed[0].body))
	t.Logf("PutCell with only node 2 up: %v after %v", err, time.Since(start))
	assert.ErrorIs(t, err, client.ErrUnavailable, "PutCell with only node 2 up")
	assert.NotErrorIs(t, err, client.ErrIndeterminate, "PutCell with only node 2 up")
	_, err = cl.PutCells(ctx, []client.CellWrite{{Key: failed[1].key, Body: json.RawMessage(failed[1].body)}})
	assert.ErrorIs(t, err, client.ErrUnavailable, "PutCells with only node 2 up")
	assert.NotErrorIs(t, err, client.ErrIndeterminate, "PutCells with only node 2 up")
	_, err = cl.GetCell(ctx, written[0].key)
	assert.ErrorIs(t, err, client.ErrUnavailable, "strong GetCell with only node 2 up")
	assert.NotErrorIs(t, err, client.ErrIndeterminate, "strong GetCell with only node 2 up")
	// A short ctx ends the call on time, whatever attempt it is in.
	const short = time.Second
	shortCtx, cancelShort := context.WithTimeout(ctx, short)
	start = time.Now()
	_, err = cl.PutCell(shortCtx, itRow(t, 502), "BASE", 1, json.RawMessage(`{"f":3}`))
	took := time.Since(start)
	cancelShort()
	t.Logf("PutCell with a %v ctx: %v after %v", short, err, took)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "PutCell with a %v ctx", short)
	assert.LessOrEqual(t, took, short+time.Second, "PutCell with a %v ctx: time to return", short)
	assert.False(t, errors.Is(err, client.ErrIndeterminate) && errors.Is(err, client.ErrUnavailable),
		"PutCell with a %v ctx: got %v, want not both ErrIndeterminate and ErrUnavailable", short, err)

	// Back to three nodes: the failed writes were not applied, so writing them now creates them.
	c.StartNode(0)
	c.StartNode(1)
	c.WaitReady()
	for _, f := range failed {
		res, err := cl.PutCell(ctx, f.key.RowKey, f.key.ColumnKey, f.key.RefKey, json.RawMessage(f.body))
		assert.NoError(t, err, "PutCell %s after ErrUnavailable, cluster back", f.key)
		assert.Equal(t, wire.StatusCreated, res.Status, "PutCell %s after ErrUnavailable, cluster back: ErrUnavailable means not applied", f.key)
	}
	for _, w := range written {
		got, err := cl.GetCell(ctx, w.key)
		require.NoError(t, err, "GetCell after recovery")
		checkRead(t, "GetCell after recovery", got, w)
	}
}

// TestIntegrationIndeterminateRetry provokes indeterminate writes with per-attempt timeouts of a
// few milliseconds, then retries each with a healthy client: created or exists, never a
// conflict, and the cell reads back. A write that failed with ErrUnavailable was never applied,
// so its retry must create it.
func TestIntegrationIndeterminateRetry(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	healthy := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := healthy.Cluster(ctx)
	require.NoError(t, err, "Cluster")
	timeouts := []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond,
		5 * time.Millisecond, 8 * time.Millisecond, 13 * time.Millisecond, 21 * time.Millisecond}
	var indeterminate, unavailable, succeeded []itWrite
	// Every timeout a few times over; more only while no write has ended indeterminate yet.
	for i := 0; i < 6*len(timeouts) || (len(indeterminate) == 0 && i < 400); i++ {
		d := timeouts[i%len(timeouts)]
		hasty := itClient(t, c.URLs(), func(cfg *client.Config) {
			cfg.RequestTimeout = d
			cfg.MaxAttempts = 1
		})
		w := itWrite{key: cells.Key{RowKey: itRow(t, i), ColumnKey: "BASE", RefKey: 1}, body: fmt.Sprintf(`{"attempt":%d}`, i)}
		res, err := hasty.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		switch {
		case err == nil:
			w.addedID = res.AddedID
			succeeded = append(succeeded, w)
		case errors.Is(err, client.ErrIndeterminate):
			assert.NotErrorIs(t, err, client.ErrUnavailable, "write %d with a %v timeout: want ErrIndeterminate without ErrUnavailable", i, d)
			indeterminate = append(indeterminate, w)
		case errors.Is(err, client.ErrUnavailable):
			w.err = err
			unavailable = append(unavailable, w)
		default:
			require.Failf(t, "unexpected error", "write %d with a %v timeout: got %v, want nil, ErrIndeterminate or ErrUnavailable", i, d, err)
		}
	}
	t.Logf("with tiny timeouts: %d indeterminate, %d unavailable, %d succeeded", len(indeterminate), len(unavailable), len(succeeded))
	require.NotEmpty(t, indeterminate, "no write ended indeterminate: the test could not provoke the case it checks")
	var created, exists int
	for _, w := range indeterminate {
		res, err := healthy.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		if !assert.NoError(t, err, "retry of indeterminate %s", w.key) ||
			!assert.Contains(t, []string{wire.StatusCreated, wire.StatusExists}, res.Status, "retry of indeterminate %s: want created or exists", w.key) {
			continue
		}
		if res.Status == wire.StatusCreated {
			created++
		} else {
			exists++
		}
		w.addedID = res.AddedID
		got, err := healthy.GetCell(ctx, w.key)
		require.NoError(t, err, "GetCell after retry")
		checkRead(t, "GetCell after the retry of an indeterminate write", got, w)
	}
	t.Logf("retries of indeterminate writes: %d created (the first attempt was not applied), %d exists (it was)", created, exists)
	for _, w := range unavailable {
		res, err := healthy.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		assert.NoError(t, err, "retry of %s, which failed with ErrUnavailable", w.key)
		assert.Equal(t, wire.StatusCreated, res.Status, "retry of %s, which failed with ErrUnavailable (%v): ErrUnavailable means not applied", w.key, w.err)
	}
	for _, w := range succeeded {
		res, err := healthy.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		assert.NoError(t, err, "retry of acknowledged %s", w.key)
		assert.Equal(t, wire.StatusExists, res.Status, "retry of acknowledged %s: status", w.key)
		assert.Equal(t, w.addedID, res.AddedID, "retry of acknowledged %s: added_id", w.key)
	}
}
