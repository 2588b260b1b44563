package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// zoneOfNode is the zone of the test's nodes: n1 and n4 in a, n2 and n5 in b, n3 and n6 in c
// (clustertest.Options.Zones a, b, c).
var zoneOfNode = map[string]string{"n1": "a", "n2": "b", "n3": "c", "n4": "a", "n5": "b", "n6": "c"}

// majorityZone returns the zone holding a majority of voters, "" when none does.
func majorityZone(voters []string) string {
	count := map[string]int{}
	for _, v := range voters {
		count[zoneOfNode[v]]++
		if 2*count[zoneOfNode[v]] > len(voters) {
			return zoneOfNode[v]
		}
	}
	return ""
}

// TestZones: six nodes in three zones (two each).
//   - A datastore created with 3 replicas per partition gets one per zone, and no warning.
//   - One placed on n1, n4, n2 (two in zone a) is created with a warning naming zone a's
//     majority; after its leader zone is set to b and a rebalance, every partition has one
//     voter per zone and a leader in zone b, and the rebalance warns of nothing; when n2 (zone
//     b) stops and comes back, the leaderships it lost return to zone b on their own.
//   - Zone a is lost (n1 and n4 stop): writes to every partition of both datastores go on
//     through the other nodes, and every acknowledged cell reads back strongly through each
//     of them; with gossip (which wakes a quiesced replica whose leader died) and without.
func TestZones(t *testing.T) {
	t.Parallel()
	for _, gossip := range []bool{true, false} {
		t.Run(fmt.Sprintf("gossip=%v", gossip), func(t *testing.T) {
			t.Parallel()
			testZones(t, gossip)
		})
	}
}

// testZones is TestZones with or without gossip. Without it, a node that hosts no replica of a
// partition finds the partition's voters by the catalog's record of them (the rebalance's
// moves change it), not by gossip.
func testZones(t *testing.T, gossip bool) {
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble, Nodes: 6, Shards: 8, Partitions: 1, Gossip: gossip, Zones: []string{"a", "b", "c"}})
	nodes := running(c)
	require.Len(t, nodes, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 4*opTimeout)
	defer cancel()
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond, "node %s learns the catalog", n.ID())
	}

	spread, err := nodes[5].CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "spread", Shards: 12, Partitions: 6, ReplicaCount: 3})
	require.NoError(t, err)
	assert.Empty(t, spread.Warnings, "a placement over three zones")
	load := map[string]int{}
	for _, p := range spread.Datastore.Partitions {
		assert.Empty(t, majorityZone(p.Replicas), "spread/%d on %v: no zone holds a majority", p.ID, p.Replicas)
		zones := map[string]bool{}
		for _, r := range p.Replicas {
			zones[zoneOfNode[r]] = true
			load[r]++
		}
		assert.Len(t, zones, 3, "spread/%d on %v: one replica per zone", p.ID, p.Replicas)
	}
	assert.Len(t, load, 6, "every node holds replicas: %v", load)

	skewed, err := nodes[0].CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "skewed", Shards: 8, Partitions: 4, Replicas: []string{"n1", "n4", "n2"}})
	require.NoError(t, err)
	require.Len(t, skewed.Warnings, 4, "%q", skewed.Warnings)
	assert.Contains(t, skewed.Warnings[0], "skewed/0: zone a holds 2 of 3 voters, a majority")

	set, err := nodes[2].SetDatastoreSettings(ctx, "skewed", wire.DatastoreSettingsRequest{LeaderZone: ptr("b")})
	require.NoError(t, err)
	assert.Equal(t, "b", set.Datastore.LeaderZone)
	zone := "Bad Zone"
	_, err = nodes[2].SetDatastoreSettings(ctx, "skewed", wire.DatastoreSettingsRequest{LeaderZone: &zone})
	var fe *cluster.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "leader_zone", fe.Field)
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			for _, d := range n.CatalogDatastores().Datastores {
				if d.Name == "skewed" {
					return d.LeaderZone == "b"
				}
			}
			return false
		}, opTimeout, 20*time.Millisecond, "node %s learns the leader zone", n.ID())
	}

	rep, err := nodes[1].Rebalance(ctx, cluster.RebalanceOptions{Datastore: "skewed"})
	require.NoError(t, err, "rebalance: %+v", rep)
	assert.Empty(t, rep.Warnings)
	assert.Equal(t, "a", rep.Zones["n4"])
	assert.NotEmpty(t, rep.Moves)
	for pid := range 4 {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			cfg, err := nodes[1].PartitionConfig(ctx, "skewed", pid)
			if !assert.NoError(ct, err) {
				return
			}
			assert.Len(ct, cfg.Voters(), 3)
			assert.Empty(ct, majorityZone(cfg.Voters()), "skewed/%d voters %v", pid, cfg.Voters())
			assert.Equal(ct, "b", zoneOfNode[cfg.Leader], "skewed/%d leader %s, want zone b", pid, cfg.Leader)
			for _, s := range cfg.Servers {
				assert.Equal(ct, zoneOfNode[s.Node], s.Zone, "skewed/%d: %s's zone in the configuration", pid, s.Node)
			}
		}, opTimeout, 100*time.Millisecond)
	}

	// n2 (zone b) stops: its partitions elect leaders in other zones; once it is back, their
	// leaderships return to zone b on their own (leaderZoneTick).
	c.StopNode(1)
	for pid := range 4 {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			cfg, err := c.Node(2).PartitionConfig(ctx, "skewed", pid)
			if assert.NoError(ct, err) {
				assert.NotEmpty(ct, cfg.Leader)
				assert.NotEqual(ct, "n2", cfg.Leader)
			}
		}, opTimeout, 100*time.Millisecond, "skewed/%d elects a leader without n2", pid)
	}
	c.StartNode(1)
	for pid := range 4 {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			cfg, err := c.Node(2).PartitionConfig(ctx, "skewed", pid)
			if assert.NoError(ct, err) {
				assert.Equal(ct, "b", zoneOfNode[cfg.Leader], "skewed/%d led by %s, want zone b again", pid, cfg.Leader)
			}
		}, 2*opTimeout, 200*time.Millisecond)
	}

	// Zone a lost: n1 and n4.
	c.StopNode(0)
	c.StopNode(3)
	for i, dsName := range []string{"spread", "skewed"} {
		n := c.Node(1 + 3*i) // n2, then n5
		l := newLedger()
		var cs []cells.Cell
		for j := range 48 {
			cs = append(cs, newCell(t, uuid.New(), "BASE", 1, fmt.Sprintf(`{"ds":%q,"j":%d}`, dsName, j)))
		}
		putIn(t, n, dsName, l, cs)
		require.Equal(t, 48, l.len())
		for _, j := range []int{1, 2, 4, 5} {
			require.NoError(t, checkCellsIn(c.Node(j), dsName, cluster.Strong, l.all(), opTimeout), "%s read through n%d", dsName, j+1)
		}
	}
}

func ptr[T any](v T) *T { return &v }
