package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// lookupIndexChunk bounds the row keys of one LookupIndex statement.
const lookupIndexChunk = 500

// LookupIndex returns the entries of t's table on shard stored under any of rowKeys, as the
// open write transaction sees them (its own upserts included), keyed by row key; keys with no
// entry are absent. The map and the entries belong to the caller. Duplicate keys are allowed.
// One statement reads up to 500 keys through the primary key. A table that does not exist
// returns ErrNoIndexTable (create it with EnsureIndex before Begin); an invalid t
// ErrInvalidConfig, a shard outside the range ErrShardRange, after Commit or Rollback
// ErrClosed. Like the other WriteTx methods it belongs to the writer goroutine; an error other
// than the invalid arguments leaves the transaction's outcome undefined: roll it back.
func (tx *WriteTx) LookupIndex(ctx context.Context, shard int, t IndexTable, rowKeys []uuid.UUID) (map[uuid.UUID]IndexEntry, error) {
	if err := tx.check(shard); err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if tx.b != nil {
		return tx.pebbleLookupIndex(shard, &t, rowKeys)
	}
	out := make(map[uuid.UUID]IndexEntry, len(rowKeys))
	tbl := tx.p.d.indexTable(t.Name, shard)
	args := make([]any, 0, min(len(rowKeys), lookupIndexChunk))
	for start := 0; start < len(rowKeys); start += lookupIndexChunk {
		chunk := rowKeys[start:min(start+lookupIndexChunk, len(rowKeys))]
		args = args[:0]
		for i := range chunk {
			args = append(args, chunk[i][:])
		}
		q := "SELECT " + indexColumns(&t) + " FROM " + tbl + " WHERE row_key IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		found, _, err := queryIndexEntries(ctx, tx.stmtOrTx(ctx, q), &t, q, 0, args...)
		if err != nil {
			if isNoTable(err) {
				return nil, fmt.Errorf("storage: lookup in index %s of shard %d: %w: %w", t.Name, shard, ErrNoIndexTable, err)
			}
			return nil, tx.p.fail(fmt.Sprintf("lookup %d row keys in index %s of shard %d", len(chunk), t.Name, shard), err)
		}
		for _, e := range found {
			out[e.RowKey] = e
		}
	}
	return out, nil
}

// UpsertIndex writes entries into t's table on shard in the transaction: each entry inserts
// its row key's row or replaces every column of the stored one (a row key given twice keeps
// the last). It writes multi-row statements of up to 500 entries (fewer when large). Every
// value is checked first: a value whose Go type does not match its column's kind, a string
// over MaxIndexStringBytes, a float that is not finite or a Values of the wrong length returns
// ErrIndexValue before anything is written by this call (the caller then rolls back). A table
// that does not exist returns ErrNoIndexTable; an invalid t ErrInvalidConfig, a shard outside
// the range ErrShardRange, after Commit or Rollback ErrClosed. UpsertIndex does not retain
// entries. Other errors leave the transaction's outcome undefined: roll it back.
func (tx *WriteTx) UpsertIndex(ctx context.Context, shard int, t IndexTable, entries []IndexEntry) error {
	if err := tx.check(shard); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	if tx.b != nil {
		return tx.pebbleUpsertIndex(shard, &t, entries)
	}
	if err := insertIndex(ctx, func(q string) stmtQueryer { return tx.stmtOrTx(ctx, q) }, tx.p.d, &t, shard, entries, true); err != nil {
		if tx.p.closed.Load() {
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return err
	}
	return nil
}

// IndexCond is one condition of an IndexQuery on column Column (an index into
// IndexTable.Columns). Op is one of "=", "!=", "<", "<=", ">", ">=" with exactly one value, or
// "in" with 1 or more. Values are of the column kind's Go type, never nil. Conditions follow
// SQL: a NULL field matches none, not even "!=".
type IndexCond struct {
	Column int
	Op     string
	Values []any
}

// IndexCursor is a position in the order of an IndexQuery: that of the last entry of the
// previous page, its value of the OrderBy column (nil for NULL; ignored when OrderBy is -1)
// and its row key.
type IndexCursor struct {
	Value  any
	RowKey uuid.UUID
}

// IndexQuery selects entries of one index table on one shard.
type IndexQuery struct {
	// ShardValue is required, not nil: only entries whose column 0 equals it are selected.
	ShardValue any
	// Where holds conditions, ANDed.
	Where []IndexCond
	// OrderBy is the column to order by, then by row key; -1 orders by row key only. NULLs
	// come first in ascending order and last in descending order.
	OrderBy int
	// Desc reverses the order (of the column and of the row key).
	Desc bool
	// After, if not nil, selects only the entries strictly after that position in the order
	// (keyset pagination).
	After *IndexCursor
	// Limit bounds the entries returned, 1 to MaxIndexQueryLimit.
	Limit int
}

// indexOps are the operators of IndexCond, with their SQL.
var indexOps = map[string]string{"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "IN"}

// indexQuerySQL builds the statement of q on t's table of shard:
// WHERE f_0 = ? AND <conds> AND <keyset> ORDER BY <f_orderby> [DESC], row_key [DESC] LIMIT ?.
// An invalid q returns an error wrapping ErrInvalidQuery.
func (d *dialect) indexQuerySQL(t *IndexTable, shard int, q *IndexQuery) (string, []any, error) {
	bad := func(format string, a ...any) (string, []any, error) {
		return "", nil, fmt.Errorf("%w: index %s: %s", ErrInvalidQuery, t.Name, fmt.Sprintf(format, a...))
	}
	if q.Limit < 1 || q.Limit > MaxIndexQueryLimit {
		return bad("limit %d is not within [1, %d]", q.Limit, MaxIndexQueryLimit)
	}
	if q.OrderBy < -1 || q.OrderBy >= len(t.Columns) {
		return bad("order by column %d, want -1 to %d", q.OrderBy, len(t.Columns)-1)
	}
	if q.ShardValue == nil {
		return bad("ShardValue is nil")
	}
	sv, err := d.indexArg(t.Columns[0].Kind, q.ShardValue)
	if err != nil {
		return bad("ShardValue for column %s (%s): %v", t.Columns[0].Name, t.Columns[0].Kind, err)
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(indexColumns(t))
	b.WriteString(" FROM ")
	b.WriteString(d.indexTable(t.Name, shard))
	b.WriteString(" WHERE f_")
	b.WriteString(t.Columns[0].Name)
	b.WriteString(" = ?")
	args := []any{sv}
	for i, c := range q.Where {
		if c.Column < 0 || c.Column >= len(t.Columns) {
			return bad("condition %d: column %d, want 0 to %d", i, c.Column, len(t.Columns)-1)
		}
		col := t.Columns[c.Column]
		op, ok := indexOps[c.Op]
		if !ok {
			return bad("condition %d: unknown operator %q (want =, !=, <, <=, >, >= or in)", i, c.Op)
		}
		if c.Op == "in" && len(c.Values) == 0 || c.Op != "in" && len(c.Values) != 1 {
			return bad("condition %d: operator %q with %d values (want 1, or 1 or more for in)", i, c.Op, len(c.Values))
		}
		if len(args)+len(c.Values) > indexMaxVars {
			return bad("more than %d values in conditions", indexMaxVars)
		}
		for j, v := range c.Values {
			if v == nil {
				return bad("condition %d on %s: value %d is nil (NULL matches no condition)", i, col.Name, j)
			}
			a, err := d.indexArg(col.Kind, v)
			if err != nil {
				return bad("condition %d on %s (%s): value %d: %v", i, col.Name, col.Kind, j, err)
			}
			args = append(args, a)
		}
		b.WriteString(" AND f_")
		b.WriteString(col.Name)
		if c.Op == "in" {
			b.WriteString(" IN (?")
			b.WriteString(strings.Repeat(", ?", len(c.Values)-1))
			b.WriteString(")")
		} else {
			b.WriteString(" " + op + " ?")
		}
	}
	dir := ""
	if q.Desc {
		dir = " DESC"
	}
	orderBy := "row_key" + dir
	if q.OrderBy >= 0 {
		orderBy = "f_" + t.Columns[q.OrderBy].Name + dir + ", " + orderBy
	}
	if q.After != nil {
		rk := q.After.RowKey[:]
		after := ">"
		if q.Desc {
			after = "<"
		}
		if q.OrderBy < 0 {
			b.WriteString(" AND row_key " + after + " ?")
			args = append(args, rk)
		} else {
			col := t.Columns[q.OrderBy]
			f := "f_" + col.Name
			v, err := d.indexArg(col.Kind, q.After.Value)
			if err != nil {
				return bad("cursor value for %s (%s): %v", col.Name, col.Kind, err)
			}
			// NULL sorts below every value: first ascending, last descending.
			switch {
			case v == nil && !q.Desc:
				b.WriteString(" AND (" + f + " IS NOT NULL OR row_key > ?)")
				args = append(args, rk)
			case v == nil && q.Desc:
				b.WriteString(" AND " + f + " IS NULL AND row_key < ?")
				args = append(args, rk)
			case !q.Desc:
				b.WriteString(" AND (" + f + " > ? OR " + f + " = ? AND row_key > ?)")
				args = append(args, v, v, rk)
			default:
				b.WriteString(" AND (" + f + " < ? OR " + f + " = ? AND row_key < ? OR " + f + " IS NULL)")
				args = append(args, v, v, rk)
			}
		}
	}
	b.WriteString(" ORDER BY ")
	b.WriteString(orderBy)
	b.WriteString(" LIMIT ?")
	args = append(args, q.Limit)
	return b.String(), args, nil
}

// QueryIndex returns the entries of t's table on shard that q selects, in q's order, at most
// q.Limit of them; nil when none. To page, pass the OrderBy value and row key of the last
// entry as the next query's After. It is one statement on the read pool, served by the table's
// B-tree on (column 0, OrderBy column, row key), and sees the latest committed data; any
// goroutine may call it, concurrently with the writer. A table that does not exist on shard
// yields nothing. An invalid q (column out of range, unknown operator, wrong number of values,
// a value of the wrong type, a nil ShardValue, a limit out of range) returns an error wrapping
// ErrInvalidQuery; an invalid t ErrInvalidConfig; a shard outside the range ErrShardRange.
// The entries belong to the caller.
func (p *PartitionStore) QueryIndex(ctx context.Context, shard int, t IndexTable, q IndexQuery) ([]IndexEntry, error) {
	if err := p.checkShard(shard); err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	stmt, args, err := p.d.indexQuerySQL(&t, shard, &q)
	if err != nil {
		return nil, err
	}
	if p.pb != nil {
		return p.pebbleQueryIndex(shard, &t, &q)
	}
	out, _, err := queryIndexEntries(ctx, p.read, &t, stmt, 0, args...)
	if err != nil {
		if isNoTable(err) {
			return nil, nil
		}
		return nil, p.fail(fmt.Sprintf("query index %s of shard %d", t.Name, shard), err)
	}
	return out, nil
}

// IndexStats counts the committed entries of t's table over the shards of the partition, and
// those whose Violation is not 0; shards where the table does not exist count 0. It lists the
// tables from the catalog, then counts each with one statement (a scan of the table) on the
// read pool; any goroutine may call it, concurrently with the writer. An invalid t returns
// ErrInvalidConfig.
func (p *PartitionStore) IndexStats(ctx context.Context, t IndexTable) (entries, violations int64, err error) {
	if p.closed.Load() {
		return 0, 0, ErrClosed
	}
	if err := t.Validate(); err != nil {
		return 0, 0, err
	}
	if p.pb != nil {
		return p.pebbleIndexStats(&t)
	}
	tables, err := p.indexTables(ctx, p.read)
	if err != nil {
		return 0, 0, p.fail("list index tables", err)
	}
	for _, s := range tables[t.Name] {
		var n, v int64
		err := p.read.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(CASE WHEN violation_ref <> 0 THEN 1 END) FROM "+
			p.d.indexTable(t.Name, s)).Scan(&n, &v)
		if err != nil && !isNoTable(err) {
			return 0, 0, p.fail(fmt.Sprintf("count index %s of shard %d", t.Name, s), err)
		}
		entries += n
		violations += v
	}
	return entries, violations, nil
}

// ScanIndex calls fn with every entry of t's table on shard in the view, in row key order, and
// returns fn's first error (wrapped) without calling it again. A table that did not exist when
// the view was taken yields nothing (in MySQL also one dropped since, by DropIndex or Restore,
// before the view read it). Entries are read in pages (at most 2000 entries, about 16 MiB), so
// memory stays flat; fn runs with no statement open and owns the entry it is given, but must
// not call the SnapshotTx. An invalid t returns ErrInvalidConfig, a shard outside the range
// ErrShardRange. A read error or ctx ending stops the scan; on MySQL it also breaks the view.
func (s *SnapshotTx) ScanIndex(ctx context.Context, shard int, t IndexTable, fn func(IndexEntry) error) error {
	if s.closed {
		return ErrClosed
	}
	if err := s.p.checkShard(shard); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	if s.snap != nil {
		return s.pebbleScanIndex(shard, &t, fn)
	}
	return s.scanIndexSQL(ctx, shard, &t, fn)
}

// scanIndexSQL is ScanIndex on the SQL engines, for any shard, whether or not it is in the
// partition's range.
func (s *SnapshotTx) scanIndexSQL(ctx context.Context, shard int, t *IndexTable, fn func(IndexEntry) error) error {
	sel := "SELECT " + indexColumns(t) + " FROM " + s.p.d.indexTable(t.Name, shard)
	var after []byte
	limit := snapshotPageRows
	for {
		q, args := sel+" ORDER BY row_key LIMIT ?", []any{limit}
		if after != nil {
			q, args = sel+" WHERE row_key > ? ORDER BY row_key LIMIT ?", []any{after, limit}
		}
		page, full, err := queryIndexEntries(ctx, s.conn, t, q, snapshotPageBytes, args...)
		if err != nil {
			if isNoTable(err) && after == nil {
				return nil
			}
			return s.p.fail(fmt.Sprintf("snapshot scan index %s of shard %d", t.Name, shard), err)
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return fmt.Errorf("storage: snapshot scan index %s of shard %d: %w", t.Name, shard, err)
			}
		}
		if len(page) == 0 || (!full && len(page) < limit) {
			return nil
		}
		last := page[len(page)-1].RowKey
		after = last[:]
		if full {
			limit = max(len(page), 1)
		} else {
			limit = min(limit*2, snapshotPageRows)
		}
	}
}

// queryIndexEntries runs q, which selects indexColumns(t), and returns its entries; with
// maxBytes > 0 it stops after the entry that brings the bytes read to maxBytes (full). A
// missing table is returned as the driver's error (isNoTable).
func queryIndexEntries(ctx context.Context, db rowsQueryer, t *IndexTable, q string, maxBytes int, args ...any) (out []IndexEntry, full bool, err error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var (
		rowKey []byte
		dest   = make([]any, len(t.Columns)+3)
		size   int
	)
	dest[0] = &rowKey
	for rows.Next() {
		e := IndexEntry{Values: make([]any, len(t.Columns))}
		for i, c := range t.Columns {
			dest[i+1] = indexScanner{kind: c.Kind, v: &e.Values[i]}
		}
		dest[len(t.Columns)+1] = &e.Refs
		dest[len(t.Columns)+2] = &e.Violation
		if err := rows.Scan(dest...); err != nil {
			return nil, false, err
		}
		if e.RowKey, err = uuid.FromBytes(rowKey); err != nil {
			return nil, false, fmt.Errorf("storage: stored row key of %d bytes: %w", len(rowKey), err)
		}
		out = append(out, e)
		size += entryBytes(&e)
		if maxBytes > 0 && size >= maxBytes {
			full = true
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	return out, full, rows.Close()
}

// indexScanner scans a field column into the Go type of its kind (nil for NULL). It accepts
// what either driver returns: typed values, or bytes of text (MySQL's text protocol).
type indexScanner struct {
	kind IndexKind
	v    *any
}

// Scan implements sql.Scanner.
func (s indexScanner) Scan(src any) error {
	if src == nil {
		*s.v = nil
		return nil
	}
	var (
		v   any
		err error
	)
	switch s.kind {
	case IndexUUID:
		switch x := src.(type) {
		case []byte:
			v, err = uuid.FromBytes(x)
		case string:
			v, err = uuid.FromBytes([]byte(x))
		}
	case IndexString:
		switch x := src.(type) {
		case []byte:
			v = string(x)
		case string:
			v = x
		}
	case IndexInt, IndexDatetime, IndexBool:
		var n int64
		switch x := src.(type) {
		case int64:
			n = x
		case []byte:
			n, err = strconv.ParseInt(string(x), 10, 64)
		default:
			err = fmt.Errorf("unexpected %T", src)
		}
		v = n
		if s.kind == IndexBool {
			v = n != 0
		}
	case IndexFloat:
		switch x := src.(type) {
		case float64:
			v = x
		case int64:
			v = float64(x)
		case []byte:
			v, err = strconv.ParseFloat(string(x), 64)
		}
	}
	if err == nil && v == nil {
		err = fmt.Errorf("unexpected %T", src)
	}
	if err != nil {
		return fmt.Errorf("storage: index column of kind %s: %w", s.kind, err)
	}
	*s.v = v
	return nil
}

var _ sql.Scanner = indexScanner{}
