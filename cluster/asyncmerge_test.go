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
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// TestAsyncMerge splits partition 0 of an async datastore (on storage cluster c0) and moves
// its right half to c2, then merges the halves back under continuous writes through every
// node in both halves' rows, and consumer-group and index commands of a group coordinated by
// the right half: the merge first moves the right half back onto c0 (the left one's cluster),
// then joins the two in place. It checks: no write fails; every acknowledged cell is readable
// (strong) with its added_id, every shard's log is dense and holds exactly the acknowledged
// cells; the group's offsets (its state came from the right half) and the index entries are
// all there; the catalog lists partition 0 with its whole range again, the merge in its
// history; the right half's cells are on c0. A stale node serving the right half, one that
// never learns of the merge, is refused a write and a strong read afterwards
// (command.ErrShardOutOfRange), and its refused write is stored nowhere.
func TestAsyncMerge(t *testing.T) {
	c, set := startAsyncSpare(t)
	spec := &c.Topology.Datastores[0]
	parent := spec.Partitions[0].Shards()
	nodes := running(c)
	// Rows of the parent's range: the load writes into both halves.
	rows := rowsPerPartition(t, spec, t.Name(), 16)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	split, err := nodes[0].SplitPartition(ctx, ds, 0, wire.SplitRequest{To: "c2", DropOld: true})
	require.NoError(t, err, "split partition 0 and move its right half to c2")
	require.NotNil(t, split.Move, "the split's move")
	require.Empty(t, split.Move.Error, "the split's move")
	right := split.Right.ID
	at := split.Right.FirstShard

	// A stale node serving the right half; it writes before the merge, so its state machine
	// knows the partition by then.
	stale := openStaleAsync(t, spec, right, cells.ShardRange{First: at, Last: parent.Last})
	staleRow := rows[0][0]
	for _, r := range rows[0] {
		if cells.ShardOf(r, spec.Shards) >= at {
			staleRow = r
		}
	}
	require.GreaterOrEqual(t, cells.ShardOf(staleRow, spec.Shards), at, "a row of the right half")
	l := newLedger()
	first := newCell(t, staleRow, "STALE", 0, `{"stale":0}`)
	shard := cells.ShardOf(first.RowKey, spec.Shards)
	sr, err := stale.Put(ctx, command.Write{Cells: []command.Cell{{Shard: shard, Key: first.Key, Body: first.Body}}})
	require.NoError(t, err, "the stale node's write before the merge")
	body, _ := first.Body.JSON()
	l.add(acked{key: first.Key, body: string(body), addedID: sr.Cells[0].AddedID, created: sr.Cells[0].CreatedAt})

	group := ""
	for i := 0; group == "" || cluster.CoordinatorShard(group, spec.Shards) < at || cluster.CoordinatorShard(group, spec.Shards) > parent.Last; i++ {
		group = fmt.Sprintf("billing%d", i)
	}
	for i := 0; i < 200; i += 100 {
		var cs []cells.Cell
		for j := i; j < i+100; j++ {
			cs = append(cs, newCell(t, rows[0][j%len(rows[0])], "BASE", int64(j), fmt.Sprintf(`{"before":%d}`, j)))
		}
		putAsync(t, nodes[i/100], l, cs)
	}
	ks := startKVLoad(t, nodes, spec, group)
	ld := startMoveLoad(nodes, rows, l)
	ld.requireAcks(t, ld.acked(), 20, "before the merge")

	m, err := nodes[1].MergePartitions(ctx, ds, 0, right)
	require.NoError(t, err, "merge the halves back")
	t.Logf("merge: %+v; move: %+v", m, m.Move)
	assert.Equal(t, []int{0, parent.First, parent.Last}, []int{m.Merged.ID, m.Merged.FirstShard, m.Merged.LastShard}, "the merged partition")
	if assert.NotNil(t, m.Move, "the right half's move onto c0 first") {
		assert.True(t, m.Move.From == "c2" && m.Move.To == "c0" && m.Move.Error == "", "move: %+v, want from c2 to c0", m.Move)
	}
	ld.requireAcks(t, ld.acked(), 20, "after the merge")
	ld.halt()
	ks.halt()
	t.Logf("load: %d writes, %d retried by the client, %d buffered, %d failed", ld.writes.Load(), ld.retries.Load(), ld.buffered.Load(), ld.failures.Load())
	require.Zero(t, ld.failures.Load(), "writes failed during the merge; first: %v", ld.firstFailure.Load())

	cat := nodes[2].CatalogDatastores()
	require.Len(t, cat.Datastores, 1)
	hist := cat.Datastores[0].History
	require.NotEmpty(t, hist)
	assert.Equal(t, "merge", hist[len(hist)-1].Op, "the last event of the history")
	after := nodes[0].Topology()
	var merged *cells.ShardRange
	for i := range after.Datastores {
		if d := &after.Datastores[i]; d.Name == ds {
			require.Len(t, d.Partitions, 2, "partitions after the merge")
			r := d.PartitionByID(0).Shards()
			merged = &r
			for _, n := range nodes {
				requireAcked(t, n, l, 30*time.Second)
			}
			for p := range d.Partitions {
				requireDenseLogs(t, d, p, nodes[p%3], l)
			}
		}
	}
	require.NotNil(t, merged)
	assert.Equal(t, parent, *merged, "partition 0's range after the merge")
	ks.check(t, nodes)
	c0 := masterDB(t, set, 0)
	require.NotZero(t, cellOn(t, c0, shard, first.Key), "the right half's cell (shard %d) on c0's master", shard)

	k := cells.Key{RowKey: staleRow, ColumnKey: "STALE", RefKey: 1}
	_, err = stale.Put(ctx, command.Write{Cells: []command.Cell{{Shard: shard, Key: k, Body: first.Body}}})
	require.ErrorIs(t, err, command.ErrShardOutOfRange, "a stale node's write in shard %d after the merge", shard)
	_, err = stale.Read(ctx, partition.Strong, partition.ReadRequest{Get: &partition.GetRead{Keys: []partition.GetKey{{Shard: shard, Key: first.Key}}}})
	require.ErrorIs(t, err, command.ErrShardOutOfRange, "a stale node's strong read in shard %d after the merge", shard)
	// The group's state went to partition 0 with the merge: a command or read of it through the
	// stale node would see the copy left in the right half.
	_, err = stale.ApplyGroup(ctx, group, consumer.Command{Op: consumer.OpCommit, Worker: "a", Shards: spec.Shards,
		Commits: []consumer.Offset{{Shard: at, Epoch: 1, Offset: ks.offset + 1000}}})
	require.ErrorIs(t, err, command.ErrShardOutOfRange, "a stale node's commit in group %s (coordinated by shard %d) after the merge", group, cluster.CoordinatorShard(group, spec.Shards))
	_, err = stale.Read(ctx, partition.Strong, partition.ReadRequest{Group: &partition.GroupRead{Group: group, Shards: spec.Shards}})
	require.ErrorIs(t, err, command.ErrShardOutOfRange, "a stale node's strong read of group %s after the merge", group)
	c2 := masterDB(t, set, 2)
	require.Never(t, func() bool { return cellOn(t, c0, shard, k) != 0 || cellOn(t, c2, shard, k) != 0 }, 2*time.Second, 100*time.Millisecond,
		"the stale node's refused write was stored on c0 or c2")

	t.Run("UnrecordedMergeUndone", func(t *testing.T) { testUnrecordedAsyncMerge(t, nodes, rows[0], l) })
}

// testUnrecordedAsyncMerge splits partition 0 in place again, then merges the halves with a
// Commit that fails, as a catalog that moved on would refuse it: the merge is undone on the
// master, and both halves take writes in every shard of their ranges afterwards. Partitions on
// two storage clusters are refused without a MoveRight (partition.ErrAsyncMergeApart).
func testUnrecordedAsyncMerge(t *testing.T, nodes []*cluster.Node, rows []uuid.UUID, l *ledger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	split, err := nodes[0].SplitPartition(ctx, ds, 0, wire.SplitRequest{})
	require.NoError(t, err, "split partition 0 in place")
	var spec *topology.DatastoreSpec
	require.Eventually(t, func() bool {
		top := nodes[2].Topology()
		for i := range top.Datastores {
			if d := &top.Datastores[i]; d.Name == ds && d.PartitionByID(split.Right.ID) != nil {
				spec = d
			}
		}
		return spec != nil
	}, opTimeout, 10*time.Millisecond, "node %s learns of the split", nodes[2].ID())
	commit := func(context.Context, string) error { return nil }
	_, err = partition.MergeAsync(ctx, partition.AsyncMerge{Datastore: spec, Left: split.Right.ID, Right: 1, Commit: commit})
	require.ErrorIs(t, err, partition.ErrAsyncMergeApart, "a merge of partitions on c0 and c1 without a move")
	refused := errors.New("catalog refused the merge")
	_, err = partition.MergeAsync(ctx, partition.AsyncMerge{Datastore: spec, Left: 0, Right: split.Right.ID,
		Commit: func(context.Context, string) error { return refused }})
	require.ErrorIs(t, err, refused, "a merge the catalog refused")
	require.ErrorContains(t, err, "undone", "a merge the catalog refused")
	halves := map[bool]bool{}
	var cs []cells.Cell
	for i, row := range rows {
		cs = append(cs, newCell(t, row, "UNDONE", int64(i), `{"undone":true}`))
		halves[cells.ShardOf(row, spec.Shards) >= split.Right.FirstShard] = true
	}
	require.Len(t, halves, 2, "rows in both halves")
	for i, res := range putAsync(t, nodes[1], l, cs) {
		assert.Equal(t, cells.StatusCreated, res.Status, "write %d to a half after the undone merge", i)
	}
	requireAcked(t, nodes[0], l, 30*time.Second)
}
