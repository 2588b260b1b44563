package mariadb_test

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

// open opens dsn with a 2 s connect timeout, closed when the test ends.
func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.Timeout = 2 * time.Second
	conn, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// A started instance takes flags, keeps its data across Stop and Start on the same directory,
// and is gone after Kill.
func TestStartStopRestartKill(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	opts := mariadb.Options{DataDir: dir, Args: []string{"--server-id=7", "--log-bin=mysql-bin"}}
	inst, err := mariadb.Start(ctx, opts)
	require.NoError(t, err, "Start")
	defer inst.Kill()
	db := open(t, inst.DSN())
	var serverID, logBin int
	require.NoError(t, db.QueryRow("SELECT @@server_id, @@log_bin").Scan(&serverID, &logBin))
	assert.Equal(t, []int{7, 1}, []int{serverID, logBin}, "server_id, log_bin: want 7, 1 (from Options.Args)")
	for _, q := range []string{
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB",
		"INSERT INTO d.t VALUES (1, 'kept')",
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	db.Close()
	require.NoError(t, inst.Stop(), "Stop")
	_, err = os.Stat(filepath.Join(dir, "error.log"))
	assert.NoError(t, err, "error log after Stop: want it kept in the data directory")

	inst, err = mariadb.Start(ctx, opts)
	require.NoError(t, err, "Start again on %s", dir)
	defer inst.Kill()
	db = open(t, inst.DSN())
	var v string
	require.NoError(t, db.QueryRow("SELECT v FROM d.t WHERE id = 1").Scan(&v), "after restart: SELECT v")
	require.Equal(t, "kept", v, "after restart: SELECT v")
	pid := inst.Pid()
	require.NoError(t, inst.Kill(), "Kill")
	select {
	case <-inst.Done():
	default:
		assert.Fail(t, "Done() not closed after Kill")
	}
	assert.False(t, processAlive(pid), "process %d alive after Kill, want gone", pid)
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	assert.Error(t, db.PingContext(pctx), "ping after Kill: want an error")
	assert.NoError(t, inst.Kill(), "second Kill")
	assert.NoError(t, inst.Stop(), "Stop after Kill")
	_, err = os.Stat(filepath.Join(dir, "mysql"))
	assert.NoError(t, err, "data directory given in Options after Kill: want it kept")
}

func TestStartTemporaryDirRemoved(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := mariadb.Start(ctx, mariadb.Options{})
	require.NoError(t, err, "Start")
	defer inst.Kill()
	assert.True(t, strings.HasPrefix(inst.DataDir(), os.TempDir()), "DataDir() = %s, want it under %s", inst.DataDir(), os.TempDir())
	require.NoError(t, open(t, inst.DSN()).PingContext(ctx), "ping %s", inst.DSN())
	require.NoError(t, inst.Stop(), "Stop")
	assert.NoDirExists(t, inst.DataDir(), "temporary data dir after Stop")
}

// A server that cannot start reports why, with its log; a taken port is recognized.
func TestStartFailures(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	_, err := mariadb.Start(ctx, mariadb.Options{DataDir: dir, Args: []string{"--no-such-server-option=1"}})
	require.Error(t, err, "Start with a bad flag: want an error quoting the log about the flag")
	assert.Contains(t, err.Error(), "tail of", "Start with a bad flag: want an error quoting the log")
	assert.Contains(t, err.Error(), "no-such-server-option", "Start with a bad flag: want an error about the flag")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, err = mariadb.Start(ctx, mariadb.Options{DataDir: dir, Port: l.Addr().(*net.TCPAddr).Port})
	assert.ErrorIs(t, err, mariadb.ErrPortInUse, "Start on a taken port")
}

// Regression: a server deletes every "#sql*" file of its tmpdir at startup; with the shared
// /tmp that destroyed the live temporary tables of the test server on port 3306 (queries
// failed with "Error on delete of '/tmp/#sql-temptable-....MAI'"). Started servers get their own.
func TestStartLeavesSharedTmpAlone(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	probe := filepath.Join(os.TempDir(), "#sql-mariadb-probe-"+strings.ReplaceAll(t.Name(), "/", "_"))
	require.NoError(t, os.WriteFile(probe, []byte("not yours"), 0o600))
	defer os.Remove(probe)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := mariadb.Start(ctx, mariadb.Options{})
	require.NoError(t, err, "Start")
	defer inst.Kill()
	assert.FileExists(t, probe, "after starting a server: want it left alone")
	tmp := inst.TmpDir()
	require.NoError(t, inst.Stop())
	assert.NoDirExists(t, tmp, "the server's tmpdir after Stop")
}

// Stop of a server that exited by itself says so with ErrExited; Kill of it does not.
func TestStopExited(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := mariadb.Start(ctx, mariadb.Options{})
	require.NoError(t, err, "Start")
	defer inst.Kill()
	require.NoError(t, syscall.Kill(inst.Pid(), syscall.SIGKILL))
	<-inst.Done()
	assert.ErrorIs(t, inst.Stop(), mariadb.ErrExited, "Stop of a server killed from outside")
	assert.NoError(t, inst.Stop(), "second Stop")
}

func TestDropPrefixRefusesBadPrefixes(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "a`b", "a%", `a\`, "a'b"} {
		// No server answers here: a bad prefix is refused before connecting.
		err := mariadb.DropPrefix(context.Background(), "root@tcp(127.0.0.1:1)/", prefix)
		assert.ErrorContains(t, err, "bad prefix", "DropPrefix(%q)", prefix)
	}
}
