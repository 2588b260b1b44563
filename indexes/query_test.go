package indexes

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/cells"
)

const queryYAML = `
table: trips_by_city
column_defs:
  - column_key: BASE
    fields:
      - { field: city, type: UUID }
      - { field: fare, type: float }
      - { field: n, type: int }
      - { field: when, type: datetime }
  - column_key: STATUS
    fields:
      - { field: status, type: string }
      - { field: ok, type: bool }
`

const cityText = "123e4567-e89b-12d3-a456-426614174000"

func queryDef(t *testing.T) Definition {
	t.Helper()
	d, err := ParseDefinition([]byte(queryYAML))
	require.NoError(t, err, "ParseDefinition(queryYAML)")
	return d
}

// decodeQuery decodes a query as the API does: JSON with UseNumber.
func decodeQuery(t *testing.T, text string) Query {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var q Query
	require.NoError(t, dec.Decode(&q), "decode %s", text)
	return q
}

func TestOrderByJSON(t *testing.T) {
	t.Parallel()
	good := map[string]OrderBy{
		`"fare"`:                       {Field: "fare"},
		`"-fare"`:                      {Field: "fare", Desc: true},
		`"fare desc"`:                  {Field: "fare", Desc: true},
		`"fare DESC"`:                  {Field: "fare", Desc: true},
		`" fare  asc "`:                {Field: "fare"},
		`{"field":"fare","desc":true}`: {Field: "fare", Desc: true},
		`{"field":"fare"}`:             {Field: "fare"},
	}
	for text, want := range good {
		var o OrderBy
		if assert.NoError(t, json.Unmarshal([]byte(text), &o), "Unmarshal(%s)", text) {
			assert.Equal(t, want, o, "Unmarshal(%s)", text)
		}
		// And back: the encoded form decodes to the same order.
		b, err := json.Marshal(o)
		if !assert.NoError(t, err, "Marshal(%+v)", o) {
			continue
		}
		var back OrderBy
		if assert.NoError(t, json.Unmarshal(b, &back), "Unmarshal(Marshal(%+v)) of %s", o, b) {
			assert.Equal(t, o, back, "Marshal(%+v) = %s: decoded", o, b)
		}
	}
	for _, text := range []string{`""`, `"-"`, `"fare up"`, `"-fare desc"`, `"a b c"`, `{"field":"fare","up":1}`,
		`{"desc":true}`, `3`, `["fare"]`, `true`} {
		var o OrderBy
		err := json.Unmarshal([]byte(text), &o)
		var fe *FieldError
		if assert.ErrorAs(t, err, &fe, "Unmarshal(%s): want an order_by FieldError", text) {
			assert.True(t, strings.HasPrefix(fe.Field, "order_by"), "Unmarshal(%s) = %v, want an order_by FieldError", text, err)
		}
	}
}

// cursorBytes builds a raw cursor from MessagePack values.
func cursorBytes(t *testing.T, vals ...any) string {
	t.Helper()
	b, err := msgpack.Marshal(vals)
	require.NoError(t, err, "msgpack.Marshal(%v)", vals)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	d := queryDef(t)
	lim := Limits{MaxConds: 3, MaxInValues: 2, MaxColumns: 2, MaxLimit: 50}
	sv := `"shard_value":"` + cityText + `"`
	fareCursor := NextCursor(Plan{OrderBy: 1}, Entry{Values: []any{nil, 2.5}})
	rowCursor := NextCursor(Plan{OrderBy: -1}, Entry{})
	rk := make([]byte, 16)
	cases := []struct {
		query string
		field string
		text  string
	}{
		{`{}`, "shard_value", `missing (want the value of shard field "city": a UUID string`},
		{`{"shard_value":null}`, "shard_value", "missing"},
		{`{"shard_value":5}`, "shard_value", "want a UUID string (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), got the number 5"},
		{`{"shard_value":"nope"}`, "shard_value", `got the string "nope"`},
		{`{` + sv + `,"where":[{"field":"n","op":"=","value":1},{"field":"n","op":"=","value":1},
			{"field":"n","op":"=","value":1},{"field":"n","op":"=","value":1}]}`, "where", "4 conditions, at most 3"},
		{`{` + sv + `,"where":[{"field":"n","op":"=","value":1},{"field":"n","op":"=","value":1},{"field":"x","op":"=","value":1}]}`,
			"where[2].field", `no field "x" in index trips_by_city`},
		{`{` + sv + `,"where":[{"field":"n","op":"~","value":1}]}`, "where[0].op",
			`unknown op "~" (want =, !=, <, <=, >, >= or in)`},
		{`{` + sv + `,"where":[{"field":"n","op":"IN","value":[1]}]}`, "where[0].op", `unknown op "IN"`},
		{`{` + sv + `,"where":[{"field":"n","op":"=","value":1},{"field":"n","op":"<","value":1.5}]}`,
			"where[1].value", "want an integer in the int64 range, got the number 1.5"},
		{`{` + sv + `,"where":[{"field":"status","op":"=","value":null}]}`, "where[0].value", "null is not allowed"},
		{`{` + sv + `,"where":[{"field":"status","op":"=","value":"` + strings.Repeat("x", 256) + `"}]}`,
			"where[0].value", "want a string of at most 255 bytes, got a string of 256 bytes"},
		{`{` + sv + `,"where":[{"field":"ok","op":"=","value":"yes"}]}`, "where[0].value", "want true or false"},
		{`{` + sv + `,"where":[{"field":"when","op":">","value":"yesterday"}]}`, "where[0].value", "want a date-time string"},
		{`{` + sv + `,"where":[{"field":"n","op":"=","value":[1]}]}`, "where[0].value", "got a list"},
		{`{` + sv + `,"where":[{"field":"n","op":"in","value":1}]}`, "where[0].value", "op in needs a list of 1 to 2 values, got the number 1"},
		{`{` + sv + `,"where":[{"field":"n","op":"in","value":[]}]}`, "where[0].value", "got 0 values"},
		{`{` + sv + `,"where":[{"field":"n","op":"in","value":[1,2,3]}]}`, "where[0].value", "got 3 values"},
		{`{` + sv + `,"where":[{"field":"n","op":"in","value":[1,"2"]}]}`, "where[0].value[1]", `got the string "2"`},
		{`{` + sv + `,"where":[{"field":"n","op":"in","value":[null]}]}`, "where[0].value[0]", "null is not allowed"},
		{`{` + sv + `,"fields":["n","nope"]}`, "fields[1]", `no field "nope" in index trips_by_city`},
		{`{` + sv + `,"fields":["n","fare","n"]}`, "fields[2]", `duplicate field "n" (also fields[0])`},
		{`{` + sv + `,"columns":["BASE","a-b"]}`, "columns[1]", `"a-b" is not a valid column key`},
		{`{` + sv + `,"columns":["BASE","BASE"]}`, "columns[1]", `duplicate column "BASE" (also columns[0])`},
		{`{` + sv + `,"columns":["A","B","C"]}`, "columns", "3 columns, at most 2"},
		{`{` + sv + `,"order_by":"nope"}`, "order_by", `no field "nope" in index trips_by_city`},
		{`{` + sv + `,"limit":-1}`, "limit", "-1 is outside 1..50"},
		{`{` + sv + `,"limit":51}`, "limit", "51 is outside 1..50"},
		{`{` + sv + `,"cursor":"!!!"}`, "cursor", "malformed"},
		{`{` + sv + `,"cursor":"` + base64.RawURLEncoding.EncodeToString([]byte("junk")) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"cursor":"` + fareCursor + `"}`, "cursor",
			`made for another order (by "fare" ascending), not this query's (by row key ascending)`},
		{`{` + sv + `,"order_by":"-fare","cursor":"` + fareCursor + `"}`, "cursor",
			`made for another order (by "fare" ascending), not this query's (by "fare" descending)`},
		{`{` + sv + `,"order_by":"fare","cursor":"` + rowCursor + `"}`, "cursor", "made for another order (by row key ascending)"},
		{`{` + sv + `,"order_by":"fare","cursor":"` + fareCursor + `="}`, "cursor", "malformed"}, // padding
		{`{` + sv + `,"order_by":"fare","cursor":"` + cursorBytes(t, 1, false, "text", rk) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"order_by":"n","cursor":"` + cursorBytes(t, 2, false, 1.5, rk) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"order_by":"fare","cursor":"` + cursorBytes(t, 1, false, 2.5, rk[:15]) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"order_by":"fare","cursor":"` + cursorBytes(t, 1, false, 2.5, rk, 0) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"order_by":"fare","cursor":"` + cursorBytes(t, 1, false, 2.5) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"cursor":"` + cursorBytes(t, -1, false, "x", rk) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"cursor":"` + cursorBytes(t, 99, false, nil, rk) + `"}`, "cursor", "malformed"},
		{`{` + sv + `,"order_by":"when","cursor":"` + cursorBytes(t, 3, false, int64(1)<<62, rk) + `"}`, "cursor", "malformed"},
	}
	for _, c := range cases {
		_, err := Compile(d, decodeQuery(t, c.query), 64, lim)
		var fe *FieldError
		if !assert.ErrorAs(t, err, &fe, "Compile(%s): want a FieldError for %s", c.query, c.field) ||
			!assert.Equal(t, c.field, fe.Field, "Compile(%s) = %v: field of the FieldError", c.query, err) ||
			!assert.ErrorContains(t, err, c.text, "Compile(%s)", c.query) {
			continue
		}
		assert.True(t, strings.HasPrefix(err.Error(), c.field+": "), "Compile(%s) error %q does not start with %q", c.query, err, c.field)
	}
	_, err := Compile(d, decodeQuery(t, `{`+sv+`}`), 0, lim)
	assert.Error(t, err, "Compile with 0 shards")
	_, err = Compile(Definition{Table: "empty"}, decodeQuery(t, `{`+sv+`}`), 64, lim)
	assert.Error(t, err, "Compile of a definition without fields")
}

func TestCompile(t *testing.T) {
	t.Parallel()
	d := queryDef(t)
	city := uuid.MustParse(cityText)
	q := decodeQuery(t, `{"shard_value":"`+strings.ToUpper(cityText)+`","where":[{"field":"n","op":">=","value":1e1},
		{"field":"when","op":"<","value":"2001-01-03"},{"field":"status","op":"in","value":["a","b"]},
		{"field":"fare","op":"!=","value":-0.0}],"fields":["status","city"],"columns":["STATUS","OTHER"],
		"order_by":"-when","version":2}`)
	p, err := Compile(d, q, 4096, Limits{})
	require.NoError(t, err, "Compile")
	when, _ := Convert(TypeDatetime, "2001-01-03")
	want := Plan{
		ShardValue: city,
		Shard:      cells.ShardOf(city, 4096),
		Where: []PlanCond{{Column: 2, Op: ">=", Values: []any{int64(10)}}, {Column: 3, Op: "<", Values: []any{when}},
			{Column: 4, Op: "in", Values: []any{"a", "b"}}, {Column: 1, Op: "!=", Values: []any{0.0}}},
		OrderBy: 3, Desc: true, Limit: DefaultLimits().DefaultLimit, Fields: []int{4, 0},
		Columns: []string{"STATUS", "OTHER"},
	}
	assert.Equal(t, want, p, "Compile")
	// Defaults: all fields, order by row key; a Go slice works for "in".
	p, err = Compile(d, Query{ShardValue: cityText, Where: []Cond{{Field: "n", Op: "in", Value: []int{1, 2}}}, Limit: 7}, 8, DefaultLimits())
	require.NoError(t, err, "Compile(defaults)")
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, p.Fields, "Compile(defaults): fields")
	assert.Equal(t, -1, p.OrderBy, "Compile(defaults): order by (row key)")
	assert.False(t, p.Desc, "Compile(defaults): descending")
	assert.Equal(t, 7, p.Limit, "Compile(defaults): limit")
	assert.Equal(t, []any{int64(1), int64(2)}, p.Where[0].Values, "Compile(defaults): values of in")
}

// rk returns a row key whose bytes sort by i.
func rk(i int) uuid.UUID {
	var u uuid.UUID
	u[0], u[15] = byte(i>>8), byte(i)
	return u
}

// keys returns the row key numbers (rk) of entries.
func keys(es []Entry) []int {
	out := []int{}
	for _, e := range es {
		out = append(out, int(e.RowKey[0])<<8|int(e.RowKey[15]))
	}
	return out
}

func TestEvaluateCases(t *testing.T) {
	t.Parallel()
	d := queryDef(t)
	city, other := uuid.MustParse(cityText), uuid.New()
	// Fields: city, fare, n, when, status, ok.
	entries := []Entry{
		{RowKey: rk(1), Values: []any{city, 2.5, int64(3), nil, "b", true}},
		{RowKey: rk(2), Values: []any{city, nil, nil, nil, nil, nil}},
		{RowKey: rk(3), Values: []any{city, -1.0, int64(3), int64(5), "a", false}},
		{RowKey: rk(4), Values: []any{other, 2.5, int64(3), int64(5), "a", true}},
		{RowKey: rk(5), Values: []any{city, 2.5, int64(-7), int64(1), "B", nil}},
		{RowKey: rk(6), Values: []any{nil, 2.5, int64(3), int64(5), "a", true}},
		{RowKey: rk(7), Values: []any{city, nil, int64(10), int64(5), "é", false}},
	}
	cases := []struct {
		query string
		want  []int
	}{
		{`{}`, []int{1, 2, 3, 5, 7}},
		{`{"order_by":"-fare"}`, []int{5, 1, 3, 7, 2}},                   // ties by row key descending, NULLs last
		{`{"order_by":"fare"}`, []int{2, 7, 3, 1, 5}},                    // NULLs first, ties by row key
		{`{"order_by":"fare asc","limit":2}`, []int{2, 7}},               // limit
		{`{"order_by":{"field":"n","desc":true}}`, []int{7, 3, 1, 5, 2}}, // ties by row key descending
		{`{"order_by":"status"}`, []int{2, 5, 3, 1, 7}},                  // bytewise: "B" < "a" < "b" < "é"
		{`{"order_by":"ok"}`, []int{2, 5, 3, 7, 1}},                      // NULL, then false < true
		{`{"where":[{"field":"fare","op":"!=","value":2.5}]}`, []int{3}}, // NULL is not != 2.5
		{`{"where":[{"field":"fare","op":"=","value":2.5}]}`, []int{1, 5}},
		{`{"where":[{"field":"fare","op":"<","value":2.5}]}`, []int{3}},
		{`{"where":[{"field":"fare","op":"<=","value":2.5}]}`, []int{1, 3, 5}},
		{`{"where":[{"field":"fare","op":">","value":-1}]}`, []int{1, 5}},
		{`{"where":[{"field":"fare","op":">=","value":-1}]}`, []int{1, 3, 5}},
		{`{"where":[{"field":"n","op":"in","value":[3,10]}]}`, []int{1, 3, 7}},
		{`{"where":[{"field":"n","op":"in","value":[3,10]},{"field":"ok","op":"=","value":false}]}`, []int{3, 7}},
		{`{"where":[{"field":"ok","op":"!=","value":true}]}`, []int{3, 7}},
		{`{"where":[{"field":"when","op":">=","value":"1970-01-01T00:00:00.000005Z"}]}`, []int{3, 7}},
		{`{"where":[{"field":"when","op":"<","value":0.000002}]}`, []int{5}},
		{`{"where":[{"field":"status","op":">","value":"a"}]}`, []int{1, 7}},
		{`{"where":[{"field":"city","op":"=","value":"` + cityText + `"}],"order_by":"-city"}`, []int{7, 5, 3, 2, 1}},
	}
	for _, c := range cases {
		q := decodeQuery(t, c.query)
		q.ShardValue = cityText
		p, err := Compile(d, q, 16, DefaultLimits())
		require.NoError(t, err, "Compile(%s)", c.query)
		assert.Equal(t, c.want, keys(Evaluate(p, entries)), "Evaluate(%s)", c.query)
	}
	// Cursors continue strictly after their position, including the NULL position.
	for _, c := range []struct {
		order string
		after int
		want  []int
	}{
		{"fare", 2, []int{7, 3, 1, 5}},
		{"fare", 7, []int{3, 1, 5}},
		{"fare", 1, []int{5}},
		{"-fare", 1, []int{3, 7, 2}},
		{"-fare", 7, []int{2}},
		{"-fare", 2, []int{}},
		{"", 3, []int{5, 7}},
	} {
		q := Query{ShardValue: cityText}
		if c.order != "" {
			require.NoError(t, json.Unmarshal([]byte(`"`+c.order+`"`), &q.OrderBy), "order %q", c.order)
		}
		p, err := Compile(d, q, 16, DefaultLimits())
		require.NoError(t, err, "Compile(order %q)", c.order)
		var last Entry
		for _, e := range entries {
			if e.RowKey == rk(c.after) {
				last = e
			}
		}
		q.Cursor = NextCursor(p, last)
		p, err = Compile(d, q, 16, DefaultLimits())
		require.NoError(t, err, "Compile(cursor after %d)", c.after)
		assert.Equal(t, c.want, keys(Evaluate(p, entries)), "order %q after %d: Evaluate", c.order, c.after)
	}
}

// ops are the comparison operators.
var ops = []string{"=", "!=", "<", "<=", ">", ">=", "in"}

// randomEntries returns entries of the query definition with small value domains (many ties)
// and NULLs, a few of them on another shard value.
func randomEntries(rng *rand.Rand, fields []Field, city uuid.UUID, n int) []Entry {
	var es []Entry
	used := map[uuid.UUID]bool{}
	for len(es) < n {
		row := rk(rng.IntN(4096))
		if used[row] {
			continue
		}
		used[row] = true
		e := Entry{RowKey: row, Values: make([]any, len(fields))}
		e.Values[0] = city
		if rng.IntN(10) == 0 {
			e.Values[0] = randomTyped(rng, TypeUUID) // another shard value
		}
		for i := 1; i < len(fields); i++ {
			if rng.IntN(4) == 0 {
				continue // NULL
			}
			e.Values[i] = smallValue(rng, fields[i].Type)
		}
		es = append(es, e)
	}
	return es
}

func smallValue(rng *rand.Rand, t FieldType) any {
	switch t {
	case TypeFloat:
		return float64(rng.IntN(5)) / 2
	case TypeInt:
		return int64(rng.IntN(5) - 2)
	case TypeDatetime:
		return int64(rng.IntN(4)) * 1e6
	case TypeString:
		return []string{"", "a", "b", "B", "é"}[rng.IntN(5)]
	case TypeBool:
		return rng.IntN(2) == 0
	case TypeUUID:
		return rk(rng.IntN(3))
	}
	return nil
}

// Paging through results with NextCursor and random page sizes returns exactly the unpaged
// result: nothing lost, nothing repeated, in the same order.
func TestPagingMatchesUnpaged(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	d := queryDef(t)
	fields := d.Fields()
	city := uuid.MustParse(cityText)
	for iter := 0; iter < 500; iter++ {
		entries := randomEntries(rng, fields, city, rng.IntN(60))
		q := Query{ShardValue: cityText, Limit: 1000}
		if rng.IntN(5) > 0 {
			q.OrderBy = &OrderBy{Field: fields[rng.IntN(len(fields))].Name, Desc: rng.IntN(2) == 0}
		}
		if rng.IntN(2) == 0 {
			f := fields[1+rng.IntN(len(fields)-1)]
			v := Format(f.Type, smallValue(rng, f.Type))
			q.Where = []Cond{{Field: f.Name, Op: ops[rng.IntN(len(ops))], Value: v}}
			if q.Where[0].Op == "in" {
				q.Where[0].Value = []any{v, Format(f.Type, smallValue(rng, f.Type))}
			}
		}
		p, err := Compile(d, q, 64, DefaultLimits())
		require.NoError(t, err, "Compile(%+v)", q)
		full := Evaluate(p, entries)

		var paged []Entry
		q.Limit = 1 + rng.IntN(7)
		for pages := 0; ; pages++ {
			require.LessOrEqual(t, pages, len(entries)+2, "iteration %d: paging does not end", iter)
			// The query goes through JSON, as from a client.
			text, err := json.Marshal(q)
			require.NoError(t, err, "iteration %d: Marshal(%+v)", iter, q)
			p, err := Compile(d, decodeQuery(t, string(text)), 64, DefaultLimits())
			require.NoError(t, err, "iteration %d: Compile(%s)", iter, text)
			page := Evaluate(p, entries)
			paged = append(paged, page...)
			if len(page) < q.Limit {
				break
			}
			q.Cursor = NextCursor(p, page[len(page)-1])
		}
		require.Equal(t, keys(full), keys(paged), "iteration %d: order %+v where %+v limit %d: paged, want unpaged",
			iter, q.OrderBy, q.Where, q.Limit)
	}
}

// Evaluate's order is total and desc is its exact reverse; its filter keeps exactly the
// entries of the shard value satisfying the conditions, whatever the order.
func TestEvaluateOrderProperties(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	d := queryDef(t)
	fields := d.Fields()
	city := uuid.MustParse(cityText)
	for iter := 0; iter < 300; iter++ {
		entries := randomEntries(rng, fields, city, rng.IntN(40))
		f := fields[rng.IntN(len(fields))].Name
		asc, err := Compile(d, Query{ShardValue: cityText, OrderBy: &OrderBy{Field: f}}, 64, DefaultLimits())
		require.NoError(t, err, "Compile(order by %s)", f)
		desc := asc
		desc.Desc = true
		asc.Limit, desc.Limit = 0, 0
		a, b := keys(Evaluate(asc, entries)), keys(Evaluate(desc, entries))
		slices.Reverse(b)
		require.Equal(t, a, b, "order by %s: descending reversed, want ascending", f)
		shuffled := slices.Clone(entries)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		require.Equal(t, a, keys(Evaluate(asc, shuffled)), "order by %s of shuffled entries: the order depends on the input order", f)
		want := 0
		for _, e := range entries {
			if e.Values[0] == any(city) {
				want++
			}
		}
		require.Len(t, a, want, "Evaluate: entries kept, want those of the shard value")
		// Ascending: NULLs of the order field come first.
		seenValue := false
		for _, e := range Evaluate(asc, entries) {
			v := e.Values[asc.OrderBy]
			if v != nil {
				seenValue = true
			} else {
				require.False(t, seenValue, "order by %s: a NULL after a value: %v", f, fmt.Sprint(keys(Evaluate(asc, entries))))
			}
		}
	}
}
