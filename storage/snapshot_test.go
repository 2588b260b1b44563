package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// shardCells makes n cells for a shard with added_id from+1 .. from+n.
func shardCells(t testing.TB, shard, from, n int) []cells.Cell {
	t.Helper()
	out := make([]cells.Cell, n)
	for i := range out {
		out[i] = mkCell(t, shard*100000+from+i, "base", int64(shard), int64(from+i+1))
	}
	return out
}

// A snapshot keeps the view of the moment it was opened while the writer commits more cells,
// to existing shards and to a shard created afterwards; a new snapshot sees everything.
func TestSnapshotIsolation(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 3)
		// Shard 0 spans more than one snapshot page.
		old := map[int][]cells.Cell{0: shardCells(t, 0, 0, snapshotPageRows+500), 1: shardCells(t, 1, 0, 10)}
		write(t, p, old, AppliedState{Index: 5, Term: 1})

		s1, err := p.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer s1.Close()

		// The writer commits while s1 is read.
		const batches = 10
		all := map[int][]cells.Cell{0: old[0], 1: old[1]}
		var next []map[int][]cells.Cell
		for i := range batches {
			b := map[int][]cells.Cell{
				0: shardCells(t, 0, len(old[0])+i*20, 20),
				1: shardCells(t, 1, len(old[1])+i*20, 20),
				2: shardCells(t, 2, i*20, 20),
			}
			next = append(next, b)
			for s, cs := range b {
				all[s] = append(all[s], cs...)
			}
		}
		writerDone := make(chan error, 1)
		go func() {
			for i, b := range next {
				if err := tryWrite(p, b, AppliedState{Index: uint64(6 + i), Term: 2}); err != nil {
					writerDone <- fmt.Errorf("batch %d: %w", i, err)
					return
				}
			}
			writerDone <- nil
		}()
		readS1 := func(when string) {
			t.Helper()
			assert.Equal(t, AppliedState{Index: 5, Term: 1}, s1.Applied(), "%s: old snapshot Applied()", when)
			for s := 0; s <= 3; s++ {
				checkCells(t, fmt.Sprintf("%s: old snapshot shard %d", when, s), snapshotShard(t, s1, s), old[s])
			}
		}
		readS1("while the writer commits")
		require.NoError(t, <-writerDone, "writer")
		readS1("after the writer committed")

		a, err := p.Applied(ctx)
		require.NoError(t, err, "Applied after the writes: got %+v, %v; want {%d 2}", a, err, 5+batches)
		require.Equal(t, AppliedState{Index: 5 + batches, Term: 2}, a, "Applied after the writes: got %+v, %v; want {%d 2}", a, err, 5+batches)
		s2, err := p.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer s2.Close()
		assert.Equal(t, AppliedState{Index: 5 + batches, Term: 2}, s2.Applied(), "new snapshot Applied()")
		for s := 0; s <= 3; s++ {
			checkCells(t, fmt.Sprintf("new snapshot shard %d", s), snapshotShard(t, s2, s), all[s])
		}
		assert.NoError(t, s1.Close(), "Close")
		assert.NoError(t, s1.Close(), "second Close")
		assert.ErrorIs(t, s1.ScanShard(ctx, 0, func(cells.Cell) error { return nil }), ErrClosed, "ScanShard after Close")
	})
}

// ScanShard pages by bytes too, keeps order, and stops at the callback's error.
func TestSnapshotScanLargeBodiesAndStop(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		big := largeBodies(t, 20) // more than snapshotPageBytes in all
		write(t, p, map[int][]cells.Cell{0: big}, AppliedState{Index: 1, Term: 1})
		s, err := p.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer s.Close()
		checkCells(t, "snapshot of large bodies", snapshotShard(t, s, 0), big)
		stop := errors.New("stop here")
		n := 0
		err = s.ScanShard(ctx, 0, func(cells.Cell) error {
			n++
			if n == 3 {
				return stop
			}
			return nil
		})
		assert.ErrorIs(t, err, stop, "ScanShard with a callback failing at the 3rd cell: want the callback's error")
		assert.Equal(t, 3, n, "ScanShard with a callback failing at the 3rd cell: calls")
		// The view is still usable after the callback's error.
		checkCells(t, "snapshot after a stopped scan", snapshotShard(t, s, 0), big)
		assert.ErrorIs(t, s.ScanShard(ctx, 1, func(cells.Cell) error { return nil }), ErrShardRange, "ScanShard of shard 1 of [0, 0]")
	})
}

// stream yields cells as Restore's next function.
func stream(items []restoreItem) func() (RestoreRecord, error) {
	i := 0
	return func() (RestoreRecord, error) {
		if i == len(items) {
			return RestoreRecord{}, io.EOF
		}
		it := items[i]
		i++
		return RestoreRecord{Shard: it.shard, Cell: it.c}, it.err
	}
}

type restoreItem struct {
	shard int
	c     cells.Cell
	err   error
}

// Restore replaces every shard of the range and the applied state; a failed Restore changes
// nothing.
func TestRestore(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		dst := openPartition(t, s, "trips", 0, 0, 3)
		old := map[int][]cells.Cell{0: shardCells(t, 0, 0, 30), 1: shardCells(t, 1, 0, 5), 3: shardCells(t, 3, 0, 7)}
		write(t, dst, old, AppliedState{Index: 10, Term: 2})

		// The source: another partition with other cells in shards 0 and 2 only.
		src := openPartition(t, s, "source", 0, 0, 3)
		fresh := map[int][]cells.Cell{0: shardCells(t, 0, 1000, 1200), 2: shardCells(t, 2, 0, 40)}
		write(t, src, fresh, AppliedState{Index: 20, Term: 3})
		snap, err := src.BeginSnapshot(ctx)
		require.NoError(t, err)
		var items []restoreItem
		for sh := 0; sh <= 3; sh++ {
			for _, c := range snapshotShard(t, snap, sh) {
				items = append(items, restoreItem{shard: sh, c: c})
			}
		}
		applied := snap.Applied()
		snap.Close()

		require.NoError(t, dst.Restore(ctx, applied, stream(items), nil, nil), "Restore")
		checkRestored := func(when string) {
			t.Helper()
			for sh := 0; sh <= 3; sh++ {
				checkCells(t, fmt.Sprintf("%s: shard %d", when, sh), scanAll(t, dst, sh, 1000), fresh[sh])
				want := int64(0)
				if n := len(fresh[sh]); n > 0 {
					want = fresh[sh][n-1].AddedID
				}
				if got, err := dst.MaxAddedID(ctx, sh); assert.NoError(t, err, "%s: MaxAddedID(%d) = %d, %v; want %d", when, sh, got, err, want) {
					assert.Equal(t, want, got, "%s: MaxAddedID(%d) = %d, %v; want %d", when, sh, got, err, want)
				}
			}
			if a, err := dst.Applied(ctx); assert.NoError(t, err, "%s: Applied = %+v, %v; want {20 3}", when, a, err) {
				assert.Equal(t, AppliedState{Index: 20, Term: 3}, a, "%s: Applied = %+v, %v; want {20 3}", when, a, err)
			}
			assert.ErrorIs(t, errOf(dst.GetCell(ctx, 1, old[1][0].Key)), ErrNotFound, "%s: GetCell of an old cell", when)
		}
		checkRestored("after Restore")

		// Failures roll back: an error from next, a shard out of range, a duplicate.
		boom := errors.New("stream broke")
		some := []restoreItem{{0, mkCell(t, 9, "x", 1, 1), nil}, {1, mkCell(t, 9, "x", 1, 1), nil}}
		for _, tc := range []struct {
			name  string
			items []restoreItem
			want  error
		}{
			{"next fails", append(some, restoreItem{err: boom}), boom},
			{"shard out of range", append(some, restoreItem{shard: 4, c: mkCell(t, 9, "x", 1, 2)}), ErrShardRange},
			{"duplicate key", append(some, restoreItem{shard: 1, c: mkCell(t, 9, "x", 1, 2)}), ErrDuplicate},
		} {
			assert.ErrorIs(t, dst.Restore(ctx, AppliedState{Index: 99, Term: 9}, stream(tc.items), nil, nil), tc.want, "Restore when %s", tc.name)
			checkRestored("after a Restore where " + tc.name)
		}

		// Restore into a partition with no tables yet, from a stream interleaving shards.
		empty := openPartition(t, s, "empty", 0, 0, 3)
		var mixed []restoreItem
		for i := range 50 {
			mixed = append(mixed, restoreItem{shard: 0, c: fresh[0][i]}, restoreItem{shard: 2, c: fresh[2][i%40]})
		}
		mixed = mixed[:80] // shard 2 gets each of its 40 cells once
		require.NoError(t, empty.Restore(ctx, AppliedState{Index: 3, Term: 1}, stream(mixed), nil, nil), "Restore into an empty partition")
		checkCells(t, "interleaved restore shard 0", scanAll(t, empty, 0, 100), fresh[0][:40])
		checkCells(t, "interleaved restore shard 2", scanAll(t, empty, 2, 100), fresh[2])
		// An empty stream empties everything.
		require.NoError(t, empty.Restore(ctx, AppliedState{Index: 4, Term: 1}, stream(nil), nil, nil))
		for sh := 0; sh <= 3; sh++ {
			cs := scanAll(t, empty, sh, 10)
			assert.Empty(t, cs, "after restoring nothing: shard %d holds %d cells, want 0", sh, len(cs))
		}
	})
}

// Restore and snapshots of large bodies round trip; readers see the old or the new content.
func TestRestoreLargeBodies(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 1)
		big := largeBodies(t, 10)
		items := make([]restoreItem, len(big))
		for i, c := range big {
			items[i] = restoreItem{shard: 1, c: c}
		}
		require.NoError(t, p.Restore(ctx, AppliedState{Index: 1, Term: 1}, stream(items), nil, nil))
		checkCells(t, "restored large bodies", scanAll(t, p, 1, 3), big)
	})
}
