package cells

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// Differential tests of the direct transcoders (textpack.go, packtext.go) against the decoding
// paths they replace (packTextDecoded, jsonDecoded), which define the stored form and the text.

// checkDirect compares the two paths on text: the direct transcoder stores exactly the texts the
// decoding path stores (except texts nested deeper than maxPackDepth, which it leaves to it),
// with the same packed bytes; and the direct JSON of those bytes is the decoding path's JSON.
func checkDirect(text []byte) error {
	want, wantErr := packTextDecoded(text)
	got, ok := packText(text)
	switch {
	case wantErr != nil && ok:
		return fmt.Errorf("direct path stored %q as % x, the decoding path refuses it: %v", text, got, wantErr)
	case wantErr != nil:
		return nil
	case !ok && nesting(text) <= maxPackDepth:
		return fmt.Errorf("direct path refused %q, the decoding path stores it as % x", text, want)
	case ok && !bytes.Equal(got, want):
		return fmt.Errorf("packed form of %q: got % x, want % x", text, got, want)
	}
	if err := checkPacked(want); err != nil {
		return fmt.Errorf("packed form of %q: %w", text, err)
	}
	wantJSON, err := jsonDecoded(want)
	if err != nil {
		return fmt.Errorf("decoding path's JSON of %q: %w", text, err)
	}
	gotJSON, ok := jsonDirect(want)
	if !ok && nesting(text) <= maxTextDepth {
		return fmt.Errorf("direct JSON refused the stored form of %q (% x)", text, want)
	}
	if ok && !bytes.Equal(gotJSON, wantJSON) {
		return fmt.Errorf("JSON of %q: got %q, want %q", text, gotJSON, wantJSON)
	}
	return nil
}

// checkDirectJSON compares the two paths to JSON on packed bytes p: where the direct path writes
// a text, the decoding path writes the same one. It returns nil for bytes checkPacked refuses
// (JSON fails on them before either path).
func checkDirectJSON(p []byte) error {
	if checkPacked(p) != nil {
		return nil
	}
	got, ok := jsonDirect(p)
	if !ok {
		return nil
	}
	want, err := jsonDecoded(p)
	if err != nil {
		return fmt.Errorf("direct JSON of % x is %q, the decoding path fails: %v", p, got, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("JSON of % x: got %q, want %q", p, got, want)
	}
	return nil
}

// nesting returns the deepest nesting of objects and arrays in text, a JSON text or not.
func nesting(text []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '{', '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case '}', ']':
			depth--
		case '"':
			for i++; i < len(text) && text[i] != '"'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		}
	}
	return deepest
}

// directCorpusTexts are texts at the edges of the direct transcoder: number spellings on each
// side of each storage rule, string escapes and headers, container headers, nesting limits.
func directCorpusTexts() []string {
	var texts []string
	for _, n := range []string{
		"0", "-0", "0.0", "-0.0", "0e5", "0E-5", "-0e+0", "0e9999", "0e10000", "0e99999999999999999999",
		"1", "-1", "10", "1e1", "1E+1", "10.0", "100e-2", "-50e-1", "1.000000000000000000000000000000000000000",
		"127", "128", "255", "256", "65535", "65536", "4294967295", "4294967296",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "18446744073709551616", "1.8446744073709551615e19", "1e19", "-1e19",
		"9.223372036854775807e18", "9223372036854775807.0", "1844674407370955161.5",
		"19000000076854775808", "100000000000000000000", "1e20", "1e21", "1e22", "1e23", "1e308", "1e309",
		"1e400", "-1e400", "1e-400", "1e-7", "1e-6", "1.5e-7", "0.000001", "0.0000001", "5e-324", "4.9e-324",
		"2.2250738585072014e-308", "1.7976931348623157e308", "1.7976931348623159e308",
		"0.5", "-0.5", "0.25", "0.125", "0.1", "0.2", "0.3", "0.30000000000000004", "412.5", "2.5", "1.50",
		"4503599627370495.5", "9007199254740991", "9007199254740992", "9007199254740993",
		"9007199254740992.5", "9007199254740993.5", "0.1000000000000000000001", "6.02e23", "6.02E+23",
		"123.456e-5", "-1.25e-3", "3.0517578125e-05", "2.384185791015625e-07", "1.1102230246251565e-16",
		"123456789012345678901234567890", "1234567890123456789012345678901234567890.5",
		"0.00000000000000000000000000000000000000000000000000000000000000000000001",
		"1e9999", "1e-9999", "1e10000", "1e-10000", "1e1000000", "1e-1000000", "1e1000001",
		"1e99999999999999999999", "0.5e1", "5e-1", "25e-2", "125e-3", "1125899906842624.125",
	} {
		texts = append(texts, `{"n":`+n+`}`, `{"a":[`+n+`,-`+strings.TrimPrefix(n, "-")+`]}`)
	}
	for _, s := range []string{
		`""`, `"\u0000\u001f\u007f\u0080"`, `"\b\f\n\r\t\/\\\""`, `"\u2028\u2029 \u00e9 é"`, `"\uFFFD\ufffe\uffff"`,
		`"\ud834\udd1e 𝄞"`, `"\uD834\uDD1E"`, `"<>&"`, "\"\x7f\"", `"\ud800\udc00\udbff\udfff"`,
		`"\ud800"`, `"\udc00"`, `"\ud800\ud800"`, `"\u12"`, `"\u12g4"`, `"\x"`, `"\'"`, "\"\x01\"", "\"a\tb\"",
		`"` + strings.Repeat("a", 31) + `"`, `"` + strings.Repeat("a", 32) + `"`,
		`"` + strings.Repeat("a", 255) + `"`, `"` + strings.Repeat("a", 256) + `"`,
		`"` + strings.Repeat("a", 65535) + `"`, `"` + strings.Repeat("a", 65536) + `"`,
		`"` + strings.Repeat(`\u00e9`, 15) + `a"`, `"` + strings.Repeat(`\u00e9`, 16) + `"`,
		`"` + strings.Repeat(`\n`, 32) + `"`, `"` + strings.Repeat(`\n`, 65536) + `"`,
	} {
		texts = append(texts, `{"s":`+s+`}`, `{`+s+`:1,"z":`+s+`}`)
	}
	for _, n := range []int{15, 16, 17, 65535, 65536} {
		elems := make([]string, n)
		members := make([]string, n)
		for i := range elems {
			elems[i] = strconv.Itoa(i % 7)
			members[i] = fmt.Sprintf(`"k%d":%d`, n-i, i) // out of order
		}
		texts = append(texts, `{"a":[`+strings.Join(elems, ",")+`]}`, `{`+strings.Join(members, ",")+`}`)
		fewer := strings.Join(members[:n-1], ",")
		texts = append(texts, `{"o":{`+fewer+`},"p":[{`+fewer+`}]}`)
	}
	for _, d := range []int{maxPackDepth - 1, maxPackDepth, maxPackDepth + 1, 10000, 10001} {
		texts = append(texts, `{"d":`+strings.Repeat("[", d-1)+strings.Repeat("]", d-1)+`}`,
			strings.Repeat(`{"d":`, d)+`1`+strings.Repeat("}", d))
	}
	texts = append(texts,
		`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`, `{"a":{"x":1},"b":{"x":1,"y":2,"x":3}}`,
		`{"":1,"\u0000":2," ":3,"é":4,"e":5,"E":6,"ee":7,"e\u0301":8,"😀":9,"\uffff":10}`,
		" \t\r\n{ \t\r\n\"a\" \t\r\n: \t\r\n[ \t\r\n1 \t\r\n, \t\r\n2 \t\r\n] \t\r\n} \t\r\n",
		`{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`,
		`{"a":1e+}`, `{"a":+1}`, `{"a":[1,]}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":[1 2]}`, `{"a":"x}`,
		"{\"a\":1}\x00", "\ufeff{}", `{"a":NaN}`, `{"a":Infinity}`, `{"a":0x10}`, `{} {}`, `{}]`,
	)
	return texts
}

// TestDirectCorpus: on the existing tests' texts and the edge texts above, the direct transcoders
// agree with the decoding paths.
func TestDirectCorpus(t *testing.T) {
	t.Parallel()
	var texts []string
	texts = append(texts, bodySeeds...)
	texts = append(texts, roundTripTexts...)
	texts = append(texts, nonObjectTexts...)
	for _, p := range append(append([][2]string{}, sameValueTexts...), otherValueTexts...) {
		texts = append(texts, p[0], p[1])
	}
	for _, c := range refusedTexts {
		texts = append(texts, c.text)
	}
	for _, c := range storedTexts {
		texts = append(texts, c.text)
	}
	texts = append(texts, `{"s":"`+manyEscapes+`\udc00"}`, benchText)
	texts = append(texts, directCorpusTexts()...)
	for _, text := range texts {
		assert.NoError(t, checkDirect([]byte(text)))
	}
}

// TestDirectPathsTaken: EncodeBody and JSON take the direct paths for ordinary bodies, so the
// differential tests above compare code that runs.
func TestDirectPathsTaken(t *testing.T) {
	t.Parallel()
	texts := append([]string{benchText, bodySeeds[0], bodySeeds[1], bodySeeds[2], bodySeeds[4]}, roundTripTexts...)
	for _, text := range texts {
		packed, ok := packText([]byte(text))
		if !assert.True(t, ok, "direct path of %s: got ok=false, want true", text) {
			continue
		}
		_, ok = jsonDirect(packed)
		assert.True(t, ok, "direct JSON of %s: got ok=false, want true", text)
	}
}

// TestDirectRandomTexts: random JSON texts (key order, white space, number spellings, escapes,
// duplicate keys, lone surrogates) give the same packed bytes and JSON on both paths.
func TestDirectRandomTexts(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	stored := 0
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		g := textGen{rng: rng, b: &b}
		g.space()
		g.object(0)
		g.space()
		text := []byte(b.String())
		require.NoError(t, checkDirect(text), "seed %d, text %d", seed, i)
		if _, ok := packText(text); ok {
			stored++
		}
	}
	// Most texts are stored: the comparison is not only of refusals.
	assert.Greater(t, stored, 1500, "seed %d: texts the direct path stored", seed)
}

// textGen writes random JSON text to b.
type textGen struct {
	rng *rand.Rand
	b   *strings.Builder
}

func (g textGen) space() {
	g.b.WriteString([]string{"", "", "", " ", "\n", "\t ", "\r\n  "}[g.rng.Intn(7)])
}

func (g textGen) value(depth int) {
	k := g.rng.Intn(10)
	if depth > 4 && k >= 8 {
		k = g.rng.Intn(8)
	}
	switch k {
	case 0:
		g.b.WriteString([]string{"null", "true", "false"}[g.rng.Intn(3)])
	case 1, 2, 3:
		g.b.WriteString(randomNumberText(g.rng))
	case 4, 5, 6, 7:
		g.string()
	case 8:
		g.b.WriteByte('[')
		n := g.rng.Intn(5)
		if g.rng.Intn(20) == 0 {
			n = 14 + g.rng.Intn(5) // around the fixarray limit
		}
		for i := 0; i < n; i++ {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.space()
			g.value(depth + 1)
			g.space()
		}
		g.b.WriteByte(']')
	default:
		g.object(depth + 1)
	}
}

func (g textGen) object(depth int) {
	g.b.WriteByte('{')
	n := g.rng.Intn(7)
	if g.rng.Intn(20) == 0 {
		n = 14 + g.rng.Intn(5) // around the fixmap limit
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.space()
		if g.rng.Intn(3) == 0 {
			g.b.WriteString(`"` + []string{"", "a", "b", "A", "é", `\u00e9`, "a b", `\u0061`}[g.rng.Intn(8)] + `"`)
		} else {
			g.string()
		}
		g.space()
		g.b.WriteByte(':')
		g.space()
		g.value(depth)
		g.space()
	}
	g.b.WriteByte('}')
}

// string writes a JSON string of random characters, each written as is or escaped.
func (g textGen) string() {
	runes := []rune("abcXYZ019 _-\"\\/<>&é東✈\n\t\x00\x1f\x7f\u0080\u2028\u2029\ufffd\uffff😀𝄞")
	n := g.rng.Intn(8)
	switch g.rng.Intn(30) {
	case 0:
		n = 28 + g.rng.Intn(8) // around the fixstr limit
	case 1:
		n = 250 + g.rng.Intn(10) // around the str8 limit
	}
	g.b.WriteByte('"')
	for i := 0; i < n; i++ {
		r := runes[g.rng.Intn(len(runes))]
		if g.rng.Intn(400) == 0 { // a lone surrogate: both paths refuse it
			fmt.Fprintf(g.b, `\u%04x`, 0xd800+g.rng.Intn(0x800))
			continue
		}
		switch {
		case r == '"' || r == '\\':
			g.b.WriteString(`\` + string(r))
		case r < 0x20 || g.rng.Intn(4) == 0:
			switch {
			case r == '\n' && g.rng.Intn(2) == 0:
				g.b.WriteString(`\n`)
			case r == '/':
				g.b.WriteString(`\/`)
			case r > 0xffff:
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(g.b, `\u%04x\u%04X`, hi, lo)
			default:
				fmt.Fprintf(g.b, []string{`\u%04x`, `\u%04X`}[g.rng.Intn(2)], r)
			}
		default:
			g.b.WriteRune(r)
		}
	}
	g.b.WriteByte('"')
}

// randomNumberText returns a JSON number of one of the shapes the storage rules tell apart.
func randomNumberText(rng *rand.Rand) string {
	sign := []string{"", "", "-"}[rng.Intn(3)]
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.Intn(10))
		}
		return string(b)
	}
	intPart := func() string {
		if rng.Intn(5) == 0 {
			return "0"
		}
		return strconv.Itoa(1+rng.Intn(9)) + digits(rng.Intn(20))
	}
	exp := func() string {
		e := rng.Intn(30) - 15
		if rng.Intn(10) == 0 {
			e = rng.Intn(800) - 400
		}
		s := []string{"e", "E"}[rng.Intn(2)]
		if e >= 0 && rng.Intn(2) == 0 {
			s += "+"
		}
		return s + strconv.Itoa(e)
	}
	switch rng.Intn(9) {
	case 0:
		return sign + strconv.FormatInt(rng.Int63n(1000), 10)
	case 1:
		return sign + strconv.FormatUint(rng.Uint64()>>uint(rng.Intn(64)), 10)
	case 2:
		return sign + intPart() + "." + digits(1+rng.Intn(25))
	case 3:
		return sign + intPart() + exp()
	case 4:
		return sign + intPart() + "." + digits(1+rng.Intn(6)) + exp()
	case 5: // a binary fraction, exactly a float64, maybe with trailing zeros or an exponent
		f := float64(rng.Int63n(1<<20)) / float64(int64(1)<<uint(rng.Intn(24)))
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if rng.Intn(3) == 0 {
			s = strconv.FormatFloat(f, 'e', -1, 64)
		} else if rng.Intn(3) == 0 && strings.Contains(s, ".") {
			s += strings.Repeat("0", rng.Intn(4))
		}
		return sign + s
	case 6: // a float64's shortest form
		f := rng.NormFloat64() * math.Pow(10, float64(rng.Intn(60)-30))
		return strconv.FormatFloat(f, []byte("efg")[rng.Intn(3)], -1, 64)
	case 7: // near the integer limits
		base := []uint64{1 << 53, 1<<63 - 1, 1 << 63, math.MaxUint64}[rng.Intn(4)]
		return sign + strconv.FormatUint(base-uint64(rng.Intn(3)), 10)
	default: // zeros
		return sign + []string{"0", "0.0", "0e0", "0.000E-3", "0e400"}[rng.Intn(5)]
	}
}

// TestDirectRandomPacked: random packed bodies, written by msgpack's Encoder with and without
// sorted keys and compact integers (as another writer might), read as the same JSON by both
// paths; bodies of the kinds EncodeBody writes, with sorted keys, take the direct path.
func TestDirectRandomPacked(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	direct := 0
	for i := 0; i < 3000; i++ {
		supported := true
		obj := randomPackedObject(rng, 0, &supported)
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		sorted := rng.Intn(4) != 0
		enc.SetSortMapKeys(sorted)
		enc.UseCompactInts(rng.Intn(2) == 0)
		require.NoError(t, enc.Encode(obj), "seed %d: encode %v", seed, obj)
		p := buf.Bytes()
		require.NoError(t, checkDirectJSON(p), "seed %d, body %d", seed, i)
		if _, ok := jsonDirect(p); ok {
			direct++
		} else if supported && sorted {
			assert.Fail(t, "direct JSON refused a body it writes", "seed %d: % x", seed, p)
		}
	}
	assert.Greater(t, direct, 1000, "seed %d: bodies the direct path wrote", seed)
}

// randomPackedObject returns a random map for msgpack's Encoder; supported stays true while
// every value is of a kind the direct path writes (maps in sorted order aside).
func randomPackedObject(rng *rand.Rand, depth int, supported *bool) map[string]any {
	n := rng.Intn(6)
	obj := make(map[string]any, n)
	for i := 0; i < n; i++ {
		obj[randomString(rng)] = randomPackedValue(rng, depth+1, supported)
	}
	return obj
}

func randomPackedValue(rng *rand.Rand, depth int, supported *bool) any {
	k := rng.Intn(16)
	if depth > 3 && k >= 14 {
		k = rng.Intn(14)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.Intn(2) == 0
	case 2:
		return rng.Int63() >> uint(rng.Intn(63)) * int64(1-2*rng.Intn(2))
	case 3:
		return rng.Uint64() >> uint(rng.Intn(64))
	case 4:
		return []any{int8(rng.Intn(256) - 128), int16(rng.Intn(1<<16) - 1<<15), int32(rng.Int63n(1<<32) - 1<<31),
			uint8(rng.Intn(256)), uint16(rng.Intn(1 << 16)), uint32(rng.Int63n(1 << 32))}[rng.Intn(6)]
	case 5:
		return rng.NormFloat64() * math.Pow(10, float64(rng.Intn(60)-30))
	case 6:
		return []float64{0, math.Copysign(0, -1), 1e21, 1e-6, 1e-7, 9.99e20, math.MaxFloat64, math.SmallestNonzeroFloat64}[rng.Intn(8)]
	case 7:
		n := Number(randomNumberText(rng))
		return &n
	case 8, 9:
		return randomString(rng) + string([]rune{0x2028, 0x2029, 0, 0x1f, 0x7f, 0xfffd}[rng.Intn(6)])
	case 10:
		*supported = false
		return []any{float32(1.5), []byte("bin"), math.NaN(), math.Inf(1), time.Unix(1, 0), string([]byte{0xff, 'a'})}[rng.Intn(6)]
	case 11:
		if rng.Intn(4) == 0 {
			*supported = false
			n := Number([]string{"1/3", "+1", ".5", "0x10", "1e99999999"}[rng.Intn(5)])
			return &n
		}
		return "x"
	case 12, 13:
		l := make([]any, rng.Intn(5))
		for i := range l {
			l[i] = randomPackedValue(rng, depth+1, supported)
		}
		return l
	default:
		return randomPackedObject(rng, depth, supported)
	}
}

// TestDirectJSONEdges: packed bytes that the direct path must leave to the decoding path, or
// write as it does: every integer code, floats at the format's edges, strings needing escapes.
func TestDirectJSONEdges(t *testing.T) {
	t.Parallel()
	obj := func(v ...byte) []byte { return append([]byte{0x81, 0xa1, 'x'}, v...) }
	for name, p := range map[string][]byte{
		"fixint 0":        obj(0x00),
		"fixint 127":      obj(0x7f),
		"fixint -1":       obj(0xff),
		"fixint -32":      obj(0xe0),
		"uint8":           obj(0xcc, 0xff),
		"uint16":          obj(0xcd, 0xff, 0xff),
		"uint32":          obj(0xce, 0xff, 0xff, 0xff, 0xff),
		"uint64":          obj(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"int8":            obj(0xd0, 0x80),
		"int16":           obj(0xd1, 0x80, 0x00),
		"int32":           obj(0xd2, 0x80, 0x00, 0x00, 0x00),
		"int64":           obj(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0),
		"int64 -1":        obj(0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"float32":         obj(0xca, 0x3f, 0xc0, 0, 0),
		"float64 -0":      obj(0xcb, 0x80, 0, 0, 0, 0, 0, 0, 0),
		"float64 NaN":     obj(0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0),
		"float64 +Inf":    obj(0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0),
		"float64 1e21":    obj(0xcb, 0x44, 0x4b, 0x1a, 0xe4, 0xd6, 0xe2, 0xef, 0x50),
		"float64 tiny":    obj(0xcb, 0, 0, 0, 0, 0, 0, 0, 1),
		"bin8":            obj(0xc4, 1, 'a'),
		"str with ctl":    obj(0xa4, 0, 0x1f, '"', '\\'),
		"str bad UTF-8":   obj(0xa3, 0xff, 0xe2, 0x80),
		"str U+2028":      obj(0xa3, 0xe2, 0x80, 0xa8),
		"str8":            obj(0xd9, 1, 'a'),
		"number ext":      obj(0xd4, numberExtID, '7'),
		"number ext8":     obj(0xc7, 3, numberExtID, '0', '.', '1'),
		"number bad":      obj(0xd5, numberExtID, '1', '/'),
		"number +":        obj(0xd5, numberExtID, '+', '1'),
		"ext type 2":      obj(0xd4, 2, '7'),
		"time ext":        obj(0xd6, 0xff, 0, 0, 0, 1),
		"nil top":         {0xc0},
		"array top":       {0x91, 0x01},
		"int key":         {0x81, 0x01, 0x02},
		"bin key":         {0x81, 0xc4, 1, 'a', 0x01},
		"keys unsorted":   {0x82, 0xa1, 'b', 0x01, 0xa1, 'a', 0x02},
		"keys twice":      {0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02},
		"keys sorted":     {0x82, 0xa1, 'a', 0x01, 0xa1, 'b', 0x02},
		"map16":           {0xde, 0, 1, 0xa1, 'a', 0xc0},
		"map32 in array":  obj(0x91, 0xdf, 0, 0, 0, 1, 0xa0, 0xc3),
		"array16 empty":   obj(0xdc, 0, 0),
		"array32":         obj(0xdd, 0, 0, 0, 1, 0xc2),
		"nested unsorted": obj(0x82, 0xa1, 'b', 0x01, 0xa1, 'a', 0x02),
	} {
		require.NoError(t, checkPacked(p), "%s: % x", name, p)
		assert.NoError(t, checkDirectJSON(p), name)
	}
}

// TestDirectJSONFloats: floats written by the direct path are encoding/json's, across the
// exponent range and at the 'e' format's edges.
func TestDirectJSONFloats(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	floats := []float64{1e-6, math.Nextafter(1e-6, 0), 1e21, math.Nextafter(1e21, 0), 1e20, 123456789e-15,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, 1.0 / 3, 100, -2.5e-9}
	for i := 0; i < 5000; i++ {
		floats = append(floats, math.Float64frombits(rng.Uint64()))
	}
	for _, f := range floats {
		p, err := msgpack.Marshal(map[string]any{"f": f})
		require.NoError(t, err)
		if err := checkDirectJSON(p); err != nil {
			require.NoError(t, err, "seed %d: float %v", seed, f)
		}
		if _, ok := jsonDirect(p); !ok && !math.IsNaN(f) && !math.IsInf(f, 0) {
			require.Fail(t, "direct JSON refused a float", "seed %d: %v", seed, f)
		}
	}
}

// TestDirectMatchesJSONValue: the direct path's JSON of a stored body is the JSON value of the
// text, as json.Valid and jsonValue see it (a check that does not rest on the decoding path).
func TestDirectMatchesJSONValue(t *testing.T) {
	t.Parallel()
	for _, text := range roundTripTexts {
		packed, ok := packText([]byte(text))
		require.True(t, ok, "direct path of %s", text)
		out, ok := jsonDirect(packed)
		require.True(t, ok, "direct JSON of %s", text)
		require.True(t, json.Valid(out), "direct JSON of %s: got %q, want valid JSON", text, out)
		assert.Equal(t, jsonValue(t, []byte(text)), jsonValue(t, out), "direct round trip of %s", text)
	}
}
