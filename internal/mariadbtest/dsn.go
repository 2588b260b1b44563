package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/internal/mariadb"
)

// Where DSN looks for a server.
const (
	// EnvDSN names the environment variable holding the DSN of a server to use.
	EnvDSN = "SCHEMALESS_TEST_MYSQL_DSN"
	// LocalDSN is the server DSN tries when EnvDSN is not set.
	LocalDSN = "root@tcp(127.0.0.1:3306)/"
	// localPingTimeout bounds the ping of LocalDSN.
	localPingTimeout = 2 * time.Second
	// sharedStartTimeout bounds starting the shared throwaway instance.
	sharedStartTimeout = 2 * time.Minute
	// dropTimeout bounds the cleanup of a prefix's databases.
	dropTimeout = 60 * time.Second
)

// shared is the server every test of this process uses, resolved once. It is process state by
// nature: one throwaway instance per test binary.
var shared struct {
	once   sync.Once
	mu     sync.Mutex
	dsn    string
	inst   *mariadb.Instance
	reason string // why there is no server
	broken bool   // the binaries exist but the instance failed to start: fail, never skip
}

// DSN returns the DSN of a server for t, with no database (see the package documentation for
// where it comes from). The first call may take a few seconds to start a throwaway instance;
// later calls return at once. With no server it skips t, or fails t when CI=true; when the
// installed server fails to start it fails t.
func DSN(t testing.TB) string {
	t.Helper()
	shared.once.Do(resolve)
	shared.mu.Lock()
	dsn, reason, broken := shared.dsn, shared.reason, shared.broken
	shared.mu.Unlock()
	if dsn != "" {
		return dsn
	}
	if broken {
		t.Fatalf("mariadbtest: %s", reason)
	}
	unavailable(t, reason)
	return ""
}

func resolve() {
	dsn, inst, reason, broken := find(os.Getenv(EnvDSN), LocalDSN)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.dsn, shared.inst, shared.reason, shared.broken = dsn, inst, reason, broken
}

// find picks the server: envDSN if set, local if it answers, else a throwaway instance (which
// the caller must stop). With no server it returns the reason; broken reports that the
// binaries exist but the instance did not start.
func find(envDSN, local string) (dsn string, inst *mariadb.Instance, reason string, broken bool) {
	if envDSN != "" {
		return envDSN, nil, "", false
	}
	if err := ping(local, localPingTimeout); err == nil {
		return local, nil, "", false
	}
	if _, _, err := mariadb.FindBinaries(); err != nil {
		return "", nil, fmt.Sprintf("no MySQL server: %s is not set, %s does not answer, and %v", EnvDSN, local, err), false
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedStartTimeout)
	defer cancel()
	inst, err := mariadb.Start(ctx, mariadb.Options{})
	if err != nil {
		return "", nil, fmt.Sprintf("start a throwaway server: %v", err), true
	}
	return inst.DSN(), inst, "", false
}

// ping connects to dsn and pings it within timeout.
func ping(dsn string, timeout time.Duration) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.Timeout = timeout
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return db.PingContext(ctx)
}

// InCI reports whether the environment says the tests run in CI (CI=true or CI=1), where a
// missing server fails tests instead of skipping them.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// unavailable skips t, or fails it in CI.
func unavailable(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("mariadbtest: %s (CI=true: not skipping)", reason)
	}
	t.Skipf("mariadbtest: %s; set %s to run this test", reason, EnvDSN)
}

// RequireServerBinary skips t (fails it when CI=true) unless FindBinaries finds the server and
// install programs, for tests that call Start.
func RequireServerBinary(t testing.TB) {
	t.Helper()
	if _, _, err := mariadb.FindBinaries(); err != nil {
		unavailable(t, err.Error())
	}
}

// Main runs the tests of a package and then stops the shared throwaway instance, if DSN started
// one, and exits with the tests' status (failing if the instance did not stop cleanly). Call
// it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := stopSharedReplicated(); err != nil {
		fmt.Fprintf(os.Stderr, "mariadbtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	shared.mu.Lock()
	inst := shared.inst
	shared.inst = nil
	shared.mu.Unlock()
	if inst != nil {
		if err := inst.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "mariadbtest: stop the shared server: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Prefix returns a database prefix unique to t: "t" and 10 random lowercase letters, which
// matches [a-z0-9_]{1,16}. When t ends, every database named "<prefix>_..." on the DSN(t)
// server is dropped (failing t if that fails). It skips or fails t like DSN when there is no
// server.
func Prefix(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	prefix := randomPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		if err := mariadb.DropPrefix(ctx, dsn, prefix); err != nil {
			t.Errorf("mariadbtest: drop databases of prefix %s: %v", prefix, err)
		}
	})
	return prefix
}

// randomPrefix returns "t" and 10 random lowercase letters: a valid storage prefix
// ([a-z0-9_]{1,16}) and a valid async mysql_prefix.
func randomPrefix() string {
	b := make([]byte, 11)
	b[0] = 't'
	for i := 1; i < len(b); i++ {
		b[i] = byte('a' + rand.N(26))
	}
	return string(b)
}
