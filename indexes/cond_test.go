package indexes

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCond(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr    string
		want    Cond
		wantErr string // a part of the error message; "" for success
	}{
		{expr: "delay>60", want: Cond{Field: "delay", Op: ">", Value: json.Number("60")}},
		{expr: "delay >= 60", want: Cond{Field: "delay", Op: ">=", Value: json.Number("60")}},
		{expr: "  delay<=-1.5e3 ", want: Cond{Field: "delay", Op: "<=", Value: json.Number("-1.5e3")}},
		{expr: "delay<0", want: Cond{Field: "delay", Op: "<", Value: json.Number("0")}},
		{expr: "delay!=30", want: Cond{Field: "delay", Op: "!=", Value: json.Number("30")}},
		{expr: "date=2001-01-03", want: Cond{Field: "date", Op: "=", Value: "2001-01-03"}},
		{expr: "date>2001-01-03T10:00:00Z", want: Cond{Field: "date", Op: ">", Value: "2001-01-03T10:00:00Z"}},
		{expr: "note=a=b", want: Cond{Field: "note", Op: "=", Value: "a=b"}},
		{expr: "name= Los Angeles ", want: Cond{Field: "name", Op: "=", Value: "Los Angeles"}},
		{expr: "paid=true", want: Cond{Field: "paid", Op: "=", Value: true}},
		{expr: "paid=false", want: Cond{Field: "paid", Op: "=", Value: false}},
		{expr: `zip="94107"`, want: Cond{Field: "zip", Op: "=", Value: "94107"}},
		{expr: `flag="true"`, want: Cond{Field: "flag", Op: "=", Value: "true"}},
		{expr: "code=0x10", want: Cond{Field: "code", Op: "=", Value: "0x10"}},
		{expr: "code=007", want: Cond{Field: "code", Op: "=", Value: "007"}},
		{expr: "ratio=.5", want: Cond{Field: "ratio", Op: "=", Value: ".5"}},
		{expr: "destination in LAX,SFO", want: Cond{Field: "destination", Op: "in", Value: []any{"LAX", "SFO"}}},
		{expr: "destination IN LAX, SFO ,JFK", want: Cond{Field: "destination", Op: "in", Value: []any{"LAX", "SFO", "JFK"}}},
		{expr: "delay in 1,2.5,-3", want: Cond{Field: "delay", Op: "in", Value: []any{json.Number("1"), json.Number("2.5"), json.Number("-3")}}},
		{expr: `city in "New York, NY",Boston`, want: Cond{Field: "city", Op: "in", Value: []any{"New York, NY", "Boston"}}},
		{expr: "destination in LAX", want: Cond{Field: "destination", Op: "in", Value: []any{"LAX"}}},
		{expr: "_x2=1", want: Cond{Field: "_x2", Op: "=", Value: json.Number("1")}},
		{expr: "index=1", want: Cond{Field: "index", Op: "=", Value: json.Number("1")}},
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
		got, err := ParseCond(tt.expr)
		switch {
		case tt.wantErr != "":
			assert.ErrorContains(t, err, tt.wantErr, "ParseCond(%q): got %+v", tt.expr, got)
		case tt.expr == "delay=>5":
			if assert.NoError(t, err, "ParseCond(%q)", tt.expr) {
				assert.Equal(t, Cond{Field: "delay", Op: "=", Value: ">5"}, got, "ParseCond(%q): want = with the string >5", tt.expr)
			}
		default:
			if assert.NoError(t, err, "ParseCond(%q)", tt.expr) {
				assert.Equal(t, tt.want, got, "ParseCond(%q)", tt.expr)
			}
		}
	}
}

// TestParseCondJSON checks what the conditions look like on the wire: numbers as JSON
// numbers, written as given.
func TestParseCondJSON(t *testing.T) {
	t.Parallel()
	var conds []Cond
	for _, e := range []string{"delay>60", "date=2001-01-03", "destination in LAX,SFO", "fare<=12.50", "paid=true"} {
		c, err := ParseCond(e)
		require.NoError(t, err, "ParseCond(%q)", e)
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

func TestParseScalar(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"60", json.Number("60")},
		{"-1.5e3", json.Number("-1.5e3")},
		{"007", "007"},
		{".5", ".5"},
		{"1_000", "1_000"},
		{"Inf", "Inf"},
		{"true", true},
		{"false", false},
		{"TRUE", "TRUE"},
		{`"94107"`, "94107"},
		{`"a \"b\""`, `a "b"`},
		{`"unterminated`, `"unterminated`},
		{`""`, ""},
		{"", ""},
		{"LAX", "LAX"},
	} {
		assert.Equal(t, tc.want, ParseScalar(tc.in), "ParseScalar(%q)", tc.in)
	}
}

// Parsed conditions compile against a definition as the API's JSON conditions do: a number
// for an int field, a date string for a datetime, a list for in; a string for an int is
// refused by Compile, not by ParseCond.
func TestParseCondCompiles(t *testing.T) {
	t.Parallel()
	d := queryDef(t)
	var where []Cond
	for _, e := range []string{"n>60", "when>=2001-01-03", "status in paid,open", "ok=true", "fare<=12.5"} {
		c, err := ParseCond(e)
		require.NoError(t, err, "ParseCond(%q)", e)
		where = append(where, c)
	}
	_, err := Compile(d, Query{ShardValue: cityText, Where: where}, 64, DefaultLimits())
	assert.NoError(t, err, "Compile of the parsed conditions")
	c, err := ParseCond("n=many")
	require.NoError(t, err)
	_, err = Compile(d, Query{ShardValue: cityText, Where: []Cond{c}}, 64, DefaultLimits())
	var fe *FieldError
	assert.ErrorAs(t, err, &fe, "Compile of n=many: want a *FieldError")
}
