package jepsen

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func catalogPart(id, first, last int) wire.CatalogPartition {
	return wire.CatalogPartition{ID: id, FirstShard: first, LastShard: last, Replicas: []string{"n1", "n2", "n3"}}
}

// partsOf returns n partitions of one shard each, then one of shards n..last.
func partsOf(n, last int) []wire.CatalogPartition {
	var ps []wire.CatalogPartition
	for i := 0; i < n; i++ {
		ps = append(ps, catalogPart(i, i, i))
	}
	return append(ps, catalogPart(n, n, last))
}

func TestSplitCandidates(t *testing.T) {
	t.Parallel()
	catalog := []wire.DatastoreInfo{
		{Name: "cells", Mode: topology.ModeRaft, Shards: 8, Partitions: []wire.CatalogPartition{catalogPart(0, 0, 3), catalogPart(2, 4, 4), catalogPart(1, 5, 7)}},
		{Name: "bank", Mode: topology.ModeRaft, Shards: 8, Partitions: []wire.CatalogPartition{catalogPart(0, 0, 3), catalogPart(1, 4, 7)}},
		{Name: "ones", Mode: topology.ModeRaft, Shards: 2, Partitions: []wire.CatalogPartition{catalogPart(0, 0, 0), catalogPart(1, 1, 1)}},
		{Name: "full", Mode: topology.ModeRaft, Shards: 32, Partitions: partsOf(15, 31)},
		{Name: "almost", Mode: topology.ModeRaft, Shards: 32, Partitions: partsOf(14, 31)},
		{Name: "rides", Mode: topology.ModeAsync, Shards: 8, Partitions: []wire.CatalogPartition{catalogPart(0, 0, 7)}},
		{Name: "other", Mode: topology.ModeRaft, Shards: 8, Partitions: []wire.CatalogPartition{catalogPart(0, 0, 7)}},
	}
	raft := []string{"cells", "bank", "ones", "full", "almost"} // the topology's raft datastores
	got := splitCandidates(catalog, raft, []string{"bank"}, MaxSplitPartitions)
	want := map[string][]wire.CatalogPartition{
		"cells":  {catalogPart(0, 0, 3), catalogPart(1, 5, 7)}, // not 2: one shard
		"almost": {catalogPart(14, 14, 31)},                    // 15 partitions, below 16
	}
	assert.Equal(t, want, got, "bank excluded, one-shard partitions, full datastores, async and unknown ones left out")
	assert.Empty(t, splitCandidates(catalog, raft, []string{"bank", "cells", "almost"}, MaxSplitPartitions), "nothing left to split")
}

func TestPickSplit(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	_, _, _, ok := pickSplit(rng, nil)
	assert.False(t, ok, "no candidate")
	_, _, _, ok = pickSplit(rng, map[string][]wire.CatalogPartition{"cells": nil})
	assert.False(t, ok, "a datastore without candidates")

	cands := map[string][]wire.CatalogPartition{
		"cells":      {catalogPart(0, 0, 3), catalogPart(1, 5, 7)},
		"durability": {catalogPart(1, 8, 9)},
	}
	seen := map[string]int{}
	for i := 0; i < 3000; i++ {
		ds, p, at, ok := pickSplit(rng, cands)
		require.True(t, ok, "candidates")
		require.Contains(t, cands[ds], p, "a candidate partition of %s", ds)
		require.Greater(t, at, p.FirstShard, "at_shard of %s/%d [%d..%d]: the left half keeps a shard", ds, p.ID, p.FirstShard, p.LastShard)
		require.LessOrEqual(t, at, p.LastShard, "at_shard of %s/%d [%d..%d]: inside the partition", ds, p.ID, p.FirstShard, p.LastShard)
		seen[fmt.Sprintf("%s/%d@%d", ds, p.ID, at)]++
	}
	// Every (datastore, partition, at_shard) is drawn: cells/0 at 1, 2, 3; cells/1 at 6, 7;
	// durability/1 at 9. The datastore is uniform, then the partition, then the shard.
	assert.Len(t, seen, 6, "every choice drawn: %v", seen)
	assert.InDelta(t, 1500, seen["durability/1@9"], 200, "durability drawn half the time: %v", seen)
	assert.InDelta(t, 250, seen["cells/0@2"], 100, "cells/0 at 2 drawn a twelfth of the time: %v", seen)

	// The same seed draws the same splits, whatever the map's order.
	a, b := rand.New(rand.NewPCG(seed, 2)), rand.New(rand.NewPCG(seed, 2))
	for i := 0; i < 50; i++ {
		ds1, p1, at1, _ := pickSplit(a, cands)
		ds2, p2, at2, _ := pickSplit(b, cands)
		require.Equal(t, []any{ds1, p1.ID, at1}, []any{ds2, p2.ID, at2}, "draw %d", i)
	}
}

func TestSplitAtTwoShards(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		assert.Equal(t, 5, splitAt(rng, catalogPart(3, 4, 5)), "a partition of shards 4..5 splits at 5 only")
	}
}

func TestParseSplitNemesis(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{Split}, ParseNemeses("split", false))
	assert.Equal(t, CapacityNemeses, ParseNemeses("capacity", false))
	assert.Equal(t, slices.Concat(AllNemeses, []string{Split}), ParseNemeses("all,split", false))
	assert.False(t, slices.ContainsFunc(AllNemeses, IsCapacityNemesis), "all leaves split out")
	assert.True(t, IsCapacityNemesis(Split))
	assert.False(t, IsMembershipNemesis(Split) || NeedsNet(Split) || IsWorkerNemesis(Split) || IsStorageNemesis(Split), "split is a class of its own")

	cfg := DefaultConfig()
	cfg.Nemesis.Kinds = ParseNemeses("all,split", false)
	assert.NoError(t, cfg.Validate(), "all,split in raft mode")
	cfg.Store = storage.EngineSQLite
	assert.NoError(t, cfg.Validate(), "split on SQLite")
	cfg = DefaultConfig()
	cfg.Mode, cfg.Workloads = topology.ModeAsync, []string{"cells"}
	cfg.Nemesis.Kinds = ParseNemeses("all,split", true)
	assert.NoError(t, cfg.Validate(), "split in async mode")
}

// The split nemesis changes the raft datastores in raft mode and the async ones in async mode
// (a Nemesis with storage clusters), on every store.
func TestSplitDatastores(t *testing.T) {
	t.Parallel()
	for _, store := range []string{storage.EnginePebble, storage.EngineSQLite, storage.EngineMySQL} {
		c := &Cluster{cfg: ClusterConfig{Store: store}}
		c.top.Store(testTopology())
		n := NewNemesis(NemesisConfig{Kinds: []string{Split}}, c, nil, NewHistory(nil), 1, nil, slog.New(slog.DiscardHandler))
		assert.Equal(t, []string{"cells"}, n.splitDatastores(), "%s, raft mode", store)
		n.storage = &Storage{}
		assert.Equal(t, []string{"rides"}, n.splitDatastores(), "%s, async mode", store)
	}
}

func testTopology() *topology.Topology {
	return &topology.Topology{
		Nodes: []topology.NodeSpec{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}},
		Datastores: []topology.DatastoreSpec{
			{Name: "cells", Mode: topology.ModeRaft, Shards: 8, Partitions: []topology.PartitionSpec{
				{ID: 0, FirstShard: 0, LastShard: 3, Replicas: []string{"n1", "n2", "n3"}},
				{ID: 1, FirstShard: 4, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}}}},
			{Name: "rides", Mode: topology.ModeAsync, Shards: 8, Partitions: []topology.PartitionSpec{
				{ID: 0, FirstShard: 0, LastShard: 7, Cluster: "c0"}}},
		},
	}
}

func TestWithCatalog(t *testing.T) {
	t.Parallel()
	top := testTopology()
	before := testTopology()
	catalog := []wire.DatastoreInfo{
		{Name: "cells", Mode: topology.ModeRaft, Shards: 8, Partitions: []wire.CatalogPartition{
			catalogPart(1, 4, 7), catalogPart(0, 0, 1), catalogPart(2, 2, 3)}},
		{Name: "rides", Mode: topology.ModeAsync, Shards: 8, Partitions: []wire.CatalogPartition{
			{ID: 1, FirstShard: 4, LastShard: 7, Cluster: "c0"}, {ID: 0, FirstShard: 0, LastShard: 3, Cluster: "c0"}}},
	}
	got, err := withCatalog(top, catalog)
	require.NoError(t, err)
	assert.Equal(t, before, top, "the topology given is not modified")
	cells, ok := got.Datastore("cells")
	require.True(t, ok)
	rep := []string{"n1", "n2", "n3"}
	assert.Equal(t, []topology.PartitionSpec{{ID: 0, FirstShard: 0, LastShard: 1, Replicas: rep}, {ID: 2, FirstShard: 2, LastShard: 3, Replicas: rep},
		{ID: 1, FirstShard: 4, LastShard: 7, Replicas: rep}}, cells.Partitions, "cells: the catalog's partitions, by first shard")
	assert.Equal(t, 2, cells.PartitionOf(3).ID, "shard 3 in the split-made partition")
	rides, _ := got.Datastore("rides")
	assert.Equal(t, []topology.PartitionSpec{{ID: 0, FirstShard: 0, LastShard: 3, Cluster: "c0"}, {ID: 1, FirstShard: 4, LastShard: 7, Cluster: "c0"}},
		rides.Partitions, "rides: the catalog's partitions, with their storage clusters")
	assert.Equal(t, top.Datastores[1].MySQLPrefix, rides.MySQLPrefix, "rides: the rest of the spec kept")
	assert.Equal(t, top.Nodes, got.Nodes, "nodes")

	for name, parts := range map[string][]wire.CatalogPartition{
		"a gap":          {catalogPart(0, 0, 2), catalogPart(1, 4, 7)},
		"an overlap":     {catalogPart(0, 0, 4), catalogPart(1, 4, 7)},
		"short":          {catalogPart(0, 0, 3), catalogPart(1, 4, 6)},
		"no partition":   nil,
		"an empty range": {catalogPart(0, 0, 3), catalogPart(2, 4, 3), catalogPart(1, 4, 7)},
	} {
		_, err := withCatalog(top, []wire.DatastoreInfo{{Name: "cells", Mode: topology.ModeRaft, Shards: 8, Partitions: parts}})
		assert.Error(t, err, "%s: want an error", name)
	}
	_, err = withCatalog(top, catalog[1:])
	assert.ErrorContains(t, err, "raft datastore cells is not in the catalog")
	_, err = withCatalog(top, catalog[:1])
	assert.ErrorContains(t, err, "async datastore rides is not in the catalog")
	noCluster := slices.Clone(catalog)
	noCluster[1].Partitions = []wire.CatalogPartition{{ID: 0, FirstShard: 0, LastShard: 7}}
	_, err = withCatalog(top, noCluster)
	assert.ErrorContains(t, err, "async datastore rides: partition 0 names no storage cluster")
}

// learnCatalog replaces the partition map only with a newer catalog, while readers of
// Topology and replicasOf run (go test -race).
func TestLearnCatalogConcurrent(t *testing.T) {
	t.Parallel()
	c := &Cluster{}
	c.top.Store(testTopology())
	split := func(gen uint64, parts int) wire.DatastoresResponse {
		// cells in parts partitions: 0..parts-2 of one shard each, the last one the rest.
		var ps []wire.CatalogPartition
		for i := 0; i < parts-1; i++ {
			ps = append(ps, catalogPart(i, i, i))
		}
		ps = append(ps, catalogPart(parts-1, parts-1, 7))
		return wire.DatastoresResponse{Generation: gen, Datastores: []wire.DatastoreInfo{{Name: "cells", Mode: topology.ModeRaft, Shards: 8, Partitions: ps},
			{Name: "rides", Mode: topology.ModeAsync, Shards: 8, Partitions: []wire.CatalogPartition{{ID: 0, FirstShard: 0, LastShard: 7, Cluster: "c0"}}}}}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The readers end on every way out of the test, a failed require included.
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()
	for r := 0; r < 4; r++ {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				top := c.Topology()
				d, ok := top.Datastore("cells")
				if !ok {
					t.Error("cells missing")
					return
				}
				shards := 0
				for _, p := range d.Partitions {
					shards += p.LastShard - p.FirstShard + 1
					_ = c.replicasOf(d.Name, p)
				}
				if shards != 8 {
					t.Errorf("cells: %d shards in %d partitions, want 8", shards, len(d.Partitions))
				}
				_ = c.ShardReplicas("cells")
			}
		})
	}
	for gen := uint64(1); gen <= 199; gen++ {
		require.NoError(t, c.learnCatalog(split(gen, 1+int(gen)%8)), "generation %d", gen)
	}
	halt()
	d, _ := c.Topology().Datastore("cells")
	assert.Len(t, d.Partitions, 8, "after generation 199")
	require.NoError(t, c.learnCatalog(split(3, 4)), "an older catalog")
	d, _ = c.Topology().Datastore("cells")
	assert.Len(t, d.Partitions, 8, "an older catalog (a lagging node's) changes nothing")
	assert.Error(t, c.learnCatalog(wire.DatastoresResponse{Generation: 300}), "a newer catalog without cells")
	d, _ = c.Topology().Datastore("cells")
	assert.Len(t, d.Partitions, 8, "a bad catalog changes nothing")
}

// splitDone finds a split in the catalog after an indeterminate answer: the partition ends just
// before at_shard, and a partition split from it starts there.
func TestSplitDone(t *testing.T) {
	t.Parallel()
	part := func(id, first, last, parent int) wire.CatalogPartition {
		p := catalogPart(id, first, last)
		p.Parent = parent
		return p
	}
	before := []wire.DatastoreInfo{{Name: "trig", Shards: 8, Partitions: []wire.CatalogPartition{part(0, 0, 3, -1), part(1, 4, 7, -1)}}}
	after := []wire.DatastoreInfo{{Name: "cells", Shards: 8, Partitions: []wire.CatalogPartition{part(0, 0, 7, -1)}},
		{Name: "trig", Shards: 8, Partitions: []wire.CatalogPartition{part(0, 0, 1, -1), part(2, 2, 3, 0), part(1, 4, 7, -1)}}}
	_, _, ok := splitDone(before, "trig", 0, 2)
	assert.False(t, ok, "not split yet")
	left, right, ok := splitDone(after, "trig", 0, 2)
	require.True(t, ok, "split")
	assert.Equal(t, part(0, 0, 1, -1), left, "left half")
	assert.Equal(t, part(2, 2, 3, 0), right, "right half")
	_, _, ok = splitDone(after, "trig", 0, 3)
	assert.False(t, ok, "split at another shard")
	_, _, ok = splitDone(after, "trig", 1, 5)
	assert.False(t, ok, "another partition")
	_, _, ok = splitDone(after, "idx", 0, 2)
	assert.False(t, ok, "another datastore")
}

// TestMergeCandidates: only neighbours on the same replicas and storage cluster, of the
// datastores named and not excluded, are merge candidates; pickMerge draws one of them.
func TestMergeCandidates(t *testing.T) {
	abc, abd := []string{"a", "b", "c"}, []string{"a", "b", "d"}
	cat := []wire.DatastoreInfo{
		{Name: "trips", Partitions: []wire.CatalogPartition{
			{ID: 2, FirstShard: 8, LastShard: 15, Replicas: []string{"c", "b", "a"}},
			{ID: 0, FirstShard: 0, LastShard: 7, Replicas: abc},
			{ID: 3, FirstShard: 16, LastShard: 20, Replicas: abd},
		}},
		{Name: "bank", Partitions: []wire.CatalogPartition{{ID: 0, FirstShard: 0, LastShard: 3, Replicas: abc}, {ID: 1, FirstShard: 4, LastShard: 7, Replicas: abc}}},
		{Name: "async", Partitions: []wire.CatalogPartition{{ID: 0, FirstShard: 0, LastShard: 3}, {ID: 1, FirstShard: 4, LastShard: 7}}},
		{Name: "rides", Partitions: []wire.CatalogPartition{{ID: 0, FirstShard: 0, LastShard: 3, Cluster: "c0"},
			{ID: 1, FirstShard: 4, LastShard: 5, Cluster: "c1"}, {ID: 2, FirstShard: 6, LastShard: 7, Cluster: "c1"}}},
	}
	rides := mergeCandidates(cat, []string{"rides"}, nil)["rides"]
	require.Len(t, rides, 1, "async: 1+2 only, 0 is on another storage cluster")
	assert.Equal(t, [2]int{1, 2}, [2]int{rides[0][0].ID, rides[0][1].ID})
	got := mergeCandidates(cat, []string{"trips", "bank"}, []string{"bank"})
	require.Len(t, got, 1)
	require.Len(t, got["trips"], 1, "0+2 only: 3 is on other replicas")
	assert.Equal(t, [2]int{0, 2}, [2]int{got["trips"][0][0].ID, got["trips"][0][1].ID})
	ds, pair, ok := pickMerge(rand.New(rand.NewPCG(1, 2)), got)
	require.True(t, ok)
	assert.Equal(t, "trips", ds)
	assert.Equal(t, 2, pair[1].ID)
	_, _, ok = pickMerge(rand.New(rand.NewPCG(1, 2)), nil)
	assert.False(t, ok)
}
