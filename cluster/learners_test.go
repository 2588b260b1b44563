package cluster_test

import (
	"context"
	"errors"
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

// suffrageOf returns node's suffrage in cfg, "" when it is not in it.
func suffrageOf(cfg cluster.PartitionConfig, node string) string {
	for _, s := range cfg.Servers {
		if s.Node == node {
			return s.Suffrage
		}
	}
	return ""
}

// TestLearners: four nodes, n4 in its own zone d. A datastore on n1, n2, n3 gets n4 as a learner
// of partition 0:
//   - the learner is a nonvoter in zone d, recorded in the catalog; adding it again changes
//     nothing, a voter is refused;
//   - strong reads and reads bounded at 2s through n4 reflect every acknowledged write;
//   - splits carry it to the new halves; a nonvoter the catalog does not record as a learner
//     (a voter being added, in another datastore) is not carried;
//   - a rebalance over the four nodes moves no voter onto n4 and leaves it a learner;
//   - with the three voters stopped, a read through n4 bounded at 2s is refused once its last
//     read index from the leader is older than 2s (never answered from older data);
//   - removed, n4 leaves the configuration and the catalog's record.
func TestLearners(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble, Nodes: 4, Shards: 8, Partitions: 1, Gossip: true,
		Zones: []string{"a", "b", "c", "d"}})
	n1, n4 := c.Node(0), c.Node(3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*opTimeout)
	defer cancel()
	require.Eventually(t, func() bool { return n1.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond)
	_, err := n1.CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "far", Shards: 4, Partitions: 1, Replicas: []string{"n1", "n2", "n3"}})
	require.NoError(t, err)

	cfg, err := n1.AddLearner(ctx, "far", 0, "n4")
	require.NoError(t, err)
	assert.Equal(t, wire.SuffrageNonvoter, suffrageOf(cfg, "n4"))
	for _, s := range cfg.Servers {
		if s.Node == "n4" {
			assert.Equal(t, "d", s.Zone)
		}
	}
	assert.Equal(t, []string{"n4"}, catalogLearners(t, n1, "far", 0), "the catalog records the learner")
	assert.True(t, learnerIn(cfg, "n4"), "AddLearner's answer marks n4 a learner: %+v", cfg.Servers)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { // once the leader's catalog has the record
		listed, err := n4.PartitionConfig(ctx, "far", 0)
		if assert.NoError(ct, err) {
			assert.True(ct, learnerIn(listed, "n4"), "the configuration marks n4 a learner: %+v", listed.Servers)
			assert.False(ct, learnerIn(listed, "n1"), "and no voter: %+v", listed.Servers)
		}
	}, opTimeout, 50*time.Millisecond)
	again, err := n1.AddLearner(ctx, "far", 0, "n4")
	require.NoError(t, err, "adding the learner again")
	assert.Equal(t, cfg.Servers, again.Servers)
	_, err = n1.AddLearner(ctx, "far", 0, "n2")
	assert.ErrorIs(t, err, cluster.ErrRefused, "a voter is not made a learner")
	_, err = n1.RemoveLearner(ctx, "far", 0, "n2")
	assert.ErrorIs(t, err, cluster.ErrRefused, "a voter is not removed as a learner")

	l := newLedger()
	var cs []cells.Cell
	for j := range 16 {
		cs = append(cs, newCell(t, uuid.New(), "BASE", 1, fmt.Sprintf(`{"j":%d}`, j)))
	}
	putIn(t, n1, "far", l, cs)
	require.NoError(t, checkCellsIn(n4, "far", cluster.Strong, l.all(), opTimeout), "strong reads through the learner's node")
	require.NoError(t, checkCellsIn(n4, "far", cluster.BoundedStale(2*time.Second), l.all(), opTimeout), "bounded reads through the learner's node")

	// A split carries the learner to the new half, which it serves from the split's copy.
	split, err := n1.SplitPartition(ctx, "far", 0, wire.SplitRequest{AtShard: 2})
	require.NoError(t, err, "split far at shard 2")
	assert.Equal(t, []string{"n4"}, split.Learners, "the learner carried to the right half")
	rcfg, err := n1.PartitionConfig(ctx, "far", split.Right.ID)
	require.NoError(t, err)
	assert.Equal(t, wire.SuffrageNonvoter, suffrageOf(rcfg, "n4"), "a learner of the right half: %+v", rcfg.Servers)
	assert.Len(t, rcfg.Voters(), 3)
	assert.Equal(t, []string{"n4"}, catalogLearners(t, n1, "far", split.Right.ID), "the catalog records the right half's learner")
	// A voter being added at the moment of a split (a nonvoter the catalog does not record as a
	// learner) is not carried to the new half.
	_, err = n1.CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "near", Shards: 4, Partitions: 1, Replicas: []string{"n1", "n2", "n3"}})
	require.NoError(t, err)
	require.NoError(t, n1.AddNonvoter(ctx, "near", 0, "n4"), "n4 added to near/0 as a voter not yet promoted")
	nsplit, err := n1.SplitPartition(ctx, "near", 0, wire.SplitRequest{AtShard: 2})
	require.NoError(t, err, "split near at shard 2")
	assert.Empty(t, nsplit.Learners, "no learner carried from near/0")
	ncfg, err := n1.PartitionConfig(ctx, "near", nsplit.Right.ID)
	require.NoError(t, err)
	assert.Empty(t, suffrageOf(ncfg, "n4"), "the voter being added is not in the right half: %+v", ncfg.Servers)
	assert.Empty(t, catalogLearners(t, n1, "near", nsplit.Right.ID), "nor recorded as its learner")
	ncfg, err = n1.PartitionConfig(ctx, "near", 0)
	require.NoError(t, err)
	assert.Equal(t, wire.SuffrageNonvoter, suffrageOf(ncfg, "n4"), "n4 still being added to near/0: %+v", ncfg.Servers)
	assert.False(t, learnerIn(ncfg, "n4"), "a nonvoter being added is not marked a learner: %+v", ncfg.Servers)
	// A split whose deciding node stops before proposing it is completed by the parent's
	// leader, which carries the learner too.
	completed, err := n1.DecideSplit(ctx, "far", 0, 1)
	require.NoError(t, err, "the catalog decides a split of far/0 at shard 1")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cfg, err := n1.PartitionConfig(ctx, "far", completed)
		if assert.NoError(ct, err) {
			assert.Equal(ct, wire.SuffrageNonvoter, suffrageOf(cfg, "n4"), "n4 in partition %d completed by the leader: %+v", completed, cfg.Servers)
			assert.Len(ct, cfg.Voters(), 3)
		}
	}, opTimeout, 100*time.Millisecond)
	putIn(t, n1, "far", l, []cells.Cell{newCell(t, uuid.New(), "BASE", 1, `{"after":"split"}`), newCell(t, uuid.New(), "BASE", 1, `{"after":"split"}`)})
	require.NoError(t, checkCellsIn(n4, "far", cluster.Strong, l.all(), opTimeout), "strong reads through the learner's node, both halves")

	rep, err := n1.Rebalance(ctx, cluster.RebalanceOptions{Datastore: "far"})
	require.NoError(t, err)
	for _, m := range rep.Moves {
		assert.NotEqual(t, "n4", m.To, "a voter moved onto the learner's node: %+v", m)
	}
	for _, pid := range []int{0, split.Right.ID} {
		cfg, err = n1.PartitionConfig(ctx, "far", pid)
		require.NoError(t, err)
		assert.Equal(t, wire.SuffrageNonvoter, suffrageOf(cfg, "n4"), "partition %d: still a learner after the rebalance", pid)
		assert.Len(t, cfg.Voters(), 3)
	}

	// Cut the learner from every voter: stop them.
	require.NoError(t, checkCellsIn(n4, "far", cluster.BoundedStale(2*time.Second), l.all(), opTimeout))
	for i := range 3 {
		c.StopNode(i)
	}
	time.Sleep(2500 * time.Millisecond)
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = n4.GetCells(rctx, "far", []cluster.GetKey{{Key: l.all()[0].key}}, cluster.BoundedStale(2*time.Second))
	rcancel()
	require.Error(t, err, "a read bounded at 2s through the learner, 2.5s after it last heard of the leader")
	assert.True(t, errors.Is(err, cluster.ErrUnavailable), "refused as unavailable: %v", err)

	for i := range 3 {
		c.StartNode(i)
	}
	n1 = c.Node(0)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cfg, err := n1.RemoveLearner(ctx, "far", 0, "n4")
		if assert.NoError(ct, err) {
			assert.Empty(ct, suffrageOf(cfg, "n4"), "n4 left the configuration: %+v", cfg.Servers)
		}
	}, opTimeout, 500*time.Millisecond)
	assert.Empty(t, catalogLearners(t, n1, "far", 0), "the catalog forgot the learner")
}

// learnerIn reports whether cfg marks node a learner.
func learnerIn(cfg cluster.PartitionConfig, node string) bool {
	for _, s := range cfg.Servers {
		if s.Node == node {
			return s.Learner
		}
	}
	return false
}

// catalogLearners returns the learners node's catalog records for partition pid of ds.
func catalogLearners(t *testing.T, node *cluster.Node, ds string, pid int) []string {
	t.Helper()
	for _, d := range node.CatalogDatastores().Datastores {
		if d.Name != ds {
			continue
		}
		for _, p := range d.Partitions {
			if p.ID == pid {
				return p.Learners
			}
		}
	}
	require.Failf(t, "no such partition", "%s/%d in the catalog", ds, pid)
	return nil
}
