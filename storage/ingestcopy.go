package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/objstorage"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
)

// A copy into a new generation (a split's ShareShards, a pebble pre-copy) reads a snapshot and
// writes sstables that pebble ingests. On a busy node that copy is not bound by its own work
// but by its share of the node's CPU: 0.26 CPU-seconds took 1.0 to 1.1 s for the request
// records of a partition of 1 million cells under 16 writers (BENCHMARKS.md). So ingestCopy
// cuts each large key range into copyParts parts of about equal key space and writes their
// tables on up to copyWorkers goroutines at once, through a write buffer of copyBufferBytes
// (pebble's own is 4 KiB, a write system call per block).

// copyParts is how many parts ingestCopy cuts a key range of copySplitBytes or more into;
// copyWorkers how many tables it writes at once; copyBufferBytes each table's write buffer.
const (
	copyParts       = 4
	copyWorkers     = 4
	copyBufferBytes = 1 << 20
)

// copySplitBytes is the least size on disk (pebble's estimate) of a key range that ingestCopy
// cuts into parts (a variable so that tests can take either path).
var copySplitBytes uint64 = 1 << 20

// ingestCopy writes the keys of ranges of the view src under prefix (a new generation's) into
// sstables, one per key range that holds any (a range of copySplitBytes or more cut into
// copyParts parts first), written on up to copyWorkers goroutines, and has pebble ingest them
// all at once. The tables are written in a temporary directory under the store's directory
// (the same file system, so that pebble links them rather than copies them), removed
// afterwards. It stops at the first error, ctx's included.
func (ps *pebbleStore) ingestCopy(ctx context.Context, src *SnapshotTx, ranges []keyRange, prefix []byte) error {
	var parts []keyRange
	for _, kr := range ranges {
		if ps.estimate([]keyRange{kr}) < copySplitBytes {
			parts = append(parts, kr)
			continue
		}
		cut, err := cutKeyRange(src, kr, copyParts)
		if err != nil {
			return err
		}
		parts = append(parts, cut...)
	}
	dir, err := os.MkdirTemp(ps.cfg.Dir, "copy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wo := ps.writerOptions()
	paths := make([]string, len(parts)) // "": the part holds no key
	errs := make([]error, len(parts))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(copyWorkers, len(parts)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= len(parts) {
					return
				}
				path := filepath.Join(dir, fmt.Sprintf("%06d.sst", i))
				wrote, err := writeTable(ctx, src, parts[i], prefix, path, wo)
				if err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
				if wrote {
					paths[i] = path
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	paths = slices.DeleteFunc(paths, func(p string) bool { return p == "" })
	if len(paths) == 0 {
		return nil
	}
	return ps.db.Ingest(paths)
}

// writeTable writes the keys of range kr of the view src under prefix into an sstable at path,
// synced, and reports whether the range held any key (none: no file is made).
func writeTable(ctx context.Context, src *SnapshotTx, kr keyRange, prefix []byte, path string, wo sstable.WriterOptions) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var w *sstable.Writer
	key := bytes.Clone(prefix)
	err := eachKeyIn(src, kr, func(rel, v []byte) error {
		if w == nil {
			f, err := vfs.Default.Create(path)
			if err != nil {
				return err
			}
			w = sstable.NewWriter(newBufferedWritable(f), wo)
		}
		key = append(key[:len(prefix)], rel...)
		return w.Set(key, v)
	})
	if w == nil {
		return false, err
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return true, err
}

// cutKeyRange cuts range kr of the view src into at most n ranges of about equal key space,
// in order, that together cover kr: the 8 bytes after the longest common prefix of its first
// and last keys, read as a big-endian number, are divided evenly (time-ordered UUIDs, the Go
// client's idempotency keys, divide by time). A range with fewer than two distinct keys
// there is returned whole.
func cutKeyRange(src *SnapshotTx, kr keyRange, n int) ([]keyRange, error) {
	it, err := src.snap.NewIter(&pebble.IterOptions{LowerBound: kr.from, UpperBound: kr.to})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kr.what, err)
	}
	var first, last []byte
	if it.First() {
		first = bytes.Clone(it.Key())
		if it.Last() {
			last = bytes.Clone(it.Key())
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("%s: %w", kr.what, err)
	}
	c := 0
	for c < len(first) && c < len(last) && first[c] == last[c] {
		c++
	}
	a, b := be64At(first, c), be64At(last, c)
	if first == nil || last == nil || b-a < uint64(n) {
		return []keyRange{kr}, nil
	}
	step := (b - a) / uint64(n)
	out := make([]keyRange, 0, n)
	from := kr.from
	for i := 1; i < n; i++ {
		to := binary.BigEndian.AppendUint64(bytes.Clone(first[:c]), a+step*uint64(i))
		out = append(out, keyRange{kr.what, from, to})
		from = to
	}
	return append(out, keyRange{kr.what, from, kr.to}), nil
}

// be64At reads the 8 bytes of k at offset off as a big-endian number, bytes past k's end
// read as zero.
func be64At(k []byte, off int) uint64 {
	var b [8]byte
	if off < len(k) {
		copy(b[:], k[off:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// bufferedWritable is pebble's file writable (objstorageprovider.NewFileWritable) with a
// write buffer of copyBufferBytes: Finish flushes, syncs and closes the file.
type bufferedWritable struct {
	f  vfs.File
	bw *bufio.Writer
}

var _ objstorage.Writable = (*bufferedWritable)(nil)

func newBufferedWritable(f vfs.File) *bufferedWritable {
	return &bufferedWritable{f: f, bw: bufio.NewWriterSize(f, copyBufferBytes)}
}

// Write buffers p, writing the buffer out when full.
func (w *bufferedWritable) Write(p []byte) error {
	_, err := w.bw.Write(p)
	return err
}

// Finish writes out the buffer, syncs the file and closes it.
func (w *bufferedWritable) Finish() error {
	err := w.bw.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	return errors.Join(err, w.f.Close())
}

// Abort closes the file; what it holds is not to be used.
func (w *bufferedWritable) Abort() { _ = w.f.Close() }

// writerOptions returns the options of an sstable for ps's database: its format and its
// lowest level's settings (bloom filters included).
func (ps *pebbleStore) writerOptions() sstable.WriterOptions {
	o := ps.opts.Clone()
	o.EnsureDefaults()
	wo := o.MakeWriterOptions(len(o.Levels)-1, ps.db.FormatMajorVersion().MaxTableFormat())
	wo.Cache = nil
	return wo
}
