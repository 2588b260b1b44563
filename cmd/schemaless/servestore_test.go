package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/storage"
)

// TestServeStoreFlags runs serve with --store, --mysql and the --pebble-* flags: the bad
// combinations and values are refused before anything starts, each error naming its flags;
// the good ones pass the checks and fail only on the topology file, which does not exist.
func TestServeStoreFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	topo := filepath.Join(dir, "missing.yaml")
	base := []string{"serve", "--config", topo, "--node-id", "n1", "--data-dir", filepath.Join(dir, "data"), "--log-level", "error"}
	const dsn = "root@tcp(127.0.0.1:1)/"
	for _, tc := range []struct {
		args []string
		want string // the error's text; empty: past the flag checks
	}{
		{nil, ""},
		{[]string{"--store", "pebble"}, ""},
		{[]string{"--store", "sqlite"}, ""},
		{[]string{"--mysql", dsn}, ""},
		{[]string{"--store", "mysql", "--mysql", dsn}, ""},
		{[]string{"--pebble-cache-mib", "8", "--pebble-memtable-mib", "4"}, ""},
		{[]string{"--pebble-memtable-mib", "1024"}, ""},
		{[]string{"--store", "rocksdb"}, `--store "rocksdb": want pebble, sqlite or mysql`},
		{[]string{"--store", ""}, `--store "": want pebble, sqlite or mysql`},
		{[]string{"--store", "mysql"}, "--store mysql needs --mysql DSN"},
		{[]string{"--store", "sqlite", "--mysql", dsn}, "--store sqlite with --mysql: --mysql stores cells in MySQL/MariaDB; drop --mysql, or give --store mysql (or no --store)"},
		{[]string{"--mysql", dsn, "--store", "pebble"}, "--store pebble with --mysql: --mysql stores cells in MySQL/MariaDB; drop --mysql, or give --store mysql (or no --store)"},
		{[]string{"--pebble-cache-mib", "7"}, "--pebble-cache-mib 7: want at least 8"},
		{[]string{"--pebble-memtable-mib", "3"}, "--pebble-memtable-mib 3: want 4 to 1024"},
		{[]string{"--pebble-memtable-mib", "1025"}, "--pebble-memtable-mib 1025: want 4 to 1024"},
		{[]string{"--sqlite-cache-kib", "63"}, "--sqlite-cache-kib 63: want at least 64"},
		{[]string{"--sqlite-read-conns", "0"}, "--sqlite-read-conns 0: want at least 1"},
	} {
		_, _, err := runCmd(context.Background(), append(append([]string(nil), base...), tc.args...)...)
		require.Error(t, err, "serve %v", tc.args)
		if tc.want == "" {
			assert.ErrorContains(t, err, topo, "serve %v: want past the flag checks, failing on the missing topology", tc.args)
		} else {
			assert.EqualError(t, err, tc.want, "serve %v", tc.args)
		}
	}
}

// TestPebbleFlagBounds checks that serve's bounds of --pebble-cache-mib and
// --pebble-memtable-mib are storage.PebbleConfig.Validate's: each value on either side of a
// bound is refused by both or by neither.
func TestPebbleFlagBounds(t *testing.T) {
	t.Parallel()
	ok := serveFlags{pebbleCache: storage.DefaultPebbleCacheMiB, pebbleMemTbl: storage.DefaultPebbleMemTableMiB,
		sqliteCache: storage.DefaultSQLiteCacheKiB, sqliteRCache: storage.DefaultSQLiteReadCacheKiB,
		sqliteWAL: storage.DefaultSQLiteWALCheckpointPages, sqliteReaders: storage.DefaultSQLiteReadConns}
	require.NoError(t, ok.checkStoreTuning(), "the defaults")
	require.NoError(t, storage.PebbleConfig{Dir: "x"}.Validate(), "storage's defaults")
	for _, v := range []int{-1, 0, 7, 8, 9, 64} {
		f := ok
		f.pebbleCache = v
		flagErr, storeErr := f.checkStoreTuning(), storage.PebbleConfig{Dir: "x", CacheMiB: v}.Validate()
		if v == 0 {
			storeErr = flagErr // zero is storage's "default"; the flag has its default instead
		}
		assert.Equal(t, storeErr == nil, flagErr == nil, "--pebble-cache-mib %d: flag check %v, storage %v", v, flagErr, storeErr)
	}
	for _, v := range []int{-1, 3, 4, 5, 32, 1023, 1024, 1025} {
		f := ok
		f.pebbleMemTbl = v
		flagErr, storeErr := f.checkStoreTuning(), storage.PebbleConfig{Dir: "x", MemTableMiB: v}.Validate()
		assert.Equal(t, storeErr == nil, flagErr == nil, "--pebble-memtable-mib %d: flag check %v, storage %v", v, flagErr, storeErr)
	}
}

// TestServePebbleConfig checks the pebble store serve opens: <data-dir>/pebble with the
// flags' tuning, migrating <data-dir>/sqlite when (and only when) that is a directory.
func TestServePebbleConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := serveFlags{dataDir: dir, pebbleCache: 16, pebbleMemTbl: 8}
	logger := slog.New(slog.DiscardHandler)
	cfg, err := f.pebbleConfig(logger)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "pebble"), cfg.Dir)
	assert.Equal(t, 16, cfg.CacheMiB)
	assert.Equal(t, 8, cfg.MemTableMiB)
	assert.NotNil(t, cfg.Logger)
	assert.Empty(t, cfg.MigrateSQLiteDir, "no <data-dir>/sqlite: nothing to migrate")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "sqlite"), nil, 0o644))
	cfg, err = f.pebbleConfig(logger)
	require.NoError(t, err)
	assert.Empty(t, cfg.MigrateSQLiteDir, "<data-dir>/sqlite a file: nothing to migrate")

	require.NoError(t, os.Remove(filepath.Join(dir, "sqlite")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sqlite"), 0o755))
	cfg, err = f.pebbleConfig(logger)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "sqlite"), cfg.MigrateSQLiteDir, "<data-dir>/sqlite a directory: migrated")
}

// TestDevStoreFlags checks dev's --store: pebble or sqlite, passed to every serve; not with
// --mysql, which is passed instead.
func TestDevStoreFlags(t *testing.T) {
	t.Parallel()
	const dsn = "root@tcp(127.0.0.1:1)/"
	f := devFlags{nodes: 3, mode: "raft", store: "mysql"}
	assert.EqualError(t, runDev(context.Background(), f), `--store "mysql": want pebble or sqlite (or --mysql DSN for MySQL/MariaDB)`)
	f.store = "rocksdb"
	assert.EqualError(t, runDev(context.Background(), f), `--store "rocksdb": want pebble or sqlite (or --mysql DSN for MySQL/MariaDB)`)
	_, _, err := runCmd(context.Background(), "dev", "--data-dir", t.TempDir(), "--store", "sqlite", "--mysql", dsn)
	assert.EqualError(t, err, "--store sqlite with --mysql: the nodes store cells in MySQL/MariaDB with --mysql; give one of them")

	for _, store := range []string{"pebble", "sqlite"} {
		args := devFlags{logLevel: "info", store: store}.serveArgs(0, "n1")
		assert.Equal(t, store, flagArg(args, "--store"), "serve args %v: --store", args)
		assert.NotContains(t, args, "--mysql", "serve args %v", args)
	}
	args := devFlags{logLevel: "info", store: "pebble", mysqlDSN: dsn}.serveArgs(0, "n1")
	assert.Equal(t, dsn, flagArg(args, "--mysql"), "serve args %v: --mysql", args)
	assert.NotContains(t, args, "--store", "serve args %v: --mysql implies serve's --store", args)
}

// flagArg returns the value after flag in args, or "" when flag is absent.
func flagArg(args []string, flag string) string {
	for i, a := range args[:max(len(args)-1, 0)] {
		if a == flag {
			return args[i+1]
		}
	}
	return ""
}

// TestJepsenStoreFlag checks that jepsen refuses an unknown --store and --store mysql without
// --mysql before it starts anything.
func TestJepsenStoreFlag(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	_, _, err := runCmd(context.Background(), "jepsen", "--out", out, "--store", "rocksdb")
	assert.EqualError(t, err, `--store "rocksdb": want pebble, sqlite or mysql`)
	_, _, err = runCmd(context.Background(), "jepsen", "--out", out, "--store", "mysql")
	assert.EqualError(t, err, "--store mysql needs --mysql DSN")
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Empty(t, entries, "no run directory")
}

// TestServeMigratesSQLiteToPebble runs serve on a 1-node cluster three times over one data
// directory: with --store sqlite, writing a cell; with the default store (pebble), which
// migrates the SQLite partitions (their files moved to sqlite.migrated) and still serves the
// cell; and once more with the default, which finds the cell in pebble without migrating
// anything again.
func TestServeMigratesSQLiteToPebble(t *testing.T) {
	base := freePortRange(t, 2)
	raftAddr, httpAddr := "127.0.0.1:"+strconv.Itoa(base), "127.0.0.1:"+strconv.Itoa(base+1)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	topo := filepath.Join(dir, "topology.yaml")
	require.NoError(t, os.WriteFile(topo, []byte(fmt.Sprintf(`nodes:
  - {id: n1, raft_addr: %q, http_addr: %q}
datastores:
  - {name: users, shards: 4, partition_count: 2}
`, raftAddr, httpAddr)), 0o644))
	args := []string{"serve", "--config", topo, "--node-id", "n1", "--data-dir", data, "--log-level", "warn",
		"--heartbeat-timeout", "200ms", "--election-timeout", "200ms", "--leader-lease-timeout", "100ms"}
	api := "http://" + httpAddr
	row := uuid.NewSHA1(uuid.NameSpaceURL, []byte("servestore")).String()
	cell := api + "/v1/users/cells/" + row + "/BASE/1"

	stop := startServe(t, api, append(args, "--store", "sqlite")...)
	req, err := http.NewRequest(http.MethodPut, cell, strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "put_cell")
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "put_cell on sqlite")
	stop()
	sqliteFiles, err := filepath.Glob(filepath.Join(data, "sqlite", "*.db"))
	require.NoError(t, err)
	require.NotEmpty(t, sqliteFiles, "SQLite partition files after serve --store sqlite")
	assert.NoDirExists(t, filepath.Join(data, "pebble"), "serve --store sqlite made a pebble directory")

	for run := 1; run <= 2; run++ {
		stop = startServe(t, api, args...)
		code, body := httpGet(t, cell)
		assert.Equal(t, http.StatusOK, code, "run %d on pebble: get_cell written on sqlite: %s", run, body)
		assert.Contains(t, body, `"n":1`, "run %d on pebble: get_cell body", run)
		stop()
		assert.DirExists(t, filepath.Join(data, "pebble"), "run %d on pebble", run)
		left, err := filepath.Glob(filepath.Join(data, "sqlite", "*.db"))
		require.NoError(t, err)
		assert.Empty(t, left, "run %d on pebble: SQLite partition files left in sqlite/", run)
		for _, f := range sqliteFiles {
			assert.FileExists(t, filepath.Join(data, "sqlite.migrated", filepath.Base(f)), "run %d on pebble: migrated file", run)
		}
	}
}

// startServe runs serve with args until the returned function is called (at most once; also
// at t's cleanup), which cancels it and checks it returned nil. It waits up to 60 s for api's
// /readyz to answer 200.
func startServe(t *testing.T, api string, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var errOut string
	go func() {
		var err error
		_, errOut, err = runCmd(ctx, args...)
		done <- err
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "serve after cancel\n%s", errOut)
		case <-time.After(30 * time.Second):
			assert.Fail(t, "serve still running 30s after cancel")
		}
	}
	t.Cleanup(stop)
	var exitErr error
	exited := false
	require.Eventually(t, func() bool {
		select {
		case exitErr = <-done:
			exited = true
			return true
		default:
		}
		resp, err := http.Get(api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "serve ready (GET /readyz 200)")
	if exited {
		stopped = true
		require.FailNow(t, "serve exited before ready", "%v\n%s", exitErr, errOut)
	}
	return stop
}
