package storage

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

// The tables as builds before the origin column created them, copied from those builds.
const (
	legacySQLiteEntityDDL = `CREATE TABLE IF NOT EXISTS entity_%04d (
	added_id INTEGER PRIMARY KEY,
	row_key BLOB NOT NULL,
	column_name TEXT COLLATE BINARY NOT NULL,
	ref_key INTEGER NOT NULL,
	body BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	UNIQUE (row_key, column_name, ref_key)
) STRICT`
	legacyMySQLEntityDDL = "CREATE TABLE IF NOT EXISTS `%s`.`entity` (\n" +
		"\tadded_id BIGINT NOT NULL,\n" +
		"\trow_key BINARY(16) NOT NULL,\n" +
		"\tcolumn_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\tref_key BIGINT NOT NULL,\n" +
		"\tbody MEDIUMBLOB NOT NULL,\n" +
		"\tcreated_at DATETIME(6) NOT NULL,\n" +
		"\tPRIMARY KEY (added_id),\n" +
		"\tUNIQUE KEY cell_key (row_key, column_name, ref_key)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
	legacyMySQLBufferDDL = "CREATE TABLE IF NOT EXISTS `%s`.`buffer` (\n" +
		"\tid BIGINT NOT NULL AUTO_INCREMENT,\n" +
		"\tdatastore VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\t`partition` INT NOT NULL,\n" +
		"\tshard INT NOT NULL,\n" +
		"\trow_key BINARY(16) NOT NULL,\n" +
		"\tcolumn_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\tref_key BIGINT NOT NULL,\n" +
		"\tbody MEDIUMBLOB NOT NULL,\n" +
		"\tcreated_at DATETIME(6) NOT NULL,\n" +
		"\tbuffered_at DATETIME(6) NOT NULL,\n" +
		"\tPRIMARY KEY (id),\n" +
		"\tUNIQUE KEY cell_key (datastore, row_key, column_name, ref_key)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
)

// legacyInsert inserts c into a shard table of the old layout, as builds before the origin
// column did (every column named but origin).
func legacyInsert(t *testing.T, db *sql.DB, table string, c cells.Cell, at any) {
	t.Helper()
	_, err := db.Exec("INSERT INTO "+table+" (added_id, row_key, column_name, ref_key, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
		c.AddedID, c.RowKey[:], c.ColumnKey, c.RefKey, []byte(c.Body), at)
	require.NoError(t, err, "insert into the old table %s", table)
}

// TestOriginOldTables: a store whose shard tables (and, on MySQL, buffer table) were created
// before the origin column, holding cells, is opened by this build: the tables get the column
// once, the old cells read with Origin "", new cells store theirs, and opening again changes
// nothing. On SQLite a split then copies a migrated table into another file.
func TestOriginOldTables(t *testing.T) {
	t.Parallel()
	old := []cells.Cell{mkCell(t, 1, "base", 1, 1), mkCell(t, 2, "base", 1, 1)} // shards 1 and 2
	ds := "legacy"
	t.Run(EngineSQLite, func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db, err := sql.Open("sqlite", sqlitePath(dir, PartitionID{Datastore: ds, Partition: 0}))
		require.NoError(t, err)
		for i, c := range old {
			_, err := db.Exec(fmt.Sprintf(legacySQLiteEntityDDL, i+1))
			require.NoError(t, err, "create the old table of shard %d", i+1)
			legacyInsert(t, db, fmt.Sprintf("entity_%04d", i+1), c, c.CreatedAt.UnixMicro())
		}
		require.NoError(t, db.Close())
		env := &engineEnv{name: EngineSQLite, open: func(t testing.TB) *Store {
			s, err := OpenSQLite(context.Background(), SQLiteConfig{Dir: dir})
			require.NoError(t, err, "OpenSQLite over the old file")
			t.Cleanup(func() { s.Close() })
			return s
		}}
		p := checkOldTables(t, env, old)
		// The migrated table of shard 2 (its definition edited by ALTER TABLE) is copied into a
		// new file by a split, with its old cell and its new one.
		want := []cells.Cell{old[1], originCell(t, 12, "base", 1, 2, "east")}
		child := openPartition(t, p.store, ds, 1, 2, 3)
		split(t, p, child, cells.ShardRange{First: 2, Last: 3}, AppliedState{Index: 20, Term: 1})
		checkCells(t, "shard 2 split off", scanAll(t, child, 2, 10), want)
		write(t, child, map[int][]cells.Cell{2: {originCell(t, 30, "base", 1, 30, "south")}}, AppliedState{Index: 21, Term: 1})
		checkCells(t, "shard 2 split off, written", scanAll(t, child, 2, 10), append(want, originCell(t, 30, "base", 1, 30, "south")))
	})
	t.Run(EngineMySQL, func(t *testing.T) {
		t.Parallel()
		dsn, prefix := mariadbtest.DSN(t), mariadbtest.Prefix(t)
		cfg, err := mysql.ParseDSN(dsn)
		require.NoError(t, err)
		cfg.ParseTime, cfg.Loc = true, time.UTC
		conn, err := mysql.NewConnector(cfg)
		require.NoError(t, err)
		db := sql.OpenDB(conn)
		defer db.Close()
		for i, c := range old {
			name := mysqlDatabase(prefix, ds, i+1)
			_, err := db.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
			require.NoError(t, err)
			_, err = db.Exec(fmt.Sprintf(legacyMySQLEntityDDL, name))
			require.NoError(t, err, "create the old table of shard %d", i+1)
			legacyInsert(t, db, "`"+name+"`.`entity`", c, c.CreatedAt.UTC().Truncate(time.Microsecond))
		}
		meta := prefix + "_meta"
		_, err = db.Exec("CREATE DATABASE `" + meta + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		require.NoError(t, err)
		_, err = db.Exec(fmt.Sprintf(legacyMySQLBufferDDL, meta))
		require.NoError(t, err, "create the old buffer table")
		_, err = db.Exec("INSERT INTO `"+meta+"`.`buffer` (datastore, `partition`, shard, row_key, column_name, ref_key, body, created_at, buffered_at) "+
			"VALUES (?, 0, 1, ?, ?, ?, ?, ?, ?)", ds, old[0].RowKey[:], old[0].ColumnKey, old[0].RefKey, []byte(old[0].Body), baseTime.UTC(), baseTime.UTC())
		require.NoError(t, err, "buffer a cell the old way")
		env := &engineEnv{name: EngineMySQL, open: func(t testing.TB) *Store {
			s, err := OpenMySQL(context.Background(), MySQLConfig{DSN: dsn, Prefix: prefix})
			require.NoError(t, err, "OpenMySQL over the old tables")
			t.Cleanup(func() { s.Close() })
			return s
		}}
		p := checkOldTables(t, env, old)
		for _, table := range []string{"`" + mysqlDatabase(prefix, ds, 1) + "`.`entity`", "`" + mysqlDatabase(prefix, ds, 2) + "`.`entity`", "`" + meta + "`.`buffer`"} {
			var typ, charset, collation, def string
			var nullable string
			parts := strings.Split(strings.ReplaceAll(table, "`", ""), ".")
			require.NoError(t, db.QueryRow("SELECT column_type, character_set_name, collation_name, is_nullable, column_default FROM information_schema.columns "+
				"WHERE table_schema = ? AND table_name = ? AND column_name = 'origin'", parts[0], parts[1]).Scan(&typ, &charset, &collation, &nullable, &def), "origin column of %s", table)
			assert.Equal(t, []string{"varchar(32)", "ascii", "ascii_bin", "NO"}, []string{typ, charset, collation, nullable}, "origin column of %s", table)
			assert.Contains(t, []string{"''", ""}, def, "default of the origin column of %s", table)
		}

		s := p.store
		rows, err := s.ScanBuffered(context.Background(), ds, cells.ShardRange{First: 0, Last: 3}, 0, 10)
		require.NoError(t, err, "scan the migrated buffer table")
		if assert.Len(t, rows, 1, "buffered rows") {
			assert.Equal(t, old[0].Key, rows[0].Cell.Key, "the row buffered the old way")
			assert.Empty(t, rows[0].Cell.Origin, "origin of the row buffered the old way")
		}
		b := BufferedCell{Datastore: ds, Shard: 1, Cell: originCell(t, 40, "base", 1, 0, "west")}
		_, _, err = s.PutBuffered(context.Background(), b)
		require.NoError(t, err, "buffer a cell with an origin into the migrated table")
		rows, err = s.ScanBuffered(context.Background(), ds, cells.ShardRange{First: 0, Last: 3}, 0, 10)
		require.NoError(t, err)
		if assert.Len(t, rows, 2, "buffered rows") {
			assert.Equal(t, "west", rows[1].Cell.Origin, "origin of the row buffered with one")
		}
	})
}

// checkOldTables opens env's store (its shard tables of the old layout holding old, one cell in
// shard 1 and one in shard 2 of datastore "legacy") and checks that the old cells read with no
// origin, that cells with and without origins are written and read back, and that reopening
// the store keeps all of it. It returns the partition (0, shards 0..3) of the last store
// opened.
func checkOldTables(t *testing.T, env *engineEnv, old []cells.Cell) *PartitionStore {
	ctx := context.Background()
	var p *PartitionStore
	s := env.open(t)
	p = openPartition(t, s, "legacy", 0, 0, 3)
	for i, c := range old {
		got, err := p.GetCell(ctx, i+1, c.Key)
		require.NoError(t, err, "GetCell of the old cell of shard %d", i+1)
		checkCell(t, "GetCell of an old cell", got, c)
		assert.Empty(t, got.Origin, "origin of the old cell of shard %d", i+1)
	}
	added := []cells.Cell{originCell(t, 10, "base", 1, 2, "west"), originCell(t, 11, "base", 1, 3, "")}
	more := originCell(t, 12, "base", 1, 2, "east")
	write(t, p, map[int][]cells.Cell{1: added, 2: {more}}, AppliedState{Index: 10, Term: 1})
	want1, want2 := append([]cells.Cell{old[0]}, added...), []cells.Cell{old[1], more}
	check := func(when string) {
		t.Helper()
		checkCells(t, "shard 1 "+when, scanAll(t, p, 1, 10), want1)
		checkCells(t, "shard 2 "+when, scanAll(t, p, 2, 10), want2)
		log, _, _, err := p.ReadLog(ctx, 1, 0, "base", 10)
		require.NoError(t, err, "ReadLog %s", when)
		checkCells(t, "ReadLog of shard 1 "+when, log, want1)
		got, err := p.GetCell(ctx, 1, added[0].Key)
		require.NoError(t, err, "GetCell %s", when)
		checkCell(t, "GetCell of a new cell "+when, got, added[0])
		row, err := p.GetRow(ctx, 1, old[0].RowKey)
		require.NoError(t, err, "GetRow %s", when)
		checkCells(t, "GetRow of the old cell's row "+when, row, old[:1])
	}
	check("after the migration")
	require.NoError(t, s.Close())
	s = env.open(t)
	p = openPartition(t, s, "legacy", 0, 0, 3)
	check("after opening the migrated store again")
	write(t, p, map[int][]cells.Cell{1: {originCell(t, 13, "base", 1, 4, "north")}}, AppliedState{Index: 11, Term: 1})
	want1 = append(want1, originCell(t, 13, "base", 1, 4, "north"))
	check("after writing to the migrated store again")
	return p
}

// legacyLogValue is the value of a log entry as builds before origins wrote it (copied from
// them): row key, ref key, created_at in microseconds, the column's length (uvarint) and
// bytes, the body.
func legacyLogValue(c *cells.Cell) []byte {
	b := append([]byte(nil), c.RowKey[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.RefKey))
	b = binary.BigEndian.AppendUint64(b, uint64(c.CreatedAt.UnixMicro()))
	b = binary.AppendUvarint(b, uint64(len(c.ColumnKey)))
	return append(append(b, c.ColumnKey...), c.Body...)
}

// Pebble log entries: a value of the old encoding decodes with Origin "", a cell with no origin
// is still encoded so (byte for byte), cells with origins round-trip, and a value cut short is
// refused.
func TestPebbleLogValueOrigin(t *testing.T) {
	t.Parallel()
	key := appendI64([]byte{tagLog}, 7)
	for _, col := range []string{"b", "base", strings.Repeat("C", cells.MaxColumnKeyLen), cells.TombstoneColumn} {
		c := mkCell(t, 1, col, 3, 7)
		old := legacyLogValue(&c)
		got, err := decodeLog(key, old)
		require.NoError(t, err, "decode an old value of column %s", col)
		checkCell(t, "old value of column "+col, got, c)
		assert.Equal(t, old, appendLogValue(nil, &c), "value of a cell of column %s with no origin: want the old encoding", col)
		for _, origin := range testOrigins {
			c.Origin = origin
			v := appendLogValue(nil, &c)
			got, err := decodeLog(key, v)
			require.NoError(t, err, "decode column %s origin %q", col, origin)
			checkCell(t, fmt.Sprintf("column %s origin %q", col, origin), got, c)
			lc, err := logColumn(v)
			require.NoError(t, err)
			assert.Equal(t, col, string(lc), "logColumn of column %s origin %q", col, origin)
			if origin != "" {
				cut := v[:32+binary.PutUvarint(make([]byte, 10), uint64(len(col))+logOriginFlag)+len(col)+len(origin)]
				assert.ErrorIs(t, errOf(decodeLog(key, cut)), errBadValue, "a value cut inside origin %q", origin)
			}
		}
	}
}

// A pebble partition of layout version 1 (before origins) opens and reads, and its next write
// makes it version 2; a partition of a later version is refused.
func TestPebbleLayoutVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := pebbleEnv(t)
	p := openPartition(t, env.open(t), "legacy", 0, 0, 0)
	c := mkCell(t, 1, "base", 1, 1)
	write(t, p, map[int][]cells.Cell{0: {c}}, AppliedState{Index: 1, Term: 1})
	setVersion := func(p *PartitionStore, v uint64) {
		val := binary.BigEndian.AppendUint64(appliedValue(AppliedState{Index: 1, Term: 1})[:16], v)
		require.NoError(t, p.pb.db.Set(p.pb.key(tagApplied, 0), val, pebble.Sync))
	}
	setVersion(p, 1)
	// The cell as a version 1 build wrote it.
	require.NoError(t, p.pb.db.Set(p.pb.logKey(0, 1), legacyLogValue(&c), pebble.Sync))
	p = openPartition(t, env.open(t), "legacy", 0, 0, 0)
	got, err := p.GetCell(ctx, 0, c.Key)
	require.NoError(t, err, "GetCell in a version 1 partition")
	checkCell(t, "GetCell in a version 1 partition", got, c)
	write(t, p, map[int][]cells.Cell{0: {originCell(t, 2, "base", 1, 2, "west")}}, AppliedState{Index: 2, Term: 1})
	_, version, err := p.pb.applied(p.pb.db)
	require.NoError(t, err)
	assert.EqualValues(t, 2, version, "layout version after a write")
	setVersion(p, 3)
	_, err = env.open(t).Partition(ctx, p.ID(), p.Shards())
	assert.ErrorContains(t, err, "layout version 3", "open a partition of layout version 3")
}
