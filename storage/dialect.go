package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Engine names returned by Store.Engine.
const (
	EngineSQLite = "sqlite"
	EngineMySQL  = "mysql"
)

// schemaVersion is the layout version written to the meta table. A partition whose meta row
// holds a higher version was written by a newer build and is refused.
const schemaVersion = 1

// cellColumns is the select list every cell query uses, in the order scanCell reads.
const cellColumns = "added_id, row_key, column_name, ref_key, body, created_at, origin"

// lookupChunkKeys bounds the keys of one Lookup statement (3 placeholders each): MySQL's OR
// of this many terms stays far below its placeholder and packet limits, SQLite's VALUES list
// far below its 32766 variables.
const lookupChunkKeys = 200

// dialect holds what differs between the engines for one partition: table names, DDL (of the
// entity and index tables), the upserts of the meta and KV rows, how a snapshot starts and how
// large a multi-row INSERT may be.
// Everything else is the same SQL on both engines.
type dialect struct {
	engine string
	// prefix is the MySQL database prefix ("" for SQLite).
	prefix string
	// entity returns the qualified, quoted entity table of a shard.
	entity func(shard int) string
	// shardDDL returns the statements creating a shard's tables, each idempotent.
	shardDDL func(shard int) []string
	// lookupHint follows the table name in Lookup: MySQL's optimizer prefers a table scan
	// to many unique-key ranges on small tables, and FORCE INDEX keeps the plan at one index
	// probe per key whatever the table's size.
	lookupHint string
	// meta is the qualified, quoted meta table.
	meta string
	// upsertApplied inserts or updates the meta row; args: datastore, partition, index, term,
	// schema version.
	upsertApplied string
	// kv is the qualified, quoted KV table.
	kv string
	// kvScoped: the KV table is shared by the partitions (MySQL), its rows carry datastore and
	// partition columns, and every statement on it is scoped by them; in SQLite the table is
	// the partition file's own.
	kvScoped bool
	// requests is the qualified, quoted requests table (RequestRecord), scoped like kv.
	requests string
	// upsertKV inserts or replaces a KV row; args: datastore and partition if kvScoped, then
	// key and value (both []byte).
	upsertKV string
	// database returns the (unquoted) database of a shard in MySQL; nil in SQLite, where
	// every table is in the partition's file.
	database func(shard int) string
	// indexTable returns the qualified, quoted table of index name on a shard.
	indexTable func(name string, shard int) string
	// indexDDL returns the statements creating the table of t on a shard, each idempotent.
	indexDDL func(t *IndexTable, shard int) []string
	// indexDef returns the definition of t's table as indexDefs reads it back from the
	// catalog, to tell whether an existing table has t's columns.
	indexDef func(t *IndexTable) string
	// snapshotBegin are the statements that open a consistent read transaction on a connection.
	snapshotBegin []string
	// insertRows and insertBytes bound one multi-row INSERT.
	insertRows, insertBytes int
}

// timeArg is the SQL argument storing t as created_at: microseconds since the Unix epoch in
// SQLite, a UTC DATETIME(6) in MySQL. Sub-microsecond digits are dropped (truncated) on both.
func (d *dialect) timeArg(t time.Time) any {
	if d.engine == EngineSQLite {
		return t.UnixMicro()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// createdAt scans created_at of either engine into a UTC time.
type createdAt struct{ t *time.Time }

// Scan implements sql.Scanner.
func (c createdAt) Scan(v any) error {
	switch x := v.(type) {
	case int64:
		*c.t = time.UnixMicro(x).UTC()
	case time.Time:
		*c.t = x.UTC()
	default:
		return fmt.Errorf("storage: created_at of type %T", v)
	}
	return nil
}

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanCell reads one row of cellColumns.
func scanCell(r rowScanner) (cells.Cell, error) {
	var (
		c         cells.Cell
		rowKey    []byte
		body      []byte
		createdAt time.Time
	)
	if err := r.Scan(&c.AddedID, &rowKey, &c.ColumnKey, &c.RefKey, &body, createdAtScanner(&createdAt), &c.Origin); err != nil {
		return cells.Cell{}, err
	}
	u, err := uuid.FromBytes(rowKey)
	if err != nil {
		return cells.Cell{}, fmt.Errorf("storage: stored row key of %d bytes: %w", len(rowKey), err)
	}
	c.RowKey = u
	c.Body = cells.Body(body)
	c.CreatedAt = createdAt
	return c, nil
}

func createdAtScanner(t *time.Time) sql.Scanner { return createdAt{t} }

// rowsQueryer runs a query (a *sql.DB, a *sql.Tx, or a stmtQueryer).
type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryer is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// queryCells runs q and returns every cell it selects. A missing shard table yields no cells.
func queryCells(ctx context.Context, db rowsQueryer, q string, args ...any) ([]cells.Cell, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		if isNoTable(err) {
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	var out []cells.Cell
	for rows.Next() {
		c, err := scanCell(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		if isNoTable(err) {
			return nil, nil
		}
		return nil, err
	}
	return out, nil
}

// readApplied reads the meta row of id; zero if there is none.
func readApplied(ctx context.Context, db queryer, d *dialect, id PartitionID) (AppliedState, int, error) {
	return scanApplied(db.QueryRowContext(ctx, appliedSQL(d), id.Datastore, id.Partition))
}

// appliedSQL is the query of a partition's meta row; args: datastore, partition.
func appliedSQL(d *dialect) string {
	return "SELECT applied_index, applied_term, schema_version FROM " + d.meta + " WHERE datastore = ? AND `partition` = ?"
}

// scanApplied reads the row of appliedSQL: the applied state and the layout version, zero when
// there is no row.
func scanApplied(row *sql.Row) (AppliedState, int, error) {
	var (
		a       AppliedState
		version int
	)
	err := row.Scan(&a.Index, &a.Term, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return AppliedState{}, 0, nil
	}
	if err != nil {
		return AppliedState{}, 0, err
	}
	return a, version, nil
}

// lookupSQL is the Lookup statement for n keys of a shard, answered with one probe of the
// unique key per key (checked with EXPLAIN by TestQueriesUseUniqueKey). MySQL: an OR of full
// unique-key equalities with FORCE INDEX (one range each). SQLite: a row-value IN over a
// VALUES list, which it plans as index searches and parses faster than the OR.
func lookupSQL(d *dialect, shard, n int) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(cellColumns)
	b.WriteString(" FROM ")
	b.WriteString(d.entity(shard))
	b.WriteString(d.lookupHint)
	if d.engine == EngineSQLite {
		b.WriteString(" WHERE (row_key, column_name, ref_key) IN (VALUES ")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?)")
		}
		b.WriteString(")")
		return b.String()
	}
	b.WriteString(" WHERE ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(row_key = ? AND column_name = ? AND ref_key = ?)")
	}
	return b.String()
}

// insertSQL is a multi-row INSERT of n cells into a shard.
func insertSQL(d *dialect, shard, n int) string {
	const row = "(?, ?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.Grow(64 + n*(len(row)+2))
	b.WriteString("INSERT INTO ")
	b.WriteString(d.entity(shard))
	b.WriteString(" (")
	b.WriteString(cellColumns)
	b.WriteString(") VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// cellBytes estimates the bytes a cell adds to an INSERT statement.
func cellBytes(c *cells.Cell) int { return len(c.Body) + len(c.ColumnKey) + len(c.Origin) + 128 }

// checkOrigins returns an error wrapping ErrInvalidOrigin (and the *cells.FieldError of
// cells.ValidateClusterName) for the first cell of cs whose Origin is neither "" nor a valid
// cluster name; what names the call in the message.
func checkOrigins(what string, cs []cells.Cell) error {
	for i := range cs {
		if err := checkOrigin(&cs[i]); err != nil {
			return fmt.Errorf("storage: %s: cell %d (%s): %w", what, i, cs[i].Key, err)
		}
	}
	return nil
}

// checkOrigin returns an error wrapping ErrInvalidOrigin when c.Origin is neither "" nor a valid
// cluster name.
func checkOrigin(c *cells.Cell) error {
	if c.Origin == "" {
		return nil
	}
	if err := cells.ValidateClusterName("origin", c.Origin); err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidOrigin, c.Origin, err)
	}
	return nil
}

// insertCells inserts cs into shard with multi-row INSERTs within d's limits.
func insertCells(ctx context.Context, stmt func(q string) stmtQueryer, d *dialect, shard int, cs []cells.Cell) error {
	args := make([]any, 0, 7*min(len(cs), d.insertRows))
	for start := 0; start < len(cs); {
		end := insertChunkEnd(d, cs, start)
		args = args[:0]
		for i := start; i < end; i++ {
			c := &cs[i]
			args = append(args, c.AddedID, c.RowKey[:], c.ColumnKey, c.RefKey, []byte(c.Body), d.timeArg(c.CreatedAt), c.Origin)
		}
		if _, err := stmt(insertSQL(d, shard, end-start)).Exec(ctx, args...); err != nil {
			switch {
			case isDuplicate(err):
				return fmt.Errorf("storage: insert %d cells into shard %d: %w: %w", end-start, shard, ErrDuplicate, err)
			case isNoTable(err):
				return fmt.Errorf("storage: insert into shard %d: %w: %w", shard, ErrNoShardTable, err)
			}
			return fmt.Errorf("storage: insert %d cells into shard %d: %w", end-start, shard, err)
		}
		start = end
	}
	return nil
}

// insertChunkEnd returns the end of the multi-row INSERT that starts at cs[start]: at most
// d.insertRows cells and d.insertBytes of them, but always at least one.
func insertChunkEnd(d *dialect, cs []cells.Cell, start int) int {
	end, size := start, 0
	for end < len(cs) && end-start < d.insertRows && (end == start || size+cellBytes(&cs[end]) <= d.insertBytes) {
		size += cellBytes(&cs[end])
		end++
	}
	return end
}

// manyStatements reports whether insertCells runs more than one INSERT for cs.
func manyStatements(d *dialect, cs []cells.Cell) bool { return insertChunkEnd(d, cs, 0) < len(cs) }

// MySQL and SQLite error codes the store interprets.
const (
	mysqlErrDupEntry        = 1062 // ER_DUP_ENTRY
	mysqlErrBadDB           = 1049 // ER_BAD_DB_ERROR
	mysqlErrNoSuchTable     = 1146 // ER_NO_SUCH_TABLE
	mysqlErrTableDefChanged = 1412 // ER_TABLE_DEF_CHANGED: table created after the read view
	mysqlErrDupFieldName    = 1060 // ER_DUP_FIELDNAME: ALTER TABLE ADD COLUMN of a column that exists
)

// isNoTable reports whether err says a shard table does not exist (or, inside a MySQL read
// view, did not exist when the view was taken). Reads treat that as an empty shard.
func isNoTable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == mysqlErrNoSuchTable || me.Number == mysqlErrBadDB || me.Number == mysqlErrTableDefChanged
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_ERROR && strings.Contains(se.Error(), "no such table")
	}
	return false
}

// isDuplicate reports whether err is a unique or primary key violation.
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == mysqlErrDupEntry
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}
