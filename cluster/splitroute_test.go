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

// TestSplitWritesGoToTheParent: until a split's new partition takes writes, a node sends a
// write for its shards to the parent, which applies it as long as it has not applied the
// split. The catalog of partition 1's leader is held before another node decides a split of it
// at shard 12 (DecideSplit: the catalog only), so the leader neither knows of the split nor
// completes it. A write through the other node to shards 12 to 15, plain and atomic, is then
// applied by partition 1 within 3 s, where routed by the catalog alone it would wait for a new
// partition whose group does not exist yet. Released, the leader completes the split, the
// cells written meanwhile are read back strongly from the new partition, and new writes to its
// shards are applied by it.
func TestSplitWritesGoToTheParent(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble})
	nodes := runningImported(t, c)
	spec := &c.Topology.Datastores[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*opTimeout)
	defer cancel()
	leader, other := leaderAndOther(ctx, t, nodes, 1)
	leader.HoldCatalog(true)
	defer leader.HoldCatalog(false)
	right, err := other.DecideSplit(ctx, ds, 1, 12)
	require.NoError(t, err, "the catalog decides the split of partition 1 at shard 12")
	require.Eventually(t, func() bool { return other.CatalogDatastores().Generation >= 2 }, opTimeout, 20*time.Millisecond)

	moving := func(n int) []uuid.UUID { // rows of shards 12 to 15
		var rows []uuid.UUID
		for len(rows) < n {
			if row := uuid.New(); cells.ShardOf(row, spec.Shards) >= 12 && cells.ShardOf(row, spec.Shards) <= 15 {
				rows = append(rows, row)
			}
		}
		return rows
	}
	l := newLedger()
	write := func(what string, wantPartition int) {
		t.Helper()
		var cs []cells.Cell
		for j, row := range moving(8) {
			cs = append(cs, newCell(t, row, "BASE", 1, fmt.Sprintf(`{"%s":%d}`, what, j)))
		}
		wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
		defer wcancel()
		res, err := other.PutCells(wctx, ds, cs)
		require.NoError(t, err, "%s: a plain write of 8 cells in shards 12 to 15 through %s", what, other.ID())
		for i, r := range res {
			require.Equal(t, cells.StatusCreated, r.Status, "%s: cell %d", what, i)
			l.add(acked{key: cs[i].Key, body: bodyJSON(t, cs[i].Body), addedID: r.AddedID, created: r.CreatedAt})
		}
		tc := newCell(t, moving(1)[0], "BASE", 1, fmt.Sprintf(`{"%s":"atomic"}`, what))
		resp, err := other.Write(wctx, ds, cluster.WriteRequest{Atomic: true, Cells: []cells.Cell{tc}})
		require.NoError(t, err, "%s: an atomic write in shards 12 to 15 through %s", what, other.ID())
		require.True(t, resp.Applied(), "%s: the atomic write is applied: %+v", what, resp.WriteResult)
		assert.Equal(t, wantPartition, resp.Partition, "%s: the partition that applied the atomic write", what)
		l.add(acked{key: tc.Key, body: bodyJSON(t, tc.Body), addedID: resp.Cells[0].AddedID, created: resp.Cells[0].CreatedAt})
	}
	write("before", 1) // the parent applies them: it has not applied the split

	leader.HoldCatalog(false)
	require.Eventually(t, func() bool {
		cfg, err := other.PartitionConfig(ctx, ds, right)
		return err == nil && cfg.Leader != ""
	}, opTimeout, 20*time.Millisecond, "the split completes: partition %d has a leader", right)
	requireStrong(t, l, nodes...) // the cells written to the parent, now in the new partition
	write("after", right)
	requireStrong(t, l, nodes...)
}

// TestReroutedWriteKeepsItsOrigin: a write replicated from another cluster (WriteRequest.Origin)
// whose share a partition refuses as out of range (it split since the node's catalog was
// read) goes again by the newer catalog with its origin: every cell it creates stores it. The
// node writing has its catalog held while partition 1 splits at shard 12, so it sends the
// share of shards 12 to 15 to partition 1, which refuses it; the catalog is released 300 ms
// later, and the node takes it at the next change (a split of partition 0). Sent again without
// its origin (the jepsen replication workload caught this after a load-based split: "11 cells
// with the wrong origin"), the cells would count as written in this cluster, and its streams
// would send them back to their origin.
func TestReroutedWriteKeepsItsOrigin(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble})
	nodes := runningImported(t, c)
	spec := &c.Topology.Datastores[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*opTimeout)
	defer cancel()
	stale, other := nodes[0], nodes[1]
	stale.HoldCatalog(true)
	defer stale.HoldCatalog(false)
	split, err := other.SplitPartition(ctx, ds, 1, wire.SplitRequest{AtShard: 12})
	require.NoError(t, err, "split partition 1 at 12 while %s's catalog is held", stale.ID())
	var cs []cells.Cell
	for j := 0; len(cs) < 8; j++ {
		if row := uuid.New(); cells.ShardOf(row, spec.Shards) >= 12 && cells.ShardOf(row, spec.Shards) <= 15 {
			cs = append(cs, newCell(t, row, "BASE", 1, fmt.Sprintf(`{"replicated":%d}`, j)))
		}
	}
	// Released, the held node takes the catalog at its next change: a split of partition 0.
	released := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		stale.HoldCatalog(false)
		_, err := other.SplitPartition(ctx, ds, 0, wire.SplitRequest{AtShard: 4})
		released <- err
	}()
	resp, err := stale.Write(ctx, ds, cluster.WriteRequest{Cells: cs, Origin: "east"})
	require.NoError(t, err, "a write from cluster east through %s", stale.ID())
	require.True(t, resp.Applied(), "applied: %+v", resp.WriteResult)
	require.NoError(t, <-released, "split partition 0 at 4")
	want := map[uuid.UUID]bool{}
	for i, r := range resp.Cells {
		require.Equal(t, cells.StatusCreated, r.Status, "cell %d", i)
		want[cs[i].RowKey] = true
	}
	var read cluster.LogRead
	for s := 12; s <= 15; s++ {
		read.Shards = append(read.Shards, cluster.ShardLocation{Shard: s})
	}
	read.Limit, read.Consistency = 1000, cluster.Strong
	pages, err := other.ReadLogs(ctx, ds, read)
	require.NoError(t, err, "read the logs of shards 12 to 15 (partition %d)", split.Right.ID)
	found := 0
	for _, p := range pages {
		for _, c := range p.Cells {
			if want[c.RowKey] {
				found++
				assert.Equal(t, "east", c.Origin, "the origin of %s", c.Key)
			}
		}
	}
	assert.Equal(t, len(cs), found, "every cell of the write in the new partition's logs")
}
