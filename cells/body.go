package cells

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"sync"

	kzlib "github.com/klauspost/compress/zlib"
	"github.com/vmihailenco/msgpack/v5"
)

// Body is the stored form of a cell body: the JSON object encoded as MessagePack with map keys
// sorted (so one JSON value has one encoding), then compressed with zlib. A Body is immutable
// once built; callers must not modify its bytes.
//
// Numbers: a number whose value is an integer that fits int64 or uint64 (10, 10.0, 1e1) is stored
// as a MessagePack integer; any other number is stored as a float64 when that float denotes
// exactly the number written and its shortest decimal form (what JSON writes) is that number too,
// and otherwise as its decimal text (extension type 1), so every JSON number reads back as the
// same value. Equal values have one stored form, except numbers kept as text, whose spellings
// differ (0.1 and 0.10).
type Body []byte

// numberExtID is the MessagePack extension type of a JSON number kept as decimal text.
const numberExtID = 1

// Number is a JSON number that neither int64, uint64 nor float64 can hold exactly, kept as its
// decimal text. It appears only inside decoded bodies.
type Number string

// MarshalJSON writes the number's text as is.
func (n Number) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// MarshalMsgpack is the extension payload: the decimal text.
func (n Number) MarshalMsgpack() ([]byte, error) { return []byte(n), nil }

// UnmarshalMsgpack reads the extension payload.
func (n *Number) UnmarshalMsgpack(b []byte) error {
	if _, ok := new(big.Rat).SetString(string(b)); !ok {
		return fmt.Errorf("cells: bad number extension %q", b)
	}
	*n = Number(b)
	return nil
}

func init() {
	msgpack.RegisterExt(numberExtID, (*Number)(nil))
}

// zlibWriters holds compressors for reuse. They are klauspost/compress's zlib at BestSpeed: the
// same zlib format the standard library reads (and reads back here), written in about three
// quarters of compress/zlib's time for a 217-byte packed trip body, and 124 bytes long
// against 143 (BENCHMARKS.md). Stored bodies compressed by compress/zlib (before 2026-11-26)
// read as before, and SameBody compares packed forms, so a retried write of such a body still
// answers exists.
var zlibWriters = sync.Pool{New: func() any {
	w, _ := kzlib.NewWriterLevel(io.Discard, kzlib.BestSpeed)
	return w
}}

// EncodeBody validates that text is exactly one JSON object (surrounding white space allowed) and
// returns its stored form. A JSON value of another kind, invalid JSON or trailing data give a
// *FieldError for "body" wrapping ErrInvalidBody. Text that encoding/json would store as another
// value than it holds gives a *FieldError for "body" wrapping ErrLossyBody, which says what and
// where: invalid UTF-8, a \u escape of half a surrogate pair that is not in a pair ("\ud800"),
// or a key given twice in one object (at any depth; "a" and "\u0061" are the same key).
//
// The text is transcoded to MessagePack in one pass (textpack.go); a text that transcoder does
// not store (any error, nesting deeper than maxPackDepth) takes the decoding path, which defines
// the stored form and the errors: both write the same bytes for every text they store.
func EncodeBody(text []byte) (Body, error) {
	if b, ok := encodeBodyDirect(text); ok {
		return b, nil
	}
	p, err := packTextDecoded(text)
	if err != nil {
		return nil, err
	}
	return compress(p), nil
}

// packTextDecoded is EncodeBody's decoding path: it decodes text with encoding/json into Go
// values, makes the checks encoding/json does not (textcheck.go), converts the numbers and
// returns the packed form (msgpack's Encoder, map keys sorted), or EncodeBody's errors.
func packTextDecoded(text []byte) ([]byte, error) {
	if err := checkUTF8(text); err != nil {
		return nil, &FieldError{Field: "body", Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &FieldError{Field: "body", Err: fmt.Errorf("%w: %w", ErrInvalidBody, err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FieldError{Field: "body", Err: fmt.Errorf("%w: data after the object", ErrInvalidBody)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &FieldError{Field: "body", Err: ErrInvalidBody}
	}
	members, err := scanText(text)
	if err != nil {
		return nil, &FieldError{Field: "body", Err: err}
	}
	decoded, err := convertNumbers(obj)
	if err != nil {
		return nil, &FieldError{Field: "body", Err: fmt.Errorf("%w: %w", ErrInvalidBody, err)}
	}
	if decoded != members {
		if err = duplicateKey(text); err == nil {
			err = fmt.Errorf("%w: a key is given twice in one object", ErrLossyBody)
		}
		return nil, &FieldError{Field: "body", Err: err}
	}
	return packObject(obj)
}

// EncodeObject returns the stored form of an already decoded JSON object whose numbers are
// json.Number, float64 or Go integers (the shapes encoding/json produces).
func EncodeObject(obj map[string]any) (Body, error) {
	if _, err := convertNumbers(obj); err != nil {
		return nil, &FieldError{Field: "body", Err: fmt.Errorf("%w: %w", ErrInvalidBody, err)}
	}
	return pack(obj)
}

// pack returns the stored form of obj, whose numbers convertNumbers converted.
func pack(obj map[string]any) (Body, error) {
	p, err := packObject(obj)
	if err != nil {
		return nil, err
	}
	return compress(p), nil
}

// packObject returns the packed form of obj, whose numbers convertNumbers converted: msgpack's
// Encoder with map keys sorted.
func packObject(obj map[string]any) ([]byte, error) {
	var packed bytes.Buffer
	enc := msgpack.NewEncoder(&packed)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("cells: encode body: %w", err)
	}
	return packed.Bytes(), nil
}

func compress(p []byte) Body {
	var out bytes.Buffer
	out.Grow(len(p)/2 + 16)
	w := zlibWriters.Get().(*kzlib.Writer)
	w.Reset(&out)
	_, _ = w.Write(p) // writes to a bytes.Buffer do not fail
	_ = w.Close()
	zlibWriters.Put(w)
	return Body(out.Bytes())
}

// convertNumbers replaces every json.Number in v (in place) by int64, uint64, float64 or Number,
// and returns the number of members of the objects in v.
func convertNumbers(v any) (members int, err error) {
	switch t := v.(type) {
	case map[string]any:
		members = len(t)
		for k, e := range t {
			if n, ok := e.(json.Number); ok {
				c, err := convertNumber(n)
				if err != nil {
					return 0, err
				}
				t[k] = c
			} else if m, err := convertNumbers(e); err != nil {
				return 0, err
			} else {
				members += m
			}
		}
	case []any:
		for i, e := range t {
			if n, ok := e.(json.Number); ok {
				c, err := convertNumber(n)
				if err != nil {
					return 0, err
				}
				t[i] = c
			} else if m, err := convertNumbers(e); err != nil {
				return 0, err
			} else {
				members += m
			}
		}
	}
	return members, nil
}

func convertNumber(n json.Number) (any, error) {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	exact, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("bad number %q", s)
	}
	if exact.IsInt() { // 10.0 and 1e1 are the integer 10
		if n := exact.Num(); n.IsInt64() {
			return n.Int64(), nil
		} else if n.IsUint64() {
			return n.Uint64(), nil
		}
	}
	// A float64 only when the JSON text it reads back as (the shortest form that parses to it,
	// as encoding/json writes it) is the same number: 19000000076854775808 is a float64
	// exactly, but reads back as 19000000076854776000, so it is kept as a Number.
	f, err := strconv.ParseFloat(s, 64)
	if err == nil {
		held := new(big.Rat).SetFloat64(f)
		short, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if held != nil && held.Cmp(exact) == 0 && ok && short.Cmp(exact) == 0 {
			return f, nil
		}
	}
	num := Number(s)
	return &num, nil
}

// Packed returns the MessagePack bytes inside b (b decompressed). Two bodies hold the same JSON
// value exactly when their packed forms are equal.
func (b Body) Packed() ([]byte, error) {
	return b.inflate(make([]byte, 0, 4*len(b)))
}

// inflate appends the MessagePack bytes inside b to dst, with Packed's errors.
func (b Body) inflate(dst []byte) ([]byte, error) {
	f := inflaters.Get().(*inflater)
	defer f.release()
	f.src.Reset(b)
	if f.zr == nil {
		zr, err := zlib.NewReader(&f.src)
		if err != nil {
			return nil, fmt.Errorf("cells: body is not zlib data: %w", err)
		}
		f.zr = zr
	} else if err := f.zr.(zlib.Resetter).Reset(&f.src, nil); err != nil {
		return nil, fmt.Errorf("cells: body is not zlib data: %w", err)
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := f.zr.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cells: decompress body: %w", err)
		}
	}
	if err := f.zr.Close(); err != nil {
		return nil, fmt.Errorf("cells: decompress body: %w", err)
	}
	return dst, nil
}

// inflater is a zlib reader and its source, kept for reuse (zlib.Resetter): a new reader
// allocates its inflate state, about 40 KiB, which was two thirds of a read's allocations.
type inflater struct {
	src bytes.Reader
	zr  io.ReadCloser // nil until the first body
}

var inflaters = sync.Pool{New: func() any { return new(inflater) }}

// release drops f's reference to the body and returns f to the pool.
func (f *inflater) release() {
	f.src.Reset(nil)
	inflaters.Put(f)
}

// Object decodes b into a JSON object: map[string]any whose values are nil, bool, string,
// integers, float64, *Number, []any or map[string]any. Bytes that are not one MessagePack
// value, or declare more elements than they hold, or hold no object (nil), are an error,
// found before the decoder allocates anything for them.
func (b Body) Object() (map[string]any, error) {
	p, err := b.Packed()
	if err != nil {
		return nil, err
	}
	if err := checkPacked(p); err != nil {
		return nil, err
	}
	return unmarshalPacked(p)
}

// unmarshalPacked decodes the packed body p, checked by checkPacked, as Object does.
func unmarshalPacked(p []byte) (map[string]any, error) {
	var obj map[string]any
	if err := msgpack.Unmarshal(p, &obj); err != nil {
		return nil, fmt.Errorf("cells: decode body: %w", err)
	}
	if obj == nil {
		return nil, errors.New("cells: decode body: not a JSON object (nil)")
	}
	return obj, nil
}

// JSON returns b as JSON text with object keys in sorted order and no HTML escaping: what a
// json.Encoder with SetEscapeHTML(false) writes for b.Object(), without its newline. The errors
// are Object's, or encoding/json's for a value JSON cannot hold (NaN). The packed form is
// written as JSON directly (packtext.go); a body that transcoder does not write (see
// jsonDirect) takes the decoding path through Object's values, which gives the same text.
func (b Body) JSON() ([]byte, error) {
	w := packedTexts.Get().(*packedText)
	defer w.release()
	p, err := b.inflate(w.packed[:0])
	if err != nil {
		return nil, err
	}
	w.packed = p
	if err := checkPacked(p); err != nil {
		return nil, err
	}
	if out, ok := w.json(p); ok {
		return out, nil
	}
	return jsonDecoded(p)
}

// jsonDecoded is JSON's decoding path for the packed body p, checked by checkPacked: msgpack
// into Go values, then encoding/json.
func jsonDecoded(p []byte) ([]byte, error) {
	obj, err := unmarshalPacked(p)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("cells: body to JSON: %w", err)
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

// SameBody reports whether a and b hold the same JSON value. Equal stored bytes are the same
// value; otherwise the packed forms are compared, so bodies compressed by another version of the
// compressor still compare correctly.
func SameBody(a, b Body) (bool, error) {
	if bytes.Equal(a, b) {
		return true, nil
	}
	pa, err := a.Packed()
	if err != nil {
		return false, err
	}
	pb, err := b.Packed()
	if err != nil {
		return false, err
	}
	return bytes.Equal(pa, pb), nil
}
