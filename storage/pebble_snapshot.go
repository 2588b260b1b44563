package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
)

// Snapshots and Restore of a pebble partition. A snapshot is a pebble snapshot: a view of the
// whole database as of its creation, with no connection held. Restore writes the new content
// under a new generation while readers keep seeing the old one, then switches the partition's
// directory entry to it and deletes the old generation with one range deletion, in one batch.

// restoreBatchBytes is the size at which Restore commits its batch and starts another.
const restoreBatchBytes = 4 << 20

// pebbleBeginSnapshot is BeginSnapshot on pebble.
func (p *PartitionStore) pebbleBeginSnapshot() (*SnapshotTx, error) {
	defer p.pb.rlock()()
	view := &pebblePart{ps: p.pb.ps, db: p.pb.db, prefix: bytes.Clone(p.pb.prefix), cellPrefix: bytes.Clone(p.pb.cellPrefix), dir: p.pb.dir}
	snap := p.pb.db.NewSnapshot()
	a, _, err := view.applied(snap)
	if err != nil {
		return nil, errors.Join(p.fail("begin snapshot: read applied state", err), snap.Close())
	}
	return &SnapshotTx{p: p, snap: snap, view: view, applied: a}, nil
}

// pebbleScanShard is SnapshotTx.ScanShard on pebble.
func (s *SnapshotTx) pebbleScanShard(shard int, fn func(cells.Cell) error) error {
	it, err := s.view.iter(s.snap)
	if err != nil {
		return s.p.fail(fmt.Sprintf("snapshot scan shard %d", shard), err)
	}
	defer it.Close()
	var fnErr error
	err = s.view.scanLog(it, shard, math.MinInt64, math.MaxInt64, func(k, v []byte) (bool, error) {
		c, err := decodeLog(k, v)
		if err != nil {
			return false, err
		}
		if fnErr = fn(c); fnErr != nil {
			return false, nil
		}
		return true, nil
	})
	if fnErr != nil {
		return fmt.Errorf("storage: snapshot scan shard %d: %w", shard, fnErr)
	}
	if err != nil {
		return s.p.fail(fmt.Sprintf("snapshot scan shard %d", shard), err)
	}
	return nil
}

// pebbleScanKV is SnapshotTx.ScanKV on pebble.
func (s *SnapshotTx) pebbleScanKV(fn func(KV) error) error {
	it, err := prefixIter(s.snap, s.view.key(tagKV, 0))
	if err != nil {
		return s.p.fail("snapshot scan KV", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(KV{Key: string(it.Key()[dataPrefixLen+1:]), Value: bytes.Clone(it.Value())}); err != nil {
			return fmt.Errorf("storage: snapshot scan KV: %w", err)
		}
	}
	if err := it.Error(); err != nil {
		return s.p.fail("snapshot scan KV", err)
	}
	return nil
}

// pebbleScanRequests is SnapshotTx.ScanRequests on pebble.
func (s *SnapshotTx) pebbleScanRequests(fn func(RequestRecord) error) error {
	pre := s.view.key(tagRequest, 0)
	it, err := prefixIter(s.snap, pre)
	if err != nil {
		return s.p.fail("snapshot scan request records", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(pre)+16 {
			return s.p.fail("snapshot scan request records", errBadValue)
		}
		r, err := decodeRequest(uuid.UUID(k[len(pre):]), it.Value())
		if err != nil {
			return s.p.fail("snapshot scan request records", err)
		}
		if err := fn(r); err != nil {
			return fmt.Errorf("storage: snapshot scan request records: %w", err)
		}
	}
	if err := it.Error(); err != nil {
		return s.p.fail("snapshot scan request records", err)
	}
	return nil
}

// pebbleScanIndex is SnapshotTx.ScanIndex on pebble.
func (s *SnapshotTx) pebbleScanIndex(shard int, t *IndexTable, fn func(IndexEntry) error) error {
	var fnErr error
	err := s.view.scanIndexIn(s.snap, shard, t, func(e IndexEntry) error {
		fnErr = fn(e)
		return fnErr
	})
	if fnErr != nil {
		return fmt.Errorf("storage: snapshot scan index %s of shard %d: %w", t.Name, shard, fnErr)
	}
	if err != nil {
		return s.p.fail(fmt.Sprintf("snapshot scan index %s of shard %d", t.Name, shard), err)
	}
	return nil
}

// restoreWriter is Restore's batch: an indexed batch (so duplicates are found), committed and
// replaced when it grows past restoreBatchBytes.
type restoreWriter struct {
	db *pebble.DB
	*pebble.Batch
}

// flush commits the batch if it is large (or with force) and starts a new one.
func (w *restoreWriter) flush(force bool) error {
	if !force && w.Len() < restoreBatchBytes {
		return nil
	}
	if err := w.Commit(pebble.NoSync); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	w.Batch = w.db.NewIndexedBatch()
	return nil
}

// pebbleRestore is Restore on pebble, its arguments checked and the writer token held.
func (p *PartitionStore) pebbleRestore(applied AppliedState, next func() (RestoreRecord, error), kv []KV, tables map[string]*IndexTable) (err error) {
	pp := p.pb
	gen, err := pp.ps.allocGen()
	if err != nil {
		return p.fail("restore: allocate a generation", err)
	}
	view := &pebblePart{ps: pp.ps, db: pp.db, prefix: dataPrefix(gen), cellPrefix: dataPrefix(gen)}
	w := &restoreWriter{db: pp.db, Batch: pp.db.NewIndexedBatch()}
	defer func() {
		w.Close()
		if err != nil {
			// Nothing names the new generation: delete what was written of it.
			_ = pp.db.DeleteRange(dataPrefix(gen), dataPrefix(gen+1), pebble.NoSync)
		}
	}()
	seen := make(map[string]bool, len(kv))
	for i := range kv {
		if seen[kv[i].Key] {
			return fmt.Errorf("storage: restore: %w: KV key %q given twice", ErrDuplicate, kv[i].Key)
		}
		seen[kv[i].Key] = true
		if err := w.Set(view.kvKey(kv[i].Key), kv[i].Value, nil); err != nil {
			return p.fail("restore: KV rows", err)
		}
	}
	for _, t := range tables {
		def := []byte(pebbleIndexDef(t))
		for s := p.Shards().First; s <= p.Shards().Last; s++ {
			if err := w.Set(view.indexDefKey(t.Name, s), def, nil); err != nil {
				return p.fail("restore: index tables", err)
			}
		}
	}
	var kbuf []byte
	// The new generation is empty: cells restored in added_id order need no probe of their log
	// keys.
	highs := map[int]int64{}
	for n := 0; ; n++ {
		r, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("storage: restore: record %d: %w", n, err)
		}
		switch {
		case r.Request != nil:
			err = view.putRequests(w, []RequestRecord{*r.Request}, true)
		case !p.Shards().Contains(r.Shard):
			return fmt.Errorf("storage: restore: record %d: %w: shard %d, range [%d, %d]", n, ErrShardRange, r.Shard, p.Shards().First, p.Shards().Last)
		case r.Index == "":
			if err := checkOrigin(&r.Cell); err != nil {
				return fmt.Errorf("storage: restore: record %d: cell %s: %w", n, r.Cell.Key, err)
			}
			hi, ok := highs[r.Shard]
			if !ok {
				hi = math.MinInt64
			}
			kbuf, err = view.insertCells(w, kbuf, r.Shard, []cells.Cell{r.Cell}, &hi)
			highs[r.Shard] = hi
		case tables[r.Index] == nil:
			return fmt.Errorf("storage: restore: record %d: %w: entry of index %q, not one of the tables given", n, ErrInvalidConfig, r.Index)
		default:
			err = view.upsertEntries(w, r.Shard, tables[r.Index], []IndexEntry{r.Entry}, true)
		}
		if err != nil {
			return fmt.Errorf("storage: restore: record %d: %w", n, err)
		}
		if err := w.flush(false); err != nil {
			return p.fail("restore", err)
		}
	}
	if err := w.Set(view.key(tagApplied, 0), appliedValue(applied), nil); err != nil {
		return p.fail("restore: applied state", err)
	}
	if err := w.flush(true); err != nil {
		return p.fail("restore", err)
	}
	// The switch: readers wait for it (pp.mu) and then read the new generation.
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if err := pp.switchTo(gen); err != nil {
		return p.fail("restore: switch", err)
	}
	clear(p.indexes)
	for _, t := range tables {
		st := &indexState{sig: t.signature(), shards: make(map[int]bool, p.Shards().Len())}
		for s := p.Shards().First; s <= p.Shards().Last; s++ {
			st.shards[s] = true
		}
		p.indexes[t.Name] = st
	}
	return nil
}

// switchTo makes generation gen the partition's data, state and shards, in one synced batch:
// its directory entry names gen, and what it leaves of its old generations is deleted with
// range deletions (pebbleStore.release: the old generation whole, unless a split shares it).
// The caller holds pp.mu exclusively (readers then see the new generation) and the writer
// token; the high-water cache is cleared.
func (pp *pebblePart) switchTo(gen uint64) error {
	return pp.switchEntry(dirEntry{state: gen, shards: gen}, nil)
}

// switchEntry is switchTo for any new entry e; also, if set, adds its own writes to the batch
// (another partition's entry), with the directory held as for the switch.
func (pp *pebblePart) switchEntry(e dirEntry, also func(sw *pebble.Batch) error) error {
	pp.ps.dirMu.Lock()
	defer pp.ps.dirMu.Unlock()
	old, ok, err := pp.ps.entry(pp.db, pp.dir)
	if err != nil {
		return err
	}
	sw := pp.db.NewBatch()
	defer sw.Close()
	if err := sw.Set(pp.dir, e.encode(), nil); err != nil {
		return err
	}
	if also != nil {
		if err := also(sw); err != nil {
			return err
		}
	}
	if ok {
		if err := pp.ps.release(sw, pp.dir, old, e.state, e.shards); err != nil {
			return err
		}
	}
	if err := sw.Commit(pebble.Sync); err != nil {
		return err
	}
	pp.prefix, pp.cellPrefix = dataPrefix(e.state), dataPrefix(e.shards)
	clear(pp.high)
	return nil
}

// copyPartition copies the whole content of src (cells, KV rows, index tables and entries,
// request records, applied state) into dst with dst.Restore, from a snapshot of src, and
// returns the number of cells copied. Migration from SQLite uses it.
func copyPartition(ctx context.Context, src, dst *PartitionStore) (int64, error) {
	names, err := src.IndexNames(ctx)
	if err != nil {
		return 0, err
	}
	all := make([]int, 0, src.Shards().Len())
	for s := src.Shards().First; s <= src.Shards().Last; s++ {
		all = append(all, s)
	}
	var tables []IndexTable
	for _, name := range names {
		defs, err := src.indexDefs(ctx, src.read, name, all)
		if err != nil {
			return 0, fmt.Errorf("storage: definition of index %s: %w", name, err)
		}
		for _, def := range defs {
			t, err := parseSQLiteIndexDef(name, def)
			if err != nil {
				return 0, err
			}
			tables = append(tables, t)
			break
		}
	}
	snap, err := src.BeginSnapshot(ctx)
	if err != nil {
		return 0, err
	}
	defer snap.Close()
	var kv []KV
	if err := snap.ScanKV(ctx, func(r KV) error { kv = append(kv, r); return nil }); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recs := make(chan RestoreRecord, 256)
	done := make(chan error, 1)
	var cellsCopied int64
	go func() {
		send := func(r RestoreRecord) error {
			select {
			case recs <- r:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := func() error {
			for _, s := range all {
				if err := snap.ScanShard(ctx, s, func(c cells.Cell) error {
					cellsCopied++
					return send(RestoreRecord{Shard: s, Cell: c})
				}); err != nil {
					return err
				}
			}
			for i := range tables {
				t := tables[i]
				for _, s := range all {
					if err := snap.ScanIndex(ctx, s, t, func(e IndexEntry) error {
						return send(RestoreRecord{Shard: s, Index: t.Name, Entry: e})
					}); err != nil {
						return err
					}
				}
			}
			return snap.ScanRequests(ctx, func(r RequestRecord) error {
				return send(RestoreRecord{Request: &r})
			})
		}()
		close(recs)
		done <- err
	}()
	next := func() (RestoreRecord, error) {
		r, ok := <-recs
		if !ok {
			if err := <-done; err != nil {
				return RestoreRecord{}, err
			}
			return RestoreRecord{}, io.EOF
		}
		return r, nil
	}
	err = dst.Restore(ctx, snap.Applied(), next, kv, tables)
	cancel()
	for range recs {
	}
	return cellsCopied, err
}

// sqliteIndexColumn is a field column of an SQLite index table's definition, with its kind in
// a comment (sqliteIndexDDL).
var sqliteIndexColumn = regexp.MustCompile(`(?m)^\s*f_([A-Za-z_][A-Za-z0-9_]*) [^\n]*/\* ([a-z]+) \*/,?$`)

// parseSQLiteIndexDef reads the columns of an SQLite index table back from its definition.
func parseSQLiteIndexDef(name, def string) (IndexTable, error) {
	t := IndexTable{Name: name}
	for _, m := range sqliteIndexColumn.FindAllStringSubmatch(def, -1) {
		t.Columns = append(t.Columns, IndexColumn{Name: m[1], Kind: kindOf(m[2])})
	}
	if err := t.Validate(); err != nil {
		return t, fmt.Errorf("storage: definition of index %s: %w", name, err)
	}
	return t, nil
}
