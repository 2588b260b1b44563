package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
)

// The cells of a pebble partition: per cell, the shard's log entry (tagLog, shard, added_id)
// holding the whole cell, and its unique key (tagCell, shard, row key, column, ref key) holding
// its added_id, the two B-trees of the SQL entity table as two key ranges.

// appendCellKey appends the unique key of k in shard (after the data prefix and tagCell).
func appendCellKey(b []byte, shard int, k *cells.Key) []byte {
	b = append(appendShard(b, shard), k.RowKey[:]...)
	return appendI64(appendEsc(b, k.ColumnKey), k.RefKey)
}

// cellKey is the unique key of k in shard.
func (pp *pebblePart) cellKey(shard int, k *cells.Key) []byte {
	return appendCellKey(pp.key(tagCell, 2+16+len(k.ColumnKey)+2+8), shard, k)
}

// rowPrefix is the prefix of the unique keys of rowKey in shard; with column, of its column.
func (pp *pebblePart) rowPrefix(shard int, rowKey uuid.UUID, column *string) []byte {
	b := append(appendShard(pp.key(tagCell, 2+16+2+cells.MaxColumnKeyLen), shard), rowKey[:]...)
	if column != nil {
		b = appendEsc(b, *column)
	}
	return b
}

// logKey is the log entry of added_id in shard.
func (pp *pebblePart) logKey(shard int, added int64) []byte {
	return appendI64(appendShard(pp.key(tagLog, 10), shard), added)
}

// shardLog is the prefix of shard's log entries.
func (pp *pebblePart) shardLog(shard int) []byte { return appendShard(pp.key(tagLog, 2), shard) }

// logOriginFlag is added to the column's length in a log entry's value when the cell's origin
// follows the column. A column key is at most cells.MaxColumnKeyLen (64) bytes, so a length
// with the flag never was a column's length: values written before origins existed, with none,
// decode as before, with Origin "".
const logOriginFlag = 1 << 28

// appendLogValue appends the value of c's log entry: row key (16), ref key (8), created_at in
// microseconds (8), the column's length (uvarint; plus logOriginFlag when c has an origin) and
// bytes, when c has an origin its length (1 byte) and bytes, then the body. A cell without an
// origin is encoded as before origins existed.
func appendLogValue(b []byte, c *cells.Cell) []byte {
	b = append(b, c.RowKey[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.RefKey))
	b = binary.BigEndian.AppendUint64(b, uint64(c.CreatedAt.UnixMicro()))
	if c.Origin == "" {
		b = binary.AppendUvarint(b, uint64(len(c.ColumnKey)))
		return append(append(b, c.ColumnKey...), c.Body...)
	}
	b = binary.AppendUvarint(b, uint64(len(c.ColumnKey))+logOriginFlag)
	b = append(append(b, c.ColumnKey...), byte(len(c.Origin)))
	return append(append(b, c.Origin...), c.Body...)
}

// errBadValue: a stored value that does not decode (corruption).
var errBadValue = errors.New("storage: malformed value in the pebble store")

// logFields splits a log entry's value after its fixed 32 bytes into the column, the origin
// and the body, without copying.
func logFields(v []byte) (col, origin, body []byte, err error) {
	if len(v) < 32 {
		return nil, nil, nil, errBadValue
	}
	n, w := binary.Uvarint(v[32:])
	if w <= 0 {
		return nil, nil, nil, errBadValue
	}
	hasOrigin := n >= logOriginFlag
	if hasOrigin {
		n -= logOriginFlag
	}
	rest := v[32+w:]
	if uint64(len(rest)) < n {
		return nil, nil, nil, errBadValue
	}
	col, rest = rest[:n], rest[n:]
	if hasOrigin {
		if len(rest) < 1 || len(rest)-1 < int(rest[0]) {
			return nil, nil, nil, errBadValue
		}
		origin, rest = rest[1:1+int(rest[0])], rest[1+int(rest[0]):]
	}
	return col, origin, rest, nil
}

// logColumn returns the column of a log entry's value without decoding the rest.
func logColumn(v []byte) ([]byte, error) {
	col, _, _, err := logFields(v)
	return col, err
}

// logMicros returns the created_at of a log entry's value, in microseconds.
func logMicros(v []byte) (int64, error) {
	if len(v) < 32 {
		return 0, errBadValue
	}
	return int64(binary.BigEndian.Uint64(v[24:32])), nil
}

// decodeLog decodes the log entry of key k and value v into a cell that owns its memory.
func decodeLog(k, v []byte) (cells.Cell, error) {
	col, origin, body, err := logFields(v)
	if err != nil || len(k) < 8 {
		return cells.Cell{}, errBadValue
	}
	var c cells.Cell
	copy(c.RowKey[:], v[:16])
	c.RefKey = int64(binary.BigEndian.Uint64(v[16:24]))
	c.CreatedAt = time.UnixMicro(int64(binary.BigEndian.Uint64(v[24:32]))).UTC()
	c.ColumnKey = string(col)
	c.Origin = string(origin)
	c.Body = cells.Body(bytes.Clone(body))
	c.AddedID = readI64(k[len(k)-8:])
	return c, nil
}

// cellAt reads the cell of shard whose added_id is added through it (an iterator over the
// partition); false when its log entry is missing.
func (pp *pebblePart) cellAt(it *pebble.Iterator, shard int, added int64) (cells.Cell, bool, error) {
	k := pp.logKey(shard, added)
	if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) {
		return cells.Cell{}, false, it.Error()
	}
	c, err := decodeLog(it.Key(), it.Value())
	return c, err == nil, err
}

// iter returns an iterator of r over the whole partition: bounded by its generations (state
// and shards', which a split may make two; every read through it seeks a key of one of them).
// The caller holds pp.mu shared or the writer token.
func (pp *pebblePart) iter(r reader) (*pebble.Iterator, error) {
	if bytes.Equal(pp.prefix, pp.cellPrefix) {
		return prefixIter(r, pp.prefix)
	}
	lo, hi := pp.prefix, pp.cellPrefix
	if bytes.Compare(lo, hi) > 0 {
		lo, hi = hi, lo
	}
	end, _ := prefixEnd(string(hi))
	return r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: end})
}

// latestAt positions it at the unique key of the highest ref key under colPrefix and returns
// the cell's added_id and ref key; false when the column has no cell.
func latestAt(it *pebble.Iterator, colPrefix []byte) (added, ref int64, ok bool) {
	end, _ := prefixEnd(string(colPrefix))
	if !it.SeekLT(end) || !bytes.HasPrefix(it.Key(), colPrefix) || len(it.Key()) != len(colPrefix)+8 || len(it.Value()) != 8 {
		return 0, 0, false
	}
	return readI64(it.Value()), readI64(it.Key()[len(colPrefix):]), true
}

// getCell reads the cell of key (latest: of its row and column, the highest ref key) through
// it; false when there is none.
func (pp *pebblePart) getCell(it *pebble.Iterator, shard int, key cells.Key, latest bool) (cells.Cell, bool, error) {
	var added int64
	if latest {
		var ok bool
		if added, _, ok = latestAt(it, pp.rowPrefix(shard, key.RowKey, &key.ColumnKey)); !ok {
			return cells.Cell{}, false, it.Error()
		}
	} else {
		k := pp.cellKey(shard, &key)
		if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) || len(it.Value()) != 8 {
			return cells.Cell{}, false, it.Error()
		}
		added = readI64(it.Value())
	}
	return pp.cellAt(it, shard, added)
}

// withIter runs fn with an iterator over p's committed data, holding pp.mu shared.
func (p *PartitionStore) withIter(op string, fn func(it *pebble.Iterator) error) error {
	pp := p.pb
	defer pp.rlock()()
	if p.closed.Load() {
		return ErrClosed
	}
	it, err := pp.iter(pp.db)
	if err != nil {
		return p.fail(op, err)
	}
	err = fn(it)
	if cerr := it.Close(); err == nil && cerr != nil {
		err = p.fail(op, cerr)
	}
	return err
}

// pebbleGet is GetCell and GetLatest on pebble.
func (p *PartitionStore) pebbleGet(shard int, key cells.Key, latest bool) (cells.Cell, error) {
	var c cells.Cell
	err := p.withIter("get cell", func(it *pebble.Iterator) error {
		var ok bool
		var err error
		if c, ok, err = p.pb.getCell(it, shard, key, latest); err != nil {
			return p.fail(fmt.Sprintf("get cell %s in shard %d", key, shard), err)
		}
		if !ok {
			return ErrNotFound
		}
		return nil
	})
	return c, err
}

// pebbleGetSnapshot is GetSnapshot on pebble: one iterator is one consistent view.
func (p *PartitionStore) pebbleGetSnapshot(keys []SnapshotKey) (out []cells.Cell, found []bool, applied AppliedState, err error) {
	out, found = make([]cells.Cell, len(keys)), make([]bool, len(keys))
	err = p.withIter("snapshot read", func(it *pebble.Iterator) error {
		k := p.pb.key(tagApplied, 0)
		if it.SeekGE(k) && bytes.Equal(it.Key(), k) {
			v := it.Value()
			if len(v) != 24 {
				return p.fail("snapshot read: applied state", errBadValue)
			}
			applied = AppliedState{Index: binary.BigEndian.Uint64(v), Term: binary.BigEndian.Uint64(v[8:])}
		}
		for i, sk := range keys {
			c, ok, err := p.pb.getCell(it, sk.Shard, sk.Key, sk.Latest)
			if err != nil {
				return p.fail(fmt.Sprintf("snapshot read of %s in shard %d", sk.Key, sk.Shard), err)
			}
			out[i], found[i] = c, ok
		}
		return nil
	})
	if err != nil {
		return nil, nil, AppliedState{}, err
	}
	return out, found, applied, nil
}

// pebbleGetRow is GetRow on pebble: the unique keys of the row, the last of each column.
func (p *PartitionStore) pebbleGetRow(shard int, rowKey uuid.UUID) ([]cells.Cell, error) {
	var out []cells.Cell
	err := p.withIter("get row", func(it *pebble.Iterator) error {
		pre := p.pb.rowPrefix(shard, rowKey, nil)
		type latest struct {
			col   string
			added int64
		}
		var cols []latest
		for ok := it.SeekGE(pre); ok && bytes.HasPrefix(it.Key(), pre); ok = it.Next() {
			col, rest, err := readEsc(it.Key()[len(pre):])
			if err != nil || len(rest) != 8 || len(it.Value()) != 8 {
				return p.fail(fmt.Sprintf("get row %s in shard %d", rowKey, shard), errBadValue)
			}
			if n := len(cols); n > 0 && cols[n-1].col == col {
				cols[n-1].added = readI64(it.Value())
			} else {
				cols = append(cols, latest{col, readI64(it.Value())})
			}
		}
		if err := it.Error(); err != nil {
			return p.fail(fmt.Sprintf("get row %s in shard %d", rowKey, shard), err)
		}
		for _, l := range cols {
			if l.col == cells.TombstoneColumn {
				continue
			}
			c, ok, err := p.pb.cellAt(it, shard, l.added)
			if err != nil {
				return p.fail(fmt.Sprintf("get row %s in shard %d", rowKey, shard), err)
			}
			if ok {
				out = append(out, c)
			}
		}
		return nil
	})
	return out, err
}

// pebbleVersions is GetVersions on pebble.
func (p *PartitionStore) pebbleVersions(shard int, rowKey uuid.UUID, col string, from *int64, limit int, desc bool) ([]cells.Cell, error) {
	var out []cells.Cell
	op := fmt.Sprintf("versions of %s/%s in shard %d", rowKey, col, shard)
	err := p.withIter(op, func(it *pebble.Iterator) error {
		pre := p.pb.rowPrefix(shard, rowKey, &col)
		var ok bool
		switch {
		case !desc && from == nil:
			ok = it.SeekGE(pre)
		case !desc:
			ok = it.SeekGE(appendI64(bytes.Clone(pre), *from))
		case from == nil || *from == math.MaxInt64:
			end, _ := prefixEnd(string(pre))
			ok = it.SeekLT(end)
		default:
			ok = it.SeekLT(appendI64(bytes.Clone(pre), *from+1))
		}
		var added []int64
		for ; ok && bytes.HasPrefix(it.Key(), pre) && len(added) < limit; ok = step(it, desc) {
			if len(it.Value()) != 8 {
				return p.fail(op, errBadValue)
			}
			added = append(added, readI64(it.Value()))
		}
		if err := it.Error(); err != nil {
			return p.fail(op, err)
		}
		for _, a := range added {
			c, ok, err := p.pb.cellAt(it, shard, a)
			if err != nil {
				return p.fail(op, err)
			}
			if ok {
				out = append(out, c)
			}
		}
		return nil
	})
	return out, err
}

// step moves it forward, or backward with desc.
func step(it *pebble.Iterator, desc bool) bool {
	if desc {
		return it.Prev()
	}
	return it.Next()
}

// maxAddedAt returns the highest added_id of shard's log through it (0 when empty).
func (pp *pebblePart) maxAddedAt(it *pebble.Iterator, shard int) int64 {
	pre := pp.shardLog(shard)
	end, _ := prefixEnd(string(pre))
	if !it.SeekLT(end) || !bytes.HasPrefix(it.Key(), pre) || len(it.Key()) != len(pre)+8 {
		return 0
	}
	return readI64(it.Key()[len(pre):])
}

// scanLog calls fn with each log entry of shard with after < added_id <= high, in order,
// until fn returns false. The key and value are the iterator's: valid until fn returns.
func (pp *pebblePart) scanLog(it *pebble.Iterator, shard int, after, high int64, fn func(k, v []byte) (bool, error)) error {
	if after >= high {
		return nil
	}
	pre := pp.shardLog(shard)
	for ok := it.SeekGE(pp.logKey(shard, after+1)); ok && bytes.HasPrefix(it.Key(), pre); ok = it.Next() {
		k := it.Key()
		if len(k) != len(pre)+8 {
			return errBadValue
		}
		if readI64(k[len(pre):]) > high {
			break
		}
		more, err := fn(k, it.Value())
		if err != nil || !more {
			return err
		}
	}
	return it.Error()
}

// pebbleScanShard is ScanShard on pebble.
func (p *PartitionStore) pebbleScanShard(shard int, after int64, limit int) ([]cells.Cell, error) {
	var out []cells.Cell
	op := fmt.Sprintf("scan shard %d", shard)
	err := p.withIter(op, func(it *pebble.Iterator) error {
		err := p.pb.scanLog(it, shard, after, math.MaxInt64, func(k, v []byte) (bool, error) {
			c, err := decodeLog(k, v)
			out = append(out, c)
			return len(out) < limit, err
		})
		if err != nil {
			return p.fail(op, err)
		}
		return nil
	})
	return out, err
}

// pebbleReadLog is ReadLog on pebble: the highest added_id and the cells up to it are read
// through one iterator, one view.
func (p *PartitionStore) pebbleReadLog(shard int, after int64, column string, limit int) (cs []cells.Cell, next, high int64, err error) {
	op := fmt.Sprintf("read log of shard %d after %d", shard, after)
	err = p.withIter(op, func(it *pebble.Iterator) error {
		high = p.pb.maxAddedAt(it, shard)
		err := p.pb.scanLog(it, shard, after, high, func(k, v []byte) (bool, error) {
			if column != "" {
				col, err := logColumn(v)
				if err != nil {
					return false, err
				}
				if string(col) != column && string(col) != cells.TombstoneColumn {
					return true, nil
				}
			}
			c, err := decodeLog(k, v)
			cs = append(cs, c)
			return len(cs) < limit, err
		})
		if err != nil {
			return p.fail(op, err)
		}
		return it.Error()
	})
	if err != nil {
		return nil, 0, 0, err
	}
	if len(cs) == limit {
		return cs, cs[len(cs)-1].AddedID, high, nil
	}
	return cs, max(after, high), high, nil
}

// pebbleLocationAt is LocationAt on pebble: a scan of the log up to the first cell at or after
// t.
func (p *PartitionStore) pebbleLocationAt(shard int, t time.Time) (int64, error) {
	var loc int64
	op := fmt.Sprintf("location at %s in shard %d", t.Format(time.RFC3339Nano), shard)
	err := p.withIter(op, func(it *pebble.Iterator) error {
		high := p.pb.maxAddedAt(it, shard)
		loc = high
		micros := t.UnixMicro()
		err := p.pb.scanLog(it, shard, math.MinInt64, high, func(k, v []byte) (bool, error) {
			m, err := logMicros(v)
			if err != nil {
				return false, err
			}
			if m >= micros {
				loc = readI64(k[len(k)-8:]) - 1
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return p.fail(op, err)
		}
		return nil
	})
	return loc, err
}

// pebbleMaxAddedID is MaxAddedID on pebble.
func (p *PartitionStore) pebbleMaxAddedID(shard int) (int64, error) {
	var high int64
	err := p.withIter("max added_id", func(it *pebble.Iterator) error {
		high = p.pb.maxAddedAt(it, shard)
		return it.Error()
	})
	return high, err
}

// pebbleFirstCells is FirstCells on pebble: per row key, the versions of column, the lowest
// added_id kept.
func (p *PartitionStore) pebbleFirstCells(shard int, column string, rowKeys []uuid.UUID) (map[uuid.UUID]cells.Cell, error) {
	out := make(map[uuid.UUID]cells.Cell, len(rowKeys))
	op := fmt.Sprintf("first cells of column %s in shard %d", column, shard)
	err := p.withIter(op, func(it *pebble.Iterator) error {
		for _, rk := range rowKeys {
			pre := p.pb.rowPrefix(shard, rk, &column)
			first := int64(math.MaxInt64)
			found := false
			for ok := it.SeekGE(pre); ok && bytes.HasPrefix(it.Key(), pre); ok = it.Next() {
				if len(it.Value()) != 8 {
					return p.fail(op, errBadValue)
				}
				first, found = min(first, readI64(it.Value())), true
			}
			if err := it.Error(); err != nil {
				return p.fail(op, err)
			}
			if !found {
				continue
			}
			c, ok, err := p.pb.cellAt(it, shard, first)
			if err != nil {
				return p.fail(op, err)
			}
			if ok {
				out[rk] = c
			}
		}
		return nil
	})
	return out, err
}

// pebbleApplied is Applied on pebble.
func (p *PartitionStore) pebbleApplied() (AppliedState, error) {
	defer p.pb.rlock()()
	a, _, err := p.pb.applied(p.pb.db)
	if err != nil {
		return AppliedState{}, p.fail("read applied state", err)
	}
	return a, nil
}

// pebbleLookup is Lookup on pebble: a point read of each unique key (bloom filters answer
// most absent keys), then of the log entry of each one found, through the batch.
func (tx *WriteTx) pebbleLookup(shard int, keys []cells.Key) (map[cells.Key]Existing, error) {
	pp := tx.p.pb
	out := make(map[cells.Key]Existing, len(keys))
	for i := range keys {
		tx.kbuf = appendCellKey(append(append(tx.kbuf[:0], pp.cellPrefix...), tagCell), shard, &keys[i])
		v, ok, err := getCopy(tx.b, tx.kbuf)
		if err != nil {
			return nil, tx.p.fail(fmt.Sprintf("lookup %s in shard %d", keys[i], shard), err)
		}
		if !ok {
			continue
		}
		if len(v) != 8 {
			return nil, tx.p.fail(fmt.Sprintf("lookup %s in shard %d", keys[i], shard), errBadValue)
		}
		lk := pp.logKey(shard, readI64(v))
		lv, ok, err := getCopy(tx.b, lk)
		if err != nil || !ok {
			return nil, tx.p.fail(fmt.Sprintf("lookup %s in shard %d: log entry %d", keys[i], shard, readI64(v)), errors.Join(err, errBadValue))
		}
		c, err := decodeLog(lk, lv)
		if err != nil {
			return nil, tx.p.fail(fmt.Sprintf("lookup %s in shard %d", keys[i], shard), err)
		}
		out[keys[i]] = Existing{AddedID: c.AddedID, Body: c.Body, CreatedAt: c.CreatedAt, Origin: c.Origin}
	}
	return out, nil
}

// pebbleInsert is Insert on pebble. The shard's highest added_id, known from earlier inserts
// (or read once), spares the probe of each new cell's log key.
func (tx *WriteTx) pebbleInsert(shard int, cs []cells.Cell) error {
	hi, ok := tx.high[shard]
	if !ok {
		hi, ok = tx.p.pb.high[shard]
	}
	if !ok {
		it, err := tx.p.pb.iter(tx.b)
		if err != nil {
			return tx.p.fail("insert", err)
		}
		hi = tx.p.pb.maxAddedAt(it, shard)
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return tx.p.fail("insert", err)
		}
	}
	var err error
	tx.kbuf, err = tx.p.pb.insertCells(tx.b, tx.kbuf, shard, cs, &hi)
	if err != nil && !errors.Is(err, ErrDuplicate) {
		return tx.p.fail(fmt.Sprintf("insert %d cells into shard %d", len(cs), shard), err)
	}
	if err == nil {
		if tx.high == nil {
			tx.high = map[int]int64{}
		}
		tx.high[shard] = hi
	}
	return err
}

// insertCells writes cs into shard through w, after checking every key and added_id of cs
// (against w and each other), so that a duplicate (ErrDuplicate) writes none of cs. With high
// (an added_id at or above the shard's highest stored), an added_id above it needs no probe,
// and high is raised to the highest of cs. kbuf is a scratch buffer for keys, returned for
// reuse.
func (pp *pebblePart) insertCells(w writer, kbuf []byte, shard int, cs []cells.Cell, high *int64) ([]byte, error) {
	var keys map[cells.Key]bool
	var ids map[int64]bool
	if len(cs) > 1 {
		keys, ids = make(map[cells.Key]bool, len(cs)), make(map[int64]bool, len(cs))
	}
	hi := int64(math.MaxInt64)
	if high != nil {
		hi = *high
	}
	top := hi
	for i := range cs {
		c := &cs[i]
		if keys != nil {
			if keys[c.Key] || ids[c.AddedID] {
				return kbuf, fmt.Errorf("storage: insert %d cells into shard %d: %w: %s (added_id %d) given twice", len(cs), shard, ErrDuplicate, c.Key, c.AddedID)
			}
			keys[c.Key], ids[c.AddedID] = true, true
		}
		kbuf = appendCellKey(append(append(kbuf[:0], pp.cellPrefix...), tagCell), shard, &c.Key)
		dup, err := exists(w, kbuf)
		if err == nil && !dup && c.AddedID <= hi {
			kbuf = appendI64(appendShard(append(append(kbuf[:0], pp.cellPrefix...), tagLog), shard), c.AddedID)
			dup, err = exists(w, kbuf)
		}
		if err != nil {
			return kbuf, err
		}
		if dup {
			return kbuf, fmt.Errorf("storage: insert %d cells into shard %d: %w: %s or added_id %d is stored", len(cs), shard, ErrDuplicate, c.Key, c.AddedID)
		}
		if high != nil {
			top = max(top, c.AddedID)
		}
	}
	var v []byte
	for i := range cs {
		c := &cs[i]
		kbuf = appendCellKey(append(append(kbuf[:0], pp.cellPrefix...), tagCell), shard, &c.Key)
		v = appendI64(v[:0], c.AddedID)
		if err := w.Set(kbuf, v, nil); err != nil {
			return kbuf, err
		}
		kbuf = appendI64(appendShard(append(append(kbuf[:0], pp.cellPrefix...), tagLog), shard), c.AddedID)
		v = appendLogValue(v[:0], c)
		if err := w.Set(kbuf, v, nil); err != nil {
			return kbuf, err
		}
	}
	if high != nil {
		*high = top
	}
	return kbuf, nil
}

// pebbleLatestRefKey is LatestRefKey on pebble.
func (tx *WriteTx) pebbleLatestRefKey(shard int, rowKey uuid.UUID, column string) (int64, bool, error) {
	it, err := tx.p.pb.iter(tx.b)
	if err != nil {
		return 0, false, tx.p.fail("latest ref key", err)
	}
	defer it.Close()
	_, ref, ok := latestAt(it, tx.p.pb.rowPrefix(shard, rowKey, &column))
	if err := it.Error(); err != nil {
		return 0, false, tx.p.fail(fmt.Sprintf("latest ref key in shard %d", shard), err)
	}
	return ref, ok, nil
}

// pebbleEraseRow is EraseRow on pebble: the unique keys and log entries of the row's cells,
// its tombstones kept.
func (tx *WriteTx) pebbleEraseRow(shard int, rowKey uuid.UUID) (int, error) {
	pp := tx.p.pb
	op := fmt.Sprintf("erase row %s in shard %d", rowKey, shard)
	it, err := pp.iter(tx.b)
	if err != nil {
		return 0, tx.p.fail(op, err)
	}
	pre := pp.rowPrefix(shard, rowKey, nil)
	var del [][]byte
	for ok := it.SeekGE(pre); ok && bytes.HasPrefix(it.Key(), pre); ok = it.Next() {
		col, _, err := readEsc(it.Key()[len(pre):])
		if err != nil || len(it.Value()) != 8 {
			it.Close()
			return 0, tx.p.fail(op, errBadValue)
		}
		if col == cells.TombstoneColumn {
			continue
		}
		del = append(del, bytes.Clone(it.Key()), pp.logKey(shard, readI64(it.Value())))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, tx.p.fail(op, err)
	}
	for _, k := range del {
		if err := tx.b.Delete(k, nil); err != nil {
			return 0, tx.p.fail(op, err)
		}
	}
	return len(del) / 2, nil
}
