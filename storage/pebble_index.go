package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"
)

// Index tables of a pebble partition. The table of index name on a shard is a key range:
//
//	tagIndexDef + name + 0x00 + shard         -> the columns' signature: the table exists
//	tagIndex + name + 0x00 + shard + 0 + row  -> the entry (the primary key)
//	tagIndex + name + 0x00 + shard + 1 + f_0 + row        -> the entry (order by row key)
//	tagIndex + name + 0x00 + shard + c+1 + f_0 + f_c + row -> the entry (order by column c >= 1)
//
// with the fields in the order-preserving encoding of ordValue, so that each secondary range
// is the B-tree of the SQL engines' index on (f_0, f_c, row_key), read in order under a fixed
// f_0, and every entry is stored whole under each key, so a query reads no other key.

// pebbleDialect is the dialect of pebble partitions: only what the shared validation of index
// tables and queries uses.
func pebbleDialect() *dialect {
	return &dialect{
		engine:     EnginePebble,
		indexTable: func(string, int) string { return "" },
		indexDef:   pebbleIndexDef,
	}
}

// pebbleIndexDef is the stored definition of t's tables: one "name kind" line per column.
func pebbleIndexDef(t *IndexTable) string {
	lines := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		lines[i] = c.Name + " " + c.Kind.String()
	}
	return strings.Join(lines, "\n")
}

// indexDefKey is the definition key of index name on shard (shard < 0: the prefix of every
// shard's).
func (pp *pebblePart) indexDefKey(name string, shard int) []byte {
	k := append(append(pp.key(tagIndexDef, len(name)+3), name...), 0)
	if shard < 0 {
		return k
	}
	return appendShard(k, shard)
}

// indexBase is the prefix of the keys of index name's table on shard.
func (pp *pebblePart) indexBase(name string, shard int) []byte {
	return appendShard(append(append(pp.key(tagIndex, len(name)+3+1+16), name...), 0), shard)
}

// appendOrd appends v (a value of kind k, or nil) in an encoding whose bytewise order is the
// SQL order of the values, NULL first, and of which no encoding is a prefix of another.
func appendOrd(b []byte, k IndexKind, v any) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	switch k {
	case IndexUUID:
		u := v.(uuid.UUID)
		return append(b, u[:]...)
	case IndexString:
		return appendEsc(b, v.(string))
	case IndexFloat:
		f := v.(float64)
		if f == 0 {
			f = 0 // -0 equals 0
		}
		bits := math.Float64bits(f)
		if bits>>63 == 1 {
			bits = ^bits
		} else {
			bits |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(b, bits)
	case IndexBool:
		if v.(bool) {
			return append(b, 1)
		}
		return append(b, 0)
	}
	return appendI64(b, v.(int64))
}

// appendEntry appends the stored form of e: violation (8), refs (uvarint length and bytes),
// then per column a presence byte and the value (uuid 16 bytes, string uvarint length and
// bytes, int and datetime 8, float 8, bool 1).
func appendEntry(b []byte, t *IndexTable, e *IndexEntry) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(e.Violation))
	b = append(binary.AppendUvarint(b, uint64(len(e.Refs))), e.Refs...)
	for i, c := range t.Columns {
		v := e.Values[i]
		if v == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		switch c.Kind {
		case IndexUUID:
			u := v.(uuid.UUID)
			b = append(b, u[:]...)
		case IndexString:
			s := v.(string)
			b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
		case IndexFloat:
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v.(float64)))
		case IndexBool:
			if v.(bool) {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		default:
			b = binary.BigEndian.AppendUint64(b, uint64(v.(int64)))
		}
	}
	return b
}

// decodeEntry decodes what appendEntry wrote, for row key rk; the entry owns its memory.
func decodeEntry(t *IndexTable, rk uuid.UUID, b []byte) (IndexEntry, error) {
	e := IndexEntry{RowKey: rk, Values: make([]any, len(t.Columns))}
	if len(b) < 8 {
		return e, errBadValue
	}
	e.Violation = int64(binary.BigEndian.Uint64(b))
	b = b[8:]
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return e, errBadValue
	}
	e.Refs = bytes.Clone(b[w : w+int(n)])
	b = b[w+int(n):]
	for i, c := range t.Columns {
		if len(b) < 1 {
			return e, errBadValue
		}
		present := b[0] == 1
		b = b[1:]
		if !present {
			continue
		}
		size := 8
		switch c.Kind {
		case IndexUUID:
			size = 16
		case IndexBool:
			size = 1
		case IndexString:
			n, w := binary.Uvarint(b)
			if w <= 0 || uint64(len(b)-w) < n {
				return e, errBadValue
			}
			e.Values[i] = string(b[w : w+int(n)])
			b = b[w+int(n):]
			continue
		}
		if len(b) < size {
			return e, errBadValue
		}
		switch c.Kind {
		case IndexUUID:
			e.Values[i] = uuid.UUID(b[:16])
		case IndexBool:
			e.Values[i] = b[0] == 1
		case IndexFloat:
			e.Values[i] = math.Float64frombits(binary.BigEndian.Uint64(b))
		default:
			e.Values[i] = int64(binary.BigEndian.Uint64(b))
		}
		b = b[size:]
	}
	return e, nil
}

// orders returns the secondary orders of t: 1 (row key under f_0), then c+1 for every column
// c >= 1.
func orders(t *IndexTable) int { return len(t.Columns) }

// orderOf is the secondary order serving OrderBy: 1 for -1 and 0, else OrderBy+1.
func orderOf(orderBy int) byte {
	if orderBy <= 0 {
		return 1
	}
	return byte(orderBy + 1)
}

// entryKeys returns the keys of e in t's table under base: the primary key, then one per order.
func entryKeys(base []byte, t *IndexTable, e *IndexEntry) [][]byte {
	keys := make([][]byte, 0, 1+orders(t))
	keys = append(keys, append(append(bytes.Clone(base), 0), e.RowKey[:]...))
	f0 := appendOrd(nil, t.Columns[0].Kind, e.Values[0])
	for o := 1; o <= orders(t); o++ {
		k := append(append(bytes.Clone(base), byte(o)), f0...)
		if o > 1 {
			k = appendOrd(k, t.Columns[o-1].Kind, e.Values[o-1])
		}
		keys = append(keys, append(k, e.RowKey[:]...))
	}
	return keys
}

// pebbleIndexTables is indexTables on pebble: the definition keys of the partition, within the
// shard range.
func (pp *pebblePart) indexTables(r reader, shards func(int) bool) (map[string][]int, error) {
	pre := pp.key(tagIndexDef, 0)
	it, err := prefixIter(r, pre)
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for it.First(); it.Valid(); it.Next() {
		rest := it.Key()[len(pre):]
		i := bytes.IndexByte(rest, 0)
		if i < 0 || len(rest) != i+3 {
			continue
		}
		s := int(binary.BigEndian.Uint16(rest[i+1:]))
		if shards(s) {
			out[string(rest[:i])] = append(out[string(rest[:i])], s)
		}
	}
	return out, errors.Join(it.Error(), it.Close())
}

// pebbleIndexDefs is indexDefs on pebble.
func (pp *pebblePart) indexDefs(r reader, name string, shards []int) (map[int]string, error) {
	out := map[int]string{}
	for _, s := range shards {
		v, ok, err := getCopy(r, pp.indexDefKey(name, s))
		if err != nil {
			return nil, err
		}
		if ok {
			out[s] = string(v)
		}
	}
	return out, nil
}

// pebbleCreateIndex writes the definitions of t's tables on shards.
func (p *PartitionStore) pebbleCreateIndex(t *IndexTable, shards []int) error {
	b := p.pb.db.NewBatch()
	defer b.Close()
	def := []byte(pebbleIndexDef(t))
	for _, s := range shards {
		if err := b.Set(p.pb.indexDefKey(t.Name, s), def, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

// pebbleDropIndex deletes the tables of index name (definitions and entries) on every shard of
// the partition's range (a generation shared since a split holds other partitions' shards).
func (p *PartitionStore) pebbleDropIndex(name string) error {
	b := p.pb.db.NewBatch()
	defer b.Close()
	r := p.Shards()
	if r.Last < r.First {
		return nil
	}
	if err := b.DeleteRange(p.pb.indexDefKey(name, r.First), p.pb.indexDefKey(name, r.Last+1), nil); err != nil {
		return err
	}
	if err := b.DeleteRange(p.pb.indexBase(name, r.First), p.pb.indexBase(name, r.Last+1), nil); err != nil {
		return err
	}
	return b.Commit(pebble.NoSync)
}

// pebbleIndexExists reports whether t's table exists on shard, as the transaction sees it.
func (tx *WriteTx) pebbleIndexExists(name string, shard int) (bool, error) {
	if st := tx.p.indexes[name]; st != nil && st.shards[shard] {
		return true, nil
	}
	return exists(tx.b, tx.p.pb.indexDefKey(name, shard))
}

// noIndexTable is the error of a write to an index table that does not exist.
func noIndexTable(name string, shard int) error {
	return fmt.Errorf("storage: index %s of shard %d: %w", name, shard, ErrNoIndexTable)
}

// pebbleLookupIndex is LookupIndex on pebble.
func (tx *WriteTx) pebbleLookupIndex(shard int, t *IndexTable, rowKeys []uuid.UUID) (map[uuid.UUID]IndexEntry, error) {
	if len(rowKeys) == 0 {
		return map[uuid.UUID]IndexEntry{}, nil
	}
	if ok, err := tx.pebbleIndexExists(t.Name, shard); err != nil || !ok {
		return nil, errors.Join(err, noIndexTable(t.Name, shard))
	}
	base := append(tx.p.pb.indexBase(t.Name, shard), 0)
	out := make(map[uuid.UUID]IndexEntry, len(rowKeys))
	for _, rk := range rowKeys {
		v, ok, err := getCopy(tx.b, append(bytes.Clone(base), rk[:]...))
		if err != nil {
			return nil, tx.p.fail(fmt.Sprintf("lookup in index %s of shard %d", t.Name, shard), err)
		}
		if !ok {
			continue
		}
		e, err := decodeEntry(t, rk, v)
		if err != nil {
			return nil, tx.p.fail(fmt.Sprintf("lookup in index %s of shard %d", t.Name, shard), err)
		}
		out[rk] = e
	}
	return out, nil
}

// pebbleUpsertIndex is UpsertIndex on pebble.
func (tx *WriteTx) pebbleUpsertIndex(shard int, t *IndexTable, entries []IndexEntry) error {
	if len(entries) == 0 {
		return nil
	}
	if ok, err := tx.pebbleIndexExists(t.Name, shard); err != nil || !ok {
		return errors.Join(err, noIndexTable(t.Name, shard))
	}
	err := tx.p.pb.upsertEntries(tx.b, shard, t, entries, false)
	if err != nil && !errors.Is(err, ErrIndexValue) {
		return tx.p.fail(fmt.Sprintf("write index %s of shard %d", t.Name, shard), err)
	}
	return err
}

// upsertEntries writes entries into t's table on shard through w, replacing the stored entry
// of a row key (with insert, Restore's, refusing it with ErrDuplicate). Every value is checked
// first (ErrIndexValue, nothing written).
func (pp *pebblePart) upsertEntries(w writer, shard int, t *IndexTable, entries []IndexEntry, insert bool) error {
	var args []any
	for i := range entries {
		var err error
		if args, err = pebbleValues.entryArgs(args[:0], t, &entries[i]); err != nil {
			return err
		}
	}
	base := pp.indexBase(t.Name, shard)
	var v []byte
	for i := range entries {
		e := &entries[i]
		keys := entryKeys(base, t, e)
		old, ok, err := getCopy(w, keys[0])
		if err != nil {
			return err
		}
		if ok && insert {
			return fmt.Errorf("storage: insert into index %s of shard %d: %w: row key %s", t.Name, shard, ErrDuplicate, e.RowKey)
		}
		if ok {
			prev, err := decodeEntry(t, e.RowKey, old)
			if err != nil {
				return err
			}
			for _, k := range entryKeys(base, t, &prev)[1:] {
				if err := w.Delete(k, nil); err != nil {
					return err
				}
			}
		}
		v = appendEntry(v[:0], t, e)
		for _, k := range keys {
			if err := w.Set(k, v, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// pebbleValues checks index values (dialect.entryArgs) for pebble partitions.
var pebbleValues = pebbleDialect()

// writer is what index writes go through: a write transaction's indexed batch, or Restore's.
type writer interface {
	reader
	Set(key, value []byte, _ *pebble.WriteOptions) error
	Delete(key []byte, _ *pebble.WriteOptions) error
}

// pebbleClearIndex is ClearIndex on pebble: one range deletion.
func (tx *WriteTx) pebbleClearIndex(shard int, t *IndexTable) error {
	if ok, err := tx.pebbleIndexExists(t.Name, shard); err != nil || !ok {
		return errors.Join(err, noIndexTable(t.Name, shard))
	}
	base := tx.p.pb.indexBase(t.Name, shard)
	end, _ := prefixEnd(string(base))
	return tx.b.DeleteRange(base, end, nil)
}

// pebbleDeleteIndexEntries is DeleteIndexEntries on pebble.
func (tx *WriteTx) pebbleDeleteIndexEntries(name string, rowKeys []uuid.UUID) (int, error) {
	tables, err := tx.p.pb.indexTables(tx.b, tx.p.Shards().Contains)
	if err != nil {
		return 0, tx.p.fail("list index tables", err)
	}
	deleted := 0
	for _, shard := range tables[name] {
		def, ok, err := getCopy(tx.b, tx.p.pb.indexDefKey(name, shard))
		if err != nil || !ok {
			return 0, tx.p.fail(fmt.Sprintf("delete entries of index %s in shard %d", name, shard), errors.Join(err, errBadValue))
		}
		t, err := parseIndexDef(name, string(def))
		if err != nil {
			return 0, tx.p.fail(fmt.Sprintf("delete entries of index %s in shard %d", name, shard), err)
		}
		base := tx.p.pb.indexBase(name, shard)
		for _, rk := range rowKeys {
			v, ok, err := getCopy(tx.b, append(append(bytes.Clone(base), 0), rk[:]...))
			if err != nil {
				return 0, tx.p.fail(fmt.Sprintf("delete entries of index %s in shard %d", name, shard), err)
			}
			if !ok {
				continue
			}
			e, err := decodeEntry(&t, rk, v)
			if err != nil {
				return 0, tx.p.fail(fmt.Sprintf("delete entries of index %s in shard %d", name, shard), err)
			}
			for _, k := range entryKeys(base, &t, &e) {
				if err := tx.b.Delete(k, nil); err != nil {
					return 0, err
				}
			}
			deleted++
		}
	}
	return deleted, nil
}

// parseIndexDef reads back a table definition pebbleIndexDef wrote.
func parseIndexDef(name, def string) (IndexTable, error) {
	t := IndexTable{Name: name}
	for _, line := range strings.Split(def, "\n") {
		col, kind, ok := strings.Cut(line, " ")
		k := kindOf(kind)
		if !ok || k == 0 {
			return t, fmt.Errorf("storage: index %s: malformed definition line %q", name, line)
		}
		t.Columns = append(t.Columns, IndexColumn{Name: col, Kind: k})
	}
	return t, t.Validate()
}

// kindOf is the IndexKind of its String(), 0 for none.
func kindOf(s string) IndexKind {
	for k := IndexUUID; k <= IndexDatetime; k++ {
		if k.String() == s {
			return k
		}
	}
	return 0
}

// pebbleQueryIndex is QueryIndex on pebble, q validated: a walk of the secondary order of
// q.OrderBy under f_0 = ShardValue, from the cursor, with the conditions checked on each entry.
func (p *PartitionStore) pebbleQueryIndex(shard int, t *IndexTable, q *IndexQuery) ([]IndexEntry, error) {
	op := fmt.Sprintf("query index %s of shard %d", t.Name, shard)
	defer p.pb.rlock()()
	base := append(p.pb.indexBase(t.Name, shard), orderOf(q.OrderBy))
	pre := appendOrd(bytes.Clone(base), t.Columns[0].Kind, q.ShardValue)
	it, err := prefixIter(p.pb.db, pre)
	if err != nil {
		return nil, p.fail(op, err)
	}
	defer it.Close()
	var ok bool
	switch {
	case q.After != nil:
		// The cursor's key in the whole order (seeks outside pre are clamped to it).
		var at []byte
		switch {
		case q.OrderBy == 0:
			at = appendOrd(bytes.Clone(base), t.Columns[0].Kind, q.After.Value)
		case q.OrderBy > 0:
			at = appendOrd(bytes.Clone(pre), t.Columns[q.OrderBy].Kind, q.After.Value)
		default:
			at = bytes.Clone(pre)
		}
		at = append(at, q.After.RowKey[:]...)
		if q.Desc {
			ok = it.SeekLT(at)
		} else if ok = it.SeekGE(at); ok && bytes.Equal(it.Key(), at) {
			ok = it.Next()
		}
	case q.Desc:
		ok = it.Last()
	default:
		ok = it.First()
	}
	var out []IndexEntry
	for ; ok && len(out) < q.Limit; ok = step(it, q.Desc) {
		k := it.Key()
		if len(k) < 16 {
			return nil, p.fail(op, errBadValue)
		}
		e, err := decodeEntry(t, uuid.UUID(k[len(k)-16:]), it.Value())
		if err != nil {
			return nil, p.fail(op, err)
		}
		if matches(t, &e, q.Where) {
			out = append(out, e)
		}
	}
	if err := it.Error(); err != nil {
		return nil, p.fail(op, err)
	}
	return out, nil
}

// matches reports whether e meets every condition, as SQL decides: a NULL field meets none.
func matches(t *IndexTable, e *IndexEntry, where []IndexCond) bool {
	for _, c := range where {
		v := e.Values[c.Column]
		if v == nil {
			return false
		}
		k := t.Columns[c.Column].Kind
		if c.Op == "in" {
			if !slices.ContainsFunc(c.Values, func(w any) bool { return compareValues(k, v, w) == 0 }) {
				return false
			}
			continue
		}
		r := compareValues(k, v, c.Values[0])
		var ok bool
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
		if !ok {
			return false
		}
	}
	return true
}

// compareValues compares two non-nil values of kind k as SQL does.
func compareValues(k IndexKind, a, b any) int {
	switch k {
	case IndexUUID:
		x, y := a.(uuid.UUID), b.(uuid.UUID)
		return bytes.Compare(x[:], y[:])
	case IndexString:
		return strings.Compare(a.(string), b.(string))
	case IndexFloat:
		return cmp.Compare(a.(float64), b.(float64))
	case IndexBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case y:
			return -1
		}
		return 1
	}
	return cmp.Compare(a.(int64), b.(int64))
}

// pebbleIndexStats is IndexStats on pebble: a walk of each shard's primary keys.
func (p *PartitionStore) pebbleIndexStats(t *IndexTable) (entries, violations int64, err error) {
	err = p.withIter("index stats", func(it *pebble.Iterator) error {
		tables, err := p.pb.indexTables(p.pb.db, p.Shards().Contains)
		if err != nil {
			return p.fail("list index tables", err)
		}
		for _, s := range tables[t.Name] {
			pre := append(p.pb.indexBase(t.Name, s), 0)
			for ok := it.SeekGE(pre); ok && bytes.HasPrefix(it.Key(), pre); ok = it.Next() {
				entries++
				if v := it.Value(); len(v) >= 8 && binary.BigEndian.Uint64(v) != 0 {
					violations++
				}
			}
			if err := it.Error(); err != nil {
				return p.fail(fmt.Sprintf("count index %s of shard %d", t.Name, s), err)
			}
		}
		return nil
	})
	return entries, violations, err
}

// scanIndexIn calls fn with every entry of t's table on shard in r, in row key order.
func (pp *pebblePart) scanIndexIn(r reader, shard int, t *IndexTable, fn func(IndexEntry) error) error {
	pre := append(pp.indexBase(t.Name, shard), 0)
	it, err := prefixIter(r, pre)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(pre)+16 {
			return errBadValue
		}
		e, err := decodeEntry(t, uuid.UUID(k[len(pre):]), it.Value())
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return it.Error()
}
