package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// testOrigins are the origins the tests store, by turns: none (a cell written in this cluster),
// short names, and one of the longest a cluster name may be.
var testOrigins = []string{"", "west", "", "eu-central-1", "z" + strings.Repeat("9-", (cells.MaxClusterNameLen-2)/2) + "x"}

// originCell is mkCell with an origin.
func originCell(t testing.TB, row int, col string, ref, added int64, origin string) cells.Cell {
	t.Helper()
	c := mkCell(t, row, col, ref, added)
	c.Origin = origin
	return c
}

// originShard returns n cells of shard (row keys from row), added_ids from 1, their origins
// testOrigins by turns.
func originShard(t testing.TB, row, n int) []cells.Cell {
	t.Helper()
	out := make([]cells.Cell, n)
	for i := range out {
		out[i] = originCell(t, row+i, "BASE", 1, int64(i+1), testOrigins[i%len(testOrigins)])
	}
	return out
}

// Every read that returns cells returns the origin Insert stored, on every engine, and so does
// Lookup; a restart keeps it.
func TestOriginRoundTrip(t *testing.T) {
	t.Parallel()
	require.Len(t, testOrigins[4], cells.MaxClusterNameLen, "the longest test origin")
	require.NoError(t, cells.ValidateClusterName("origin", testOrigins[4]), "the longest test origin")
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "origins", 0, 0, 1)
		// Row 1: base at refs 1 (west), 2 (none), 3 (east); status at 1 (west). Row 2: base at
		// 1 (none), the longest origin at 2.
		s0 := []cells.Cell{
			originCell(t, 1, "base", 1, 1, "west"), originCell(t, 1, "base", 2, 2, ""), originCell(t, 1, "status", 1, 3, "west"),
			originCell(t, 1, "base", 3, 4, "east"), originCell(t, 2, "base", 1, 5, ""), originCell(t, 2, "base", 2, 6, testOrigins[4]),
		}
		s1 := originShard(t, 100, 10)
		write(t, p, map[int][]cells.Cell{0: s0, 1: s1}, AppliedState{Index: 1, Term: 1})

		check := func(when string) {
			t.Helper()
			for _, c := range s0 {
				got, err := p.GetCell(ctx, 0, c.Key)
				require.NoError(t, err, "GetCell(%s) %s", c.Key, when)
				checkCell(t, "GetCell "+when, got, c)
			}
			latest, err := p.GetLatest(ctx, 0, rowKey(1), "base")
			require.NoError(t, err, "GetLatest %s", when)
			checkCell(t, "GetLatest(row 1, base) "+when, latest, s0[3])
			latest, err = p.GetLatest(ctx, 0, rowKey(2), "base")
			require.NoError(t, err, "GetLatest %s", when)
			checkCell(t, "GetLatest(row 2, base) "+when, latest, s0[5])
			row, err := p.GetRow(ctx, 0, rowKey(1))
			require.NoError(t, err, "GetRow %s", when)
			checkCells(t, "GetRow(row 1) "+when, row, []cells.Cell{s0[3], s0[2]})
			versions, err := p.GetVersions(ctx, 0, rowKey(1), "base", nil, 10, false)
			require.NoError(t, err, "GetVersions %s", when)
			checkCells(t, "GetVersions(row 1, base) "+when, versions, []cells.Cell{s0[0], s0[1], s0[3]})
			versions, err = p.GetVersions(ctx, 0, rowKey(1), "base", nil, 10, true)
			require.NoError(t, err, "GetVersions desc %s", when)
			checkCells(t, "GetVersions(row 1, base, desc) "+when, versions, []cells.Cell{s0[3], s0[1], s0[0]})
			checkCells(t, "ScanShard(0) "+when, scanAll(t, p, 0, 4), s0)
			checkCells(t, "ScanShard(1) "+when, scanAll(t, p, 1, 3), s1)

			log, _, _, err := p.ReadLog(ctx, 0, 0, "", 100)
			require.NoError(t, err, "ReadLog %s", when)
			checkCells(t, "ReadLog(shard 0) "+when, log, s0)
			log, _, _, err = p.ReadLog(ctx, 0, 1, "base", 100)
			require.NoError(t, err, "ReadLog of a column %s", when)
			checkCells(t, "ReadLog(shard 0, after 1, base) "+when, log, []cells.Cell{s0[1], s0[3], s0[4], s0[5]})
			log, _, _, err = p.ReadLog(ctx, 1, 0, "BASE", 100)
			require.NoError(t, err, "ReadLog of shard 1 %s", when)
			checkCells(t, "ReadLog(shard 1, BASE) "+when, log, s1)

			first, err := p.FirstCells(ctx, 0, "base", []uuid.UUID{rowKey(1), rowKey(2)})
			require.NoError(t, err, "FirstCells %s", when)
			checkCell(t, "FirstCells(row 1) "+when, first[rowKey(1)], s0[0])
			checkCell(t, "FirstCells(row 2) "+when, first[rowKey(2)], s0[4])

			// One key (on SQLite the statement joining the meta row) and several.
			for _, keys := range [][]SnapshotKey{
				{{Shard: 0, Key: s0[0].Key}},
				{{Shard: 0, Key: s0[5].Key}},
				{{Shard: 0, Key: cells.Key{RowKey: rowKey(1), ColumnKey: "base"}, Latest: true}},
				{{Shard: 0, Key: s0[1].Key}, {Shard: 0, Key: s0[2].Key}, {Shard: 1, Key: s1[1].Key}},
			} {
				got, found, _, err := p.GetSnapshot(ctx, keys)
				require.NoError(t, err, "GetSnapshot %s", when)
				for i, k := range keys {
					want := map[cells.Key]cells.Cell{s0[0].Key: s0[0], s0[5].Key: s0[5], s0[1].Key: s0[1], s0[2].Key: s0[2], s1[1].Key: s1[1]}[k.Key]
					if k.Latest {
						want = s0[3]
					}
					if assert.True(t, found[i], "GetSnapshot(%s) %s: not found", k.Key, when) {
						checkCell(t, "GetSnapshot "+when, got[i], want)
					}
				}
			}

			tx, err := p.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback()
			keys := keysOf(s0)
			found, err := tx.Lookup(ctx, 0, keys)
			require.NoError(t, err, "Lookup %s", when)
			for _, c := range s0 {
				ex := found[c.Key]
				checkCell(t, "Lookup "+when, cells.Cell{Key: c.Key, Body: ex.Body, AddedID: ex.AddedID, CreatedAt: ex.CreatedAt, Origin: ex.Origin}, c)
			}
			// The transaction sees the origin of its own insert.
			mine := originCell(t, 3, "base", 1, 7, "north")
			require.NoError(t, tx.Insert(ctx, 0, []cells.Cell{mine}))
			found, err = tx.Lookup(ctx, 0, []cells.Key{mine.Key})
			require.NoError(t, err, "Lookup of the transaction's insert %s", when)
			assert.Equal(t, "north", found[mine.Key].Origin, "Lookup of the transaction's insert %s: origin", when)
		}
		check("after the write")
		p = openPartition(t, e.open(t), "origins", 0, 0, 1)
		check("after a restart")
	})
}

// Insert refuses an origin that is not a cluster name, before writing anything of the call,
// and the transaction goes on.
func TestInsertInvalidOrigin(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "origins", 0, 0, 0)
		require.NoError(t, p.EnsureShards(ctx, []int{0}))
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		added := int64(0)
		for i, bad := range []string{"West", "1west", "-west", "we_st", "west!", "wést", " west", strings.Repeat("a", cells.MaxClusterNameLen+1)} {
			added += 2
			good, c := originCell(t, 10+i, "base", 1, added-1, "west"), originCell(t, 10+i, "base", 2, added, bad)
			err := tx.Insert(ctx, 0, []cells.Cell{good, c})
			assert.ErrorIs(t, err, ErrInvalidOrigin, "Insert with origin %q", bad)
			assert.ErrorIs(t, err, cells.ErrInvalidClusterName, "Insert with origin %q", bad)
			found, err := tx.Lookup(ctx, 0, []cells.Key{good.Key, c.Key})
			require.NoError(t, err)
			assert.Empty(t, found, "cells of the refused Insert with origin %q", bad)
		}
		ok := []cells.Cell{originCell(t, 1, "base", 1, 100, "west"), originCell(t, 2, "base", 1, 101, "")}
		require.NoError(t, tx.Insert(ctx, 0, ok), "Insert after the refusals")
		require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 1, Term: 1}))
		require.NoError(t, tx.Commit())
		checkCells(t, "ScanShard after the refusals", scanAll(t, p, 0, 100), ok)
	})
}

// A snapshot streams each cell with its origin and Restore stores it; a Restore of a cell whose
// origin is not a cluster name fails and leaves the partition as it was.
func TestOriginSnapshotRestore(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		src, dst := openPartition(t, s, "origins", 0, 0, 1), openPartition(t, s, "origins", 1, 0, 1)
		want := map[int][]cells.Cell{0: originShard(t, 0, 12), 1: originShard(t, 500, 7)}
		write(t, src, want, AppliedState{Index: 5, Term: 1})
		snap, err := src.BeginSnapshot(ctx)
		require.NoError(t, err)
		var recs []RestoreRecord
		for sh := 0; sh <= 1; sh++ {
			got := snapshotShard(t, snap, sh)
			checkCells(t, fmt.Sprintf("snapshot of shard %d", sh), got, want[sh])
			for _, c := range got {
				recs = append(recs, RestoreRecord{Shard: sh, Cell: c})
			}
		}
		require.NoError(t, snap.Close())
		require.NoError(t, dst.Restore(ctx, AppliedState{Index: 5, Term: 1}, restoreRecords(recs, -1, nil), nil, nil), "Restore")
		for sh := 0; sh <= 1; sh++ {
			checkCells(t, fmt.Sprintf("shard %d restored", sh), scanAll(t, dst, sh, 5), want[sh])
		}
		got, err := dst.GetCell(ctx, 0, want[0][1].Key)
		require.NoError(t, err)
		checkCell(t, "GetCell of a restored cell", got, want[0][1])

		bad := append(recs[:3:3], RestoreRecord{Shard: 1, Cell: originCell(t, 900, "base", 1, 100, "West")})
		err = dst.Restore(ctx, AppliedState{Index: 6, Term: 1}, restoreRecords(bad, -1, nil), nil, nil)
		assert.ErrorIs(t, err, ErrInvalidOrigin, "Restore of a cell with origin West")
		for sh := 0; sh <= 1; sh++ {
			checkCells(t, fmt.Sprintf("shard %d after the failed Restore", sh), scanAll(t, dst, sh, 5), want[sh])
		}
	})
}

// A split's copy of the right half's shards and a merge's copy of the right partition's keep
// every cell's origin, on every engine (SQLite copies the tables between files; MySQL and
// pebble share them in place), with the transaction of Begin and of BeginAbsorb.
func TestOriginSplitMerge(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		all, right := cells.ShardRange{First: 0, Last: 3}, cells.ShardRange{First: 2, Last: 3}
		parent := openPartition(t, s, "origins", 0, 0, 3)
		want := map[int][]cells.Cell{}
		for sh := 0; sh <= 3; sh++ {
			want[sh] = originShard(t, 100*sh, 6+sh)
		}
		write(t, parent, want, AppliedState{Index: 3, Term: 1})
		checkAll := func(p *PartitionStore, r cells.ShardRange, when string) {
			t.Helper()
			for sh := r.First; sh <= r.Last; sh++ {
				checkCells(t, fmt.Sprintf("shard %d %s", sh, when), scanAll(t, p, sh, 100), want[sh])
			}
		}
		for i, attach := range []bool{false, true} {
			child := openPartition(t, s, "origins", 1+i, 2, 3)
			split(t, parent, child, right, AppliedState{Index: uint64(10 + 10*i), Term: 1})
			checkAll(child, right, fmt.Sprintf("of the right half of split %d", i))
			checkAll(parent, cells.ShardRange{First: 0, Last: 1}, fmt.Sprintf("of the parent after split %d", i))

			child.SetShards(cells.ShardRange{First: 2, Last: 1}) // frozen, as the state machine makes it
			snap, err := child.BeginSnapshot(ctx)
			require.NoError(t, err)
			var tx *WriteTx
			if attach {
				tx, err = parent.BeginAbsorb(ctx, snap)
			} else {
				tx, err = parent.Begin(ctx)
			}
			require.NoError(t, err)
			require.NoError(t, tx.AbsorbShards(ctx, snap, right, nil, nil), "AbsorbShards (BeginAbsorb %v)", attach)
			require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: uint64(15 + 10*i), Term: 1}))
			require.NoError(t, tx.Commit())
			require.NoError(t, snap.Close())
			parent.SetShards(all)
			checkAll(parent, all, fmt.Sprintf("of the merged partition (BeginAbsorb %v)", attach))
			require.NoError(t, child.Close())
			require.NoError(t, s.RemovePartition(ctx, child.ID()))
			checkAll(parent, all, fmt.Sprintf("after the right partition's removal (BeginAbsorb %v)", attach))
		}
	})
}

// The buffer table of async mode keeps each buffered cell's origin, which the reaper's scan
// returns; an origin that is not a cluster name is refused before anything is written.
func TestBufferedOrigin(t *testing.T) {
	t.Parallel()
	s := mysqlEnv(t).open(t)
	ctx := context.Background()
	mk := func(row int, origin string) BufferedCell {
		c := mkCell(t, row, "BASE", 1, 0)
		c.Origin = origin
		return BufferedCell{Datastore: "trips", Partition: 0, Shard: 0, Cell: c}
	}
	ins, same, err := s.PutBuffered(ctx, mk(1, "west"))
	require.NoError(t, err)
	require.True(t, ins && same, "PutBuffered: inserted %v, same %v; want both", ins, same)
	batch := []BufferedCell{mk(2, ""), mk(3, testOrigins[4]), mk(4, "east")}
	sames, err := s.PutBufferedBatch(ctx, batch)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true}, sames, "PutBufferedBatch: same")

	_, _, err = s.PutBuffered(ctx, mk(5, "West"))
	assert.ErrorIs(t, err, ErrInvalidOrigin, "PutBuffered with origin West")
	_, err = s.PutBufferedBatch(ctx, []BufferedCell{mk(6, "west"), mk(7, "we_st")})
	assert.ErrorIs(t, err, ErrInvalidOrigin, "PutBufferedBatch with origin we_st")

	rows, err := s.ScanBuffered(ctx, "trips", cells.ShardRange{First: 0, Last: 0}, 0, 100)
	require.NoError(t, err)
	want := append([]BufferedCell{mk(1, "west")}, batch...)
	if assert.Len(t, rows, len(want), "buffered rows: the refused calls wrote none") {
		for i, r := range rows {
			assert.Equal(t, want[i].Cell.Key, r.Cell.Key, "buffered row %d: key", i)
			assert.Equal(t, want[i].Cell.Origin, r.Cell.Origin, "buffered row %d (%s): origin", i, r.Cell.Key)
		}
	}
}
