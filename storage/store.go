package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/cells"
)

// Store is one node's SQL store holding every partition replica the node hosts. Open it with
// OpenSQLite or OpenMySQL, open each hosted partition with Partition, and Close it when the
// node stops. A Store is safe for concurrent use.
type Store struct {
	engine string
	// openPartition opens the engine side of one partition: its dialect and the pools that
	// write and read it. owned reports whether the pools belong to the partition (closed with
	// it) or to the Store.
	openPartition func(ctx context.Context, id PartitionID) (d *dialect, write, read *sql.DB, owned bool, err error)
	// closeEngine releases the engine's shared resources (the MySQL pool); nil for SQLite.
	closeEngine func() error
	// db and meta are the MySQL pool and meta database (quoted); nil and "" for SQLite. The
	// buffer table of async mode lives in meta.
	db   *sql.DB
	meta string
	// pebble is the engine of a Store opened with OpenPebble; nil for the SQL engines.
	pebble *pebbleStore
	// sqliteDir is the directory of a SQLite Store's files ("" for the other engines).
	sqliteDir string
	// sqliteSync: SQLiteConfig.Synchronous is FULL or EXTRA, so a split's copy of a file
	// (cloneSQLite) is synced as it is made (with NORMAL, the release of the copy's store
	// syncs it: see clonesqlite.go).
	sqliteSync bool
	// precopiesUsed counts the splits that started from a pre-copy (PrepareSplit): a SQLite
	// clone from its file, a pebble split from its request records.
	precopiesUsed atomic.Int64

	mu    sync.Mutex
	parts map[PartitionID]*PartitionStore
	// kept are the open pools of released partitions (PartitionStore.Release, SQLite only),
	// until their next Partition call or KeepReleased.
	kept map[PartitionID]*keptPools
	// keepFor is how long kept pools wait for their partition: KeepReleased, shortened by tests.
	keepFor time.Duration
	closed  bool
}

// Engine returns EngineSQLite ("sqlite"), EngineMySQL ("mysql") or EnginePebble ("pebble").
func (s *Store) Engine() string { return s.engine }

// SplitPrecopiesUsed returns how many splits of this store's partitions started from a
// pre-copy made ahead of them (PartitionStore.PrepareSplit) since the store opened. A split
// whose entry found the pre-copy still being made waited for it (and counts); one that found
// none, or a void one, copied at its index instead (and does not).
func (s *Store) SplitPrecopiesUsed() int64 { return s.precopiesUsed.Load() }

// Partition opens the store of partition id, which holds the shards of the range. It creates
// what the partition needs to exist (the SQLite file and its meta table; in MySQL the meta
// table is created by OpenMySQL) but no shard table: those are created by EnsureShards or
// Restore. A partition is opened once: a second call for an open id returns ErrPartitionOpen
// (close the first one to reopen it, possibly with another range). Invalid names or ranges
// return ErrInvalidConfig; a meta row written by a newer schema version is refused. Partition
// blocks on I/O until ctx is done.
func (s *Store) Partition(ctx context.Context, id PartitionID, shards cells.ShardRange) (*PartitionStore, error) {
	return s.partition(ctx, id, shards, false)
}

// PartitionForSplit is Partition for the new partition of a split of another partition of
// this Store, which the split's ShareShards then fills. On SQLite, when the partition has no
// file yet (the split's first apply), it creates none: the store it returns reports applied
// index 0, and its ShareShards clones the parent's file into place and only then opens it
// (cloneSQLite). Partition would create an empty file (its tables, its first log) that the
// clone then closes and replaces: 3 to 96 ms of each replica's application of a split on
// three loaded nodes (BENCHMARKS.md, "a SQLite split's new partition opened on its clone").
// Until ShareShards, the store's calls other than Applied, ShareShards and Close fail (its
// pools open the missing file read-write, never creating it). On the other engines, and when
// the file exists (a split applied again after a crash), it is Partition. Errors and
// blocking as Partition's.
func (s *Store) PartitionForSplit(ctx context.Context, id PartitionID, shards cells.ShardRange) (*PartitionStore, error) {
	return s.partition(ctx, id, shards, true)
}

// partition is Partition, or PartitionForSplit when unborn is set.
func (s *Store) partition(ctx context.Context, id PartitionID, shards cells.ShardRange, unborn bool) (*PartitionStore, error) {
	if err := validatePartition(id, shards); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := s.parts[id]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %s/%d", ErrPartitionOpen, id.Datastore, id.Partition)
	}
	// Reserve the id so that a concurrent call fails instead of opening the files twice.
	s.parts[id] = nil
	s.mu.Unlock()

	var p *PartitionStore
	var err error
	if unborn {
		p, err = s.openUnborn(id, shards)
	}
	if p == nil && err == nil {
		p, err = s.open(ctx, id, shards)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.closed {
		err = errors.Join(ErrClosed, p.closePools())
	}
	if err != nil {
		delete(s.parts, id)
		return nil, err
	}
	s.parts[id] = p
	return p, nil
}

func (s *Store) open(ctx context.Context, id PartitionID, shards cells.ShardRange) (*PartitionStore, error) {
	if s.pebble != nil {
		return s.openPebblePartition(ctx, id, shards)
	}
	if p, err := s.openKept(ctx, id, shards); p != nil || err != nil {
		return p, err
	}
	d, write, read, owned, err := s.openPartition(ctx, id)
	if err != nil {
		return nil, err
	}
	return checkOpened(ctx, s.newSQLPartition(id, shards, d, write, read, owned))
}

// checkOpened returns p, a SQL partition whose pools were just opened, once its meta row's
// schema version is one this build reads; else it closes p's pools and returns the error.
func checkOpened(ctx context.Context, p *PartitionStore) (*PartitionStore, error) {
	d, read, id := p.d, p.read, p.id
	_, version, err := readApplied(ctx, read, d, id)
	if err != nil && isNoTable(err) && d.engine == EngineMySQL {
		err = nil // a read-only store before the meta database reached it
	}
	if err == nil && version > schemaVersion {
		err = fmt.Errorf("storage: partition %s/%d has schema version %d, this build reads up to %d", id.Datastore, id.Partition, version, schemaVersion)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("storage: open partition %s/%d: %w", id.Datastore, id.Partition, err), p.closePools())
	}
	return p, nil
}

// newSQLPartition is the PartitionStore of id on one of the SQL engines, with its dialect and
// pools.
func (s *Store) newSQLPartition(id PartitionID, shards cells.ShardRange, d *dialect, write, read *sql.DB, owned bool) *PartitionStore {
	return &PartitionStore{
		store:   s,
		id:      id,
		shards:  shards,
		d:       d,
		write:   write,
		read:    read,
		owned:   owned,
		writer:  make(chan struct{}, 1),
		created: make(map[int]bool),
		indexes: make(map[string]*indexState),
	}
}

// Close closes every open partition and then the connection pools. Operations in progress may
// fail; later calls on the Store or its partitions return ErrClosed. Open snapshots and write
// transactions should be ended first. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var errs []error
	for id, k := range s.kept {
		k.timer.Stop()
		errs = append(errs, k.close())
		delete(s.kept, id)
	}
	parts := make([]*PartitionStore, 0, len(s.parts))
	for _, p := range s.parts {
		if p != nil {
			parts = append(parts, p)
		}
	}
	s.mu.Unlock()
	for _, p := range parts {
		errs = append(errs, p.Close())
	}
	if s.closeEngine != nil {
		errs = append(errs, s.closeEngine())
	}
	return errors.Join(errs...)
}

// forget removes p from the open partitions.
func (s *Store) forget(p *PartitionStore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[p.id] == p {
		delete(s.parts, p.id)
	}
}

// PartitionStore is the tables of one partition on one node: the entity table of every shard
// in its range, the index tables of its shards, its meta row and its KV rows.
//
// It has one writer, the partition's FSM goroutine, which alone calls EnsureShards,
// EnsureIndex, DropIndex, IndexNames, Begin (and the WriteTx methods) and Restore; these never
// run concurrently with each other, and a call made while the write transaction is open
// returns ErrTxOpen. Reads (GetCell, GetLatest, GetRow, ScanShard, ReadLog, LocationAt, ScanKV,
// QueryIndex, IndexStats, Applied, MaxAddedID) and snapshots may be used from any goroutine,
// concurrently with the writer, and see committed data only.
type PartitionStore struct {
	store    *Store
	id       PartitionID
	shardsMu sync.RWMutex
	shards   cells.ShardRange // guarded by shardsMu: SetShards changes it
	d        *dialect
	// write runs write transactions and DDL; read runs reads and snapshots. They are the same
	// pool in MySQL.
	write, read *sql.DB
	// owned: write and read belong to this partition and are closed with it.
	owned bool
	// writer is held (one token) while a write transaction or another writer call
	// (EnsureShards, EnsureIndex, DropIndex, IndexNames, Restore) runs.
	writer chan struct{}
	// created holds the shards whose entity tables exist; guarded by writer.
	created map[int]bool
	// indexes holds, by index name, the shards whose index table is known to exist (and with
	// which columns); guarded by writer.
	indexes map[string]*indexState
	closed  atomic.Bool
	// fence, when set, is the storage cluster whose placement this copy must match (SetFence).
	fence atomic.Pointer[string]
	// stmts caches the write connection's prepared lookup and insert statements, by SQL text
	// (SQLite only: see stmtCache).
	stmts stmtCache
	// readStmts caches the read pool's prepared point reads (SQLite only, as stmts).
	readStmts stmtCache
	// pb is the engine side of a pebble partition (OpenPebble); nil for the SQL engines, whose
	// d, write and read it replaces. Every method of PartitionStore, WriteTx and SnapshotTx
	// starts with the pebble branch when pb is set.
	pb *pebblePart
	// precopies are the pre-copies of this partition's store for its coming splits (SQLite and
	// pebble: PrepareSplit).
	precopies precopySet
	// strays drops the tables of shards outside the range (SQLite only: strays.go).
	strays straySweeper
	// unborn: a split's new partition opened by PartitionForSplit on SQLite with no file yet,
	// whose pools never create one; cleared when its ShareShards gives it its file. Read and
	// changed under the writer token, or before the store is shared.
	unborn atomic.Bool
}

// ID returns the partition's id.
func (p *PartitionStore) ID() PartitionID { return p.id }

// Shards returns the partition's shard range.
func (p *PartitionStore) Shards() cells.ShardRange {
	p.shardsMu.RLock()
	defer p.shardsMu.RUnlock()
	return p.shards
}

// SetShards changes the partition's shard range (a split shrinks it: see WriteTx.DropShards).
// Calls naming a shard outside the new range fail with ErrShardRange from then on. On SQLite,
// the tables the partition's file holds of shards outside a non-empty r are strays, which a
// goroutine then drops one at a time between writer calls (strays.go); r must be the range
// the file stores (the state machine's), or a wider one.
func (p *PartitionStore) SetShards(r cells.ShardRange) {
	p.shardsMu.Lock()
	p.shards = r
	p.shardsMu.Unlock()
	p.kickStrays(r)
}

// Close releases the partition's resources (for SQLite, its two connection pools) and removes
// it from its Store, so that Store.Partition may open it again. Later calls return ErrClosed;
// operations in progress may fail. Close is idempotent.
func (p *PartitionStore) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	p.store.forget(p)
	p.dropPrecopies()
	p.stopStrays()
	return p.closePools()
}

func (p *PartitionStore) closePools() error {
	if !p.owned || p.pb != nil {
		return nil
	}
	return errors.Join(p.read.Close(), p.write.Close())
}

// checkShard returns ErrClosed or ErrShardRange when shard cannot be used now.
func (p *PartitionStore) checkShard(shard int) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if r := p.Shards(); !r.Contains(shard) {
		return fmt.Errorf("%w: shard %d, range [%d, %d]", ErrShardRange, shard, r.First, r.Last)
	}
	return nil
}

// fail wraps err with the operation, or returns ErrClosed if the partition was closed meanwhile
// (the driver then reports a closed pool, which says less).
func (p *PartitionStore) fail(op string, err error) error {
	if p.closed.Load() {
		return fmt.Errorf("storage: %s: %w: %w", op, ErrClosed, err)
	}
	return fmt.Errorf("storage: %s: %w", op, err)
}

// lockWriter takes the writer token, or returns ErrTxOpen if it is held: by another writer
// call, at once; by the stray sweeper, which holds it for one DROP TABLE (strays.go), when it
// is still held after strayWait.
func (p *PartitionStore) lockWriter() error {
	select {
	case p.writer <- struct{}{}:
		return nil
	default:
	}
	if !p.strays.holding.Load() {
		return ErrTxOpen
	}
	t := time.NewTimer(strayWait)
	defer t.Stop()
	select {
	case p.writer <- struct{}{}:
		return nil
	case <-t.C:
		return ErrTxOpen
	}
}

func (p *PartitionStore) unlockWriter() { <-p.writer }

// EnsureShards creates the tables of the given shards if they are missing. The FSM calls it
// before Begin for the shards a batch touches: it must run outside a write transaction (MySQL
// DDL commits implicitly), and returns ErrTxOpen if one is open. Shards outside the range
// return ErrShardRange and create nothing. Creating is idempotent and remembered, so calls for
// shards that exist cost no I/O after the first. In SQLite the missing tables are created in
// one transaction; in MySQL each shard's database and table are created in turn, so an error
// may leave some of them created (harmless: they are empty).
func (p *PartitionStore) EnsureShards(ctx context.Context, shards []int) error {
	for _, s := range shards {
		if err := p.checkShard(s); err != nil {
			return err
		}
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	return p.ensureLocked(ctx, shards)
}

// ensureLocked creates the missing tables of shards; the caller holds the writer token.
func (p *PartitionStore) ensureLocked(ctx context.Context, shards []int) error {
	var missing []int
	seen := make(map[int]bool, len(shards))
	for _, s := range shards {
		if !p.created[s] && !seen[s] {
			missing = append(missing, s)
			seen[s] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if p.pb != nil {
		// Pebble has no tables: a shard's keys exist once written.
		for _, s := range missing {
			p.created[s] = true
		}
		return nil
	}
	if p.d.engine == EngineSQLite {
		// DDL is transactional in SQLite: one transaction, one fsync.
		tx, err := p.write.BeginTx(ctx, nil)
		if err != nil {
			return p.fail("create shard tables", err)
		}
		defer tx.Rollback()
		for _, s := range missing {
			for _, stmt := range p.d.shardDDL(s) {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return p.fail(fmt.Sprintf("create tables of shard %d", s), err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			return p.fail("create shard tables", err)
		}
		for _, s := range missing {
			p.created[s] = true
		}
		return nil
	}
	for _, s := range missing {
		for _, stmt := range p.d.shardDDL(s) {
			if _, err := p.write.ExecContext(ctx, stmt); err != nil {
				return p.fail(fmt.Sprintf("create tables of shard %d", s), err)
			}
		}
		p.created[s] = true
	}
	return nil
}
