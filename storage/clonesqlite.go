package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/schemaless-db/schemaless/cells"
)

// A split on SQLite whose right half has applied nothing yet (its first apply of the split,
// the usual case) clones the parent's file instead of copying the right half's tables row by
// row: the parent's database file and its write-ahead log are copied as files, byte for byte,
// while the parent's writer is held (no commit, so no checkpoint, changes them meanwhile:
// the copy is the state a crash at that moment would leave, which SQLite recovers from its
// log on open). Then one small transaction in the copy drops the tables of every shard outside
// the right half's range (SQLite frees their pages: 4 tables of some 4,000 cells each take a
// few milliseconds) and writes the right half's KV rows, applied state and meta row. The
// request records come whole, as with the copy. The copy costs the parent file's size in
// sequential I/O (the page cache's speed: tens of milliseconds for tens of megabytes), where
// the row-by-row copy decoded every cell and record (BENCHMARKS.md, "SQLite splits clone the
// parent's file"). The right half's file keeps the parent's size: the dropped tables' pages
// stay in it as free pages that its later writes reuse.

// cloneSQLite is shareSQLite by a copy of the parent's file (see above), for p whose applied
// index is 0. The caller holds p's writer token; cloneSQLite takes the parent's for the copy
// and returns errCloneBusy, having changed nothing, when another writer holds it. p's
// connection pools are closed for the copy and opened again on the copy (under the Store's
// lock, which DBStats reads them under: nothing else uses a partition that has applied
// nothing); on an error after the copy began, they are opened on what the file holds then, and
// the split's retry clones again. Blocks on I/O.
func (p *PartitionStore) cloneSQLite(ctx context.Context, src *SnapshotTx, r cells.ShardRange, kv []KV, applied AppliedState) error {
	if err := src.p.lockWriter(); err != nil {
		return errCloneBusy
	}
	copyErr := p.replaceFile(ctx, src.p.id)
	src.p.unlockWriter()
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
	held, err := sqliteSchema(ctx, tx, "main")
	if err != nil {
		return p.fail("clone: list the tables", err)
	}
	for _, o := range held {
		if s, ok := sqliteShardOf(o.table); ok && !r.Contains(s) && o.kind == "table" {
			if _, err := tx.ExecContext(ctx, "DROP TABLE "+o.name); err != nil {
				return p.fail("clone: drop "+o.name, err)
			}
		}
	}
	if err := p.replaceKV(ctx, tx, kv); err != nil {
		return err
	}
	if err := setApplied(ctx, stmtQueryer{tx: tx, q: p.d.upsertApplied}, p, applied); err != nil {
		return err
	}
	return p.commitShare(tx)
}

// errCloneBusy: the parent's writer was held by another call, so cloneSQLite did not copy its
// file (shareSQLite then copies the tables instead).
var errCloneBusy = errors.New("storage: the parent partition's writer is busy")

// replaceFile closes p's pools, replaces p's file with a copy of partition src's file and log
// (copySQLiteFiles), and opens p's pools again, on the copy or, after an error, on what p's
// file holds (when that fails too, p's calls fail until it is closed). The caller holds both writer tokens.
func (p *PartitionStore) replaceFile(ctx context.Context, src PartitionID) error {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	p.stmts.reset()
	p.readStmts.reset()
	closeErr := p.closePools()
	var err error
	if closeErr != nil {
		err = p.fail("clone: close the partition's pools", closeErr)
	} else if cerr := copySQLiteFiles(sqlitePath(s.sqliteDir, src), sqlitePath(s.sqliteDir, p.id), s.sqliteSync); cerr != nil {
		err = fmt.Errorf("storage: clone the file of partition %d into partition %d: %w", src.Partition, p.id.Partition, cerr)
	}
	_, write, read, _, oerr := s.openPartition(ctx, p.id)
	if oerr != nil {
		// p keeps its closed pools: its calls fail, and the state machine stops on them as on
		// any storage failure.
		return errors.Join(err, oerr)
	}
	p.write, p.read = write, read
	return err
}

// copySQLiteFiles makes the SQLite database at dst a copy of the one at from: dst's file, log
// and shared-memory index are removed, then from's file and its write-ahead log (if any) are
// copied to temporary names and renamed into place, the file first: a crash in between leaves
// a database without the log's last commits, whose meta row does not name the right half (the
// split clones again), never a log beside a file it does not belong to. With sync, the copies
// and the directory are synced first.
func copySQLiteFiles(from, dst string, sync bool) error {
	for _, suffix := range []string{"-wal", "-shm", "-journal", ""} {
		if err := os.Remove(dst + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	withLog := true
	if _, err := os.Stat(from + "-wal"); errors.Is(err, os.ErrNotExist) {
		withLog = false
	}
	if err := copyFile(from, dst+".clone", sync); err != nil {
		return err
	}
	if withLog {
		if err := copyFile(from+"-wal", dst+"-wal.clone", sync); err != nil {
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
	d, err := os.Open(filepath.Dir(dst))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// copyFile copies the file from to a new file to (io.Copy: copy_file_range on Linux), synced
// when sync is set.
func copyFile(from, to string, sync bool) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, out.Close())
		if err != nil {
			_ = os.Remove(to)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if sync {
		return out.Sync()
	}
	return nil
}
