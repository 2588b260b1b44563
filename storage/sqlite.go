package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SQLite settings that are not configurable.
const (
	// sqliteBusyTimeoutMillis is how long a connection waits for a lock (the WAL checkpoint,
	// another process) before SQLITE_BUSY.
	sqliteBusyTimeoutMillis = 10000
	// sqliteInsertRows bounds a multi-row INSERT: 7 variables a row stays far below
	// SQLITE_MAX_VARIABLE_NUMBER (32766 in modernc.org/sqlite).
	sqliteInsertRows = 500
	// sqliteInsertBytes bounds the bodies of one INSERT, to keep statements of large bodies
	// from holding much memory at once.
	sqliteInsertBytes = 16 << 20
)

// OpenSQLite opens (creating cfg.Dir if missing) the embedded store: one SQLite database file per
// partition in cfg.Dir, opened by Store.Partition. Zero fields of cfg take their defaults;
// an invalid cfg returns errors wrapping ErrInvalidConfig. No file is opened until Partition.
// A partition's file must not be opened by another Store at the same time (in this process or
// another): each would take itself for the partition's only writer.
func OpenSQLite(ctx context.Context, cfg SQLiteConfig) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("storage: sqlite dir: %w", err)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("storage: sqlite dir: %w", err)
	}
	cfg.Dir = dir
	if err := removeStalePrecopies(dir); err != nil {
		return nil, fmt.Errorf("storage: sqlite dir: %w", err)
	}
	s := &Store{engine: EngineSQLite, sqliteDir: cfg.Dir, sqliteSync: cfg.Synchronous != "NORMAL", parts: make(map[PartitionID]*PartitionStore), keepFor: KeepReleased}
	s.openPartition = func(ctx context.Context, id PartitionID) (*dialect, *sql.DB, *sql.DB, bool, error) {
		return openSQLitePartition(ctx, cfg, id)
	}
	return s, nil
}

// sqlitePath is the database file of a partition.
func sqlitePath(dir string, id PartitionID) string {
	return filepath.Join(dir, fmt.Sprintf("%s-p%d.db", id.Datastore, id.Partition))
}

// sqliteURI turns path into a "file:" URI with the driver parameters of query. SQLite decodes
// %HH escapes in the path, so '%', '?' and '#' are escaped.
func sqliteURI(path, query string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + r.Replace(filepath.ToSlash(path)) + "?" + query
}

func sqliteDialect() *dialect {
	return &dialect{
		engine: EngineSQLite,
		entity: func(shard int) string { return fmt.Sprintf("entity_%04d", shard) },
		shardDDL: func(shard int) []string {
			// added_id is the rowid (INTEGER PRIMARY KEY); column_name compares with BINARY, so
			// "base" and "BASE" differ. STRICT rejects values of the wrong type. origin is the
			// last column, where migrateSQLiteEntities adds it to a table created without it.
			return []string{fmt.Sprintf(`CREATE TABLE IF NOT EXISTS entity_%04d (
	added_id INTEGER PRIMARY KEY,
	row_key BLOB NOT NULL,
	column_name TEXT COLLATE BINARY NOT NULL,
	ref_key INTEGER NOT NULL,
	body BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	`+sqliteOriginColumn+`,
	UNIQUE (row_key, column_name, ref_key)
) STRICT`, shard)}
		},
		indexTable: sqliteIndexTable,
		indexDDL:   sqliteIndexDDL,
		indexDef:   sqliteIndexDef,
		meta:       "meta",
		upsertApplied: "INSERT INTO meta (datastore, `partition`, applied_index, applied_term, schema_version) " +
			"VALUES (?, ?, ?, ?, ?) ON CONFLICT (datastore, `partition`) DO UPDATE SET " +
			"applied_index = excluded.applied_index, applied_term = excluded.applied_term, schema_version = excluded.schema_version",
		kv:       "kv",
		requests: "requests",
		upsertKV: "INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		// BEGIN is deferred: the first read (of the meta row) takes the WAL snapshot, and the
		// transaction keeps it until it ends.
		snapshotBegin: []string{"BEGIN"},
		insertRows:    sqliteInsertRows,
		insertBytes:   sqliteInsertBytes,
	}
}

const sqliteMetaDDL = "CREATE TABLE IF NOT EXISTS meta (\n" +
	"\tdatastore TEXT NOT NULL,\n" +
	"\t`partition` INTEGER NOT NULL,\n" +
	"\tapplied_index INTEGER NOT NULL,\n" +
	"\tapplied_term INTEGER NOT NULL,\n" +
	"\tschema_version INTEGER NOT NULL,\n" +
	"\tPRIMARY KEY (datastore, `partition`)\n" +
	") STRICT"

// sqliteKVDDL creates the partition's KV table. Keys are BLOBs, which SQLite compares with
// memcmp: bytewise. A rowid table rather than WITHOUT ROWID, as values may be large.
const sqliteKVDDL = "CREATE TABLE IF NOT EXISTS kv (\n" +
	"\tk BLOB NOT NULL PRIMARY KEY,\n" +
	"\tv BLOB NOT NULL\n" +
	") STRICT"

// sqliteRequestsDDL creates the partition's requests table and its index by time.
var sqliteRequestsDDL = []string{
	"CREATE TABLE IF NOT EXISTS requests (\n" +
		"\tid BLOB NOT NULL PRIMARY KEY,\n" +
		"\tcreated_at INTEGER NOT NULL,\n" +
		"\trecord BLOB NOT NULL\n" +
		") STRICT, WITHOUT ROWID",
	"CREATE INDEX IF NOT EXISTS requests_by_time ON requests (created_at)",
}

// sqliteOriginColumn is the definition of the entity tables' origin column (cells.Cell.Origin),
// in shardDDL and in the ALTER TABLE of migrateSQLiteEntities.
const sqliteOriginColumn = "origin TEXT NOT NULL DEFAULT ''"

// migrateSQLiteEntities adds the origin column to every entity table of the file of db (the
// write pool) that lacks it, a table created by a build older than the column, in one
// transaction: ALTER TABLE ... ADD COLUMN, which SQLite does by editing the table's definition,
// without rewriting its rows (those read the default, ""). A file whose tables have it costs one
// read of the schema. ALTER TABLE appends the column's text after the last column's, so a
// migrated table's definition has origin last, as shardDDL's does (a split copies a table with
// its definition and INSERT ... SELECT *, which needs the columns in one order).
func migrateSQLiteEntities(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT m.name FROM sqlite_master m WHERE m.type = 'table' AND m.name LIKE 'entity\_%' ESCAPE '\' `+
		`AND NOT EXISTS (SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'origin')`)
	if err != nil {
		return fmt.Errorf("list the entity tables without origin: %w", err)
	}
	var old []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("list the entity tables without origin: %w", err)
		}
		if rest, ok := strings.CutPrefix(name, "entity_"); ok && len(rest) == 4 {
			if _, ok := shardDigits(rest); ok {
				old = append(old, name)
			}
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("list the entity tables without origin: %w", err)
	}
	if len(old) == 0 {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add the origin column: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	for _, t := range old {
		if _, err := tx.ExecContext(ctx, "ALTER TABLE "+t+" ADD COLUMN "+sqliteOriginColumn); err != nil {
			return fmt.Errorf("add the origin column to %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add the origin column: %w", err)
	}
	return nil
}

// openSQLitePartition opens the file of partition id, creating its meta and KV tables if missing,
// and adding the origin column to its entity tables that lack it (migrateSQLiteEntities): a writer
// pool of one connection (BEGIN IMMEDIATE) and a reader pool of cfg.ReadConns query-only
// connections, both in WAL mode.
func openSQLitePartition(ctx context.Context, cfg SQLiteConfig, id PartitionID) (*dialect, *sql.DB, *sql.DB, bool, error) {
	path := sqlitePath(cfg.Dir, id)
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(%s)",
		sqliteBusyTimeoutMillis, cfg.Synchronous)
	// temp_store(MEMORY) keeps the statement journal of multi-row INSERTs (SQLite journals
	// every page a statement changes inside a transaction, to undo a failing statement alone)
	// out of temporary files.
	write, err := sql.Open("sqlite", sqliteURI(path, common+fmt.Sprintf("&_pragma=cache_size(-%d)&_pragma=temp_store(MEMORY)&_pragma=wal_autocheckpoint(%d)&_txlock=immediate", cfg.CacheKiB, cfg.WALCheckpointPages)))
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("storage: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	for _, stmt := range append([]string{sqliteMetaDDL, sqliteKVDDL}, sqliteRequestsDDL...) {
		if _, err := write.ExecContext(ctx, stmt); err != nil {
			return nil, nil, nil, false, errors.Join(fmt.Errorf("storage: open %s: %w", path, err), write.Close())
		}
	}
	if err := migrateSQLiteEntities(ctx, write); err != nil {
		return nil, nil, nil, false, errors.Join(fmt.Errorf("storage: open %s: %w", path, err), write.Close())
	}
	read, err := sql.Open("sqlite", sqliteURI(path, common+fmt.Sprintf("&_pragma=cache_size(-%d)&_query_only=1", cfg.ReadCacheKiB)))
	if err != nil {
		return nil, nil, nil, false, errors.Join(fmt.Errorf("storage: open %s: %w", path, err), write.Close())
	}
	read.SetMaxOpenConns(cfg.ReadConns)
	read.SetMaxIdleConns(cfg.ReadConns)
	read.SetConnMaxLifetime(0)
	read.SetConnMaxIdleTime(0)
	if err := read.PingContext(ctx); err != nil {
		return nil, nil, nil, false, errors.Join(fmt.Errorf("storage: open %s: %w", path, err), read.Close(), write.Close())
	}
	return sqliteDialect(), write, read, true, nil
}
