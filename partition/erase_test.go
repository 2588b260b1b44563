package partition

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
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
	require.ErrorIs(t, err, command.ErrShardOutOfRange, "EraseRow outside the partition")

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
	assert.Equal(t, command.EraseResult{}, again, "EraseRow again: nothing erased, no tombstone")
}

// A partition move's catch-up replays an erasure it meets in the source's log: the erased
// row's cells copied before are deleted from the target, and the tombstone and the later cells
// are inserted, so the target ends as the source is.
func TestMoveCatchUpErases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := storage.OpenSQLite(ctx, storage.SQLiteConfig{Dir: t.TempDir()})
	require.NoError(t, err, "OpenSQLite")
	defer st.Close()
	dst, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 0}, testShards)
	require.NoError(t, err, "Partition")
	require.NoError(t, dst.EnsureShards(ctx, []int{0}), "EnsureShards")
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	mk := func(row int, col string, added int64) cells.Cell {
		c := testCell(t, row)
		return cells.Cell{Key: cells.Key{RowKey: c.Key.RowKey, ColumnKey: col, RefKey: 1}, Body: c.Body, AddedID: added, CreatedAt: at}
	}
	r1, r2 := testCell(t, 1).Key.RowKey, testCell(t, 2).Key.RowKey
	copied := []cells.Cell{mk(1, "BASE", 1), mk(2, "BASE", 2), mk(1, "STATUS", 3)}
	page := []cells.Cell{mk(2, "STATUS", 4), cells.NewTombstone(r1, 5, at), mk(1, "BASE", 6), cells.NewTombstone(r2, 7, at)}
	mv := &mover{}
	for i, cs := range [][]cells.Cell{copied, page} {
		tx, err := dst.Begin(ctx)
		require.NoError(t, err, "Begin")
		require.NoError(t, mv.insert(ctx, tx, 0, cs), "insert page %d", i)
		require.NoError(t, tx.Commit(), "Commit")
	}
	got, err := dst.ScanShard(ctx, 0, 0, 100)
	require.NoError(t, err, "ScanShard")
	var ids []int64
	for _, c := range got {
		ids = append(ids, c.AddedID)
	}
	assert.Equal(t, []int64{5, 6, 7}, ids, "the target after the catch-up: the tombstones and the cell written after the first")
	_, err = dst.GetCell(ctx, 0, cells.Key{RowKey: r1, ColumnKey: "STATUS", RefKey: 1})
	assert.ErrorIs(t, err, storage.ErrNotFound, "an erased cell copied before the erasure")
}
