package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/wire"
)

// The queries of version 1 of trip_index, compared with a brute-force reference, and the
// refused definitions and queries (see indexes_test.go).

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
			require.NoError(t, err, "compile %+v", tc.q)
			full.Limit = 0
			want := indexes.Evaluate(full, ref)
			var got []string
			q := tc.q
			for page := 0; ; page++ {
				require.LessOrEqual(t, page, len(ref)+1, "pages, at most one per entry: the cursor must advance")
				params := ""
				if page%2 == 1 {
					params = "?consistency=stale" // stale reads answer too (the data is long replicated)
				}
				a := s.query(t, page%3, "trip_index", q, params)
				require.Equal(t, 200, a.status, "page %d: status; body %s", page, a.raw)
				plan, err := indexes.Compile(def, q, 16, indexes.DefaultLimits())
				require.NoError(t, err, "compile page %d", page)
				wantPage := indexes.Evaluate(plan, ref)
				require.Equal(t, "trip_index", a.res.Index, "page %d: the index that answered", page)
				require.Equal(t, 1, a.res.Version, "page %d: the version that answered", page)
				require.Len(t, a.res.Entries, len(wantPage), "page %d: entries (%s)", page, a.raw)
				for i, e := range a.res.Entries {
					w := wantPage[i]
					require.Equal(t, w.RowKey.String(), e.RowKey, "page %d entry %d: row", page, i)
					assert.Equal(t, renderFields(t, fields, plan, w), e.Fields, "page %d entry %d (%s): fields", page, i, e.RowKey)
					assert.Equal(t, w.RowKey == violator.key, e.Violation != 0,
						"page %d entry %d (%s): a violation (got %d), want one only for the violating row %s", page, i, e.RowKey, e.Violation, violator.key)
					r := rows[w.RowKey]
					for _, col := range q.Columns {
						wantBody := r.latestBody(col)
						cell, ok := e.Cells[col]
						if !assert.Equal(t, wantBody != nil, ok, "page %d entry %s: a %s cell (its latest), or none when the row has none", page, e.RowKey, col) || !ok {
							continue
						}
						wantCols++
						var body map[string]any
						dec := json.NewDecoder(bytes.NewReader(cell.Body))
						dec.UseNumber()
						require.NoError(t, dec.Decode(&body), "page %d entry %s: decode the %s cell's body %s", page, e.RowKey, col, cell.Body)
						wantRef := len(r.base)
						if col == "STATUS" {
							wantRef = len(r.status)
						}
						assert.Equal(t, jsonNumbers(t, wantBody), body, "page %d entry %s: body of the %s cell", page, e.RowKey, col)
						assert.Equal(t, int64(wantRef), cell.RefKey, "page %d entry %s: ref key of the %s cell", page, e.RowKey, col)
						assert.Equal(t, e.RowKey, cell.RowKey, "page %d entry %s: row key of the %s cell", page, e.RowKey, col)
					}
					if len(q.Columns) == 0 {
						assert.Nil(t, e.Cells, "page %d entry %s: cells without columns asked", page, e.RowKey)
					}
					got = append(got, e.RowKey)
				}
				if len(a.res.Entries) < plan.Limit {
					require.Empty(t, a.res.NextCursor, "page %d: next_cursor of a short page (%d of %d)", page, len(a.res.Entries), plan.Limit)
					break
				}
				require.NotEmpty(t, a.res.NextCursor, "page %d: next_cursor of a full page", page)
				q.Cursor = a.res.NextCursor
			}
			// Every page together: each wanted entry once, in order.
			var wantKeys []string
			for _, e := range want {
				wantKeys = append(wantKeys, e.RowKey.String())
			}
			require.Equal(t, wantKeys, got, "all pages: rows, each wanted entry once, in order")
		})
	}
	assert.NotZero(t, wantCols, "cells fetched by the cases with columns: without any, they test nothing")
	// The violating row stays under its first driver, with its latest other fields.
	a := s.query(t, 0, "trip_index", indexes.Query{ShardValue: "zed"}, "")
	if assert.Equal(t, 200, a.status, "query of the violating row's new driver: status; body %s", a.raw) {
		assert.Empty(t, a.res.Entries, "query of the violating row's new driver: entries")
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
		require.Equal(t, 200, a.status, "first page: status; body %s", a.raw)
		require.NotEmpty(t, a.res.NextCursor, "first page: a cursor")
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
