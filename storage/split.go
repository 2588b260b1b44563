package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/schemaless-db/schemaless/cells"
)

// SupportsSplit reports whether the store can hand a shard range of a partition to another
// partition (WriteTx.DropShards): the pebble engine only, for now.
func (s *Store) SupportsSplit() bool { return s.pebble != nil }

// DropShards deletes, in the transaction, everything the partition holds of shards r (which must
// be inside its range): their cells, logs and index entries and the definitions of their index
// tables. KV rows and request records are the caller's. After the commit, SetShards should
// take r out of the partition's range: a split hands r to another partition, which got a copy
// first. Pebble only (ErrInvalidConfig elsewhere); an error leaves the transaction's outcome
// undefined: roll it back.
func (tx *WriteTx) DropShards(ctx context.Context, r cells.ShardRange) error {
	if err := tx.check(r.First); err != nil {
		return err
	}
	if err := tx.check(r.Last); err != nil {
		return err
	}
	if tx.b == nil {
		return fmt.Errorf("%w: DropShards needs the pebble engine", ErrInvalidConfig)
	}
	pp := tx.p.pb
	del := func(from, to []byte) error { return tx.b.DeleteRange(from, to, nil) }
	for _, tag := range []byte{tagCell, tagLog} {
		if err := del(appendShard(pp.key(tag, 2), r.First), appendShard(pp.key(tag, 2), r.Last+1)); err != nil {
			return err
		}
	}
	tables, err := pp.indexTables(tx.b, r.Contains)
	if err != nil {
		return err
	}
	for name := range tables {
		if err := del(pp.indexBase(name, r.First), pp.indexBase(name, r.Last+1)); err != nil {
			return err
		}
		if err := del(pp.indexDefKey(name, r.First), pp.indexDefKey(name, r.Last+1)); err != nil {
			return err
		}
		if st := tx.p.indexes[name]; st != nil {
			for s := r.First; s <= r.Last; s++ {
				delete(st.shards, s)
			}
		}
	}
	for s := r.First; s <= r.Last; s++ {
		delete(pp.high, s)
		delete(tx.p.created, s)
	}
	return nil
}

// CopyShards replaces the partition's content with the shards r of the view src (a snapshot of
// another partition of this store): their cells and logs, the entries and table definitions of
// every index on those shards, and every request record, copied key by key without decoding,
// plus the KV rows kv and the applied state applied. It writes a new generation and switches
// to it in one synced batch, as Restore does (readers see the old content until then). A copy
// of at least ingestMinBytes on disk (pebble's estimate of the source's tables) does not go
// through pebble's write-ahead log and memtables: its keys are written, in order, into one
// sstable per key range (in a temporary directory of the store's) which pebble then ingests
// (DB.Ingest: CockroachDB ingests the snapshots of its range moves the same way); the new
// generation's keys overlap nothing, so the tables land in the lowest level with no
// compaction. A smaller copy goes through batches, whose few writes cost less than the files'
// fsyncs. Both partitions must be pebble partitions of this Store (ErrInvalidConfig
// otherwise). It holds the writer token and blocks on I/O; ctx bounds it between batches or
// ranges. A split's copy uses it: much less work than Restore's records for the same content.
func (p *PartitionStore) CopyShards(ctx context.Context, src *SnapshotTx, r cells.ShardRange, kv []KV, applied AppliedState) (err error) {
	if p.closed.Load() {
		return ErrClosed
	}
	if p.pb == nil || src.view == nil || src.p.store != p.store {
		return fmt.Errorf("%w: CopyShards copies between pebble partitions of one store", ErrInvalidConfig)
	}
	for i := range kv {
		if err := checkKV(kv[i].Key, kv[i].Value); err != nil {
			return fmt.Errorf("storage: copy shards: KV row %d: %w", i, err)
		}
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	pp := p.pb
	gen, err := pp.ps.allocGen()
	if err != nil {
		return p.fail("copy shards: allocate a generation", err)
	}
	view := &pebblePart{ps: pp.ps, db: pp.db, prefix: dataPrefix(gen)}
	b := pp.db.NewBatch()
	defer func() {
		b.Close()
		if err != nil {
			_ = pp.db.DeleteRange(dataPrefix(gen), dataPrefix(gen+1), pebble.NoSync)
		}
	}()
	ranges, err := shardKeyRanges(src, r)
	if err != nil {
		return p.fail("copy shards", err)
	}
	if pp.ps.estimate(ranges) >= ingestMinBytes {
		err = pp.ps.ingestCopy(ctx, src, ranges, view.prefix)
	} else {
		err = batchCopy(ctx, pp.db, src, ranges, view.prefix)
	}
	if err != nil {
		return p.fail("copy shards", err)
	}
	for i := range kv {
		if err := b.Set(view.kvKey(kv[i].Key), kv[i].Value, nil); err != nil {
			return p.fail("copy shards: KV rows", err)
		}
	}
	if err := b.Set(view.key(tagApplied, 0), appliedValue(applied), nil); err != nil {
		return p.fail("copy shards: applied state", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return p.fail("copy shards", err)
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if err := pp.switchTo(gen); err != nil {
		return p.fail("copy shards: switch", err)
	}
	clear(p.indexes)
	clear(p.created)
	return nil
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
	for _, tag := range []byte{tagRequest, tagRequestTime} {
		out = append(out, keyRange{"request records", sv.key(tag, 0), sv.key(tag+1, 0)})
	}
	return out, nil
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

// eachShardKey calls fn with every key of the view src that belongs to shards r
// (shardKeyRanges), relative to src's prefix, and its value. It stops at fn's first error. fn
// must not keep rel or v.
func eachShardKey(src *SnapshotTx, r cells.ShardRange, fn func(rel, v []byte) error) error {
	ranges, err := shardKeyRanges(src, r)
	if err != nil {
		return err
	}
	for _, kr := range ranges {
		if err := eachKeyIn(src, kr, fn); err != nil {
			return err
		}
	}
	return nil
}

// AbsorbShards adds to the transaction, key by key without decoding, what the view src (a
// snapshot of another pebble partition of this Store: the frozen right partition of a merge)
// holds of shards r, which lie outside this partition's range: their cells and logs, the
// definitions and entries of their index tables, and every request record. KV rows are the
// caller's. A request record whose ID the partition holds too is replaced by join(held,
// incoming) (the two records, without their created_at), stored with the earlier created_at;
// a nil join keeps the incoming one. After the commit, SetShards should take r into the
// partition's range. The whole
// copy is held in the transaction's batch (memory in proportion to r's data) until it commits.
// Pebble only (ErrInvalidConfig elsewhere); an error leaves the transaction's outcome undefined:
// roll it back.
func (tx *WriteTx) AbsorbShards(ctx context.Context, src *SnapshotTx, r cells.ShardRange, join func(held, incoming []byte) ([]byte, error)) error {
	if tx.done {
		return ErrClosed
	}
	if tx.b == nil || src.view == nil || src.p.store != tx.p.store {
		return fmt.Errorf("%w: AbsorbShards copies between pebble partitions of one store", ErrInvalidConfig)
	}
	if ps := tx.p.Shards(); r.First <= ps.Last && ps.First <= r.Last {
		return fmt.Errorf("%w: shards %d..%d overlap the partition's %d..%d", ErrShardRange, r.First, r.Last, ps.First, ps.Last)
	}
	prefix := tx.p.pb.prefix
	n := 0
	err := eachShardKey(src, r, func(rel, v []byte) error {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k := append(bytes.Clone(prefix), rel...)
		if join != nil && len(rel) > 0 && rel[0] == tagRequest && len(v) >= 8 {
			held, ok, err := getCopy(tx.b, k)
			if err != nil {
				return err
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
	for s := r.First; s <= r.Last; s++ {
		delete(tx.p.pb.high, s)
		delete(tx.p.created, s)
	}
	for _, st := range tx.p.indexes {
		for s := r.First; s <= r.Last; s++ {
			delete(st.shards, s)
		}
	}
	return nil
}

// ingestMinBytes is the least size on disk of a copy that CopyShards ingests as sstables (a
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

// ingestCopy writes the keys of ranges of the view src under prefix (a new generation's) into
// sstables, one per key range that holds any, and has pebble ingest them all at once. The
// tables are written in a temporary directory under the store's directory (the same file
// system, so that pebble links them rather than copies them), removed afterwards.
func (ps *pebbleStore) ingestCopy(ctx context.Context, src *SnapshotTx, ranges []keyRange, prefix []byte) error {
	dir, err := os.MkdirTemp(ps.cfg.Dir, "copy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wo := ps.writerOptions()
	var paths []string
	key := bytes.Clone(prefix)
	for i, kr := range ranges {
		if err := ctx.Err(); err != nil {
			return err
		}
		var w *sstable.Writer
		path := filepath.Join(dir, fmt.Sprintf("%06d.sst", i))
		err := eachKeyIn(src, kr, func(rel, v []byte) error {
			if w == nil {
				f, err := vfs.Default.Create(path)
				if err != nil {
					return err
				}
				w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo)
			}
			key = append(key[:len(prefix)], rel...)
			return w.Set(key, v)
		})
		if w != nil {
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			paths = append(paths, path)
		}
		if err != nil {
			return err
		}
	}
	if len(paths) == 0 {
		return nil
	}
	return ps.db.Ingest(paths)
}

// writerOptions returns the options of an sstable for ps's database: its format and its
// lowest level's settings (bloom filters included).
func (ps *pebbleStore) writerOptions() sstable.WriterOptions {
	o := ps.opts.Clone()
	o.EnsureDefaults()
	wo := o.MakeWriterOptions(len(o.Levels)-1, ps.db.FormatMajorVersion().MaxTableFormat())
	wo.Cache = nil
	return wo
}
