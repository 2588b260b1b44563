package indexes

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/schemaless-db/schemaless/cells"
)

// Cond is one condition of a query: the entry's field Field compared with Value by Op, one of
// "=", "!=", "<", "<=", ">", ">=" or "in" (Value a list of values).
type Cond struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value"`
}

// OrderBy names the field a query's results are sorted by, ascending unless Desc. In JSON it is
// an object {"field": "f", "desc": true} or a string: "f" or "f asc" (ascending), "-f" or
// "f desc" (descending); asc and desc in any case.
type OrderBy struct {
	Field string `json:"field"`
	Desc  bool   `json:"desc,omitempty"`
}

// UnmarshalJSON accepts the string and object forms (see OrderBy). A malformed value gives a
// *FieldError for "order_by".
func (o *OrderBy) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return &FieldError{Field: "order_by", Err: err}
		}
		parts := strings.Fields(s)
		switch {
		case len(parts) == 1 && strings.HasPrefix(parts[0], "-") && len(parts[0]) > 1:
			*o = OrderBy{Field: parts[0][1:], Desc: true}
		case len(parts) == 1 && !strings.HasPrefix(parts[0], "-"):
			*o = OrderBy{Field: parts[0]}
		case len(parts) == 2 && !strings.HasPrefix(parts[0], "-") && strings.EqualFold(parts[1], "asc"):
			*o = OrderBy{Field: parts[0]}
		case len(parts) == 2 && !strings.HasPrefix(parts[0], "-") && strings.EqualFold(parts[1], "desc"):
			*o = OrderBy{Field: parts[0], Desc: true}
		default:
			return fieldErr("order_by", "%q is not \"field\", \"-field\", \"field asc\" or \"field desc\"", s)
		}
		return nil
	case len(b) > 0 && b[0] == '{':
		var aux struct {
			Field string `json:"field"`
			Desc  bool   `json:"desc"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&aux); err != nil {
			return &FieldError{Field: "order_by", Err: fmt.Errorf("want {\"field\": ..., \"desc\": ...}: %v", err)}
		}
		if aux.Field == "" {
			return fieldErr("order_by.field", "missing")
		}
		*o = OrderBy(aux)
		return nil
	}
	return fieldErr("order_by", "want a string (\"field\", \"-field\", \"field desc\") or {\"field\": ..., \"desc\": ...}, got %s", b)
}

// Query is an index query as the API receives it, in JSON: the entries of one shard value that
// satisfy every condition of Where, sorted by OrderBy (default: row key), at most Limit of them
// (0: the default) after Cursor (from a previous page). Fields projects index fields (default:
// all); Columns names source columns whose latest cells the caller wants with each entry (the
// query layer fetches them; Evaluate ignores them). Version picks an index version (0: the
// alias; see Catalog.Resolve).
type Query struct {
	ShardValue any      `json:"shard_value"`
	Where      []Cond   `json:"where,omitempty"`
	Fields     []string `json:"fields,omitempty"`
	Columns    []string `json:"columns,omitempty"`
	OrderBy    *OrderBy `json:"order_by,omitempty"`
	Limit      int      `json:"limit,omitempty"`
	Cursor     string   `json:"cursor,omitempty"`
	Version    int      `json:"version,omitempty"`
}

// PlanCond is a typed condition: field index Column (into Definition.Fields) compared by Op
// ("=", "!=", "<", "<=", ">", ">=" or "in") with the typed values Values (one value, except for
// "in": 1 to Limits.MaxInValues).
type PlanCond struct {
	Column int
	Op     string
	Values []any
}

// PlanCursor is a keyset position: the order field's typed value (nil: the NULL position, and
// always nil when ordering by row key) and the row key.
type PlanCursor struct {
	Value  any
	RowKey uuid.UUID
}

// Plan is a compiled query: typed, checked, ready for the SQL layer or Evaluate. Field indexes
// refer to Definition.Fields.
type Plan struct {
	// ShardValue is the typed shard field value; Shard is its index shard (ShardOf).
	ShardValue any
	Shard      int
	// Where holds the conditions, all of which must hold.
	Where []PlanCond
	// OrderBy is the index of the sort field, -1 for the row key; Desc sorts descending. Ties
	// are broken by row key, in the same direction.
	OrderBy int
	Desc    bool
	// After is the position the page starts strictly after, nil for the first page.
	After *PlanCursor
	// Limit is the most entries to return, 1 to Limits.MaxLimit (Evaluate: <= 0 means no limit).
	Limit int
	// Fields are the projected field indexes in request order (default: all, in order).
	Fields []int
	// Columns are the requested source columns, as given.
	Columns []string
}

// Limits bound a query. A zero (or negative) field takes its default (DefaultLimits).
type Limits struct {
	// DefaultLimit is the page size of a query with limit 0; MaxLimit the largest limit allowed.
	DefaultLimit, MaxLimit int
	// MaxConds bounds len(where); MaxInValues the values of one "in"; MaxColumns len(columns).
	MaxConds, MaxInValues, MaxColumns int
}

// DefaultLimits returns the default limits: DefaultLimit 100, MaxLimit 1000, MaxConds 32,
// MaxInValues 100, MaxColumns 16.
func DefaultLimits() Limits {
	return Limits{DefaultLimit: 100, MaxLimit: 1000, MaxConds: 32, MaxInValues: 100, MaxColumns: 16}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	for _, p := range []struct{ v, def *int }{{&l.DefaultLimit, &d.DefaultLimit}, {&l.MaxLimit, &d.MaxLimit},
		{&l.MaxConds, &d.MaxConds}, {&l.MaxInValues, &d.MaxInValues}, {&l.MaxColumns, &d.MaxColumns}} {
		if *p.v <= 0 {
			*p.v = *p.def
		}
	}
	if l.DefaultLimit > l.MaxLimit {
		l.DefaultLimit = l.MaxLimit
	}
	return l
}

// Compile checks q against the index definition d (which must be valid, as the catalog holds it)
// and returns its typed Plan for a datastore of shards shards, within the limits lim.
//
// The first problem found is returned as a *FieldError whose Field is the JSON path of the
// culprit in the query: "shard_value" (missing or not of the shard field's type),
// "where" (too many conditions), "where[i].field" (not a field of the index), "where[i].op",
// "where[i].value" and "where[i].value[j]" (see ParseQueryValue; "in" takes a list of 1 to
// MaxInValues values), "fields[i]" (unknown or repeated), "columns" and "columns[i]" (too many,
// invalid or repeated column keys), "order_by" (not a field), "limit" (negative or above
// MaxLimit; 0 means DefaultLimit) and "cursor" (malformed, or made for another order_by).
// A non-positive shards or a definition without fields gives a plain error.
func Compile(d Definition, q Query, shards int, lim Limits) (Plan, error) {
	if shards <= 0 {
		return Plan{}, fmt.Errorf("indexes: compile: shard count must be positive, got %d", shards)
	}
	fields := d.Fields()
	if len(fields) == 0 {
		return Plan{}, fmt.Errorf("indexes: compile: index %q has no fields", d.Table)
	}
	lim = lim.withDefaults()
	byName := make(map[string]int, len(fields))
	for i, f := range fields {
		byName[f.Name] = i
	}
	p := Plan{OrderBy: -1}

	if q.ShardValue == nil {
		return Plan{}, fieldErr("shard_value", "missing (want the value of shard field %q: %s)",
			fields[0].Name, expected(fields[0].Type))
	}
	v, err := ParseQueryValue(fields[0].Type, q.ShardValue)
	if err != nil {
		return Plan{}, &FieldError{Field: "shard_value", Err: err}
	}
	p.ShardValue, p.Shard = v, ShardOf(fields[0].Type, v, shards)

	if len(q.Where) > lim.MaxConds {
		return Plan{}, fieldErr("where", "%d conditions, at most %d", len(q.Where), lim.MaxConds)
	}
	for i, c := range q.Where {
		fi, ok := byName[c.Field]
		if !ok {
			return Plan{}, fieldErr(fmt.Sprintf("where[%d].field", i), "no field %q in index %s", c.Field, d.Table)
		}
		pc := PlanCond{Column: fi, Op: c.Op}
		typ := fields[fi].Type
		switch c.Op {
		case "=", "!=", "<", "<=", ">", ">=":
			v, err := ParseQueryValue(typ, c.Value)
			if err != nil {
				return Plan{}, &FieldError{Field: fmt.Sprintf("where[%d].value", i), Err: err}
			}
			pc.Values = []any{v}
		case "in":
			list, ok := asList(c.Value)
			if !ok || len(list) == 0 || len(list) > lim.MaxInValues {
				got := describe(c.Value)
				if ok {
					got = fmt.Sprintf("%d values", len(list))
				}
				return Plan{}, fieldErr(fmt.Sprintf("where[%d].value", i), "op in needs a list of 1 to %d values, got %s",
					lim.MaxInValues, got)
			}
			for j, e := range list {
				v, err := ParseQueryValue(typ, e)
				if err != nil {
					return Plan{}, &FieldError{Field: fmt.Sprintf("where[%d].value[%d]", i, j), Err: err}
				}
				pc.Values = append(pc.Values, v)
			}
		default:
			return Plan{}, fieldErr(fmt.Sprintf("where[%d].op", i), "unknown op %q (want =, !=, <, <=, >, >= or in)", c.Op)
		}
		p.Where = append(p.Where, pc)
	}

	if len(q.Fields) == 0 {
		p.Fields = make([]int, len(fields))
		for i := range fields {
			p.Fields[i] = i
		}
	} else {
		seen := map[string]int{}
		for i, name := range q.Fields {
			fi, ok := byName[name]
			if !ok {
				return Plan{}, fieldErr(fmt.Sprintf("fields[%d]", i), "no field %q in index %s", name, d.Table)
			}
			if first, dup := seen[name]; dup {
				return Plan{}, fieldErr(fmt.Sprintf("fields[%d]", i), "duplicate field %q (also fields[%d])", name, first)
			}
			seen[name] = i
			p.Fields = append(p.Fields, fi)
		}
	}

	if len(q.Columns) > lim.MaxColumns {
		return Plan{}, fieldErr("columns", "%d columns, at most %d", len(q.Columns), lim.MaxColumns)
	}
	seenCol := map[string]int{}
	for i, c := range q.Columns {
		if err := cells.ValidateColumnKey(c); err != nil {
			return Plan{}, fieldErr(fmt.Sprintf("columns[%d]", i), "%q is not a valid column key (want [A-Za-z0-9_]{1,64})", c)
		}
		if first, dup := seenCol[c]; dup {
			return Plan{}, fieldErr(fmt.Sprintf("columns[%d]", i), "duplicate column %q (also columns[%d])", c, first)
		}
		seenCol[c] = i
	}
	p.Columns = append([]string(nil), q.Columns...)

	if q.OrderBy != nil {
		fi, ok := byName[q.OrderBy.Field]
		if !ok {
			return Plan{}, fieldErr("order_by", "no field %q in index %s", q.OrderBy.Field, d.Table)
		}
		p.OrderBy, p.Desc = fi, q.OrderBy.Desc
	}

	switch {
	case q.Limit == 0:
		p.Limit = lim.DefaultLimit
	case q.Limit < 0 || q.Limit > lim.MaxLimit:
		return Plan{}, fieldErr("limit", "%d is outside 1..%d (0: the default, %d)", q.Limit, lim.MaxLimit, lim.DefaultLimit)
	default:
		p.Limit = q.Limit
	}

	if q.Cursor != "" {
		after, err := decodeCursor(q.Cursor, fields, p.OrderBy, p.Desc)
		if err != nil {
			return Plan{}, &FieldError{Field: "cursor", Err: err}
		}
		p.After = after
	}
	return p, nil
}

// asList returns the elements of v if it is a slice (not a []byte).
func asList(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array || rv.Type().Elem().Kind() == reflect.Uint8 {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// Cursor encoding: base64url without padding of the MessagePack array
// [order field index (-1: row key), desc, typed value, row key (16 bytes)], where the typed value
// is nil, a UUID as 16 bytes (bin), a string (str), an int or datetime (int), a float (float 64)
// or a bool.

// NextCursor returns the cursor of the position of last, the last entry of a page of p's
// results: a query with this cursor and the same order_by continues strictly after last. The
// cursor is opaque to clients.
func NextCursor(p Plan, last Entry) string {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	// Writes to a bytes.Buffer do not fail.
	_ = enc.EncodeArrayLen(4)
	_ = enc.EncodeInt(int64(p.OrderBy))
	_ = enc.EncodeBool(p.Desc)
	var v any
	if p.OrderBy >= 0 && p.OrderBy < len(last.Values) {
		v = last.Values[p.OrderBy]
	}
	switch x := v.(type) {
	case uuid.UUID:
		_ = enc.EncodeBytes(x[:])
	case string:
		_ = enc.EncodeString(x)
	case int64:
		_ = enc.EncodeInt(x)
	case float64:
		_ = enc.EncodeFloat64(x)
	case bool:
		_ = enc.EncodeBool(x)
	default:
		_ = enc.EncodeNil()
	}
	_ = enc.EncodeBytes(last.RowKey[:])
	return base64.RawURLEncoding.EncodeToString(buf.Bytes())
}

// orderName renders an order for error messages.
func orderName(fields []Field, order int, desc bool) string {
	name := "row key"
	if order >= 0 && order < len(fields) {
		name = fmt.Sprintf("%q", fields[order].Name)
	}
	if desc {
		return name + " descending"
	}
	return name + " ascending"
}

// decodeCursor decodes a cursor and checks it against the query's order.
func decodeCursor(s string, fields []Field, order int, desc bool) (*PlanCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("malformed (not a cursor from a previous page)")
	}
	malformed := func() (*PlanCursor, error) {
		return nil, fmt.Errorf("malformed (not a cursor from a previous page)")
	}
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	if n, err := dec.DecodeArrayLen(); err != nil || n != 4 {
		return malformed()
	}
	o, err := dec.DecodeInt64()
	if err != nil || o < -1 || o >= int64(len(fields)) {
		return malformed()
	}
	dsc, err := dec.DecodeBool()
	if err != nil {
		return malformed()
	}
	if int(o) != order || dsc != desc {
		return nil, fmt.Errorf("made for another order (by %s), not this query's (by %s)",
			orderName(fields, int(o), dsc), orderName(fields, order, desc))
	}
	var c PlanCursor
	code, err := dec.PeekCode()
	if err != nil {
		return malformed()
	}
	if code == msgpcode.Nil {
		_ = dec.DecodeNil()
	} else {
		if order < 0 {
			return malformed()
		}
		v, ok := decodeCursorValue(dec, fields[order].Type)
		if !ok {
			return malformed()
		}
		c.Value = v
	}
	rk, err := dec.DecodeBytes()
	if err != nil || len(rk) != 16 || r.Len() != 0 {
		return malformed()
	}
	copy(c.RowKey[:], rk)
	return &c, nil
}

func decodeCursorValue(dec *msgpack.Decoder, t FieldType) (any, bool) {
	switch t {
	case TypeUUID:
		b, err := dec.DecodeBytes()
		if err != nil || len(b) != 16 {
			return nil, false
		}
		var u uuid.UUID
		copy(u[:], b)
		return u, true
	case TypeString:
		s, err := dec.DecodeString()
		return s, err == nil && len(s) <= MaxStringBytes
	case TypeInt:
		i, err := dec.DecodeInt64()
		return i, err == nil
	case TypeDatetime:
		i, err := dec.DecodeInt64()
		return i, err == nil && i >= minDatetimeMicros && i <= maxDatetimeMicros
	case TypeFloat:
		f, err := dec.DecodeFloat64()
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	case TypeBool:
		b, err := dec.DecodeBool()
		return b, err == nil
	}
	return nil, false
}

// Evaluate runs the plan on entries, by brute force: it is the reference of the query
// semantics, which the SQL implementation must match exactly.
//
//   - An entry is kept if Values[0] equals p.ShardValue and it satisfies every condition of
//     p.Where, with SQL's NULL semantics: a nil value satisfies no operator, not even != or in.
//   - Comparison: UUIDs bytewise (as BINARY(16)), strings bytewise (a binary collation), bools
//     false < true, numbers numerically (ints, floats and datetimes each within their type).
//   - Order: by field p.OrderBy (-1: by row key alone), nil first when ascending, ties broken by
//     row key bytewise; descending is exactly the reverse (nil last, ties by row key
//     descending).
//   - p.After keeps only the entries strictly after that position in this order (a nil cursor
//     value is the NULL position); then at most p.Limit entries are returned (p.Limit <= 0: all).
//
// The result is a new slice whose Entries share Values and Refs with entries. Evaluate does not
// project (p.Fields) nor fetch columns (p.Columns).
func Evaluate(p Plan, entries []Entry) []Entry {
	var out []Entry
	for _, e := range entries {
		if len(e.Values) == 0 || e.Values[0] == nil || p.ShardValue == nil || compareValues(e.Values[0], p.ShardValue) != 0 {
			continue
		}
		if matches(p.Where, e) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		c := comparePos(orderValue(p, out[i]), out[i].RowKey, orderValue(p, out[j]), out[j].RowKey)
		if p.Desc {
			return c > 0
		}
		return c < 0
	})
	if p.After != nil {
		kept := out[:0]
		for _, e := range out {
			c := comparePos(orderValue(p, e), e.RowKey, p.After.Value, p.After.RowKey)
			if (!p.Desc && c > 0) || (p.Desc && c < 0) {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out
}

// orderValue is e's value of the order field (nil when ordering by row key).
func orderValue(p Plan, e Entry) any {
	if p.OrderBy < 0 || p.OrderBy >= len(e.Values) {
		return nil
	}
	return e.Values[p.OrderBy]
}

// comparePos compares two positions (order value, row key) in ascending order: nil values
// first, then values, then row keys bytewise.
func comparePos(av any, ak uuid.UUID, bv any, bk uuid.UUID) int {
	if c := compareValues(av, bv); c != 0 {
		return c
	}
	return bytes.Compare(ak[:], bk[:])
}

// matches reports whether e satisfies every condition.
func matches(conds []PlanCond, e Entry) bool {
	for _, c := range conds {
		if c.Column < 0 || c.Column >= len(e.Values) {
			return false
		}
		v := e.Values[c.Column]
		if v == nil || len(c.Values) == 0 {
			return false
		}
		var ok bool
		switch c.Op {
		case "in":
			for _, w := range c.Values {
				if w != nil && compareValues(v, w) == 0 {
					ok = true
					break
				}
			}
		default:
			w := c.Values[0]
			if w == nil {
				return false
			}
			r := compareValues(v, w)
			switch c.Op {
			case "=":
				ok = r == 0
			case "!=":
				ok = r != 0
			case "<":
				ok = r < 0
			case "<=":
				ok = r <= 0
			case ">":
				ok = r > 0
			case ">=":
				ok = r >= 0
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// typeRank orders values of different Go types (which a well-typed index never compares): nil
// first, then bools, numbers, strings, UUIDs.
func typeRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int64, float64:
		return 2
	case string:
		return 3
	case uuid.UUID:
		return 4
	}
	return 5
}

// compareValues compares two typed values: -1, 0 or +1. nil is below everything; see Evaluate.
func compareValues(a, b any) int {
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return cmpInt(ra, rb)
	}
	switch x := a.(type) {
	case nil:
		return 0
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case string:
		return strings.Compare(x, b.(string))
	case uuid.UUID:
		y := b.(uuid.UUID)
		return bytes.Compare(x[:], y[:])
	case int64:
		switch y := b.(type) {
		case int64:
			return cmpInt(x, y)
		case float64:
			return -compareFloatInt(y, x)
		}
	case float64:
		switch y := b.(type) {
		case float64:
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		case int64:
			return compareFloatInt(x, y)
		}
	}
	return strings.Compare(fmt.Sprintf("%T%v", a, a), fmt.Sprintf("%T%v", b, b)) // not typed values: any fixed order
}

// compareFloatInt compares a float64 with an int64 exactly.
func compareFloatInt(f float64, i int64) int {
	r := new(big.Rat).SetFloat64(f)
	if r == nil {
		if f > 0 {
			return 1
		}
		return -1
	}
	return r.Cmp(new(big.Rat).SetInt64(i))
}

func cmpInt[T int | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
