package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// TestAsyncSplitAndMove splits partition 0 of an async datastore (on storage cluster c0) in
// place and moves its right half to the spare cluster c2, in one admin call, under continuous
// writes through every node and consumer-group and index commands on partition 0, and checks:
// no write fails; every acknowledged cell is readable (strong) with its added_id, every
// shard's log is dense and holds exactly the acknowledged cells; the group's offsets and the
// index entries are all there; the right half's shards are on c2's master and gone from c0's,
// the left half's stay on c0; every node serves the halves from c0 and c2. Then a stale node,
// one serving the parent with its range before the split, is refused a write and a strong read
// of the right half's shards (command.ErrShardOutOfRange, nothing written), and a split the
// catalog does not record is undone on the master (the parent takes writes to all its shards).
func TestAsyncSplitAndMove(t *testing.T) {
	c, set := startAsyncSpare(t)
	spec := &c.Topology.Datastores[0]
	parent := spec.Partitions[0].Shards()
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 16)
	l := newLedger()

	before, ks, ld := loadPartitionZero(t, nodes, spec, rows, l, 300, "before the split")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A stale node: it serves partition 0 with the parent's range and never learns of the
	// split. It writes before the split, so its state machine knows the partition by then.
	stale := openStaleAsync(t, spec, 0, parent)
	first := newCell(t, rows[0][0], "STALE", 0, `{"stale":0}`)
	sr, err := stale.Put(ctx, command.Write{Cells: []command.Cell{{Shard: cells.ShardOf(first.RowKey, spec.Shards), Key: first.Key, Body: first.Body}}})
	require.NoError(t, err, "the stale node's write before the split")
	require.Equal(t, cells.StatusCreated, sr.Cells[0].Status, "the stale node's write before the split")
	body, _ := first.Body.JSON()
	l.add(acked{key: first.Key, body: string(body), addedID: sr.Cells[0].AddedID, created: sr.Cells[0].CreatedAt})

	res, err := nodes[1].SplitPartition(ctx, ds, 0, wire.SplitRequest{To: "c2", DropOld: true})
	require.NoError(t, err, "split partition 0 and move its right half to c2")
	t.Logf("split: %+v; move: %+v", res, res.Move)
	at := parent.First + parent.Len()/2
	require.True(t, res.Left.ID == 0 && res.Left.LastShard == at-1 && res.Right.FirstShard == at && res.Right.LastShard == parent.Last,
		"split halves: %+v and %+v, want 0 holding %d..%d and a new one %d..%d", res.Left, res.Right, parent.First, at-1, at, parent.Last)
	require.NotNil(t, res.Move, "the answer's move of the right half")
	require.Empty(t, res.Move.Error, "the move of the right half")
	require.True(t, res.Move.From == "c0" && res.Move.To == "c2" && res.Move.Drained && res.Move.Dropped,
		"move: %+v, want from c0 to c2, drained, old copy dropped", res.Move)
	ld.requireAcks(t, ld.acked(), 20, "after the split and move")
	ld.halt()
	ks.halt()
	t.Logf("load: %d writes, %d retried by the client, %d buffered, %d failed", ld.writes.Load(), ld.retries.Load(), ld.buffered.Load(), ld.failures.Load())
	require.Zero(t, ld.failures.Load(), "writes failed during the split and move; first: %v", ld.firstFailure.Load())

	now := nodes[0].Topology()
	var after *topology.DatastoreSpec
	for i := range now.Datastores {
		if now.Datastores[i].Name == ds {
			after = &now.Datastores[i]
		}
	}
	require.NotNil(t, after, "the datastore after the split")
	require.Len(t, after.Partitions, 3, "partitions after the split")
	right := res.Right.ID
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			for _, r := range n.Replicas() {
				want := map[int]string{0: "c0", right: "c2", 1: "c1"}[r.Partition]
				if r.Async == nil || r.Async.Cluster != want {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "every node serves partition 0 from c0, %d from c2, 1 from c1", right)
	for _, n := range nodes {
		requireAcked(t, n, l, 30*time.Second)
	}
	for p := range after.Partitions {
		requireDenseLogs(t, after, p, nodes[p%3], l)
	}
	ks.check(t, nodes)

	c0, c2 := masterDB(t, set, 0), masterDB(t, set, 2)
	var movedCell, stayed cells.Cell
	for _, bc := range before {
		if s := cells.ShardOf(bc.RowKey, spec.Shards); s >= at {
			movedCell = bc
		} else {
			stayed = bc
		}
	}
	ms, ss := cells.ShardOf(movedCell.RowKey, spec.Shards), cells.ShardOf(stayed.RowKey, spec.Shards)
	require.NotZero(t, cellOn(t, c2, ms, movedCell.Key), "a cell of the right half (shard %d) on c2's master", ms)
	require.Zero(t, cellOn(t, c0, ms, movedCell.Key), "a cell of the right half (shard %d) on c0's master after the drop", ms)
	require.NotZero(t, cellOn(t, c0, ss, stayed.Key), "a cell of the left half (shard %d) on c0's master", ss)

	t.Run("StaleNodeRefused", func(t *testing.T) { testStaleAsyncSplit(t, spec, stale, movedCell, c0, c2) })
	t.Run("UnrecordedSplitUndone", func(t *testing.T) { testUnrecordedAsyncSplit(t, after, nodes, rows[1], l) })
}

// openStaleAsync opens partition pid of the datastore as a node that never reads the catalog
// would serve it, with range r, on storage clusters of its own (closed with the test).
func openStaleAsync(t *testing.T, spec *topology.DatastoreSpec, pid int, r cells.ShardRange) *partition.Async {
	t.Helper()
	var clusters []*partition.StorageCluster
	for _, sc := range spec.StorageClusters {
		sc, err := partition.OpenCluster(partition.ClusterConfig{Name: sc.Name, Members: sc.Members(), Prefix: "sl", ProbeInterval: 200 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { sc.Close() })
		clusters = append(clusters, sc)
	}
	stale, err := partition.OpenAsync(partition.AsyncConfig{Datastore: ds, Partition: pid, Shards: r,
		Primary: clusters[0], Buffers: clusters[1:], BufferCopies: 1, ReapInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { stale.Close() })
	return stale
}

// testStaleAsyncSplit writes and reads through stale (openStaleAsync, opened before the split
// with the parent's range) in the right half's shards: its write is refused as out of range
// and written nowhere (its buffered copy deleted), its strong read too.
func testStaleAsyncSplit(t *testing.T, spec *topology.DatastoreSpec, stale *partition.Async, moved cells.Cell, c0, c2 *sql.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shard := cells.ShardOf(moved.RowKey, spec.Shards)
	k := cells.Key{RowKey: moved.RowKey, ColumnKey: "STALE", RefKey: 1}
	_, err := stale.Put(ctx, command.Write{Cells: []command.Cell{{Shard: shard, Key: k, Body: moved.Body}}})
	require.ErrorIs(t, err, command.ErrShardOutOfRange, "a stale node's write in shard %d, moved by the split", shard)
	_, err = stale.Read(ctx, partition.Strong, partition.ReadRequest{Get: &partition.GetRead{Keys: []partition.GetKey{{Shard: shard, Key: moved.Key}}}})
	require.ErrorIs(t, err, command.ErrShardOutOfRange, "a stale node's strong read in shard %d, moved by the split", shard)
	// Time passing is the point: no reaper may replay the refused write anywhere.
	require.Never(t, func() bool { return cellOn(t, c0, shard, k) != 0 || cellOn(t, c2, shard, k) != 0 }, 2*time.Second, 100*time.Millisecond,
		"the stale node's refused write was stored on c0 or c2")
}

// testUnrecordedAsyncSplit splits partition 1 (on c1) with a Commit that fails, as a catalog
// that moved on would refuse it: the split is undone on the master, and the partition takes
// writes in every shard of its range afterwards.
func testUnrecordedAsyncSplit(t *testing.T, spec *topology.DatastoreSpec, nodes []*cluster.Node, rows []uuid.UUID, l *ledger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p1 := spec.PartitionByID(1)
	require.NotNil(t, p1, "partition 1")
	refused := errors.New("catalog refused the split")
	r := p1.Shards()
	_, err := partition.SplitAsync(ctx, partition.AsyncSplit{Datastore: spec, Partition: 1, AtShard: r.First + 1, Right: 99,
		Commit: func(context.Context, string) error { return refused }})
	require.ErrorIs(t, err, refused, "a split the catalog refused")
	require.ErrorContains(t, err, "undone", "a split the catalog refused")
	shards := map[int]bool{}
	var cs []cells.Cell
	for i, row := range rows {
		cs = append(cs, newCell(t, row, "UNDONE", int64(i), `{"undone":true}`))
		shards[cells.ShardOf(row, spec.Shards)] = true
	}
	require.Greater(t, len(shards), 1, "rows of partition 1 in more than one shard")
	for i, res := range putAsync(t, nodes[2], l, cs) {
		assert.Equal(t, cells.StatusCreated, res.Status, "write %d to partition 1 after the undone split", i)
	}
}
