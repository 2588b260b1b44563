package indexes

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized indexes tests (0: from the clock)")

// testRand returns the random source of a randomized test and logs its seed.
func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0x696e6465786573))
}

// bodyValue returns what cells.Body.Object yields for the JSON value text, stored as key "v".
func bodyValue(t *testing.T, text string) any {
	t.Helper()
	b, err := cells.EncodeBody([]byte(`{"v":` + text + `}`))
	require.NoError(t, err, "EncodeBody(%s)", text)
	obj, err := b.Object()
	require.NoError(t, err, "Object() of %s", text)
	return obj["v"]
}

const uuidText = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"

func us(y int, mo time.Month, d, h, mi, s, ns int, loc *time.Location) int64 {
	return time.Date(y, mo, d, h, mi, s, ns, loc).UnixMicro()
}

// convertCases are JSON values as stored in a cell body, and what they convert to (ok false:
// mismatch). The expected values are computed by the standard library where that is the oracle.
var convertCases = []struct {
	typ  FieldType
	json string
	want any
	ok   bool
}{
	{TypeUUID, `"` + uuidText + `"`, uuid.MustParse(uuidText), true},
	{TypeUUID, `"` + strings.ToUpper(uuidText) + `"`, uuid.MustParse(uuidText), true},
	{TypeUUID, `"{` + uuidText + `}"`, nil, false},
	{TypeUUID, `"6ba7b8109dad11d180b400c04fd430c8"`, nil, false},
	{TypeUUID, `"6ba7b810-9dad-11d1-80b4-00c04fd430cg"`, nil, false},
	{TypeUUID, `12`, nil, false},
	{TypeUUID, `null`, nil, true},

	{TypeString, `"Zürich"`, "Zürich", true},
	{TypeString, `""`, "", true},
	{TypeString, `"` + strings.Repeat("a", 255) + `"`, strings.Repeat("a", 255), true},
	{TypeString, `"` + strings.Repeat("a", 256) + `"`, nil, false},
	{TypeString, `"` + strings.Repeat("é", 127) + `a"`, strings.Repeat("é", 127) + "a", true}, // 255 bytes
	{TypeString, `"` + strings.Repeat("é", 128) + `"`, nil, false},                            // 128 runes, 256 bytes
	{TypeString, `12`, nil, false},
	{TypeString, `true`, nil, false},
	{TypeString, `["a"]`, nil, false},

	{TypeInt, `0`, int64(0), true},
	{TypeInt, `-13`, int64(-13), true},
	{TypeInt, `9223372036854775807`, int64(math.MaxInt64), true},
	{TypeInt, `-9223372036854775808`, int64(math.MinInt64), true},
	{TypeInt, `9223372036854775808`, nil, false},  // uint64
	{TypeInt, `18446744073709551615`, nil, false}, // uint64
	{TypeInt, `-9223372036854775809`, nil, false}, // *cells.Number
	{TypeInt, `100.0`, int64(100), true},
	{TypeInt, `1e2`, int64(100), true},
	{TypeInt, `10.5`, nil, false},
	{TypeInt, `1e400`, nil, false},
	{TypeInt, `0.1000000000000000000001`, nil, false},
	{TypeInt, `"12"`, nil, false},
	{TypeInt, `true`, nil, false},

	{TypeFloat, `1.5`, 1.5, true},
	{TypeFloat, `-2`, -2.0, true},
	{TypeFloat, `-0.0`, 0.0, true},
	{TypeFloat, `18446744073709551615`, float64(math.MaxUint64), true},
	{TypeFloat, `0.1000000000000000000001`, 0.1, true},
	{TypeFloat, `1e400`, nil, false},
	{TypeFloat, `-1e400`, nil, false},
	{TypeFloat, `"1.5"`, nil, false},

	{TypeBool, `true`, true, true},
	{TypeBool, `false`, false, true},
	{TypeBool, `1`, nil, false},
	{TypeBool, `"true"`, nil, false},

	{TypeDatetime, `"2001-01-03T00:00:00Z"`, us(2001, 1, 3, 0, 0, 0, 0, time.UTC), true},
	{TypeDatetime, `"2001-01-03T04:05:06.789Z"`, us(2001, 1, 3, 4, 5, 6, 789e6, time.UTC), true},
	{TypeDatetime, `"2001-01-03T04:05:06.1234567Z"`, us(2001, 1, 3, 4, 5, 6, 123456e3, time.UTC), true}, // truncated
	{TypeDatetime, `"2001-01-03T04:05:06+02:00"`, us(2001, 1, 3, 2, 5, 6, 0, time.UTC), true},
	{TypeDatetime, `"2001-01-03T04:05:06.5-01:30"`, us(2001, 1, 3, 5, 35, 6, 5e8, time.UTC), true},
	{TypeDatetime, `"2001-01-03T04:05:06"`, us(2001, 1, 3, 4, 5, 6, 0, time.UTC), true},
	{TypeDatetime, `"2001-01-03T04:05:06.25"`, us(2001, 1, 3, 4, 5, 6, 25e7, time.UTC), true},
	{TypeDatetime, `"2001-01-03 04:05:06"`, us(2001, 1, 3, 4, 5, 6, 0, time.UTC), true},
	{TypeDatetime, `"2001-01-03 04:05:06.000001"`, us(2001, 1, 3, 4, 5, 6, 1000, time.UTC), true},
	{TypeDatetime, `"2001-01-03"`, us(2001, 1, 3, 0, 0, 0, 0, time.UTC), true},
	{TypeDatetime, `"1969-12-31T23:59:59.9999999Z"`, int64(-1), true}, // truncated toward the past
	{TypeDatetime, `"0001-01-01T00:00:00Z"`, us(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
	{TypeDatetime, `"9999-12-31T23:59:59.999999Z"`, us(9999, 12, 31, 23, 59, 59, 999999e3, time.UTC), true},
	{TypeDatetime, `"0001-01-01T00:00:00+01:00"`, nil, false}, // year 0 in UTC
	{TypeDatetime, `"9999-12-31T23:59:59-01:00"`, nil, false}, // year 10000 in UTC
	{TypeDatetime, `"2001-13-01"`, nil, false},
	{TypeDatetime, `"2001-1-3"`, nil, false},
	{TypeDatetime, `"01/03/2001"`, nil, false},
	{TypeDatetime, `"2001-01-03T04:05"`, nil, false},
	{TypeDatetime, `"978480000"`, nil, false},
	{TypeDatetime, `978480000`, us(2001, 1, 3, 0, 0, 0, 0, time.UTC), true},
	{TypeDatetime, `978480000.0`, us(2001, 1, 3, 0, 0, 0, 0, time.UTC), true},
	{TypeDatetime, `0`, int64(0), true},
	{TypeDatetime, `-1`, int64(-1e6), true},
	{TypeDatetime, `1.5`, int64(1500000), true},
	{TypeDatetime, `0.3`, int64(300000), true},                     // float64 0.29999..., rounded
	{TypeDatetime, `0.0000005`, int64(1), true},                    // half away from zero
	{TypeDatetime, `-0.0000005`, int64(-1), true},                  // half away from zero
	{TypeDatetime, `0.00000049999999999999999999`, int64(0), true}, // *cells.Number, exact
	{TypeDatetime, `253402300799`, us(9999, 12, 31, 23, 59, 59, 0, time.UTC), true},
	{TypeDatetime, `253402300800`, nil, false},
	{TypeDatetime, `-62135596800`, us(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
	{TypeDatetime, `-62135596801`, nil, false},
	{TypeDatetime, `9223372036854775807`, nil, false},
	{TypeDatetime, `18446744073709551615`, nil, false},
	{TypeDatetime, `1e400`, nil, false},
	{TypeDatetime, `true`, nil, false},
}

func TestConvertBodyValues(t *testing.T) {
	t.Parallel()
	for _, c := range convertCases {
		in := bodyValue(t, c.json)
		got, ok := Convert(c.typ, in)
		assert.Equal(t, c.ok, ok, "Convert(%s, %s as %T) = %#v: ok", c.typ, c.json, in, got)
		assert.Equal(t, c.want, got, "Convert(%s, %s as %T)", c.typ, c.json, in)
		if f, isF := got.(float64); isF {
			assert.False(t, math.Signbit(f) && f == 0, "Convert(%s, %s) = -0, want 0", c.typ, c.json)
		}
	}
}

// The same values decoded by encoding/json with UseNumber (a query) convert the same way, and
// ParseQueryValue agrees with Convert (except null).
func TestParseQueryValueAgreesWithConvert(t *testing.T) {
	t.Parallel()
	for _, c := range convertCases {
		dec := json.NewDecoder(strings.NewReader(c.json))
		dec.UseNumber()
		var in any
		require.NoError(t, dec.Decode(&in), "decode %s", c.json)
		got, ok := Convert(c.typ, in)
		assert.Equal(t, c.ok, ok, "Convert(%s, %s as %T) = %#v: ok", c.typ, c.json, in, got)
		assert.Equal(t, c.want, got, "Convert(%s, %s as %T)", c.typ, c.json, in)
		q, err := ParseQueryValue(c.typ, in)
		switch {
		case in == nil:
			assert.ErrorContains(t, err, "null is not allowed", "ParseQueryValue(%s, null) = %v: want a null error", c.typ, q)
		case c.ok:
			if assert.NoError(t, err, "ParseQueryValue(%s, %s)", c.typ, c.json) {
				assert.Equal(t, c.want, q, "ParseQueryValue(%s, %s)", c.typ, c.json)
			}
		default:
			if assert.Error(t, err, "ParseQueryValue(%s, %s) = %#v: want an error saying %q", c.typ, c.json, q, expected(c.typ)) {
				assert.True(t, strings.HasPrefix(err.Error(), "want "+expected(c.typ)),
					"ParseQueryValue(%s, %s) = %v; want an error saying %q", c.typ, c.json, err, expected(c.typ))
			}
		}
	}
}

// Go values other than the decoders' also convert: every integer and float kind, typed values.
func TestConvertGoValues(t *testing.T) {
	t.Parallel()
	u := uuid.MustParse(uuidText)
	cases := []struct {
		typ  FieldType
		in   any
		want any
		ok   bool
	}{
		{TypeInt, int8(-3), int64(-3), true}, {TypeInt, uint16(7), int64(7), true}, {TypeInt, uint(9), int64(9), true},
		{TypeInt, uint64(math.MaxUint64), nil, false}, {TypeInt, float32(2), int64(2), true},
		{TypeInt, 2.5, nil, false}, {TypeInt, math.NaN(), nil, false}, {TypeInt, math.Inf(1), nil, false},
		{TypeInt, 9223372036854775807.0, nil, false}, // 2^63 as a float64
		{TypeInt, -9223372036854775808.0, int64(math.MinInt64), true},
		{TypeInt, json.Number("0x10"), nil, false}, {TypeInt, json.Number("1/2"), nil, false},
		{TypeInt, cells.Number("12"), int64(12), true},
		{TypeFloat, int32(-5), -5.0, true}, {TypeFloat, math.Copysign(0, -1), 0.0, true},
		{TypeFloat, math.NaN(), nil, false}, {TypeFloat, json.Number("Inf"), nil, false},
		{TypeFloat, json.Number("1_0"), nil, false},
		{TypeUUID, u, u, true}, {TypeUUID, u[:], nil, false},
		{TypeDatetime, time.Date(2001, 1, 3, 1, 0, 0, 0, time.FixedZone("X", 3600)), us(2001, 1, 3, 0, 0, 0, 0, time.UTC), true},
		{TypeDatetime, time.Time{}.Add(-time.Hour), nil, false},
		{TypeDatetime, int32(5), int64(5e6), true}, {TypeDatetime, float32(0.5), int64(5e5), true},
		{TypeDatetime, (*cells.Number)(nil), nil, true},
		{"nosuchtype", "x", nil, false},
	}
	for _, c := range cases {
		got, ok := Convert(c.typ, c.in)
		assert.Equal(t, c.ok, ok, "Convert(%s, %#v) = %#v: ok", c.typ, c.in, got)
		assert.Equal(t, c.want, got, "Convert(%s, %#v)", c.typ, c.in)
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	u := uuid.MustParse(strings.ToUpper(uuidText))
	cases := []struct {
		typ  FieldType
		in   any
		want any
	}{
		{TypeUUID, u, uuidText},
		{TypeDatetime, us(2001, 1, 3, 0, 0, 0, 0, time.UTC), "2001-01-03T00:00:00Z"},
		{TypeDatetime, us(2001, 1, 3, 0, 0, 0, 25e7, time.UTC), "2001-01-03T00:00:00.25Z"},
		{TypeDatetime, us(2001, 1, 3, 0, 0, 0, 1000, time.UTC), "2001-01-03T00:00:00.000001Z"},
		{TypeDatetime, int64(-1), "1969-12-31T23:59:59.999999Z"},
		{TypeDatetime, us(1, 1, 1, 0, 0, 0, 0, time.UTC), "0001-01-01T00:00:00Z"},
		{TypeString, "x", "x"}, {TypeInt, int64(5), int64(5)}, {TypeFloat, 1.5, 1.5}, {TypeBool, true, true},
		{TypeUUID, nil, nil}, {TypeDatetime, nil, nil},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Format(c.typ, c.in), "Format(%s, %#v)", c.typ, c.in)
	}
}

// Formatting a typed value and converting the result back gives the value again.
func TestFormatConvertRoundTrip(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	for i := 0; i < 5000; i++ {
		var typ FieldType
		var v any
		switch rng.IntN(6) {
		case 0:
			typ, v = TypeDatetime, minDatetimeMicros+rng.Int64N(maxDatetimeMicros-minDatetimeMicros+1)
		case 1:
			typ, v = TypeDatetime, rng.Int64N(2e15)-1e15
		case 2:
			var u uuid.UUID
			binary.BigEndian.PutUint64(u[:8], rng.Uint64())
			binary.BigEndian.PutUint64(u[8:], rng.Uint64())
			typ, v = TypeUUID, u
		case 3:
			typ, v = TypeInt, int64(rng.Uint64())
		case 4:
			typ, v = TypeFloat, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(40)-20))
		default:
			typ, v = TypeString, strings.Repeat("é", rng.IntN(128))
		}
		text, err := json.Marshal(Format(typ, v))
		require.NoError(t, err, "Marshal(Format(%s, %v))", typ, v)
		// Through a cell body now and then (the body codec is slow under -race), else as a
		// query value decoded with UseNumber.
		var in any
		if i%25 == 0 {
			in = bodyValue(t, string(text))
		} else {
			dec := json.NewDecoder(strings.NewReader(string(text)))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&in), "decode %s", text)
		}
		got, ok := Convert(typ, in)
		require.True(t, ok, "Convert(%s, %s) = %#v: not ok, want %#v (formatted from it)", typ, text, got, v)
		require.Equal(t, v, got, "Convert(%s, %s): want the value it was formatted from", typ, text)
	}
}

func TestExtract(t *testing.T) {
	t.Parallel()
	fields := []Field{{"k", TypeUUID, "BASE"}, {"n", TypeInt, "BASE"}, {"s", TypeString, "STATUS"},
		{"b", TypeBool, "BASE"}, {"when", TypeDatetime, "BASE"}, {"gone", TypeFloat, "BASE"}}
	b, err := cells.EncodeBody([]byte(`{"k":"` + uuidText + `","n":1.5,"s":"ignored","b":null,"when":"2001-01-03",
		"N":3,"extra":{"n":4}}`))
	require.NoError(t, err)
	obj, err := b.Object()
	require.NoError(t, err)
	values, mismatched := Extract(fields, "BASE", obj)
	want := map[int]any{0: uuid.MustParse(uuidText), 1: nil, 3: nil, 4: us(2001, 1, 3, 0, 0, 0, 0, time.UTC), 5: nil}
	assert.Equal(t, want, values, "Extract(BASE) values")
	assert.Equal(t, []string{"n"}, mismatched, "Extract(BASE) mismatched")
	values, mismatched = Extract(fields, "STATUS", obj)
	assert.Equal(t, map[int]any{2: "ignored"}, values, "Extract(STATUS) values")
	assert.Empty(t, mismatched, "Extract(STATUS) mismatched")
	values, _ = Extract(fields, "OTHER", obj)
	assert.Empty(t, values, "Extract(OTHER) values")
}

// The shard hash of index values is part of the stored format: these vectors must never change.
// They were computed by an independent implementation (Python) of the documented encoding.
var valueHashVectors = []struct {
	typ       FieldType
	v         any
	hash      uint64
	shard64   int
	shard4096 int
}{
	{TypeString, "", 0xaf63ee4c86020b22, 34, 2850},
	{TypeString, "LAX", 0x7d9b061992413e8b, 11, 3723},
	{TypeString, "Zürich", 0xf39a78f705c880a1, 33, 161},
	{TypeInt, int64(0), 0x5b37837bc82ba6a4, 36, 1700},
	{TypeInt, int64(-1), 0xcd848774fe983d1c, 28, 3356},
	{TypeInt, int64(1234567890), 0x92827db34aa97b03, 3, 2819},
	{TypeDatetime, int64(978480000000000), 0xa34fa4b73a03ea30, 48, 2608},
	{TypeFloat, 1.5, 0x41158be169dd63ee, 46, 1006},
	{TypeBool, true, 0x08a61307b54d99ac, 44, 2476},
	{TypeBool, false, 0x08a61407b54d9b5f, 31, 2911},
	{TypeUUID, uuid.MustParse(uuidText), 0x90fc22069f42281c, 28, 2076}, // = cells' row key vector
}

func TestValueHashVectors(t *testing.T) {
	t.Parallel()
	for _, v := range valueHashVectors {
		got := ValueHash(v.typ, v.v)
		assert.Equal(t, v.hash, got, "ValueHash(%s, %#v) = %#x, want %#x", v.typ, v.v, got, v.hash)
		assert.Equal(t, v.shard64, ShardOf(v.typ, v.v, 64), "ShardOf(%s, %#v, 64)", v.typ, v.v)
		assert.Equal(t, v.shard4096, ShardOf(v.typ, v.v, 4096), "ShardOf(%s, %#v, 4096)", v.typ, v.v)
	}
}

// referenceHash is the documented encoding, hashed with the standard library's FNV-1a.
func referenceHash(typ FieldType, v any) uint64 {
	h := fnv.New64a()
	var b []byte
	switch typ {
	case TypeUUID:
		u := v.(uuid.UUID)
		b = u[:]
	case TypeString:
		b = append([]byte{'s'}, v.(string)...)
	case TypeInt:
		b = binary.BigEndian.AppendUint64([]byte{'i'}, uint64(v.(int64)))
	case TypeDatetime:
		b = binary.BigEndian.AppendUint64([]byte{'t'}, uint64(v.(int64)))
	case TypeFloat:
		f := v.(float64)
		if f == 0 {
			f = 0
		}
		b = binary.BigEndian.AppendUint64([]byte{'f'}, math.Float64bits(f))
	case TypeBool:
		b = []byte{'b', 0}
		if v.(bool) {
			b[1] = 1
		}
	}
	h.Write(b)
	return h.Sum64()
}

func randomTyped(rng *rand.Rand, typ FieldType) any {
	switch typ {
	case TypeUUID:
		var u uuid.UUID
		binary.BigEndian.PutUint64(u[:8], rng.Uint64())
		binary.BigEndian.PutUint64(u[8:], rng.Uint64())
		return u
	case TypeString:
		const alphabet = "abcXYZ019_ é東"
		r := []rune(alphabet)
		s := make([]rune, rng.IntN(12))
		for i := range s {
			s[i] = r[rng.IntN(len(r))]
		}
		return string(s)
	case TypeInt:
		return int64(rng.Uint64()) >> rng.IntN(64)
	case TypeDatetime:
		return minDatetimeMicros + rng.Int64N(maxDatetimeMicros-minDatetimeMicros+1)
	case TypeFloat:
		return rng.NormFloat64() * 1000
	case TypeBool:
		return rng.IntN(2) == 0
	}
	return nil
}

func TestValueHashIsDocumentedFNV(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	for i := 0; i < 5000; i++ {
		typ := fieldTypes[rng.IntN(len(fieldTypes))]
		v := randomTyped(rng, typ)
		require.Equal(t, referenceHash(typ, v), ValueHash(typ, v), "ValueHash(%s, %#v): want the documented encoding's FNV-1a", typ, v)
	}
	assert.Equal(t, ValueHash(TypeFloat, 0.0), ValueHash(TypeFloat, math.Copysign(0, -1)), "ValueHash(float, -0): want ValueHash(float, 0)")
	assert.NotEqual(t, ValueHash(TypeInt, int64(7)), ValueHash(TypeDatetime, int64(7)),
		"ValueHash(int, 7) = ValueHash(datetime, 7): the type tags should differ")
	for i := 0; i < 100; i++ {
		u := randomTyped(rng, TypeUUID).(uuid.UUID)
		require.Equal(t, cells.ShardOf(u, 4096), ShardOf(TypeUUID, u, 4096), "ShardOf(UUID %s): want cells.ShardOf", u)
	}
}

func TestShardOfSpreadsValues(t *testing.T) {
	t.Parallel()
	const shards, n = 64, 64000
	for _, typ := range []FieldType{TypeString, TypeInt, TypeDatetime} {
		counts := make([]int, shards)
		for i := 0; i < n; i++ {
			var v any
			switch typ {
			case TypeString:
				v = "city-" + string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('A'+i/260))
			case TypeInt:
				v = int64(i)
			case TypeDatetime:
				v = int64(978480000000000 + i*1e6)
			}
			counts[ShardOf(typ, v, shards)]++
		}
		for s, c := range counts {
			// Expect 1000 per shard; a uniform hash stays well within +-20%.
			assert.InDelta(t, n/shards, c, 200, "%s: values of %d in shard %d: want about %d", typ, n, s, n/shards)
		}
	}
}

func TestValueHashPanicsOnUntypedValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ FieldType
		v   any
	}{{TypeUUID, uuidText}, {TypeInt, 5}, {TypeDatetime, "2001-01-03"}, {TypeString, int64(1)}, {TypeFloat, int64(1)}} {
		assert.Panics(t, func() { ValueHash(c.typ, c.v) }, "ValueHash(%s, %#v): want a panic (not a typed value)", c.typ, c.v)
	}
	assert.Equal(t, referenceNil(), ValueHash(TypeInt, nil), "ValueHash(int, nil)")
}

func referenceNil() uint64 {
	h := fnv.New64a()
	h.Write([]byte{0})
	return h.Sum64()
}
