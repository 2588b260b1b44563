package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// entityRows counts the rows of rowKey in shard's entity table, straight from SQL (pebble: its
// unique keys): an erased row's cells must be gone from the table, not hidden by the reads.
func entityRows(t testing.TB, p *PartitionStore, shard int, rowKey uuid.UUID) int {
	t.Helper()
	var n int
	if p.pb != nil {
		it, err := prefixIter(p.pb.db, p.pb.rowPrefix(shard, rowKey, nil))
		require.NoError(t, err)
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		require.NoError(t, it.Close())
		return n
	}
	require.NoError(t, p.read.QueryRow("SELECT COUNT(*) FROM "+p.d.entity(shard)+" WHERE row_key = ?", rowKey[:]).Scan(&n),
		"count rows of %s in shard %d", rowKey, shard)
	return n
}

// erase erases rowKey from shard in one write transaction, appending a tombstone at added_id
// when the erasure deleted a cell (as the FSM does), and returns how many cells it deleted.
func erase(t testing.TB, p *PartitionStore, shard int, rowKey uuid.UUID, added int64, a AppliedState) int {
	t.Helper()
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	require.NoError(t, err, "Begin")
	defer tx.Rollback()
	n, err := tx.EraseRow(ctx, shard, rowKey)
	require.NoError(t, err, "EraseRow(%d, %s)", shard, rowKey)
	if n > 0 {
		require.NoError(t, tx.Insert(ctx, shard, []cells.Cell{cells.NewTombstone(rowKey, added, baseTime)}), "insert the tombstone")
	}
	require.NoError(t, tx.SetApplied(ctx, a), "SetApplied")
	require.NoError(t, tx.Commit(), "Commit")
	return n
}

// EraseRow deletes the rows of the row's cells from the entity table on both engines; the
// tombstone takes their place in the shard's log, reads other than the log never show it, the
// other rows are untouched, erasing again deletes nothing, and the row can be written again.
func TestEraseRow(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		t.Parallel()
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 3)
		gone := []cells.Cell{mkCell(t, 1, "BASE", 1, 1), mkCell(t, 1, "BASE", 2, 3), mkCell(t, 1, "STATUS", 1, 4)}
		kept := []cells.Cell{mkCell(t, 2, "BASE", 1, 2), mkCell(t, 2, "STATUS", 7, 5)}
		write(t, p, map[int][]cells.Cell{0: sortByAddedID(append(append([]cells.Cell{}, gone...), kept...))}, AppliedState{Index: 1, Term: 1})
		require.Equal(t, 3, entityRows(t, p, 0, rowKey(1)), "rows of row 1 before the erasure")

		require.Equal(t, 3, erase(t, p, 0, rowKey(1), 6, AppliedState{Index: 2, Term: 1}), "cells erased")
		assert.Equal(t, 1, entityRows(t, p, 0, rowKey(1)), "rows of row 1 after the erasure: the tombstone only")
		for _, c := range gone {
			assert.ErrorIs(t, errOf(p.GetCell(ctx, 0, c.Key)), ErrNotFound, "GetCell(%s) after the erasure", c.Key)
			assert.ErrorIs(t, errOf(p.GetLatest(ctx, 0, c.RowKey, c.ColumnKey)), ErrNotFound, "GetLatest(%s) after the erasure", c.Key)
			vs, err := p.GetVersions(ctx, 0, c.RowKey, c.ColumnKey, nil, 10, false)
			require.NoError(t, err, "GetVersions(%s)", c.Key)
			assert.Empty(t, vs, "GetVersions(%s) after the erasure", c.Key)
		}
		row, err := p.GetRow(ctx, 0, rowKey(1))
		require.NoError(t, err, "GetRow(row 1)")
		assert.Empty(t, row, "GetRow(row 1) after the erasure: no cell, no tombstone")
		got, found, _, err := p.GetSnapshot(ctx, []SnapshotKey{{Shard: 0, Key: gone[0].Key}, {Shard: 0, Key: gone[2].Key, Latest: true}, {Shard: 0, Key: kept[0].Key}})
		require.NoError(t, err, "GetSnapshot")
		assert.Equal(t, []bool{false, false, true}, found, "GetSnapshot: found")
		checkCell(t, "GetSnapshot of row 2", got[2], kept[0])
		other, err := p.GetRow(ctx, 0, rowKey(2))
		require.NoError(t, err, "GetRow(row 2)")
		checkCells(t, "GetRow(row 2), untouched", other, kept)

		// The log: the other row's cells, then the tombstone at the next added_id; a reader of
		// one column sees the tombstone too.
		ts := cells.NewTombstone(rowKey(1), 6, baseTime)
		checkCells(t, "shard log after the erasure", scanAll(t, p, 0, 10), append(append([]cells.Cell{}, kept...), ts))
		cs, next, high, err := p.ReadLog(ctx, 0, 0, "BASE", 10)
		require.NoError(t, err, "ReadLog(column BASE)")
		checkCells(t, "ReadLog(column BASE)", cs, []cells.Cell{kept[0], ts})
		assert.Equal(t, [2]int64{6, 6}, [2]int64{next, high}, "ReadLog(column BASE): next, high")
		max, err := p.MaxAddedID(ctx, 0)
		require.NoError(t, err, "MaxAddedID")
		assert.EqualValues(t, 6, max, "MaxAddedID: the tombstone's")

		// Erasing again, an unknown row, a shard with no tables: nothing to delete.
		assert.Zero(t, erase(t, p, 0, rowKey(1), 7, AppliedState{Index: 3, Term: 1}), "erase again")
		assert.Zero(t, erase(t, p, 0, rowKey(3), 7, AppliedState{Index: 4, Term: 1}), "erase a row never written")
		assert.Zero(t, erase(t, p, 1, rowKey(1), 1, AppliedState{Index: 5, Term: 1}), "erase in a shard with no tables")
		require.False(t, tableExists(t, p, 1), "an erasure creates no shard table")

		// A write of an erased key after the erasure is a new cell; a second erasure deletes it
		// and keeps the first tombstone.
		again := mkCell(t, 1, "BASE", 1, 7)
		write(t, p, map[int][]cells.Cell{0: {again}}, AppliedState{Index: 6, Term: 1})
		got1, err := p.GetCell(ctx, 0, again.Key)
		require.NoError(t, err, "GetCell(%s) written after the erasure", again.Key)
		checkCell(t, "the cell written after the erasure", got1, again)
		require.Equal(t, 1, erase(t, p, 0, rowKey(1), 8, AppliedState{Index: 7, Term: 1}), "erase the new cell")
		assert.Equal(t, 2, entityRows(t, p, 0, rowKey(1)), "rows of row 1 after the second erasure: two tombstones")
		log := scanAll(t, p, 0, 10)
		require.Len(t, log, 4, "shard log after the second erasure: %v", log)
		checkCell(t, "second tombstone", log[3], cells.NewTombstone(rowKey(1), 8, baseTime))
	})
}

// A rolled-back erasure leaves the cells where they were.
func TestEraseRowRollback(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		t.Parallel()
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		c := mkCell(t, 1, "BASE", 1, 1)
		write(t, p, map[int][]cells.Cell{0: {c}}, AppliedState{Index: 1, Term: 1})
		tx, err := p.Begin(ctx)
		require.NoError(t, err, "Begin")
		n, err := tx.EraseRow(ctx, 0, rowKey(1))
		require.NoError(t, err, "EraseRow")
		require.Equal(t, 1, n, "EraseRow: deleted")
		_, err = tx.EraseRow(ctx, 1, rowKey(1))
		require.ErrorIs(t, err, ErrShardRange, "EraseRow outside the range")
		require.NoError(t, tx.Rollback(), "Rollback")
		got, err := p.GetCell(ctx, 0, c.Key)
		require.NoError(t, err, "GetCell after the rollback")
		checkCell(t, "after the rollback", got, c)
		_, err = tx.EraseRow(ctx, 0, rowKey(1))
		require.ErrorIs(t, err, ErrClosed, "EraseRow after Rollback")
	})
}

// DeleteIndexEntries deletes a row's entries from the index's table on every shard of the
// partition holding one, and from no other index.
func TestDeleteIndexEntries(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		t.Parallel()
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 3)
		a := IndexTable{Name: "a_v1", Columns: []IndexColumn{{"city", IndexString}, {"n", IndexInt}}}
		b := IndexTable{Name: "b_v1", Columns: []IndexColumn{{"city", IndexString}}}
		require.NoError(t, p.EnsureIndex(ctx, a, []int{0, 2}), "EnsureIndex(a)")
		require.NoError(t, p.EnsureIndex(ctx, b, []int{1}), "EnsureIndex(b)")
		entry := func(row int, cols int) IndexEntry {
			vs := []any{fmt.Sprint("city", row), int64(row)}
			return IndexEntry{RowKey: rowKey(row), Values: vs[:cols], Refs: []byte{1}}
		}
		tx, err := p.Begin(ctx)
		require.NoError(t, err, "Begin")
		require.NoError(t, tx.UpsertIndex(ctx, 0, a, []IndexEntry{entry(1, 2), entry(2, 2)}), "upsert a, shard 0")
		require.NoError(t, tx.UpsertIndex(ctx, 2, a, []IndexEntry{entry(1, 2), entry(3, 2)}), "upsert a, shard 2")
		require.NoError(t, tx.UpsertIndex(ctx, 1, b, []IndexEntry{entry(1, 1)}), "upsert b, shard 1")
		require.NoError(t, tx.Commit(), "Commit")

		tx, err = p.Begin(ctx)
		require.NoError(t, err, "Begin")
		defer tx.Rollback()
		n, err := tx.DeleteIndexEntries(ctx, "a_v1", []uuid.UUID{rowKey(1), rowKey(9)})
		require.NoError(t, err, "DeleteIndexEntries(a, row 1)")
		assert.Equal(t, 2, n, "entries of row 1 deleted from a (shards 0 and 2)")
		n, err = tx.DeleteIndexEntries(ctx, "nope_v1", []uuid.UUID{rowKey(1)})
		require.NoError(t, err, "DeleteIndexEntries of an index with no table")
		assert.Zero(t, n, "entries deleted from an index with no table")
		_, err = tx.DeleteIndexEntries(ctx, "Bad-Name", []uuid.UUID{rowKey(1)})
		require.ErrorIs(t, err, ErrInvalidConfig, "DeleteIndexEntries with a bad name")
		for shard, want := range map[int][]uuid.UUID{0: {rowKey(2)}, 2: {rowKey(3)}} {
			found, err := tx.LookupIndex(ctx, shard, a, []uuid.UUID{rowKey(1), rowKey(2), rowKey(3)})
			require.NoError(t, err, "LookupIndex(a, shard %d)", shard)
			var got []uuid.UUID
			for rk := range found {
				got = append(got, rk)
			}
			assert.ElementsMatch(t, want, got, "entries of a left in shard %d", shard)
		}
		found, err := tx.LookupIndex(ctx, 1, b, []uuid.UUID{rowKey(1)})
		require.NoError(t, err, "LookupIndex(b)")
		assert.Len(t, found, 1, "index b keeps row 1's entry")
		require.NoError(t, tx.Commit(), "Commit")
	})
}

// DeleteBufferedRow deletes every buffered cell of a row in one datastore; StillBuffered tells
// which rows are left.
func TestDeleteBufferedRow(t *testing.T) {
	t.Parallel()
	s := mysqlEnv(t).open(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	put := func(ds string, row int, col string) {
		t.Helper()
		c := mkCell(t, row, col, 1, 0)
		c.CreatedAt = at
		_, _, err := s.PutBuffered(ctx, BufferedCell{Datastore: ds, Partition: 0, Shard: 0, Cell: c})
		require.NoError(t, err, "buffer %s row %d %s", ds, row, col)
	}
	put("trips", 1, "BASE")
	put("trips", 1, "STATUS")
	put("trips", 2, "BASE")
	put("rides", 1, "BASE")
	before, err := s.ScanBuffered(ctx, "trips", cells.ShardRange{}, 0, 10)
	require.NoError(t, err, "scan")
	require.Len(t, before, 3, "buffered trips cells")
	n, err := s.DeleteBufferedRow(ctx, "trips", rowKey(1))
	require.NoError(t, err, "DeleteBufferedRow")
	assert.EqualValues(t, 2, n, "buffered cells of row 1 deleted")
	after, err := s.ScanBuffered(ctx, "trips", cells.ShardRange{}, 0, 10)
	require.NoError(t, err, "scan")
	require.Len(t, after, 1, "buffered trips cells left: %+v", after)
	assert.Equal(t, rowKey(2), after[0].Cell.RowKey, "the other row's cell is left")
	rides, err := s.ScanBuffered(ctx, "rides", cells.ShardRange{}, 0, 10)
	require.NoError(t, err, "scan rides")
	assert.Len(t, rides, 1, "another datastore's cell of the same row is left")
	ids := []int64{before[0].ID, before[1].ID, before[2].ID}
	still, err := s.StillBuffered(ctx, ids)
	require.NoError(t, err, "StillBuffered")
	assert.Equal(t, map[int64]bool{after[0].ID: true}, still, "StillBuffered(%v)", ids)
}
