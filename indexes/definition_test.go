package indexes

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
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
	d, err := ParseDefinition([]byte(paperYAML))
	if err != nil {
		t.Fatalf("ParseDefinition(paper example) = %v", err)
	}
	want := Definition{Table: "driver_partner_index", Datastore: "trips", ShardField: "driver_partner_uuid",
		ColumnDefs: []ColumnDef{{ColumnKey: "BASE", Fields: []FieldDef{
			{"driver_partner_uuid", TypeUUID}, {"city_uuid", TypeUUID}, {"trip_created_at", TypeDatetime}}}}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("ParseDefinition(paper example) = %+v, want %+v", d, want)
	}
	wantFields := []Field{{"driver_partner_uuid", TypeUUID, "BASE"}, {"city_uuid", TypeUUID, "BASE"},
		{"trip_created_at", TypeDatetime, "BASE"}}
	if got := d.Fields(); !reflect.DeepEqual(got, wantFields) {
		t.Errorf("Fields() = %v, want %v", got, wantFields)
	}
	if got := d.Columns(); !reflect.DeepEqual(got, []string{"BASE"}) {
		t.Errorf("Columns() = %v, want [BASE]", got)
	}
}

// JSON is YAML: the same definition in JSON parses to the same value.
func TestParseDefinitionJSON(t *testing.T) {
	js := `{"table":"driver_partner_index","datastore":"trips","shard_field":"driver_partner_uuid",
	  "column_defs":[{"column_key":"BASE","fields":[{"field":"driver_partner_uuid","type":"uuid"},
	  {"field":"city_uuid","type":"Uuid"},{"field":"trip_created_at","type":"DateTime"}]}]}`
	a, err := ParseDefinition([]byte(js))
	if err != nil {
		t.Fatalf("ParseDefinition(JSON) = %v", err)
	}
	b, err := ParseDefinition([]byte(paperYAML))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("JSON definition = %+v, want %+v", a, b)
	}
}

func TestParseDefinitionCanonicalTypes(t *testing.T) {
	for in, want := range map[string]FieldType{"uuid": TypeUUID, "UUID": TypeUUID, "String": TypeString,
		"INT": TypeInt, "Float": TypeFloat, "bOOl": TypeBool, "DateTime": TypeDatetime, "datetime": TypeDatetime} {
		shard := fmt.Sprintf("{ field: k, type: %s }", in)
		if want == TypeFloat {
			shard = "{ field: k, type: int }\n      - { field: x, type: " + in + " }"
		}
		y := "table: t\ncolumn_defs:\n  - column_key: C\n    fields:\n      - " + shard + "\n"
		d, err := ParseDefinition([]byte(y))
		if err != nil {
			t.Errorf("ParseDefinition(type %s) = %v", in, err)
			continue
		}
		got := d.ColumnDefs[0].Fields[len(d.ColumnDefs[0].Fields)-1].Type
		if got != want {
			t.Errorf("type %q parsed as %q, want %q", in, got, want)
		}
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
		if err == nil {
			t.Errorf("%s: ParseDefinition = nil error, want %v", c.name, c.want)
			continue
		}
		got := fieldErrors(err)
		if len(got) != len(c.want) {
			t.Errorf("%s: ParseDefinition = %d errors (%v), want %d (%v)", c.name, len(got), err, len(c.want), c.want)
			continue
		}
		for i, w := range c.want {
			if got[i].Field != w.field || !strings.Contains(got[i].Error(), w.text) {
				t.Errorf("%s: error %d = %q (field %q), want field %q containing %q", c.name, i, got[i], got[i].Field, w.field, w.text)
			}
			if !strings.HasPrefix(got[i].Error(), w.field+": ") {
				t.Errorf("%s: error %q does not start with its field %q", c.name, got[i], w.field)
			}
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
	d := Definition{Table: strings.Repeat("t", 40), ColumnDefs: []ColumnDef{{ColumnKey: strings.Repeat("C", 64)}}}
	for i := 0; i < MaxFields; i++ {
		name := fmt.Sprintf("f%d", i)
		if i == 1 {
			name = strings.Repeat("F", 62)
		}
		d.ColumnDefs[0].Fields = append(d.ColumnDefs[0].Fields, FieldDef{Field: name, Type: TypeString})
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Validate(longest names, %d fields) = %v, want nil", MaxFields, err)
	}
	// Validate takes only canonical type names: ParseDefinition canonicalises.
	d.ColumnDefs[0].Fields[2].Type = "uuid"
	if errs := fieldErrors(d.Validate()); len(errs) != 1 || errs[0].Field != "column_defs[0].fields[2].type" {
		t.Errorf("Validate(type uuid) = %v, want one error for column_defs[0].fields[2].type", errs)
	}
}

func TestFieldsShardFirst(t *testing.T) {
	d, err := ParseDefinition([]byte(defYAML("table: t\nshard_field: city\n",
		col("BASE", "{ field: a, type: int }", "{ field: b, type: string }"),
		col("STATUS", "{ field: c, type: bool }", "{ field: city, type: UUID }", "{ field: d, type: float }"),
		col("ADDR", "{ field: e, type: datetime }"))))
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{{"city", TypeUUID, "STATUS"}, {"a", TypeInt, "BASE"}, {"b", TypeString, "BASE"},
		{"c", TypeBool, "STATUS"}, {"d", TypeFloat, "STATUS"}, {"e", TypeDatetime, "ADDR"}}
	if got := d.Fields(); !reflect.DeepEqual(got, want) {
		t.Errorf("Fields() = %v, want %v", got, want)
	}
	if got := d.Columns(); !reflect.DeepEqual(got, []string{"ADDR", "BASE", "STATUS"}) {
		t.Errorf("Columns() = %v, want [ADDR BASE STATUS]", got)
	}
}

func TestDefinitionEqual(t *testing.T) {
	base, err := ParseDefinition([]byte(paperYAML))
	if err != nil {
		t.Fatal(err)
	}
	implicit := base.clone()
	implicit.ShardField = ""
	if !base.Equal(implicit) || !implicit.Equal(base) {
		t.Error("Equal: an omitted shard_field differs from naming the first field, want equal")
	}
	if !base.Equal(base.clone()) {
		t.Error("Equal(clone) = false, want true")
	}
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
		if base.Equal(o) || o.Equal(base) {
			t.Errorf("Equal after changing the %s = true, want false", name)
		}
	}
	// clone is deep: changing the copy left base alone.
	if base.ColumnDefs[0].Fields[2].Field != "trip_created_at" || base.ColumnDefs[0].ColumnKey != "BASE" {
		t.Errorf("changing a clone changed the original: %+v", base)
	}
}

func TestFieldErrorUnwrap(t *testing.T) {
	inner := errors.New("inner")
	fe := &FieldError{Field: "x", Err: inner}
	if !errors.Is(fe, inner) || fe.Error() != "x: inner" {
		t.Errorf("FieldError = %q, Is(inner) = %v; want \"x: inner\", true", fe, errors.Is(fe, inner))
	}
}
