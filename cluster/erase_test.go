package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/replication"
)

// EraseRow through any node reaches the row's leader (forwarded by the others), erases the
// row on every replica, and is idempotent.
func TestEraseRowForwarded(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.SQLite})
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var all []uuid.UUID
	for _, rs := range rows {
		for _, rk := range rs {
			all = append(all, rk)
			_, err := nodes[0].PutCells(ctx, ds, []cells.Cell{newCell(t, rk, "BASE", 1, `{"x":1}`), newCell(t, rk, "STATUS", 1, `{"y":1}`)})
			require.NoError(t, err, "put row %s", rk)
		}
	}
	for i, rk := range all {
		n := nodes[i%len(nodes)] // the leader of the row's partition, or a node that forwards
		res, err := n.EraseRow(ctx, ds, rk)
		require.NoError(t, err, "EraseRow(%s) through %s", rk, n.ID())
		assert.Equal(t, 2, res.Erased, "EraseRow(%s) through %s: erased", rk, n.ID())
		again, err := nodes[(i+1)%len(nodes)].EraseRow(ctx, ds, rk)
		require.NoError(t, err, "EraseRow(%s) again", rk)
		assert.Equal(t, cluster.EraseResult{}, again, "EraseRow(%s) again: nothing", rk)
		for _, m := range nodes {
			got, err := m.GetRow(ctx, ds, rk, cluster.Strong)
			require.NoError(t, err, "GetRow(%s) through %s", rk, m.ID())
			assert.Empty(t, got, "GetRow(%s) through %s after the erasure", rk, m.ID())
		}
	}
	_, err := nodes[0].EraseRow(ctx, "nope", all[0])
	require.ErrorIs(t, err, cluster.ErrUnknownDatastore, "EraseRow in an unknown datastore")
}

// In async mode an erasure is never buffered: with the primary master down it is refused as
// unavailable. Once the master is back it erases the row on the master and deletes the row's
// buffered copies (written while the master was down), so the reaper, which replays the other
// rows' buffered cells, never brings an erased cell back.
func TestAsyncEraseDeletesBufferedCopies(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	set, err := mariadb.StartReplicated(sctx, mariadb.ReplicatedOptions{})
	cancel()
	require.NoError(t, err, "start a replicated set")
	t.Cleanup(func() { _ = set.Close() })
	// A buffered cell is replayed 30s after it was buffered: long enough for the erasure to
	// come first, whatever the time the master takes to restart.
	const replayAfter = 30 * time.Second
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Async, ReplicatedSet: set,
		AsyncCluster: func(set *mariadb.ReplicatedSet) *localcluster.AsyncOptions {
			return &localcluster.AsyncOptions{Prefix: "sl",
				Cluster:   partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond, BreakerTimeout: time.Second},
				Partition: partition.AsyncConfig{ReapInterval: 100 * time.Millisecond, ReplayAfter: replayAfter}}
		}})
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 2)
	erased, kept := rows[0][0], rows[0][1]
	l := newLedger()
	putAsync(t, nodes[0], l, []cells.Cell{newCell(t, erased, "BASE", 1, `{"before":1}`)})
	require.NoError(t, set.WaitCaughtUp(ctx, 0), "minions of c0 catch up")

	require.NoError(t, set.Instance(0, 0).Kill(), "kill the master of c0")
	buffered := time.Now()
	for _, cell := range []cells.Cell{newCell(t, erased, "STATUS", 1, `{"during":1}`), newCell(t, kept, "BASE", 1, `{"during":2}`)} {
		res := putAsync(t, nodes[1], l, []cells.Cell{cell})
		require.Equal(t, cells.StatusBuffered, res[0].Status, "write of %s with the master down", cell.Key)
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = nodes[2].EraseRow(ectx, ds, erased)
	cancel()
	require.ErrorIs(t, err, partition.ErrUnavailable, "erase with the master down: refused, never buffered")
	require.NotErrorIs(t, err, partition.ErrIndeterminate, "erase with the master down: nothing was applied")
	require.Eventually(t, func() bool { return bufferDepth(nodes[0], 0) == 2 }, 10*time.Second, 10*time.Millisecond,
		"the reaper sees the 2 buffered cells; the refused erasure deleted none")

	require.NoError(t, set.Restart(ctx, 0, 0), "restart the master of c0")
	db, err := replication.Open(set.AdminDSN(0, 0))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, replication.MakeMaster(ctx, db), "unfence the master of c0")
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if n.DatastoreReady(ds) != nil || masterBreaker(n, 0) != "closed" {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every node sees the master of c0 again, with its breaker towards it closed")
	require.Less(t, time.Since(buffered), replayAfter, "the master came back before the replays: the test cannot tell")

	var res cluster.EraseResult
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err = nodes[2].EraseRow(ectx, ds, erased)
		assert.NoError(ct, err, "erase with every master up")
	}, 10*time.Second, 100*time.Millisecond, "erase once the master is back")
	require.Equal(t, 1, res.Erased, "erase: the cell on the master (the buffered one counts as erased, not in the count)")
	require.Eventually(t, func() bool { return bufferDepth(nodes[0], 0) == 1 }, 5*time.Second, 10*time.Millisecond,
		"after the erasure the buffer holds the other row's cell only")

	// The reaper replays the other row's buffered cell, and nothing of the erased row.
	l.forgetRow(erased)
	requireAllEventually(t, nodes[0], l, replayAfter+30*time.Second)
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if bufferDepth(n, 0) != 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "the buffers empty")
	for _, n := range nodes {
		got, err := n.GetRow(ctx, ds, erased, cluster.Strong)
		require.NoError(t, err, "GetRow of the erased row through %s", n.ID())
		assert.Empty(t, got, "GetRow of the erased row through %s, after the replays", n.ID())
	}
}

// forgetRow drops the acknowledged cells of row rk (an erased row's) from l.
func (l *ledger) forgetRow(rk uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.cells {
		if k.RowKey == rk {
			delete(l.cells, k)
		}
	}
}
