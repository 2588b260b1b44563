package cells

import (
	"bytes"
	stdzlib "compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bodySeeds are real-looking cell bodies: a flight, a trip, nesting, numbers of every stored
// kind, escapes and non-ASCII text, and texts that are not one object.
var bodySeeds = []string{
	`{"origin":"LAX","dest":"JFK","distance":2475,"delay":-13,"date":"2001-01-01T00:01:00","cancelled":false}`,
	`{"fare":10.5,"city":"SF","driver":{"id":"d-17","rating":4.92},"stops":[{"lat":37.77,"lng":-122.41},{"lat":37.8,"lng":-122.27}]}`,
	`{"big":18446744073709551615,"neg":-9223372036854775808,"huge":1e400,"tiny":1e-400,"precise":0.1000000000000000000001,"zero":-0}`,
	`{"unicode":"Zürich ✈ 東京","escapes":"a\"b\\c\n\t<>&","emoji":"\ud83d\ude80","lone":"\ud800"}`,
	`{"a":{"b":{"c":{"d":[[[[]]]]}}},"e":{},"n":null,"t":true}`,
	`{"dup":1,"dup":2}`,
	`{}`, ` {"spaces" : [ 1 , 2 ] } `, `[]`, `null`, `{"a":1}x`, `{"a":`, "{\"bad\":\"\xff\"}",
	`{"a":1,"\u0061":2}`, `{"x":{"a":1},"y":{"a":[{"a":2},{"a":3}]}}`, `{"o":{"k":[{"d":1,"d":2}]}}`,
	`{"low":"\udc00"}`, `{"pair":"\uD83D\uDE00","text":"a:b"}`, `{"high":"\ud800x"}`, `{"two":"\ud800\ud800"}`,
	`{"escaped":"\\ud800","replacement":"\ufffd �"}`,
}

// FuzzBodyRoundTrip: EncodeBody never panics; it refuses a text as lossy (ErrLossyBody) exactly
// when encoding/json would decode it as another value than it holds, which a slower reference
// finds (invalid UTF-8, a key twice in one object by a json.Decoder token walk, or a U+FFFD the
// text does not hold); and a text it accepts reads back (JSON) as the same JSON value, whose
// encoding is the same stored form (one value, one encoding). The direct transcoders agree with
// the decoding paths (checkDirect): same texts stored, same packed bytes, same JSON.
func FuzzBodyRoundTrip(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	for _, s := range directCorpusTexts() {
		if len(s) <= 200 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if err := checkDirect(text); err != nil {
			t.Fatal(err)
		}
		b, err := EncodeBody(text)
		if lossy, known, why := lossyText(text); errors.Is(err, ErrLossyBody) && !lossy && known {
			t.Fatalf("EncodeBody refused %q as lossy (%v), but it holds what it says", text, err)
		} else if err == nil && lossy {
			t.Fatalf("EncodeBody accepted %q, which is lossy: %s", text, why)
		}
		if err != nil {
			return
		}
		out, err := b.JSON()
		if err != nil {
			t.Fatalf("EncodeBody accepted %q, but its JSON() fails: %v", text, err)
		}
		if !utf8.Valid(out) || !json.Valid(out) || !bytes.HasPrefix(out, []byte("{")) {
			t.Fatalf("JSON() of %q is %q, want a JSON object in valid UTF-8", text, out)
		}
		if got, want := jsonValue(t, out), jsonValue(t, text); !jsonEqual(got, want) {
			t.Fatalf("round trip of %q: got %q, want the same JSON value", text, out)
		}
		again, err := EncodeBody(out)
		if err != nil {
			t.Fatalf("EncodeBody of its own JSON() %q: %v", out, err)
		}
		if same, err := SameBody(b, again); err != nil || !same {
			t.Fatalf("%q and its JSON() %q have different stored forms (err %v)", text, out, err)
		}
	})
}

// FuzzBodyDecode: decoding arbitrary bytes as a stored body never panics and either fails or
// gives a JSON object, and where the direct path writes JSON the decoding path writes the same
// (checkDirectJSON). packed: data is the MessagePack inside (compressed here), so the fuzzer
// reaches the MessagePack decoder past zlib's checksum.
func FuzzBodyDecode(f *testing.F) {
	for _, s := range bodySeeds {
		if b, err := EncodeBody([]byte(s)); err == nil {
			f.Add([]byte(b), false)
			if p, err := b.Packed(); err == nil {
				f.Add(p, true)
			}
		}
	}
	var std bytes.Buffer
	w := stdzlib.NewWriter(&std)
	_, _ = w.Write([]byte{0x81, 0xa1, 'a', 0x01}) // {"a":1}, compressed by compress/zlib
	_ = w.Close()
	f.Add(std.Bytes(), false)
	f.Add([]byte("not zlib"), false)
	f.Add([]byte{}, false)
	f.Add([]byte{0xc0}, true)                                                 // nil
	f.Add([]byte{0x91, 0x01}, true)                                           // [1]
	f.Add([]byte{0x81, 0x01, 0x02}, true)                                     // {1:2}
	f.Add([]byte{0x81, 0xa1, 'x', 0xd4, numberExtID, '7'}, true)              // {"x":Number("7")}
	f.Add([]byte{0x81, 0xa1, 'x', 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0}, true)  // {"x":NaN}
	f.Add([]byte{0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff}, true)        // {"x":[4G elements]}
	f.Add([]byte{0x82, 0xa1, 'b', 0x01, 0xa1, 'a', 0x02}, true)               // keys out of order
	f.Add([]byte{0x81, 0xa1, 'x', 0xca, 0x3f, 0xc0, 0, 0}, true)              // {"x":float32(1.5)}
	f.Add([]byte{0x81, 0xa1, 'x', 0xa3, 0xe2, 0x80, 0xa8}, true)              // {"x":"\u2028"}
	f.Add([]byte{0x81, 0xa1, 'x', 0xc7, 3, numberExtID, '1', 'e', '9'}, true) // {"x":Number("1e9")}
	f.Fuzz(func(t *testing.T, data []byte, packed bool) {
		b := Body(data)
		if packed {
			b = compress(data)
		}
		if p, err := b.Packed(); err == nil {
			if err := checkDirectJSON(p); err != nil {
				t.Fatal(err)
			}
		}
		obj, err := b.Object()
		if err != nil {
			return
		}
		if obj == nil {
			t.Fatalf("Object() of %x gave no object and no error", data)
		}
		out, err := b.JSON()
		if err != nil {
			return // a value JSON cannot hold (NaN): an error, not a panic
		}
		if !json.Valid(out) || !bytes.HasPrefix(out, []byte("{")) {
			t.Fatalf("JSON() of %x is %q, want a JSON object", data, out)
		}
	})
}

// lossyText is the reference of ErrLossyBody for a text that is one JSON value: whether
// encoding/json decodes it as another value than it holds, and why. known is false when it
// cannot tell: no key is twice, but the text holds U+FFFD or a \ufffd escape, which hide a lone
// surrogate (decoded as U+FFFD too).
func lossyText(text []byte) (lossy, known bool, why string) {
	if !utf8.Valid(text) {
		return true, true, "invalid UTF-8"
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber() // a float64 token would end the walk at 1e400
	type open struct {
		keys    map[string]bool // nil in an array
		wantKey bool
	}
	var stack []*open
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			o := &open{}
			if d == '{' {
				o.keys, o.wantKey = map[string]bool{}, true
			}
			stack = append(stack, o)
			continue
		} else if ok {
			stack = stack[:len(stack)-1]
		}
		if k, ok := tok.(string); ok && len(stack) > 0 && stack[len(stack)-1].wantKey {
			top := stack[len(stack)-1]
			if top.keys[k] {
				return true, true, fmt.Sprintf("key %q twice in one object", k)
			}
			top.keys[k], top.wantKey = true, false
			continue
		}
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].wantKey = true // a member's value ended
		}
	}
	lower := bytes.ToLower(text)
	if bytes.Contains(text, []byte("\uFFFD")) || bytes.Contains(lower, []byte(`\ufffd`)) {
		return false, false, ""
	}
	var v any
	if json.Unmarshal(text, &v) == nil && holdsReplacement(v) {
		return true, true, "U+FFFD in the decoded value, not in the text (a lone surrogate)"
	}
	return false, true, ""
}

// holdsReplacement reports whether a decoded JSON value holds U+FFFD in a key or a string.
func holdsReplacement(v any) bool {
	switch t := v.(type) {
	case string:
		return strings.ContainsRune(t, utf8.RuneError)
	case []any:
		for _, e := range t {
			if holdsReplacement(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range t {
			if strings.ContainsRune(k, utf8.RuneError) || holdsReplacement(e) {
				return true
			}
		}
	}
	return false
}

// jsonEqual compares two values of jsonValue.
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// TestCheckPacked: the stored form of every seed body passes; truncated bytes, trailing bytes,
// the unused code 0xc1 and lengths declaring more values or bytes than remain do not.
func TestCheckPacked(t *testing.T) {
	for _, s := range bodySeeds {
		b, err := EncodeBody([]byte(s))
		if err != nil {
			continue
		}
		p, err := b.Packed()
		require.NoError(t, err)
		assert.NoError(t, checkPacked(p), "the stored form of %s", s)
		assert.Error(t, checkPacked(p[:len(p)-1]), "the stored form of %s, truncated", s)
		assert.Error(t, checkPacked(append(p, 0xc0)), "the stored form of %s, with a byte after it", s)
	}
	for name, p := range map[string][]byte{
		"empty":              {},
		"code 0xc1":          {0xc1},
		"array32 of 4G":      {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01},
		"map32 of 4G":        {0xdf, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01},
		"map16 of 2, 1 val":  {0xde, 0x00, 0x02, 0x01, 0x01, 0x01},
		"str8 past the end":  {0xd9, 0x05, 'a'},
		"ext32 past the end": {0xc9, 0x00, 0x00, 0x00, 0x09, numberExtID, '1'},
		"fixext16 short":     {0xd8, numberExtID, '1'},
	} {
		assert.Error(t, checkPacked(p), "%s: % x", name, p)
	}
}
