package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

func TestParseWhereExpr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr    string
		want    wire.IndexCond
		wantErr string // a part of the error message; "" for success
	}{
		{expr: "delay>60", want: wire.IndexCond{Field: "delay", Op: ">", Value: json.Number("60")}},
		{expr: "delay >= 60", want: wire.IndexCond{Field: "delay", Op: ">=", Value: json.Number("60")}},
		{expr: "  delay<=-1.5e3 ", want: wire.IndexCond{Field: "delay", Op: "<=", Value: json.Number("-1.5e3")}},
		{expr: "delay<0", want: wire.IndexCond{Field: "delay", Op: "<", Value: json.Number("0")}},
		{expr: "delay!=30", want: wire.IndexCond{Field: "delay", Op: "!=", Value: json.Number("30")}},
		{expr: "date=2001-01-03", want: wire.IndexCond{Field: "date", Op: "=", Value: "2001-01-03"}},
		{expr: "date>2001-01-03T10:00:00Z", want: wire.IndexCond{Field: "date", Op: ">", Value: "2001-01-03T10:00:00Z"}},
		{expr: "note=a=b", want: wire.IndexCond{Field: "note", Op: "=", Value: "a=b"}},
		{expr: "name= Los Angeles ", want: wire.IndexCond{Field: "name", Op: "=", Value: "Los Angeles"}},
		{expr: "paid=true", want: wire.IndexCond{Field: "paid", Op: "=", Value: true}},
		{expr: "paid=false", want: wire.IndexCond{Field: "paid", Op: "=", Value: false}},
		{expr: `zip="94107"`, want: wire.IndexCond{Field: "zip", Op: "=", Value: "94107"}},
		{expr: `flag="true"`, want: wire.IndexCond{Field: "flag", Op: "=", Value: "true"}},
		{expr: "code=0x10", want: wire.IndexCond{Field: "code", Op: "=", Value: "0x10"}},
		{expr: "code=007", want: wire.IndexCond{Field: "code", Op: "=", Value: "007"}},
		{expr: "ratio=.5", want: wire.IndexCond{Field: "ratio", Op: "=", Value: ".5"}},
		{expr: "destination in LAX,SFO", want: wire.IndexCond{Field: "destination", Op: "in", Value: []any{"LAX", "SFO"}}},
		{expr: "destination IN LAX, SFO ,JFK", want: wire.IndexCond{Field: "destination", Op: "in", Value: []any{"LAX", "SFO", "JFK"}}},
		{expr: "delay in 1,2.5,-3", want: wire.IndexCond{Field: "delay", Op: "in", Value: []any{json.Number("1"), json.Number("2.5"), json.Number("-3")}}},
		{expr: `city in "New York, NY",Boston`, want: wire.IndexCond{Field: "city", Op: "in", Value: []any{"New York, NY", "Boston"}}},
		{expr: "destination in LAX", want: wire.IndexCond{Field: "destination", Op: "in", Value: []any{"LAX"}}},
		{expr: "_x2=1", want: wire.IndexCond{Field: "_x2", Op: "=", Value: json.Number("1")}},
		{expr: "index=1", want: wire.IndexCond{Field: "index", Op: "=", Value: json.Number("1")}},
		{expr: "", wantErr: "starting with a field name"},
		{expr: ">5", wantErr: "starting with a field name"},
		{expr: "2x>5", wantErr: "starting with a field name"},
		{expr: "delay", wantErr: "no operator"},
		{expr: "delay~5", wantErr: "no operator"},
		{expr: "delay=>5", wantErr: ""}, // "=" then the string ">5": the server rejects it by type
		{expr: "delay>", wantErr: "no value"},
		{expr: "delay >=   ", wantErr: "no value"},
		{expr: "destination in", wantErr: "no operator"},
		{expr: "destination in ", wantErr: "no operator"},
		{expr: "destination in LAX,,SFO", wantErr: "value 2 of the in list is empty"},
		{expr: "destination in LAX,", wantErr: "value 2 of the in list is empty"},
		{expr: "destinationin LAX", wantErr: "no operator"},
	}
	for _, tt := range tests {
		got, err := parseWhereExpr(tt.expr)
		switch {
		case tt.wantErr != "":
			assert.ErrorContains(t, err, tt.wantErr, "parseWhereExpr(%q): got %+v", tt.expr, got)
		case tt.expr == "delay=>5":
			if assert.NoError(t, err, "parseWhereExpr(%q)", tt.expr) {
				assert.Equal(t, wire.IndexCond{Field: "delay", Op: "=", Value: ">5"}, got, "parseWhereExpr(%q): want = with the string >5", tt.expr)
			}
		default:
			if assert.NoError(t, err, "parseWhereExpr(%q)", tt.expr) {
				assert.Equal(t, tt.want, got, "parseWhereExpr(%q)", tt.expr)
			}
		}
	}
}

// TestParseWhereExprJSON checks what the conditions look like on the wire: numbers as JSON
// numbers, written as given.
func TestParseWhereExprJSON(t *testing.T) {
	t.Parallel()
	var conds []wire.IndexCond
	for _, e := range []string{"delay>60", "date=2001-01-03", "destination in LAX,SFO", "fare<=12.50", "paid=true"} {
		c, err := parseWhereExpr(e)
		require.NoError(t, err, "parseWhereExpr(%q)", e)
		conds = append(conds, c)
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(conds), "encode the conditions")
	b := strings.TrimSpace(buf.String())
	want := `[{"field":"delay","op":">","value":60},{"field":"date","op":"=","value":"2001-01-03"},` +
		`{"field":"destination","op":"in","value":["LAX","SFO"]},{"field":"fare","op":"<=","value":12.50},` +
		`{"field":"paid","op":"=","value":true}]`
	assert.Equal(t, want, b, "JSON of the conditions")
}

func TestBuildIndexQuery(t *testing.T) {
	t.Parallel()
	q, err := buildIndexQuery(indexQueryFlags{shardValue: "42", where: []string{"delay>1"}, fields: []string{"a"}, orderBy: "-delay", limit: 5})
	require.NoError(t, err, "buildIndexQuery")
	assert.Equal(t, json.Number("42"), q.ShardValue, "buildIndexQuery: shard value in %+v", q)
	assert.Len(t, q.Where, 1, "buildIndexQuery: conditions in %+v", q)
	assert.Equal(t, "-delay", q.OrderBy, "buildIndexQuery: order in %+v", q)
	assert.Equal(t, 5, q.Limit, "buildIndexQuery: limit in %+v", q)
	if assert.NotEmpty(t, q.Fields, "buildIndexQuery: fields in %+v", q) {
		assert.Equal(t, "a", q.Fields[0], "buildIndexQuery: first field in %+v", q)
	}
	_, err = buildIndexQuery(indexQueryFlags{shardValue: "x", limit: -1})
	assert.Error(t, err, "buildIndexQuery with limit -1")
	_, err = buildIndexQuery(indexQueryFlags{shardValue: "x", where: []string{"bad"}})
	assert.Error(t, err, "buildIndexQuery with a bad where")
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	v := wire.IndexVersionStatus{State: "building", Progress: 0.5, HandledCells: 50, TotalCells: 100, LagCells: 50, LagSeconds: 2.25, Entries: 40}
	want := "building [############............]  50.0%  50/100 cells  lag 50 cells 2.2s  123 cells/s  40 entries"
	assert.Equal(t, want, progressLine(v, 123.4), "progressLine")
}
