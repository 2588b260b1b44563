package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL settings that are not configurable.
const (
	// mysqlInsertRows bounds a multi-row INSERT (7 placeholders a row; the server's limit for
	// prepared statements is 65535, interpolated statements are bounded by bytes).
	mysqlInsertRows = 500
	// mysqlInsertBytesCap caps the bodies of one INSERT whatever max_allowed_packet allows.
	mysqlInsertBytesCap = 8 << 20
	// mysqlConnMaxIdleTime closes pooled connections idle for longer.
	mysqlConnMaxIdleTime = 5 * time.Minute
	// defaultMaxAllowedPacket is go-sql-driver/mysql's client default, which ParseDSN sets when
	// the DSN does not name one.
	defaultMaxAllowedPacket = 64 << 20
)

// OpenMySQL connects to the MySQL (or MariaDB) server of cfg.DSN and creates the meta tables
// "<prefix>_meta.partitions", "<prefix>_meta.kv" (the KV rows of every partition), and async mode's
// "<prefix>_meta.buffer" and "<prefix>_meta.placement" if missing. Unless cfg.ReadOnly, it then
// adds the origin column to the prefix's entity tables and buffer table created without it, by an
// older build (migrateMySQLOrigin). Zero fields of cfg take their defaults; an invalid cfg returns
// errors wrapping ErrInvalidConfig. The DSN's database is ignored; the connection is forced to
// parseTime=true, loc=UTC, interpolateParams=true and time_zone '+00:00'. One pool of
// cfg.MaxOpenConns connections serves every partition; each open snapshot holds one. OpenMySQL
// blocks until the server answers or ctx is done.
func OpenMySQL(ctx context.Context, cfg MySQLConfig) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mc, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql: DSN: %w", ErrInvalidConfig, err)
	}
	mc.DBName = ""
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.InterpolateParams = true
	if mc.Params == nil {
		mc.Params = make(map[string]string)
	}
	mc.Params["time_zone"] = "'+00:00'"
	if mc.MaxAllowedPacket == defaultMaxAllowedPacket {
		// 0 reads the server's max_allowed_packet on connect, so that statements the server
		// would refuse are not sent.
		mc.MaxAllowedPacket = 0
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql: DSN: %w", ErrInvalidConfig, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxOpenConns)
	db.SetConnMaxIdleTime(mysqlConnMaxIdleTime)

	var maxPacket int
	if err := db.QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&maxPacket); err != nil {
		return nil, errors.Join(fmt.Errorf("storage: connect to mysql: %w", err), db.Close())
	}
	if mc.MaxAllowedPacket > 0 && mc.MaxAllowedPacket < maxPacket {
		maxPacket = mc.MaxAllowedPacket
	}
	// A body may double when escaped into an interpolated statement; keep room for that and
	// the rest of the statement.
	insertBytes := min(maxPacket/2-(64<<10), mysqlInsertBytesCap)
	if insertBytes < 1<<20 {
		return nil, errors.Join(fmt.Errorf("storage: mysql max_allowed_packet %d is too small for 1 MiB bodies", maxPacket), db.Close())
	}
	meta := fmt.Sprintf("`%s_meta`", cfg.Prefix)
	ddl := []string{
		"CREATE DATABASE IF NOT EXISTS " + meta + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		"CREATE TABLE IF NOT EXISTS " + meta + ".`partitions` (\n" +
			"\tdatastore VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
			"\t`partition` INT NOT NULL,\n" +
			"\tapplied_index BIGINT UNSIGNED NOT NULL,\n" +
			"\tapplied_term BIGINT UNSIGNED NOT NULL,\n" +
			"\tschema_version INT NOT NULL,\n" +
			"\tPRIMARY KEY (datastore, `partition`)\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		// k is VARBINARY: compared bytewise, every byte significant (no pad, no case folding).
		"CREATE TABLE IF NOT EXISTS " + meta + ".`kv` (\n" +
			"\tdatastore VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
			"\t`partition` INT NOT NULL,\n" +
			fmt.Sprintf("\tk VARBINARY(%d) NOT NULL,\n", MaxKVKeyBytes) +
			"\tv LONGBLOB NOT NULL,\n" +
			"\tPRIMARY KEY (datastore, `partition`, k)\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		"CREATE TABLE IF NOT EXISTS " + meta + ".`requests` (\n" +
			"\tdatastore VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
			"\t`partition` INT NOT NULL,\n" +
			"\tid BINARY(16) NOT NULL,\n" +
			"\tcreated_at BIGINT NOT NULL,\n" +
			"\trecord BLOB NOT NULL,\n" +
			"\tPRIMARY KEY (datastore, `partition`, id),\n" +
			"\tKEY by_time (datastore, `partition`, created_at)\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		bufferDDL(meta),
		placementDDL(meta),
	}
	if cfg.ReadOnly {
		ddl = nil
	}
	for _, stmt := range ddl {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return nil, errors.Join(fmt.Errorf("storage: create mysql meta tables: %w", err), db.Close())
		}
	}
	if !cfg.ReadOnly {
		if err := migrateMySQLOrigin(ctx, db, cfg.Prefix); err != nil {
			return nil, errors.Join(fmt.Errorf("storage: mysql: %w", err), db.Close())
		}
	}
	s := &Store{engine: EngineMySQL, parts: make(map[PartitionID]*PartitionStore), closeEngine: db.Close, db: db, meta: meta}
	if cfg.ReadOnly {
		s.meta = "" // no buffer table, no named locks
	}
	s.openPartition = func(ctx context.Context, id PartitionID) (*dialect, *sql.DB, *sql.DB, bool, error) {
		return mysqlDialect(cfg.Prefix, id.Datastore, insertBytes), db, db, false, nil
	}
	return s, nil
}

// mysqlDatabase is the database of one shard: "<prefix>_<datastore>_<shard, 4 digits>".
func mysqlDatabase(prefix, datastore string, shard int) string {
	return fmt.Sprintf("%s_%s_%04d", prefix, datastore, shard)
}

func mysqlDialect(prefix, datastore string, insertBytes int) *dialect {
	return &dialect{
		engine: EngineMySQL,
		prefix: prefix,
		entity: func(shard int) string {
			return "`" + mysqlDatabase(prefix, datastore, shard) + "`.`entity`"
		},
		shardDDL: func(shard int) []string {
			db := "`" + mysqlDatabase(prefix, datastore, shard) + "`"
			return []string{
				"CREATE DATABASE IF NOT EXISTS " + db + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
				MySQLCellTableDDL(mysqlDatabase(prefix, datastore, shard)),
			}
		},
		database: func(shard int) string { return mysqlDatabase(prefix, datastore, shard) },
		indexTable: func(name string, shard int) string {
			return "`" + mysqlDatabase(prefix, datastore, shard) + "`.`index_" + name + "`"
		},
		indexDDL: func(t *IndexTable, shard int) []string {
			return mysqlIndexDDL(t, "`"+mysqlDatabase(prefix, datastore, shard)+"`")
		},
		indexDef:   mysqlIndexDef,
		lookupHint: " FORCE INDEX (cell_key)",
		meta:       fmt.Sprintf("`%s_meta`.`partitions`", prefix),
		upsertApplied: fmt.Sprintf("INSERT INTO `%s_meta`.`partitions` "+
			"(datastore, `partition`, applied_index, applied_term, schema_version) VALUES (?, ?, ?, ?, ?) "+
			"ON DUPLICATE KEY UPDATE applied_index = VALUES(applied_index), applied_term = VALUES(applied_term), "+
			"schema_version = VALUES(schema_version)", prefix),
		kv:       fmt.Sprintf("`%s_meta`.`kv`", prefix),
		kvScoped: true,
		requests: fmt.Sprintf("`%s_meta`.`requests`", prefix),
		upsertKV: fmt.Sprintf("INSERT INTO `%s_meta`.`kv` (datastore, `partition`, k, v) VALUES (?, ?, ?, ?) "+
			"ON DUPLICATE KEY UPDATE v = VALUES(v)", prefix),
		// The read view is taken by START TRANSACTION itself, covering every table of the
		// server; SET TRANSACTION applies to this next transaction only.
		snapshotBegin: []string{
			"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
			"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
		},
		insertRows:  mysqlInsertRows,
		insertBytes: insertBytes,
	}
}

// DropMySQLPrefix drops every database of the MySQL/MariaDB server at dsn whose name starts with
// prefix + "_": all the databases a Store opened with MySQLConfig.Prefix prefix created (its
// shards and its meta database). The DSN's database is ignored. prefix must be a valid
// MySQLConfig.Prefix ([a-z0-9_]{1,16}), else the error wraps ErrInvalidConfig. It blocks until
// every drop is done or ctx ends; it stops at the first failure, leaving the rest in place.
func DropMySQLPrefix(ctx context.Context, dsn, prefix string) error {
	if !validPrefix(prefix) {
		return fmt.Errorf("%w: mysql: Prefix %q must match [a-z0-9_]{1,%d}", ErrInvalidConfig, prefix, MaxPrefixLen)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("%w: mysql: %w", ErrInvalidConfig, err)
	}
	cfg.DBName = ""
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?",
		strings.ReplaceAll(prefix, "_", `\_`)+`\_%`)
	if err != nil {
		return fmt.Errorf("storage: list databases of prefix %s: %w", prefix, err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		// A name matching the prefix holds only [a-z0-9_] before the datastore part, which
		// the store also limits to [a-z0-9_]; quoting with backticks is enough.
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+strings.ReplaceAll(n, "`", "``")+"`"); err != nil {
			return fmt.Errorf("storage: drop %s: %w", n, err)
		}
	}
	return nil
}

// MySQLCellTableDDL returns the CREATE TABLE IF NOT EXISTS statement of one shard's cell table,
// `entity` in database db (which must exist), as the MySQL storage lays it out: added_id the
// primary key, the cell key (row_key, column_name, ref_key) unique, body a MEDIUMBLOB (at most
// 16 MiB), created_at in microseconds, origin (cells.Cell.Origin, "" for a cell written in this
// cluster) last, InnoDB, utf8mb4_bin. column_name is ascii_bin, as the default collations
// compare case-insensitively and would make "base" and "BASE" one cell.
// The benchmark's MySQL baseline (schemaless bench --baseline mysql) creates the same table.
func MySQLCellTableDDL(db string) string {
	return "CREATE TABLE IF NOT EXISTS `" + db + "`.`entity` (\n" +
		"\tadded_id BIGINT NOT NULL,\n" +
		"\trow_key BINARY(16) NOT NULL,\n" +
		"\tcolumn_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\tref_key BIGINT NOT NULL,\n" +
		"\tbody MEDIUMBLOB NOT NULL,\n" +
		"\tcreated_at DATETIME(6) NOT NULL,\n" +
		"\t" + mysqlOriginColumn + ",\n" +
		"\tPRIMARY KEY (added_id),\n" +
		"\tUNIQUE KEY cell_key (row_key, column_name, ref_key)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
}

// mysqlOriginColumn is the definition of the origin column (cells.Cell.Origin) of the entity
// tables and the buffer table: a cluster name is ASCII, compared bytewise.
const mysqlOriginColumn = "origin VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''"

// migrateMySQLOrigin adds the origin column, last, to every table of prefix's databases named
// entity or buffer (the shards' entity tables and the meta database's buffer table) that lacks
// it: tables created by a build older than the column. Their rows read the default, "". One
// query of information_schema.columns finds them; each is altered with ALTER TABLE ... ADD
// COLUMN, which InnoDB does in place without copying rows (instantly on MariaDB 10.3 and later,
// MySQL 8.0 and later), so a store whose tables all have the column costs that query alone. The
// prefix's databases are those named prefix + "_" and more, which may include another
// prefix's (see the caveat on prefixes): their tables get the column too, which their build
// ignores or has.
func migrateMySQLOrigin(ctx context.Context, db *sql.DB, prefix string) error {
	rows, err := db.QueryContext(ctx, "SELECT table_schema, table_name FROM information_schema.columns "+
		"WHERE table_schema LIKE ? AND table_name IN ('entity', 'buffer') "+
		"GROUP BY table_schema, table_name HAVING SUM(column_name = 'origin') = 0",
		strings.ReplaceAll(prefix, "_", `\_`)+`\_%`)
	if err != nil {
		return fmt.Errorf("list the tables without origin: %w", err)
	}
	var tables []string
	for rows.Next() {
		var schema, table string
		if err := rows.Scan(&schema, &table); err != nil {
			rows.Close()
			return fmt.Errorf("list the tables without origin: %w", err)
		}
		tables = append(tables, "`"+strings.ReplaceAll(schema, "`", "``")+"`.`"+table+"`")
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("list the tables without origin: %w", err)
	}
	for _, t := range tables {
		_, err := db.ExecContext(ctx, "ALTER TABLE "+t+" ADD COLUMN "+mysqlOriginColumn)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == mysqlErrDupFieldName {
			err = nil // added meanwhile, by another store of the prefix
		}
		if err != nil {
			return fmt.Errorf("add the origin column to %s: %w", t, err)
		}
	}
	return nil
}
