package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/pebblelog"
)

// EnginePebble is the engine name of a store opened with OpenPebble.
const EnginePebble = "pebble"

// Defaults of PebbleConfig.
const (
	// DefaultPebbleCacheMiB is PebbleConfig.CacheMiB when zero.
	DefaultPebbleCacheMiB = 64
	// DefaultPebbleMemTableMiB is PebbleConfig.MemTableMiB when zero.
	DefaultPebbleMemTableMiB = 32
)

// pebbleMemTables is how many memtables pebble may hold (the one taking writes and those waiting
// for their flush) before it makes writes wait.
const pebbleMemTables = 4

// pebbleSchemaVersion is the key layout version kept with each partition's applied state; a
// partition written by a newer layout is refused. Version 2 added the origin to log entries
// (appendLogValue), which a build of version 1 would misread; it reads version 1's values as
// they are.
const pebbleSchemaVersion = 2

// PebbleConfig configures the log-structured embedded engine (OpenPebble). Zero fields take
// their defaults; Validate reports invalid ones.
type PebbleConfig struct {
	// Dir is the directory of the node's pebble database. Created if missing.
	Dir string
	// CacheMiB is pebble's block cache, shared by every partition of the node, in MiB (default
	// 64; at least 8). It holds the table blocks reads and unique-key probes have read (index
	// and bloom filter blocks above all), besides the memory of the memtables, which pebble
	// reserves in the same cache.
	CacheMiB int
	// MemTableMiB is the size of one memtable in MiB (default 32; 4 to 1024): writes are kept
	// in memory up to this size before pebble writes them into a table file. Pebble keeps up to
	// four memtables before it makes writes wait for their flushes.
	MemTableMiB int
	// MigrateSQLiteDir, if set, is the directory of an SQLite store (SQLiteConfig.Dir) whose
	// partitions move into this store: the first time Partition opens a partition that this
	// store has never held and whose SQLite file is there, it copies the file's content
	// (cells, logs, KV rows, index tables, request records and the applied state), then moves
	// the file (and its -wal and -shm files) into MigrateSQLiteDir + ".migrated".
	MigrateSQLiteDir string
	// Logger receives pebble's lines (at Debug) and the migrations (at Info). Default
	// slog.Default().
	Logger *slog.Logger
}

func (c PebbleConfig) withDefaults() PebbleConfig {
	if c.CacheMiB == 0 {
		c.CacheMiB = DefaultPebbleCacheMiB
	}
	if c.MemTableMiB == 0 {
		c.MemTableMiB = DefaultPebbleMemTableMiB
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every invalid field of c (after defaults), each wrapping ErrInvalidConfig,
// joined with errors.Join; nil if c is valid.
func (c PebbleConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Dir == "" {
		errs = append(errs, fmt.Errorf("%w: pebble: Dir is empty", ErrInvalidConfig))
	}
	if c.CacheMiB < 8 {
		errs = append(errs, fmt.Errorf("%w: pebble: CacheMiB %d, want at least 8", ErrInvalidConfig, c.CacheMiB))
	}
	if c.MemTableMiB < 4 || c.MemTableMiB > 1024 {
		errs = append(errs, fmt.Errorf("%w: pebble: MemTableMiB %d, want 4 to 1024", ErrInvalidConfig, c.MemTableMiB))
	}
	return errors.Join(errs...)
}

// pebbleStore is the engine side of a Store opened with OpenPebble: one database for every
// partition of the node.
type pebbleStore struct {
	db  *pebble.DB
	cfg PebbleConfig
	// opts are the options the database was opened with (ingestCopy writes its tables with them).
	opts *pebble.Options
	// genMu serializes the allocation of generations (the data prefixes of partitions).
	genMu sync.Mutex
	// dirMu serializes the changes of directory entries that release generations
	// (pebble_dir.go), so that each sees the directory the others left.
	dirMu sync.Mutex
	// migrate is the SQLite store partitions are migrated from, opened on first need;
	// guarded by migrateMu.
	migrateMu sync.Mutex
	migrate   *Store
	// closeMu guards closed, set (under the write lock, which waits for its readers) before
	// the database closes: a caller that may run while the Store closes (ShardSizes, asked by
	// the size sampler) holds the read lock and checks closed (open).
	closeMu sync.RWMutex
	closed  bool
}

// open takes ps's close guard's read lock and returns its release, or ErrClosed (nothing to
// release) once the Store is closing.
func (ps *pebbleStore) open() (func(), error) {
	ps.closeMu.RLock()
	if ps.closed {
		ps.closeMu.RUnlock()
		return nil, ErrClosed
	}
	return ps.closeMu.RUnlock, nil
}

// Global keys of the pebble database; every partition's data lives under a data prefix of its
// own (dataTag, then its generation), named by its directory entry.
const (
	// dirTag + datastore + 0x00 + partition (4 bytes, big-endian) -> the generation (8 bytes).
	dirTag = 'd'
	// genKey -> the next generation to allocate (8 bytes).
	genKey = "g"
	// dataTag + generation (8 bytes) starts the keys of one partition's data.
	dataTag = 'p'
	// dataPrefixLen is the length of a data prefix.
	dataPrefixLen = 9
)

// Keys within a partition's data prefix: a tag byte, then the parts of the key.
const (
	// tagApplied -> applied index, applied term, layout version (8 bytes each).
	tagApplied = 'a'
	// tagKV + key -> value.
	tagKV = 'k'
	// tagCell + shard (2) + row key (16) + column (escaped) + ref key (8): the unique key of a
	// cell -> its added_id (8).
	tagCell = 'c'
	// tagLog + shard (2) + added_id (8): the shard's log -> the cell (appendLogValue).
	tagLog = 'l'
	// tagRequest + ID (16) -> created_at (8) + record.
	tagRequest = 'r'
	// tagRequestTime + created_at (8) + ID (16) -> nothing: request records in time order.
	tagRequestTime = 't'
	// tagIndexDef + name + 0x00 + shard (2) -> the columns' signature: the index's table on
	// that shard exists.
	tagIndexDef = 'x'
	// tagIndex + name + 0x00 + shard (2) + order + ...: index entries (see pebble_index.go).
	tagIndex = 'i'
)

// OpenPebble opens (creating cfg.Dir if missing) the log-structured embedded store: one pebble
// database holding every partition the node hosts, each under a key prefix of its own. It is
// meant for raft mode (the async mode's buffer table, placement rows and locks are MySQL's).
// Writes are committed without an fsync of pebble's write-ahead log (pebble.NoSync; Restore
// syncs): the raft log, which is synced, covers a crash, as SQLite's synchronous=NORMAL does.
// Only one Store may have the directory open: pebble locks it. Zero fields of cfg take their
// defaults; an invalid cfg returns errors wrapping ErrInvalidConfig.
func OpenPebble(ctx context.Context, cfg PebbleConfig) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("storage: pebble dir: %w", err)
	}
	// Pebble reserves the memory of its memtables in the block cache, so the cache is CacheMiB
	// for blocks besides the memtables' reservation (of at most pebbleMemTables of them):
	// with the cache no larger than that, nothing would stay cached.
	cache := pebble.NewCache(int64(cfg.CacheMiB+pebbleMemTables*cfg.MemTableMiB) << 20)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                uint64(cfg.MemTableMiB) << 20,
		MemTableStopWritesThreshold: pebbleMemTables,
		Logger:                      pebblelog.Logger{L: cfg.Logger.With("store", cfg.Dir), Panic: "storage"},
	}
	// Bloom filters answer the unique-key probes of new cells (every put) without reading a
	// table's blocks.
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("storage: open pebble %s: %w", cfg.Dir, err)
	}
	ps := &pebbleStore{db: db, cfg: cfg, opts: opts}
	if err := ps.collectGarbage(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	s := &Store{engine: EnginePebble, pebble: ps, parts: make(map[PartitionID]*PartitionStore)}
	s.closeEngine = func() error {
		ps.closeMu.Lock()
		ps.closed = true
		ps.closeMu.Unlock()
		ps.migrateMu.Lock()
		m := ps.migrate
		ps.migrateMu.Unlock()
		var errs []error
		if m != nil {
			errs = append(errs, m.Close())
		}
		return errors.Join(append(errs, db.Close())...)
	}
	return s, nil
}

// collectGarbage deletes the data of generations no directory entry names (what a Restore or
// a split's copy interrupted by a crash had written) and the temporary sstables of such a copy.
func (ps *pebbleStore) collectGarbage() error {
	// The sstables of a copy a crash interrupted (ingestCopy) were never ingested.
	if left, err := filepath.Glob(filepath.Join(ps.cfg.Dir, "copy-*")); err == nil {
		for _, d := range left {
			_ = os.RemoveAll(d)
		}
	}
	live := map[uint64]bool{}
	it, err := ps.db.NewIter(&pebble.IterOptions{LowerBound: []byte{dirTag}, UpperBound: []byte{dirTag + 1}})
	if err != nil {
		return fmt.Errorf("storage: pebble directory: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		if e, err := decodeDir(it.Value()); err == nil {
			live[e.state], live[e.shards] = true, true
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("storage: pebble directory: %w", err)
	}
	it, err = ps.db.NewIter(&pebble.IterOptions{LowerBound: []byte{dataTag}, UpperBound: []byte{dataTag + 1}})
	if err != nil {
		return fmt.Errorf("storage: pebble data: %w", err)
	}
	b := ps.db.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); {
		k := it.Key()
		if len(k) < dataPrefixLen {
			it.Next()
			continue
		}
		gen := binary.BigEndian.Uint64(k[1:dataPrefixLen])
		if !live[gen] {
			if err := b.DeleteRange(dataPrefix(gen), dataPrefix(gen+1), nil); err != nil {
				return err
			}
		}
		it.SeekGE(dataPrefix(gen + 1))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("storage: pebble data: %w", err)
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(pebble.Sync)
}

// dataPrefix is the data prefix of generation gen.
func dataPrefix(gen uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{dataTag}, gen)
}

// dirKey is the directory key of partition id.
func dirKey(id PartitionID) []byte {
	k := append([]byte{dirTag}, id.Datastore...)
	return binary.BigEndian.AppendUint32(append(k, 0), uint32(id.Partition))
}

// allocGen returns a generation never used before. The next one is recorded without a sync:
// a batch that commits with pebble.Sync afterwards (a new directory entry) syncs it too.
func (ps *pebbleStore) allocGen() (uint64, error) {
	ps.genMu.Lock()
	defer ps.genMu.Unlock()
	gen := uint64(1)
	v, closer, err := ps.db.Get([]byte(genKey))
	switch {
	case err == nil:
		if len(v) == 8 {
			gen = binary.BigEndian.Uint64(v)
		}
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return 0, err
	}
	return gen, ps.db.Set([]byte(genKey), binary.BigEndian.AppendUint64(nil, gen+1), pebble.NoSync)
}

// pebblePart is the engine side of a pebble partition.
type pebblePart struct {
	ps *pebbleStore
	db *pebble.DB
	// mu: readers hold it shared while they use prefix; Restore holds it exclusively while it
	// switches the partition to its new generation.
	mu sync.RWMutex
	// prefix is the generation prefix of the partition's state (applied state, KV rows,
	// request records), cellPrefix that of its shards' data (cells, logs, index tables): the
	// same one unless a split made the partition share its parent's (pebble_dir.go).
	prefix, cellPrefix []byte
	dir                []byte
	// high holds, by shard, an added_id at or above the highest one committed (so an Insert
	// above it needs no probe of its log key); a shard not in it is unknown. Guarded by the
	// writer token; Restore clears it.
	high map[int]int64
}

// openPebblePartition opens (or creates, or migrates from SQLite) partition id of s.
func (s *Store) openPebblePartition(ctx context.Context, id PartitionID, shards cells.ShardRange) (*PartitionStore, error) {
	ps := s.pebble
	pp := &pebblePart{ps: ps, db: ps.db, dir: dirKey(id), high: map[int]int64{}}
	p := &PartitionStore{
		store: s, id: id, shards: shards, d: pebbleDialect(), pb: pp,
		writer: make(chan struct{}, 1), created: make(map[int]bool), indexes: make(map[string]*indexState),
	}
	v, closer, err := ps.db.Get(pp.dir)
	switch {
	case err == nil:
		e, err := decodeDir(v)
		closer.Close()
		if err != nil {
			return nil, fmt.Errorf("storage: open partition %s/%d: %w", id.Datastore, id.Partition, err)
		}
		pp.prefix, pp.cellPrefix = dataPrefix(e.state), dataPrefix(e.shards)
	case errors.Is(err, pebble.ErrNotFound):
		gen, err := ps.allocGen()
		if err != nil {
			return nil, fmt.Errorf("storage: open partition %s/%d: %w", id.Datastore, id.Partition, err)
		}
		pp.prefix, pp.cellPrefix = dataPrefix(gen), dataPrefix(gen)
		// A migration's Restore writes the directory entry when it switches to the copy, so a
		// migration cut short leaves none and runs again at the next open.
		migrated, err := s.migrateSQLite(ctx, p)
		if err != nil {
			return nil, err
		}
		if !migrated {
			if err := ps.db.Set(pp.dir, binary.BigEndian.AppendUint64(nil, gen), pebble.Sync); err != nil {
				return nil, fmt.Errorf("storage: open partition %s/%d: %w", id.Datastore, id.Partition, err)
			}
		}
		return p, nil
	default:
		return nil, fmt.Errorf("storage: open partition %s/%d: %w", id.Datastore, id.Partition, err)
	}
	if _, version, err := pp.applied(ps.db); err != nil {
		return nil, fmt.Errorf("storage: open partition %s/%d: %w", id.Datastore, id.Partition, err)
	} else if version > pebbleSchemaVersion {
		return nil, fmt.Errorf("storage: partition %s/%d has layout version %d, this build reads up to %d", id.Datastore, id.Partition, version, pebbleSchemaVersion)
	}
	return p, nil
}

// reader is what pebble reads go through: the database, a snapshot, an indexed batch.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// key returns the prefix of the partition's generation that holds keys of tag (prefixFor)
// followed by tag, in a new slice with room for n more bytes. The caller holds pp.mu (shared)
// or the writer token.
func (pp *pebblePart) key(tag byte, n int) []byte {
	k := make([]byte, 0, dataPrefixLen+1+n)
	return append(append(k, pp.prefixFor(tag)...), tag)
}

// rlock takes pp.mu shared and returns its unlock.
func (pp *pebblePart) rlock() func() {
	pp.mu.RLock()
	return pp.mu.RUnlock
}

// applied reads the applied state and layout version from r (zero when none was written).
func (pp *pebblePart) applied(r reader) (AppliedState, int64, error) {
	v, closer, err := r.Get(pp.key(tagApplied, 0))
	if errors.Is(err, pebble.ErrNotFound) {
		return AppliedState{}, 0, nil
	}
	if err != nil {
		return AppliedState{}, 0, err
	}
	defer closer.Close()
	if len(v) != 24 {
		return AppliedState{}, 0, fmt.Errorf("storage: applied state of %d bytes, want 24", len(v))
	}
	return AppliedState{Index: binary.BigEndian.Uint64(v), Term: binary.BigEndian.Uint64(v[8:])}, int64(binary.BigEndian.Uint64(v[16:])), nil
}

// appliedValue encodes a (with the layout version).
func appliedValue(a AppliedState) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 24), a.Index)
	v = binary.BigEndian.AppendUint64(v, a.Term)
	return binary.BigEndian.AppendUint64(v, pebbleSchemaVersion)
}

// getCopy returns a copy of the value of k in r, or nil and false when k is absent.
func getCopy(r reader, k []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

// exists reports whether k is stored in r.
func exists(r reader, k []byte) (bool, error) {
	_, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}

// prefixIter returns an iterator of r over the keys that start with prefix.
func prefixIter(r reader, prefix []byte) (*pebble.Iterator, error) {
	end, ok := prefixEnd(string(prefix))
	o := &pebble.IterOptions{LowerBound: prefix}
	if ok {
		o.UpperBound = end
	}
	return r.NewIter(o)
}

// Order-preserving encodings of key parts: bytewise comparison of the encodings orders as the
// values do.

// appendI64 appends v as 8 big-endian bytes with the sign bit flipped.
func appendI64(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63))
}

// readI64 reads what appendI64 wrote.
func readI64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// appendShard appends a shard number (0 to 9999) as 2 big-endian bytes.
func appendShard(b []byte, shard int) []byte { return binary.BigEndian.AppendUint16(b, uint16(shard)) }

// appendEsc appends s so that the encodings of two strings compare as the strings do, and no
// encoding is a prefix of another: each 0x00 byte becomes 0x00 0xff, and 0x00 0x01 ends it.
func appendEsc(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, 0, 1)
}

// readEsc reads a string appendEsc wrote at the start of b and returns it and the bytes after.
func readEsc(b []byte) (string, []byte, error) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case 1:
			if out == nil {
				return string(b[:i]), b[i+2:], nil
			}
			return string(append(out, b[:i]...)), b[i+2:], nil
		case 0xff:
			out = append(append(out, b[:i]...), 0)
			b = b[i+2:]
			i = -1
			continue
		}
		break
	}
	return "", nil, errors.New("storage: malformed escaped string in a key")
}

// migrateSQLite copies the SQLite file of p's partition, if ps.cfg.MigrateSQLiteDir holds one,
// into p (a partition this store has just created, with no directory entry yet: the copy's
// Restore writes it) and moves the file aside. It reports whether it migrated.
func (s *Store) migrateSQLite(ctx context.Context, p *PartitionStore) (bool, error) {
	ps := s.pebble
	if ps.cfg.MigrateSQLiteDir == "" {
		return false, nil
	}
	path := sqlitePath(ps.cfg.MigrateSQLiteDir, p.id)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("storage: migrate %s: %w", path, err)
	}
	ps.migrateMu.Lock()
	if ps.migrate == nil {
		m, err := OpenSQLite(ctx, SQLiteConfig{Dir: ps.cfg.MigrateSQLiteDir})
		if err != nil {
			ps.migrateMu.Unlock()
			return false, fmt.Errorf("storage: migrate %s: %w", path, err)
		}
		ps.migrate = m
	}
	m := ps.migrate
	ps.migrateMu.Unlock()
	src, err := m.Partition(ctx, p.id, p.Shards())
	if err != nil {
		return false, fmt.Errorf("storage: migrate %s: %w", path, err)
	}
	n, err := copyPartition(ctx, src, p)
	if err = errors.Join(err, src.Close()); err != nil {
		return false, fmt.Errorf("storage: migrate %s: %w", path, err)
	}
	moved := filepath.Clean(ps.cfg.MigrateSQLiteDir) + ".migrated"
	if err := os.MkdirAll(moved, 0o750); err != nil {
		return true, fmt.Errorf("storage: migrate %s: %w", path, err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		err := os.Rename(path+suffix, filepath.Join(moved, filepath.Base(path)+suffix))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return true, fmt.Errorf("storage: migrate %s: move the file aside: %w", path, err)
		}
	}
	ps.cfg.Logger.Info("migrated a partition from SQLite", "datastore", p.id.Datastore, "partition", p.id.Partition,
		"cells", n, "from", path, "moved_to", moved)
	return true, nil
}
