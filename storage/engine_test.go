package storage

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

// Two stores with different prefixes on one server do not see each other's data.
func TestMySQLPrefixesIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e1, e2 := mysqlEnv(t), mysqlEnv(t)
	p1 := openPartition(t, e1.open(t), "trips", 0, 0, 1)
	p2 := openPartition(t, e2.open(t), "trips", 0, 0, 1)
	c1, c2 := mkCell(t, 1, "base", 1, 1), mkCell(t, 1, "base", 1, 1)
	c2.Body = body(t, `{"store":2}`)
	write(t, p1, map[int][]cells.Cell{0: {c1}}, AppliedState{Index: 1, Term: 1})
	write(t, p2, map[int][]cells.Cell{0: {c2}, 1: {mkCell(t, 2, "base", 1, 1)}}, AppliedState{Index: 2, Term: 1})
	for _, tc := range []struct {
		p       *PartitionStore
		want    cells.Cell
		applied uint64
		shard1  int
	}{{p1, c1, 1, 0}, {p2, c2, 2, 1}} {
		got, err := tc.p.GetCell(ctx, 0, c1.Key)
		require.NoError(t, err)
		checkCell(t, "prefix "+tc.p.d.prefix, got, tc.want)
		if a, err := tc.p.Applied(ctx); assert.NoError(t, err, "prefix %s: Applied = %+v, %v; want index %d", tc.p.d.prefix, a, err, tc.applied) {
			assert.Equal(t, tc.applied, a.Index, "prefix %s: Applied = %+v, %v; want index %d", tc.p.d.prefix, a, err, tc.applied)
		}
		cs := scanAll(t, tc.p, 1, 10)
		assert.Len(t, cs, tc.shard1, "prefix %s: shard 1 holds %d cells, want %d", tc.p.d.prefix, len(cs), tc.shard1)
	}
}

// The case test of the conformance suite fails on a table whose column_name has MySQL's
// usual case-insensitive collation: it would catch a schema without ascii_bin.
func TestMySQLCaseInsensitiveCollationFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := mysqlEnv(t).open(t)
	p := openPartition(t, s, "ci", 0, 0, 0)
	for _, stmt := range p.d.shardDDL(0) {
		ci := strings.Replace(stmt, "COLLATE ascii_bin", "COLLATE ascii_general_ci", 1)
		_, err := p.write.ExecContext(ctx, ci)
		require.NoError(t, err, ci)
	}
	err := caseProblem(ctx, p, 0, mkCell(t, 1, "base", 1, 1), mkCell(t, 1, "BASE", 1, 2))
	require.Error(t, err, "the case check passed on a case-insensitive column_name, want it to fail")
	t.Logf("as expected, on ascii_general_ci: %v", err)
}

// explainRows runs EXPLAIN (MySQL) or EXPLAIN QUERY PLAN (SQLite) and returns its rows as
// column -> value maps.
func explainRows(t *testing.T, db *sql.DB, engine, q string, args ...any) []map[string]string {
	t.Helper()
	prefix := "EXPLAIN "
	if engine == EngineSQLite {
		prefix = "EXPLAIN QUERY PLAN "
	}
	rows, err := db.Query(prefix+q, args...)
	require.NoError(t, err, "%s%s", prefix, q)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		m := make(map[string]string, len(cols))
		for i, c := range cols {
			m[strings.ToLower(c)] = vals[i].String
		}
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}

// Lookup, GetLatest and GetRow read through the unique key, never a scan of the shard.
func TestQueriesUseUniqueKey(t *testing.T) {
	t.Parallel()
	forEachSQLEngine(t, func(t *testing.T, e *engineEnv) {
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		var cs []cells.Cell
		for i := range 500 {
			cs = append(cs, mkCell(t, i%50, fmt.Sprintf("c%d", i%7), int64(i), int64(i+1)))
		}
		write(t, p, map[int][]cells.Cell{0: cs}, AppliedState{Index: 1, Term: 1})
		if e.name == EngineMySQL {
			_, err := p.write.Exec("ANALYZE TABLE " + p.d.entity(0))
			require.NoError(t, err)
		}
		var lookupArgs []any
		for _, c := range cs[:100] {
			lookupArgs = append(lookupArgs, c.RowKey[:], c.ColumnKey, c.RefKey)
		}
		rk := cs[0].RowKey[:]
		type query struct {
			name string
			sql  string
			args []any
		}
		var sqliteOnly []query
		if e.name == EngineSQLite {
			latest, latestArgs := p.snapshotOneSQL(SnapshotKey{Shard: 0, Key: cells.Key{RowKey: cs[0].RowKey, ColumnKey: "c0"}, Latest: true})
			exact, exactArgs := p.snapshotOneSQL(SnapshotKey{Shard: 0, Key: cs[0].Key})
			sqliteOnly = []query{{"GetSnapshot of one latest cell", latest, latestArgs}, {"GetSnapshot of one cell", exact, exactArgs}}
		}
		for _, q := range append([]query{
			{"Lookup of 100 keys", lookupSQL(p.d, 0, 100), lookupArgs},
			{"GetLatest", "SELECT " + cellColumns + " FROM " + p.d.entity(0) + " WHERE row_key = ? AND column_name = ? ORDER BY ref_key DESC LIMIT 1", []any{rk, "c0"}},
			{"GetRow", "SELECT e.added_id FROM " + p.d.entity(0) + " e JOIN (SELECT column_name, MAX(ref_key) AS ref_key FROM " + p.d.entity(0) +
				" WHERE row_key = ? GROUP BY column_name) m ON e.column_name = m.column_name AND e.ref_key = m.ref_key WHERE e.row_key = ? ORDER BY e.column_name", []any{rk, rk}},
		}, sqliteOnly...) {
			plan := explainRows(t, p.read, e.name, q.sql, q.args...)
			require.NotEmpty(t, plan, "%s: empty plan", q.name)
			for _, r := range plan {
				if e.name == EngineSQLite {
					d := r["detail"]
					scans := strings.HasPrefix(d, "SCAN entity") || strings.HasPrefix(d, "SCAN e") && !strings.Contains(d, "INDEX")
					assert.False(t, scans, "%s: plan step %q scans the table, want index searches", q.name, d)
				} else if r["table"] == "entity" || r["table"] == "e" {
					assert.True(t, r["key"] == "cell_key" && r["type"] != "ALL" && r["type"] != "index",
						"%s: plan for table %s uses key %q, type %q; want the cell_key index, no scan (%v)", q.name, r["table"], r["key"], r["type"], r)
				}
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("%s: first steps of the plan: %v", q.name, plan[:min(len(plan), 3)])
			}
		}
	})
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	assert.NoError(t, (SQLiteConfig{Dir: "x"}).Validate(), "valid SQLiteConfig")
	err := SQLiteConfig{Synchronous: "OFF", ReadConns: -1, CacheKiB: 10, ReadCacheKiB: 63, WALCheckpointPages: 99}.Validate()
	for _, want := range []string{"Dir", "Synchronous", "ReadConns", "CacheKiB", "ReadCacheKiB", "WALCheckpointPages"} {
		assert.ErrorIs(t, err, ErrInvalidConfig, "SQLiteConfig{Synchronous: OFF, ReadConns: -1, CacheKiB: 10, ReadCacheKiB: 63}.Validate()")
		assert.ErrorContains(t, err, want, "SQLiteConfig{Synchronous: OFF, ReadConns: -1, CacheKiB: 10, ReadCacheKiB: 63}.Validate(): want it naming %s", want)
	}
	assert.ErrorIs(t, errOf(OpenSQLite(ctx, SQLiteConfig{Dir: t.TempDir(), Synchronous: "off"})), ErrInvalidConfig, "OpenSQLite with synchronous off")
	s, err := OpenSQLite(ctx, SQLiteConfig{Dir: filepath.Join(t.TempDir(), "new", "dir"), Synchronous: "full", ReadConns: 1, CacheKiB: 500, ReadCacheKiB: 100, WALCheckpointPages: 700})
	require.NoError(t, err, "OpenSQLite(FULL, 1 reader) in a new directory")
	defer s.Close()
	p := openPartition(t, s, "trips", 0, 0, 0)
	var sync int
	if assert.NoError(t, p.read.QueryRow("PRAGMA synchronous").Scan(&sync), "PRAGMA synchronous") {
		assert.Equal(t, 2, sync, "PRAGMA synchronous: want 2 (FULL)")
	}
	for name, c := range map[string]struct {
		db   *sql.DB
		want int
	}{"read": {p.read, -100}, "write": {p.write, -500}} {
		var kib int
		if assert.NoError(t, c.db.QueryRow("PRAGMA cache_size").Scan(&kib), "%s connection: PRAGMA cache_size", name) {
			assert.Equal(t, c.want, kib, "%s connection: PRAGMA cache_size (KiB)", name)
		}
	}
	var pages int
	if assert.NoError(t, p.write.QueryRow("PRAGMA wal_autocheckpoint").Scan(&pages), "PRAGMA wal_autocheckpoint") {
		assert.Equal(t, 700, pages, "write connection: PRAGMA wal_autocheckpoint")
	}
	var mode string
	if assert.NoError(t, p.read.QueryRow("PRAGMA journal_mode").Scan(&mode), "PRAGMA journal_mode") {
		assert.Equal(t, "wal", mode, "PRAGMA journal_mode")
	}
	assert.Error(t, errOf(p.read.Exec("CREATE TABLE nope (x INTEGER)")), "CREATE TABLE on a read connection succeeded, want it refused (query_only)")

	// Characters that mean something in a URI stay part of the file name.
	odd := filepath.Join(t.TempDir(), "a dir?x=1&y#z%41")
	so, err := OpenSQLite(ctx, SQLiteConfig{Dir: odd})
	require.NoError(t, err, "OpenSQLite(%q)", odd)
	defer so.Close()
	po := openPartition(t, so, "trips", 1, 0, 0)
	write(t, po, map[int][]cells.Cell{0: {mkCell(t, 1, "base", 1, 1)}}, AppliedState{Index: 1, Term: 1})
	assert.FileExists(t, filepath.Join(odd, "trips-p1.db"), "database file in %q", odd)

	for _, c := range []MySQLConfig{
		{DSN: "root@tcp(127.0.0.1:1)/", Prefix: ""},
		{DSN: "root@tcp(127.0.0.1:1)/", Prefix: "Node1"},
		{DSN: "root@tcp(127.0.0.1:1)/", Prefix: "n-1"},
		{DSN: "root@tcp(127.0.0.1:1)/", Prefix: strings.Repeat("n", 17)},
		{DSN: "", Prefix: "n1"},
		{DSN: "root@tcp(127.0.0.1:1)/", Prefix: "n1", MaxOpenConns: 1},
		{DSN: "no slash", Prefix: "n1"},
	} {
		assert.ErrorIs(t, errOf(OpenMySQL(ctx, c)), ErrInvalidConfig, "OpenMySQL(%+v)", c)
	}
}

// OpenMySQL forces UTC, parse time and interpolation whatever the DSN says, and ignores the
// DSN's database.
func TestMySQLSessionSettings(t *testing.T) {
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	prefix := mariadbtest.Prefix(t)
	s, err := OpenMySQL(context.Background(), MySQLConfig{DSN: strings.TrimSuffix(dsn, "/") + "/mysql?loc=Local&parseTime=false", Prefix: prefix})
	require.NoError(t, err)
	defer s.Close()
	p := openPartition(t, s, "trips", 0, 0, 0)
	var tz string
	var db sql.NullString
	require.NoError(t, p.read.QueryRow("SELECT @@session.time_zone, DATABASE()").Scan(&tz, &db))
	assert.Equal(t, "+00:00", tz, "session time_zone")
	assert.False(t, db.Valid, "session DATABASE() = %v, want NULL", db)
	c := mkCell(t, 1, "base", 1, 1)
	write(t, p, map[int][]cells.Cell{0: {c}}, AppliedState{Index: 1, Term: 1})
	got, err := p.GetCell(context.Background(), 0, c.Key)
	require.NoError(t, err)
	checkCell(t, "GetCell", got, c)
	var text string
	require.NoError(t, p.read.QueryRow("SELECT CAST(created_at AS CHAR) FROM "+p.d.entity(0)).Scan(&text))
	want := stored(c).CreatedAt.Format("2006-01-02 15:04:05.000000")
	assert.Equal(t, want, text, "stored created_at = %s, want %s (UTC, microseconds)", text, want)
}

// DropMySQLPrefix drops a store's databases (its shards and meta) and nothing else, and refuses
// a prefix a store could not have.
func TestDropMySQLPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, prefix := mariadbtest.DSN(t), mariadbtest.Prefix(t)
	s, err := OpenMySQL(ctx, MySQLConfig{DSN: dsn, Prefix: prefix})
	require.NoError(t, err)
	defer s.Close()
	p := openPartition(t, s, "trips", 0, 0, 1)
	write(t, p, map[int][]cells.Cell{0: {mkCell(t, 1, "base", 1, 1)}}, AppliedState{Index: 1, Term: 1})
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	other := prefix + "x_other" // shares the prefix's letters, not "prefix_"
	_, err = db.ExecContext(ctx, "CREATE DATABASE `"+other+"`")
	require.NoError(t, err)
	defer db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+other+"`")
	count := func(like string) int {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name LIKE ?", like).Scan(&n))
		return n
	}
	require.GreaterOrEqual(t, count(prefix+`\_%`), 2, "before: databases of prefix %s, want the meta and at least one shard", prefix)
	require.NoError(t, DropMySQLPrefix(ctx, dsn, prefix), "DropMySQLPrefix")
	n := count(prefix + `\_%`)
	assert.EqualValues(t, 0, n, "after: %d databases of prefix %s, want 0", n, prefix)
	n = count(other)
	assert.EqualValues(t, 1, n, "database %s: got %d, want it kept", other, n)
	assert.ErrorIs(t, DropMySQLPrefix(ctx, dsn, "bad`prefix"), ErrInvalidConfig, "bad prefix")
}
