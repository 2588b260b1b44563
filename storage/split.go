package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/schemaless-db/schemaless/cells"
)

// SupportsSplit reports whether the store can hand a shard range of a partition to another of
// its partitions: every engine. Pebble (partitions share a generation of the node's database)
// and MySQL (a shard's tables are in a database of the shard's own: splitsql.go) copy no
// cell (ShareShards, ReleaseShards); SQLite, a file per partition, gives the right half a copy
// of the parent's file (ShareShards: clonesqlite.go), and each half drops the other's tables
// after the split (strays.go).
func (s *Store) SupportsSplit() bool { return true }

// DropShards deletes, in the transaction, everything the partition holds of shards r (which must
// be inside its range): their cells, logs and index entries and the definitions of their index
// tables. KV rows and request records are the caller's. After the commit, SetShards should
// take r out of the partition's range: a split hands r to another partition, which got a copy
// first (when it shares them instead, see ShareShards, ReleaseShards). Pebble and SQLite (its
// DDL is transactional: the shards' tables are dropped in the transaction); ErrInvalidConfig
// elsewhere. An error leaves the transaction's outcome undefined: roll it back.
func (tx *WriteTx) DropShards(ctx context.Context, r cells.ShardRange) error {
	if err := tx.check(r.First); err != nil {
		return err
	}
	if err := tx.check(r.Last); err != nil {
		return err
	}
	if tx.b == nil && tx.p.d.engine == EngineSQLite {
		return tx.dropSQLiteShards(ctx, r)
	}
	if tx.b == nil {
		return fmt.Errorf("%w: DropShards needs the pebble or SQLite engine", ErrInvalidConfig)
	}
	if err := deleteShardKeys(tx.b, tx.b, tx.p.pb.cellPrefix, r); err != nil {
		return err
	}
	tx.p.forgetShards(r)
	return nil
}

// ShareShards makes the partition (the right half of a split, just opened) the owner of shards
// r of the view src (a snapshot of its parent, another partition of this store), with no copy
// of their data: their cells, logs and index tables stay under the parent's generation, which
// the two partitions share from then on, each owning its own range there (pebble_dir.go). The
// partition's state is written anew under a generation of its own: every request record of
// src (a retry of a write finds its outcome in either half), copied key by key without
// decoding (or, when the parent made a pre-copy of them for this split, PrepareSplit, that
// copy brought up to src: precopypebble.go), the KV rows kv and the applied state applied. One synced batch then switches the
// partition's directory entry to the two generations and narrows the parent's owned range to
// what precedes r (readers of the partition see its old content until then; the parent's
// commit of the split takes r out of its range, ReleaseShards). The request records are
// ingested as an sstable (DB.Ingest) when pebble estimates them at ingestMinBytes or more,
// else written through batches. r must be the end of src's range. Both partitions must be
// pebble partitions of this Store, or MySQL ones (shareMySQL: the state alone is written, the
// shards' tables being the shards' own), or SQLite ones (shareSQLite: a file per partition, so
// the partition's file becomes a copy of the parent's less the other shards' tables when it has
// applied nothing, else the shards' tables are copied into it inside SQLite; the parent's
// ReleaseShards drops them); ErrInvalidConfig otherwise. It holds the writer token and
// blocks on I/O; ctx bounds it between batches.
func (p *PartitionStore) ShareShards(ctx context.Context, src *SnapshotTx, r cells.ShardRange, kv []KV, applied AppliedState) (err error) {
	if p.closed.Load() {
		return ErrClosed
	}
	if ps := src.p.Shards(); r.Last != ps.Last || r.First <= ps.First {
		return fmt.Errorf("%w: shards %d..%d are not the end of the parent's %d..%d", ErrShardRange, r.First, r.Last, ps.First, ps.Last)
	}
	for i := range kv {
		if err := checkKV(kv[i].Key, kv[i].Value); err != nil {
			return fmt.Errorf("storage: share shards: KV row %d: %w", i, err)
		}
	}
	if p.d.engine == EngineMySQL && src.p.store == p.store {
		return p.shareMySQL(ctx, src, kv, applied)
	}
	if p.d.engine == EngineSQLite && src.p.store == p.store {
		return p.shareSQLite(ctx, src, r, kv, applied)
	}
	if p.pb == nil || src.view == nil || src.p.store != p.store {
		return fmt.Errorf("%w: ShareShards shares between partitions of one store", ErrInvalidConfig)
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	pp := p.pb
	// The parent's pre-copy of its request records for this split (PrepareSplit), when it
	// made one that is still good: its generation becomes this partition's state.
	var pre *pebblePrecopy
	if pc := src.p.takePrecopy(ctx, p.id.Partition); pc != nil {
		defer pc.release()
		if pc.pebble != nil && pc.pebble.usableFor(src) {
			pre = pc.pebble
			pre.used.Store(true)
			src.p.store.precopiesUsed.Add(1)
		}
	}
	var gen uint64
	if pre != nil {
		gen = pre.gen
	} else if gen, err = pp.ps.allocGen(); err != nil {
		return p.fail("share shards: allocate a generation", err)
	}
	view := &pebblePart{ps: pp.ps, db: pp.db, prefix: dataPrefix(gen), cellPrefix: dataPrefix(gen)}
	b := pp.db.NewBatch()
	defer func() {
		b.Close()
		if err != nil {
			_ = pp.db.DeleteRange(dataPrefix(gen), dataPrefix(gen+1), pebble.NoSync)
		}
	}()
	ranges := requestKeyRanges(src)
	switch {
	case pre != nil:
		_, err = pre.catchUp(ctx, b, src, view)
	case pp.ps.estimate(ranges) >= ingestMinBytes:
		err = pp.ps.ingestCopy(ctx, src, ranges, view.prefix)
	default:
		err = batchCopy(ctx, pp.db, src, ranges, view.prefix)
	}
	if err != nil {
		return p.fail("share shards: request records", err)
	}
	for i := range kv {
		if err := b.Set(view.kvKey(kv[i].Key), kv[i].Value, nil); err != nil {
			return p.fail("share shards: KV rows", err)
		}
	}
	if err := b.Set(view.key(tagApplied, 0), appliedValue(applied), nil); err != nil {
		return p.fail("share shards: applied state", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return p.fail("share shards", err)
	}
	shards := binary.BigEndian.Uint64(src.view.cellPrefix[1:])
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if err := pp.shareFrom(src, gen, shards, r); err != nil {
		return p.fail("share shards: switch", err)
	}
	clear(p.indexes)
	clear(p.created)
	return nil
}

// shareFrom switches pp to state generation gen and the shards' generation shards, owning r
// there, and, in the same synced batch, narrows the owned range of src's partition (the
// parent, whose shards' generation shards is) to what precedes r. The caller holds pp.mu
// exclusively and the writer token.
func (pp *pebblePart) shareFrom(src *SnapshotTx, gen, shards uint64, r cells.ShardRange) error {
	return pp.switchEntry(dirEntry{state: gen, shards: shards, shared: true, owned: r}, func(sw *pebble.Batch) error {
		parent, ok, err := pp.ps.entry(pp.db, src.view.dir)
		if err != nil {
			return err
		}
		if !ok || parent.shards != shards {
			return fmt.Errorf("the parent's directory entry names generation %d for its shards, not %d (found: %v)", parent.shards, shards, ok)
		}
		if !parent.shared {
			parent.shared, parent.owned = true, src.p.Shards()
		}
		parent.owned.Last = min(parent.owned.Last, r.First-1)
		return sw.Set(src.view.dir, parent.encode(), nil)
	})
}

// ReleaseShards takes shards r (which must be inside the range) out of the partition in the
// transaction: a split handed them to the partition that got them since (ShareShards), which
// owns them now. Pebble and MySQL keep their data, which the two partitions share; SQLite,
// whose ShareShards copied them into the other partition's file, keeps their tables until
// SetShards takes r out of the range, and then drops them in the background, one table at a
// time between writer calls (strays.go), instead of in the transaction. It clears what the
// partition cached of them. After the commit, SetShards should take r out of the partition's
// range.
func (tx *WriteTx) ReleaseShards(ctx context.Context, r cells.ShardRange) error {
	if err := tx.check(r.First); err != nil {
		return err
	}
	if err := tx.check(r.Last); err != nil {
		return err
	}
	tx.p.forgetShards(r)
	return nil
}

// forgetShards clears what p caches of shards r: the highest added_ids, the tables created, the
// index tables. The caller holds the writer token.
func (p *PartitionStore) forgetShards(r cells.ShardRange) {
	for s := r.First; s <= r.Last; s++ {
		if p.pb != nil {
			delete(p.pb.high, s)
		}
		delete(p.created, s)
	}
	for _, st := range p.indexes {
		for s := r.First; s <= r.Last; s++ {
			delete(st.shards, s)
		}
	}
}

// keyRange is a range [from, to) of keys of a pebble partition's snapshot, named for errors.
type keyRange struct {
	what     string
	from, to []byte
}

// shardKeyRanges returns the disjoint key ranges of the view src (a pebble partition's
// snapshot) that hold shards r: the shards' cells and logs, the definitions and entries of
// every index table on them, and every request record (a request record names no shard: a
// retry of a write finds its outcome in either partition).
func shardKeyRanges(src *SnapshotTx, r cells.ShardRange) ([]keyRange, error) {
	sv := src.view
	var out []keyRange
	for _, tag := range []byte{tagCell, tagLog} {
		out = append(out, keyRange{"cells", appendShard(sv.key(tag, 2), r.First), appendShard(sv.key(tag, 2), r.Last+1)})
	}
	tables, err := sv.indexTables(src.snap, r.Contains)
	if err != nil {
		return nil, fmt.Errorf("index tables: %w", err)
	}
	for name := range tables {
		out = append(out, keyRange{"index tables", sv.indexDefKey(name, r.First), sv.indexDefKey(name, r.Last+1)},
			keyRange{"index entries", sv.indexBase(name, r.First), sv.indexBase(name, r.Last+1)})
	}
	return append(out, requestKeyRanges(src)...), nil
}

// requestKeyRanges returns the key ranges of the view src that hold its request records.
func requestKeyRanges(src *SnapshotTx) []keyRange {
	sv := src.view
	var out []keyRange
	for _, tag := range []byte{tagRequest, tagRequestTime} {
		out = append(out, keyRange{"request records", sv.key(tag, 0), sv.key(tag+1, 0)})
	}
	return out
}

// eachKeyIn calls fn with every key of range kr of the view src, relative to src's prefix, in
// order, and its value. It stops at fn's first error. fn must not keep rel or v.
func eachKeyIn(src *SnapshotTx, kr keyRange, fn func(rel, v []byte) error) error {
	it, err := src.snap.NewIter(&pebble.IterOptions{LowerBound: kr.from, UpperBound: kr.to})
	if err != nil {
		return fmt.Errorf("%s: %w", kr.what, err)
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key()[len(src.view.prefix):], it.Value()); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", kr.what, err), it.Close())
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("%s: %w", kr.what, err)
	}
	return nil
}

// AbsorbShards adds to the transaction what the view src (a snapshot of another partition of
// the datastore on this node: the frozen right partition of a merge) holds of shards r, which
// lie outside this partition's range: their cells and logs, the definitions and entries of
// their index tables, and every request record. KV rows are the caller's. A request record
// whose ID the partition holds too is replaced by join(held, incoming) (the two records,
// without their created_at), stored with the earlier created_at; a nil join keeps the incoming
// one; two alike are kept as they are. After the commit, SetShards should take r into the
// partition's range.
//
// Pebble copies key by key without decoding, or nothing but the request records when the two
// partitions share their shards' generation; the copy is held in the transaction's batch
// (memory in proportion to r's data) until it commits. MySQL copies only the request records:
// the shards' databases are the shards' own (src must be of the same Store). SQLite copies the
// shards' cells and the tables among tables (the index tables' definitions: the KV rows'
// index catalog) that src's file holds on them, into the partition's file (mergesql.go); in a
// transaction of BeginAbsorb it copies every table src's file holds on them inside SQLite and
// ignores tables, as pebble and MySQL do. An error leaves the transaction's outcome undefined: roll it
// back. ErrInvalidConfig for partitions of other engines or datastores.
func (tx *WriteTx) AbsorbShards(ctx context.Context, src *SnapshotTx, r cells.ShardRange, tables []IndexTable, join func(held, incoming []byte) ([]byte, error)) error {
	if tx.done || src.closed {
		return ErrClosed
	}
	if ps := tx.p.Shards(); r.First <= ps.Last && ps.First <= r.Last {
		return fmt.Errorf("%w: shards %d..%d overlap the partition's %d..%d", ErrShardRange, r.First, r.Last, ps.First, ps.Last)
	}
	if tx.b == nil && src.view == nil {
		return tx.absorbSQL(ctx, src, r, tables, join)
	}
	if tx.b == nil || src.view == nil || src.p.store != tx.p.store {
		return fmt.Errorf("%w: AbsorbShards copies between pebble partitions of one store", ErrInvalidConfig)
	}
	pp := tx.p.pb
	tx.voidPrecopies = true // the absorbed records are not noted by ID
	shared := pp.sameShards(src.view)
	ranges := requestKeyRanges(src)
	if !shared {
		var err error
		if ranges, err = shardKeyRanges(src, r); err != nil {
			return tx.p.fail("absorb shards", err)
		}
	}
	// The partition's request records, read in key order beside the incoming ones (both sorted
	// by ID): a merge join, not a point read per record.
	heldRecords := &sortedReader{r: pp.db, lower: pp.key(tagRequest, 0), upper: pp.key(tagRequest+1, 0)}
	defer heldRecords.close()
	n := 0
	for _, kr := range ranges {
		err := eachKeyIn(src, kr, func(rel, v []byte) error {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			k := append(bytes.Clone(pp.prefixFor(rel[0])), rel...)
			if join != nil && rel[0] == tagRequest && len(v) >= 8 {
				held, ok, err := heldRecords.find(k)
				if err != nil {
					return err
				}
				if ok && bytes.Equal(held, v) {
					return nil // the same record: a split's copy of what the partition holds
				}
				if ok && len(held) >= 8 {
					rec, err := join(held[8:], v[8:])
					if err != nil {
						return fmt.Errorf("join request records: %w", err)
					}
					at := min(binary.BigEndian.Uint64(held), binary.BigEndian.Uint64(v))
					v = append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(rec)), at), rec...)
				}
			}
			return tx.b.Set(k, v, nil)
		})
		if err != nil {
			return tx.p.fail("absorb shards", err)
		}
	}
	if err := tx.absorbEntries(src, r, shared); err != nil {
		return tx.p.fail("absorb shards: directory", err)
	}
	tx.p.forgetShards(r)
	return nil
}

// sortedReader finds keys of [lower, upper) of r given in ascending order, with one iterator
// moving forward: a merge join.
type sortedReader struct {
	r            reader
	lower, upper []byte
	it           *pebble.Iterator
	done         bool
}

// find returns the value of key k (a copy), if stored; k must not be below the previous one.
func (s *sortedReader) find(k []byte) ([]byte, bool, error) {
	if s.it == nil && !s.done {
		it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: s.lower, UpperBound: s.upper})
		if err != nil {
			return nil, false, err
		}
		s.it, s.done = it, !it.First()
	}
	for !s.done && bytes.Compare(s.it.Key(), k) < 0 {
		if !s.it.Next() {
			s.done = true
		}
	}
	if s.done {
		return nil, false, s.it.Error()
	}
	if !bytes.Equal(s.it.Key(), k) {
		return nil, false, nil
	}
	return bytes.Clone(s.it.Value()), true, nil
}

func (s *sortedReader) close() {
	if s.it != nil {
		s.it.Close()
	}
}

// absorbEntries writes into the transaction the directory entries that a merge of shards r of
// src's partition changes: the partition's owned range takes r when its shards' generation is
// shared, and, when src's shards stayed where they are (shared: the two partitions keep their
// shards in one generation), src's partition owns none of them any more.
func (tx *WriteTx) absorbEntries(src *SnapshotTx, r cells.ShardRange, shared bool) error {
	pp := tx.p.pb
	ps := pp.ps
	ps.dirMu.Lock()
	defer ps.dirMu.Unlock()
	e, ok, err := ps.entry(pp.db, pp.dir)
	if err != nil {
		return err
	}
	if ok && e.shared {
		if e.owned.Last < e.owned.First {
			e.owned = r
		} else {
			e.owned = cells.ShardRange{First: min(e.owned.First, r.First), Last: max(e.owned.Last, r.Last)}
		}
		if err := tx.b.Set(pp.dir, e.encode(), nil); err != nil {
			return err
		}
	}
	if !shared {
		return nil
	}
	se, ok, err := ps.entry(pp.db, src.view.dir)
	if err != nil || !ok {
		return err
	}
	se.shared, se.owned = true, cells.ShardRange{First: 1, Last: 0}
	return tx.b.Set(src.view.dir, se.encode(), nil)
}

// ingestMinBytes is the least size on disk of a copy that ShareShards ingests as sstables (a
// variable so that tests can take either path).
var ingestMinBytes uint64 = 16 << 20

// estimate returns pebble's estimate of the bytes its tables hold in ranges (what memtables
// hold is not counted).
func (ps *pebbleStore) estimate(ranges []keyRange) uint64 {
	var total uint64
	for _, kr := range ranges {
		if n, err := ps.db.EstimateDiskUsage(kr.from, kr.to); err == nil {
			total += n
		}
	}
	return total
}

// batchCopy writes the keys of ranges of the view src under prefix (a new generation's) into
// db through batches of restoreBatchBytes, committed without sync.
func batchCopy(ctx context.Context, db *pebble.DB, src *SnapshotTx, ranges []keyRange, prefix []byte) error {
	b := db.NewBatch()
	defer func() { b.Close() }()
	key := bytes.Clone(prefix)
	for _, kr := range ranges {
		err := eachKeyIn(src, kr, func(rel, v []byte) error {
			key = append(key[:len(prefix)], rel...)
			if err := b.Set(key, v, nil); err != nil {
				return err
			}
			if b.Len() < restoreBatchBytes {
				return nil
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			b.Close()
			b = db.NewBatch()
			return ctx.Err()
		})
		if err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}
