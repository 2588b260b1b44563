package cells

import (
	"bytes"
	stdzlib "compress/zlib"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("seed", 0, "seed of the randomized cells tests (0: from the clock)")

// testSeed returns the seed of a randomized test and logs it.
func testSeed(t *testing.T) int64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}

// jsonValue decodes a JSON text into a value whose numbers are exact decimals, so two texts
// holding the same JSON value (1.50 and 1.5) give equal values.
func jsonValue(t *testing.T, p []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v), "decode %s", p)
	return normalize(v)
}

// normalize turns json.Number into a canonical decimal string so 1.50 and 1.5 compare equal.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
	case json.Number:
		r, ok := newRat(string(t))
		if !ok {
			return string(t)
		}
		return r
	}
	return v
}

// roundTripTexts are objects of every kind of value that read back as the same JSON value.
var roundTripTexts = []string{
	`{}`,
	`{"a":1}`,
	`{"origin":"LAX","distance":2176,"delay":-13,"date":"2001-01-01T00:01:00"}`,
	`{"nested":{"list":[1,2.5,"x",null,true,false,{"deep":[[]]}]},"empty":{}}`,
	`{"big":18446744073709551615,"neg":-9223372036854775808,"huge":1e400,"tiny":1e-400}`,
	`{"precise":0.1000000000000000000001,"float":0.1,"exp":6.02e23,"zero":-0}`,
	`{"unicode":"Zürich ✈ 東京","escapes":"a\"b\\c\n\t<>&","emoji":"\ud83d\ude80"}`,
	"  {\"spaces\" : [ 1 , 2 ] }  \n",
}

func TestBodyRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range roundTripTexts {
		b, err := EncodeBody([]byte(c))
		if !assert.NoError(t, err, "EncodeBody(%s)", c) {
			continue
		}
		out, err := b.JSON()
		if !assert.NoError(t, err, "JSON() of %s", c) {
			continue
		}
		assert.Equal(t, jsonValue(t, []byte(c)), jsonValue(t, out), "round trip of %s: want the same JSON value", c)
	}
}

// nonObjectTexts are not one JSON object.
var nonObjectTexts = []string{``, `null`, `[]`, `[{"a":1}]`, `"s"`, `1`, `true`, `{"a":1} {"b":2}`,
	`{"a":1}x`, `{"a":}`, `{"a":1`, `{a:1}`}

func TestBodyRejectsNonObjects(t *testing.T) {
	t.Parallel()
	for _, c := range nonObjectTexts {
		_, err := EncodeBody([]byte(c))
		assert.ErrorIs(t, err, ErrInvalidBody, "EncodeBody(%q)", c)
		var fe *FieldError
		if assert.ErrorAs(t, err, &fe, "EncodeBody(%q): want a FieldError", c) {
			assert.Equal(t, "body", fe.Field, "EncodeBody(%q): field of the FieldError", c)
		}
	}
}

// sameValueTexts are pairs of texts of one JSON value; otherValueTexts, of two.
var sameValueTexts = [][2]string{
	{`{"a":1,"b":2}`, `{ "b" : 2, "a" : 1 }`},
	{`{"x":1.5}`, `{"x":1.50}`},
	{`{"x":100}`, `{"x":100.0}`},
	{`{"x":100}`, `{"x":1e2}`},
	{`{"x":-5}`, `{"x":-50e-1}`},
	{`{"x":0}`, `{"x":-0.0}`},
	{`{"x":{"q":[1,{"z":1,"y":2}]}}`, `{"x":{"q":[1,{"y":2,"z":1}]}}`},
}

var otherValueTexts = [][2]string{
	{`{"a":1}`, `{"a":2}`},
	{`{"a":1}`, `{"a":"1"}`},
	{`{"a":1}`, `{"a":1,"b":null}`},
	{`{"a":[1,2]}`, `{"a":[2,1]}`},
	{`{"a":0.1}`, `{"a":0.1000000000000000000001}`},
}

// One JSON value has one stored form: key order, white space and number spelling do not matter.
func TestBodyCanonical(t *testing.T) {
	t.Parallel()
	for _, p := range sameValueTexts {
		a, b := mustEncode(t, p[0]), mustEncode(t, p[1])
		ok, err := SameBody(a, b)
		if assert.NoError(t, err, "SameBody(%s, %s)", p[0], p[1]) {
			assert.True(t, ok, "SameBody(%s, %s): want true", p[0], p[1])
		}
	}
	for _, p := range otherValueTexts {
		a, b := mustEncode(t, p[0]), mustEncode(t, p[1])
		ok, err := SameBody(a, b)
		if assert.NoError(t, err, "SameBody(%s, %s)", p[0], p[1]) {
			assert.False(t, ok, "SameBody(%s, %s): want false", p[0], p[1])
		}
	}
}

func TestBodyCorrupt(t *testing.T) {
	t.Parallel()
	_, err := Body("not zlib").JSON()
	assert.Error(t, err, "JSON() of garbage")
	b := mustEncode(t, `{"a":"some text that compresses"}`)
	bad := append(Body(nil), b...)
	bad[len(bad)-1] ^= 0xff // break the adler-32 checksum
	_, err = bad.JSON()
	assert.Error(t, err, "JSON() of a body with a broken checksum")
}

// Random JSON objects survive the codec, and equal values encode to equal bytes.
func TestBodyRoundTripRandom(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 2000; i++ {
		obj := randomObject(rng, 0)
		text, err := json.Marshal(obj)
		require.NoError(t, err, "seed %d: Marshal(%v)", seed, obj)
		b, err := EncodeBody(text)
		require.NoError(t, err, "seed %d: EncodeBody(%s)", seed, text)
		out, err := b.JSON()
		require.NoError(t, err, "seed %d: JSON() of %s", seed, text)
		require.Equal(t, jsonValue(t, text), jsonValue(t, out), "seed %d: round trip of %s", seed, text)
		again, err := EncodeBody(out)
		require.NoError(t, err, "seed %d: re-encoding %s", seed, out)
		require.Equal(t, b, again, "seed %d: re-encoding %s: want the same bytes", seed, out)
	}
}

func randomObject(rng *rand.Rand, depth int) map[string]any {
	n := rng.Intn(6)
	obj := make(map[string]any, n)
	for i := 0; i < n; i++ {
		obj[fmt.Sprintf("k%d_%s", i, randomString(rng))] = randomValue(rng, depth+1)
	}
	return obj
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.Intn(9)
	if depth > 3 && k >= 7 {
		k = rng.Intn(7)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.Intn(2) == 0
	case 2:
		return rng.Int63() - rng.Int63()
	case 3:
		return json.Number(strconv.FormatUint(rng.Uint64(), 10))
	case 4:
		f := rng.NormFloat64() * math.Pow(10, float64(rng.Intn(40)-20))
		return f
	case 5:
		return json.Number(fmt.Sprintf("%d.%018d%d", rng.Intn(1000), rng.Int63n(1e18), 1+rng.Intn(9)))
	case 6:
		return randomString(rng)
	case 7:
		l := make([]any, rng.Intn(4))
		for i := range l {
			l[i] = randomValue(rng, depth+1)
		}
		return l
	default:
		return randomObject(rng, depth)
	}
}

func randomString(rng *rand.Rand) string {
	const alphabet = "abcXYZ019 _-\"\\/<>&é東✈\n\t"
	r := []rune(alphabet)
	s := make([]rune, rng.Intn(8))
	for i := range s {
		s[i] = r[rng.Intn(len(r))]
	}
	return string(s)
}

func mustEncode(t *testing.T, s string) Body {
	t.Helper()
	b, err := EncodeBody([]byte(s))
	require.NoError(t, err, "EncodeBody(%s)", s)
	return b
}

// newRat returns the exact value of decimal text s as a reduced fraction.
func newRat(s string) (string, bool) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", false
	}
	return r.RatString(), true
}

// TestStdlibCompressedBody: a body stored by compress/zlib (the compressor before 2026-11-26)
// reads back as the same JSON and compares equal to the same object encoded now, so a retried
// write of it answers exists, not conflict.
func TestStdlibCompressedBody(t *testing.T) {
	text := `{"origin":"SFO","delay":17,"fare":412.5,"legs":[{"to":"JFK"}]}`
	now, err := EncodeBody([]byte(text))
	require.NoError(t, err)
	packed, err := now.Packed()
	require.NoError(t, err)
	var old bytes.Buffer
	w, err := stdzlib.NewWriterLevel(&old, stdzlib.BestSpeed)
	require.NoError(t, err)
	_, err = w.Write(packed)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NotEqual(t, old.Bytes(), []byte(now), "the two compressors write different bytes, or this test shows nothing")
	same, err := SameBody(Body(old.Bytes()), now)
	require.NoError(t, err)
	assert.True(t, same, "a stdlib-compressed body and the same object encoded now")
	j, err := Body(old.Bytes()).JSON()
	require.NoError(t, err)
	assert.JSONEq(t, text, string(j))
}

// refusedTexts are lossy texts and what EncodeBody's error says of each.
var refusedTexts = []struct{ text, want string }{
	{`{"s":"\ud800"}`, `\ud800 at byte 6 is a high surrogate not followed by a low one`},
	{`{"s":"\uDBFF"}`, `\uDBFF at byte 6 is a high surrogate`},
	{`{"s":"\udc00"}`, `\udc00 at byte 6 is a low surrogate without a high one`},
	{`{"s":"x\ud83dy"}`, `\ud83d at byte 7 is a high surrogate`},
	{`{"s":"\ud800\ud800"}`, `\ud800 at byte 6 is a high surrogate`},
	{`{"s":"\ud800\u0041"}`, `\ud800 at byte 6 is a high surrogate`},
	{`{"s":"\ud800\n"}`, `\ud800 at byte 6 is a high surrogate`},
	{`{"s":"\ude00\ud83d"}`, `\ude00 at byte 6 is a low surrogate`},
	{`{"\ud800":1}`, `\ud800 at byte 2 is a high surrogate`},
	{`{"a":["ok","\\",{"b":"\udfff"}]}`, `\udfff at byte 22 is a low surrogate`},
	{`{"a":1,"a":2}`, `key "a" at byte 7 is given twice in one object`},
	{`{"a":1,"a":1}`, `key "a" at byte 7 is given twice`},
	{`{"a":1,"\u0061":2}`, `key "a" at byte 7 is given twice`},
	{`{"é":1,"\u00e9":2}`, `key "é" at byte 8 is given twice`},
	{`{"x":{"k":[1,{"d":null,"e":0,"d":true}]}}`, `key "d" at byte 29 is given twice`},
	{`{"a":{"b":1},"c":{"b":2,"b":3}}`, `key "b" at byte 24 is given twice`},
	{` { "a" : 1 , "a" : 2 } `, `key "a" at byte 13 is given twice`},
	{`{"q\"":1,"q\"":2}`, `key "q\"" at byte 9 is given twice`},
	{"{\"s\":\"\xff\"}", `invalid UTF-8 at byte 6`},
	{"{\"\xc0\xaf\":1}", `invalid UTF-8 at byte 2`},
}

// manyEscapes is a long string of escapes, one escaped quote among them (the scan reads it once).
var manyEscapes = strings.Repeat(`\n`, 100000) + `\"` + strings.Repeat(`\\`, 100000)

// storedTexts are texts near the lossy ones that hold what they say, and their JSON() text.
var storedTexts = []struct{ text, want string }{
	{`{"s":"` + manyEscapes + `"}`, `{"s":"` + manyEscapes + `"}`},
	{`{"s":"\ud83d\ude00"}`, `{"s":"😀"}`},
	{`{"s":"\uD83D\uDE00"}`, `{"s":"😀"}`},
	{`{"s":"\udbff\udfff"}`, "{\"s\":\"\U0010FFFF\"}"},
	{`{"s":"\ud7ff\ue000"}`, "{\"s\":\"\ud7ff\ue000\"}"},
	{`{"s":"\\ud800"}`, `{"s":"\\ud800"}`},
	{`{"s":"\\\ud83d\ude00"}`, `{"s":"\\😀"}`},
	{`{"s":"\ufffd"}`, `{"s":"�"}`},
	{`{"x":{"a":1},"y":{"a":2}}`, `{"x":{"a":1},"y":{"a":2}}`},
	{`{"a":{"a":{"a":1}}}`, `{"a":{"a":{"a":1}}}`},
	{`{"a":[{"k":1},{"k":2}]}`, `{"a":[{"k":1},{"k":2}]}`},
	{`{"a":1,"A":2,"a ":3}`, `{"A":2,"a":1,"a ":3}`},
	{`{"a":"a:a","b":":"}`, `{"a":"a:a","b":":"}`},
	{`{"a\"":1,"a":2}`, `{"a":2,"a\"":1}`},
	{`{"é":1,"e\u0301":2}`, "{\"e\u0301\":2,\"é\":1}"},
}

// A text that encoding/json would store as another value than it holds is refused, naming what
// and where; its neighbours that hold what they say are stored.
func TestBodyRefusesLossyText(t *testing.T) {
	t.Parallel()
	for _, c := range refusedTexts {
		_, err := EncodeBody([]byte(c.text))
		if !assert.ErrorIs(t, err, ErrLossyBody, "EncodeBody(%s)", c.text) {
			continue
		}
		assert.NotErrorIs(t, err, ErrInvalidBody, "EncodeBody(%s)", c.text)
		assert.Contains(t, err.Error(), c.want, "EncodeBody(%s): the message", c.text)
		var fe *FieldError
		if assert.ErrorAs(t, err, &fe, "EncodeBody(%s): want a FieldError", c.text) {
			assert.Equal(t, "body", fe.Field, "EncodeBody(%s): field of the FieldError", c.text)
		}
	}
	_, err := EncodeBody([]byte(`{"s":"` + manyEscapes + `\udc00"}`))
	if assert.ErrorIs(t, err, ErrLossyBody, "a lone surrogate after 200001 escapes") {
		assert.Contains(t, err.Error(), fmt.Sprintf(`\udc00 at byte %d is a low surrogate`, 6+len(manyEscapes)))
	}
	for _, c := range storedTexts {
		b, err := EncodeBody([]byte(c.text))
		if !assert.NoError(t, err, "EncodeBody(%s)", c.text) {
			continue
		}
		out, err := b.JSON()
		if assert.NoError(t, err, "JSON() of %s", c.text) {
			assert.Equal(t, c.want, string(out), "round trip of %s", c.text)
		}
	}
}
