package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
)

// The index tests run a 3-node cluster whose nodes run the index maintainer, write trips,
// define an index over them and compare every query with a brute-force reference computed from
// the cells written (indexes.Evaluate over entries built with indexes.Convert).

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
		if err != nil {
			t.Fatal(err)
		}
		var res wire.PutCellsResponse
		s.doRetry(t, 0, "POST", "/v1/trips/cells", string(body)).expect(t, 200).decode(t, &res)
		for i, r := range res.Results {
			if r.Status != wire.StatusCreated && r.Status != wire.StatusExists {
				t.Fatalf("put cell %d: got status %s, want created", i, r.Status)
			}
		}
		cs = cs[n:]
	}
}

func putCell(t *testing.T, row uuid.UUID, col string, ref int64, body map[string]any) wire.PutCell {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
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

// waitCaughtUp waits until version of name is ready and its maintainers have handled every
// cell written so far (lag 0) with wantEntries entries; with wantEntries -1, only until it is
// ready (while writes go on, the lag need not reach 0).
func (s *session) waitCaughtUp(t *testing.T, name string, version int, wantEntries int64) wire.IndexVersionStatus {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last wire.IndexVersionStatus
	for time.Now().Before(deadline) {
		st := s.indexStatus(t, -1, name)
		v, ok := findVersion(st, version)
		if !ok {
			t.Fatalf("index %s has no version %d: %+v", name, version, st)
		}
		last = v
		if v.State == wire.IndexReady && (wantEntries < 0 || v.LagCells == 0 && v.Progress == 1 && v.Entries == wantEntries) {
			return v
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("index %s version %d not caught up after 90s: state %s, entries %d (want %d), lag %d cells, progress %.3f, error %q",
		name, version, last.State, last.Entries, wantEntries, last.LagCells, last.Progress, last.Error)
	return last
}

// queryAnswer is an index query's answer decoded with numbers as json.Number.
type queryAnswer struct {
	status int
	res    wire.IndexQueryResult
	err    wire.ErrorBody
	raw    []byte
}

// query posts q (a JSON-encodable value) to the query route of name on node.
func (s *session) query(t *testing.T, node int, name string, q any, params string) queryAnswer {
	t.Helper()
	body, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	a := s.doRetry(t, node, "POST", "/v1/trips/indexes/"+name+"/query"+params, string(body))
	out := queryAnswer{status: a.status, raw: a.body}
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if a.status == 200 {
		err = dec.Decode(&out.res)
	} else {
		err = dec.Decode(&out.err)
	}
	if err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	return out
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
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestIndexes(t *testing.T) {
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) {
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
	s := &session{t: t, c: c}
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
	if err != nil {
		t.Fatalf("ParseDefinition: %v", err)
	}

	// Define: 201 building, then 200 for the same definition (JSON this time, without datastore).
	var created wire.IndexDefineResult
	s.doRetry(t, 1, "POST", "/v1/trips/indexes", tripIndexYAML).expect(t, 201).decode(t, &created)
	if created != (wire.IndexDefineResult{Index: "trip_index", Version: 1, State: wire.IndexBuilding, Created: true}) {
		t.Fatalf("define: got %+v, want trip_index version 1 building, created", created)
	}
	asJSON := wire.IndexDefinition{Table: "trip_index", ShardField: "driver"}
	for _, cd := range def.ColumnDefs {
		wc := wire.IndexColumnDef{ColumnKey: cd.ColumnKey}
		for _, f := range cd.Fields {
			wc.Fields = append(wc.Fields, wire.IndexFieldDef{Field: f.Field, Type: string(f.Type)})
		}
		asJSON.ColumnDefs = append(asJSON.ColumnDefs, wc)
	}
	jsonDef, _ := json.Marshal(asJSON)
	var again wire.IndexDefineResult
	s.doRetry(t, 2, "POST", "/v1/trips/indexes", string(jsonDef)).expect(t, 200).decode(t, &again)
	if again.Version != 1 || again.Created {
		t.Fatalf("define again: got %+v, want version 1, not created", again)
	}

	v1 := s.waitCaughtUp(t, "trip_index", 1, int64(len(rows)))
	if v1.Violations != 1 || v1.TotalCells == 0 || v1.HandledCells != v1.TotalCells || v1.ReadyAt == nil || v1.Workers == 0 || len(v1.Shards) != 16 {
		t.Fatalf("version 1 after the build: got %+v, want 1 violation, all cells handled, a ready_at, workers and 16 shards", v1)
	}
	if v1.Definition.Datastore != "trips" || v1.Definition.ColumnDefs[0].Fields[1].Type != "UUID" {
		t.Errorf("version 1 definition: got %+v, want datastore trips and canonical types", v1.Definition)
	}
	var list wire.IndexesResponse
	s.doRetry(t, 0, "GET", "/v1/trips/indexes", "").expect(t, 200).decode(t, &list)
	if len(list.Indexes) != 1 || list.Indexes[0].Name != "trip_index" || list.Indexes[0].Alias != 1 ||
		len(list.Indexes[0].Versions) != 1 || list.Indexes[0].Versions[0].Shards != nil || list.Indexes[0].Versions[0].Entries != int64(len(rows)) {
		t.Fatalf("list: got %+v, want trip_index with alias 1, one version of %d entries and no per-shard offsets", list, len(rows))
	}

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

// indexCase is one query and how to check it.
type indexCase struct {
	name string
	q    indexes.Query
}

func (s *session) testIndexQueries(t *testing.T, def indexes.Definition, rows map[uuid.UUID]*tripRow, ref []indexes.Entry, violator *tripRow) {
	fields := def.Fields()
	c0, c1 := strings.ToLower(cities[0]), strings.ToLower(cities[2])
	var cases []indexCase
	for _, d := range drivers {
		cases = append(cases,
			indexCase{"all " + d, indexes.Query{ShardValue: d, Limit: 7}},
			indexCase{"delay>60 by -delay " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "delay", Op: ">", Value: json.Number("60")}},
				OrderBy: &indexes.OrderBy{Field: "delay", Desc: true}, Limit: 5}},
			indexCase{"date= " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "date", Op: "=", Value: "2001-01-03"}}}},
			indexCase{"city in " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "city_uuid", Op: "in", Value: []any{c0, strings.ToUpper(c1)}}},
				OrderBy: &indexes.OrderBy{Field: "city_uuid"}, Limit: 4}},
			indexCase{"delay!=30 " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "delay", Op: "!=", Value: json.Number("30")}},
				OrderBy: &indexes.OrderBy{Field: "date"}, Limit: 9}},
			indexCase{"delay<=45 and paid " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "delay", Op: "<=", Value: json.Number("45")},
				{Field: "paid", Op: "=", Value: true}}}},
			indexCase{"fare>=10.5 by fare " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "fare", Op: ">=", Value: json.Number("10.5")}},
				OrderBy: &indexes.OrderBy{Field: "fare"}, Limit: 6}},
			indexCase{"status done, projected, columns " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "status", Op: "=", Value: "done"}},
				Fields: []string{"delay", "status"}, Columns: []string{"STATUS", "BASE"}, Limit: 3}},
			indexCase{"date< by date desc " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "date", Op: "<", Value: "2001-01-04T12:00:00Z"}},
				OrderBy: &indexes.OrderBy{Field: "date", Desc: true}, Limit: 8}},
			indexCase{"paid=false, columns BASE " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "paid", Op: "=", Value: false}},
				Columns: []string{"BASE"}, Limit: 1000}},
			indexCase{"delay<0 and date>=unix seconds " + d, indexes.Query{ShardValue: d, Where: []indexes.Cond{{Field: "delay", Op: "<", Value: json.Number("0")},
				{Field: "date", Op: ">=", Value: json.Number("978350400")}}}},
			indexCase{"by -status " + d, indexes.Query{ShardValue: d, OrderBy: &indexes.OrderBy{Field: "status", Desc: true}, Limit: 11,
				Fields: []string{"status", "driver"}}},
		)
	}
	cases = append(cases, indexCase{"nobody", indexes.Query{ShardValue: "nobody", Limit: 5}})
	wantCols := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			full, err := indexes.Compile(def, indexes.Query{ShardValue: tc.q.ShardValue, Where: tc.q.Where, OrderBy: tc.q.OrderBy}, 16, indexes.Limits{MaxLimit: 1 << 20})
			if err != nil {
				t.Fatalf("compile %+v: %v", tc.q, err)
			}
			full.Limit = 0
			want := indexes.Evaluate(full, ref)
			var got []string
			q := tc.q
			for page := 0; ; page++ {
				if page > len(ref)+1 {
					t.Fatalf("more pages than entries: the cursor does not advance")
				}
				params := ""
				if page%2 == 1 {
					params = "?consistency=stale" // stale reads answer too (the data is long replicated)
				}
				a := s.query(t, page%3, "trip_index", q, params)
				if a.status != 200 {
					t.Fatalf("page %d: status %d, want 200; body %s", page, a.status, a.raw)
				}
				plan, err := indexes.Compile(def, q, 16, indexes.DefaultLimits())
				if err != nil {
					t.Fatalf("compile page %d: %v", page, err)
				}
				wantPage := indexes.Evaluate(plan, ref)
				if a.res.Index != "trip_index" || a.res.Version != 1 {
					t.Fatalf("page %d: answered by %s version %d, want trip_index version 1", page, a.res.Index, a.res.Version)
				}
				if len(a.res.Entries) != len(wantPage) {
					t.Fatalf("page %d: got %d entries, want %d (%s)", page, len(a.res.Entries), len(wantPage), a.raw)
				}
				for i, e := range a.res.Entries {
					w := wantPage[i]
					if e.RowKey != w.RowKey.String() {
						t.Fatalf("page %d entry %d: got row %s, want %s", page, i, e.RowKey, w.RowKey)
					}
					if wf := renderFields(t, fields, plan, w); !reflect.DeepEqual(e.Fields, wf) {
						t.Errorf("page %d entry %d (%s): got fields %v, want %v", page, i, e.RowKey, e.Fields, wf)
					}
					if (e.Violation != 0) != (w.RowKey == violator.key) {
						t.Errorf("page %d entry %d (%s): got violation %d, want one only for the violating row %s", page, i, e.RowKey, e.Violation, violator.key)
					}
					r := rows[w.RowKey]
					for _, col := range q.Columns {
						wantBody := r.latestBody(col)
						cell, ok := e.Cells[col]
						switch {
						case wantBody == nil && ok:
							t.Errorf("page %d entry %s: got a %s cell, want none", page, e.RowKey, col)
						case wantBody != nil && !ok:
							t.Errorf("page %d entry %s: got no %s cell, want its latest", page, e.RowKey, col)
						case ok:
							wantCols++
							var body map[string]any
							dec := json.NewDecoder(bytes.NewReader(cell.Body))
							dec.UseNumber()
							if err := dec.Decode(&body); err != nil {
								t.Fatal(err)
							}
							wantRef := len(r.base)
							if col == "STATUS" {
								wantRef = len(r.status)
							}
							if !reflect.DeepEqual(body, jsonNumbers(t, wantBody)) || cell.RefKey != int64(wantRef) || cell.RowKey != e.RowKey {
								t.Errorf("page %d entry %s: got %s cell %s ref %d, want %v ref %d", page, e.RowKey, col, cell.Body, cell.RefKey, wantBody, wantRef)
							}
						}
					}
					if len(q.Columns) == 0 && e.Cells != nil {
						t.Errorf("page %d entry %s: got cells %v without columns asked", page, e.RowKey, e.Cells)
					}
					got = append(got, e.RowKey)
				}
				if len(a.res.Entries) < plan.Limit {
					if a.res.NextCursor != "" {
						t.Fatalf("page %d: a short page (%d of %d) with next_cursor %q, want none", page, len(a.res.Entries), plan.Limit, a.res.NextCursor)
					}
					break
				}
				if a.res.NextCursor == "" {
					t.Fatalf("page %d: a full page without next_cursor", page)
				}
				q.Cursor = a.res.NextCursor
			}
			// Every page together: each wanted entry once, in order.
			var wantKeys []string
			for _, e := range want {
				wantKeys = append(wantKeys, e.RowKey.String())
			}
			if !reflect.DeepEqual(got, wantKeys) {
				t.Fatalf("all pages: got %d rows %v, want %d rows %v", len(got), got, len(wantKeys), wantKeys)
			}
		})
	}
	if wantCols == 0 {
		t.Errorf("no case fetched a column cell: the columns cases test nothing")
	}
	// The violating row stays under its first driver, with its latest other fields.
	a := s.query(t, 0, "trip_index", indexes.Query{ShardValue: "zed"}, "")
	if a.status != 200 || len(a.res.Entries) != 0 {
		t.Errorf("query of the violating row's new driver: got %d %s, want 200 and no entry", a.status, a.raw)
	}
}

func (s *session) testIndexRejected(t *testing.T) {
	badDefs := []struct{ name, body, field string }{
		{"bad yaml", "table: [trip", "definition"},
		{"unknown type", "table: x\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: a, type: string}\n      - {field: b, type: decimal}\n", "column_defs[0].fields[1].type"},
		{"duplicate field", "table: x\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: a, type: string}\n      - {field: b, type: int}\n      - {field: A, type: int}\n", "column_defs[0].fields[2].field"},
		{"unknown key", "table: x\nindex_key: y\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: a, type: string}\n", "index_key"},
		{"other datastore", "table: x\ndatastore: flights\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: a, type: string}\n", "datastore"},
		{"float shard field", "table: x\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: a, type: float}\n", "column_defs[0].fields[0].type"},
	}
	for _, tc := range badDefs {
		t.Run("define "+tc.name, func(t *testing.T) {
			s.doRetry(t, -1, "POST", "/v1/trips/indexes", tc.body).expectError(t, 400, wire.CodeInvalidArgument, tc.field)
		})
	}
	long := `{"shard_value":"alice","where":[{"field":"driver","op":"=","value":"` + strings.Repeat("x", 100<<10) + `"}]}`
	badQueries := []struct{ name, body, field string }{
		{"bad op", `{"shard_value":"alice","where":[{"field":"delay","op":"~","value":1}]}`, "where[0].op"},
		{"unknown where field", `{"shard_value":"alice","where":[{"field":"delay","op":">","value":1},{"field":"speed","op":">","value":1}]}`, "where[1].field"},
		{"unknown projected field", `{"shard_value":"alice","fields":["delay","speed"]}`, "fields[1]"},
		{"unknown order_by field", `{"shard_value":"alice","order_by":"-speed"}`, "order_by"},
		{"malformed order_by", `{"shard_value":"alice","order_by":"delay sideways"}`, "order_by"},
		{"bad value type", `{"shard_value":"alice","where":[{"field":"delay","op":"=","value":"soon"}]}`, "where[0].value"},
		{"bad datetime", `{"shard_value":"alice","where":[{"field":"date","op":">","value":"yesterday"}]}`, "where[0].value"},
		{"bad in value", `{"shard_value":"alice","where":[{"field":"city_uuid","op":"in","value":["` + cities[0] + `","nope"]}]}`, "where[0].value[1]"},
		{"in without a list", `{"shard_value":"alice","where":[{"field":"city_uuid","op":"in","value":"` + cities[0] + `"}]}`, "where[0].value"},
		{"bad shard value", `{"shard_value":12}`, "shard_value"},
		{"no shard value", `{"where":[]}`, "shard_value"},
		{"bad cursor", `{"shard_value":"alice","cursor":"not-a-cursor"}`, "cursor"},
		{"limit too large", `{"shard_value":"alice","limit":1001}`, "limit"},
		{"negative limit", `{"shard_value":"alice","limit":-1}`, "limit"},
		{"fractional limit", `{"shard_value":"alice","limit":1.5}`, "limit"},
		{"unknown body key", `{"shard_value":"alice","filter":[]}`, "filter"},
		{"unknown where key", `{"shard_value":"alice","where":[{"field":"delay","op":"=","value":1,"hint":2}]}`, "where[0].hint"},
		{"bad column", `{"shard_value":"alice","columns":["BASE","no-dash"]}`, "columns[1]"},
		{"negative version", `{"shard_value":"alice","version":-2}`, "version"},
		{"not an object", `[1,2]`, "body"},
	}
	for _, tc := range badQueries {
		t.Run("query "+tc.name, func(t *testing.T) {
			s.doRetry(t, -1, "POST", "/v1/trips/indexes/trip_index/query", tc.body).expectError(t, 400, wire.CodeInvalidArgument, tc.field)
		})
	}
	t.Run("query body too large", func(t *testing.T) {
		s.doRetry(t, 0, "POST", "/v1/trips/indexes/trip_index/query", long).expectError(t, 413, wire.CodeTooLarge, "body")
	})
	t.Run("cursor of another order", func(t *testing.T) {
		a := s.query(t, 0, "trip_index", indexes.Query{ShardValue: "alice", OrderBy: &indexes.OrderBy{Field: "delay"}, Limit: 1}, "")
		if a.status != 200 || a.res.NextCursor == "" {
			t.Fatalf("first page: got %d %s, want 200 with a cursor", a.status, a.raw)
		}
		body := fmt.Sprintf(`{"shard_value":"alice","order_by":"fare","cursor":%q}`, a.res.NextCursor)
		s.doRetry(t, 1, "POST", "/v1/trips/indexes/trip_index/query", body).expectError(t, 400, wire.CodeInvalidArgument, "cursor")
	})
	t.Run("bad consistency", func(t *testing.T) {
		s.doRetry(t, 0, "POST", "/v1/trips/indexes/trip_index/query?consistency=eventual", `{"shard_value":"alice"}`).
			expectError(t, 400, wire.CodeInvalidArgument, "consistency")
	})
	t.Run("not found", func(t *testing.T) {
		s.doRetry(t, 0, "POST", "/v1/trips/indexes/no_index/query", `{"shard_value":"alice"}`).expectError(t, 404, wire.CodeNotFound, "")
		s.doRetry(t, 1, "POST", "/v1/trips/indexes/trip_index/query", `{"shard_value":"alice","version":9}`).expectError(t, 404, wire.CodeNotFound, "")
		s.doRetry(t, 2, "GET", "/v1/trips/indexes/no_index", "").expectError(t, 404, wire.CodeNotFound, "")
		s.doRetry(t, 0, "POST", "/v1/trips/indexes/no_index/alias", `{"version":1}`).expectError(t, 404, wire.CodeNotFound, "")
		s.doRetry(t, 0, "DELETE", "/v1/trips/indexes/trip_index/versions/9", "").expectError(t, 404, wire.CodeNotFound, "")
		s.doRetry(t, 0, "GET", "/v1/flights/indexes", "").expectError(t, 404, wire.CodeNotFound, "")
	})
	t.Run("bad alias and drop", func(t *testing.T) {
		s.doRetry(t, 0, "POST", "/v1/trips/indexes/trip_index/alias", `{"version":0}`).expectError(t, 400, wire.CodeInvalidArgument, "version")
		s.doRetry(t, 0, "POST", "/v1/trips/indexes/trip_index/alias", `{"version":1,"force":true}`).expectError(t, 400, wire.CodeInvalidArgument, "body")
		s.doRetry(t, 0, "DELETE", "/v1/trips/indexes/trip_index/versions/one", "").expectError(t, 400, wire.CodeInvalidArgument, "version")
		s.doRetry(t, 0, "PUT", "/v1/trips/indexes/trip_index/versions/1", "").expectError(t, 405, wire.CodeMethod, "")
	})
}

// testIndexWriteAfterReady writes a row once the index is ready and waits until a query finds it.
func (s *session) testIndexWriteAfterReady(t *testing.T, def indexes.Definition) {
	row := uuid.New()
	body := map[string]any{"driver": "bob", "delay": 999, "date": "2001-01-05T10:00:00.25Z", "city_uuid": cities[1]}
	s.putCells(t, []wire.PutCell{putCell(t, row, "BASE", 1, body)})
	start := time.Now()
	q := indexes.Query{ShardValue: "bob", Where: []indexes.Cond{{Field: "delay", Op: ">=", Value: json.Number("999")}}, Columns: []string{"BASE"}}
	for {
		a := s.query(t, int(time.Since(start)/time.Second)%3, "trip_index", q, "")
		if a.status != 200 {
			t.Fatalf("query: got %d %s, want 200", a.status, a.raw)
		}
		if len(a.res.Entries) == 1 {
			e := a.res.Entries[0]
			want := map[string]any{"driver": "bob", "city_uuid": cities[1], "delay": json.Number("999"), "fare": nil,
				"date": "2001-01-05T10:00:00.25Z", "paid": nil, "status": nil}
			if e.RowKey != row.String() || !reflect.DeepEqual(e.Fields, want) || e.Cells["BASE"].RefKey != 1 {
				t.Fatalf("the new row: got %+v, want %s with fields %v and its BASE cell", e, row, want)
			}
			t.Logf("a write after ready was found by a query after %s", time.Since(start).Round(time.Millisecond))
			return
		}
		if len(a.res.Entries) > 1 {
			t.Fatalf("query: got %d entries, want at most the new row: %s", len(a.res.Entries), a.raw)
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("a row written after the index was ready is not found after 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testIndexBuilding holds a version in state building (the maintainers stopped) and checks the
// refusals and the progress of a build not started.
func (s *session) testIndexBuilding(t *testing.T) {
	for i := 0; i < 3; i++ {
		s.c.StopMaintainer(i)
	}
	defer func() {
		for i := 0; i < 3; i++ {
			s.c.StartMaintainer(i)
		}
	}()
	def := "table: held\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: driver, type: string}\n      - {field: delay, type: int}\n"
	var res wire.IndexDefineResult
	s.doRetry(t, 0, "POST", "/v1/trips/indexes", def).expect(t, 201).decode(t, &res)
	st := s.indexStatus(t, 1, "held")
	v, _ := findVersion(st, res.Version)
	if st.Alias != 0 || v.State != wire.IndexBuilding || v.Progress >= 1 || v.HandledCells != 0 || v.TotalCells == 0 ||
		v.LagCells != v.TotalCells || v.Workers != 0 || len(v.Shards) != 16 || v.Shards[0].Offset != -1 {
		t.Fatalf("a build not started: got alias %d, %+v, want building, nothing handled of a positive total, no worker, 16 shards at -1", st.Alias, v)
	}
	s.doRetry(t, 1, "POST", "/v1/trips/indexes/held/alias", `{"version":1}`).expectError(t, 409, wire.CodeConflict, "")
	a := s.doRetry(t, 2, "POST", "/v1/trips/indexes/held/query", `{"shard_value":"alice"}`)
	a.expectError(t, 409, wire.CodeConflict, "")
	if !strings.Contains(string(a.body), "building") {
		t.Errorf("query of a building index: got %s, want a message naming the state building", a.body)
	}
	s.doRetry(t, 0, "POST", "/v1/trips/indexes/held/query", `{"shard_value":"alice","version":1}`).expectError(t, 409, wire.CodeConflict, "")
	// Dropping it while no maintainer runs: the API drops the tables itself.
	var drop wire.IndexDropResult
	s.doRetry(t, 1, "DELETE", "/v1/trips/indexes/held/versions/1", "").expect(t, 200).decode(t, &drop)
	if drop.State != wire.IndexDropped {
		t.Errorf("drop: got %+v, want dropped", drop)
	}
	st = s.indexStatus(t, 2, "held")
	if v, _ := findVersion(st, 1); v.State != wire.IndexDropped || v.DroppedAt == nil || st.Alias != 0 {
		t.Errorf("after the drop: got alias %d and %+v, want dropped with a dropped_at", st.Alias, v)
	}
	s.doRetry(t, 0, "POST", "/v1/trips/indexes/held/query", `{"shard_value":"alice","version":1}`).expectError(t, 404, wire.CodeNotFound, "")
	a = s.doRetry(t, 0, "POST", "/v1/trips/indexes/held/alias", `{"version":1}`)
	a.expectError(t, 409, wire.CodeConflict, "")
	if !strings.Contains(string(a.body), "dropped") {
		t.Errorf("alias to a dropped version: got %s, want a message naming the state dropped", a.body)
	}
	// A dropped number is never reused.
	s.doRetry(t, 0, "POST", "/v1/trips/indexes", def).expect(t, 201).decode(t, &res)
	if res.Version != 2 {
		t.Errorf("define after a drop: got version %d, want 2", res.Version)
	}
	s.doRetry(t, 0, "DELETE", "/v1/trips/indexes/held/versions/2", "").expect(t, 200)
}

// testIndexNewVersion builds version 2 of trip_index beside version 1, switches the alias to it
// and drops version 1, while a writer writes rows and a reader queries the alias without pause.
func (s *session) testIndexNewVersion(t *testing.T, def1 indexes.Definition) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var (
		mu       sync.Mutex
		written  []uuid.UUID
		failures []string
		queries  atomic.Int64
		// unavailable counts 503 answers (no leader for a moment on a loaded machine), which
		// the reader retries; any other failure fails the test.
		unavailable atomic.Int64
		versions    sync.Map
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	wg.Add(2)
	go func() { // writer: rows of driver carol
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			row := uuid.New()
			b, _ := json.Marshal(map[string]any{"driver": "carol", "delay": 500 + i, "reason": "weather"})
			body, _ := json.Marshal(wire.PutCellsRequest{Cells: []wire.PutCell{{RowKey: row.String(), ColumnKey: "BASE", RefKey: "1", Body: b}}})
			a, err := s.tryDo(i%3, "POST", "/v1/trips/cells", string(body))
			for tries := 0; err == nil && (a.status == 503 || a.status == 504) && tries < 50; tries++ {
				time.Sleep(100 * time.Millisecond) // no leader for a moment: the write is idempotent
				a, err = s.tryDo((i+tries+1)%3, "POST", "/v1/trips/cells", string(body))
			}
			if err != nil || a.status != 200 {
				fail("write %d: %v %d %s", i, err, a.status, a.body)
				return
			}
			mu.Lock()
			written = append(written, row)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() { // reader: the alias, without pause
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			a, err := s.tryDo(i%3, "POST", "/v1/trips/indexes/trip_index/query", `{"shard_value":"carol","where":[{"field":"delay","op":">=","value":500}],"limit":1000}`)
			if err == nil && a.status == 503 {
				unavailable.Add(1) // a partition without a leader for a moment: not the switch's doing
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if err != nil || a.status != 200 {
				fail("query %d: %v %d %s", i, err, a.status, a.body)
				continue
			}
			var res wire.IndexQueryResult
			if err := json.Unmarshal(a.body, &res); err != nil {
				fail("query %d: %v", i, err)
				continue
			}
			versions.Store(res.Version, true)
			queries.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	stop := func() {
		cancel()
		wg.Wait()
	}
	defer stop()

	var res wire.IndexDefineResult
	s.doRetry(t, 0, "POST", "/v1/trips/indexes", tripIndexV2YAML).expect(t, 201).decode(t, &res)
	if res.Version != 2 {
		t.Fatalf("define version 2: got %+v, want version 2", res)
	}
	s.waitCaughtUp(t, "trip_index", 2, -1)
	if st := s.indexStatus(t, 1, "trip_index"); st.Alias != 1 {
		t.Fatalf("alias after version 2 is ready: got %d, want still 1", st.Alias)
	}
	// The alias target cannot be dropped while version 2 lives.
	s.doRetry(t, 2, "DELETE", "/v1/trips/indexes/trip_index/versions/1", "").expectError(t, 409, wire.CodeConflict, "")
	var al wire.IndexAliasResult
	s.doRetry(t, 1, "POST", "/v1/trips/indexes/trip_index/alias", `{"version":2}`).expect(t, 200).decode(t, &al)
	if al.Alias != 2 {
		t.Fatalf("alias: got %+v, want 2", al)
	}
	// Queries move to version 2 within the catalog cache's life.
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := s.query(t, -1, "trip_index", indexes.Query{ShardValue: "carol", Limit: 1}, "")
		if a.status == 200 && a.res.Version == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queries still answered by %d %s 5s after the alias switch", a.status, a.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // every node's cached catalog has the new alias
	var drop wire.IndexDropResult
	s.doRetry(t, 0, "DELETE", "/v1/trips/indexes/trip_index/versions/1", "").expect(t, 200).decode(t, &drop)
	deadline = time.Now().Add(20 * time.Second)
	for {
		st := s.indexStatus(t, -1, "trip_index")
		v, _ := findVersion(st, 1)
		if v.State == wire.IndexDropped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("version 1 not dropped 20s after the drop: %+v", v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The dropped version's tables are gone: they count nothing.
	if n := s.c.Node(0); n != nil {
		st, err := n.IndexTableStats(context.Background(), "trips", indexes.TableName("trip_index", 1), def1.Fields())
		if err != nil || st != (cluster.IndexStats{}) {
			t.Errorf("stats of the dropped version's tables: got %+v, %v, want nothing", st, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d failed requests during the switch, first: %s", len(failures), failures[0])
	}
	_, saw1 := versions.Load(1)
	_, saw2 := versions.Load(2)
	t.Logf("%d queries (and %d answers 503, retried) and %d writes during the switch", queries.Load(), unavailable.Load(), len(written))
	if !saw1 || !saw2 || queries.Load() < 10 {
		t.Fatalf("the reader saw version 1: %t, version 2: %t, in %d queries; want both", saw1, saw2, queries.Load())
	}
	// Every row written during the switch is in version 2, with its new field.
	want := map[string]bool{}
	for _, r := range written {
		want[r.String()] = true
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		a := s.query(t, -1, "trip_index", indexes.Query{ShardValue: "carol", Where: []indexes.Cond{{Field: "reason", Op: "=", Value: "weather"}},
			Fields: []string{"reason"}, Limit: 1000}, "")
		if a.status != 200 {
			t.Fatalf("query version 2: got %d %s", a.status, a.raw)
		}
		got := map[string]bool{}
		for _, e := range a.res.Entries {
			got[e.RowKey] = true
		}
		if reflect.DeepEqual(got, want) {
			break
		}
		if time.Now().After(deadline) {
			var missing []string
			for k := range want {
				if !got[k] {
					missing = append(missing, k)
				}
			}
			sort.Strings(missing)
			t.Fatalf("version 2 has %d of the %d rows written during the switch after 20s; missing %v", len(got), len(want), missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// doRetry is do, sent again while the answer is 503 unavailable (nothing was done: a partition
// without a leader for a moment, on a loaded machine), for up to 30s.
func (s *session) doRetry(t *testing.T, node int, method, path, body string) answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := s.do(t, node, method, path, body)
		if a.status != 503 || time.Now().After(deadline) {
			return a
		}
		t.Logf("%s %s: 503 %s; retrying", method, path, a.body)
		time.Sleep(200 * time.Millisecond)
	}
}

// tryDo sends a request to node i like do, returning errors instead of failing the test (for
// goroutines).
func (s *session) tryDo(node int, method, path, body string) (answer, error) {
	req, err := http.NewRequest(method, s.c.URL(node)+path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: b}, err
}
