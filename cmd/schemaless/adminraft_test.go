package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// adminPartitions runs `admin partitions --json` and returns partition pid of trips.
func adminPartitions(t *testing.T, ctx context.Context, eps string, pid int) wire.PartitionReport {
	t.Helper()
	out, errOut, err := runCmd(ctx, "admin", "partitions", "--endpoints", eps, "--datastore", "trips", "--json")
	require.NoError(t, err, "admin partitions --json: %s", errOut)
	var pr wire.PartitionsResponse
	require.NoError(t, json.Unmarshal([]byte(out), &pr), "admin partitions --json: %q", out)
	i := slices.IndexFunc(pr.Partitions, func(p wire.PartitionReport) bool { return p.Partition == pid })
	require.GreaterOrEqual(t, i, 0, "admin partitions: no partition %d in %s", pid, out)
	return pr.Partitions[i]
}

// replicaOf returns node's replica in p.
func replicaOf(p wire.PartitionReport, node string) (wire.ReplicaLag, bool) {
	i := slices.IndexFunc(p.Replicas, func(r wire.ReplicaLag) bool { return r.Node == node })
	if i < 0 {
		return wire.ReplicaLag{}, false
	}
	return p.Replicas[i], true
}

// hasLine reports whether out has a line starting with these fields (separated by any spaces).
func hasLine(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= len(fields) && slices.Equal(f[:len(fields)], fields) {
			return true
		}
	}
	return false
}

// TestAdminRaftCommands drives the membership commands against a 3-node cluster with 2
// partitions: nodes, partitions, rebalance --dry-run, transfer-leader, remove-voter, drain
// --dry-run, move-replica, add-voter, and their errors.
func TestAdminRaftCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Partitions: 2})
	// A dead endpoint first: the commands pass over it.
	dead := deadEndpoint(t)
	eps := strings.Join(append([]string{dead}, c.URLs()...), ",")
	cl := testClient(t, c.URLs())
	for i := 0; i < 50; i++ {
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("adminraft", i)))
		_, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
		require.NoError(t, err)
	}
	run := func(args ...string) string {
		t.Helper()
		start := time.Now()
		out, errOut, err := runCmd(ctx, append(append([]string{"admin"}, args...), "--endpoints", eps)...)
		require.NoError(t, err, "admin %s\n%s%s", strings.Join(args, " "), out, errOut)
		t.Logf("$ schemaless admin %s  (%s)\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out)
		return out
	}

	// nodes: 3, in a table and as JSON.
	out := run("nodes")
	for _, id := range []string{"n1", "n2", "n3"} {
		assert.Contains(t, out, "\n"+id+" ", "admin nodes: a line for %s", id)
	}
	assert.Contains(t, out, "ID  STATE", "admin nodes: a table with ID, STATE, ..., REPLICAS, LEADERS")
	assert.Contains(t, out, "REPLICAS  LEADERS", "admin nodes: a table with ID, STATE, ..., REPLICAS, LEADERS")
	var nr wire.NodesResponse
	require.NoError(t, json.Unmarshal([]byte(run("nodes", "--json")), &nr), "admin nodes --json")
	require.Len(t, nr.Nodes, 3, "admin nodes --json: %+v", nr)
	require.NotEmpty(t, nr.Self, "admin nodes --json: self")

	// partitions: 2, each with a leader and 3 voters that are close behind.
	out = run("partitions")
	assert.Equal(t, 2, strings.Count(out, "trips/"), "admin partitions: trips/0 and trips/1 in\n%s", out)
	assert.Equal(t, 6, strings.Count(out, " voter "), "admin partitions: 3 voters each in\n%s", out)
	for pid := 0; pid < 2; pid++ {
		p := adminPartitions(t, ctx, eps, pid)
		require.NotEmpty(t, p.Leader, "partition %d: a leader", pid)
		require.Len(t, p.Voters(), 3, "partition %d: voters", pid)
		require.Len(t, p.Replicas, 3, "partition %d: replicas", pid)
		for _, r := range p.Replicas {
			assert.True(t, r.Reachable && r.Lag <= 5 && r.State != "", "partition %d, replica %+v: want reachable, a state, and a lag of at most 5", pid, r)
		}
	}

	// rebalance --dry-run on a balanced cluster: no moves.
	out = run("rebalance", "--dry-run", "--json")
	var rep wire.RebalanceReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "admin rebalance --dry-run --json")
	require.True(t, rep.DryRun, "admin rebalance --dry-run: %+v", rep)
	require.Empty(t, rep.Moves, "admin rebalance --dry-run: %+v", rep)
	require.Len(t, rep.Nodes, 3, "admin rebalance --dry-run: %+v", rep)
	out = run("rebalance", "--dry-run")
	assert.Contains(t, out, "0 replica moves")
	assert.True(t, hasLine(out, "n1", "2", "->", "2"), "admin rebalance --dry-run: got\n%s\nwant n1 at 2 -> 2 replicas", out)

	// transfer-leader of trips/0 to a named non-leader.
	p0 := adminPartitions(t, ctx, eps, 0)
	target := "n2"
	if p0.Leader == "n2" {
		target = "n3"
	}
	other := "n3" // the follower to remove: neither n1 nor target
	if target == "n3" {
		other = "n2"
	}
	assert.Contains(t, run("transfer-leader", "--datastore", "trips", "--partition", "0", "--to", target), "trips/0 is led by "+target)
	require.Equal(t, target, adminPartitions(t, ctx, eps, 0).Leader, "after transfer-leader --to %s", target)

	// remove-voter of a follower: 2 voters left.
	assert.Contains(t, run("remove-voter", "--datastore", "trips", "--partition", "0", "--node", other), "no longer a replica")
	p0 = adminPartitions(t, ctx, eps, 0)
	require.Len(t, p0.Voters(), 2, "after remove-voter %s", other)
	require.NotContains(t, p0.Voters(), other, "after remove-voter %s", other)
	run("partitions", "--datastore", "trips")

	// add-learner, then remove-learner, of that node.
	assert.Contains(t, run("add-learner", "--datastore", "trips", "--partition", "0", "--node", other), other+" is a learner of trips/0")
	lr, ok := replicaOf(adminPartitions(t, ctx, eps, 0), other)
	require.True(t, ok, "after add-learner %s: its replica", other)
	assert.Equal(t, wire.SuffrageNonvoter, lr.Suffrage, "after add-learner %s", other)
	assert.Len(t, adminPartitions(t, ctx, eps, 0).Voters(), 2, "a learner is no voter")
	require.Eventually(t, func() bool { // once the leader's catalog has the record
		return hasLine(run("partitions", "--datastore", "trips"), other, "-", "learner")
	}, time.Minute, 100*time.Millisecond, "admin partitions: %s shown as a learner", other)
	assert.Contains(t, run("remove-learner", "--datastore", "trips", "--partition", "0", "--node", other), other+" is no longer a learner of trips/0")
	_, ok = replicaOf(adminPartitions(t, ctx, eps, 0), other)
	require.False(t, ok, "after remove-learner %s", other)

	// drain --dry-run of n1: its trips/0 replica can go to the node just removed; its trips/1
	// replica has nowhere to go (every node holds one).
	out = run("drain", "--node", "n1", "--dry-run", "--json")
	rep = wire.RebalanceReport{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "admin drain --json: %q", out)
	want := wire.Move{Datastore: "trips", Partition: 0, From: "n1", To: other}
	require.True(t, rep.DryRun, "admin drain n1 --dry-run: %+v", rep)
	require.Equal(t, []wire.Move{want}, rep.Moves, "admin drain n1 --dry-run: the move of trips/0 off n1 only")
	require.Equal(t, 1, rep.ReplicasAfter["n1"], "admin drain n1 --dry-run: n1 left with 1 replica")
	require.Equal(t, 0, rep.LeadersAfter["n1"], "admin drain n1 --dry-run: n1 left with no leadership")
	for _, tr := range rep.Transfers {
		assert.NotEqual(t, "n1", tr.To, "admin drain n1 --dry-run: transfer %+v to the drained node", tr)
	}
	out = run("drain", "--node", "n1", "--dry-run")
	assert.True(t, hasLine(out, "move", "trips/0", "n1", "->", other), "admin drain --dry-run: got\n%s\nwant the move of trips/0 off n1", out)
	assert.Contains(t, out, "n1 still holds 1 replica", "admin drain --dry-run: a note about the replica left")
	require.Len(t, adminPartitions(t, ctx, eps, 0).Voters(), 2, "after drain --dry-run: a dry run changes nothing")

	// move-replica n1 -> other, then add-voter n1 back: 3 voters, n1 caught up.
	assert.Contains(t, run("move-replica", "--datastore", "trips", "--partition", "0", "--from", "n1", "--to", other), "moved trips/0 from n1 to "+other)
	v := adminPartitions(t, ctx, eps, 0).Voters()
	require.ElementsMatch(t, []string{other, target}, v, "after move-replica n1 -> %s", other)
	assert.Contains(t, run("add-voter", "--datastore", "trips", "--partition", "0", "--node", "n1"), "n1 is a voter of trips/0")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		p := adminPartitions(t, ctx, eps, 0)
		r, ok := replicaOf(p, "n1")
		assert.Len(ct, p.Voters(), 3)
		assert.True(ct, ok && r.Suffrage == wire.SuffrageVoter && r.Reachable && r.Lag == 0, "n1's replica %+v", r)
	}, 10*time.Second, 200*time.Millisecond, "after add-voter n1: want 3 voters and n1 caught up (lag 0)")
	run("partitions", "--datastore", "trips")
	run("partitions", "--datastore", "trips", "--json")
	var cfg wire.PartitionConfig // adding a voter already there changes nothing
	require.NoError(t, json.Unmarshal([]byte(run("add-voter", "--datastore", "trips", "--partition", "0", "--node", "n1", "--json")), &cfg))
	assert.Len(t, cfg.Voters(), 3, "admin add-voter --json of a voter: the configuration with 3 voters")
	assert.NotEmpty(t, cfg.Leader, "admin add-voter --json of a voter: a leader")
	got, err := cl.GetCellLatest(ctx, uuid.NewSHA1(uuid.NameSpaceURL, []byte("adminraft7")), "BASE")
	require.NoError(t, err, "a cell after the moves")
	assert.Equal(t, `{"i":7}`, string(got.Body), "a cell after the moves")

	// Errors: the API's message and field, a non-zero exit (an error from the command).
	checkAdminErrors(ctx, t, eps, []adminErrorCase{
		{[]string{"add-voter", "--datastore", "trips", "--partition", "0", "--node", "n9"}, []string{"404", `"n9"`, `field "node"`}},
		{[]string{"drain", "--node", "n9", "--dry-run"}, []string{"404", `"n9"`, `field "node"`}},
		{[]string{"transfer-leader", "--datastore", "trips", "--partition", "0", "--to", "n9"}, []string{"409", "n9 is not a voter"}},
		{[]string{"add-voter", "--datastore", "trips", "--partition", "-1", "--node", "n2"}, []string{"400", `"-1" is not a partition number`, `field "partition"`}},
		{[]string{"remove-voter", "--datastore", "trips", "--partition", "99", "--node", "n2"}, []string{"400", "no partition 99", `(field "`}},
		{[]string{"partitions", "--datastore", "nope"}, []string{"404", `"nope"`}},
		{[]string{"add-voter", "--datastore", "trips", "--node", "n2"}, []string{"--partition is required"}},
		{[]string{"move-replica", "--datastore", "trips", "--partition", "0", "--from", "n2"}, []string{"--from and --to are required"}},
	})
	_, _, err = runCmd(ctx, "admin", "nodes", "--endpoints", dead, "--timeout", "5s")
	assert.ErrorContains(t, err, "no endpoint answered", "admin nodes with no endpoint up")
}

// TestAdminAnswerJSON: --json prints an answer as the node wrote it, indented: no HTML
// escaping, null and empty lists as they came.
func TestAdminAnswerJSON(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeAnswerJSON(&b, wire.RebalanceReport{Nodes: []string{"n<1>"}, ReplicasBefore: map[string]int{}, DurationSeconds: 0.5}))
	assert.Equal(t, `{
  "nodes": [
    "n<1>"
  ],
  "replicas_before": {},
  "replicas_after": null,
  "leaders_before": null,
  "leaders_after": null,
  "moves": null,
  "transfers": null,
  "duration_seconds": 0.5
}

`, b.String())
}

// adminRunner returns a function that runs "schemaless admin ARGS --endpoints eps", fails the
// test on an error, logs the output and returns it.
func adminRunner(ctx context.Context, t *testing.T, eps string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, errOut, err := runCmd(ctx, append(append([]string{"admin"}, args...), "--endpoints", eps)...)
		require.NoError(t, err, "admin %s\n%s%s", strings.Join(args, " "), out, errOut)
		t.Logf("$ schemaless admin %s\n%s", strings.Join(args, " "), out)
		return out
	}
}

// adminErrorCase is an admin command that must fail (args, without --endpoints), and what its
// error must say: each of want.
type adminErrorCase struct {
	args []string
	want []string
}

// checkAdminErrors runs each case's command with --endpoints eps and checks its error.
func checkAdminErrors(ctx context.Context, t *testing.T, eps string, cases []adminErrorCase) {
	t.Helper()
	for _, tc := range cases {
		_, _, err := runCmd(ctx, append(append([]string{"admin"}, tc.args...), "--endpoints", eps)...)
		t.Logf("$ schemaless admin %s\nerror: %v", strings.Join(tc.args, " "), err)
		if !assert.Error(t, err, "admin %s: want %q", strings.Join(tc.args, " "), tc.want) {
			continue
		}
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, "admin %s", strings.Join(tc.args, " "))
		}
	}
}

// deadEndpoint returns the URL of a listener that was closed: connections to it are refused.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	return "http://" + ln.Addr().String()
}
