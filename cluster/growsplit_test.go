package cluster_test

import (
	"context"
	"fmt"
	"github.com/schemaless-db/schemaless/wire"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestGrowDatastore grows a datastore's capacity online under 64 writers through the public
// client: trips starts as 1 partition on 3 nodes; it splits to 16 partitions (the largest at its
// middle each time) while 3 new nodes join through gossip; then a rebalance spreads the 48
// replicas over the 6 nodes. No write may fail and every acknowledged cell must read back. The
// new nodes catch up on the partitions the rebalance gives them by replaying their logs, splits
// included: a replica that replays a split it was not a voter of must not open the split's
// partition as its own (cluster.splitVoterHere); before that was checked, strong reads through
// the new nodes found no leader for it about half the time.
func TestGrowDatastore(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	t.Parallel()
	const target = 16
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Shards: 32, Partitions: 1, Gossip: true, Engine: clustertest.Pebble})
	n := adminNode(t, c)
	require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond)
	l := newLoader(t, c.URLs(), 64)
	l.requireWrites(t, l.writes.Load(), 200, "before the first split")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	for i := 1; i < target; i++ {
		if i == 4 {
			for range 3 {
				_, err := c.AddNode(context.Background())
				require.NoError(t, err, "add a node")
			}
		}
		d, err := n.Datastore(ds)
		require.NoError(t, err)
		pid, width, first := -1, 0, 0
		for _, p := range d.Partitions {
			if w := p.LastShard - p.FirstShard + 1; w > width {
				pid, width, first = p.ID, w, p.FirstShard
			}
		}
		require.Greater(t, width, 1, "a partition to split")
		res, err := n.SplitPartition(ctx, ds, pid, wire.SplitRequest{AtShard: first + width/2})
		require.NoError(t, err, "split %d: partition %d", i, pid)
		require.True(t, res.Ready, "split %d: the right half has a leader", i)
	}
	t.Logf("figures: 1 -> %d partitions in %.1fs", target, time.Since(began).Seconds())
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		alive := 0
		for _, m := range n.Members() {
			if m.State == "alive" {
				alive++
			}
		}
		assert.Equal(ct, 6, alive, "alive nodes")
	}, 20*time.Second, 50*time.Millisecond, "gossip sees the 6 nodes alive")
	l.setEndpoints(c.URLs())

	// The rebalance has a context of its own: on a loaded machine (CI runs the packages in
	// parallel) it took 288 s where it takes 44 s alone.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer rcancel()
	start := time.Now()
	rep, err := n.Rebalance(rctx, cluster.RebalanceOptions{})
	require.NoError(t, err, "rebalance (report %+v)", rep)
	t.Logf("figures: rebalance 3 -> 6 nodes: %d moves, %d leader transfers in %.1fs", len(rep.Moves), len(rep.Transfers), time.Since(start).Seconds())
	d, err := n.Datastore(ds)
	require.NoError(t, err)
	require.Len(t, d.Partitions, target)
	voters := map[string]int{}
	for _, p := range d.Partitions {
		var cfg cluster.PartitionConfig
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			var err error
			cfg, err = n.PartitionConfig(cctx, ds, p.ID)
			assert.NoError(ct, err)
		}, 2*opTimeout, 200*time.Millisecond, "configuration of partition %d", p.ID)
		for _, v := range cfg.Voters() {
			voters[v]++
		}
	}
	for i := range 6 {
		id := fmt.Sprintf("n%d", i+1)
		assert.Equal(t, target*3/6, voters[id], "after the rebalance: replicas on %s (%v)", id, voters)
	}
	l.requireWrites(t, l.writes.Load(), 200, "after the rebalance")
	acked := l.finish(t, c.URLs())
	t.Logf("figures: %d writes acknowledged, 0 failed, every one read back", acked)
}
