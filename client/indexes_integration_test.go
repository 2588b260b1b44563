package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/wire"
)

const itIndexDef = `
table: flights_by_origin
shard_field: origin
column_defs:
  - column_key: BASE
    fields:
      - { field: origin, type: string }
      - { field: delay, type: int }
      - { field: date, type: datetime }
`

// itFlight is a BASE cell written by the index test.
type itFlight struct {
	row    uuid.UUID
	origin string
	delay  int
	date   string
}

// itWaitIndex polls Index until version of name is ready with entries entries and no lag; an
// error of Index fails the test at once.
func itWaitIndex(t *testing.T, ctx context.Context, cl *client.Client, name string, version int, entries int64) wire.IndexVersionStatus {
	t.Helper()
	// The condition runs in one goroutine at a time; last and err are read only after
	// EventuallyWithT returns, once that goroutine has ended.
	var last wire.IndexVersionStatus
	var err error
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var st wire.IndexStatus
		if st, err = cl.Index(ctx, name); err != nil {
			return // ends the wait: fails below
		}
		for _, v := range st.Versions {
			if v.Version == version {
				last = v
			}
		}
		assert.Equal(ct, wire.IndexReady, last.State, "state (%+v)", last)
		assert.Zero(ct, last.LagCells, "lag (%+v)", last)
		assert.Equal(ct, entries, last.Entries, "entries (%+v)", last)
	}, 90*time.Second, 300*time.Millisecond, "index %s version %d: want ready with %d entries and no lag", name, version, entries)
	require.NoError(t, err, "Index(%s)", name)
	return last
}

func TestIntegrationIndexes(t *testing.T) {
	t.Parallel()
	// Sessions of 10s: a maintainer whose heartbeat is slow on a loaded machine keeps its shards.
	c := clustertest.Start(t, clustertest.Options{Indexes: true, Maintainer: maintainer.Config{SessionTimeout: 10 * time.Second}})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	origins := []string{"LAX", "SFO", "JFK"}
	var flights []itFlight
	var writes []client.CellWrite
	for i := 0; i < 45; i++ {
		f := itFlight{row: itRow(t, i), origin: origins[i%3], delay: (i * 37) % 90, date: fmt.Sprintf("2001-01-%02dT10:00:00Z", 1+i%5)}
		flights = append(flights, f)
		writes = append(writes, client.CellWrite{Key: cells.Key{RowKey: f.row, ColumnKey: "BASE", RefKey: 1},
			Body: json.RawMessage(fmt.Sprintf(`{"origin":%q,"delay":%d,"date":%q,"distance":%d}`, f.origin, f.delay, f.date, 100+i))})
	}
	_, err := cl.PutCells(ctx, writes)
	require.NoError(t, err, "PutCells")

	// Define, then define again: the same version.
	res, err := cl.DefineIndex(ctx, []byte(itIndexDef))
	require.NoError(t, err, "DefineIndex")
	require.Equal(t, wire.IndexDefineResult{Index: "flights_by_origin", Version: 1, State: wire.IndexBuilding, Created: true}, res,
		"DefineIndex: want version 1 created and building")
	res, err = cl.DefineIndex(ctx, []byte(itIndexDef))
	require.NoError(t, err, "DefineIndex again")
	require.Equal(t, 1, res.Version, "DefineIndex again: version")
	require.False(t, res.Created, "DefineIndex again: created")
	v1 := itWaitIndex(t, ctx, cl, "flights_by_origin", 1, int64(len(flights)))
	assert.Len(t, v1.Shards, 16, "Index version 1: shards")
	assert.Equal(t, 1.0, v1.Progress, "Index version 1: progress")
	assert.Equal(t, "origin", v1.Definition.ShardField, "Index version 1: shard field")
	list, err := cl.Indexes(ctx, client.WithConsistency(client.ConsistencyStale))
	require.NoError(t, err, "Indexes")
	require.Len(t, list.Indexes, 1, "Indexes: want flights_by_origin")
	require.Equal(t, 1, list.Indexes[0].Alias, "Indexes: alias")
	require.Nil(t, list.Indexes[0].Versions[0].Shards, "Indexes: want no per-shard offsets")

	// Every page of LAX flights with delay >= 20, latest delays first, checked against the
	// flights written.
	var want []itFlight
	for _, f := range flights {
		if f.origin == "LAX" && f.delay >= 20 {
			want = append(want, f)
		}
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].delay != want[j].delay {
			return want[i].delay > want[j].delay
		}
		return bytes.Compare(want[i].row[:], want[j].row[:]) > 0
	})
	q := wire.IndexQuery{ShardValue: "LAX", Where: []wire.IndexCond{{Field: "delay", Op: ">=", Value: 20}},
		OrderBy: "-delay", Limit: 4, Columns: []string{"BASE"}, Fields: []string{"delay", "date"}}
	var got []wire.IndexEntry
	for pages := 0; ; pages++ {
		require.LessOrEqual(t, pages, len(want), "QueryIndex: more pages than entries")
		page, err := cl.QueryIndex(ctx, "flights_by_origin", q)
		require.NoError(t, err, "QueryIndex page %d", pages)
		require.Equal(t, 1, page.Version, "QueryIndex page %d: version", pages)
		got = append(got, page.Entries...)
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	require.Len(t, got, len(want), "QueryIndex: entries")
	for i, e := range got {
		w := want[i]
		wantFields := map[string]any{"delay": json.Number(fmt.Sprint(w.delay)), "date": w.date}
		assert.Equal(t, w.row.String(), e.RowKey, "entry %d: row key", i)
		assert.Equal(t, wantFields, e.Fields, "entry %d: fields", i)
		base, ok := e.Cells["BASE"]
		if assert.True(t, ok, "entry %d: got cells %+v, want the flight's BASE cell", i, e.Cells) {
			assert.Equal(t, int64(1), base.RefKey, "entry %d: BASE cell's ref key", i)
			assert.Contains(t, string(base.Body), fmt.Sprintf(`"delay":%d`, w.delay), "entry %d: BASE cell's body", i)
		}
	}
	// The same pages through QueryIndexPages: every page, or the first only.
	q.Cursor = ""
	var all []wire.IndexEntry
	pages := 0
	next, err := cl.QueryIndexPages(ctx, "flights_by_origin", q, func(p wire.IndexQueryResult) (bool, error) {
		pages++
		assert.Equal(t, 1, p.Version, "QueryIndexPages page %d: version", pages)
		all = append(all, p.Entries...)
		return true, nil
	})
	require.NoError(t, err, "QueryIndexPages")
	assert.Empty(t, next, "QueryIndexPages to the end: no cursor left")
	assert.Equal(t, got, all, "QueryIndexPages: the entries of the pages read one by one")
	assert.Equal(t, (len(want)+3)/4, pages, "QueryIndexPages: pages of 4")
	next, err = cl.QueryIndexPages(ctx, "flights_by_origin", q, func(wire.IndexQueryResult) (bool, error) { return false, nil })
	require.NoError(t, err)
	assert.Equal(t, len(want) > 4, next != "", "QueryIndexPages stopped after the first page: its cursor")
	_, err = cl.QueryIndexPages(ctx, "flights_by_origin", q, func(wire.IndexQueryResult) (bool, error) { return true, errEnough })
	assert.ErrorIs(t, err, errEnough, "fn's error")
	stale, err := cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "SFO", Where: []wire.IndexCond{{Field: "date", Op: "in",
		Value: []any{"2001-01-01T10:00:00Z", "2001-01-02T10:00:00Z"}}}}, client.WithConsistency(client.ConsistencyStale))
	wantSFO := 0
	for _, f := range flights {
		if f.origin == "SFO" && (f.date == "2001-01-01T10:00:00Z" || f.date == "2001-01-02T10:00:00Z") {
			wantSFO++
		}
	}
	assert.NoError(t, err, "stale QueryIndex")
	assert.Len(t, stale.Entries, wantSFO, "stale QueryIndex: entries")
	assert.Empty(t, stale.NextCursor, "stale QueryIndex: want no cursor")

	// Errors name their field, and come with their sentinel.
	var ae *client.APIError
	_, err = cl.DefineIndex(ctx, []byte("table: x\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: a, type: money}\n"))
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "DefineIndex with an unknown type")
	if assert.ErrorAs(t, err, &ae, "DefineIndex with an unknown type: want an *APIError") {
		assert.Equal(t, "column_defs[0].fields[0].type", ae.Field, "DefineIndex with an unknown type: field")
	}
	_, err = cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "LAX", Where: []wire.IndexCond{{Field: "delay", Op: "~", Value: 1}}})
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "QueryIndex with a bad op")
	if assert.ErrorAs(t, err, &ae, "QueryIndex with a bad op: want an *APIError") {
		assert.Equal(t, "where[0].op", ae.Field, "QueryIndex with a bad op: field")
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode, "QueryIndex with a bad op: status")
	}
	_, err = cl.QueryIndex(ctx, "nope", wire.IndexQuery{ShardValue: "LAX"})
	assert.ErrorIs(t, err, client.ErrNotFound, "QueryIndex of an unknown index")
	_, err = cl.AliasIndex(ctx, "flights_by_origin", 7)
	assert.ErrorIs(t, err, client.ErrNotFound, "AliasIndex to an unknown version")
	_, err = cl.AliasIndex(ctx, "flights_by_origin", 0)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "AliasIndex to version 0")
	assert.NotErrorAs(t, err, &ae, "AliasIndex to version 0: want it unsent (no *APIError)")
	_, err = cl.Index(ctx, "")
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "Index with no name")

	// A new version, built beside the first, then the switch and the drop of version 1.
	res, err = cl.DefineIndex(ctx, []byte(itIndexDef+"      - { field: distance, type: int }\n"))
	require.NoError(t, err, "DefineIndex version 2")
	require.Equal(t, 2, res.Version, "DefineIndex version 2: version")
	require.True(t, res.Created, "DefineIndex version 2: created")
	if _, err := cl.AliasIndex(ctx, "flights_by_origin", 2); err != nil {
		assert.ErrorIs(t, err, client.ErrConflict, "AliasIndex to version 2 while it builds: want nil (already ready) or ErrConflict")
	}
	var seen []wire.IndexVersionStatus
	v2, err := cl.WaitIndexVersion(ctx, "flights_by_origin", 2, 100*time.Millisecond, func(v wire.IndexVersionStatus) { seen = append(seen, v) })
	require.NoError(t, err, "WaitIndexVersion 2")
	assert.Equal(t, wire.IndexReady, v2.State, "WaitIndexVersion: ready")
	if assert.NotEmpty(t, seen, "WaitIndexVersion: progress") {
		assert.Equal(t, v2, seen[len(seen)-1], "WaitIndexVersion: the last progress is the ready status")
	}
	_, err = cl.WaitIndexVersion(ctx, "flights_by_origin", 9, 100*time.Millisecond, nil)
	assert.ErrorIs(t, err, client.ErrNotFound, "WaitIndexVersion of a version that does not exist")
	itWaitIndex(t, ctx, cl, "flights_by_origin", 2, int64(len(flights)))
	_, err = cl.DropIndexVersion(ctx, "flights_by_origin", 1)
	assert.ErrorIs(t, err, client.ErrConflict, "DropIndexVersion of the alias target")
	al, err := cl.AliasIndex(ctx, "flights_by_origin", 2)
	require.NoError(t, err, "AliasIndex 2")
	require.Equal(t, 2, al.Alias, "AliasIndex 2: alias")
	// Every node's API serves version 2 soon after the switch; an error of QueryIndex ends the
	// wait and fails the test (err is read once the condition's goroutine has ended).
	err = nil
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var page wire.IndexQueryResult
		page, err = cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "JFK", Where: []wire.IndexCond{{Field: "distance", Op: ">", Value: 0}}, Limit: 1})
		if err != nil {
			return
		}
		assert.Equal(ct, 2, page.Version, "version (%+v)", page)
		assert.Len(ct, page.Entries, 1, "entries with a distance field (%+v)", page)
	}, 10*time.Second, 100*time.Millisecond, "QueryIndex after the switch: want version 2 with its distance field")
	require.NoError(t, err, "QueryIndex after the switch")
	dr, err := cl.DropIndexVersion(ctx, "flights_by_origin", 1)
	require.NoError(t, err, "DropIndexVersion 1")
	require.Contains(t, []string{wire.IndexDropped, wire.IndexDropping}, dr.State, "DropIndexVersion 1: state")
	// Dropping again is idempotent.
	_, err = cl.DropIndexVersion(ctx, "flights_by_origin", 1)
	assert.NoError(t, err, "DropIndexVersion 1 again")
	_, err = cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "JFK", Version: 1})
	assert.ErrorIs(t, err, client.ErrNotFound, "QueryIndex of the dropped version")

	// With one node down, the calls fail over to the others.
	c.StopNode(0)
	st, err := cl.Index(ctx, "flights_by_origin")
	require.NoError(t, err, "Index with node 0 down")
	require.Equal(t, 2, st.Alias, "Index with node 0 down: alias")
	for i := 0; i < 3; i++ {
		page, err := cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "LAX", Limit: 100})
		require.NoError(t, err, "QueryIndex with node 0 down")
		require.Len(t, page.Entries, 15, "QueryIndex with node 0 down: entries")
	}
}
