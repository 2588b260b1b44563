package partition

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// An erasure is a raft command: applied on every replica, it leaves the same tombstone in
// place of the row's cells everywhere; a follower refuses it, and a second erasure deletes
// nothing.
func TestEraseRowReplicated(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	ctx := context.Background()
	c, other := testCell(t, 1), testCell(t, 2)
	c2 := c
	c2.Key.ColumnKey = "STATUS"
	_, err := g.put(ctx, c, c2, other)
	require.NoError(t, err, "put")
	l := g.leader()
	res, err := l.p.EraseRow(ctx, c.Shard, c.Key.RowKey)
	require.NoError(t, err, "EraseRow on the leader")
	require.Equal(t, 2, res.Erased, "cells erased (%+v)", res)
	require.Positive(t, res.AddedID, "the tombstone's added_id (%+v)", res)
	for _, r := range g.replicas {
		if r == l {
			continue
		}
		_, err := r.p.EraseRow(ctx, c.Shard, c.Key.RowKey)
		require.ErrorIs(t, err, ErrNotLeader, "EraseRow on follower %s", r.id)
	}
	_, err = l.p.EraseRow(ctx, testShards.Last+1, c.Key.RowKey)
	require.ErrorIs(t, err, fsm.ErrShardOutOfRange, "EraseRow outside the partition")

	all := g.sameReplicas()
	var row []cells.Cell
	for _, x := range all {
		if x.RowKey == c.Key.RowKey {
			row = append(row, x)
		}
	}
	require.Len(t, row, 1, "entries of the erased row on the replicas: the tombstone only (%v)", row)
	assert.True(t, row[0].Key.IsTombstone() && row[0].AddedID == res.AddedID, "entry of the erased row: %+v, want the tombstone at %d", row[0], res.AddedID)
	for _, r := range g.running() {
		_, err := r.p.Store().GetCell(ctx, c.Shard, c.Key)
		assert.ErrorIs(t, err, storage.ErrNotFound, "replica %s: the erased cell", r.id)
		_, err = r.p.Store().GetCell(ctx, other.Shard, other.Key)
		assert.NoError(t, err, "replica %s: the other row's cell", r.id)
	}
	again, err := l.p.EraseRow(ctx, c.Shard, c.Key.RowKey)
	require.NoError(t, err, "EraseRow again")
	assert.Equal(t, fsm.EraseResult{}, again, "EraseRow again: nothing erased, no tombstone")
}
