package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/cells"
)

// KV is one row of a partition's key-value table: small, mutable state replicated with the
// partition (consumer-group members, leases, offsets, parked cells). Keys are 1 to
// MaxKVKeyBytes bytes, compared bytewise (any bytes, not only UTF-8); values are at most
// MaxKVValueBytes bytes. An empty value reads back with length 0 (possibly nil).
type KV struct {
	Key   string
	Value []byte
}

// Limits of the KV table.
const (
	// MaxKVKeyBytes bounds a KV key.
	MaxKVKeyBytes = 255
	// MaxKVValueBytes bounds a KV value.
	MaxKVValueBytes = 16 << 20
)

// kvRowBytes estimates the bytes a KV row adds to an INSERT statement.
func kvRowBytes(kv *KV) int { return len(kv.Key) + len(kv.Value) + 64 }

// checkKV returns ErrKVTooLarge unless key and value are within the limits of the KV table.
func checkKV(key string, value []byte) error {
	if key == "" || len(key) > MaxKVKeyBytes {
		return fmt.Errorf("%w: key of %d bytes, want 1 to %d", ErrKVTooLarge, len(key), MaxKVKeyBytes)
	}
	if len(value) > MaxKVValueBytes {
		return fmt.Errorf("%w: value of key %q is %d bytes, want at most %d", ErrKVTooLarge, key, len(value), MaxKVValueBytes)
	}
	return nil
}

// kvValue is the SQL argument of a value: never nil, which both drivers would store as NULL.
func kvValue(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// prefixEnd returns the smallest key above every key that starts with prefix, or false when
// there is none (prefix empty or all 0xff bytes).
func prefixEnd(prefix string) ([]byte, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return b[:i+1], true
		}
	}
	return nil, false
}

// kvWhere returns the WHERE clause selecting the partition's KV rows that also satisfy cond
// ("" for all of them), with its arguments: in MySQL the partition's scope comes first. Keys
// are always bound as []byte, so both engines compare them bytewise (SQLite would order a
// TEXT argument before every BLOB).
func (p *PartitionStore) kvWhere(cond string, args ...any) (string, []any) {
	var (
		conds []string
		all   []any
	)
	if p.d.kvScoped {
		conds = append(conds, "datastore = ? AND `partition` = ?")
		all = append(all, p.id.Datastore, p.id.Partition)
	}
	if cond != "" {
		conds = append(conds, cond)
		all = append(all, args...)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), all
}

// kvInsertSQL is a multi-row INSERT of n KV rows of the partition.
func (p *PartitionStore) kvInsertSQL(n int) string {
	return p.scopedInsertSQL(p.d.kv, []string{"k", "v"}, n)
}

// scopedInsertSQL is "INSERT INTO table (cols) VALUES (...), ..." for n rows of a table scoped
// like the KV table: in MySQL each row starts with the partition's datastore and partition.
func (p *PartitionStore) scopedInsertSQL(table string, cols []string, n int) string {
	if p.d.kvScoped {
		cols = append([]string{"datastore", "`partition`"}, cols...)
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (")
	b.WriteString(strings.Join(cols, ", "))
	b.WriteString(") VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// kvRowArgs appends the INSERT arguments of one row.
func (p *PartitionStore) kvRowArgs(args []any, kv *KV) []any {
	if p.d.kvScoped {
		args = append(args, p.id.Datastore, p.id.Partition)
	}
	return append(args, []byte(kv.Key), kvValue(kv.Value))
}

// replaceKV deletes every KV row of the partition and inserts kvs, inside tx, with multi-row
// INSERTs within the dialect's limits. The caller checked the rows with checkKV; a key given
// twice returns ErrDuplicate.
func (p *PartitionStore) replaceKV(ctx context.Context, tx *sql.Tx, kvs []KV) error {
	where, args := p.kvWhere("")
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+p.d.kv+where, args...); err != nil {
		return p.fail("restore: empty the KV table", err)
	}
	for start := 0; start < len(kvs); {
		end, size := start, 0
		for end < len(kvs) && end-start < p.d.insertRows && (end == start || size+kvRowBytes(&kvs[end]) <= p.d.insertBytes) {
			size += kvRowBytes(&kvs[end])
			end++
		}
		args = args[:0]
		for i := start; i < end; i++ {
			args = p.kvRowArgs(args, &kvs[i])
		}
		if _, err := tx.ExecContext(ctx, p.kvInsertSQL(end-start), args...); err != nil {
			if isDuplicate(err) {
				return fmt.Errorf("storage: restore: insert %d KV rows: %w: %w", end-start, ErrDuplicate, err)
			}
			return p.fail(fmt.Sprintf("restore: insert %d KV rows", end-start), err)
		}
		start = end
	}
	return nil
}

// PutKV inserts the row key with value, or replaces the value of an existing row, in the
// transaction: readers see it once the transaction commits, and not at all if it rolls back.
// The transaction sees its own puts. An empty key, a key over MaxKVKeyBytes or a value over
// MaxKVValueBytes returns ErrKVTooLarge and writes nothing; a nil value is stored as an empty
// one. PutKV does not retain value. After Commit or Rollback it returns ErrClosed. Like the
// other WriteTx methods, it belongs to the partition's writer goroutine.
func (tx *WriteTx) PutKV(ctx context.Context, key string, value []byte) error {
	if tx.done || tx.p.closed.Load() {
		return ErrClosed
	}
	if err := checkKV(key, value); err != nil {
		return err
	}
	if tx.b != nil {
		return tx.pebblePutKV(key, value)
	}
	args := make([]any, 0, 4)
	if tx.p.d.kvScoped {
		args = append(args, tx.p.id.Datastore, tx.p.id.Partition)
	}
	args = append(args, []byte(key), kvValue(value))
	if _, err := tx.tx.ExecContext(ctx, tx.p.d.upsertKV, args...); err != nil {
		return tx.p.fail(fmt.Sprintf("put KV %q (%d bytes)", key, len(value)), err)
	}
	return nil
}

// DeleteKV deletes the row key in the transaction; deleting a missing key is not an error.
// Keys out of bounds (empty, over MaxKVKeyBytes) return ErrKVTooLarge: no such row can exist.
// After Commit or Rollback it returns ErrClosed. It belongs to the partition's writer goroutine.
func (tx *WriteTx) DeleteKV(ctx context.Context, key string) error {
	if tx.done || tx.p.closed.Load() {
		return ErrClosed
	}
	if err := checkKV(key, nil); err != nil {
		return err
	}
	if tx.b != nil {
		return tx.pebbleDeleteKV(key)
	}
	where, args := tx.p.kvWhere("k = ?", []byte(key))
	if _, err := tx.tx.ExecContext(ctx, "DELETE FROM "+tx.p.d.kv+where, args...); err != nil {
		return tx.p.fail(fmt.Sprintf("delete KV %q", key), err)
	}
	return nil
}

// ScanKV returns the committed rows whose key starts with prefix (every row for ""), in
// bytewise key order, nil when there are none, in one statement (a range of the primary key).
// The whole result is held in memory: keep prefixes narrow when values are large. Like the
// other reads it may run on any goroutine, concurrently with the writer; the slice and values
// belong to the caller.
func (p *PartitionStore) ScanKV(ctx context.Context, prefix string) ([]KV, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if p.pb != nil {
		return p.pebbleScanKV(prefix)
	}
	q, args := p.scanKVSQL(prefix)
	out, err := queryKV(ctx, p.read, q, 0, args...)
	if isNoTable(err) {
		return nil, nil // a read-only store (a minion) the meta tables have not reached yet
	}
	if err != nil {
		return nil, p.fail(fmt.Sprintf("scan KV prefix %q", prefix), err)
	}
	return out, nil
}

// scanKVSQL is the statement of ScanKV(prefix) and its arguments: a range of the primary key,
// [prefix, prefixEnd(prefix)).
func (p *PartitionStore) scanKVSQL(prefix string) (string, []any) {
	var (
		where string
		args  []any
	)
	switch end, ok := prefixEnd(prefix); {
	case prefix == "":
		where, args = p.kvWhere("")
	case ok:
		where, args = p.kvWhere("k >= ? AND k < ?", []byte(prefix), end)
	default:
		where, args = p.kvWhere("k >= ?", []byte(prefix))
	}
	return "SELECT k, v FROM " + p.d.kv + where + " ORDER BY k", args
}

// queryKV runs q and returns the (k, v) rows it selects; with maxBytes > 0 it stops after the
// row that brings the values read to maxBytes.
func queryKV(ctx context.Context, db queryer, q string, maxBytes int, args ...any) ([]KV, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out  []KV
		size int
	)
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out = append(out, KV{Key: string(k), Value: v})
		size += len(v)
		if maxBytes > 0 && size >= maxBytes {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// ScanKV calls fn with every KV row of the view, in bytewise key order, and returns fn's first
// error (wrapped) without calling it again. Rows are read in pages (at most 2000 rows, about
// 16 MiB of values), so memory stays flat; fn runs with no statement open and owns the row it
// is given, but must not call the SnapshotTx. A read error or ctx ending stops the scan; on
// MySQL it also breaks the view (later calls fail; Close still releases it).
func (s *SnapshotTx) ScanKV(ctx context.Context, fn func(KV) error) error {
	if s.closed {
		return ErrClosed
	}
	if s.p.closed.Load() {
		return ErrClosed
	}
	if s.snap != nil {
		return s.pebbleScanKV(fn)
	}
	var after []byte
	for {
		var (
			where string
			args  []any
		)
		if after == nil {
			where, args = s.p.kvWhere("")
		} else {
			where, args = s.p.kvWhere("k > ?", after)
		}
		args = append(args, snapshotPageRows)
		page, err := queryKV(ctx, s.conn, "SELECT k, v FROM "+s.p.d.kv+where+" ORDER BY k LIMIT ?", snapshotPageBytes, args...)
		if err != nil {
			return s.p.fail("snapshot scan KV", err)
		}
		for _, kv := range page {
			if err := fn(kv); err != nil {
				return fmt.Errorf("storage: snapshot scan KV: %w", err)
			}
		}
		if len(page) == 0 {
			return nil
		}
		after = []byte(page[len(page)-1].Key)
	}
}

// ReadLog reads the log of shard after location after: the read behind get_cells_for_shard.
// It returns the cells with added_id > after, in ascending added_id order, at most limit of
// them (limit must be positive, else an error); with column != "" only the cells of that
// column key (compared bytewise) and the tombstones of erased rows (cells.TombstoneColumn:
// a consumer of one column must see erasures too), found by scanning the shard's added_id
// range (there is no index on column_name, so a rare column may scan many rows).
//
// high is the shard's highest committed added_id (0 if the shard holds no cell). It is read
// first and the cells are read up to it, so a cell committed meanwhile is left for the next
// call rather than skipped. next is where to read on from: the AddedID of the last cell when
// limit cells were returned, otherwise max(after, high), which moves a filtered read past the
// cells of other columns it has seen. A shard whose tables do not exist reads as empty. A
// shard outside the range returns ErrShardRange. Two statements on the read pool, each seeing
// the latest committed data; any goroutine may call it, concurrently with the writer. The
// cells belong to the caller; CreatedAt is in UTC.
func (p *PartitionStore) ReadLog(ctx context.Context, shard int, after int64, column string, limit int) (cs []cells.Cell, next, high int64, err error) {
	if err := p.checkShard(shard); err != nil {
		return nil, 0, 0, err
	}
	if limit <= 0 {
		return nil, 0, 0, fmt.Errorf("storage: read log of shard %d: limit %d is not positive", shard, limit)
	}
	if p.pb != nil {
		return p.pebbleReadLog(shard, after, column, limit)
	}
	high, err = p.maxAddedID(ctx, shard)
	if err != nil {
		return nil, 0, 0, p.fail(fmt.Sprintf("read log of shard %d: max added_id", shard), err)
	}
	if high <= after {
		return nil, after, high, nil
	}
	q := "SELECT " + cellColumns + " FROM " + p.d.entity(shard) + " WHERE added_id > ? AND added_id <= ?"
	args := []any{after, high}
	if column != "" {
		q += " AND column_name IN (?, ?)"
		args = append(args, column, cells.TombstoneColumn)
	}
	q += " ORDER BY added_id LIMIT ?"
	args = append(args, limit)
	cs, err = queryCells(ctx, p.read, q, args...)
	if err != nil {
		return nil, 0, 0, p.fail(fmt.Sprintf("read log of shard %d after %d", shard, after), err)
	}
	if len(cs) == limit {
		return cs, cs[len(cs)-1].AddedID, high, nil
	}
	return cs, max(after, high), high, nil
}

// LocationAt returns a log location L of shard such that ReadLog after L starts with the first
// cell (by added_id) whose created_at is at or after t: that cell's added_id - 1. If no cell
// is that recent, it returns the shard's highest added_id (0 for a shard with no cell or no
// tables), so reading from there yields only later cells. t is compared at microsecond
// precision, as created_at is stored. Cells after L are not all at or after t when created_at
// went backwards between leaders (clock skew): L is about where the log reaches t, not a
// filter. There is no index on created_at: it scans the shard in added_id order up to the
// first match (the whole shard when there is none), reading the highest added_id first so a
// cell committed meanwhile is never skipped. A shard outside the range returns ErrShardRange.
// Any goroutine may call it, concurrently with the writer.
func (p *PartitionStore) LocationAt(ctx context.Context, shard int, t time.Time) (int64, error) {
	if err := p.checkShard(shard); err != nil {
		return 0, err
	}
	if p.pb != nil {
		return p.pebbleLocationAt(shard, t)
	}
	high, err := p.maxAddedID(ctx, shard)
	if err != nil {
		return 0, p.fail(fmt.Sprintf("location at %s in shard %d: max added_id", t.Format(time.RFC3339Nano), shard), err)
	}
	if high == 0 {
		return 0, nil
	}
	var first int64
	err = p.read.QueryRowContext(ctx, "SELECT added_id FROM "+p.d.entity(shard)+
		" WHERE created_at >= ? AND added_id <= ? ORDER BY added_id LIMIT 1", p.d.timeArg(t), high).Scan(&first)
	switch {
	case errors.Is(err, sql.ErrNoRows) || isNoTable(err):
		return high, nil
	case err != nil:
		return 0, p.fail(fmt.Sprintf("location at %s in shard %d", t.Format(time.RFC3339Nano), shard), err)
	}
	return first - 1, nil
}
