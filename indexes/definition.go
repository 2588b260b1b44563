package indexes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/schemaless-db/schemaless/cells"
)

// FieldType is the type of an index field. It decides how a value read from a cell body is
// converted (Convert), compared (Evaluate), hashed to a shard (ShardOf) and stored.
type FieldType string

// The field types. The names are canonical: ParseDefinition accepts them in any case and
// rewrites them to these spellings; Validate accepts only these spellings.
const (
	// TypeUUID holds a uuid.UUID; in bodies and queries a UUID string.
	TypeUUID FieldType = "UUID"
	// TypeString holds a string of at most MaxStringBytes bytes.
	TypeString FieldType = "string"
	// TypeInt holds an int64.
	TypeInt FieldType = "int"
	// TypeFloat holds a float64 (never -0, NaN or an infinity).
	TypeFloat FieldType = "float"
	// TypeBool holds a bool.
	TypeBool FieldType = "bool"
	// TypeDatetime holds an int64: Unix time in microseconds, UTC.
	TypeDatetime FieldType = "datetime"
)

// fieldTypes lists the types in the order error messages name them.
var fieldTypes = []FieldType{TypeUUID, TypeString, TypeInt, TypeFloat, TypeBool, TypeDatetime}

// Limits of a definition. They are part of the model (they bound the index tables' shape), not
// configuration.
const (
	// MaxFields is the most fields an index holds, over all its column defs.
	MaxFields = 32
	// MaxTableLen is the longest index name, in bytes.
	MaxTableLen = 40
	// MaxFieldNameLen is the longest field name, in bytes.
	MaxFieldNameLen = 62
)

var (
	tablePattern     = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	fieldPattern     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,61}$`)
	datastorePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`) // as cluster's datastore names
)

// FieldError says which part of a definition or a query is wrong and why. Field is the path of
// the part in the YAML or JSON document ("column_defs[0].fields[1].type", "where[2].value",
// "shard_value"); Err says what is wrong and, where it helps, what was expected.
type FieldError struct {
	Field string
	Err   error
}

// Error returns "field: reason".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErr builds a *FieldError with a formatted reason.
func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// FieldDef declares one field of an index: the key of the field in the source column's JSON body
// and its type.
type FieldDef struct {
	Field string    `yaml:"field" json:"field"`
	Type  FieldType `yaml:"type" json:"type"`
}

// ColumnDef declares the fields an index takes from one source column.
type ColumnDef struct {
	ColumnKey string     `yaml:"column_key" json:"column_key"`
	Fields    []FieldDef `yaml:"fields" json:"fields"`
}

// Definition is an index as declared in YAML, in the Schemaless paper's form. Table is the
// index's name; ShardField names the field whose value decides the index shard of an entry (empty:
// the first field of the first column def). A Definition from ParseDefinition is valid and its
// types are canonical. A Definition is a value: the catalog keeps its own copy.
type Definition struct {
	Table      string      `yaml:"table" json:"table"`
	Datastore  string      `yaml:"datastore,omitempty" json:"datastore,omitempty"`
	ShardField string      `yaml:"shard_field,omitempty" json:"shard_field,omitempty"`
	ColumnDefs []ColumnDef `yaml:"column_defs" json:"column_defs"`
}

// Field is one field of an index with its type and source column, in the order of
// Definition.Fields: an entry's Values and a Plan's field indexes refer to this order.
type Field struct {
	Name   string
	Type   FieldType
	Column string
}

// ParseDefinition parses a definition from YAML (or JSON, which is YAML), strictly: unknown keys,
// values of the wrong shape (a scalar where a list is expected) and more than one document are
// errors. Type names are matched case-insensitively and rewritten canonically ("uuid" -> "UUID",
// "DateTime" -> "datetime"). The result is then validated (see Validate).
//
// Errors: every problem found, joined with errors.Join, each a *FieldError naming its path
// ("column_defs[0].fields[1].type"); YAML that does not parse gives one *FieldError for
// "definition". A structural problem (unknown key, wrong shape) is reported before, and instead
// of, the validation of the content.
func ParseDefinition(data []byte) (Definition, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return Definition{}, fieldErr("definition", "empty document")
		}
		return Definition{}, &FieldError{Field: "definition", Err: err}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return Definition{}, fieldErr("definition", "more than one YAML document")
	}
	if errs := checkShape(&doc); len(errs) > 0 {
		return Definition{}, errors.Join(errs...)
	}

	var d Definition
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&d); err != nil {
		return Definition{}, &FieldError{Field: "definition", Err: err}
	}
	for i := range d.ColumnDefs {
		for j := range d.ColumnDefs[i].Fields {
			f := &d.ColumnDefs[i].Fields[j]
			if t, ok := canonicalType(string(f.Type)); ok {
				f.Type = t
			}
		}
	}
	if err := d.Validate(); err != nil {
		return Definition{}, err
	}
	return d, nil
}

// canonicalType returns the canonical spelling of a type name given in any case.
func canonicalType(s string) (FieldType, bool) {
	for _, t := range fieldTypes {
		if strings.EqualFold(s, string(t)) {
			return t, true
		}
	}
	return "", false
}

// shape is the expected form of a YAML node: a scalar, a mapping with known keys, or a sequence
// of one shape.
type shape struct {
	keys []string          // mapping: the known keys in order
	sub  map[string]*shape // mapping: the shape of each key's value
	elem *shape            // sequence: the shape of the elements
}

var (
	scalarShape   = &shape{}
	fieldDefShape = &shape{keys: []string{"field", "type"},
		sub: map[string]*shape{"field": scalarShape, "type": scalarShape}}
	columnDefShape = &shape{keys: []string{"column_key", "fields"},
		sub: map[string]*shape{"column_key": scalarShape, "fields": {elem: fieldDefShape}}}
	definitionShape = &shape{keys: []string{"table", "datastore", "shard_field", "column_defs"},
		sub: map[string]*shape{"table": scalarShape, "datastore": scalarShape, "shard_field": scalarShape,
			"column_defs": {elem: columnDefShape}}}
)

// checkShape reports unknown keys and values of the wrong kind in a parsed definition document,
// with their paths. A null value is accepted anywhere (it decodes as the zero value, which
// Validate judges).
func checkShape(doc *yaml.Node) []error {
	n := doc
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return []error{fieldErr("definition", "empty document")}
		}
		n = n.Content[0]
	}
	if isNull(n) {
		return []error{fieldErr("definition", "empty document")}
	}
	var errs []error
	walkShape(n, definitionShape, "", &errs)
	return errs
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func walkShape(n *yaml.Node, s *shape, path string, errs *[]error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	name := path
	if name == "" {
		name = "definition"
	}
	if isNull(n) {
		return
	}
	switch {
	case s.elem != nil:
		if n.Kind != yaml.SequenceNode {
			*errs = append(*errs, fieldErr(name, "want a list, got %s", kindName(n)))
			return
		}
		for i, e := range n.Content {
			walkShape(e, s.elem, fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case s.keys != nil:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, fieldErr(name, "want a mapping with keys %s, got %s",
				strings.Join(s.keys, ", "), kindName(n)))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub, ok := s.sub[k.Value]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if !ok || k.Kind != yaml.ScalarNode {
				*errs = append(*errs, fieldErr(p, "unknown key (want %s)", strings.Join(s.keys, ", ")))
				continue
			}
			walkShape(v, sub, p, errs)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			*errs = append(*errs, fieldErr(name, "want a single value, got %s", kindName(n)))
		}
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	default:
		return "another kind of node"
	}
}

// Validate checks d and returns every problem it finds, joined with errors.Join (nil when d is
// valid), so a user sees all mistakes at once. Each problem is a *FieldError naming its path:
//
//   - table: matches [a-z][a-z0-9_]{0,39} (it names SQL tables "<table>_v<version>");
//   - datastore: empty, or a datastore name ([a-z][a-z0-9_]{0,31});
//   - column_defs[i].column_key: a valid column key (cells.ValidateColumnKey), unique over the
//     column defs; column_defs[i].fields: at least one field;
//   - column_defs[i].fields[j].field: matches [A-Za-z_][A-Za-z0-9_]{0,61} and is unique over all
//     column defs, ignoring case (SQL column names are case-insensitive);
//   - column_defs[i].fields[j].type: one of the canonical FieldType names;
//   - column_defs: at least one and at most MaxFields fields in all;
//   - shard_field: names a field, and that field is not a float.
func (d Definition) Validate() error {
	var errs []error
	add := func(e *FieldError) { errs = append(errs, e) }

	switch {
	case d.Table == "":
		add(fieldErr("table", "missing (the index's name)"))
	case !tablePattern.MatchString(d.Table):
		add(fieldErr("table", "%q is not a valid index name (want [a-z][a-z0-9_]{0,39})", d.Table))
	}
	if d.Datastore != "" && !datastorePattern.MatchString(d.Datastore) {
		add(fieldErr("datastore", "%q is not a valid datastore name (want [a-z][a-z0-9_]{0,31})", d.Datastore))
	}

	columns := map[string]int{}     // column key -> first column def
	fieldsAt := map[string]string{} // lower-case field name -> path of its first declaration
	total := 0
	for i, cd := range d.ColumnDefs {
		p := fmt.Sprintf("column_defs[%d]", i)
		if err := cells.ValidateColumnKey(cd.ColumnKey); err != nil {
			add(fieldErr(p+".column_key", "%q is not a valid column key (want [A-Za-z0-9_]{1,64})", cd.ColumnKey))
		} else if first, dup := columns[cd.ColumnKey]; dup {
			add(fieldErr(p+".column_key", "duplicate column key %q (also column_defs[%d])", cd.ColumnKey, first))
		} else {
			columns[cd.ColumnKey] = i
		}
		if len(cd.Fields) == 0 {
			add(fieldErr(p+".fields", "no fields (a column def takes at least one field)"))
		}
		for j, f := range cd.Fields {
			total++
			fp := fmt.Sprintf("%s.fields[%d]", p, j)
			switch {
			case f.Field == "":
				add(fieldErr(fp+".field", "missing (the key of the field in the column's JSON body)"))
			case !fieldPattern.MatchString(f.Field):
				add(fieldErr(fp+".field", "%q is not a valid field name (want [A-Za-z_][A-Za-z0-9_]{0,61})", f.Field))
			default:
				key := strings.ToLower(f.Field)
				if first, dup := fieldsAt[key]; dup {
					add(fieldErr(fp+".field", "duplicate field %q (also %s)", f.Field, first))
				} else {
					fieldsAt[key] = fp
				}
			}
			if !knownType(f.Type) {
				add(fieldErr(fp+".type", "unknown type %q (want UUID, string, int, float, bool or datetime)", f.Type))
			}
		}
	}
	switch {
	case total == 0:
		add(fieldErr("column_defs", "no fields, so no shard field"))
	case total > MaxFields:
		add(fieldErr("column_defs", "%d fields, at most %d", total, MaxFields))
	}
	if total > 0 {
		if d.ShardField != "" {
			f, ok := d.lookup(d.ShardField)
			switch {
			case !ok:
				add(fieldErr("shard_field", "no field %q", d.ShardField))
			case f.Type == TypeFloat:
				add(fieldErr("shard_field", "field %q is a float: float equality is a poor shard key "+
					"(0.1+0.2 is not 0.3); use another field or type", d.ShardField))
			}
		} else if first, ok := d.firstField(); ok && first.Type == TypeFloat {
			add(fieldErr(d.firstFieldPath()+".type", "float cannot be the type of the shard field (the first field, "+
				"as shard_field is not set): float equality is a poor shard key (0.1+0.2 is not 0.3); set shard_field "+
				"or use another type"))
		}
	}
	return errors.Join(errs...)
}

func knownType(t FieldType) bool {
	for _, k := range fieldTypes {
		if t == k {
			return true
		}
	}
	return false
}

// lookup finds the declaration of the field named name (exact spelling).
func (d Definition) lookup(name string) (FieldDef, bool) {
	for _, cd := range d.ColumnDefs {
		for _, f := range cd.Fields {
			if f.Field == name {
				return f, true
			}
		}
	}
	return FieldDef{}, false
}

// firstField returns the first declared field.
func (d Definition) firstField() (FieldDef, bool) {
	for _, cd := range d.ColumnDefs {
		if len(cd.Fields) > 0 {
			return cd.Fields[0], true
		}
	}
	return FieldDef{}, false
}

func (d Definition) firstFieldPath() string {
	for i, cd := range d.ColumnDefs {
		if len(cd.Fields) > 0 {
			return fmt.Sprintf("column_defs[%d].fields[0]", i)
		}
	}
	return "column_defs"
}

// shardFieldName is the effective shard field: ShardField, or the first declared field.
func (d Definition) shardFieldName() string {
	if d.ShardField != "" {
		return d.ShardField
	}
	f, _ := d.firstField()
	return f.Field
}

// Fields returns the index's fields: the shard field first, then the others in declaration order
// (column defs in order, fields in order within each). An entry's Values, a Plan's field indexes
// and the columns of an index table follow this order. The result is a new slice. On an invalid
// definition the result is best effort (an unknown shard field is left out).
func (d Definition) Fields() []Field {
	shard := d.shardFieldName()
	out := make([]Field, 1, 1+MaxFields)
	found := false
	for _, cd := range d.ColumnDefs {
		for _, f := range cd.Fields {
			if !found && f.Field == shard {
				out[0] = Field{Name: f.Field, Type: f.Type, Column: cd.ColumnKey}
				found = true
				continue
			}
			out = append(out, Field{Name: f.Field, Type: f.Type, Column: cd.ColumnKey})
		}
	}
	if !found {
		return out[1:]
	}
	return out
}

// Columns returns the keys of the index's source columns, sorted and without duplicates.
func (d Definition) Columns() []string {
	var out []string
	for _, cd := range d.ColumnDefs {
		out = append(out, cd.ColumnKey)
	}
	sort.Strings(out)
	return dedupSorted(out)
}

func dedupSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Equal reports whether d and o define the same index: the same table and datastore, the same
// effective shard field (an empty ShardField means the first field, so omitting it and naming the
// first field are equal) and the same column defs with the same fields and types in the same
// order (order matters: it is the order of Fields).
func (d Definition) Equal(o Definition) bool {
	if d.Table != o.Table || d.Datastore != o.Datastore || d.shardFieldName() != o.shardFieldName() ||
		len(d.ColumnDefs) != len(o.ColumnDefs) {
		return false
	}
	for i, cd := range d.ColumnDefs {
		od := o.ColumnDefs[i]
		if cd.ColumnKey != od.ColumnKey || len(cd.Fields) != len(od.Fields) {
			return false
		}
		for j, f := range cd.Fields {
			if f != od.Fields[j] {
				return false
			}
		}
	}
	return true
}

// clone returns a deep copy of d.
func (d Definition) clone() Definition {
	c := d
	if d.ColumnDefs != nil {
		c.ColumnDefs = make([]ColumnDef, len(d.ColumnDefs))
		for i, cd := range d.ColumnDefs {
			c.ColumnDefs[i] = ColumnDef{ColumnKey: cd.ColumnKey, Fields: append([]FieldDef(nil), cd.Fields...)}
		}
	}
	return c
}
