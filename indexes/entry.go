package indexes

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// Entry is the index entry of one row in one index version.
//
// Values has one element per field of the definition, in the order of Definition.Fields: the
// typed value (see Convert) or nil (absent, null, not converted, or its column not seen yet).
// Values[0] is the shard field's value: the entry lives on the index shard of that value (see
// ShardOf) and it never changes once the entry exists. Refs maps each source column seen for the
// row to the ref key of the cell whose values the entry holds. Violation is 0, or the highest ref
// key of a cell of the shard field's column whose shard value differed from Values[0] (the
// update was not applied to the shard field; see the package doc).
type Entry struct {
	RowKey    uuid.UUID
	Values    []any
	Refs      map[string]int64
	Violation int64
}

// clone returns a deep copy of e (typed values are immutable and shared).
func (e Entry) clone() Entry {
	c := e
	c.Values = append([]any(nil), e.Values...)
	c.Refs = make(map[string]int64, len(e.Refs))
	for k, v := range e.Refs {
		c.Refs[k] = v
	}
	return c
}

// EncodeRefs returns the stored form of an entry's Refs: a MessagePack map of column key to ref
// key with the keys in sorted order, so equal maps give equal bytes. A nil map encodes as an
// empty map.
func EncodeRefs(refs map[string]int64) []byte {
	keys := make([]string, 0, len(refs))
	for k := range refs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	// Writes to a bytes.Buffer do not fail.
	_ = enc.EncodeMapLen(len(keys))
	for _, k := range keys {
		_ = enc.EncodeString(k)
		_ = enc.EncodeInt(refs[k])
	}
	return buf.Bytes()
}

// DecodeRefs decodes the output of EncodeRefs into a new map. Empty input gives an empty map.
// Malformed input, a negative ref key, a repeated key or trailing bytes give an error.
func DecodeRefs(b []byte) (map[string]int64, error) {
	refs := map[string]int64{}
	if len(b) == 0 {
		return refs, nil
	}
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, fmt.Errorf("indexes: decode refs: %w", err)
	}
	if n < 0 || n > r.Len() {
		return nil, fmt.Errorf("indexes: decode refs: bad map length %d", n)
	}
	for i := 0; i < n; i++ {
		k, err := dec.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("indexes: decode refs: key %d: %w", i, err)
		}
		v, err := dec.DecodeInt64()
		if err != nil {
			return nil, fmt.Errorf("indexes: decode refs: ref key of %q: %w", k, err)
		}
		if v < 0 {
			return nil, fmt.Errorf("indexes: decode refs: negative ref key %d for %q", v, k)
		}
		if _, dup := refs[k]; dup {
			return nil, fmt.Errorf("indexes: decode refs: repeated key %q", k)
		}
		refs[k] = v
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("indexes: decode refs: %d bytes after the map", r.Len())
	}
	return refs, nil
}

// Merge applies in, an update of one row's entry, to stored, the entry as stored (nil: none yet),
// and returns the new entry and whether it differs from *stored. It is the update rule that
// makes replays and reordering of source cells harmless.
//
// in carries, for each column C in in.Refs, the values of C's fields taken from the cell
// (C, in.Refs[C]) of the row, and in Values[0] the row's shard value; values of fields of other
// columns are ignored. If stored is nil, out is in with those ignored values set to nil, and
// changed is true. Otherwise out starts as stored and, for each column C of in.Refs whose ref
// key is newer than stored.Refs[C] (or C is not in stored.Refs), takes in's values of C's
// fields, except field 0, the shard field, which always keeps its stored value, and sets
// out.Refs[C] = in.Refs[C]. An equal or older ref key changes nothing for C. out.Violation is the
// larger of stored's and in's.
//
// Each column's values in out are thus those of the cell with the highest ref key seen, and
// Violation the highest seen: applying any set of updates in any order, with repeats, gives the
// same entry as applying them in ref key order, provided one (column, ref key) always carries
// the same values (cells are immutable) and the shard field's value is fixed for the row. out
// never shares a map or slice with stored or in; out.Values has len(fields) elements.
func Merge(fields []Field, stored *Entry, in Entry) (out Entry, changed bool) {
	if stored == nil {
		out = Entry{RowKey: in.RowKey, Values: make([]any, len(fields)), Violation: in.Violation,
			Refs: make(map[string]int64, len(in.Refs))}
		for c, r := range in.Refs {
			out.Refs[c] = r
		}
		for i, f := range fields {
			if i >= len(in.Values) {
				break
			}
			if _, ok := in.Refs[f.Column]; ok || i == 0 {
				out.Values[i] = in.Values[i]
			}
		}
		return out, true
	}
	out = stored.clone()
	if len(out.Values) != len(fields) {
		v := make([]any, len(fields))
		copy(v, out.Values)
		out.Values = v
	}
	for i, f := range fields {
		if i == 0 {
			continue
		}
		r, ok := in.Refs[f.Column]
		if !ok {
			continue
		}
		if old, seen := stored.Refs[f.Column]; seen && r <= old {
			continue
		}
		var v any
		if i < len(in.Values) {
			v = in.Values[i]
		}
		if !valueEqual(out.Values[i], v) {
			out.Values[i] = v
			changed = true
		}
	}
	for c, r := range in.Refs {
		if old, seen := stored.Refs[c]; !seen || r > old {
			out.Refs[c] = r
			changed = true
		}
	}
	if in.Violation > out.Violation {
		out.Violation = in.Violation
		changed = true
	}
	return out, changed
}

// valueEqual reports whether two typed values (or nils) are equal. Typed values are comparable
// Go values, so == is exact; the type is part of the equality.
func valueEqual(a, b any) bool {
	return a == b
}
