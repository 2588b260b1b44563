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

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// The tests in this file run the client against a real 3-node cluster (clustertest: loopback
// TCP, raft, SQLite stores, the HTTP API on every node).

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
	if err != nil {
		t.Fatalf("client.New: got %v, want nil", err)
	}
	return c
}

// itWrite is a cell written in a test and what the cluster answered.
type itWrite struct {
	key     cells.Key
	body    string // canonical JSON: the server answers bodies with sorted keys, no spaces
	addedID int64
}

// checkRead compares a cell read back with what was written: exact body bytes, same added_id.
func checkRead(t *testing.T, what string, got wire.Cell, want itWrite) {
	t.Helper()
	if got.RowKey != want.key.RowKey.String() || got.ColumnKey != want.key.ColumnKey || got.RefKey != want.key.RefKey ||
		string(got.Body) != want.body || got.AddedID != want.addedID || got.CreatedAt.IsZero() || got.CreatedAt.Location() != time.UTC {
		t.Errorf("%s: got %s/%s/%d body %s added_id %d created_at %v, want %s body %s added_id %d and a UTC created_at",
			what, got.RowKey, got.ColumnKey, got.RefKey, got.Body, got.AddedID, got.CreatedAt, want.key, want.body, want.addedID)
	}
}

func TestIntegrationRoundTrips(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{API: api.Config{MaxCellBodyBytes: 4096, MaxRequestBytes: 64 << 10, MaxBatchCells: 10}})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var written []itWrite

	// put_cell: created, exists (same JSON value, another spelling), conflict.
	row := itRow(t, 0)
	res, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{"fare": 10, "city": "SF"}`))
	if err != nil || res.Status != wire.StatusCreated || res.AddedID < 1 || res.RowKey != row.String() || res.ColumnKey != "BASE" || res.RefKey != 1 {
		t.Fatalf("PutCell new: got %+v, %v, want created for %s/BASE/1 with an added_id", res, err, row)
	}
	base := itWrite{key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, body: `{"city":"SF","fare":10}`, addedID: res.AddedID}
	written = append(written, base)
	again, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{"city":"SF","fare":10.0}`))
	if err != nil || again.Status != wire.StatusExists || again.AddedID != res.AddedID {
		t.Errorf("PutCell same body: got %+v, %v, want exists with added_id %d", again, err, res.AddedID)
	}
	conf, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{"fare":11}`))
	var ae *client.APIError
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.Code != wire.CodeConflict {
		t.Errorf("PutCell other body: got %v, want ErrConflict from a 409 conflict answer", err)
	}
	if conf.Status != wire.StatusConflict || conf.RowKey != row.String() {
		t.Errorf("PutCell other body: got result %+v, want status conflict for %s", conf, row)
	}
	got, err := cl.GetCell(ctx, base.key)
	if err != nil {
		t.Fatalf("GetCell: got %v, want nil", err)
	}
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
	if err != nil || len(results) != len(batch) {
		t.Fatalf("PutCells: got %d results, %v, want %d and nil", len(results), err, len(batch))
	}
	for i, r := range results {
		want := wire.StatusCreated
		switch i {
		case 6:
			want = wire.StatusExists
		case 7:
			want = wire.StatusConflict
		}
		if r.Status != want || r.RowKey != batch[i].Key.RowKey.String() || r.RefKey != batch[i].Key.RefKey {
			t.Errorf("PutCells result %d: got %+v, want %s for %s", i, r, want, batch[i].Key)
		}
		if i < 6 {
			written = append(written, itWrite{key: batch[i].Key, body: string(batch[i].Body), addedID: r.AddedID})
		} else if r.AddedID != base.addedID {
			t.Errorf("PutCells result %d (stored cell): got added_id %d, want %d", i, r.AddedID, base.addedID)
		}
	}
	if rs, err := cl.PutCells(ctx, nil); rs != nil || err != nil {
		t.Errorf("PutCells(nil): got %v, %v, want nil, nil", rs, err)
	}

	// get_cell and get_cell_latest, strong and (eventually) stale.
	status := map[int64]itWrite{}
	for _, ref := range []int64{1, 7, 3} {
		r, err := cl.PutCell(ctx, row, "STATUS", ref, json.RawMessage(fmt.Sprintf(`{"s":"v%d"}`, ref)))
		if err != nil || r.Status != wire.StatusCreated {
			t.Fatalf("PutCell STATUS/%d: got %+v, %v, want created", ref, r, err)
		}
		status[ref] = itWrite{key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: ref}, body: fmt.Sprintf(`{"s":"v%d"}`, ref), addedID: r.AddedID}
		written = append(written, status[ref])
	}
	for _, w := range written {
		got, err := cl.GetCell(ctx, w.key)
		if err != nil {
			t.Fatalf("GetCell(%s): got %v, want nil", w.key, err)
		}
		checkRead(t, "GetCell", got, w)
	}
	latest, err := cl.GetCellLatest(ctx, row, "STATUS")
	if err != nil {
		t.Fatalf("GetCellLatest: got %v, want nil", err)
	}
	checkRead(t, "GetCellLatest", latest, status[7])
	stale := itClient(t, c.URLs(), func(cfg *client.Config) { cfg.Consistency = client.ConsistencyStale })
	waitFor(t, 10*time.Second, "stale reads see every cell", func() error {
		for _, w := range written {
			got, err := stale.GetCell(ctx, w.key)
			if err != nil {
				return fmt.Errorf("stale GetCell(%s): %w", w.key, err)
			}
			checkRead(t, "stale GetCell", got, w)
		}
		return nil
	})

	// get_row: the latest cell of each column, by column key.
	rowCells, err := cl.GetRow(ctx, row)
	if err != nil || len(rowCells) != 2 {
		t.Fatalf("GetRow: got %d cells, %v, want 2 (BASE, STATUS) and nil", len(rowCells), err)
	}
	checkRead(t, "GetRow cell 0", rowCells[0], base)
	checkRead(t, "GetRow cell 1", rowCells[1], status[7])
	if empty, err := cl.GetRow(ctx, itRow(t, 999)); err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("GetRow(unwritten row): got %#v, %v, want an empty slice and nil", empty, err)
	}

	// get_cells: found in order, missing echoed as given.
	gc, err := cl.GetCells(ctx, []client.GetKey{
		{RowKey: row, ColumnKey: "STATUS", RefKey: 3},
		{RowKey: row, ColumnKey: "STATUS", RefKey: 4},
		{RowKey: row, ColumnKey: "STATUS", Latest: true},
		{RowKey: itRow(t, 3), ColumnKey: "TRIP", RefKey: 3},
		{RowKey: itRow(t, 3), ColumnKey: "NOPE", Latest: true},
	})
	if err != nil || len(gc.Cells) != 3 || len(gc.Missing) != 2 {
		t.Fatalf("GetCells: got %d cells %d missing, %v, want 3, 2 and nil", len(gc.Cells), len(gc.Missing), err)
	}
	checkRead(t, "GetCells cell 0", gc.Cells[0], status[3])
	checkRead(t, "GetCells cell 1", gc.Cells[1], status[7])
	checkRead(t, "GetCells cell 2", gc.Cells[2], written[3])
	if m := gc.Missing[0]; m.RowKey != row.String() || m.ColumnKey != "STATUS" || m.RefKey == nil || m.RefKey.String() != "4" {
		t.Errorf("GetCells missing 0: got %+v, want %s/STATUS/4", m, row)
	}
	if m := gc.Missing[1]; m.RowKey != itRow(t, 3).String() || m.ColumnKey != "NOPE" || m.RefKey != nil {
		t.Errorf("GetCells missing 1: got %+v, want %s/NOPE without a ref key", m, itRow(t, 3))
	}

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
			if err != nil {
				t.Fatalf("ShardCells(%d, %d, 2): got %v, want nil", shard, after, err)
			}
			if len(page.Cells) == 0 {
				if page.NextLocation != after {
					t.Errorf("ShardCells(%d) empty page: got next_location %d, want %d", shard, page.NextLocation, after)
				}
				break
			}
			gotCells = append(gotCells, page.Cells...)
			after = page.NextLocation
			if pages > len(want) {
				t.Fatalf("ShardCells(%d): more pages than cells", shard)
			}
		}
		if len(gotCells) != len(want) {
			t.Fatalf("ShardCells(%d): got %d cells, want %d", shard, len(gotCells), len(want))
		}
		for i := range want {
			checkRead(t, fmt.Sprintf("ShardCells(%d) cell %d", shard, i), gotCells[i], want[i])
		}
	}

	// not_found.
	if _, err := cl.GetCell(ctx, cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: 2}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetCell(missing): got %v, want ErrNotFound", err)
	}
	if _, err := cl.GetCellLatest(ctx, row, "NOPE"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetCellLatest(missing column): got %v, want ErrNotFound", err)
	}
	nope := cl.WithDatastore("nope")
	if _, err := nope.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{}`)); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("PutCell(unknown datastore): got %v, want ErrNotFound", err)
	}
	if _, err := nope.GetRow(ctx, row); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetRow(unknown datastore): got %v, want ErrNotFound", err)
	}

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
		if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != tc.field || errors.As(err, &ae) {
			t.Errorf("%s: got %v, want ErrInvalidArgument with a *cells.FieldError for %q and no *APIError", tc.name, err, tc.field)
		}
	}
	if rc, err := cl.GetRow(ctx, itRow(t, 50)); err != nil || len(rc) != 0 {
		t.Errorf("row of the refused writes: got %d cells, %v, want none", len(rc), err)
	}
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
		if !errors.Is(err, tc.is) || !errors.As(err, &ae) || ae.StatusCode != tc.status || ae.Code != tc.code || ae.Field != tc.field {
			t.Errorf("%s: got %v, want %v from a %d %s answer naming field %q", tc.name, err, tc.is, tc.status, tc.code, tc.field)
		}
	}
	if rc, err := cl.GetRow(ctx, itRow(t, 51)); err != nil || len(rc) != 0 {
		t.Errorf("row of the rejected writes: got %d cells, %v, want none", len(rc), err)
	}

	// cluster status, readyz and healthz of every node.
	seen := map[string]bool{}
	for i := 0; i < 6; i++ { // successive calls rotate over the nodes
		st, err := cl.Cluster(ctx)
		if err != nil {
			t.Fatalf("Cluster: got %v, want nil", err)
		}
		seen[st.Node] = true
		if len(st.Nodes) != 3 || len(st.Datastores) != 1 {
			t.Fatalf("Cluster from %s: got %d nodes %d datastores, want 3 and 1", st.Node, len(st.Nodes), len(st.Datastores))
		}
		for j, n := range st.Nodes {
			if want := c.Topology.Nodes[j]; n.ID != want.ID || n.HTTPAddr != want.HTTPAddr || n.RaftAddr != want.RaftAddr {
				t.Errorf("Cluster from %s: node %d got %+v, want %+v", st.Node, j, n, want)
			}
		}
		d := st.Datastores[0]
		if d.Name != "trips" || d.Mode != "raft" || d.Shards != shards || len(d.Partitions) != 2 {
			t.Fatalf("Cluster from %s: got datastore %+v, want trips, raft, %d shards, 2 partitions", st.Node, d, shards)
		}
		for _, p := range d.Partitions {
			if want := c.Topology.Nodes[c.LeaderOf(p.ID)].ID; p.Leader != want || !p.Local || len(p.Replicas) != 3 || p.AppliedIndex == 0 {
				t.Errorf("Cluster from %s: partition %+v, want leader %s, local, 3 replicas, an applied index", st.Node, p, want)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("Cluster over 6 calls: got answers from %v, want every node (calls rotate over endpoints)", seen)
	}
	for _, u := range c.URLs() {
		if err := cl.Ready(ctx, u); err != nil {
			t.Errorf("Ready(%s): got %v, want nil", u, err)
		}
		if err := cl.Healthy(ctx, u); err != nil {
			t.Errorf("Healthy(%s): got %v, want nil", u, err)
		}
	}
}

// waitFor polls f until it returns nil, failing the test with its last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestIntegrationFailover: with node 0 (the first endpoint) down, every call succeeds through
// nodes 1 and 2; with node 1 down too, stale reads still succeed through node 2 while writes
// and strong reads fail with ErrUnavailable, within their context.
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
		// exists: a retried attempt (504, timeout) had been applied; the cell is ours either way.
		if err != nil || (res.Status != wire.StatusCreated && res.Status != wire.StatusExists) {
			t.Fatalf("PutCell %s: got %+v, %v, want created (or exists after a retry) and no error", w.key, res, err)
		}
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
		if err != nil || len(res) != 2 || res[0].Status == wire.StatusConflict || res[1].Status == wire.StatusConflict {
			t.Fatalf("round %d: PutCells with node 0 down: got %+v, %v, want two created (or exists) and no error", round, res, err)
		}
		for i, r := range res {
			written = append(written, itWrite{key: batch[i].Key, body: `{"b":1}`, addedID: r.AddedID})
		}
		got, err := cl.GetCell(ctx, w.key)
		if err != nil {
			t.Fatalf("round %d: GetCell with node 0 down: got %v, want nil", round, err)
		}
		checkRead(t, "GetCell with node 0 down", got, w)
		latest, err := cl.GetCellLatest(ctx, w.key.RowKey, "BASE")
		if err != nil {
			t.Fatalf("round %d: GetCellLatest with node 0 down: got %v, want nil", round, err)
		}
		checkRead(t, "GetCellLatest with node 0 down", latest, w)
		if rc, err := cl.GetRow(ctx, w.key.RowKey); err != nil || len(rc) != 1 {
			t.Fatalf("round %d: GetRow with node 0 down: got %d cells, %v, want 1 and nil", round, len(rc), err)
		}
		if gc, err := cl.GetCells(ctx, []client.GetKey{{RowKey: w.key.RowKey, ColumnKey: "BASE", Latest: true}}); err != nil || len(gc.Cells) != 1 {
			t.Fatalf("round %d: GetCells with node 0 down: got %+v, %v, want 1 cell and nil", round, gc, err)
		}
		if sc, err := cl.ShardCells(ctx, cells.ShardOf(w.key.RowKey, c.Topology.Datastores[0].Shards), 0, 0); err != nil || len(sc.Cells) == 0 {
			t.Fatalf("round %d: ShardCells with node 0 down: got %d cells, %v, want some and nil", round, len(sc.Cells), err)
		}
		if st, err := cl.Cluster(ctx); err != nil || st.Node == c.Topology.Nodes[0].ID {
			t.Fatalf("round %d: Cluster with node 0 down: got node %q, %v, want n2 or n3 and nil", round, st.Node, err)
		}
	}

	// Before stopping node 1, node 2 must have applied everything (a stale read reads what the
	// replica applied; node 2 alone cannot commit anything later).
	only2 := itClient(t, []string{c.URL(2)}, func(cfg *client.Config) { cfg.Consistency = client.ConsistencyStale })
	waitFor(t, 10*time.Second, "node 2 applies every write", func() error {
		for _, w := range written {
			if _, err := only2.GetCell(ctx, w.key); err != nil {
				return err
			}
		}
		return nil
	})
	c.StopNode(1)

	// Stale reads: served by node 2, through the client configured with all three endpoints.
	staleOpt := client.WithConsistency(client.ConsistencyStale)
	for round := 0; round < 3; round++ {
		for _, w := range written {
			got, err := cl.GetCell(ctx, w.key, staleOpt)
			if err != nil {
				t.Fatalf("stale GetCell with only node 2 up: got %v, want nil", err)
			}
			checkRead(t, "stale GetCell with only node 2 up", got, w)
		}
		w := written[round]
		latest, err := cl.GetCellLatest(ctx, w.key.RowKey, w.key.ColumnKey, staleOpt)
		if err != nil {
			t.Fatalf("stale GetCellLatest with only node 2 up: got %v, want nil", err)
		}
		checkRead(t, "stale GetCellLatest with only node 2 up", latest, w)
		if rc, err := cl.GetRow(ctx, w.key.RowKey, staleOpt); err != nil || len(rc) != 1 {
			t.Fatalf("stale GetRow with only node 2 up: got %d cells, %v, want 1 and nil", len(rc), err)
		}
		if gc, err := cl.GetCells(ctx, []client.GetKey{{RowKey: w.key.RowKey, ColumnKey: w.key.ColumnKey, RefKey: w.key.RefKey}}, staleOpt); err != nil || len(gc.Cells) != 1 {
			t.Fatalf("stale GetCells with only node 2 up: got %+v, %v, want 1 cell and nil", gc, err)
		}
		if _, err := cl.ShardCells(ctx, 0, 0, 0, staleOpt); err != nil {
			t.Fatalf("stale ShardCells with only node 2 up: got %v, want nil", err)
		}
	}

	// Once node 2 leads nothing, no attempt can apply a write: each fails with ErrUnavailable
	// (never indeterminate) after MaxAttempts, well before ctx ends.
	waitFor(t, 10*time.Second, "node 2 steps down", func() error {
		for _, r := range c.Node(2).Replicas() {
			if r.State == "Leader" {
				return fmt.Errorf("node 2 still leads partition %d", r.Partition)
			}
		}
		return nil
	})
	failed := []itWrite{
		{key: cells.Key{RowKey: itRow(t, 500), ColumnKey: "BASE", RefKey: 1}, body: `{"f":1}`},
		{key: cells.Key{RowKey: itRow(t, 501), ColumnKey: "BASE", RefKey: 1}, body: `{"f":2}`},
	}
	start := time.Now()
	_, err := cl.PutCell(ctx, failed[0].key.RowKey, "BASE", 1, json.RawMessage(failed[0].body))
	t.Logf("PutCell with only node 2 up: %v after %v", err, time.Since(start))
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrIndeterminate) {
		t.Errorf("PutCell with only node 2 up: got %v, want ErrUnavailable and not ErrIndeterminate", err)
	}
	_, err = cl.PutCells(ctx, []client.CellWrite{{Key: failed[1].key, Body: json.RawMessage(failed[1].body)}})
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrIndeterminate) {
		t.Errorf("PutCells with only node 2 up: got %v, want ErrUnavailable and not ErrIndeterminate", err)
	}
	_, err = cl.GetCell(ctx, written[0].key)
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrIndeterminate) {
		t.Errorf("strong GetCell with only node 2 up: got %v, want ErrUnavailable and not ErrIndeterminate", err)
	}
	// A short ctx ends the call on time, whatever attempt it is in.
	const short = time.Second
	shortCtx, cancelShort := context.WithTimeout(ctx, short)
	start = time.Now()
	_, err = cl.PutCell(shortCtx, itRow(t, 502), "BASE", 1, json.RawMessage(`{"f":3}`))
	took := time.Since(start)
	cancelShort()
	t.Logf("PutCell with a %v ctx: %v after %v", short, err, took)
	if !errors.Is(err, context.DeadlineExceeded) || took > short+time.Second {
		t.Errorf("PutCell with a %v ctx: got %v after %v, want context.DeadlineExceeded within %v", short, err, took, short+time.Second)
	}
	if errors.Is(err, client.ErrIndeterminate) && errors.Is(err, client.ErrUnavailable) {
		t.Errorf("PutCell with a %v ctx: got %v, want not both ErrIndeterminate and ErrUnavailable", short, err)
	}

	// Back to three nodes: the failed writes were not applied, so writing them now creates them.
	c.StartNode(0)
	c.StartNode(1)
	c.WaitReady()
	for _, f := range failed {
		res, err := cl.PutCell(ctx, f.key.RowKey, f.key.ColumnKey, f.key.RefKey, json.RawMessage(f.body))
		if err != nil || res.Status != wire.StatusCreated {
			t.Errorf("PutCell %s after ErrUnavailable, cluster back: got %+v, %v, want created (ErrUnavailable means not applied)", f.key, res, err)
		}
	}
	for _, w := range written {
		got, err := cl.GetCell(ctx, w.key)
		if err != nil {
			t.Fatalf("GetCell after recovery: got %v, want nil", err)
		}
		checkRead(t, "GetCell after recovery", got, w)
	}
}

// TestIntegrationIndeterminateRetry provokes indeterminate writes with per-attempt timeouts of a
// few milliseconds, then retries each with a healthy client: created or exists, never a
// conflict, and the cell reads back. A write that failed with ErrUnavailable was never applied,
// so its retry must create it.
func TestIntegrationIndeterminateRetry(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	healthy := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := healthy.Cluster(ctx); err != nil {
		t.Fatalf("Cluster: got %v, want nil", err)
	}
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
			if errors.Is(err, client.ErrUnavailable) {
				t.Errorf("write %d with a %v timeout: got %v, want ErrIndeterminate without ErrUnavailable", i, d, err)
			}
			indeterminate = append(indeterminate, w)
		case errors.Is(err, client.ErrUnavailable):
			unavailable = append(unavailable, w)
		default:
			t.Fatalf("write %d with a %v timeout: got %v, want nil, ErrIndeterminate or ErrUnavailable", i, d, err)
		}
	}
	t.Logf("with tiny timeouts: %d indeterminate, %d unavailable, %d succeeded", len(indeterminate), len(unavailable), len(succeeded))
	if len(indeterminate) == 0 {
		t.Fatal("no write ended indeterminate: the test could not provoke the case it checks")
	}
	var created, exists int
	for _, w := range indeterminate {
		res, err := healthy.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		if err != nil || (res.Status != wire.StatusCreated && res.Status != wire.StatusExists) {
			t.Errorf("retry of indeterminate %s: got %+v, %v, want created or exists and no error", w.key, res, err)
			continue
		}
		if res.Status == wire.StatusCreated {
			created++
		} else {
			exists++
		}
		w.addedID = res.AddedID
		got, err := healthy.GetCell(ctx, w.key)
		if err != nil {
			t.Fatalf("GetCell after retry: got %v, want nil", err)
		}
		checkRead(t, "GetCell after the retry of an indeterminate write", got, w)
	}
	t.Logf("retries of indeterminate writes: %d created (the first attempt was not applied), %d exists (it was)", created, exists)
	for _, w := range unavailable {
		res, err := healthy.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		if err != nil || res.Status != wire.StatusCreated {
			t.Errorf("retry of %s, which failed with ErrUnavailable: got %+v, %v, want created (ErrUnavailable means not applied)", w.key, res, err)
		}
	}
	for _, w := range succeeded {
		res, err := healthy.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body))
		if err != nil || res.Status != wire.StatusExists || res.AddedID != w.addedID {
			t.Errorf("retry of acknowledged %s: got %+v, %v, want exists with added_id %d", w.key, res, err, w.addedID)
		}
	}
}
