package cells

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"sync"

	"github.com/schemaless-db/schemaless/internal/jsontext"
)

// The direct transcoder of a body's packed form (MessagePack) to JSON text, without a Go value
// per MessagePack value. It writes the bytes that the decoding path (msgpack.Unmarshal into
// map[string]any, then a json.Encoder with SetEscapeHTML(false), its newline trimmed) writes
// for the same packed bytes:
//
//   - maps as objects, keys in order; every key must be a str and the keys strictly increasing
//     in Go string order (encoding/json sorts map keys the same way);
//   - str as JSON strings, escaped as encoding/json's appendString without HTML escaping;
//   - all integer codes in decimal, float64 as encoding/json's floatEncoder (ES6 number to
//     string), the Number extension as its text, nil, true and false.
//
// It answers ok=false, and JSON takes the decoding path (which gives today's output or error),
// for anything else: a top-level value that is not a map, a key that is not a str, keys out of
// order or given twice, float32, bin, another extension type or a Number text that is not a
// JSON number, NaN or an infinity, or nesting deeper than maxTextDepth. The caller has checked
// the bytes with checkPacked.

// maxTextDepth is the deepest nesting of maps and arrays the direct transcoder writes; deeper
// bodies take the decoding path. It is encoding/json's limit on the texts EncodeBody accepts.
const maxTextDepth = 10000

// packedText holds the state of one transcoding to JSON and scratch buffers reused
// (packedTexts), never returned to callers.
type packedText struct {
	p      []byte // the packed body
	i      int    // the next byte of p to read
	out    []byte // JSON written so far
	packed []byte // Body.JSON's inflated body
}

var packedTexts = sync.Pool{New: func() any { return new(packedText) }}

// jsonDirect returns the JSON text of the packed body p (checked by checkPacked) in a new slice
// of its exact length, or ok=false (see above).
func jsonDirect(p []byte) ([]byte, bool) {
	w := packedTexts.Get().(*packedText)
	defer w.release()
	return w.json(p)
}

// json is jsonDirect with w's buffers.
func (w *packedText) json(p []byte) ([]byte, bool) {
	w.p, w.i, w.out = p, 0, w.out[:0]
	if len(p) == 0 || !isMapCode(p[0]) || !w.value(0) || w.i != len(p) {
		return nil, false
	}
	return bytes.Clone(w.out), true
}

// release drops w's references and returns it to the pool, without buffers grown too big.
func (w *packedText) release() {
	w.p = nil
	if cap(w.out) > maxPooledScratch || cap(w.packed) > maxPooledScratch {
		return
	}
	packedTexts.Put(w)
}

// isMapCode reports whether c starts a map (fixmap, map16, map32).
func isMapCode(c byte) bool { return c>>4 == 0x8 || c == 0xde || c == 0xdf }

// take returns the next n bytes of w.p, or false if fewer remain.
func (w *packedText) take(n int) ([]byte, bool) {
	if n < 0 || n > len(w.p)-w.i {
		return nil, false
	}
	b := w.p[w.i : w.i+n]
	w.i += n
	return b, true
}

// size reads a big-endian length of n bytes (1, 2 or 4).
func (w *packedText) size(n int) (int, bool) {
	b, ok := w.take(n)
	if !ok {
		return 0, false
	}
	switch n {
	case 1:
		return int(b[0]), true
	case 2:
		return int(binary.BigEndian.Uint16(b)), true
	default:
		return int(binary.BigEndian.Uint32(b)), true
	}
}

// value writes the value at w.p[w.i:] as JSON; depth is the nesting of its container.
func (w *packedText) value(depth int) bool {
	if w.i >= len(w.p) {
		return false
	}
	c := w.p[w.i]
	w.i++
	switch {
	case c <= 0x7f: // positive fixint
		w.out = strconv.AppendInt(w.out, int64(c), 10)
		return true
	case c >= 0xe0: // negative fixint
		w.out = strconv.AppendInt(w.out, int64(int8(c)), 10)
		return true
	case c <= 0x8f:
		return w.object(int(c&0x0f), depth+1)
	case c <= 0x9f:
		return w.array(int(c&0x0f), depth+1)
	case c <= 0xbf:
		return w.string(int(c & 0x1f))
	}
	switch c {
	case 0xc0:
		w.out = append(w.out, "null"...)
	case 0xc2:
		w.out = append(w.out, "false"...)
	case 0xc3:
		w.out = append(w.out, "true"...)
	case 0xcb: // float64
		b, ok := w.take(8)
		if !ok {
			return false
		}
		return w.float(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case 0xcc, 0xcd, 0xce, 0xcf: // uint8, 16, 32, 64
		b, ok := w.take(1 << (c - 0xcc))
		if !ok {
			return false
		}
		w.out = strconv.AppendUint(w.out, bigEndian(b), 10)
	case 0xd0, 0xd1, 0xd2, 0xd3: // int8, 16, 32, 64
		n := 1 << (c - 0xd0)
		b, ok := w.take(n)
		if !ok {
			return false
		}
		shift := 64 - 8*n // sign-extend
		w.out = strconv.AppendInt(w.out, int64(bigEndian(b)<<shift)>>shift, 10)
	case 0xd9, 0xda, 0xdb: // str8, 16, 32
		n, ok := w.size(1 << (c - 0xd9))
		return ok && w.string(n)
	case 0xdc, 0xdd: // array16, 32
		n, ok := w.size(2 << (c - 0xdc))
		return ok && w.array(n, depth+1)
	case 0xde, 0xdf: // map16, 32
		n, ok := w.size(2 << (c - 0xde))
		return ok && w.object(n, depth+1)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16
		return w.ext(1 << (c - 0xd4))
	case 0xc7, 0xc8, 0xc9: // ext8, 16, 32
		n, ok := w.size(1 << (c - 0xc7))
		return ok && w.ext(n)
	default: // float32, bin, 0xc1
		return false
	}
	return true
}

// bigEndian returns the unsigned big-endian integer of b (1 to 8 bytes).
func bigEndian(b []byte) uint64 {
	var u uint64
	for _, c := range b {
		u = u<<8 | uint64(c)
	}
	return u
}

// object writes a map of n members.
func (w *packedText) object(n, depth int) bool {
	if depth > maxTextDepth {
		return false
	}
	w.out = append(w.out, '{')
	var prev []byte
	for j := range n {
		key, ok := w.key()
		if !ok || j > 0 && bytes.Compare(prev, key) >= 0 {
			return false
		}
		prev = key
		if j > 0 {
			w.out = append(w.out, ',')
		}
		w.out = jsontext.AppendStringBytes(w.out, key)
		w.out = append(w.out, ':')
		if !w.value(depth) {
			return false
		}
	}
	w.out = append(w.out, '}')
	return true
}

// key returns the bytes of the str at w.p[w.i:]; false if it is not a str.
func (w *packedText) key() ([]byte, bool) {
	if w.i >= len(w.p) {
		return nil, false
	}
	c := w.p[w.i]
	w.i++
	n := 0
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c >= 0xd9 && c <= 0xdb:
		var ok bool
		if n, ok = w.size(1 << (c - 0xd9)); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	return w.take(n)
}

// array writes an array of n elements.
func (w *packedText) array(n, depth int) bool {
	if depth > maxTextDepth {
		return false
	}
	w.out = append(w.out, '[')
	for j := range n {
		if j > 0 {
			w.out = append(w.out, ',')
		}
		if !w.value(depth) {
			return false
		}
	}
	w.out = append(w.out, ']')
	return true
}

// string writes a str of n bytes.
func (w *packedText) string(n int) bool {
	b, ok := w.take(n)
	if ok {
		w.out = jsontext.AppendStringBytes(w.out, b)
	}
	return ok
}

// ext writes an extension of n payload bytes: only the Number extension holding a JSON number.
func (w *packedText) ext(n int) bool {
	typ, ok := w.take(1)
	if !ok || typ[0] != numberExtID {
		return false
	}
	text, ok := w.take(n)
	if !ok || !numberText(text) {
		return false
	}
	w.out = append(w.out, text...)
	return true
}

// numberText reports whether b is a JSON number (RFC 8259 §6) that Number.UnmarshalMsgpack
// accepts, which encoding/json then writes as is. big.Rat's SetString accepts such a text
// unless its exponent does not fit an int64, or the number is not 0 and its exponent net of
// the fraction's digits is beyond ±10^6 (math/big's ratconv.go).
func numberText(b []byte) bool {
	end, ok := scanNumber(b, 0)
	if !ok || end != len(b) {
		return false
	}
	mantissa, exponent := b, []byte(nil)
	if e := exponentAt(b); e < len(b) {
		mantissa, exponent = b[:e], b[e+1:]
	}
	neg := false
	if len(exponent) > 0 && (exponent[0] == '+' || exponent[0] == '-') {
		neg = exponent[0] == '-'
		exponent = exponent[1:]
	}
	var mag uint64 // the exponent's magnitude, up to 2^63 (then it no longer matters)
	for _, c := range exponent {
		if mag = 10*mag + uint64(c-'0'); mag > 1<<63 {
			return false // ParseInt fails
		}
	}
	if !neg && mag > math.MaxInt64 {
		return false
	}
	frac := 0
	if dot := bytes.IndexByte(mantissa, '.'); dot >= 0 {
		frac = len(mantissa) - dot - 1
	}
	if len(bytes.Trim(mantissa, "-0.")) == 0 {
		return true // zero: any exponent that parses
	}
	const maxExp5 = 1_000_000
	if mag > maxExp5+uint64(len(b)) {
		return false
	}
	exp5 := int64(mag)
	if neg {
		exp5 = -exp5
	}
	exp5 -= int64(frac)
	return exp5 >= -maxExp5 && exp5 <= maxExp5
}

// float writes f as encoding/json's floatEncoder does for a float64: like strconv's 'f' format,
// but 'e' for magnitudes below 1e-6 or from 1e21 on, with a one-digit negative exponent
// unpadded (e-7, not e-07). NaN and infinities report false (encoding/json fails on them).
func (w *packedText) float(f float64) bool {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	w.out = strconv.AppendFloat(w.out, f, format, -1, 64)
	if format == 'e' {
		n := len(w.out)
		if n >= 4 && w.out[n-4] == 'e' && w.out[n-3] == '-' && w.out[n-2] == '0' {
			w.out[n-2] = w.out[n-1]
			w.out = w.out[:n-1]
		}
	}
	return true
}
