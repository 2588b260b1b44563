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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644), "write the topology")
	return path
}

// storageReport runs `admin storage --json` on topo and returns its one cluster.
func storageReport(t *testing.T, ctx context.Context, topo string) replication.ClusterReport {
	t.Helper()
	r, err := storageReportErr(ctx, topo)
	require.NoError(t, err)
	return r
}

// storageReportErr is storageReport returning its failure: the command's error, an answer
// that is not JSON, or not one cluster.
func storageReportErr(ctx context.Context, topo string) (replication.ClusterReport, error) {
	out, errOut, err := runCmd(ctx, "admin", "storage", "--topology", topo, "--json")
	if err != nil {
		return replication.ClusterReport{}, fmt.Errorf("admin storage --json: %w\n%s", err, errOut)
	}
	var reps []replication.ClusterReport
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		return replication.ClusterReport{}, fmt.Errorf("admin storage --json: %w in %q", err, out)
	}
	if len(reps) != 1 {
		return replication.ClusterReport{}, fmt.Errorf("admin storage --json: got %d clusters, want 1: %s", len(reps), out)
	}
	return reps[0], nil
}

// roles returns the members' roles in order, e.g. "master,minion,minion".
func roles(r replication.ClusterReport) string {
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
	require.NoError(t, err, "open %s", dsn)
	defer db.Close()
	for _, s := range stmts {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err, "%s", s)
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
	require.NoError(t, err, "start a master and two minions")
	t.Cleanup(func() { assert.NoError(t, set.Close(), "close the replicated set") })
	addr := func(m int) string { return set.Instance(0, m).Addr() }
	topo := writeAdminTopology(t, []string{set.DSN(0, 0), set.DSN(0, 1), set.DSN(0, 2)})

	// One master, two minions replicating from it.
	r := storageReport(t, ctx, topo)
	require.Equal(t, "master,minion,minion", roles(r), "admin storage: roles in %+v", r)
	require.Equal(t, addr(0), r.Master, "admin storage: master in %+v", r)
	require.Equal(t, "trips", r.Datastore, "admin storage: datastore in %+v", r)
	require.Equal(t, "c0", r.Cluster, "admin storage: cluster in %+v", r)
	require.Empty(t, r.Warnings, "admin storage: warnings in %+v", r)
	assert.Equal(t, "[0 1]", fmt.Sprint(r.Partitions), "admin storage: partitions")
	for _, m := range r.Members[1:] {
		assert.True(t, m.MasterAddr == addr(0) && m.IORunning && m.SQLRunning && m.ReadOnly && m.SecondsBehind >= 0,
			"admin storage: minion %+v, want read-only, replicating from %s with both threads running", m, addr(0))
	}
	out, _, err := runCmd(ctx, "admin", "storage", "--topology", topo, "--datastore", "trips")
	assert.NoError(t, err, "admin storage")
	for _, want := range []string{"trips/c0  partitions 0,1  master " + addr(0), "MEMBER", "ROLE", "REPLICATING", addr(1) + "  minion"} {
		assert.Contains(t, out, want, "admin storage output")
	}

	// Minion 1 stops receiving; the master writes more, which only minion 2 receives.
	execOn(t, ctx, set.AdminDSN(0, 1), "STOP SLAVE IO_THREAD")
	execOn(t, ctx, set.AdminDSN(0, 0), "CREATE DATABASE admintest", "CREATE TABLE admintest.t (id INT PRIMARY KEY)",
		"INSERT INTO admintest.t VALUES (1), (2), (3)")
	before := storageReport(t, ctx, topo)
	db, err := replication.Open(set.AdminDSN(0, 2))
	require.NoError(t, err, "open minion 2")
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	err = replication.WaitApplied(wctx, db, before.Members[0].GTIDPosition)
	wcancel()
	db.Close()
	require.NoError(t, err, "minion 2: wait until it applied the master's position")
	before = storageReport(t, ctx, topo)
	masterPos := replication.SeqNo(before.Members[0].GTIDPosition, 0)
	require.Equal(t, masterPos, replication.SeqNo(before.Members[2].GTIDReceived, 0), "minion 2 received: want the master's position")
	require.Less(t, replication.SeqNo(before.Members[1].GTIDReceived, 0), masterPos,
		"minion 1 received: want less than the master's position (its IO thread is stopped)")

	// Failover: the master dies; promote picks minion 2, repoints minion 1.
	require.NoError(t, set.Instance(0, 0).Kill(), "kill the master")
	start := time.Now()
	out, errOut, err := runCmd(ctx, "admin", "promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0", "--json")
	require.NoError(t, err, "admin promote:\n%s\n%s", out, errOut)
	t.Logf("admin promote (failover) took %v", time.Since(start))
	var pr replication.PromoteReport
	require.NoError(t, json.Unmarshal([]byte(out), &pr), "admin promote --json: %q", out)
	assert.True(t, pr.NewMaster == addr(2) && !pr.OldMasterReachable && pr.CaughtUp && fmt.Sprint(pr.Repointed) == fmt.Sprint([]string{addr(1)}),
		"admin promote: got %+v, want new master %s (it received the most), old master unreachable, caught up, %s repointed", pr, addr(2), addr(1))
	assert.True(t, strings.HasPrefix(pr.Skipped[addr(0)], "unreachable") && len(pr.Skipped) == 1,
		"admin promote: skipped %v, want only %s, unreachable", pr.Skipped, addr(0))
	assert.GreaterOrEqual(t, replication.SeqNo(pr.Position, 0), masterPos, "admin promote: new master's position, want at least the dead master's")

	// The new master; minion 1 replicates from it and catches up (its IO thread reconnects).
	var after replication.ClusterReport
	var reportErr error // a failing command fails the test at once, as outside the wait
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if after, reportErr = storageReportErr(ctx, topo); reportErr != nil {
			return
		}
		m1 := after.Members[1]
		assert.True(c, roles(after) == "unknown,minion,master" && after.Master == addr(2) && m1.MasterAddr == addr(2) && m1.IORunning && m1.SQLRunning &&
			replication.SeqNo(m1.GTIDPosition, 0) >= masterPos,
			"admin storage after the failover: got %+v, want %s unknown (unreachable), %s a minion of %s caught up to %d, %s the master",
			after, addr(0), addr(1), addr(2), masterPos, addr(2))
	}, 20*time.Second, 200*time.Millisecond, "minion 1 replicating from the new master %s, caught up", addr(2))
	require.NoError(t, reportErr)
	assert.NotEmpty(t, after.Members[0].Error, "admin storage after the failover: the dead master %+v, want an error", after.Members[0])
	assert.Contains(t, strings.Join(after.Warnings, "\n"), addr(0)+" is unreachable", "admin storage after the failover: want a warning naming the dead master")

	// Switchover: the master is reachable, so it is fenced and becomes a minion of minion 1.
	out, errOut, err = runCmd(ctx, "admin", "promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0")
	require.NoError(t, err, "admin promote (switchover):\n%s\n%s", out, errOut)
	for _, want := range []string{"promoted " + addr(1) + " to master of storage cluster c0 of trips (switchover",
		"repointed   " + addr(2), "skipped     " + addr(0) + ": unreachable", "within their probe interval (500ms)"} {
		assert.Contains(t, out, want, "admin promote (switchover) output")
	}
	assert.Contains(t, errOut, "fencing the master", "admin promote (switchover) log: want the step fencing the master")

	// The old master returns fenced: read-only, replicating from nobody, no master.
	require.NoError(t, set.Restart(ctx, 0, 0), "restart the old master")
	r = storageReport(t, ctx, topo)
	m0 := r.Members[0]
	assert.True(t, roles(r) == "unknown,master,minion" && r.Master == addr(1) && m0.ReadOnly && !m0.Replicating && m0.Error == "",
		"admin storage after the old master's return: got %+v, want %s fenced (read-only, not replicating), %s master", r, addr(0), addr(1))
	assert.Contains(t, strings.Join(r.Warnings, "\n"), addr(0)+" is read-only and replicates from nobody", "admin storage: want a warning about the fenced %s", addr(0))
}

// TestAdminFlagErrors checks that bad flags fail before any connection, naming the flag.
func TestAdminFlagErrors(t *testing.T) {
	t.Parallel()
	topo := writeAdminTopology(t, []string{"schemaless@tcp(127.0.0.1:1)/", "schemaless@tcp(127.0.0.1:3)/"})
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "none.yaml")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"storage"}, "--topology is required"},
		{[]string{"storage", "--topology", missing}, "--topology " + missing + ": topology: open"},
		{[]string{"storage", "--topology", topo, "--datastore", "users"}, `--datastore "users": topology: not an async datastore: users is in mode raft`},
		{[]string{"storage", "--topology", topo, "--datastore", "rides"}, `--datastore "rides": topology: no such datastore "rides" (it has: trips, users)`},
		{[]string{"promote", "--topology", topo, "--cluster", "c0"}, "--datastore is required"},
		{[]string{"promote", "--topology", topo, "--datastore", "rides", "--cluster", "c0"}, `--datastore "rides": topology: no such datastore`},
		{[]string{"promote", "--topology", topo, "--datastore", "users", "--cluster", "c0"}, `--datastore "users": topology: not an async datastore: users is in mode raft, and storage clusters exist only in mode async`},
		{[]string{"promote", "--topology", topo, "--datastore", "trips"}, "--cluster is required"},
		{[]string{"promote", "--topology", topo, "--datastore", "trips", "--cluster", "c9"}, `--cluster "c9": topology: no such storage cluster "c9" in datastore trips (it has: c0)`},
		{[]string{"promote", "--datastore", "trips", "--cluster", "c0"}, "--topology is required"},
		{[]string{"promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0", "--admin-user", ""}, "--admin-user must not be empty"},
	}
	for _, tt := range tests {
		_, _, err := runCmd(ctx, append([]string{"admin"}, tt.args...)...)
		assert.ErrorContains(t, err, tt.want, "admin %v", tt.args)
	}
	// A topology whose members do not answer: the command succeeds and says so per member.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := storageReport(t, ctx, topo)
	assert.True(t, roles(r) == "unknown,unknown" && r.Members[0].Error != "" && strings.Contains(strings.Join(r.Warnings, "\n"), "no master"),
		"admin storage with members down: got %+v, want both unknown with errors and a no-master warning", r)
	_, _, err := runCmd(ctx, "admin", "promote", "--topology", topo, "--datastore", "trips", "--cluster", "c0")
	assert.ErrorContains(t, err, "no reachable minion", "admin promote with members down")
}
