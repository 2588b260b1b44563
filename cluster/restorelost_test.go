package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestoreCellsLost is the probe of issue 19 (item 5) at the node's level: a cell written
// after a backup is not dropped by a forced restore (a *CellsLostError counting it, nothing
// changed), a dry run counts it and changes nothing, a restore accepting another count is
// refused, and one accepting 1 drops it. Restores go through a node that does not lead the
// partition, so the options and the refusal cross the node RPC.
func TestRestoreCellsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc := partition.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond}
	a := clustertest.Start(t, clustertest.Options{Partition: pc})
	spec := &a.Topology.Datastores[0]
	nodes := running(a)
	rows := rowsPerPartition(t, spec, t.Name(), 21)[0]
	var cs []cells.Cell
	for i, row := range rows[:20] {
		cs = append(cs, newCell(t, row, "BASE", 1, fmt.Sprintf(`{"i":%d}`, i)))
	}
	putAll(t, nodes[0], nil, cs)
	var backup bytes.Buffer
	info, err := nodes[1].Backup(ctx, ds, spec.Partitions[0].ID, &backup)
	require.NoError(t, err, "backup")
	require.Equal(t, int64(len(cs)), info.Cells, "backup: cells")
	late := newCell(t, rows[20], "BASE", 1, `{"late":true}`)
	putAll(t, nodes[2], nil, []cells.Cell{late})
	lateShard := cells.ShardOf(late.RowKey, spec.Shards)
	lateThere := func(what string) bool {
		for _, c := range scanShard(t, ctx, nodes[0], lateShard, cluster.Strong) {
			if c.Key == late.Key {
				return true
			}
		}
		return false
	}

	via := a.Node((a.LeaderOf(0) + 1) % len(nodes))
	restore := func(opts cluster.RestoreOptions) (cluster.RestoreResult, error) {
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		defer rcancel()
		return via.Restore(rctx, ds, spec.Partitions[0].ID, bytes.NewReader(backup.Bytes()), opts)
	}
	n := func(v int64) *int64 { return &v }

	// Before issue 19 this succeeded and the late cell was gone.
	_, err = restore(cluster.RestoreOptions{Force: true})
	var cle *cluster.CellsLostError
	require.ErrorAs(t, err, &cle, "forced restore dropping a cell")
	assert.ErrorIs(t, err, cluster.ErrCellsLost)
	assert.Equal(t, cluster.CellsLostError{Lost: 1}, *cle, "forced restore: the refusal")
	require.True(t, lateThere("after the forced restore"), "the late cell after the refused forced restore")

	res, err := restore(cluster.RestoreOptions{DryRun: true})
	require.NoError(t, err, "dry run")
	assert.True(t, res.DryRun, "dry run: DryRun")
	assert.Equal(t, int64(1), res.CellsLost, "dry run: cells lost")
	assert.Equal(t, int64(len(cs)+1), res.TargetCells, "dry run: target cells")
	assert.Equal(t, info, res.Backup, "dry run: the backup's info")
	require.True(t, lateThere("after the dry run"), "the late cell after the dry run")

	for _, accept := range []int64{0, 2} {
		_, err = restore(cluster.RestoreOptions{AcceptLostCells: n(accept)})
		require.ErrorAs(t, err, &cle, "restore accepting %d", accept)
		assert.Equal(t, cluster.CellsLostError{Lost: 1, Accepted: n(accept)}, *cle, "restore accepting %d: the refusal", accept)
		require.True(t, lateThere("after a refused restore"), "the late cell after the restore accepting %d", accept)
	}

	res, err = restore(cluster.RestoreOptions{AcceptLostCells: n(1)})
	require.NoError(t, err, "restore accepting the lost cell")
	assert.False(t, res.DryRun, "restore: DryRun")
	assert.Equal(t, int64(1), res.CellsLost, "restore: cells lost")
	assert.Equal(t, int64(len(cs)+1), res.TargetCells, "restore: cells replaced")
	require.Eventually(t, func() bool { return !lateThere("after the restore") }, opTimeout, 50*time.Millisecond, "the late cell is gone")
	require.Len(t, scanShard(t, ctx, nodes[1], cells.ShardOf(rows[0], spec.Shards), cluster.Strong), countShard(cs, cells.ShardOf(rows[0], spec.Shards), spec.Shards), "a restored shard")

	// Force alone now: every cell of the partition is in the backup.
	res, err = restore(cluster.RestoreOptions{Force: true})
	require.NoError(t, err, "forced restore of the same backup")
	assert.Equal(t, int64(0), res.CellsLost, "forced restore of the same backup: cells lost")
	_, err = restore(cluster.RestoreOptions{AcceptLostCells: n(-1)})
	assert.ErrorIs(t, err, cluster.ErrBadRPC, "a negative count")

}

// countShard counts the cells of cs in shard.
func countShard(cs []cells.Cell, shard, shards int) int {
	n := 0
	for _, c := range cs {
		if cells.ShardOf(c.RowKey, shards) == shard {
			n++
		}
	}
	return n
}
