package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
)

// runCmd runs the schemaless command tree with args, as main does, and returns its stdout and
// stderr.
func runCmd(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// writeAdminTopology writes a topology with the async datastore trips on the storage cluster
// c0 of members (DSNs, the first the master) and the raft datastore users, and returns its path.
func writeAdminTopology(t *testing.T, members []string) string {
	t.Helper()
	var minions []string
	for _, m := range members[1:] {
		minions = append(minions, fmt.Sprintf("%q", m))
	}
	text := fmt.Sprintf(`nodes:
  - {id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}
datastores:
  - name: trips
    mode: async
    shards: 4
    partition_count: 2
    storage_clusters:
      - {name: c0, master: %q, minions: [%s]}
    unsafe_no_buffered_writes: true
  - name: users
    shards: 4
`, members[0], strings.Join(minions, ", "))
	path := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// storageReport runs `admin storage --json` on topo and returns its one cluster.
func storageReport(t *testing.T, ctx context.Context, topo string) clusterReport {
	t.Helper()
	out, errOut, err := runCmd(ctx, "admin", "storage", "--topology", topo, "--json")
	if err != nil {
		t.Fatalf("admin storage --json: %v\n%s", err, errOut)
	}
	var reps []clusterReport
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		t.Fatalf("admin storage --json: %v in %q", err, out)
	}
	if len(reps) != 1 {
		t.Fatalf("admin storage --json: got %d clusters, want 1: %s", len(reps), out)
	}
	return reps[0]
}

// roles returns the members' roles in order, e.g. "master,minion,minion".
func roles(r clusterReport) string {
	var s []string
	for _, m := range r.Members {
		s = append(s, m.Role)
	}
	return strings.Join(s, ",")
}

// execOn runs statements on the server at dsn.
func execOn(t *testing.T, ctx context.Context, dsn string, stmts ...string) {
	t.Helper()
	db, err := replication.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestAdminStorageAndPromote runs `admin storage` and `admin promote` on a real storage cluster
// of a master and two minions: a failover after the master is killed (the minion that received
// the most wins), then a switchover, then the old master's return (fenced, no master).
func TestAdminStorageAndPromote(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Errorf("close the replicated set: %v", err)
		}
	})
	addr := func(m int) string { return set.Instance(0, m).Addr() }
	topo := writeAdminTopology(t, []string{set.DSN(0, 0), set.DSN(0, 1), set.DSN(0, 2)})

	// One master, two minions replicating from it.
	r := storageReport(t, ctx, topo)
	if roles(r) != "master,minion,minion" || r.Master != addr(0) || r.Datastore != "trips" || r.Cluster != "c0" || len(r.Warnings) != 0 {
		t.Fatalf("admin storage: got %+v, want master %s then two minions, no warning", r, addr(0))
	}
	if fmt.Sprint(r.Partitions) != "[0 1]" {
		t.Errorf("admin storage: partitions %v, want [0 1]", r.Partitions)
	}
	for _, m := range r.Members[1:] {
		if m.MasterAddr != addr(0) || !m.IORunning || !m.SQLRunning || !m.ReadOnly || m.SecondsBehind < 0 {
			t.Errorf("admin storage: minion %+v, want read-only, replicating from %s with both threads running", m, addr(0))
		}
	}
	out, _, err := runCmd(ctx, "admin", "storage", "--topology", topo, "--datastore", "trips")
	for _, want := range []string{"trips/c0  partitions 0,1  master " + addr(0), "MEMBER", "ROLE", "REPLICATING", addr(1) + "  minion"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("admin storage: got %q, %v; want it to contain %q", out, err, want)
		}
	}

	// Minion 1 stops receiving; the master writes more, which only minion 2 receives.
	execOn(t, ctx, set.AdminDSN(0, 1), "STOP SLAVE IO_THREAD")
	execOn(t, ctx, set.AdminDSN(0, 0), "CREATE DATABASE admintest", "CREATE TABLE admintest.t (id INT PRIMARY KEY)",
		"INSERT INTO admintest.t VALUES (1), (2), (3)")
	before := storageReport(t, ctx, topo)
	db, err := replication.Open(set.AdminDSN(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	err = replication.WaitApplied(wctx, db, before.Members[0].GTIDPosition)
	wcancel()
	db.Close()
	if err != nil {
		t.Fatalf("minion 2: %v", err)
	}
	before = storageReport(t, ctx, topo)
	masterPos := replication.SeqNo(before.Members[0].GTIDPosition, 0)
	if got := replication.SeqNo(before.Members[2].GTIDReceived, 0); got != masterPos {
		t.Fatalf("minion 2 received %d, want the master's %d", got, masterPos)
	}
	if got := replication.SeqNo(before.Members[1].GTIDReceived, 0); got >= masterPos {
		t.Fatalf("minion 1 received %d, want less than the master's %d (its IO thread is stopped)", got, masterPos)
	}

	// Failover: the master dies; promote picks minion 2, repoints minion 1.
	if err := set.Instance(0, 0).Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, errOut, err := runCmd(ctx, "admin", "promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0", "--json")
	if err != nil {
		t.Fatalf("admin promote: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("admin promote (failover) took %v", time.Since(start))
	var pr promoteReport
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("admin promote --json: %v in %q", err, out)
	}
	if pr.NewMaster != addr(2) || pr.OldMasterReachable || !pr.CaughtUp || fmt.Sprint(pr.Repointed) != fmt.Sprint([]string{addr(1)}) {
		t.Errorf("admin promote: got %+v, want new master %s (it received the most), old master unreachable, caught up, %s repointed", pr, addr(2), addr(1))
	}
	if why := pr.Skipped[addr(0)]; !strings.HasPrefix(why, "unreachable") || len(pr.Skipped) != 1 {
		t.Errorf("admin promote: skipped %v, want only %s, unreachable", pr.Skipped, addr(0))
	}
	if got := replication.SeqNo(pr.Position, 0); got < masterPos {
		t.Errorf("admin promote: new master at %d, want at least the dead master's %d", got, masterPos)
	}

	// The new master; minion 1 replicates from it and catches up (its IO thread reconnects).
	var after clusterReport
	deadline := time.Now().Add(20 * time.Second)
	for {
		after = storageReport(t, ctx, topo)
		m1 := after.Members[1]
		if roles(after) == "unknown,minion,master" && after.Master == addr(2) && m1.MasterAddr == addr(2) && m1.IORunning && m1.SQLRunning &&
			replication.SeqNo(m1.GTIDPosition, 0) >= masterPos {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin storage after the failover: got %+v, want %s unknown (unreachable), %s a minion of %s caught up to %d, %s the master",
				after, addr(0), addr(1), addr(2), masterPos, addr(2))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if after.Members[0].Error == "" || !strings.Contains(strings.Join(after.Warnings, "\n"), addr(0)+" is unreachable") {
		t.Errorf("admin storage after the failover: the dead master %+v, warnings %q; want an error and a warning naming it", after.Members[0], after.Warnings)
	}

	// Switchover: the master is reachable, so it is fenced and becomes a minion of minion 1.
	out, errOut, err = runCmd(ctx, "admin", "promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0")
	if err != nil {
		t.Fatalf("admin promote (switchover): %v\n%s\n%s", err, out, errOut)
	}
	for _, want := range []string{"promoted " + addr(1) + " to master of storage cluster c0 of trips (switchover",
		"repointed   " + addr(2), "skipped     " + addr(0) + ": unreachable", "within their probe interval (500ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("admin promote (switchover): got %q, want it to contain %q", out, want)
		}
	}
	if !strings.Contains(errOut, "fencing the master") {
		t.Errorf("admin promote (switchover) log: got %q, want the step fencing the master", errOut)
	}

	// The old master returns fenced: read-only, replicating from nobody, no master.
	if err := set.Restart(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	r = storageReport(t, ctx, topo)
	m0 := r.Members[0]
	if roles(r) != "unknown,master,minion" || r.Master != addr(1) || !m0.ReadOnly || m0.Replicating || m0.Error != "" {
		t.Errorf("admin storage after the old master's return: got %+v, want %s fenced (read-only, not replicating), %s master", r, addr(0), addr(1))
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), addr(0)+" is read-only and replicates from nobody") {
		t.Errorf("admin storage: warnings %q, want one about the fenced %s", r.Warnings, addr(0))
	}
}

// TestAdminFlagErrors checks that bad flags fail before any connection, naming the flag.
func TestAdminFlagErrors(t *testing.T) {
	topo := writeAdminTopology(t, []string{"schemaless@tcp(127.0.0.1:1)/", "schemaless@tcp(127.0.0.1:3)/"})
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "none.yaml")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"storage"}, "--topology is required"},
		{[]string{"storage", "--topology", missing}, "--topology " + missing + ": topology: open"},
		{[]string{"storage", "--topology", topo, "--datastore", "users"}, `--datastore "users" is in mode raft`},
		{[]string{"storage", "--topology", topo, "--datastore", "rides"}, `--datastore "rides": no such datastore in ` + topo + " (it has: trips, users)"},
		{[]string{"promote", "--topology", topo, "--cluster", "c0"}, "--datastore is required"},
		{[]string{"promote", "--topology", topo, "--datastore", "rides", "--cluster", "c0"}, `--datastore "rides": no such datastore`},
		{[]string{"promote", "--topology", topo, "--datastore", "users", "--cluster", "c0"}, `--datastore "users" is in mode raft: storage clusters exist only in mode async`},
		{[]string{"promote", "--topology", topo, "--datastore", "trips"}, "--cluster is required"},
		{[]string{"promote", "--topology", topo, "--datastore", "trips", "--cluster", "c9"}, `--cluster "c9": datastore trips has no such storage cluster (it has: c0)`},
		{[]string{"promote", "--datastore", "trips", "--cluster", "c0"}, "--topology is required"},
		{[]string{"promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0", "--admin-user", ""}, "--admin-user must not be empty"},
	}
	for _, tt := range tests {
		_, _, err := runCmd(ctx, append([]string{"admin"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("admin %v: got error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
	// A topology whose members do not answer: the command succeeds and says so per member.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := storageReport(t, ctx, topo)
	if roles(r) != "unknown,unknown" || r.Members[0].Error == "" || !strings.Contains(strings.Join(r.Warnings, "\n"), "no master") {
		t.Errorf("admin storage with members down: got %+v, want both unknown with errors and a no-master warning", r)
	}
	if _, _, err := runCmd(ctx, "admin", "promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0"); err == nil ||
		!strings.Contains(err.Error(), "no reachable minion") {
		t.Errorf("admin promote with members down: got %v, want the error no reachable minion", err)
	}
}

func TestWithUser(t *testing.T) {
	tests := []struct {
		dsn, user, password string
		set                 bool
		want                string
	}{
		{"schemaless@tcp(10.0.0.1:3306)/", "root", "", false, "root@tcp(10.0.0.1:3306)/"},
		{"schemaless:pw@tcp(10.0.0.1:3306)/?timeout=3s", "root", "", false, "root:pw@tcp(10.0.0.1:3306)/?timeout=3s"},
		{"schemaless:pw@tcp(10.0.0.1:3306)/", "admin", "", true, "admin@tcp(10.0.0.1:3306)/"},
		{"schemaless@tcp(10.0.0.1:3306)/sl", "admin", "s3cret", true, "admin:s3cret@tcp(10.0.0.1:3306)/sl"},
	}
	for _, tt := range tests {
		got, err := withUser(tt.dsn, tt.user, tt.password, tt.set)
		if err != nil || got != tt.want {
			t.Errorf("withUser(%q, %q, %q, %t): got %q, %v; want %q", tt.dsn, tt.user, tt.password, tt.set, got, err, tt.want)
		}
	}
	if _, err := withUser("not a dsn", "root", "", false); err == nil {
		t.Errorf("withUser of a bad DSN: got nil, want an error")
	}
}
