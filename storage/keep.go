package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/schemaless-db/schemaless/cells"
)

// A split's new partition on SQLite is opened twice on each replica: by the parent's state
// machine, which clones the parent's file into it (cloneSQLite), and then by the new
// partition's own replica. Closing it in between made the clone durable before the parent's
// commit hands the shards over (SQLite checkpoints its log into the file and syncs both when
// the last connection closes), and the replica then opened the file again: 10 to 43 ms for the
// close and 4 to 10 ms for the opening of each replica on three loaded nodes, both on the path
// of the moving shards' writes (BENCHMARKS.md, "a SQLite split's new partition opened on its
// clone"). Release syncs the partition's files instead (its log, its file and their
// directory: what a crash leaves of them is then what the close would have left) and keeps
// its open connection pools for the Store's next Partition call of it, within KeepReleased.

// KeepReleased is how long the Store keeps the open pools of a partition ended by Release for
// the next Partition call of it, before it closes them.
const KeepReleased = 10 * time.Second

// keptPools are the open pools of a released SQLite partition (Release), with the timer that
// closes them.
type keptPools struct {
	d           *dialect
	write, read *sql.DB
	timer       *time.Timer
}

// close closes the kept pools.
func (k *keptPools) close() error { return errors.Join(k.read.Close(), k.write.Close()) }

// Release ends the caller's use of the partition as Close does, and on SQLite first syncs its
// files (its database file, its write-ahead log and their directory) so that every commit it
// holds is durable, then keeps its connection pools open: the Store's next Partition (or
// PartitionForSplit) call of the partition within KeepReleased opens it on them, without
// opening its file again; after that the pools are closed. On the other engines, and for a
// partition whose file is not its own, it is Close. A failed sync closes the partition and
// returns the error. Later calls on p return ErrClosed; Release after Close does nothing.
// Blocks on the syncs.
func (p *PartitionStore) Release() error {
	if p.pb != nil || p.d == nil || p.d.engine != EngineSQLite || !p.owned || p.unborn.Load() {
		return p.Close()
	}
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	s := p.store
	p.dropPrecopies()
	p.stopStrays()
	p.stmts.reset()
	p.readStmts.reset()
	if err := syncSQLiteFiles(sqlitePath(s.sqliteDir, p.id)); err != nil {
		s.forget(p)
		return errors.Join(fmt.Errorf("storage: release partition %s/%d: %w", p.id.Datastore, p.id.Partition, err), p.closePools())
	}
	k := &keptPools{d: p.d, write: p.write, read: p.read}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Forgotten and kept in one step: a Partition call of the id meanwhile found it open
	// (ErrPartitionOpen), never a second set of pools on the file.
	if s.parts[p.id] == p {
		delete(s.parts, p.id)
	}
	if s.closed {
		return k.close()
	}
	if old := s.kept[p.id]; old != nil { // cannot happen: the id was open until now
		old.timer.Stop()
		_ = old.close()
	}
	if s.kept == nil {
		s.kept = make(map[PartitionID]*keptPools)
	}
	s.kept[p.id] = k
	id := p.id
	k.timer = time.AfterFunc(s.keepFor, func() {
		if k := s.takeKept(id, k); k != nil {
			_ = k.close()
		}
	})
	return nil
}

// takeKept removes and returns the kept pools of id (only when they are want, if want is set),
// nil when there are none.
func (s *Store) takeKept(id PartitionID, want *keptPools) *keptPools {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.kept[id]
	if k == nil || (want != nil && k != want) {
		return nil
	}
	delete(s.kept, id)
	k.timer.Stop()
	return k
}

// closeKept closes the kept pools of id, if any.
func (s *Store) closeKept(id PartitionID) error {
	if k := s.takeKept(id, nil); k != nil {
		return k.close()
	}
	return nil
}

// openKept is the store of partition id on the pools a Release kept, nil when there are none.
// The meta row's schema version is checked as on any opening.
func (s *Store) openKept(ctx context.Context, id PartitionID, shards cells.ShardRange) (*PartitionStore, error) {
	k := s.takeKept(id, nil)
	if k == nil {
		return nil, nil
	}
	return checkOpened(ctx, s.newSQLPartition(id, shards, k.d, k.write, k.read, true))
}

// syncSQLiteFiles syncs a SQLite database file, its write-ahead log when there is one, and
// their directory.
func syncSQLiteFiles(path string) error {
	for _, f := range []string{path, path + "-wal"} {
		if err := syncFile(f); err != nil && !(f != path && errors.Is(err, os.ErrNotExist)) {
			return err
		}
	}
	return syncDir(path)
}

// syncFile syncs the file at path (opened read-only: fsync applies to the file, not to the
// descriptor).
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
