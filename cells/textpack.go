package cells

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// The direct transcoder of a body's JSON text to its packed form (MessagePack), in one pass
// without a Go value per JSON value. It writes the bytes that the decoding path (encoding/json
// into Go values, convertNumbers, then msgpack's Encoder with SetSortMapKeys) writes for the
// same text:
//
//   - objects as maps whose keys (str) are in Go string order, as msgpack's sort.Strings;
//   - arrays with the header of their length (fixarray, array16, array32);
//   - strings unescaped as encoding/json does, with the shortest str header (fixstr, str8,
//     str16, str32);
//   - numbers as convertNumber stores them: int64 (0xd3) and uint64 (0xcf) always in 9 bytes,
//     as msgpack writes them without UseCompactInts, float64 (0xcb), or the Number extension;
//   - true, false and null as 0xc3, 0xc2 and 0xc0.
//
// It answers ok=false, and EncodeBody takes the decoding path, which gives today's errors, for
// any text it does not store: invalid JSON or UTF-8, a value other than an object, trailing
// data, a lone surrogate escape, a key given twice in one object, or nesting deeper than
// maxPackDepth.

// maxPackDepth is the deepest nesting of objects and arrays the direct transcoder handles.
// Deeper texts take the decoding path (encoding/json refuses more than 10,000 levels). Each
// object or array rewrites its bytes at most once, so a byte is copied at most once per
// enclosing level; the bound keeps that linear in practice.
const maxPackDepth = 100

// maxPooledScratch is the largest scratch buffer (bytes) kept in a pool for reuse; bigger ones
// are left to the garbage collector so a rare large body does not pin memory.
const maxPooledScratch = 64 << 10

// textPacker holds the state and scratch buffers of one transcoding. Its buffers are reused
// (textPackers) and never returned to callers.
type textPacker struct {
	text    []byte
	out     []byte   // packed form written so far
	tmp     []byte   // the members of an object while it is rewritten in key order
	str     []byte   // a string with escapes, unescaped
	members []member // members of the open objects, innermost last
}

// member is one object member written in textPacker.out: its key (str header then key bytes)
// from start, the key's bytes at [key, keyEnd), its value up to end.
type member struct {
	start, key, keyEnd, end int
}

var textPackers = sync.Pool{New: func() any { return new(textPacker) }}

// encodeBodyDirect is EncodeBody's direct path: the stored form of text, or ok=false when
// text is anything the direct transcoder does not store (see above).
func encodeBodyDirect(text []byte) (Body, bool) {
	p := textPackers.Get().(*textPacker)
	defer p.release()
	if !p.pack(text) {
		return nil, false
	}
	return compress(p.out), true
}

// packText returns the packed form of text written by the direct transcoder, in a new slice;
// ok=false as for encodeBodyDirect.
func packText(text []byte) ([]byte, bool) {
	p := textPackers.Get().(*textPacker)
	defer p.release()
	if !p.pack(text) {
		return nil, false
	}
	return bytes.Clone(p.out), true
}

// release drops p's references and returns it to the pool, without buffers grown too big.
func (p *textPacker) release() {
	p.text = nil
	if cap(p.out) > maxPooledScratch || cap(p.tmp) > maxPooledScratch || cap(p.str) > maxPooledScratch ||
		cap(p.members) > maxPooledScratch/32 {
		return
	}
	textPackers.Put(p)
}

// pack writes the packed form of text to p.out, or reports false.
func (p *textPacker) pack(text []byte) bool {
	if !utf8.Valid(text) {
		return false
	}
	p.text = text
	p.out = p.out[:0]
	p.members = p.members[:0]
	i := skipSpace(text, 0)
	if i >= len(text) || text[i] != '{' {
		return false
	}
	i, ok := p.object(i+1, 1)
	return ok && skipSpace(text, i) == len(text)
}

// skipSpace returns the index of the first byte of text at or after i that is not JSON white
// space (space, tab, line feed, carriage return).
func skipSpace(text []byte, i int) int {
	for i < len(text) {
		switch text[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value writes the JSON value at text[i] (no white space before it) and returns the index
// after it. depth is the nesting of the value's container.
func (p *textPacker) value(i, depth int) (int, bool) {
	text := p.text
	if i >= len(text) {
		return i, false
	}
	switch c := text[i]; c {
	case '{':
		return p.object(i+1, depth+1)
	case '[':
		return p.array(i+1, depth+1)
	case '"':
		next, _, ok := p.string(i + 1)
		return next, ok
	case 't':
		return p.literal(i, "true", 0xc3)
	case 'f':
		return p.literal(i, "false", 0xc2)
	case 'n':
		return p.literal(i, "null", 0xc0)
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return p.number(i)
		}
		return i, false
	}
}

// literal writes code for the literal word at text[i].
func (p *textPacker) literal(i int, word string, code byte) (int, bool) {
	if !bytes.HasPrefix(p.text[i:], []byte(word)) {
		return i, false
	}
	p.out = append(p.out, code)
	return i + len(word), true
}

// object writes the object whose '{' is before text[i]. Members are written in text order as
// (key, value) pairs after a one-byte map header; the object is rewritten only if its keys are
// not already in order or it has more than 15 members.
func (p *textPacker) object(i, depth int) (int, bool) {
	if depth > maxPackDepth {
		return i, false
	}
	text := p.text
	start := len(p.out)
	p.out = append(p.out, 0x80) // fixmap header, set by sortMembers
	base := len(p.members)
	if i = skipSpace(text, i); i < len(text) && text[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(text) || text[i] != '"' {
			return i, false
		}
		m := member{start: len(p.out)}
		var ok bool
		if i, m.key, ok = p.string(i + 1); !ok {
			return i, false
		}
		m.keyEnd = len(p.out)
		if i = skipSpace(text, i); i >= len(text) || text[i] != ':' {
			return i, false
		}
		if i, ok = p.value(skipSpace(text, i+1), depth); !ok {
			return i, false
		}
		m.end = len(p.out)
		p.members = append(p.members, m)
		if i = skipSpace(text, i); i >= len(text) {
			return i, false
		}
		if text[i] == '}' {
			i++
			break
		}
		if text[i] != ',' {
			return i, false
		}
		i = skipSpace(text, i+1)
	}
	ok := p.sortMembers(start, p.members[base:])
	p.members = p.members[:base]
	return i, ok
}

// sortMembers finishes the object written at p.out[start:]: a one-byte placeholder header,
// then ms in text order. It writes the map header and puts the members in key order (Go string
// order, as msgpack's sort.Strings); a key given twice reports false.
func (p *textPacker) sortMembers(start int, ms []member) bool {
	out := p.out
	key := func(m member) []byte { return out[m.key:m.keyEnd] }
	sorted := true
	for j := 1; j < len(ms); j++ {
		if c := bytes.Compare(key(ms[j-1]), key(ms[j])); c == 0 {
			return false
		} else if c > 0 {
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(key(a), key(b)) })
		for j := 1; j < len(ms); j++ {
			if bytes.Equal(key(ms[j-1]), key(ms[j])) {
				return false
			}
		}
	}
	if sorted && len(ms) < 16 {
		p.out[start] = 0x80 | byte(len(ms))
		return true
	}
	// Copy the members aside, then write the header and the members in key order.
	body := start + 1
	p.tmp = append(p.tmp[:0], p.out[body:]...)
	p.out = appendMapHeader(p.out[:start], len(ms))
	for _, m := range ms {
		p.out = append(p.out, p.tmp[m.start-body:m.end-body]...)
	}
	return true
}

// appendMapHeader appends the header msgpack writes before a map of n members (EncodeMapLen).
func appendMapHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xde, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
	}
}

// array writes the array whose '[' is before text[i], after a one-byte fixarray header that
// is widened (the elements moved) when it has more than 15 elements.
func (p *textPacker) array(i, depth int) (int, bool) {
	if depth > maxPackDepth {
		return i, false
	}
	text := p.text
	start := len(p.out)
	p.out = append(p.out, 0x90)
	i = skipSpace(text, i)
	if i < len(text) && text[i] == ']' {
		return i + 1, true
	}
	n := 0
	for {
		var ok bool
		if i, ok = p.value(i, depth); !ok {
			return i, false
		}
		n++
		if i = skipSpace(text, i); i >= len(text) {
			return i, false
		}
		if text[i] == ']' {
			i++
			break
		}
		if text[i] != ',' {
			return i, false
		}
		i = skipSpace(text, i+1)
	}
	switch {
	case n < 16:
		p.out[start] = 0x90 | byte(n)
	case n <= math.MaxUint16:
		p.out = append(p.out, 0, 0)
		copy(p.out[start+3:], p.out[start+1:])
		p.out[start], p.out[start+1], p.out[start+2] = 0xdc, byte(n>>8), byte(n)
	default:
		p.out = append(p.out, 0, 0, 0, 0)
		copy(p.out[start+5:], p.out[start+1:])
		p.out[start] = 0xdd
		binary.BigEndian.PutUint32(p.out[start+1:], uint32(n))
	}
	return i, true
}

// string writes the string whose opening quote is before text[i], unescaped, as a msgpack str,
// and returns the index after its closing quote and the index in p.out of the string's bytes
// (after the str header). Control characters, bad escapes and escapes of half a surrogate pair
// outside a pair report false. Other bytes are copied (the text is valid UTF-8).
func (p *textPacker) string(i int) (next, data int, ok bool) {
	text := p.text
	j := i
	for j < len(text) && text[j] != '"' && text[j] != '\\' && text[j] >= 0x20 {
		j++
	}
	if j < len(text) && text[j] == '"' { // no escape: the common case
		p.out = appendStrHeader(p.out, j-i)
		data = len(p.out)
		p.out = append(p.out, text[i:j]...)
		return j + 1, data, true
	}
	s := append(p.str[:0], text[i:j]...)
	j, s, ok = unescape(text, j, s)
	p.str = s
	if !ok {
		return j, 0, false
	}
	p.out = appendStrHeader(p.out, len(s))
	data = len(p.out)
	p.out = append(p.out, s...)
	return j, data, true
}

// unescape appends to dst the rest of the string at text[i:] (inside its quotes) unescaped as
// encoding/json does, and returns the index after its closing quote. It reports false where
// encoding/json fails, and for a \u escape of half a surrogate pair that is not in a pair
// (encoding/json would write U+FFFD).
func unescape(text []byte, i int, dst []byte) (int, []byte, bool) {
	for i < len(text) {
		c := text[i]
		switch {
		case c == '"':
			return i + 1, dst, true
		case c < 0x20:
			return i, dst, false
		case c != '\\':
			j := i + 1
			for j < len(text) && text[j] != '"' && text[j] != '\\' && text[j] >= 0x20 {
				j++
			}
			dst = append(dst, text[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(text) {
			return i, dst, false
		}
		switch text[i+1] {
		case '"', '\\', '/':
			dst = append(dst, text[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hexEscape(text, i)
			if !ok {
				return i, dst, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				low, ok := hexEscape(text, i)
				if !ok {
					return i, dst, false
				}
				if r = utf16.DecodeRune(r, low); r == utf8.RuneError {
					return i, dst, false // half a pair: lossy
				}
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return i, dst, false
		}
		i += 2
	}
	return i, dst, false
}

// hexEscape returns the value of the escape \uXXXX at text[i:]; false if there is none.
func hexEscape(text []byte, i int) (rune, bool) {
	if i+6 > len(text) || text[i] != '\\' || text[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range text[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendStrHeader appends the str header msgpack writes before a string of n bytes
// (encodeStringLen).
func appendStrHeader(dst []byte, n int) []byte {
	switch {
	case n < 32:
		return append(dst, 0xa0|byte(n))
	case n < 256:
		return append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xda, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
}

// number writes the JSON number at text[i] as convertNumber stores it, and returns the index
// after it.
func (p *textPacker) number(i int) (int, bool) {
	end, ok := scanNumber(p.text, i)
	if !ok {
		return i, false
	}
	p.out, ok = appendNumber(p.out, p.text[i:end])
	return end, ok
}

// scanNumber returns the index after the JSON number at text[i] (RFC 8259 §6:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), or false if there is none.
func scanNumber(text []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(text) && text[i] == '-' {
		i++
	}
	switch {
	case i >= len(text):
		return i, false
	case text[i] == '0':
		i++
	case text[i] >= '1' && text[i] <= '9':
		i = digits(i + 1)
	default:
		return i, false
	}
	if i < len(text) && text[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		if i < len(text) && (text[i] == '+' || text[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// maxFastNumber is the longest number text (bytes) appendNumber classifies itself; longer ones
// go through convertNumber. Short texts have exponents that big.Rat accepts (it refuses a
// decimal exponent, net of the fraction's digits, beyond 10^6).
const maxFastNumber = 40

// appendNumber appends the stored form of the JSON number text tok (valid syntax), by the
// rules of convertNumber: an integer that fits int64, then uint64; else a float64 when it is the
// number exactly and its shortest form is the same number; else the Number extension holding
// tok. Texts it cannot classify without big numbers are classified by convertNumber itself.
func appendNumber(dst, tok []byte) ([]byte, bool) {
	neg, m, exp, ok := decimal(tok)
	if !ok {
		return appendConverted(dst, tok)
	}
	if m == 0 { // 0, -0, 0.0, 0e5: the integer 0
		return appendInt64(dst, 0), true
	}
	if exp >= 0 { // an integer: m·10^exp
		for ; exp > 0; exp-- {
			if m > math.MaxUint64/10 {
				return appendConverted(dst, tok)
			}
			m *= 10
		}
		switch {
		case !neg && m <= math.MaxInt64:
			return appendInt64(dst, int64(m)), true
		case !neg:
			return append(dst, 0xcf, byte(m>>56), byte(m>>48), byte(m>>40), byte(m>>32), byte(m>>24), byte(m>>16), byte(m>>8), byte(m)), true
		case m <= 1<<63:
			return appendInt64(dst, int64(-m)), true // -m wraps to math.MinInt64 for 1<<63
		default:
			return appendConverted(dst, tok)
		}
	}
	// Not an integer: m·10^exp with m not a multiple of 10 and exp < 0.
	k := -exp
	if m >= 1<<53 || k > 22 {
		return appendConverted(dst, tok)
	}
	// m/10^k = m/(5^k·2^k) is a float64 exactly when 5^k divides m: then m/5^k < 2^53 and the
	// division by 2^k (k <= 22) keeps it exact. Otherwise it is no binary fraction at all.
	pow5 := uint64(1)
	for range k {
		pow5 *= 5
	}
	if m%pow5 != 0 {
		return appendNumberExt(dst, tok), true
	}
	f := math.Ldexp(float64(m/pow5), -k)
	if neg {
		f = -f
	}
	// Its shortest form must be the same number: same digits, same exponent.
	var buf [32]byte
	_, sm, sexp, ok := decimal(strconv.AppendFloat(buf[:0], f, 'g', -1, 64))
	if !ok || sm != m || sexp != exp {
		return appendNumberExt(dst, tok), true
	}
	return appendFloat64(dst, f), true
}

// maxFastExponent is the largest exponent (in absolute value) that decimal accepts.
const maxFastExponent = 9999

// decimal returns the JSON number text tok (valid syntax) as ±m·10^exp with m not a multiple
// of 10 (or 0); false if tok is longer than maxFastNumber, its exponent is beyond
// ±maxFastExponent or m overflows uint64.
func decimal(tok []byte) (neg bool, m uint64, exp int, ok bool) {
	if len(tok) > maxFastNumber {
		return false, 0, 0, false
	}
	end := exponentAt(tok) // the end of the digits; the exponent follows
	if end < len(tok) {
		i := end + 1
		eneg := false
		if tok[i] == '+' || tok[i] == '-' {
			eneg = tok[i] == '-'
			i++
		}
		for ; i < len(tok); i++ {
			if exp = 10*exp + int(tok[i]-'0'); exp > maxFastExponent {
				return false, 0, 0, false
			}
		}
		if eneg {
			exp = -exp
		}
	}
	i := 0
	if tok[0] == '-' {
		neg, i = true, 1
	}
	zeros := 0 // zeros read and not yet in m: m is kept without trailing zeros
	frac := false
	for ; i < end; i++ {
		switch c := tok[i]; c {
		case '.':
			frac = true
			continue
		case '0':
			zeros++
		default:
			for ; zeros >= 0; zeros-- { // m·10^(zeros+1), then the digit
				if m > (math.MaxUint64-9)/10 {
					return false, 0, 0, false
				}
				m *= 10
			}
			m += uint64(c - '0')
			zeros = 0
		}
		if frac {
			exp--
		}
	}
	if m == 0 {
		return neg, 0, 0, true
	}
	return neg, m, exp + zeros, true
}

// exponentAt returns the index of the 'e' or 'E' in the number text tok, or len(tok).
func exponentAt(tok []byte) int {
	for i, c := range tok {
		if c == 'e' || c == 'E' {
			return i
		}
	}
	return len(tok)
}

// appendConverted appends the stored form of tok as convertNumber gives it.
func appendConverted(dst, tok []byte) ([]byte, bool) {
	v, err := convertNumber(json.Number(tok))
	if err != nil {
		return dst, false
	}
	switch t := v.(type) {
	case int64:
		return appendInt64(dst, t), true
	case uint64:
		return append(dst, 0xcf, byte(t>>56), byte(t>>48), byte(t>>40), byte(t>>32), byte(t>>24), byte(t>>16), byte(t>>8), byte(t)), true
	case float64:
		return appendFloat64(dst, t), true
	case *Number:
		return appendNumberExt(dst, []byte(*t)), true
	}
	return dst, false
}

// appendInt64 appends n as msgpack's Encoder writes an int64: code 0xd3, 8 bytes big endian.
func appendInt64(dst []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(n))
}

// appendFloat64 appends f as code 0xcb, 8 bytes big endian.
func appendFloat64(dst []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(f))
}

// appendNumberExt appends the Number extension holding the decimal text tok, with the header
// msgpack's EncodeExtHeader writes: fixext for 1, 2, 4, 8 or 16 bytes, else ext8, ext16, ext32.
func appendNumberExt(dst, tok []byte) []byte {
	switch n := len(tok); {
	case n == 1:
		dst = append(dst, 0xd4)
	case n == 2:
		dst = append(dst, 0xd5)
	case n == 4:
		dst = append(dst, 0xd6)
	case n == 8:
		dst = append(dst, 0xd7)
	case n == 16:
		dst = append(dst, 0xd8)
	case n <= math.MaxUint8:
		dst = append(dst, 0xc7, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xc8, byte(n>>8), byte(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xc9), uint32(n))
	}
	dst = append(dst, numberExtID)
	return append(dst, tok...)
}
