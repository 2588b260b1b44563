package replication_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
)

func TestSeqNo(t *testing.T) {
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
		if got := replication.SeqNo(tc.pos, tc.domain); got != tc.want {
			t.Errorf("SeqNo(%q, %d) = %d, want %d", tc.pos, tc.domain, got, tc.want)
		}
	}
}

func TestIsMaster(t *testing.T) {
	for _, tc := range []struct {
		st   replication.MemberStatus
		want bool
	}{
		{replication.MemberStatus{}, true},
		{replication.MemberStatus{ReadOnly: true}, false},
		{replication.MemberStatus{Replicating: true}, false},
		{replication.MemberStatus{ReadOnly: true, Replicating: true}, false},
	} {
		if got := tc.st.IsMaster(); got != tc.want {
			t.Errorf("%+v.IsMaster() = %v, want %v", tc.st, got, tc.want)
		}
	}
}

func TestConfigureMinionBadArguments(t *testing.T) {
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
		if !errors.Is(err, replication.ErrBadArgument) {
			t.Errorf("ConfigureMinion(%q, %d, %q, %q) = %v, want ErrBadArgument", tc.host, tc.port, tc.user, tc.password, err)
		}
	}
}

func TestOpenDefaults(t *testing.T) {
	if _, err := replication.Open("not a dsn"); err == nil {
		t.Error("Open(bad DSN) = nil error, want one")
	}
	db, err := replication.Open("root@tcp(127.0.0.1:1)/?timeout=1s")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if got := db.Stats().MaxOpenConnections; got != 2 {
		t.Errorf("MaxOpenConnections = %d, want 2", got)
	}
	if _, err := replication.Probe(context.Background(), db, "root@tcp(127.0.0.1:1)/"); err == nil {
		t.Error("Probe of a closed port = nil error, want one")
	}
}

// TestReplication runs one storage cluster of a master and two minions through replication,
// a paused minion, a failover after kill -9 of the master, the fenced restart of the old master,
// a planned switchover and a refused split brain.
func TestReplication(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	set, err := mariadbtest.StartReplicated(ctx, mariadbtest.ReplicatedOptions{Clusters: 1, Minions: 2})
	if err != nil {
		t.Fatalf("StartReplicated: %v", err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
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
		if err != nil {
			t.Fatalf("Probe(m%d): %v", i, err)
		}
		return st
	}
	opts := replication.PromoteOptions{ReplUser: set.User(), Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))}

	// Replication: rows written on the master reach both minions.
	exec(t, app[0], "CREATE DATABASE rt")
	exec(t, app[0], "CREATE TABLE rt.kv (k INT PRIMARY KEY, v VARCHAR(32))")
	insert(t, app[0], 1, 10)
	waitCaughtUp(t, ctx, set)
	for i := 1; i <= 2; i++ {
		if got := count(t, app[i]); got != 10 {
			t.Errorf("m%d has %d rows, want 10", i, got)
		}
	}
	for i := range members {
		st := probe(i)
		if got, want := st.IsMaster(), i == 0; got != want {
			t.Errorf("m%d IsMaster = %v, want %v (%+v)", i, got, want, st)
		}
		if i > 0 && (!st.Replicating || !st.IORunning || !st.SQLRunning || st.MasterPort != set.Instance(0, 0).Port() || st.LastError != "") {
			t.Errorf("m%d: got %+v, want replicating from port %d, both threads running, no error", i, st, set.Instance(0, 0).Port())
		}
	}
	if _, err := app[1].ExecContext(ctx, "INSERT INTO rt.kv VALUES (100, 'x')"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("insert on a minion as %s: got %v, want a read-only error", set.User(), err)
	}

	// A position nobody wrote is not applied: WaitApplied gives up with ctx.
	wctx, wcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	err = replication.WaitApplied(wctx, admin[1], "77-77-1000000")
	wcancel()
	if !errors.Is(err, replication.ErrNotApplied) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitApplied(unwritten position) = %v, want ErrNotApplied and DeadlineExceeded", err)
	}
	if err := replication.WaitApplied(ctx, admin[1], ""); err != nil {
		t.Errorf("WaitApplied(\"\") = %v, want nil", err)
	}

	// A paused minion receives but does not apply.
	if err := replication.PauseReplication(ctx, admin[1]); err != nil {
		t.Fatal(err)
	}
	insert(t, app[0], 11, 20)
	masterSeq := replication.SeqNo(probe(0).GTIDBinlogPos, 0)
	eventually(t, 10*time.Second, func() error {
		if st := probe(1); replication.SeqNo(st.GTIDIOPos, 0) != masterSeq {
			return fmt.Errorf("m1 received %s, master wrote seq %d", st.GTIDIOPos, masterSeq)
		}
		return nil
	})
	st := probe(1)
	if replication.SeqNo(st.GTIDSlavePos, 0) >= masterSeq || st.SQLRunning || st.SecondsBehind != -1 {
		t.Errorf("paused m1: got %+v, want slave pos behind seq %d, SQL thread stopped, SecondsBehind -1", st, masterSeq)
	}
	if got := count(t, app[1]); got != 10 {
		t.Errorf("paused m1 has %d rows, want 10", got)
	}
	if err := replication.ResumeReplication(ctx, admin[1]); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, ctx, set)
	if got := count(t, app[1]); got != 20 {
		t.Errorf("resumed m1 has %d rows, want 20", got)
	}

	// Failover: the master is killed while m1 has received but not applied its last rows. m1
	// and m2 received as much; m1 wins the tie, applies, becomes master; m2 follows it.
	if err := replication.PauseReplication(ctx, admin[1]); err != nil {
		t.Fatal(err)
	}
	insert(t, app[0], 21, 25)
	masterSeq = replication.SeqNo(probe(0).GTIDBinlogPos, 0)
	eventually(t, 10*time.Second, func() error {
		for i := 1; i <= 2; i++ {
			if st := probe(i); replication.SeqNo(st.GTIDIOPos, 0) != masterSeq {
				return fmt.Errorf("m%d received %s, master wrote seq %d", i, st.GTIDIOPos, masterSeq)
			}
		}
		return nil
	})
	if err := set.Instance(0, 0).Kill(); err != nil {
		t.Fatalf("kill the master: %v", err)
	}
	res, err := replication.Promote(ctx, members, opts)
	if err != nil {
		t.Fatalf("Promote after kill: %v", err)
	}
	t.Logf("failover: %+v", res)
	if res.NewMaster != members[1] || res.OldMaster != "" || res.OldMasterReachable || !res.CaughtUp ||
		len(res.Repointed) != 1 || res.Repointed[0] != members[2] || !strings.HasPrefix(res.Skipped[members[0]], "unreachable") {
		t.Errorf("failover: got %+v, want m1 promoted and caught up, m2 repointed, m0 skipped as unreachable", res)
	}
	if got := replication.SeqNo(res.Position, 0); got != masterSeq {
		t.Errorf("new master's position %q: seq %d, want %d", res.Position, got, masterSeq)
	}
	if st := probe(1); !st.IsMaster() {
		t.Errorf("m1 after failover: %+v, want master", st)
	}
	if got := count(t, app[1]); got != 25 {
		t.Errorf("new master m1 has %d rows, want 25", got)
	}
	insert(t, app[1], 26, 30)
	waitCaughtUp(t, ctx, set)
	if got := count(t, app[2]); got != 30 {
		t.Errorf("m2 has %d rows after writes on the new master, want 30", got)
	}
	if st := probe(2); st.MasterPort != set.Instance(0, 1).Port() || !st.IORunning || !st.SQLRunning {
		t.Errorf("m2 after failover: %+v, want replicating from port %d", st, set.Instance(0, 1).Port())
	}

	// The old master restarts fenced.
	if err := set.Restart(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if st := probe(0); !st.ReadOnly || st.Replicating || st.IsMaster() {
		t.Errorf("restarted old master: %+v, want read-only, replicating from nobody, not master", st)
	}
	if got := count(t, app[0]); got != 25 {
		t.Errorf("restarted old master has %d rows, want 25", got)
	}
	if _, err := app[0].ExecContext(ctx, "INSERT INTO rt.kv VALUES (100, 'x')"); err == nil {
		t.Error("insert on the fenced old master succeeded, want a read-only error")
	}

	// Planned switchover to m2: m1 is fenced, m2 catches up, m1 and the old master m0 follow m2
	// (m0 resumes after its own last transaction, which m2 has).
	res, err = replication.Promote(ctx, members, opts)
	if err != nil {
		t.Fatalf("Promote (switchover): %v", err)
	}
	t.Logf("switchover: %+v", res)
	if res.NewMaster != members[2] || res.OldMaster != members[1] || !res.OldMasterReachable || !res.CaughtUp ||
		strings.Join(res.Repointed, " ") != members[0]+" "+members[1] || len(res.Skipped) != 0 {
		t.Errorf("switchover: got %+v, want m2 promoted from m1, m0 and m1 repointed", res)
	}
	insert(t, app[2], 31, 35)
	waitCaughtUp(t, ctx, set)
	for i := range members {
		if got := count(t, app[i]); got != 35 {
			t.Errorf("m%d has %d rows after the switchover, want 35", i, got)
		}
		if st := probe(i); st.IsMaster() != (i == 2) || st.LastError != "" {
			t.Errorf("m%d after the switchover: %+v, want master only m2, no error", i, st)
		}
	}

	// Two masters: Promote refuses and changes nothing.
	if err := replication.MakeMaster(ctx, admin[0]); err != nil {
		t.Fatal(err)
	}
	_, err = replication.Promote(ctx, members, opts)
	if !errors.Is(err, replication.ErrSplitBrain) || !strings.Contains(err.Error(), set.Instance(0, 0).Addr()) ||
		!strings.Contains(err.Error(), set.Instance(0, 2).Addr()) {
		t.Errorf("Promote with two masters: got %v, want ErrSplitBrain naming %s and %s", err, set.Instance(0, 0).Addr(), set.Instance(0, 2).Addr())
	}
	if st := probe(2); !st.IsMaster() {
		t.Errorf("m2 after the refused promote: %+v, want still master", st)
	}
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := replication.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
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
	if err := db.QueryRow("SELECT COUNT(*) FROM rt.kv").Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func waitCaughtUp(t *testing.T, ctx context.Context, set *mariadbtest.ReplicatedSet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := set.WaitCaughtUp(ctx, 0); err != nil {
		t.Fatalf("WaitCaughtUp: %v", err)
	}
}

// eventually calls f every 50 ms until it returns nil, failing t with its last error after
// timeout.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tWriter sends a logger's lines to t.Log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
