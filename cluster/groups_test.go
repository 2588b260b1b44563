package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A group's coordinator state is replicated like cells: every replica holds the same state, it
// survives the coordinator leader's crash and a restart of every node, and commands forwarded
// from any node reach the coordinator's leader.
func TestGroupStateReplicated(t *testing.T) {
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) { testGroupStateReplicated(t, engine) })
	}
}

func testGroupStateReplicated(t *testing.T, engine clustertest.Engine) {
	c := clustertest.Start(t, clustertest.Options{Engine: engine})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const group = "billing"
	spec, _ := c.Node(0).Datastore(ds)
	coord := partitionIndex(spec, cluster.CoordinatorShard(group, spec.Shards))
	apply := func(node int, cmd consumer.Command) consumer.Result {
		t.Helper()
		res, err := c.Node(node).GroupApply(ctx, ds, group, cmd)
		require.NoError(t, err, "%s through node %d", cmd.Op, node)
		return res
	}
	// Two workers join through different nodes; the second takes half the shards once the
	// first releases them.
	a := apply(0, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: time.Minute})
	require.Len(t, a.Assigned, 16, "first member: shards")
	apply(1, consumer.Command{Op: consumer.OpHeartbeat, Worker: "b", SessionTimeout: time.Minute})
	a = apply(2, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: time.Minute})
	require.Len(t, a.Revoke, 8, "after b joined: a's shards to revoke")
	var commits []consumer.Offset
	for _, l := range a.Assigned {
		commits = append(commits, consumer.Offset{Shard: l.Shard, Epoch: l.Epoch, Offset: int64(100 + l.Shard)})
	}
	apply(0, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: time.Minute, Released: a.Revoke, Commits: commits})
	b := apply(1, consumer.Command{Op: consumer.OpHeartbeat, Worker: "b", SessionTimeout: time.Minute})
	require.Len(t, b.Assigned, 8, "b after a released: shards")
	// A refused command is an error value, the same everywhere, and changes nothing.
	_, err := c.Node(1).GroupApply(ctx, ds, group, consumer.Command{Op: consumer.OpCommit, Worker: "a", Commits: []consumer.Offset{{Shard: 99}}})
	require.ErrorIs(t, err, consumer.ErrBadCommand, "commit of shard 99")
	want, err := c.Node(0).GroupStatus(ctx, ds, group, cluster.Strong)
	require.NoError(t, err)
	// Every replica holds the same state (stale reads of each node's own replica).
	sameEverywhere := func(when string) {
		t.Helper()
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			for i := range c.Topology.Nodes {
				got, err := c.Node(i).GroupStatus(ctx, ds, group, cluster.Stale)
				require.NoError(ct, err, "stale GroupStatus through node %d", i)
				assertSameLeases(ct, want, got, "group state of node %d's replica", i)
			}
		}, 30*time.Second, 10*time.Millisecond, "replicas agree %s", when)
	}
	sameEverywhere("after the commands")
	// The coordinator's leader crashes; the state is on the others.
	leader := c.LeaderOf(coord)
	c.StopNode(leader)
	other := (leader + 1) % 3
	got, err := c.Node(other).GroupStatus(ctx, ds, group, cluster.Strong)
	require.NoError(t, err, "after the leader's crash")
	requireSameLeases(t, want, got, "after the leader's crash")
	c.StartNode(leader)
	// Every node restarts: the state is durable in SQL.
	c.StopAll()
	for i := range c.Topology.Nodes {
		c.StartNode(i)
	}
	c.WaitReady()
	got, err = c.Node(2).GroupStatus(ctx, ds, group, cluster.Strong)
	require.NoError(t, err, "after restarting every node")
	requireSameLeases(t, want, got, "after restarting every node")
	sameEverywhere("after the restart")
	// Commits keep working, and fencing still holds: a's old epoch of a shard b now owns.
	res := apply(0, consumer.Command{Op: consumer.OpCommit, Worker: "a", Commits: []consumer.Offset{{Shard: b.Assigned[0].Shard, Epoch: b.Assigned[0].Epoch - 1, Offset: 5}}})
	require.Equal(t, []bool{false}, res.Accepted, "a commit of b's shard at an old epoch: want refused")
	names, err := c.Node(1).Groups(ctx, ds, cluster.Stale)
	require.NoError(t, err, "Groups")
	require.Equal(t, []string{group}, names, "Groups")
	_, err = c.Node(1).GroupStatus(ctx, ds, "nobody", cluster.Strong)
	require.ErrorIs(t, err, cluster.ErrUnknownGroup, "status of a group never joined")
}

// leasesJSON returns the replicated parts of a group's status (members' expiry and shard
// counts, leases and offsets) as JSON.
func leasesJSON(s consumer.Status) string {
	j, _ := json.Marshal([]any{s.Leases, s.Members, s.Generation})
	return string(j)
}

// assertSameLeases asserts that got holds the replicated parts of want (leasesJSON).
func assertSameLeases(t assert.TestingT, want, got consumer.Status, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return assert.Equal(t, leasesJSON(want), leasesJSON(got), msgAndArgs...)
}

// requireSameLeases is assertSameLeases that stops the test on a difference.
func requireSameLeases(t *testing.T, want, got consumer.Status, msgAndArgs ...any) {
	t.Helper()
	if !assertSameLeases(t, want, got, msgAndArgs...) {
		t.FailNow()
	}
}
