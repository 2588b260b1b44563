package indexes

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// paperYAML is the example of the Schemaless paper, as the package doc shows it.
const paperYAML = `
table: driver_partner_index     # the index's name
datastore: trips
shard_field: driver_partner_uuid   # optional; default: the first field of the first column_def
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: city_uuid, type: UUID }
      - { field: trip_created_at, type: datetime }
`

func TestParsePaperExample(t *testing.T) {
	t.Parallel()
	d, err := ParseDefinition([]byte(paperYAML))
	require.NoError(t, err, "ParseDefinition(paper example)")
	want := Definition{Table: "driver_partner_index", Datastore: "trips", ShardField: "driver_partner_uuid",
		ColumnDefs: []ColumnDef{{ColumnKey: "BASE", Fields: []FieldDef{
			{"driver_partner_uuid", TypeUUID}, {"city_uuid", TypeUUID}, {"trip_created_at", TypeDatetime}}}}}
	assert.Equal(t, want, d, "ParseDefinition(paper example)")
	wantFields := []Field{{"driver_partner_uuid", TypeUUID, "BASE"}, {"city_uuid", TypeUUID, "BASE"},
		{"trip_created_at", TypeDatetime, "BASE"}}
	assert.Equal(t, wantFields, d.Fields(), "Fields()")
	assert.Equal(t, []string{"BASE"}, d.Columns(), "Columns()")
}

// JSON is YAML: the same definition in JSON parses to the same value.
func TestParseDefinitionJSON(t *testing.T) {
	t.Parallel()
	js := `{"table":"driver_partner_index","datastore":"trips","shard_field":"driver_partner_uuid",
	  "column_defs":[{"column_key":"BASE","fields":[{"field":"driver_partner_uuid","type":"uuid"},
	  {"field":"city_uuid","type":"Uuid"},{"field":"trip_created_at","type":"DateTime"}]}]}`
	a, err := ParseDefinition([]byte(js))
	require.NoError(t, err, "ParseDefinition(JSON)")
	b, err := ParseDefinition([]byte(paperYAML))
	require.NoError(t, err, "ParseDefinition(paper example)")
	assert.Equal(t, b, a, "JSON definition: want the YAML one's value")
}

func TestParseDefinitionCanonicalTypes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]FieldType{"uuid": TypeUUID, "UUID": TypeUUID, "String": TypeString,
		"INT": TypeInt, "Float": TypeFloat, "bOOl": TypeBool, "DateTime": TypeDatetime, "datetime": TypeDatetime} {
		shard := fmt.Sprintf("{ field: k, type: %s }", in)
		if want == TypeFloat {
			shard = "{ field: k, type: int }\n      - { field: x, type: " + in + " }"
		}
		y := "table: t\ncolumn_defs:\n  - column_key: C\n    fields:\n      - " + shard + "\n"
		d, err := ParseDefinition([]byte(y))
		if !assert.NoError(t, err, "ParseDefinition(type %s)", in) {
			continue
		}
		got := d.ColumnDefs[0].Fields[len(d.ColumnDefs[0].Fields)-1].Type
		assert.Equal(t, want, got, "type %q parsed", in)
	}
}

// fieldErrors returns every *FieldError in err, which may be joined.
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// fieldsOf builds the YAML of one column def with the given field lines.
func defYAML(head string, cols ...string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("column_defs:\n")
	for _, c := range cols {
		b.WriteString(c)
	}
	return b.String()
}

func col(key string, fields ...string) string {
	s := "  - column_key: " + key + "\n    fields:\n"
	for _, f := range fields {
		s += "      - " + f + "\n"
	}
	return s
}

func TestParseDefinitionErrors(t *testing.T) {
	t.Parallel()
	type want struct{ field, text string }
	cases := []struct {
		name string
		yaml string
		want []want
	}{
		{"empty", "", []want{{"definition", "empty"}}},
		{"null document", "~\n", []want{{"definition", "empty"}}},
		{"two documents", "table: t\n---\ntable: u\n", []want{{"definition", "more than one"}}},
		{"syntax", "table: [\n", []want{{"definition", "yaml"}}},
		{"unknown top key", "table: t\nshard_feild: x\n" + "column_defs:\n" + col("C", "{ field: a, type: int }"),
			[]want{{"shard_feild", "unknown key"}}},
		{"unknown field key", defYAML("table: t\n", col("C", "{ field: a, typ: int }")),
			[]want{{"column_defs[0].fields[0].typ", "unknown key"}}},
		{"unknown column key", defYAML("table: t\n", "  - column_key: C\n    colour: red\n    fields: []\n"),
			[]want{{"column_defs[0].colour", "unknown key"}}},
		{"fields not a list", defYAML("table: t\n", "  - column_key: C\n    fields: abc\n"),
			[]want{{"column_defs[0].fields", "want a list"}}},
		{"column_defs a mapping", "table: t\ncolumn_defs: {a: 1}\n", []want{{"column_defs", "want a list"}}},
		{"table a list", "table: [a]\n" + "column_defs:\n" + col("C", "{ field: a, type: int }"),
			[]want{{"table", "want a single value"}}},
		{"document a list", "- a\n", []want{{"definition", "want a mapping"}}},
		{"missing table", defYAML("", col("C", "{ field: a, type: int }")), []want{{"table", "missing"}}},
		{"bad table", defYAML("table: Trips\n", col("C", "{ field: a, type: int }")),
			[]want{{"table", `"Trips" is not a valid index name`}}},
		{"long table", defYAML("table: "+strings.Repeat("t", 41)+"\n", col("C", "{ field: a, type: int }")),
			[]want{{"table", "not a valid index name"}}},
		{"bad datastore", defYAML("table: t\ndatastore: Bad-Name\n", col("C", "{ field: a, type: int }")),
			[]want{{"datastore", "not a valid datastore name"}}},
		{"no column defs", "table: t\n", []want{{"column_defs", "no fields, so no shard field"}}},
		{"empty column def", defYAML("table: t\n", "  - column_key: C\n    fields: []\n"),
			[]want{{"column_defs[0].fields", "no fields"}, {"column_defs", "no fields, so no shard field"}}},
		{"unknown type", defYAML("table: t\n", col("C", "{ field: a, type: int }", "{ field: b, type: uuidx }")),
			[]want{{"column_defs[0].fields[1].type", `unknown type "uuidx" (want UUID, string, int, float, bool or datetime)`}}},
		{"missing type", defYAML("table: t\n", col("C", "{ field: a, type: int }", "{ field: b }")),
			[]want{{"column_defs[0].fields[1].type", `unknown type ""`}}},
		{"duplicate field", defYAML("table: t\n", col("C", "{ field: a, type: int }", "{ field: city_uuid, type: UUID }"),
			col("D", "{ field: city_uuid, type: UUID }")),
			[]want{{"column_defs[1].fields[0].field", `duplicate field "city_uuid" (also column_defs[0].fields[1])`}}},
		{"duplicate field other case", defYAML("table: t\n", col("C", "{ field: a, type: int }", "{ field: A, type: int }")),
			[]want{{"column_defs[0].fields[1].field", `duplicate field "A" (also column_defs[0].fields[0])`}}},
		{"bad field name", defYAML("table: t\n", col("C", "{ field: a, type: int }", "{ field: 9lives, type: int }")),
			[]want{{"column_defs[0].fields[1].field", `"9lives" is not a valid field name`}}},
		{"long field name", defYAML("table: t\n", col("C", "{ field: a, type: int }", "{ field: "+strings.Repeat("f", 63)+", type: int }")),
			[]want{{"column_defs[0].fields[1].field", "not a valid field name"}}},
		{"missing field name", defYAML("table: t\n", col("C", "{ field: a, type: int }", "{ type: int }")),
			[]want{{"column_defs[0].fields[1].field", "missing"}}},
		{"bad column key", defYAML("table: t\n", col("a-b", "{ field: a, type: int }")),
			[]want{{"column_defs[0].column_key", `"a-b" is not a valid column key`}}},
		{"missing column key", defYAML("table: t\n", "  - fields:\n      - { field: a, type: int }\n"),
			[]want{{"column_defs[0].column_key", `"" is not a valid column key`}}},
		{"duplicate column key", defYAML("table: t\n", col("C", "{ field: a, type: int }"), col("C", "{ field: b, type: int }")),
			[]want{{"column_defs[1].column_key", `duplicate column key "C" (also column_defs[0])`}}},
		{"no shard field", defYAML("table: t\nshard_field: x\n", col("C", "{ field: a, type: int }")),
			[]want{{"shard_field", `no field "x"`}}},
		{"float shard field", defYAML("table: t\nshard_field: p\n", col("C", "{ field: a, type: int }", "{ field: p, type: float }")),
			[]want{{"shard_field", "float equality is a poor shard key"}}},
		{"float first field", defYAML("table: t\n", col("C", "{ field: p, type: float }", "{ field: a, type: int }")),
			[]want{{"column_defs[0].fields[0].type", "float equality is a poor shard key"}}},
		{"too many fields", defYAML("table: t\n", col("C", manyFields(33)...)),
			[]want{{"column_defs", "33 fields, at most 32"}}},
		{"every mistake at once", defYAML("table: T\n", col("a-b", "{ field: 1, type: x }")), []want{
			{"table", "not a valid index name"},
			{"column_defs[0].column_key", "not a valid column key"},
			{"column_defs[0].fields[0].field", "not a valid field name"},
			{"column_defs[0].fields[0].type", `unknown type "x"`}}},
	}
	for _, c := range cases {
		_, err := ParseDefinition([]byte(c.yaml))
		if !assert.Error(t, err, "%s: ParseDefinition: want %v", c.name, c.want) {
			continue
		}
		got := fieldErrors(err)
		if !assert.Len(t, got, len(c.want), "%s: ParseDefinition = %v: field errors, want %v", c.name, err, c.want) {
			continue
		}
		for i, w := range c.want {
			assert.Equal(t, w.field, got[i].Field, "%s: error %d = %q: field", c.name, i, got[i])
			assert.ErrorContains(t, got[i], w.text, "%s: error %d", c.name, i)
			assert.True(t, strings.HasPrefix(got[i].Error(), w.field+": "), "%s: error %q does not start with its field %q", c.name, got[i], w.field)
		}
	}
}

func manyFields(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("{ field: f%d, type: int }", i)
	}
	return out
}

func TestValidateLimits(t *testing.T) {
	t.Parallel()
	d := Definition{Table: strings.Repeat("t", 40), ColumnDefs: []ColumnDef{{ColumnKey: strings.Repeat("C", 64)}}}
	for i := 0; i < MaxFields; i++ {
		name := fmt.Sprintf("f%d", i)
		if i == 1 {
			name = strings.Repeat("F", 62)
		}
		d.ColumnDefs[0].Fields = append(d.ColumnDefs[0].Fields, FieldDef{Field: name, Type: TypeString})
	}
	assert.NoError(t, d.Validate(), "Validate(longest names, %d fields)", MaxFields)
	// Validate takes only canonical type names: ParseDefinition canonicalises.
	d.ColumnDefs[0].Fields[2].Type = "uuid"
	errs := fieldErrors(d.Validate())
	if assert.Len(t, errs, 1, "Validate(type uuid): want one error") {
		assert.Equal(t, "column_defs[0].fields[2].type", errs[0].Field, "Validate(type uuid): field of the error")
	}
}

func TestFieldsShardFirst(t *testing.T) {
	t.Parallel()
	d, err := ParseDefinition([]byte(defYAML("table: t\nshard_field: city\n",
		col("BASE", "{ field: a, type: int }", "{ field: b, type: string }"),
		col("STATUS", "{ field: c, type: bool }", "{ field: city, type: UUID }", "{ field: d, type: float }"),
		col("ADDR", "{ field: e, type: datetime }"))))
	require.NoError(t, err, "ParseDefinition")
	want := []Field{{"city", TypeUUID, "STATUS"}, {"a", TypeInt, "BASE"}, {"b", TypeString, "BASE"},
		{"c", TypeBool, "STATUS"}, {"d", TypeFloat, "STATUS"}, {"e", TypeDatetime, "ADDR"}}
	assert.Equal(t, want, d.Fields(), "Fields(): the shard field first")
	assert.Equal(t, []string{"ADDR", "BASE", "STATUS"}, d.Columns(), "Columns()")
}

func TestDefinitionEqual(t *testing.T) {
	t.Parallel()
	base, err := ParseDefinition([]byte(paperYAML))
	require.NoError(t, err, "ParseDefinition(paper example)")
	implicit := base.clone()
	implicit.ShardField = ""
	assert.True(t, base.Equal(implicit) && implicit.Equal(base), "Equal: an omitted shard_field differs from naming the first field, want equal")
	assert.True(t, base.Equal(base.clone()), "Equal(clone)")
	changes := map[string]func(*Definition){
		"table":       func(d *Definition) { d.Table = "other" },
		"datastore":   func(d *Definition) { d.Datastore = "" },
		"shard field": func(d *Definition) { d.ShardField = "city_uuid" },
		"column key":  func(d *Definition) { d.ColumnDefs[0].ColumnKey = "OTHER" },
		"field name":  func(d *Definition) { d.ColumnDefs[0].Fields[2].Field = "created" },
		"field type":  func(d *Definition) { d.ColumnDefs[0].Fields[2].Type = TypeInt },
		"field order": func(d *Definition) {
			f := d.ColumnDefs[0].Fields
			f[1], f[2] = f[2], f[1]
		},
		"extra field": func(d *Definition) {
			d.ColumnDefs[0].Fields = append(d.ColumnDefs[0].Fields, FieldDef{"x", TypeInt})
		},
		"extra column": func(d *Definition) {
			d.ColumnDefs = append(d.ColumnDefs, ColumnDef{ColumnKey: "X", Fields: []FieldDef{{"x", TypeInt}}})
		},
	}
	for name, change := range changes {
		o := base.clone()
		change(&o)
		assert.False(t, base.Equal(o), "Equal after changing the %s", name)
		assert.False(t, o.Equal(base), "Equal (reversed) after changing the %s", name)
	}
	// clone is deep: changing the copy left base alone.
	assert.Equal(t, "trip_created_at", base.ColumnDefs[0].Fields[2].Field, "changing a clone changed the original: %+v", base)
	assert.Equal(t, "BASE", base.ColumnDefs[0].ColumnKey, "changing a clone changed the original: %+v", base)
}

func TestFieldErrorUnwrap(t *testing.T) {
	t.Parallel()
	inner := errors.New("inner")
	fe := &FieldError{Field: "x", Err: inner}
	assert.ErrorIs(t, fe, inner, "FieldError")
	assert.EqualError(t, fe, "x: inner", "FieldError")
}
