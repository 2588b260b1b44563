package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/wire"
)

// The index tests run a 3-node cluster whose nodes run the index maintainer, write trips,
// define an index over them and compare every query with a brute-force reference computed from
// the cells written (indexes.Evaluate over entries built with indexes.Convert). This file holds
// the trips, the helpers and the build of version 1; indexes_query_test.go the queries and the
// refusals; indexes_versions_test.go writes after the build, a held build, and a new version
// switched to under load.

const tripIndexYAML = `
table: trip_index
datastore: trips
shard_field: driver
column_defs:
  - column_key: BASE
    fields:
      - { field: driver, type: string }
      - { field: city_uuid, type: uuid }
      - { field: delay, type: int }
      - { field: fare, type: float }
      - { field: date, type: datetime }
      - { field: paid, type: bool }
  - column_key: STATUS
    fields:
      - { field: status, type: string }
`

// tripIndexV2YAML is a second version of the index: one more field of BASE.
var tripIndexV2YAML = strings.Replace(tripIndexYAML, "      - { field: paid, type: bool }\n",
	"      - { field: paid, type: bool }\n      - { field: reason, type: string }\n", 1)

var (
	drivers = []string{"alice", "bob", "carol"}
	cities  = []string{
		"6f1c0f7e-0c39-4a5e-9b36-1f5b2d0e0a01", "0b3e8f4c-2f9d-4b8e-8d7a-3c6b9a1e2f02",
		"A4D2C6E8-1B3F-4C5D-9E7F-8A6B4C2D0E03", "ffffffff-ffff-4fff-bfff-ffffffffff04",
	}
	statuses = []string{"open", "done", "cancelled"}
)

// tripRow is one row written by the test: its BASE cells (ref keys 1, 2, ... in order) and
// STATUS cells.
type tripRow struct {
	key    uuid.UUID
	base   []map[string]any
	status []map[string]any
}

// randomBase returns a BASE body for driver with random fields, some absent or of the wrong type.
func randomBase(rng *rand.Rand, driver string) map[string]any {
	b := map[string]any{"driver": driver}
	if rng.IntN(8) > 0 {
		b["city_uuid"] = cities[rng.IntN(len(cities))]
	}
	switch rng.IntN(10) {
	case 0: // absent
	case 1:
		b["delay"] = "late" // not an int: indexed as NULL
	default:
		b["delay"] = rng.IntN(131) - 10
	}
	if rng.IntN(6) > 0 {
		b["fare"] = float64(rng.IntN(200)) / 4
	}
	day := 1 + rng.IntN(6)
	switch rng.IntN(3) {
	case 0:
		b["date"] = fmt.Sprintf("2001-01-%02d", day)
	case 1:
		b["date"] = fmt.Sprintf("2001-01-%02dT%02d:30:00Z", day, rng.IntN(24))
	default:
		b["date"] = time.Date(2001, 1, day, 12, 0, 0, 0, time.UTC).Unix() // Unix seconds
	}
	if rng.IntN(5) > 0 {
		b["paid"] = rng.IntN(2) == 0
	}
	return b
}

// entry builds the reference index entry of r under def: the shard value from the first BASE
// cell, the other fields from the latest cell of their column.
func (r tripRow) entry(t *testing.T, def indexes.Definition) indexes.Entry {
	t.Helper()
	fields := def.Fields()
	e := indexes.Entry{RowKey: r.key, Values: make([]any, len(fields))}
	latest := map[string]map[string]any{"BASE": r.base[len(r.base)-1]}
	if len(r.status) > 0 {
		latest["STATUS"] = r.status[len(r.status)-1]
	}
	for i, f := range fields {
		src := latest[f.Column]
		if i == 0 {
			src = r.base[0]
		}
		v, ok := indexes.Convert(f.Type, src[f.Name])
		if !ok {
			v = nil
		}
		e.Values[i] = v
	}
	return e
}

// latestBody returns the latest body r has in column, or nil.
func (r tripRow) latestBody(column string) map[string]any {
	bodies := r.base
	if column == "STATUS" {
		bodies = r.status
	}
	if len(bodies) == 0 {
		return nil
	}
	return bodies[len(bodies)-1]
}

// putCells writes cells through node 0 in batches, failing the test on any status but created
// or exists.
func (s *session) putCells(t *testing.T, cs []wire.PutCell) {
	t.Helper()
	for len(cs) > 0 {
		n := min(len(cs), 200)
		body, err := json.Marshal(wire.PutCellsRequest{Cells: cs[:n]})
		require.NoError(t, err)
		var res wire.PutCellsResponse
		s.doRetry(t, 0, "POST", "/v1/trips/cells", string(body)).expect(t, 200).decode(t, &res)
		for i, r := range res.Results {
			require.Contains(t, []string{wire.StatusCreated, wire.StatusExists}, r.Status, "put cell %d: status, want created (or exists, for a retried write)", i)
		}
		cs = cs[n:]
	}
}

func putCell(t *testing.T, row uuid.UUID, col string, ref int64, body map[string]any) wire.PutCell {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	return wire.PutCell{RowKey: row.String(), ColumnKey: col, RefKey: json.Number(fmt.Sprint(ref)), Body: b}
}

// indexStatus reads GET /v1/trips/indexes/{name} from node.
func (s *session) indexStatus(t *testing.T, node int, name string) wire.IndexStatus {
	t.Helper()
	var st wire.IndexStatus
	s.doRetry(t, node, "GET", "/v1/trips/indexes/"+name, "").expect(t, 200).decode(t, &st)
	return st
}

func findVersion(st wire.IndexStatus, version int) (wire.IndexVersionStatus, bool) {
	for _, v := range st.Versions {
		if v.Version == version {
			return v, true
		}
	}
	return wire.IndexVersionStatus{}, false
}

// waitCaughtUp waits up to 90s until version of name is ready and its maintainers have
// handled every cell written so far (lag 0) with wantEntries entries; with wantEntries -1, only
// until it is ready (while writes go on, the lag need not reach 0). An index without that
// version fails the test at once.
func (s *session) waitCaughtUp(t *testing.T, name string, version int, wantEntries int64) wire.IndexVersionStatus {
	t.Helper()
	// The condition runs in one goroutine at a time; v and stop are read only after
	// EventuallyWithT returns, once that goroutine has ended.
	var (
		v    wire.IndexVersionStatus
		stop error
	)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var st wire.IndexStatus
		if !s.poll(c, &stop, -1, "GET", "/v1/trips/indexes/"+name, "", 200, &st) {
			return
		}
		var ok bool
		if v, ok = findVersion(st, version); !ok {
			stop = fmt.Errorf("index %s has no version %d: %+v", name, version, st)
			return
		}
		assert.Equal(c, wire.IndexReady, v.State, "state (error %q)", v.Error)
		if wantEntries >= 0 {
			assert.Equal(c, wantEntries, v.Entries, "entries")
			assert.Zero(c, v.LagCells, "lag in cells")
			assert.Equal(c, 1.0, v.Progress, "progress")
		}
	}, 90*time.Second, 500*time.Millisecond, "index %s version %d caught up: ready, with %d entries (-1: any) and no lag", name, version, wantEntries)
	require.NoError(t, stop)
	return v
}

// queryAnswer is an index query's answer decoded with numbers as json.Number.
type queryAnswer struct {
	status int
	res    wire.IndexQueryResult
	err    wire.ErrorBody
	raw    []byte
}

// query posts q (a JSON-encodable value) to the query route of name on node, retrying 503s
// (doRetry).
func (s *session) query(t *testing.T, node int, name string, q any, params string) queryAnswer {
	t.Helper()
	a := s.doRetry(t, node, "POST", "/v1/trips/indexes/"+name+"/query"+params, queryBody(t, q))
	out := queryAnswer{status: a.status, raw: a.body}
	if a.status == 200 {
		a.decode(t, &out.res)
	} else {
		a.decode(t, &out.err)
	}
	return out
}

// queryBody is q (a JSON-encodable value) as JSON.
func queryBody(t *testing.T, q any) string {
	t.Helper()
	b, err := json.Marshal(q)
	require.NoError(t, err, "query %+v", q)
	return string(b)
}

// renderFields is what the API should answer as an entry's fields: the projected fields,
// formatted, as JSON decoded with UseNumber.
func renderFields(t *testing.T, fields []indexes.Field, plan indexes.Plan, e indexes.Entry) map[string]any {
	t.Helper()
	m := map[string]any{}
	for _, fi := range plan.Fields {
		m[fields[fi].Name] = indexes.Format(fields[fi].Type, e.Values[fi])
	}
	return jsonNumbers(t, m)
}

// jsonNumbers round-trips v through JSON, decoding numbers as json.Number.
func jsonNumbers(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&out), "decode %s", b)
	return out
}

// TestIndexes runs the index suite against a 3-node cluster on each engine. Parallel, one
// engine beside the other: each cluster has its own ports, directories and database prefix.
func TestIndexes(t *testing.T) {
	t.Parallel()
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			testIndexes(t, engine, seed)
		})
	}
}

func testIndexes(t *testing.T, engine clustertest.Engine, seed int64) {
	// Sessions of 10s: a maintainer whose heartbeat is slow on a loaded machine keeps its shards.
	c := clustertest.Start(t, clustertest.Options{Engine: engine, Indexes: true, API: api.Config{MaxIndexRequestBytes: 64 << 10},
		Maintainer: maintainer.Config{SessionTimeout: 10 * time.Second}})
	s := &session{c: c}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x1d))

	// Rows written before the index exists: the build backfills them.
	rows := map[uuid.UUID]*tripRow{}
	var first, later []wire.PutCell
	for i := 0; i < 150; i++ {
		r := &tripRow{key: uuid.New()}
		driver := drivers[rng.IntN(len(drivers))]
		r.base = append(r.base, randomBase(rng, driver))
		first = append(first, putCell(t, r.key, "BASE", 1, r.base[0]))
		if rng.IntN(4) == 0 { // an update of the row's BASE, same driver
			r.base = append(r.base, randomBase(rng, driver))
			later = append(later, putCell(t, r.key, "BASE", 2, r.base[1]))
		}
		for j := rng.IntN(3); j > 0; j-- {
			r.status = append(r.status, map[string]any{"status": statuses[rng.IntN(len(statuses))]})
			later = append(later, putCell(t, r.key, "STATUS", int64(len(r.status)), r.status[len(r.status)-1]))
		}
		rows[r.key] = r
	}
	// One row whose later BASE cell changes the driver: a violation of the immutable shard field.
	var violator *tripRow
	for _, r := range rows {
		if len(r.base) == 1 {
			violator = r
			break
		}
	}
	moved := randomBase(rng, "zed")
	violator.base = append(violator.base, moved)
	later = append(later, putCell(t, violator.key, "BASE", 2, moved))
	s.putCells(t, first)
	s.putCells(t, later)

	def, err := indexes.ParseDefinition([]byte(tripIndexYAML))
	require.NoError(t, err, "ParseDefinition")

	// Define: 201 building, then 200 for the same definition (JSON this time, without datastore).
	var created wire.IndexDefineResult
	a, tries := s.doRetryTries(t, 1, "POST", "/v1/trips/indexes", tripIndexYAML)
	if tries > 1 && a.status == 200 {
		// A 503 after the definition reached some partitions: the retry completed it.
		a.expect(t, 200).decode(t, &created)
		require.Equal(t, wire.IndexDefineResult{Index: "trip_index", Version: 1, State: wire.IndexBuilding}, created,
			"define, completed by a retry: trip_index version 1 building")
	} else {
		a.expect(t, 201).decode(t, &created)
		require.Equal(t, wire.IndexDefineResult{Index: "trip_index", Version: 1, State: wire.IndexBuilding, Created: true}, created,
			"define: trip_index version 1 building, created")
	}
	asJSON := wire.IndexDefinition{Table: "trip_index", ShardField: "driver"}
	for _, cd := range def.ColumnDefs {
		wc := wire.IndexColumnDef{ColumnKey: cd.ColumnKey}
		for _, f := range cd.Fields {
			wc.Fields = append(wc.Fields, wire.IndexFieldDef{Field: f.Field, Type: string(f.Type)})
		}
		asJSON.ColumnDefs = append(asJSON.ColumnDefs, wc)
	}
	jsonDef, err := json.Marshal(asJSON)
	require.NoError(t, err)
	var again wire.IndexDefineResult
	s.doRetry(t, 2, "POST", "/v1/trips/indexes", string(jsonDef)).expect(t, 200).decode(t, &again)
	require.Equal(t, 1, again.Version, "define again: version (%+v)", again)
	require.False(t, again.Created, "define again: created (%+v)", again)

	v1 := s.waitCaughtUp(t, "trip_index", 1, int64(len(rows)))
	require.Equal(t, int64(1), v1.Violations, "version 1 after the build: violations (%+v)", v1)
	require.NotZero(t, v1.TotalCells, "version 1 after the build: total cells (%+v)", v1)
	require.Equal(t, v1.TotalCells, v1.HandledCells, "version 1 after the build: every cell handled (%+v)", v1)
	require.NotNil(t, v1.ReadyAt, "version 1 after the build: a ready_at (%+v)", v1)
	require.NotZero(t, v1.Workers, "version 1 after the build: workers (%+v)", v1)
	require.Len(t, v1.Shards, 16, "version 1 after the build: shards (%+v)", v1)
	assert.Equal(t, "trips", v1.Definition.Datastore, "version 1 definition: datastore (%+v)", v1.Definition)
	assert.Equal(t, "UUID", v1.Definition.ColumnDefs[0].Fields[1].Type, "version 1 definition: canonical type of city_uuid (%+v)", v1.Definition)
	// The list counts entries with stale reads: node 0's replicas may still be applying the
	// last index entries that the node polled above had applied.
	var (
		list wire.IndexesResponse
		stop error
	)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list = wire.IndexesResponse{}
		if !s.poll(c, &stop, 0, "GET", "/v1/trips/indexes", "", 200, &list) {
			return
		}
		if assert.Len(c, list.Indexes, 1) && assert.Len(c, list.Indexes[0].Versions, 1) {
			assert.Equal(c, int64(len(rows)), list.Indexes[0].Versions[0].Entries, "entries")
		}
	}, 30*time.Second, 100*time.Millisecond, "node 0 lists index trip_index with %d entries", len(rows))
	require.NoError(t, stop)
	require.Len(t, list.Indexes, 1, "list: one index (%+v)", list)
	ix := list.Indexes[0]
	require.Equal(t, "trip_index", ix.Name, "list: the index (%+v)", list)
	require.Equal(t, 1, ix.Alias, "list: alias (%+v)", list)
	require.Len(t, ix.Versions, 1, "list: versions (%+v)", list)
	require.Nil(t, ix.Versions[0].Shards, "list: no per-shard offsets (%+v)", list)
	require.Equal(t, int64(len(rows)), ix.Versions[0].Entries, "list: entries of version 1 (%+v)", list)

	ref := make([]indexes.Entry, 0, len(rows))
	for _, r := range rows {
		ref = append(ref, r.entry(t, def))
	}
	t.Run("queries", func(t *testing.T) { s.testIndexQueries(t, def, rows, ref, violator) })
	t.Run("rejected", func(t *testing.T) { s.testIndexRejected(t) })
	t.Run("write_after_ready", func(t *testing.T) { s.testIndexWriteAfterReady(t, def) })
	t.Run("building", func(t *testing.T) { s.testIndexBuilding(t) })
	t.Run("new_version", func(t *testing.T) { s.testIndexNewVersion(t, def) })
}
