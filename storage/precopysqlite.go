package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// A split on SQLite clones the parent's file at the split's index, while the parent applies
// nothing (clonesqlite.go). PrepareSplit moves the bulk of that copy ahead of the split, while
// the parent keeps applying: it checkpoints the parent's log into its file and restarts the log
// (restartLog, on a connection of its own beside the parent's writer), pins a read transaction
// on the parent, and copies the parent's file, less its free pages, to the right half's
// pre-copy (its file name plus ".precopy"), synced. The pinned reader keeps the parent's file
// as SQLite's log rules leave it: a checkpoint writes into the file only pages of commits the
// reader sees, which the log keeps, and never restarts the log past the reader; a reader that
// took no frame of the log (every frame was in the file) lets no checkpoint write at all
// (sqlite.org/wal.html, "Checkpoint starvation"; the WAL_READ_LOCK(0) rule of wal.c). So at the
// split, the pre-copy and the log's current generation, copied then under the parent's writer,
// open as the parent's state at the split, exactly as the clone's copy of both files does: a
// page of the pre-copy that a checkpoint changed meanwhile has a frame in that log, which
// overrides it. The split's path copies that log, not the file, and the close of the right
// half's store that makes it durable checkpoints only that log into a file already synced.
// The log's current generation is what the split copies: SQLite restarts a log only when a
// writer finds every frame checkpointed and no reader on the log, which a busy parent's readers
// and writers rarely leave it, so a passive checkpoint alone left the log growing from where
// it was, and the split copied its every frame since the last restart (up to the checkpoint
// interval's pages and more: 19 to 119 ms of a split's application at 500,000 cells,
// BENCHMARKS.md). The restart makes it the commits since the pre-copy.
//
// A pre-copy not used within PrecopyKeep is dropped (its pin released, its file deleted), as is
// every pre-copy of a parent that closes; a split with no pre-copy clones as before.

// PrecopyKeep is how long a pre-copy (PrepareSplit) waits for its split before it is dropped.
const PrecopyKeep = 10 * time.Second

// precopyKeep is PrecopyKeep, shortened by tests.
var precopyKeep = PrecopyKeep

// precopySuffix names a pre-copy: the right half's file name plus it.
const precopySuffix = ".precopy"

// precopy is one pre-copy of a parent's store for the split into partition right: of its
// file on SQLite (path, pin, pinDB), of its request records on pebble (pebble,
// precopypebble.go).
type precopy struct {
	right  int
	path   string
	pebble *pebblePrecopy
	done   chan struct{} // closed when the copy ended; err then says how
	err    error
	pin    *sql.Tx     // the parent's read transaction, until used or dropped
	pinDB  *sql.DB     // pin's connection
	timer  *time.Timer // drops it after PrecopyKeep; set before done closes
	once   sync.Once   // release
	owner  *precopySet // where it is registered
}

// precopySet holds a partition's pre-copies, by the split's right partition.
type precopySet struct {
	mu sync.Mutex
	m  map[int]*precopy
}

// release ends pc's pin and deletes its file (when still there), or on pebble its generation
// unless a split used it, once.
func (pc *precopy) release() {
	pc.once.Do(func() {
		<-pc.done
		if pc.timer != nil {
			pc.timer.Stop()
		}
		if pc.pin != nil {
			_ = pc.pin.Rollback()
			_ = pc.pinDB.Close()
		}
		if pc.pebble != nil {
			pc.pebble.release()
			return
		}
		_ = os.Remove(pc.path)
	})
}

// drop removes pc from its registry and releases it.
func (pc *precopy) drop() {
	pc.owner.mu.Lock()
	if pc.owner.m[pc.right] == pc {
		delete(pc.owner.m, pc.right)
	}
	pc.owner.mu.Unlock()
	pc.release()
}

// PrepareSplit makes, for a split of this partition whose right half will be partition right,
// the pre-copy that the split then starts from: on SQLite of its file, which the split's clone
// starts from (see above); on pebble of its request records, which ShareShards brings up to
// the split (precopypebble.go). It returns when the pre-copy is made, or at once when one for
// right is made already; a call while another makes it waits for that one. It is a no-op (nil)
// on MySQL. The pre-copy is dropped after PrecopyKeep unless the split uses it. Errors (the
// copy failed; ctx ended, which does not stop a copy under way) leave the split to copy it all
// as before. Blocks on I/O: on SQLite the size of the parent's pages in use and a checkpoint of
// its log; on pebble the parent's request records, written as sstables and ingested.
func (p *PartitionStore) PrepareSplit(ctx context.Context, right int) error {
	if p.pb == nil && (p.d == nil || p.d.engine != EngineSQLite) {
		return nil
	}
	if p.closed.Load() {
		return ErrClosed
	}
	if right < 0 || right == p.id.Partition {
		return fmt.Errorf("%w: pre-copy of partition %d for partition %d", ErrInvalidConfig, p.id.Partition, right)
	}
	pcs := &p.precopies
	pcs.mu.Lock()
	pc := pcs.m[right]
	mine := pc == nil
	if mine {
		pc = &precopy{right: right, done: make(chan struct{}), owner: pcs}
		if p.pb != nil {
			// Registered before its snapshot is taken: every commit from here on adds the
			// request IDs it touched (noteRequests).
			pc.pebble = &pebblePrecopy{ps: p.pb.ps, touched: map[uuid.UUID]struct{}{}}
		} else {
			pc.path = sqlitePath(p.store.sqliteDir, PartitionID{Datastore: p.id.Datastore, Partition: right}) + precopySuffix
		}
		if pcs.m == nil {
			pcs.m = map[int]*precopy{}
		}
		pcs.m[right] = pc
	}
	pcs.mu.Unlock()
	if mine {
		go func() {
			var err error
			if pc.pebble != nil {
				err = p.precopyPebble(pc.pebble)
			} else {
				err = p.precopy(pc)
			}
			pc.err = err
			if err == nil {
				pc.timer = time.AfterFunc(precopyKeep, pc.drop)
			}
			close(pc.done)
			if err != nil || p.closed.Load() {
				pc.drop() // failed, or p closed meanwhile (its Close may have run already)
			}
		}()
	}
	select {
	case <-pc.done:
		return pc.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// precopy makes pc on SQLite (PrepareSplit's steps) and sets its pin.
func (p *PartitionStore) precopy(pc *precopy) error {
	ctx, cancel := context.WithTimeout(context.Background(), PrecopyKeep)
	defer cancel()
	path := sqlitePath(p.store.sqliteDir, p.id)
	if p.closed.Load() {
		return ErrClosed
	}
	// A connection of the pre-copy's own, beside the parent's pools (whose read connections
	// it does not take: a pool of one would wait for the pin). The parent's pools stay open
	// while it is (Close drops pre-copies first), so its close checkpoints nothing. mode=rw:
	// it never creates the file of a partition deleted meanwhile.
	db, err := sql.Open("sqlite", sqliteURI(path, fmt.Sprintf("mode=rw&_pragma=busy_timeout(%d)", sqliteBusyTimeoutMillis)))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	if err := restartLog(ctx, db); err != nil {
		return errors.Join(fmt.Errorf("storage: pre-copy of partition %d: checkpoint: %w", p.id.Partition, err), db.Close())
	}
	// Deferred: a read transaction, as it only reads. Not under ctx, which would roll it back
	// when it ends: the pin lasts until the pre-copy is used or dropped.
	pin, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		return errors.Join(p.fail("pre-copy: pin a reader", err), db.Close())
	}
	// A read of a table starts the pinned transaction's snapshot (sqlite_dbpage alone does
	// not hold one); the free pages are those of that snapshot, and the log keeps every later
	// change to them.
	var n int
	err = pin.QueryRowContext(ctx, "SELECT count(*) FROM meta").Scan(&n)
	var skip []uint32
	var pageSize int
	if err == nil {
		skip, pageSize, err = freePages(ctx, pin)
	}
	if err == nil {
		err = copyFileSparse(path, pc.path, -1, pageSize, skip, true)
	}
	if err != nil {
		_ = pin.Rollback()
		return errors.Join(fmt.Errorf("storage: pre-copy of partition %d: %w", p.id.Partition, err), db.Close())
	}
	pc.pin, pc.pinDB = pin, db
	return nil
}

// precopyRestartWait bounds how long a pre-copy's restart of the parent's log (restartLog)
// waits for the parent's readers, its writer held meanwhile.
const precopyRestartWait = 50 * time.Millisecond

// restartWait is precopyRestartWait, lengthened by tests.
var restartWait = precopyRestartWait

// restartLog checkpoints the log of the database of db (a pool of one connection whose busy
// timeout is sqliteBusyTimeoutMillis) into its file and, when it can, restarts the log, so
// that the log the split copies holds only the commits made after this call (see above).
// First a passive checkpoint, which waits for no reader or writer and blocks none, writes
// what it can; then a restarting one (wal_checkpoint(RESTART)) writes the frames committed
// since and, once no reader reads from the log, starts its next generation from its first
// frame. The restarting checkpoint holds the database's writer while it waits for readers, for
// at most restartWait: a reader still on the log then (a long log read) leaves the log as the
// passive checkpoint left it, which the split copies whole, as before. So does a restarting
// checkpoint that fails: only the passive checkpoint's error, or a failure to set the
// connection's busy timeout, is returned.
func restartLog(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", restartWait.Milliseconds())); err != nil {
		return err
	}
	var busy, logged, done int
	_ = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &logged, &done)
	_, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", sqliteBusyTimeoutMillis))
	return err
}

// takePrecopy removes and returns the pre-copy of p for the split into partition right, once
// made (it waits for one under way, until ctx ends), or nil when there is none, it failed, or
// (pebble) it was voided. The caller installs it (its file, or its generation) and releases it.
func (p *PartitionStore) takePrecopy(ctx context.Context, right int) *precopy {
	pcs := &p.precopies
	pcs.mu.Lock()
	pc := pcs.m[right]
	delete(pcs.m, right)
	pcs.mu.Unlock()
	if pc == nil {
		return nil
	}
	select {
	case <-pc.done:
	case <-ctx.Done():
		go pc.release()
		return nil
	}
	if pc.err != nil {
		return nil
	}
	if pc.timer != nil && !pc.timer.Stop() {
		return nil // dropped meanwhile
	}
	if pc.pebble != nil {
		if pc.pebble.void {
			pc.release() // a commit changed the parent's records past what it tracks
			return nil
		}
		return pc // counted once ShareShards uses it
	}
	p.store.precopiesUsed.Add(1)
	return pc
}

// dropPrecopies releases every pre-copy of p (p closes), waiting for those under way.
func (p *PartitionStore) dropPrecopies() {
	pcs := &p.precopies
	pcs.mu.Lock()
	all := pcs.m
	pcs.m = nil
	pcs.mu.Unlock()
	for _, pc := range all {
		pc.release()
	}
}

// removeStalePrecopies deletes the pre-copies left in dir by an earlier process (none of its
// pins survived it).
func removeStalePrecopies(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), precopySuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
