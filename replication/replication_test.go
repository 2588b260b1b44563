package replication_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
)

func TestSeqNo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pos    string
		domain uint32
		want   uint64
	}{
		{"", 0, 0},
		{"0-1-123", 0, 123},
		{"0-1-123,1-2-5", 1, 5},
		{"0-1-123,1-2-5", 0, 123},
		{"0-1-123,1-2-5", 2, 0},
		{"0-1-123,\n1-2-5", 1, 5},
		{" 1-2-7 , 0-3-9", 0, 9},
		{"0-1-18446744073709551615", 0, 18446744073709551615},
		{"0-1", 0, 0},
		{"x-1-5,0-1-6", 0, 6},
		{"0-1-abc", 0, 0},
		{"4294967296-1-5", 0, 0},
	} {
		assert.Equal(t, tc.want, replication.SeqNo(tc.pos, tc.domain), "SeqNo(%q, %d)", tc.pos, tc.domain)
	}
}

func TestIsMaster(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   replication.MemberStatus
		want bool
	}{
		{replication.MemberStatus{}, true},
		{replication.MemberStatus{ReadOnly: true}, false},
		{replication.MemberStatus{Replicating: true}, false},
		{replication.MemberStatus{ReadOnly: true, Replicating: true}, false},
	} {
		assert.Equal(t, tc.want, tc.st.IsMaster(), "%+v.IsMaster()", tc.st)
	}
}

func TestConfigureMinionBadArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		host           string
		port           int
		user, password string
	}{
		{"", 3306, "u", ""},
		{"h", 0, "u", ""},
		{"h", 70000, "u", ""},
		{"h", 3306, "", ""},
		{`h\`, 3306, "u", ""},
		{"h", 3306, "u", "pa\nss"},
	} {
		// A nil *sql.DB: the arguments are refused before any statement runs.
		err := replication.ConfigureMinion(ctx, nil, tc.host, tc.port, tc.user, tc.password)
		assert.ErrorIs(t, err, replication.ErrBadArgument, "ConfigureMinion(%q, %d, %q, %q)", tc.host, tc.port, tc.user, tc.password)
	}
}

func TestOpenDefaults(t *testing.T) {
	t.Parallel()
	_, err := replication.Open("not a dsn")
	assert.Error(t, err, "Open(bad DSN): want an error")
	db, err := replication.Open("root@tcp(127.0.0.1:1)/?timeout=1s")
	require.NoError(t, err, "Open")
	defer db.Close()
	assert.Equal(t, 2, db.Stats().MaxOpenConnections, "MaxOpenConnections")
	_, err = replication.Probe(context.Background(), db, "root@tcp(127.0.0.1:1)/")
	assert.Error(t, err, "Probe of a closed port: want an error")
}

// TestReplication runs one storage cluster of a master and two minions through replication,
// a paused minion, a failover after kill -9 of the master, the fenced restart of the old master,
// a planned switchover and a refused split brain.
func TestReplication(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 2})
	require.NoError(t, err, "StartReplicated")
	t.Cleanup(func() { assert.NoError(t, set.Close(), "Close") })
	t.Logf("started 3 servers in %v", time.Since(start))

	members := []string{set.AdminDSN(0, 0), set.AdminDSN(0, 1), set.AdminDSN(0, 2)}
	admin := make([]*sql.DB, 3) // root: may change read_only and replication
	app := make([]*sql.DB, 3)   // the datastore's user: fenced by read_only
	for i := range members {
		admin[i] = open(t, members[i])
		app[i] = open(t, set.DSN(0, i))
	}
	probe := func(i int) replication.MemberStatus {
		t.Helper()
		st, err := replication.Probe(ctx, admin[i], members[i])
		require.NoError(t, err, "Probe(m%d)", i)
		return st
	}
	opts := replication.PromoteOptions{ReplUser: set.User(), Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))}

	// Replication: rows written on the master reach both minions.
	exec(t, app[0], "CREATE DATABASE rt")
	exec(t, app[0], "CREATE TABLE rt.kv (k INT PRIMARY KEY, v VARCHAR(32))")
	insert(t, app[0], 1, 10)
	waitCaughtUp(t, ctx, set)
	for i := 1; i <= 2; i++ {
		assert.Equal(t, 10, count(t, app[i]), "m%d rows", i)
	}
	for i := range members {
		st := probe(i)
		assert.Equal(t, i == 0, st.IsMaster(), "m%d IsMaster (%+v)", i, st)
		if i > 0 {
			assert.True(t, st.Replicating && st.IORunning && st.SQLRunning && st.MasterPort == set.Instance(0, 0).Port() && st.LastError == "",
				"m%d: got %+v, want replicating from port %d, both threads running, no error", i, st, set.Instance(0, 0).Port())
		}
	}
	_, err = app[1].ExecContext(ctx, "INSERT INTO rt.kv VALUES (100, 'x')")
	assert.ErrorContains(t, err, "read-only", "insert on a minion as %s: want a read-only error", set.User())

	// A position nobody wrote is not applied: WaitApplied gives up with ctx.
	wctx, wcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	err = replication.WaitApplied(wctx, admin[1], "77-77-1000000")
	wcancel()
	assert.ErrorIs(t, err, replication.ErrNotApplied, "WaitApplied(unwritten position)")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "WaitApplied(unwritten position)")
	assert.NoError(t, replication.WaitApplied(ctx, admin[1], ""), "WaitApplied(\"\")")

	// A paused minion receives but does not apply.
	require.NoError(t, replication.PauseReplication(ctx, admin[1]))
	insert(t, app[0], 11, 20)
	masterSeq := replication.SeqNo(probe(0).GTIDBinlogPos, 0)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := replication.Probe(ctx, admin[1], members[1])
		require.NoError(c, err, "Probe(m1)")
		assert.Equal(c, masterSeq, replication.SeqNo(st.GTIDIOPos, 0), "m1 received %s: want the master's seq", st.GTIDIOPos)
	}, 10*time.Second, 50*time.Millisecond, "paused m1 receives what the master wrote")
	st := probe(1)
	assert.True(t, replication.SeqNo(st.GTIDSlavePos, 0) < masterSeq && !st.SQLRunning && st.SecondsBehind == -1,
		"paused m1: got %+v, want slave pos behind seq %d, SQL thread stopped, SecondsBehind -1", st, masterSeq)
	assert.Equal(t, 10, count(t, app[1]), "paused m1 rows")
	require.NoError(t, replication.ResumeReplication(ctx, admin[1]))
	waitCaughtUp(t, ctx, set)
	assert.Equal(t, 20, count(t, app[1]), "resumed m1 rows")

	// Failover: the master is killed while m1 has received but not applied its last rows. m1
	// and m2 received as much; m1 wins the tie, applies, becomes master; m2 follows it.
	require.NoError(t, replication.PauseReplication(ctx, admin[1]))
	insert(t, app[0], 21, 25)
	masterSeq = replication.SeqNo(probe(0).GTIDBinlogPos, 0)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for i := 1; i <= 2; i++ {
			st, err := replication.Probe(ctx, admin[i], members[i])
			require.NoError(c, err, "Probe(m%d)", i)
			assert.Equal(c, masterSeq, replication.SeqNo(st.GTIDIOPos, 0), "m%d received %s: want the master's seq", i, st.GTIDIOPos)
		}
	}, 10*time.Second, 50*time.Millisecond, "both minions receive what the master wrote")
	require.NoError(t, set.Instance(0, 0).Kill(), "kill the master")
	res, err := replication.Promote(ctx, members, opts)
	require.NoError(t, err, "Promote after kill")
	t.Logf("failover: %+v", res)
	assert.True(t, res.NewMaster == members[1] && res.OldMaster == "" && !res.OldMasterReachable && res.CaughtUp &&
		len(res.Repointed) == 1 && res.Repointed[0] == members[2] && strings.HasPrefix(res.Skipped[members[0]], "unreachable"),
		"failover: got %+v, want m1 promoted and caught up, m2 repointed, m0 skipped as unreachable", res)
	assert.Equal(t, masterSeq, replication.SeqNo(res.Position, 0), "new master's position %q: seq", res.Position)
	st = probe(1)
	assert.True(t, st.IsMaster(), "m1 after failover: %+v, want master", st)
	assert.Equal(t, 25, count(t, app[1]), "new master m1 rows")
	insert(t, app[1], 26, 30)
	waitCaughtUp(t, ctx, set)
	assert.Equal(t, 30, count(t, app[2]), "m2 rows after writes on the new master")
	st = probe(2)
	assert.True(t, st.MasterPort == set.Instance(0, 1).Port() && st.IORunning && st.SQLRunning,
		"m2 after failover: %+v, want replicating from port %d", st, set.Instance(0, 1).Port())

	// The old master restarts fenced.
	require.NoError(t, set.Restart(ctx, 0, 0))
	st = probe(0)
	assert.True(t, st.ReadOnly && !st.Replicating && !st.IsMaster(), "restarted old master: %+v, want read-only, replicating from nobody, not master", st)
	assert.Equal(t, 25, count(t, app[0]), "restarted old master rows")
	_, err = app[0].ExecContext(ctx, "INSERT INTO rt.kv VALUES (100, 'x')")
	assert.Error(t, err, "insert on the fenced old master: want a read-only error")

	// Planned switchover to m2: m1 is fenced, m2 catches up, m1 and the old master m0 follow m2
	// (m0 resumes after its own last transaction, which m2 has).
	res, err = replication.Promote(ctx, members, opts)
	require.NoError(t, err, "Promote (switchover)")
	t.Logf("switchover: %+v", res)
	assert.True(t, res.NewMaster == members[2] && res.OldMaster == members[1] && res.OldMasterReachable && res.CaughtUp &&
		strings.Join(res.Repointed, " ") == members[0]+" "+members[1] && len(res.Skipped) == 0,
		"switchover: got %+v, want m2 promoted from m1, m0 and m1 repointed", res)
	insert(t, app[2], 31, 35)
	waitCaughtUp(t, ctx, set)
	for i := range members {
		assert.Equal(t, 35, count(t, app[i]), "m%d rows after the switchover", i)
		st := probe(i)
		assert.True(t, st.IsMaster() == (i == 2) && st.LastError == "", "m%d after the switchover: %+v, want master only m2, no error", i, st)
	}

	// Two masters: Promote refuses and changes nothing.
	require.NoError(t, replication.MakeMaster(ctx, admin[0]))
	_, err = replication.Promote(ctx, members, opts)
	require.ErrorIs(t, err, replication.ErrSplitBrain, "Promote with two masters")
	assert.ErrorContains(t, err, set.Instance(0, 0).Addr(), "Promote with two masters: want ErrSplitBrain naming both")
	assert.ErrorContains(t, err, set.Instance(0, 2).Addr(), "Promote with two masters: want ErrSplitBrain naming both")
	st = probe(2)
	assert.True(t, st.IsMaster(), "m2 after the refused promote: %+v, want still master", st)
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := replication.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	_, err := db.Exec(q, args...)
	require.NoError(t, err, q)
}

// insert writes rows lo..hi into rt.kv, one transaction each.
func insert(t *testing.T, db *sql.DB, lo, hi int) {
	t.Helper()
	for k := lo; k <= hi; k++ {
		exec(t, db, "INSERT INTO rt.kv VALUES (?, ?)", k, fmt.Sprintf("v%d", k))
	}
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM rt.kv").Scan(&n), "count")
	return n
}

func waitCaughtUp(t *testing.T, ctx context.Context, set *mariadb.ReplicatedSet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, set.WaitCaughtUp(ctx, 0), "WaitCaughtUp")
}

// tWriter sends a logger's lines to t.Log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
