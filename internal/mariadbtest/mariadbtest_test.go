package mariadbtest

import (
	"context"
	"database/sql"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
)

func TestMain(m *testing.M) { Main(m) }

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

func TestDSNAnswers(t *testing.T) {
	t.Parallel()
	db := open(t, DSN(t))
	var v string
	require.NoError(t, db.QueryRow("SELECT VERSION()").Scan(&v), "SELECT VERSION() on %s", DSN(t))
	t.Logf("server %s at %s", v, DSN(t))
}

func schemaCount(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n))
	return n
}

func TestPrefixDropsItsDatabases(t *testing.T) {
	t.Parallel()
	db := open(t, DSN(t))
	var prefix string
	t.Run("user", func(t *testing.T) {
		prefix = Prefix(t)
		require.Regexp(t, regexp.MustCompile(`^t[a-z]{10}$`), prefix, "Prefix(): want t and 10 lowercase letters")
		require.NotEqual(t, prefix, Prefix(t), "two Prefix() calls: want different prefixes")
		for _, name := range []string{prefix + "_a", prefix + "_b_0001"} {
			_, err := db.Exec("CREATE DATABASE `" + name + "`")
			require.NoError(t, err)
			_, err = db.Exec("CREATE TABLE `" + name + "`.x (id INT PRIMARY KEY) ENGINE=InnoDB")
			require.NoError(t, err)
		}
	})
	// A database that merely starts with the same letters must survive.
	keep := prefix + "x"
	_, err := db.Exec("CREATE DATABASE `" + keep + "`")
	require.NoError(t, err)
	defer db.Exec("DROP DATABASE `" + keep + "`")
	for _, name := range []string{prefix + "_a", prefix + "_b_0001"} {
		assert.Equal(t, 0, schemaCount(t, db, name), "database %s after its test ended: want it dropped", name)
	}
	require.NoError(t, mariadb.DropPrefix(context.Background(), DSN(t), prefix))
	assert.Equal(t, 1, schemaCount(t, db, keep), "database %s (not under prefix %s_): want it kept", keep, prefix)
}

// With no configured and no local server, find starts a throwaway instance.
func TestFindFallsBackToThrowawayInstance(t *testing.T) {
	t.Parallel()
	RequireServerBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := l.Addr().String()
	l.Close() // nothing listens there now

	dsn, inst, _, _ := find("user@tcp(example:1)/", "root@tcp("+deadAddr+")/")
	assert.Equal(t, "user@tcp(example:1)/", dsn, "find with the env DSN set: want the env DSN")
	assert.Nil(t, inst, "find with the env DSN set: want no instance")
	dsn, inst, reason, broken := find("", "root@tcp("+deadAddr+")/")
	require.NotNil(t, inst, "find with no server = %q, nil instance (reason %q, broken %v); want a started instance", dsn, reason, broken)
	defer inst.Kill()
	assert.Equal(t, inst.DSN(), dsn, "find DSN: want the instance's")
	assert.NoError(t, ping(dsn, 2*time.Second), "ping %s", dsn)
	assert.NoError(t, inst.Stop(), "Stop")
}

func TestFreePorts(t *testing.T) {
	t.Parallel()
	lo, hi := ephemeralRange()
	for range 5 {
		base := FreePorts(t, 15)
		assert.True(t, base+15 <= lo || base > hi, "FreePorts(15) = %d: want %d-%d outside the ephemeral range %d-%d", base, base, base+14, lo, hi)
		assert.GreaterOrEqual(t, base, minTestPort, "FreePorts(15)")
		assert.LessOrEqual(t, base+14, 65535, "FreePorts(15): last port")
	}
}

// TestPortsFree checks the test FreePorts relies on: a port with a TCP or a UDP listener is
// not free. (Whether FreePorts' ports are still free after it returns depends on the other
// processes of the machine, so it is not asserted.)
func TestPortsFree(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tcp := l.Addr().(*net.TCPAddr).Port
	assert.False(t, portsFree(tcp, 1), "port %d with a TCP listener", tcp)
	assert.False(t, portsFree(tcp-1, 2), "ports %d-%d, the second with a TCP listener", tcp-1, tcp)
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer u.Close()
	udp := u.LocalAddr().(*net.UDPAddr).Port
	assert.False(t, portsFree(udp, 1), "port %d with a UDP listener", udp)
	require.NoError(t, l.Close())
	assert.Eventually(t, func() bool { return portsFree(tcp, 1) }, 5*time.Second, 10*time.Millisecond,
		"port %d after its listener closed", tcp)
}
