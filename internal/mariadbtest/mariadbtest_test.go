package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestMain(m *testing.M) { Main(m) }

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 2 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestDSNAnswers(t *testing.T) {
	db := open(t, DSN(t))
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatalf("SELECT VERSION() on %s: %v", DSN(t), err)
	}
	t.Logf("server %s at %s", v, DSN(t))
}

func schemaCount(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPrefixDropsItsDatabases(t *testing.T) {
	db := open(t, DSN(t))
	var prefix string
	t.Run("user", func(t *testing.T) {
		prefix = Prefix(t)
		if !regexp.MustCompile(`^t[a-z]{10}$`).MatchString(prefix) {
			t.Fatalf("Prefix() = %q, want t and 10 lowercase letters", prefix)
		}
		if other := Prefix(t); other == prefix {
			t.Fatalf("two Prefix() calls both returned %q, want different prefixes", prefix)
		}
		for _, name := range []string{prefix + "_a", prefix + "_b_0001"} {
			if _, err := db.Exec("CREATE DATABASE `" + name + "`"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("CREATE TABLE `" + name + "`.x (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
				t.Fatal(err)
			}
		}
	})
	// A database that merely starts with the same letters must survive.
	keep := prefix + "x"
	if _, err := db.Exec("CREATE DATABASE `" + keep + "`"); err != nil {
		t.Fatal(err)
	}
	defer db.Exec("DROP DATABASE `" + keep + "`")
	for _, name := range []string{prefix + "_a", prefix + "_b_0001"} {
		if got := schemaCount(t, db, name); got != 0 {
			t.Errorf("database %s exists %d times after its test ended, want 0", name, got)
		}
	}
	if err := DropPrefix(context.Background(), DSN(t), prefix); err != nil {
		t.Fatal(err)
	}
	if got := schemaCount(t, db, keep); got != 1 {
		t.Errorf("database %s (not under prefix %s_) exists %d times, want 1", keep, prefix, got)
	}
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// A started instance takes flags, keeps its data across Stop and Start on the same directory,
// and is gone after Kill.
func TestStartStopRestartKill(t *testing.T) {
	RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	opts := Options{DataDir: dir, Args: []string{"--server-id=7", "--log-bin=mysql-bin"}}
	inst, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer inst.Kill()
	db := open(t, inst.DSN())
	var serverID, logBin int
	if err := db.QueryRow("SELECT @@server_id, @@log_bin").Scan(&serverID, &logBin); err != nil {
		t.Fatal(err)
	}
	if serverID != 7 || logBin != 1 {
		t.Errorf("server_id, log_bin = %d, %d; want 7, 1 (from Options.Args)", serverID, logBin)
	}
	for _, q := range []string{
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB",
		"INSERT INTO d.t VALUES (1, 'kept')",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	if err := inst.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "error.log")); err != nil {
		t.Errorf("error log after Stop: %v, want it kept in the data directory", err)
	}

	inst, err = Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start again on %s: %v", dir, err)
	}
	defer inst.Kill()
	db = open(t, inst.DSN())
	var v string
	if err := db.QueryRow("SELECT v FROM d.t WHERE id = 1").Scan(&v); err != nil || v != "kept" {
		t.Fatalf("after restart: SELECT v = %q, %v; want kept, nil", v, err)
	}
	pid := inst.Pid()
	if err := inst.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	select {
	case <-inst.Done():
	default:
		t.Error("Done() not closed after Kill")
	}
	if processAlive(pid) {
		t.Errorf("process %d alive after Kill, want gone", pid)
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if err := db.PingContext(pctx); err == nil {
		t.Error("ping after Kill succeeded, want an error")
	}
	if err := inst.Kill(); err != nil {
		t.Errorf("second Kill: %v, want nil", err)
	}
	if err := inst.Stop(); err != nil {
		t.Errorf("Stop after Kill: %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mysql")); err != nil {
		t.Errorf("data directory given in Options after Kill: %v, want it kept", err)
	}
}

func TestStartTemporaryDirRemoved(t *testing.T) {
	RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer inst.Kill()
	if !strings.HasPrefix(inst.DataDir(), os.TempDir()) {
		t.Errorf("DataDir() = %s, want it under %s", inst.DataDir(), os.TempDir())
	}
	if err := ping(inst.DSN(), 2*time.Second); err != nil {
		t.Fatalf("ping %s: %v", inst.DSN(), err)
	}
	if err := inst.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(inst.DataDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of temporary data dir after Stop: %v, want not exist", err)
	}
}

// A server that cannot start reports why, with its log; a taken port is recognized.
func TestStartFailures(t *testing.T) {
	RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	_, err := Start(ctx, Options{DataDir: dir, Args: []string{"--no-such-server-option=1"}})
	if err == nil || !strings.Contains(err.Error(), "tail of") || !strings.Contains(err.Error(), "no-such-server-option") {
		t.Errorf("Start with a bad flag: %v, want an error quoting the log about the flag", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Start(ctx, Options{DataDir: dir, Port: l.Addr().(*net.TCPAddr).Port})
	if !errors.Is(err, ErrPortInUse) {
		t.Errorf("Start on a taken port: %v, want ErrPortInUse", err)
	}
}

// With no configured and no local server, find starts a throwaway instance.
func TestFindFallsBackToThrowawayInstance(t *testing.T) {
	RequireServerBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := l.Addr().String()
	l.Close() // nothing listens there now

	if dsn, inst, _, _ := find("user@tcp(example:1)/", "root@tcp("+deadAddr+")/"); dsn != "user@tcp(example:1)/" || inst != nil {
		t.Errorf("find with the env DSN set = %q, %v; want the env DSN and no instance", dsn, inst)
	}
	dsn, inst, reason, broken := find("", "root@tcp("+deadAddr+")/")
	if inst == nil {
		t.Fatalf("find with no server = %q, nil instance (reason %q, broken %v); want a started instance", dsn, reason, broken)
	}
	defer inst.Kill()
	if dsn != inst.DSN() {
		t.Errorf("find DSN = %q, want the instance's %q", dsn, inst.DSN())
	}
	if err := ping(dsn, 2*time.Second); err != nil {
		t.Errorf("ping %s: %v", dsn, err)
	}
	if err := inst.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// Regression: a server deletes every "#sql*" file of its tmpdir at startup; with the shared
// /tmp that destroyed the live temporary tables of the test server on port 3306 (queries
// failed with "Error on delete of '/tmp/#sql-temptable-....MAI'"). Started servers get their own.
func TestStartLeavesSharedTmpAlone(t *testing.T) {
	RequireServerBinary(t)
	probe := filepath.Join(os.TempDir(), "#sql-mariadbtest-probe-"+strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.WriteFile(probe, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(probe)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer inst.Kill()
	if _, err := os.Stat(probe); err != nil {
		t.Errorf("%s after starting a server: %v, want it left alone", probe, err)
	}
	tmp := inst.tmpDir
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of the server's tmpdir after Stop: %v, want not exist", err)
	}
}
