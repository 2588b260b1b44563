package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// Reads run on the read pool, each statement in its own (autocommit) transaction (GetSnapshot:
// its statements in one, or on SQLite one statement for one key), so they see the latest
// committed data and never block on the writer. On SQLite their statements are prepared once
// per read connection. A shard whose tables do not exist yet reads as empty. Returned cells belong
// to the caller; CreatedAt is in UTC; Origin is as Insert stored it ("" for a cell stored before
// the column existed).

// GetCell returns the cell of key in shard, or ErrNotFound (unwrapped).
func (p *PartitionStore) GetCell(ctx context.Context, shard int, key cells.Key) (cells.Cell, error) {
	if err := p.checkShard(shard); err != nil {
		return cells.Cell{}, err
	}
	if p.pb != nil {
		return p.pebbleGet(shard, key, false)
	}
	q, args := p.cellSQL(shard, key, false)
	c, err := p.getOne(ctx, q, args...)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return cells.Cell{}, p.fail(fmt.Sprintf("get cell %s in shard %d", key, shard), err)
	}
	return c, err
}

// GetLatest returns the cell of rowKey and column with the highest ref key in shard, or
// ErrNotFound (unwrapped). It reads one entry of the unique key, backwards.
func (p *PartitionStore) GetLatest(ctx context.Context, shard int, rowKey uuid.UUID, column string) (cells.Cell, error) {
	if err := p.checkShard(shard); err != nil {
		return cells.Cell{}, err
	}
	if p.pb != nil {
		return p.pebbleGet(shard, cells.Key{RowKey: rowKey, ColumnKey: column}, true)
	}
	q, args := p.cellSQL(shard, cells.Key{RowKey: rowKey, ColumnKey: column}, true)
	c, err := p.getOne(ctx, q, args...)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return cells.Cell{}, p.fail(fmt.Sprintf("get latest %s/%s in shard %d", rowKey, column, shard), err)
	}
	return c, err
}

// SnapshotKey is one key of GetSnapshot: the exact key, or with Latest the cell of the row key
// and column key with the highest ref key (Key.RefKey ignored), in shard Shard.
type SnapshotKey struct {
	Shard  int
	Key    cells.Key
	Latest bool
}

// GetSnapshot reads keys in one read transaction, so that every answer is as of the same
// commit, and returns with them the applied state of that commit (zero on a store no raft
// replica writes: async mode). A key not found is a zero Cell with found false. SQLite's WAL
// mode and InnoDB's REPEATABLE READ both hold one snapshot from a transaction's first read to
// its end; the first read here is the applied state's. Errors: a key's shard outside the
// partition (ErrShardRange), or the engine's.
func (p *PartitionStore) GetSnapshot(ctx context.Context, keys []SnapshotKey) (out []cells.Cell, found []bool, applied AppliedState, err error) {
	for _, k := range keys {
		if err := p.checkShard(k.Shard); err != nil {
			return nil, nil, AppliedState{}, err
		}
	}
	if p.pb != nil {
		return p.pebbleGetSnapshot(keys)
	}
	if len(keys) == 1 && p.d.engine == EngineSQLite {
		c, ok, a, done, err := p.getSnapshotOne(ctx, keys[0])
		if err != nil {
			return nil, nil, AppliedState{}, err
		}
		if done {
			return []cells.Cell{c}, []bool{ok}, a, nil
		}
	}
	// The statements are prepared (once per statement, on first use) before the transaction
	// holds a read connection: preparing takes one from the pool. Within the transaction each
	// runs on the transaction's connection, prepared there once (sql.Tx.StmtContext).
	metaQ := appliedSQL(p.d)
	metaSt := p.readStmt(ctx, metaQ)
	qs := make([]string, len(keys))
	argss := make([][]any, len(keys))
	sts := make([]*sql.Stmt, len(keys))
	for i, k := range keys {
		qs[i], argss[i] = p.cellSQL(k.Shard, k.Key, k.Latest)
		sts[i] = p.readStmt(ctx, qs[i])
	}
	tx, err := p.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, AppliedState{}, p.fail("begin a snapshot read", err)
	}
	defer tx.Rollback() //nolint:errcheck // a read-only transaction: nothing to keep
	row := func(st *sql.Stmt, q string, args ...any) *sql.Row {
		if st != nil {
			return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
		}
		return tx.QueryRowContext(ctx, q, args...)
	}
	if applied, _, err = scanApplied(row(metaSt, metaQ, p.id.Datastore, p.id.Partition)); err != nil {
		return nil, nil, AppliedState{}, p.fail("snapshot read: applied state", err)
	}
	out, found = make([]cells.Cell, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		c, err := scanCell(row(sts[i], qs[i], argss[i]...))
		switch {
		case err == nil:
			out[i], found[i] = c, true
		case errors.Is(err, sql.ErrNoRows) || isNoTable(err):
		default:
			return nil, nil, AppliedState{}, p.fail(fmt.Sprintf("snapshot read of %s in shard %d", k.Key, k.Shard), err)
		}
	}
	return out, found, applied, nil
}

// getSnapshotOne is GetSnapshot of one key on SQLite without an explicit transaction: one
// statement reads the meta row and the cell (a LEFT JOIN of the meta row with the cell query),
// and one SQLite statement reads one snapshot. It saves the BEGIN and ROLLBACK statements of a
// read transaction, a third of a point read's SQL. done is false, with nothing read, when the
// partition has no meta row yet or the shard no table: GetSnapshot then reads in a transaction.
func (p *PartitionStore) getSnapshotOne(ctx context.Context, k SnapshotKey) (c cells.Cell, found bool, a AppliedState, done bool, err error) {
	q, args := p.snapshotOneSQL(k)
	row := p.readRow(ctx, q, args...)
	var (
		addedID, refKey, micros sql.NullInt64
		column, origin          sql.NullString
		rowKey, body            []byte
	)
	err = row.Scan(&a.Index, &a.Term, &addedID, &rowKey, &column, &refKey, &body, &micros, &origin)
	switch {
	case errors.Is(err, sql.ErrNoRows) || isNoTable(err):
		return cells.Cell{}, false, AppliedState{}, false, nil
	case err != nil:
		return cells.Cell{}, false, AppliedState{}, false, p.fail(fmt.Sprintf("snapshot read of %s in shard %d", k.Key, k.Shard), err)
	case !addedID.Valid:
		return cells.Cell{}, false, a, true, nil
	}
	u, err := uuid.FromBytes(rowKey)
	if err != nil {
		return cells.Cell{}, false, AppliedState{}, false, fmt.Errorf("storage: stored row key of %d bytes: %w", len(rowKey), err)
	}
	c = cells.Cell{AddedID: addedID.Int64, Key: cells.Key{RowKey: u, ColumnKey: column.String, RefKey: refKey.Int64},
		Body: cells.Body(body), CreatedAt: time.UnixMicro(micros.Int64).UTC(), Origin: origin.String}
	return c, true, a, true, nil
}

// snapshotOneSQL is getSnapshotOne's statement and arguments.
func (p *PartitionStore) snapshotOneSQL(k SnapshotKey) (string, []any) {
	cq, args := p.cellSQL(k.Shard, k.Key, k.Latest)
	q := "SELECT m.applied_index, m.applied_term, c.added_id, c.row_key, c.column_name, c.ref_key, c.body, c.created_at, c.origin FROM " +
		p.d.meta + " AS m LEFT JOIN (" + cq + ") AS c ON 1 = 1 WHERE m.datastore = ? AND m.`partition` = ?"
	return q, append(args, p.id.Datastore, p.id.Partition)
}

// cellSQL is the query of one cell of shard and its arguments: key, or with latest the cell of
// key's row and column with the highest ref key (one entry of the unique key, backwards).
func (p *PartitionStore) cellSQL(shard int, key cells.Key, latest bool) (string, []any) {
	if latest {
		return "SELECT " + cellColumns + " FROM " + p.d.entity(shard) +
			" WHERE row_key = ? AND column_name = ? ORDER BY ref_key DESC LIMIT 1", []any{key.RowKey[:], key.ColumnKey}
	}
	return "SELECT " + cellColumns + " FROM " + p.d.entity(shard) +
		" WHERE row_key = ? AND column_name = ? AND ref_key = ?", []any{key.RowKey[:], key.ColumnKey, key.RefKey}
}

// readRow runs q, a query of at most one row, on the read pool: as a prepared statement when
// readStmt gives one, else as it is.
func (p *PartitionStore) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.readStmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.read.QueryRowContext(ctx, q, args...)
}

// getOne runs a query selecting at most one cell.
func (p *PartitionStore) getOne(ctx context.Context, q string, args ...any) (cells.Cell, error) {
	row := p.readRow(ctx, q, args...)
	c, err := scanCell(row)
	if errors.Is(err, sql.ErrNoRows) || isNoTable(err) {
		return cells.Cell{}, ErrNotFound
	}
	return c, err
}

// GetRow returns the latest cell (highest ref key) of every column of rowKey in shard, ordered
// by column key (byte order), in one statement; nil if the row has no cell. The tombstones of
// erasures of the row (cells.TombstoneColumn) are not cells and are left out.
func (p *PartitionStore) GetRow(ctx context.Context, shard int, rowKey uuid.UUID) ([]cells.Cell, error) {
	if err := p.checkShard(shard); err != nil {
		return nil, err
	}
	if p.pb != nil {
		return p.pebbleGetRow(shard, rowKey)
	}
	t := p.d.entity(shard)
	q := "SELECT e.added_id, e.row_key, e.column_name, e.ref_key, e.body, e.created_at, e.origin FROM " + t + " e " +
		"JOIN (SELECT column_name, MAX(ref_key) AS ref_key FROM " + t + " WHERE row_key = ? GROUP BY column_name) m " +
		"ON e.column_name = m.column_name AND e.ref_key = m.ref_key " +
		"WHERE e.row_key = ? ORDER BY e.column_name"
	cs, err := queryCells(ctx, p.read, q, rowKey[:], rowKey[:])
	if err != nil {
		return nil, p.fail(fmt.Sprintf("get row %s in shard %d", rowKey, shard), err)
	}
	return slices.DeleteFunc(cs, func(c cells.Cell) bool { return c.Key.IsTombstone() }), nil
}

// GetVersions returns the cells of column col of rowKey in shard (its versions) in ref key
// order: ascending from ref key from (inclusive; nil: from the lowest), or with desc descending
// from from (inclusive; nil: from the highest); at most limit (which must be positive) of them;
// nil when there are none. One statement over the cell table's (row_key, column_name, ref_key)
// key. It is the read behind the versions route.
func (p *PartitionStore) GetVersions(ctx context.Context, shard int, rowKey uuid.UUID, col string, from *int64, limit int, desc bool) ([]cells.Cell, error) {
	if err := p.checkShard(shard); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("storage: versions of %s/%s: limit %d is not positive", rowKey, col, limit)
	}
	if p.pb != nil {
		return p.pebbleVersions(shard, rowKey, col, from, limit, desc)
	}
	q := "SELECT " + cellColumns + " FROM " + p.d.entity(shard) + " WHERE row_key = ? AND column_name = ?"
	args := []any{rowKey[:], col}
	cmp, order := " AND ref_key >= ?", " ORDER BY ref_key LIMIT ?"
	if desc {
		cmp, order = " AND ref_key <= ?", " ORDER BY ref_key DESC LIMIT ?"
	}
	if from != nil {
		q += cmp
		args = append(args, *from)
	}
	args = append(args, limit)
	cs, err := queryCells(ctx, p.read, q+order, args...)
	if err != nil {
		return nil, p.fail(fmt.Sprintf("versions of %s/%s in shard %d", rowKey, col, shard), err)
	}
	return cs, nil
}

// ScanShard returns the cells of shard with added_id > afterAddedID in ascending added_id
// order, at most limit (which must be positive) of them; nil when there are none. It is the
// read behind get_cells_for_shard: pass the last AddedID returned to read on.
func (p *PartitionStore) ScanShard(ctx context.Context, shard int, afterAddedID int64, limit int) ([]cells.Cell, error) {
	if err := p.checkShard(shard); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("storage: scan shard %d: limit %d is not positive", shard, limit)
	}
	if p.pb != nil {
		return p.pebbleScanShard(shard, afterAddedID, limit)
	}
	cs, err := queryCells(ctx, p.read, "SELECT "+cellColumns+" FROM "+p.d.entity(shard)+
		" WHERE added_id > ? ORDER BY added_id LIMIT ?", afterAddedID, limit)
	if err != nil {
		return nil, p.fail(fmt.Sprintf("scan shard %d", shard), err)
	}
	return cs, nil
}

// Applied returns the applied state in the meta table: the last one committed by a write
// transaction or Restore; zero if none ever was.
func (p *PartitionStore) Applied(ctx context.Context) (AppliedState, error) {
	if p.closed.Load() {
		return AppliedState{}, ErrClosed
	}
	if p.pb != nil {
		return p.pebbleApplied()
	}
	if p.unborn.Load() {
		return AppliedState{}, nil // no file yet: PartitionForSplit
	}
	a, _, err := readApplied(ctx, p.read, p.d, p.id)
	if err != nil {
		return AppliedState{}, p.fail("read applied state", err)
	}
	return a, nil
}

// MaxAddedID returns the highest added_id stored in shard (committed), 0 if the shard holds no
// cell or its tables do not exist. It reads the end of the primary key.
func (p *PartitionStore) MaxAddedID(ctx context.Context, shard int) (int64, error) {
	if err := p.checkShard(shard); err != nil {
		return 0, err
	}
	if p.pb != nil {
		return p.pebbleMaxAddedID(shard)
	}
	id, err := p.maxAddedID(ctx, shard)
	if err != nil {
		return 0, p.fail(fmt.Sprintf("max added_id of shard %d", shard), err)
	}
	return id, nil
}

// maxAddedID is MaxAddedID without the checks and the wrapping.
func (p *PartitionStore) maxAddedID(ctx context.Context, shard int) (int64, error) {
	var id int64
	err := p.read.QueryRowContext(ctx, "SELECT COALESCE(MAX(added_id), 0) FROM "+p.d.entity(shard)).Scan(&id)
	if isNoTable(err) {
		return 0, nil
	}
	return id, err
}
