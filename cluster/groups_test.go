package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// A group's coordinator state is replicated like cells: every replica holds the same state, it
// survives the coordinator leader's crash and a restart of every node, and commands forwarded
// from any node reach the coordinator's leader.
func TestGroupStateReplicated(t *testing.T) {
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.MySQL, clustertest.Async} {
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
		if err != nil {
			t.Fatalf("%s through node %d: %v", cmd.Op, node, err)
		}
		return res
	}
	// Two workers join through different nodes; the second takes half the shards once the
	// first releases them.
	a := apply(0, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: time.Minute})
	if len(a.Assigned) != 16 {
		t.Fatalf("first member: got %d shards, want 16", len(a.Assigned))
	}
	apply(1, consumer.Command{Op: consumer.OpHeartbeat, Worker: "b", SessionTimeout: time.Minute})
	a = apply(2, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: time.Minute})
	if len(a.Revoke) != 8 {
		t.Fatalf("after b joined: a got %d shards to revoke, want 8", len(a.Revoke))
	}
	var commits []consumer.Offset
	for _, l := range a.Assigned {
		commits = append(commits, consumer.Offset{Shard: l.Shard, Epoch: l.Epoch, Offset: int64(100 + l.Shard)})
	}
	apply(0, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: time.Minute, Released: a.Revoke, Commits: commits})
	b := apply(1, consumer.Command{Op: consumer.OpHeartbeat, Worker: "b", SessionTimeout: time.Minute})
	if len(b.Assigned) != 8 {
		t.Fatalf("b after a released: got %d shards, want 8", len(b.Assigned))
	}
	// A refused command is an error value, the same everywhere, and changes nothing.
	if _, err := c.Node(1).GroupApply(ctx, ds, group, consumer.Command{Op: consumer.OpCommit, Worker: "a", Commits: []consumer.Offset{{Shard: 99}}}); !errors.Is(err, consumer.ErrBadCommand) {
		t.Fatalf("commit of shard 99: got %v, want ErrBadCommand", err)
	}
	want, err := c.Node(0).GroupStatus(ctx, ds, group, cluster.Strong)
	if err != nil {
		t.Fatal(err)
	}
	// Every replica holds the same state (stale reads of each node's own replica).
	sameEverywhere := func(when string) {
		t.Helper()
		waitUntil(t, 30*time.Second, "replicas to agree "+when, func() bool {
			for i := range c.Topology.Nodes {
				got, err := c.Node(i).GroupStatus(ctx, ds, group, cluster.Stale)
				if err != nil || !sameLeases(got, want) {
					return false
				}
			}
			return true
		})
	}
	sameEverywhere("after the commands")
	// The coordinator's leader crashes; the state is on the others.
	leader := c.LeaderOf(coord)
	c.StopNode(leader)
	other := (leader + 1) % 3
	got, err := c.Node(other).GroupStatus(ctx, ds, group, cluster.Strong)
	if err != nil || !sameLeases(got, want) {
		t.Fatalf("after the leader's crash: got %+v, %v, want %+v", got.Leases, err, want.Leases)
	}
	c.StartNode(leader)
	// Every node restarts: the state is durable in SQL.
	c.StopAll()
	for i := range c.Topology.Nodes {
		c.StartNode(i)
	}
	c.WaitReady()
	got, err = c.Node(2).GroupStatus(ctx, ds, group, cluster.Strong)
	if err != nil || !sameLeases(got, want) {
		t.Fatalf("after restarting every node: got %+v, %v, want %+v", got, err, want)
	}
	sameEverywhere("after the restart")
	// Commits keep working, and fencing still holds: a's old epoch of a shard b now owns.
	res := apply(0, consumer.Command{Op: consumer.OpCommit, Worker: "a", Commits: []consumer.Offset{{Shard: b.Assigned[0].Shard, Epoch: b.Assigned[0].Epoch - 1, Offset: 5}}})
	if len(res.Accepted) != 1 || res.Accepted[0] {
		t.Fatalf("a commit of b's shard at an old epoch: got %v, want refused", res.Accepted)
	}
	names, err := c.Node(1).Groups(ctx, ds, cluster.Stale)
	if err != nil || !reflect.DeepEqual(names, []string{group}) {
		t.Fatalf("Groups: got %v, %v, want [%s]", names, err, group)
	}
	if _, err := c.Node(1).GroupStatus(ctx, ds, "nobody", cluster.Strong); !errors.Is(err, cluster.ErrUnknownGroup) {
		t.Fatalf("status of a group never joined: got %v, want ErrUnknownGroup", err)
	}
}

// sameLeases compares the replicated parts of two statuses (members' expiry and shard counts,
// leases and offsets).
func sameLeases(a, b consumer.Status) bool {
	ja, _ := json.Marshal([]any{a.Leases, a.Members, a.Generation})
	jb, _ := json.Marshal([]any{b.Leases, b.Members, b.Generation})
	return string(ja) == string(jb)
}
