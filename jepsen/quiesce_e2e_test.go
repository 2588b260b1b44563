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
	c, err := StartCluster(ctx, ClusterConfig{Binary: schemalessBinary(t), Dir: t.TempDir(), Nodes: 3,
		FirstIP: "127.0.0.82", HTTPPort: 27670, RaftPort: 27770,
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

	quiesced := func() (bool, string) {
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			st, err := c.Status(ctx, n, 2*time.Second)
			if err != nil {
				return false, n.ID + ": " + err.Error()
			}
			for _, d := range st.Datastores {
				for _, p := range d.Partitions {
					if p.Local && !p.Quiesced {
						return false, fmt.Sprintf("%s: %s/%d (%s)", n.ID, d.Name, p.ID, p.State)
					}
				}
			}
		}
		return true, ""
	}
	var last string
	if !assert.Eventually(t, func() bool {
		ok, why := quiesced()
		last = why
		return ok
	}, 30*time.Second, 250*time.Millisecond) {
		require.FailNow(t, "every replica quiesces within 30s once the writes stop", "still not quiesced: %s", last)
	}

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
	reelected := func() (bool, string) {
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			st, err := c.Status(ctx, n, 2*time.Second)
			if err != nil {
				return false, n.ID + ": " + err.Error()
			}
			for _, d := range st.Datastores {
				for _, p := range d.Partitions {
					if p.Local && (p.Leader == "" || p.Leader == victim.ID) {
						return false, fmt.Sprintf("%s: %s/%d follows %q", n.ID, d.Name, p.ID, p.Leader)
					}
				}
			}
		}
		return true, ""
	}
	if !assert.Eventually(t, func() bool {
		ok, why := reelected()
		last = why
		return ok
	}, 30*time.Second, 100*time.Millisecond) {
		require.FailNow(t, "every partition elects a new leader within 30s of the kill, with no request sent", "%s", last)
	}
	t.Logf("every partition of the survivors follows a new leader %v after the kill of %s", time.Since(killed).Round(time.Millisecond), victim.ID)
	write(2, 30*time.Second)
	t.Logf("every partition took a write %v after the kill", time.Since(killed).Round(time.Millisecond))
}
