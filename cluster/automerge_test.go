package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/wire"
)

// catalogReplicas returns the replicas the catalog, as node n serves it, lists for partition
// pid of ds, sorted ("missing" when it lists no such partition).
func catalogReplicas(n *cluster.Node, pid int) []string {
	d, err := n.Datastore(ds)
	if err != nil {
		return []string{err.Error()}
	}
	for _, p := range d.Partitions {
		if p.ID == pid {
			r := slices.Clone(p.Replicas)
			slices.Sort(r)
			return r
		}
	}
	return []string{"missing"}
}

// A merge of partitions on different nodes first moves the right one's replicas onto the left
// one's nodes, under writes; the catalog's replica lists follow every move.
func TestMergeAlignsReplicas(t *testing.T) {
	// Not parallel: its 4-node cluster and writers would add to the load of the parallel tests.
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble, Gossip: true})
	nodes := runningImported(t, c)
	spec := &c.Topology.Datastores[0]
	ctx, cancel := context.WithTimeout(context.Background(), 4*opTimeout)
	defer cancel()
	i, err := c.AddNode(ctx)
	require.NoError(t, err, "add a fourth node")
	n4 := c.Node(i)
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			for _, m := range n.Members() {
				if m.ID == n4.ID() && m.State == "alive" {
					return true
				}
			}
			return false
		}, opTimeout, 50*time.Millisecond, "node %s sees %s alive through gossip", n.ID(), n4.ID())
	}

	w := startWriters(nodes)
	w.await(t, 15)
	split, err := nodes[1].SplitPartition(ctx, ds, 1, wire.SplitRequest{AtShard: 12})
	require.NoError(t, err, "split partition 1 at 12")
	right := split.Right.ID
	w.await(t, 15)
	require.NoError(t, nodes[0].MoveReplica(ctx, ds, right, nodes[0].ID(), n4.ID()), "move partition %d's replica from %s to %s", right, nodes[0].ID(), n4.ID())
	moved := []string{nodes[1].ID(), nodes[2].ID(), n4.ID()}
	slices.Sort(moved)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return slices.Equal(moved, catalogReplicas(n, right)) }, opTimeout, 20*time.Millisecond,
			"node %s's catalog lists partition %d's replicas after the move: %v, want %v", n.ID(), right, catalogReplicas(n, right), moved)
	}
	w.await(t, 15)

	m, err := nodes[2].MergePartitions(ctx, ds, 1, right)
	require.NoError(t, err, "merge partition %d, on %v, into partition 1", right, moved)
	assert.Equal(t, 1, m.ReplicasMoved, "replicas moved before the merge")
	assert.Equal(t, []int{1, 8, 15}, []int{m.Merged.ID, m.Merged.FirstShard, m.Merged.LastShard})
	t.Logf("merge with a replica move under writes: %d ms, pause %d ms", m.TookMillis, m.PauseMillis)
	w.await(t, 15)
	w.finish(t, "the split, the move and the merge")
	all := []string{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	slices.Sort(all)
	assert.Equal(t, all, catalogReplicas(nodes[0], 1), "the merged partition's replicas in the catalog")
	requireStrong(t, w.l, nodes...)
	checkShardLogs(t, spec, w.l, nodes...)
}

// Partitions made by a load-based split merge back once both halves have been idle for
// MergeAfter; a split an operator made stays. On pebble and SQLite, with size-based splitting
// on (1 GiB) so that the merge reads both halves' sizes first (ShardSizes).
func TestAutomaticMerge(t *testing.T) {
	// Not parallel (as TestMergeAlignsReplicas).
	for _, engine := range []clustertest.Engine{clustertest.Pebble, clustertest.SQLite} {
		t.Run(string(engine), func(t *testing.T) { testAutomaticMerge(t, engine) })
	}
}

func testAutomaticMerge(t *testing.T, engine clustertest.Engine) {
	const mergeAfter = 3 * time.Second
	c := clustertest.Start(t, clustertest.Options{Engine: engine, Gossip: true,
		Partition: partitionQuiesce(300 * time.Millisecond),
		AutoSplit: cluster.AutoSplitConfig{Load: 40, Window: 2 * time.Second, Cooldown: time.Hour, MergeAfter: mergeAfter,
			Size: 1 << 30, SizeEvery: time.Second}})
	nodes := running(c)
	spec := &c.Topology.Datastores[0]
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*opTimeout)
	defer cancel()
	manual, err := nodes[0].SplitPartition(ctx, ds, 0, wire.SplitRequest{AtShard: 4})
	require.NoError(t, err, "an operator's split of partition 0 at 4")

	// Load on partition 1 until it splits by load: about 100 writes a second, above the
	// threshold of 40, paced so as not to take the CPU of the tests beside it.
	rows := rowsPerPartition(t, spec, t.Name(), 200)[1] // shards 8..15
	l := newLedger()
	stop, done := make(chan struct{}), make(chan struct{})
	// The writer ends on every way out of the test, a failed require included.
	halt := sync.OnceFunc(func() { close(stop); <-done })
	defer halt()
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			putIn(t, nodes[i%3], ds, l, []cells.Cell{newCell(t, rows[i%len(rows)], "BASE", int64(1+i/len(rows)), fmt.Sprintf(`{"i":%d}`, i))})
		}
	}()
	var auto wire.CatalogEvent
	require.Eventually(t, func() bool {
		for _, e := range nodes[0].CatalogDatastores().Datastores[0].History {
			if e.Op == "split" && e.Left == 1 {
				auto = e
				return true
			}
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "partition 1 splits by load")
	halt()
	assert.True(t, auto.Auto, "the load-based split is marked automatic: %+v", auto)
	stopped := time.Now()

	// Idle now: the load split's halves merge back; the operator's split stays.
	var merge wire.CatalogEvent
	require.Eventually(t, func() bool {
		for _, e := range nodes[0].CatalogDatastores().Datastores[0].History {
			if e.Op == "merge" {
				merge = e
				return true
			}
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "the halves of the load-based split merge back")
	t.Logf("merged back %v after the load stopped (MergeAfter %v)", time.Since(stopped).Round(100*time.Millisecond), mergeAfter)
	assert.True(t, merge.Auto, "the merge is marked automatic: %+v", merge)
	assert.Equal(t, []int{1, auto.Right}, []int{merge.Left, merge.Right}, "the merged pair: the load split's halves")
	assert.GreaterOrEqual(t, time.Since(stopped), mergeAfter, "no merge before the pair was idle for MergeAfter")
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			d, err := n.Datastore(ds)
			if err != nil || len(d.Partitions) != 3 {
				return false
			}
			got := []int{d.Partitions[0].ID, d.Partitions[1].ID, d.Partitions[2].ID}
			return slices.Equal(got, []int{0, manual.Right.ID, 1})
		}, opTimeout, 50*time.Millisecond, "node %s: partitions 0 and %d (the operator's split) and 1 (merged back)", n.ID(), manual.Right.ID)
	}
	time.Sleep(2 * mergeAfter)
	hist := nodes[0].CatalogDatastores().Datastores[0].History
	merges := 0
	for _, e := range hist {
		if e.Op == "merge" {
			merges++
		}
	}
	assert.Equal(t, 1, merges, "merges in the history after another 2 x MergeAfter idle: the operator's split must stay (%+v)", hist)
	requireStrong(t, l, nodes...)
	checkShardLogs(t, spec, l, nodes...)
}

// partitionQuiesce returns raft tunables whose partitions quiesce after d idle (the others:
// clustertest's defaults).
func partitionQuiesce(d time.Duration) partition.Config {
	return partition.Config{QuiesceAfter: d}
}
