package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/schemaless-db/schemaless/cells"
)

// Snapshot paging: SnapshotTx.ScanShard reads a shard in pages of at most snapshotPageRows
// cells and about snapshotPageBytes of bodies, so its memory stays flat whatever the shard's
// size, and no result set stays open while the callback runs.
const (
	snapshotPageRows  = 2000
	snapshotPageBytes = 16 << 20
	// snapshotCloseTimeout bounds the ROLLBACK that ends a snapshot.
	snapshotCloseTimeout = 10 * time.Second
)

// BeginSnapshot opens a consistent, read-only view of all the partition's tables (every shard,
// its index tables, the KV rows and the meta row) as of the moment it returns; commits made afterwards, by the writer or a
// Restore, are not visible in it. It holds one connection of the read pool until Close (SQLite:
// one of SQLiteConfig.ReadConns; MySQL: one of MaxOpenConns) and, in SQLite, keeps the WAL
// from being checkpointed past its view, so close it promptly. ctx bounds opening only; the
// view lives until Close. Any goroutine may call it, concurrently with the writer.
func (p *PartitionStore) BeginSnapshot(ctx context.Context) (*SnapshotTx, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if p.pb != nil {
		return p.pebbleBeginSnapshot()
	}
	conn, err := p.read.Conn(ctx)
	if err != nil {
		return nil, p.fail("begin snapshot", err)
	}
	s := &SnapshotTx{p: p, conn: conn}
	for _, stmt := range p.d.snapshotBegin {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return nil, errors.Join(p.fail("begin snapshot", err), s.Close())
		}
	}
	// MySQL took the read view at START TRANSACTION; SQLite takes its WAL snapshot at this
	// first read and keeps it until the transaction ends.
	a, _, err := readApplied(ctx, conn, p.d, p.id)
	if err != nil {
		return nil, errors.Join(p.fail("begin snapshot: read applied state", err), s.Close())
	}
	s.applied = a
	return s, nil
}

// SnapshotTx is a consistent read view of the whole partition, opened by BeginSnapshot. Its
// methods must not be called concurrently with each other; it may be used from a goroutine
// other than the one that opened it (raft persists snapshots on its own goroutine).
type SnapshotTx struct {
	p    *PartitionStore
	conn *sql.Conn
	// snap and view are the pebble snapshot and the partition's keys in it (pebble partitions;
	// nil for the SQL engines).
	snap    *pebble.Snapshot
	view    *pebblePart
	applied AppliedState
	closed  bool
}

// Applied returns the applied state of the view: every cell it holds was written by a log
// entry at or below Applied().Index.
func (s *SnapshotTx) Applied() AppliedState { return s.applied }

// ScanShard calls fn with every cell of shard in the view (with its AddedID, CreatedAt and Origin:
// what Restore takes back), in ascending added_id order, and returns fn's first error (wrapped)
// without calling it again. A shard whose tables did not exist when the view was taken has no
// cells. Cells are read in pages (at most 2000 cells, about 16 MiB of bodies), so memory stays
// flat; fn runs with no statement open and owns the cells it is given, but must not call the
// SnapshotTx. A read error or ctx ending stops the scan; on MySQL it also breaks the view (later
// calls fail; Close still releases it).
func (s *SnapshotTx) ScanShard(ctx context.Context, shard int, fn func(cells.Cell) error) error {
	if s.closed {
		return ErrClosed
	}
	if err := s.p.checkShard(shard); err != nil {
		return err
	}
	if s.snap != nil {
		return s.pebbleScanShard(shard, fn)
	}
	return s.scanShardSQL(ctx, shard, fn)
}

// scanShardSQL is ScanShard on the SQL engines, for any shard whose table the view holds
// (none: no cells), whether or not it is in the partition's range.
func (s *SnapshotTx) scanShardSQL(ctx context.Context, shard int, fn func(cells.Cell) error) error {
	q := "SELECT " + cellColumns + " FROM " + s.p.d.entity(shard) + " WHERE added_id > ? ORDER BY added_id LIMIT ?"
	after, limit := int64(math.MinInt64), snapshotPageRows
	for {
		page, full, err := s.page(ctx, q, after, limit)
		if err != nil {
			return s.p.fail(fmt.Sprintf("snapshot scan shard %d", shard), err)
		}
		for _, c := range page {
			if err := fn(c); err != nil {
				return fmt.Errorf("storage: snapshot scan shard %d: %w", shard, err)
			}
		}
		if len(page) == 0 || (!full && len(page) < limit) {
			return nil
		}
		after = page[len(page)-1].AddedID
		// Adapt the page to the bodies: a page cut short by bytes sizes the next one; pages
		// that fit grow back.
		if full {
			limit = max(len(page), 1)
		} else {
			limit = min(limit*2, snapshotPageRows)
		}
	}
}

// page reads up to limit cells after after; full reports that it stopped early because the
// bodies read passed snapshotPageBytes.
func (s *SnapshotTx) page(ctx context.Context, q string, after int64, limit int) (page []cells.Cell, full bool, err error) {
	rows, err := s.conn.QueryContext(ctx, q, after, limit)
	if err != nil {
		if isNoTable(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		c, err := scanCell(rows)
		if err != nil {
			return nil, false, err
		}
		page = append(page, c)
		size += len(c.Body)
		if size >= snapshotPageBytes {
			full = true
			break
		}
	}
	if err := rows.Err(); err != nil {
		if isNoTable(err) && len(page) == 0 {
			// MySQL reports a table created after the read view when reading its rows.
			return nil, false, nil
		}
		return nil, false, err
	}
	return page, full, rows.Close()
}

// Close ends the view and returns its connection to the pool (or discards the connection if
// the transaction cannot be ended cleanly). Close is idempotent; other methods return
// ErrClosed afterwards.
func (s *SnapshotTx) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.snap != nil {
		if err := s.snap.Close(); err != nil {
			return fmt.Errorf("storage: close snapshot: %w", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotCloseTimeout)
	defer cancel()
	if _, err := s.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		// Never hand a connection with an open transaction back to the pool.
		_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	if err := s.conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("storage: close snapshot: %w", err)
	}
	return nil
}

// RestoreRecord is one record of the stream Restore reads: a request record when Request is
// set (Shard is ignored), else a cell of Shard when Index is "", else the entry of index table
// Index (one of the tables given to Restore) on Shard.
type RestoreRecord struct {
	Shard   int
	Cell    cells.Cell
	Index   string
	Entry   IndexEntry
	Request *RequestRecord
}

// Restore replaces the partition's tables with the records next yields, its KV rows with kv
// and its index tables with those of indexes, then sets the applied state to applied.
//
// First, outside any transaction (MySQL DDL commits implicitly), it creates the entity tables
// of every shard of the range, drops every index table of the partition (IndexNames) and
// creates the tables of indexes on every shard of the range. Then, in one write transaction,
// it empties every shard (including shards next yields nothing for), deletes every KV row of
// the partition and inserts the rows of kv (kv is read, not retained; nil leaves the table
// empty), inserts the cells and index entries next yields (records of different shards and
// tables may interleave), and sets the applied state: readers see the old cells and KV rows
// until it commits and the new ones after, never a mix, and on any error they do not change.
// The index tables do not follow that rule: they are empty (or missing) from the start of the
// Restore until it commits, and after an error the partition may be left with the tables of
// indexes, empty, or with none; Restore again before relying on them.
//
// next returns each record, and io.EOF (unwrapped) after the last; any other error aborts the
// Restore and is returned wrapped. Restore buffers up to one INSERT of records from next, so next
// must not reuse the memory of the cells or entries it returned. Cells are stored as given
// (AddedID, CreatedAt, Origin), entries as given (whole rows). A cell whose Origin is neither ""
// nor a valid cluster name returns ErrInvalidOrigin. A shard outside the range returns
// ErrShardRange; a duplicate key or added_id, a row key given twice for one index table and shard,
// or a KV key given twice, ErrDuplicate; a KV row out of bounds ErrKVTooLarge and an invalid table
// in indexes (or two of one name) ErrInvalidConfig, both checked before anything is done; an entry
// of an index not in indexes ErrInvalidConfig, and one whose values do not fit its columns
// ErrIndexValue. Restore is a writer call: it returns ErrTxOpen if a write transaction is open. In
// MySQL, dropping an index table waits for open snapshots that have read it. ctx bounds the whole
// restore.
func (p *PartitionStore) Restore(ctx context.Context, applied AppliedState, next func() (RestoreRecord, error), kv []KV, indexes []IndexTable) error {
	if p.closed.Load() {
		return ErrClosed
	}
	for i := range kv {
		if err := checkKV(kv[i].Key, kv[i].Value); err != nil {
			return fmt.Errorf("storage: restore: KV row %d: %w", i, err)
		}
	}
	tables := make(map[string]*IndexTable, len(indexes))
	for i := range indexes {
		t := &indexes[i]
		if err := t.Validate(); err != nil {
			return fmt.Errorf("storage: restore: %w", err)
		}
		if tables[t.Name] != nil {
			return fmt.Errorf("storage: restore: %w: index table %s given twice", ErrInvalidConfig, t.Name)
		}
		tables[t.Name] = t
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	if p.pb != nil {
		return p.pebbleRestore(applied, next, kv, tables)
	}
	all := make([]int, 0, p.Shards().Len())
	for s := p.Shards().First; s <= p.Shards().Last; s++ {
		all = append(all, s)
	}
	if err := p.ensureLocked(ctx, all); err != nil {
		return err
	}
	old, err := p.indexTables(ctx, p.write)
	if err != nil {
		return p.fail("restore: list index tables", err)
	}
	for _, name := range sortedNames(old) {
		if err := p.dropIndexLocked(ctx, name, old[name]); err != nil {
			return fmt.Errorf("storage: restore: %w", err)
		}
	}
	clear(p.indexes)
	for _, t := range indexes {
		if err := p.ensureIndexLocked(ctx, &t, all); err != nil {
			return fmt.Errorf("storage: restore: %w", err)
		}
	}
	tx, err := p.write.BeginTx(ctx, nil)
	if err != nil {
		return p.fail("restore: begin", err)
	}
	defer tx.Rollback()
	for _, s := range all {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+p.d.entity(s)); err != nil {
			return p.fail(fmt.Sprintf("restore: empty shard %d", s), err)
		}
	}
	if err := p.replaceKV(ctx, tx, kv); err != nil {
		return err
	}
	if err := p.deleteRequests(ctx, tx); err != nil {
		return err
	}
	var reqBuf []RequestRecord
	// One buffer, of cells or of entries, for the (shard, index) of the last record.
	var (
		cellBuf  []cells.Cell
		entryBuf []IndexEntry
		shard    = -1
		index    string
		size     int
	)
	flush := func() error {
		var err error
		switch {
		case len(cellBuf) > 0:
			err = insertCells(ctx, func(q string) stmtQueryer { return stmtQueryer{tx: tx, q: q} }, p.d, shard, cellBuf)
			clear(cellBuf)
			cellBuf = cellBuf[:0]
		case len(entryBuf) > 0:
			err = insertIndex(ctx, func(q string) stmtQueryer { return stmtQueryer{tx: tx, q: q} }, p.d, tables[index], shard, entryBuf, false)
			clear(entryBuf)
			entryBuf = entryBuf[:0]
		}
		size = 0
		if err != nil {
			return fmt.Errorf("storage: restore: %w", err)
		}
		return nil
	}
	for n := 0; ; n++ {
		r, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("storage: restore: record %d: %w", n, err)
		}
		if r.Request != nil {
			if reqBuf = append(reqBuf, *r.Request); len(reqBuf) >= p.d.insertRows {
				if err := p.insertRequests(ctx, func(q string) stmtQueryer { return stmtQueryer{tx: tx, q: q} }, reqBuf, true); err != nil {
					return fmt.Errorf("storage: restore: %w", err)
				}
				reqBuf = reqBuf[:0]
			}
			continue
		}
		if !p.Shards().Contains(r.Shard) {
			return fmt.Errorf("storage: restore: record %d: %w: shard %d, range [%d, %d]", n, ErrShardRange, r.Shard, p.Shards().First, p.Shards().Last)
		}
		var bytes int
		if r.Index == "" {
			if err := checkOrigin(&r.Cell); err != nil {
				return fmt.Errorf("storage: restore: record %d: cell %s: %w", n, r.Cell.Key, err)
			}
			bytes = cellBytes(&r.Cell)
		} else {
			if tables[r.Index] == nil {
				return fmt.Errorf("storage: restore: record %d: %w: entry of index %q, not one of the tables given", n, ErrInvalidConfig, r.Index)
			}
			bytes = entryBytes(&r.Entry)
		}
		if r.Shard != shard || r.Index != index || len(cellBuf)+len(entryBuf) >= p.d.insertRows || size+bytes > p.d.insertBytes {
			if err := flush(); err != nil {
				return err
			}
			shard, index = r.Shard, r.Index
		}
		if r.Index == "" {
			cellBuf = append(cellBuf, r.Cell)
		} else {
			entryBuf = append(entryBuf, r.Entry)
		}
		size += bytes
	}
	if err := flush(); err != nil {
		return err
	}
	if err := p.insertRequests(ctx, func(q string) stmtQueryer { return stmtQueryer{tx: tx, q: q} }, reqBuf, true); err != nil {
		return fmt.Errorf("storage: restore: %w", err)
	}
	if err := setApplied(ctx, stmtQueryer{tx: tx, q: p.d.upsertApplied}, p, applied); err != nil {
		return fmt.Errorf("storage: restore: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return p.fail("restore: commit", err)
	}
	return nil
}
