package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Idle partitions of real nodes quiesce (serve --quiesce-after): their raft groups stop
// heartbeating, so only gossip can tell their followers that a leader died. After a kill -9 of
// the node leading partitions, every partition must take writes again: the followers, woken by
// gossip declaring the node dead, elect new leaders. Without the wake they would keep the dead
// leader until a request came (a quiesced follower starts no election and refuses votes while
// it knows a leader): the test waits for the new leaders before it sends any.
func TestQuiescedPartitionsFailOver(t *testing.T) {
	const (
		shards     = 16
		partitions = 4
	)
	ctx := context.Background()
	c, cl := startQuiescing(t, "127.0.0.82", 27670, 27770, shards, partitions)

	// A row key in each partition (shards split evenly: partition p holds shards p*4 to p*4+3).
	rows := map[int]uuid.UUID{}
	for len(rows) < partitions {
		k := uuid.New()
		if p := cells.ShardOf(k, shards) / (shards / partitions); rows[p] == uuid.Nil {
			rows[p] = k
		}
	}
	write := func(ref int64, timeout time.Duration) {
		t.Helper()
		for p := 0; p < partitions; p++ {
			wctx, cancel := context.WithTimeout(ctx, timeout)
			start := time.Now()
			_, err := cl.PutCell(wctx, rows[p], "BASE", ref, json.RawMessage(`{"n":1}`))
			cancel()
			require.NoError(t, err, "put ref %d in partition %d", ref, p)
			t.Logf("put ref %d in partition %d: %v", ref, p, time.Since(start).Round(time.Millisecond))
		}
	}
	write(1, 30*time.Second)

	awaitReplicas(t, c, 30*time.Second, "every replica quiesces within 30s once the writes stop",
		func(p wire.PartitionStatus) string {
			if !p.Quiesced {
				return "not quiesced (" + p.State + ")"
			}
			return ""
		})

	// Kill -9 the leader of partition 0 while everything is quiesced.
	var victim *Node
	for _, l := range c.Leaders(ctx) {
		if l.Datastore == "trips" && l.Partition == 0 {
			victim = c.Node(l.Leader)
		}
	}
	require.NotNil(t, victim, "the leader of trips/0")
	require.NoError(t, victim.Kill(), "kill -9 %s", victim.ID)
	killed := time.Now()

	// With no request at all, gossip alone gets every partition a new leader.
	awaitReplicas(t, c, 30*time.Second, "every partition elects a new leader within 30s of the kill, with no request sent",
		func(p wire.PartitionStatus) string {
			if p.Leader == "" || p.Leader == victim.ID {
				return fmt.Sprintf("follows %q", p.Leader)
			}
			return ""
		})
	t.Logf("every partition of the survivors follows a new leader %v after the kill of %s", time.Since(killed).Round(time.Millisecond), victim.ID)
	write(2, 30*time.Second)
	t.Logf("every partition took a write %v after the kill", time.Since(killed).Round(time.Millisecond))
}

// startQuiescing starts 3 real nodes from firstIP whose partitions quiesce after 1 s idle,
// serving datastore "trips" (raft, shards shards in partitions partitions), and returns them
// with a client of the datastore through every node. The cluster stops when the test ends.
func startQuiescing(t *testing.T, firstIP string, httpPort, raftPort, shards, partitions int) (*Cluster, *client.Client) {
	t.Helper()
	c, err := StartCluster(context.Background(), ClusterConfig{Binary: schemalessBinary(t), Dir: t.TempDir(), Nodes: 3,
		FirstIP: firstIP, HTTPPort: httpPort, RaftPort: raftPort,
		Datastores: []topology.DatastoreSpec{{Name: "trips", Mode: topology.ModeRaft, Shards: shards, PartitionCount: partitions}},
		ServeArgs:  []string{"--quiesce-after", "1s"}})
	require.NoError(t, err, "start the cluster")
	t.Cleanup(c.Stop)
	cfg := c.ClientConfig()
	for _, n := range c.Nodes {
		cfg.Endpoints = append(cfg.Endpoints, n.URL())
	}
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err, "client")
	return c, cl
}

// awaitReplicas waits up to timeout until, on every running node of c (not paused), every local replica
// passes check (an empty answer); otherwise it fails the test with what, naming the last
// replica that did not pass and why.
func awaitReplicas(t *testing.T, c *Cluster, timeout time.Duration, what string, check func(wire.PartitionStatus) string) {
	t.Helper()
	var last string
	pass := func() bool {
		for _, n := range c.Nodes {
			if !n.Running() || n.Paused() {
				continue
			}
			st, err := c.Status(context.Background(), n, 2*time.Second)
			if err != nil {
				last = n.ID + ": " + err.Error()
				return false
			}
			for _, d := range st.Datastores {
				for _, p := range d.Partitions {
					if why := check(p); p.Local && why != "" {
						last = fmt.Sprintf("%s: %s/%d %s", n.ID, d.Name, p.ID, why)
						return false
					}
				}
			}
		}
		return true
	}
	if !assert.Eventually(t, pass, timeout, 100*time.Millisecond) {
		require.FailNow(t, what, "%s", last)
	}
}

// A node paused and cut off while it leads quiesced partitions (SIGSTOP and iptables, past
// gossip's failure detection) comes back as a quiesced leader of an older term: the others elected new leaders, which
// quiesced without it, and nothing it hears tells it of the newer term. Gossip reporting it
// alive again wakes the leaders on the other nodes (cluster's wakeLeaders), whose heartbeats
// make it step down and catch up: every replica of every partition then names one leader and
// one term. Without the wake it claimed its partitions for minutes (a make jepsen-short run in
// CI: replicas at commit index 2 and 3 of an idle partition never converged).
func TestQuiescedLeaderPausedStepsDown(t *testing.T) {
	requireFaults(t)
	const (
		shards     = 8
		partitions = 2
	)
	ctx := context.Background()
	c, cl := startQuiescing(t, "127.0.0.86", 27680, 27780, shards, partitions)
	for ref := int64(1); ref <= 8; ref++ { // rows of both partitions, most likely
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := cl.PutCell(wctx, uuid.New(), "BASE", ref, json.RawMessage(`{"n":1}`))
		cancel()
		require.NoError(t, err, "put %d", ref)
	}
	quiesced := func(p wire.PartitionStatus) string {
		if !p.Quiesced {
			return "not quiesced (" + p.State + ")"
		}
		return ""
	}
	awaitReplicas(t, c, 30*time.Second, "every replica quiesces within 30s once the writes stop", quiesced)

	var victim *Node
	for _, l := range c.Leaders(ctx) {
		if l.Datastore == "trips" && l.Partition == 0 {
			victim = c.Node(l.Leader)
		}
	}
	require.NotNil(t, victim, "the leader of trips/0")
	// Paused and cut off, as the nemesis's pause-leader and partition-leader faults at once.
	nw := NewNet("SLQUIESCENET")
	require.NoError(t, nw.Setup(ctx), "iptables")
	t.Cleanup(func() { _ = nw.Teardown(context.Background()) })
	var others []string
	for _, n := range c.Nodes {
		if n != victim {
			others = append(others, n.IP)
		}
	}
	require.NoError(t, nw.Cut(ctx, Components([]string{victim.IP}, others)), "cut %s off", victim.ID)
	require.NoError(t, victim.Pause(), "SIGSTOP %s", victim.ID)
	paused := time.Now()
	awaitReplicas(t, c, 30*time.Second, "the others elect leaders of every partition within 30s of the pause",
		func(p wire.PartitionStatus) string {
			if p.Leader == "" || p.Leader == victim.ID {
				return fmt.Sprintf("follows %q", p.Leader)
			}
			return ""
		})
	awaitReplicas(t, c, 30*time.Second, "the others quiesce again, without the paused node", quiesced)
	// The new leaders' sends to the paused node back off and stop while gossip reports it down.
	time.Sleep(3 * time.Second)
	require.NoError(t, victim.Resume(), "SIGCONT %s", victim.ID)
	time.Sleep(3 * time.Second) // resumed but still cut off: it sees the others down too
	require.NoError(t, nw.Heal(ctx), "heal")
	t.Logf("%s paused for %v", victim.ID, time.Since(paused).Round(time.Millisecond))

	// Every replica of a partition names the same leader and term.
	var last string
	agree := func() bool {
		type view struct {
			leader string
			term   uint64
		}
		seen := map[string]view{}
		for _, n := range c.Nodes {
			st, err := c.Status(ctx, n, 2*time.Second)
			if err != nil {
				last = n.ID + ": " + err.Error()
				return false
			}
			for _, d := range st.Datastores {
				for _, p := range d.Partitions {
					if !p.Local {
						continue
					}
					k := fmt.Sprintf("%s/%d", d.Name, p.ID)
					v := view{p.Leader, p.Term}
					if w, ok := seen[k]; ok && w != v {
						last = fmt.Sprintf("%s: %s sees leader %q term %d, another replica leader %q term %d", k, n.ID, v.leader, v.term, w.leader, w.term)
						return false
					}
					seen[k] = v
				}
			}
		}
		return true
	}
	if !assert.Eventually(t, agree, 30*time.Second, 200*time.Millisecond) {
		require.FailNow(t, "the replicas of every partition agree on the leader within 30s of the resume", "%s", last)
	}
}
