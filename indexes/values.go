package indexes

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
)

// MaxStringBytes is the longest value of a string field, in bytes (not characters). A longer
// string in a body does not convert (it is a mismatch); in a query it is an error.
const MaxStringBytes = 255

// The range of datetime values: years 1 to 9999, UTC, in Unix microseconds. Outside it a date
// cannot be written in RFC 3339.
var (
	minDatetimeMicros = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxDatetimeMicros = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()
)

// datetimeLayouts are the accepted spellings of a datetime string, tried in order. A layout
// without a zone means UTC. time.Parse accepts fractional seconds after the seconds in each.
var datetimeLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"}

// datetimeFormat renders a datetime: RFC 3339 in UTC with up to 6 fractional digits, trailing
// zeros (and a bare dot) removed.
const datetimeFormat = "2006-01-02T15:04:05.999999Z07:00"

// Convert returns the typed value of field type t for v, a value decoded from a cell body
// (cells.Body.Object: nil, bool, string, int64, uint64, float64, *cells.Number, or any Go integer
// or float, json.Number and cells.Number), and ok=false when v does not fit t. A nil v gives
// (nil, true): an absent or null field is not a mismatch.
//
// Typed values, per type (what an Entry holds and storage stores):
//
//   - UUID: uuid.UUID, from a string in the canonical 8-4-4-4-12 form (either case) or a
//     uuid.UUID;
//   - string: string of at most MaxStringBytes bytes, from a string;
//   - int: int64, from a number whose value is an integer in the int64 range (10, 10.0 and 1e1
//     are 10; 10.5 and 2^63 do not fit);
//   - float: float64, from any finite number (integers are rounded to the nearest float64; a
//     number beyond the float64 range does not fit); -0 becomes 0;
//   - bool: bool, from a bool;
//   - datetime: int64 Unix microseconds in UTC, in years 1 to 9999, from a string in RFC 3339
//     (with or without fractional seconds, any offset), "2006-01-02T15:04:05" or
//     "2006-01-02 15:04:05" (UTC, optional fractional seconds) or "2006-01-02" (midnight UTC),
//     from a number of Unix seconds (integral or fractional), or from a time.Time. Fractions of
//     a microsecond are truncated toward the past in strings and rounded to the nearest
//     microsecond (half away from zero) in numbers, whose binary float64 form is only close to
//     the decimal written (0.3 is 0.29999999999999998890).
//
// Strings never convert to numbers, nor numbers to strings.
func Convert(t FieldType, v any) (out any, ok bool) {
	if v == nil {
		return nil, true
	}
	if p, isPtr := v.(*cells.Number); isPtr && p == nil {
		return nil, true
	}
	switch t {
	case TypeUUID:
		return toUUID(v)
	case TypeString:
		s, ok := v.(string)
		if !ok || len(s) > MaxStringBytes {
			return nil, false
		}
		return s, true
	case TypeInt:
		i, ok := toInt(v)
		if !ok {
			return nil, false
		}
		return i, true
	case TypeFloat:
		f, ok := toFloat(v)
		if !ok {
			return nil, false
		}
		return f, true
	case TypeBool:
		b, ok := v.(bool)
		if !ok {
			return nil, false
		}
		return b, true
	case TypeDatetime:
		us, ok := toDatetime(v)
		if !ok {
			return nil, false
		}
		return us, true
	}
	return nil, false
}

func toUUID(v any) (any, bool) {
	switch x := v.(type) {
	case uuid.UUID:
		return x, true
	case string:
		u, err := cells.ParseRowKey(x)
		if err != nil {
			return nil, false
		}
		return u, true
	}
	return nil, false
}

// numberText returns the decimal text of a textual number type.
func numberText(v any) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		return string(x), true
	case cells.Number:
		return string(x), true
	case *cells.Number:
		return string(*x), true
	}
	return "", false
}

// exactRat returns the exact value of any numeric v (nil for a non-number, NaN or infinity).
func exactRat(v any) *big.Rat {
	switch x := v.(type) {
	case int:
		return new(big.Rat).SetInt64(int64(x))
	case int8:
		return new(big.Rat).SetInt64(int64(x))
	case int16:
		return new(big.Rat).SetInt64(int64(x))
	case int32:
		return new(big.Rat).SetInt64(int64(x))
	case int64:
		return new(big.Rat).SetInt64(x)
	case uint:
		return new(big.Rat).SetUint64(uint64(x))
	case uint8:
		return new(big.Rat).SetUint64(uint64(x))
	case uint16:
		return new(big.Rat).SetUint64(uint64(x))
	case uint32:
		return new(big.Rat).SetUint64(uint64(x))
	case uint64:
		return new(big.Rat).SetUint64(x)
	case float32:
		return new(big.Rat).SetFloat64(float64(x)) // nil for NaN and infinities
	case float64:
		return new(big.Rat).SetFloat64(x)
	}
	if s, ok := numberText(v); ok && isJSONNumber(s) {
		r, ok := new(big.Rat).SetString(s)
		if ok {
			return r
		}
	}
	return nil
}

// isJSONNumber reports whether s is a number in JSON's grammar (RFC 8259 §6); big.Rat and
// strconv accept more (fractions, hex, underscores, "Inf").
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 { // false for NaN, infinities too
			return 0, false
		}
		return int64(x), true
	}
	r := exactRat(v)
	if r == nil || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

func toFloat(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	default:
		if s, ok := numberText(v); ok {
			if !isJSONNumber(s) {
				return 0, false
			}
			var err error
			if f, err = strconv.ParseFloat(s, 64); err != nil { // out of range: ±Inf
				return 0, false
			}
		} else if r := exactRat(v); r != nil { // the other Go integers
			f, _ = r.Float64()
		} else {
			return 0, false
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	if f == 0 {
		f = 0 // -0 is 0
	}
	return f, true
}

func toDatetime(v any) (int64, bool) {
	var us int64
	switch x := v.(type) {
	case string:
		var t time.Time
		var err error
		for _, layout := range datetimeLayouts {
			if t, err = time.Parse(layout, x); err == nil {
				break
			}
		}
		if err != nil {
			return 0, false
		}
		us = t.UnixMicro() // the range check below rejects years 0 and 10000 reached by an offset
	case time.Time:
		if y := x.UTC().Year(); y < 1 || y > 9999 {
			return 0, false
		}
		us = x.UnixMicro()
	case int64:
		if x < minDatetimeMicros/1e6-1 || x > maxDatetimeMicros/1e6+1 {
			return 0, false
		}
		us = x * 1e6
	case bool:
		return 0, false
	default:
		r := exactRat(v)
		if r == nil {
			return 0, false
		}
		r.Mul(r, big.NewRat(1e6, 1))
		n, ok := roundRat(r)
		if !ok {
			return 0, false
		}
		us = n
	}
	if us < minDatetimeMicros || us > maxDatetimeMicros {
		return 0, false
	}
	return us, true
}

// roundRat rounds r to the nearest integer, halves away from zero, and reports whether the
// result fits int64.
func roundRat(r *big.Rat) (int64, bool) {
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int)) // truncated toward zero
	m.Abs(m).Lsh(m, 1)
	if m.Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() {
		return 0, false
	}
	return q.Int64(), true
}

// ParseQueryValue returns the typed value (see Convert) of field type t for v, a value from a
// JSON query decoded with UseNumber (json.Number, string, bool, nil, []any, map[string]any).
// null is not allowed: a condition on NULL matches nothing (see Evaluate). The error says what
// was expected and what was given ("want an integer in the int64 range, got 1.5"); it carries no
// field name: Compile wraps it in a *FieldError.
func ParseQueryValue(t FieldType, v any) (any, error) {
	if !knownType(t) {
		return nil, fmt.Errorf("unknown field type %q", t)
	}
	if v == nil {
		return nil, fmt.Errorf("null is not allowed (want %s)", expected(t))
	}
	out, ok := Convert(t, v)
	if !ok {
		if s, isStr := v.(string); isStr && t == TypeString {
			return nil, fmt.Errorf("want %s, got a string of %d bytes", expected(t), len(s))
		}
		return nil, fmt.Errorf("want %s, got %s", expected(t), describe(v))
	}
	return out, nil
}

// expected describes the query values a type accepts.
func expected(t FieldType) string {
	switch t {
	case TypeUUID:
		return "a UUID string (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
	case TypeString:
		return fmt.Sprintf("a string of at most %d bytes", MaxStringBytes)
	case TypeInt:
		return "an integer in the int64 range"
	case TypeFloat:
		return "a number"
	case TypeBool:
		return "true or false"
	case TypeDatetime:
		return "a date-time string (RFC 3339, 2006-01-02T15:04:05, 2006-01-02 15:04:05 or 2006-01-02; UTC " +
			"unless an offset is given) or a number of Unix seconds, in years 1 to 9999"
	}
	return string(t)
}

// describe renders a query value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			return fmt.Sprintf("the string %q...", x[:40])
		}
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + string(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v (%T)", v, v)
}

// Format returns the JSON-ready form of a typed value of type t: a UUID as its canonical
// lower-case string, a datetime as RFC 3339 in UTC with up to 6 fractional digits and no
// trailing zeros ("2001-01-03T00:00:00Z", "2001-01-03T00:00:00.25Z"); other values, nil, and
// values that are not of t's typed Go type, unchanged.
func Format(t FieldType, v any) any {
	switch t {
	case TypeUUID:
		if u, ok := v.(uuid.UUID); ok {
			return u.String()
		}
	case TypeDatetime:
		if us, ok := v.(int64); ok {
			return time.UnixMicro(us).UTC().Format(datetimeFormat)
		}
	}
	return v
}

// Extract converts the fields of column taken from obj, a decoded body of a cell of that column.
// values maps the index (into fields) of every field whose Column is column to its typed value,
// nil when the key is absent or null, or when the value does not convert; mismatched lists, in
// field order, the names of the fields whose value did not convert. Keys are matched exactly
// (case-sensitive) at the top level of obj.
func Extract(fields []Field, column string, obj map[string]any) (values map[int]any, mismatched []string) {
	values = map[int]any{}
	for i, f := range fields {
		if f.Column != column {
			continue
		}
		v, ok := Convert(f.Type, obj[f.Name])
		if !ok {
			mismatched = append(mismatched, f.Name)
			v = nil
		}
		values[i] = v
	}
	return values, mismatched
}

// Type tags of ValueHash's encoding. They are part of the stored format: never change them.
const (
	tagNull     = 0x00
	tagString   = 's'
	tagInt      = 'i'
	tagFloat    = 'f'
	tagBool     = 'b'
	tagDatetime = 't'
)

// FNV-1a 64-bit parameters (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/), as in
// cells.ShardHash.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// ValueHash is the stable hash of a typed value v of type t, which places index entries on
// shards. For a UUID it is cells.ShardHash (the hash of row keys). For other types it is FNV-1a
// 64 over a type tag byte followed by the value's canonical bytes:
//
//   - string: tag 's', then the string's bytes;
//   - int: tag 'i', then the int64 big-endian (8 bytes, two's complement);
//   - datetime: tag 't', then the Unix microseconds as int64 big-endian;
//   - float: tag 'f', then the IEEE 754 bits big-endian, -0 taken as 0;
//   - bool: tag 'b', then one byte, 0 or 1;
//   - nil: the byte 0 alone (no entry is written without a shard value: this only makes the
//     function total).
//
// The hash never changes: stored entries depend on it, and test vectors pin it. It panics if v
// is not nil and not of t's typed Go type (see Convert): that is a programming error.
func ValueHash(t FieldType, v any) uint64 {
	if v == nil {
		return fnv1a(fnvOffset64, []byte{tagNull})
	}
	var buf [9]byte
	var b []byte
	switch x := v.(type) {
	case uuid.UUID:
		if t == TypeUUID {
			return cells.ShardHash(x)
		}
	case string:
		if t == TypeString {
			h := fnv1a(fnvOffset64, []byte{tagString})
			for i := 0; i < len(x); i++ {
				h ^= uint64(x[i])
				h *= fnvPrime64
			}
			return h
		}
	case int64:
		switch t {
		case TypeInt:
			buf[0] = tagInt
		case TypeDatetime:
			buf[0] = tagDatetime
		}
		if buf[0] != 0 {
			binary.BigEndian.PutUint64(buf[1:], uint64(x))
			b = buf[:9]
		}
	case float64:
		if t == TypeFloat {
			if x == 0 {
				x = 0
			}
			buf[0] = tagFloat
			binary.BigEndian.PutUint64(buf[1:], math.Float64bits(x))
			b = buf[:9]
		}
	case bool:
		if t == TypeBool {
			buf[0] = tagBool
			if x {
				buf[1] = 1
			}
			b = buf[:2]
		}
	}
	if b == nil {
		panic(fmt.Sprintf("indexes: a value of Go type %T is not a typed %s value", v, t))
	}
	return fnv1a(fnvOffset64, b)
}

func fnv1a(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

// ShardOf returns the shard, in a datastore of shards shards, of the index entries whose shard
// field (of type t) has the typed value v: ValueHash(t, v) mod shards. For a UUID this is
// cells.ShardOf, the shard a row of that row key lives on. It panics if shards is not positive
// or v is not a typed value of t (programming errors).
func ShardOf(t FieldType, v any, shards int) int {
	if shards <= 0 {
		panic("indexes: shard count must be positive")
	}
	return int(ValueHash(t, v) % uint64(shards))
}
