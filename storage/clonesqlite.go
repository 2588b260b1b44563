package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/schemaless-db/schemaless/cells"
)

// A split on SQLite whose right half has applied nothing yet (its first apply of the split,
// the usual case) clones the parent's file instead of copying the right half's tables record
// by record inside SQLite: the parent's database file and its write-ahead log are copied as
// files while the parent's writer is held (no commit, so no checkpoint, changes them
// meanwhile: the copy is the state a crash at that moment would leave, which SQLite recovers
// from its log on open), less the file's free pages and the log's stale frames
// (clonefiles.go); when a pre-copy of the parent's file for this split was made ahead of it
// (PrepareSplit, precopysqlite.go), the file is that pre-copy and only the log is copied here.
// Then one small transaction in the copy writes the right half's KV rows, applied state and
// meta row. The tables of every shard outside the right half's range stay in the copy: they
// are strays, which the right half drops after the split, one at a time between its writes
// (strays.go); dropping them here put the drop on the path of the moving shards' writes (4
// tables of some 1,750 cells each took 3 ms, 8 tables of 12,500 cells each 40 ms in
// BenchmarkShareShards; the parent's drop of half of 500,000 cells, as big, 59 to 81 ms at
// the median on three loaded nodes: BENCHMARKS.md). The request records come whole, as with the copy. The
// copy costs the size of the parent's pages in use in I/O (7 MiB in 10 ms on an idle machine,
// 7 to 13 MiB in 18 to 113 ms on three loaded nodes), where the
// copy inside SQLite read and wrote every record of the right half's tables (BENCHMARKS.md,
// "SQLite splits clone the parent's file"). The right half's file has the parent's size, the
// stray tables' pages free pages once they are dropped, which its later writes reuse and its
// own splits do not copy. With synchronous FULL or EXTRA the copies are synced here; with NORMAL they are not,
// and what makes them durable before the parent's commit that hands the shards over is the
// release of the right half's store that follows (fsm.Config.SplitStore's release,
// PartitionStore.Release, keep.go): it syncs the file, the log and their directory, and keeps
// the store open for the new partition's replica. (A close made them durable before: SQLite
// checkpoints the log into the file and syncs it when its last connection closes, 10 to 43 ms
// per split on three loaded nodes, and the replica then opened the file again.) The right
// half's store is opened without a file (Store.PartitionForSplit): the clone puts it in place
// and then opens it once.

// cloneSQLite is shareSQLite by a copy of the parent's file (see above), for p whose applied
// index is 0. The caller holds p's writer token; cloneSQLite takes the parent's for the copy
// and returns errCloneBusy, having changed nothing, when another writer holds it. p's
// connection pools are closed for the copy and opened again on the copy (swapped in under the
// Store's lock, which DBStats reads them under: nothing else uses a partition that has applied
// nothing); on an error after the copy began, they are opened on what the file holds then, and
// the split's retry clones again. Blocks on I/O.
func (p *PartitionStore) cloneSQLite(ctx context.Context, src *SnapshotTx, r cells.ShardRange, kv []KV, applied AppliedState) error {
	pc := src.p.takePrecopy(ctx, p.id.Partition) // nil: none, or it failed
	if err := src.p.lockWriter(); err != nil {
		if pc != nil {
			pc.release()
		}
		return errCloneBusy
	}
	copyErr := p.replaceFile(ctx, src.p, pc)
	src.p.unlockWriter()
	if pc != nil {
		pc.release()
	}
	if copyErr != nil {
		return copyErr
	}
	tx, err := p.write.BeginTx(ctx, nil)
	if err != nil {
		return p.fail("clone: begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "DELETE FROM meta WHERE NOT (datastore = ? AND `partition` = ?)", p.id.Datastore, p.id.Partition); err != nil {
		return p.fail("clone: the parent's meta row", err)
	}
	// The tables of the parent's other shards stay: strays, dropped once the right half's
	// state machine gives it its range (SetShards, strays.go).
	return p.commitSQLiteShare(ctx, tx, kv, applied)
}

// errCloneBusy: the parent's writer was held by another call, so cloneSQLite did not copy its
// file (shareSQLite then copies the tables instead).
var errCloneBusy = errors.New("storage: the parent partition's writer is busy")

// replaceFile closes p's pools, replaces p's file with a copy of partition src's file and log,
// and opens p's pools again, on the copy or, after an error, on what p's file holds (when that
// fails too, p's calls fail until it is closed). The file is pc's pre-copy when pc is set
// (PrepareSplit), else copied now (copySQLiteFiles, src's free pages read first through its
// write pool). The caller holds both writer tokens.
func (p *PartitionStore) replaceFile(ctx context.Context, src *PartitionStore, pc *precopy) error {
	s := p.store
	p.stmts.reset()
	p.readStmts.reset()
	from := sqlitePath(s.sqliteDir, src.id)
	base := func(to string) error { return os.Rename(pc.path, to) }
	if pc == nil {
		skip, pageSize, ferr := freePages(ctx, src.write)
		if ferr != nil {
			return p.fail(fmt.Sprintf("clone: the free pages of partition %d", src.id.Partition), ferr)
		}
		base = func(to string) error { return copyFileSparse(from, to, -1, pageSize, skip, s.sqliteSync) }
	}
	closeErr := p.closePools()
	var err error
	if closeErr != nil {
		err = p.fail("clone: close the partition's pools", closeErr)
	} else if cerr := copySQLiteFiles(from, sqlitePath(s.sqliteDir, p.id), base, s.sqliteSync); cerr != nil {
		err = fmt.Errorf("storage: clone the file of partition %d into partition %d: %w", src.id.Partition, p.id.Partition, cerr)
	}
	return errors.Join(err, p.reopenPools(ctx))
}

// reopenPools opens p's pools on what its file holds, creating it (with its tables) when
// missing, in place of pools closed by the caller, and clears unborn. When that fails, p keeps
// its closed pools: its calls fail, and the state machine stops on them as on any storage
// failure. The caller holds p's writer token.
func (p *PartitionStore) reopenPools(ctx context.Context) error {
	s := p.store
	_, write, read, _, err := s.openPartition(ctx, p.id)
	if err != nil {
		return err
	}
	s.mu.Lock() // DBStats reads the pools under it
	p.write, p.read = write, read
	s.mu.Unlock()
	p.unborn.Store(false)
	return nil
}

// openUnborn is PartitionForSplit's store of partition id when it is a SQLite partition with
// no file: its pools open the file read-write without creating it (SQLite's mode=rw) and
// connect to nothing until used, so the split's clone (cloneSQLite) puts the file in place
// before anything opens it. It returns nil and no error when the engine is not SQLite or the
// file exists (Partition's open then), and the error of a file that cannot be looked at.
func (s *Store) openUnborn(id PartitionID, shards cells.ShardRange) (*PartitionStore, error) {
	if s.engine != EngineSQLite {
		return nil, nil
	}
	path := sqlitePath(s.sqliteDir, id)
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	uri := sqliteURI(path, "mode=rw&_query_only=1")
	write, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	read, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("storage: open %s: %w", path, err), write.Close())
	}
	p := s.newSQLPartition(id, shards, sqliteDialect(), write, read, true)
	p.unborn.Store(true)
	return p, nil
}

// copySQLiteFiles makes the SQLite database at dst a copy of the one at from: dst's file, log
// and shared-memory index are removed, then base makes the copy of from's file at the
// temporary name it is given (copyFileSparse of from less its free pages, or a pre-copy
// renamed), the current generation of from's write-ahead log (walLength), if any, is copied to
// a temporary name, and both are renamed into place, the file first: a crash in between leaves
// a database without the log's last commits, whose meta row does not name the right half (the
// split clones again), never a log beside a file it does not belong to. With sync, the log's
// copy and the directory are synced first (base syncs its copy).
func copySQLiteFiles(from, dst string, base func(to string) error, sync bool) error {
	for _, suffix := range []string{"-wal", "-shm", "-journal", ""} {
		if err := os.Remove(dst + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	logBytes, withLog, err := walLength(from + "-wal")
	if err != nil {
		return err
	}
	if err := base(dst + ".clone"); err != nil {
		return err
	}
	if withLog {
		if err := copyFileSparse(from+"-wal", dst+"-wal.clone", logBytes, 0, nil, sync); err != nil {
			return errors.Join(err, os.Remove(dst+".clone"))
		}
	}
	if err := os.Rename(dst+".clone", dst); err != nil {
		return err
	}
	if withLog {
		if err := os.Rename(dst+"-wal.clone", dst+"-wal"); err != nil {
			return err
		}
	}
	if !sync {
		return nil
	}
	return syncDir(dst)
}
