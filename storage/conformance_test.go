package storage

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// Shard tables exist only once EnsureShards creates them; until then reads see an empty shard
// and Insert fails.
func TestLazyShardTables(t *testing.T) {
	t.Parallel()
	forEachSQLEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 3)
		for s := 0; s <= 3; s++ {
			assert.False(t, tableExists(t, p, s), "table of shard %d exists before any write, want none", s)
		}
		k := mkCell(t, 1, "base", 1, 1).Key
		assert.ErrorIs(t, errOf(p.GetCell(ctx, 1, k)), ErrNotFound, "GetCell on an untouched shard")
		assert.ErrorIs(t, errOf(p.GetLatest(ctx, 1, k.RowKey, k.ColumnKey)), ErrNotFound, "GetLatest on an untouched shard")
		if row, err := p.GetRow(ctx, 1, k.RowKey); assert.NoError(t, err, "GetRow on an untouched shard: got %d cells, %v; want 0, nil", len(row), err) {
			assert.Empty(t, row, "GetRow on an untouched shard: got %d cells, %v; want 0, nil", len(row), err)
		}
		if cs, err := p.ScanShard(ctx, 1, 0, 10); assert.NoError(t, err, "ScanShard on an untouched shard: got %d cells, %v; want 0, nil", len(cs), err) {
			assert.Empty(t, cs, "ScanShard on an untouched shard: got %d cells, %v; want 0, nil", len(cs), err)
		}
		if id, err := p.MaxAddedID(ctx, 1); assert.NoError(t, err, "MaxAddedID on an untouched shard: got %d, %v; want 0, nil", id, err) {
			assert.EqualValues(t, 0, id, "MaxAddedID on an untouched shard: got %d, %v; want 0, nil", id, err)
		}
		if a, err := p.Applied(ctx); assert.NoError(t, err, "Applied of a new partition: got %+v, %v; want zero, nil", a, err) {
			assert.Equal(t, AppliedState{}, a, "Applied of a new partition: got %+v, %v; want zero, nil", a, err)
		}
		snap, err := p.BeginSnapshot(ctx)
		require.NoError(t, err, "BeginSnapshot")
		cs := snapshotShard(t, snap, 1)
		assert.Empty(t, cs, "snapshot of an untouched shard: got %d cells, want 0", len(cs))
		assert.NoError(t, snap.Close(), "snapshot Close")

		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		if got, err := tx.Lookup(ctx, 1, []cells.Key{k}); assert.NoError(t, err, "Lookup on an untouched shard: got %v, %v; want empty, nil", got, err) {
			assert.Empty(t, got, "Lookup on an untouched shard: got %v, %v; want empty, nil", got, err)
		}
		assert.ErrorIs(t, tx.Insert(ctx, 1, []cells.Cell{mkCell(t, 1, "base", 1, 1)}), ErrNoShardTable, "Insert before EnsureShards")
		tx.Rollback()

		require.NoError(t, p.EnsureShards(ctx, []int{1, 2, 1}), "EnsureShards")
		require.NoError(t, p.EnsureShards(ctx, []int{2}), "EnsureShards again")
		for s, want := range []bool{false, true, true, false} {
			got := tableExists(t, p, s)
			assert.Equal(t, want, got, "table of shard %d exists = %v after EnsureShards([1 2]), want %v", s, got, want)
		}
		assert.ErrorIs(t, p.EnsureShards(ctx, []int{3, 4}), ErrShardRange, "EnsureShards with shard 4 of [0, 3]")
		assert.False(t, tableExists(t, p, 3), "EnsureShards([3 4]) failed but created shard 3, want nothing created")
	})
}

// Every read returns exactly what was written.
func TestWriteThenRead(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 3)
		// Row 1 in shard 0: base at ref 1, 2, 10; status at ref 5. Row 2 in shard 0: base 3.
		// Shard 2 holds row 1 too (rows are placed by the caller; storage does not hash).
		s0 := []cells.Cell{
			mkCell(t, 1, "base", 1, 1), mkCell(t, 1, "status", 5, 2), mkCell(t, 1, "base", 10, 3),
			mkCell(t, 2, "base", 3, 4), mkCell(t, 1, "base", 2, 5),
		}
		s2 := []cells.Cell{mkCell(t, 1, "base", 7, 1)}
		write(t, p, map[int][]cells.Cell{0: s0, 2: s2}, AppliedState{Index: 42, Term: 3})

		for _, c := range s0 {
			got, err := p.GetCell(ctx, 0, c.Key)
			require.NoError(t, err, "GetCell(%s)", c.Key)
			checkCell(t, "GetCell", got, c)
		}
		got, err := p.GetCell(ctx, 2, s2[0].Key)
		require.NoError(t, err, "GetCell(shard 2)")
		checkCell(t, "GetCell(shard 2)", got, s2[0])
		missing := s0[0].Key
		missing.RefKey = 3
		assert.ErrorIs(t, errOf(p.GetCell(ctx, 0, missing)), ErrNotFound, "GetCell(%s)", missing)

		latest, err := p.GetLatest(ctx, 0, rowKey(1), "base")
		require.NoError(t, err)
		checkCell(t, "GetLatest(row 1, base)", latest, s0[2])
		assert.ErrorIs(t, errOf(p.GetLatest(ctx, 0, rowKey(1), "nothing")), ErrNotFound, "GetLatest of a missing column")

		row, err := p.GetRow(ctx, 0, rowKey(1))
		require.NoError(t, err)
		checkCells(t, "GetRow(row 1)", row, []cells.Cell{s0[2], s0[1]})
		if row, err := p.GetRow(ctx, 0, rowKey(3)); assert.NoError(t, err, "GetRow of a missing row: got %d cells, %v; want 0, nil", len(row), err) {
			assert.Empty(t, row, "GetRow of a missing row: got %d cells, %v; want 0, nil", len(row), err)
		}

		for _, limit := range []int{1, 2, 5, 100} {
			checkCells(t, fmt.Sprintf("ScanShard pages of %d", limit), scanAll(t, p, 0, limit), s0)
		}
		page, err := p.ScanShard(ctx, 0, 2, 2)
		require.NoError(t, err)
		checkCells(t, "ScanShard(after 2, limit 2)", page, s0[2:4])
		assert.Error(t, errOf(p.ScanShard(ctx, 0, 0, 0)), "ScanShard with limit 0: got nil error, want an error")

		if id, err := p.MaxAddedID(ctx, 0); assert.NoError(t, err, "MaxAddedID(0): got %d, %v; want 5, nil", id, err) {
			assert.EqualValues(t, 5, id, "MaxAddedID(0): got %d, %v; want 5, nil", id, err)
		}
		if a, err := p.Applied(ctx); assert.NoError(t, err, "Applied: got %+v, %v; want {42 3}, nil", a, err) {
			assert.Equal(t, AppliedState{Index: 42, Term: 3}, a, "Applied: got %+v, %v; want {42 3}, nil", a, err)
		}

		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		keys := []cells.Key{s0[0].Key, missing, s0[3].Key, s0[0].Key}
		found, err := tx.Lookup(ctx, 0, keys)
		require.NoError(t, err)
		assert.Len(t, found, 2, "Lookup of 2 stored and 1 missing key: got %d entries, want 2", len(found))
		for _, c := range []cells.Cell{s0[0], s0[3]} {
			ex, ok := found[c.Key]
			if !assert.True(t, ok, "Lookup: %s missing", c.Key) {
				continue
			}
			checkCell(t, "Lookup", cells.Cell{Key: c.Key, Body: ex.Body, AddedID: ex.AddedID, CreatedAt: ex.CreatedAt}, c)
		}
		// The transaction sees its own inserts.
		c := mkCell(t, 2, "base", 4, 6)
		require.NoError(t, tx.Insert(ctx, 0, []cells.Cell{c}))
		if found, err := tx.Lookup(ctx, 0, []cells.Key{c.Key}); assert.NoError(t, err, "Lookup of a key inserted in the same transaction: got %v, %v; want it found", found, err) {
			assert.Len(t, found, 1, "Lookup of a key inserted in the same transaction: got %v, %v; want it found", found, err)
		}
	})
}

// caseProblem writes cells whose column keys differ only in case and reports whether the store
// treats them as different cells; nil if it does.
func caseProblem(ctx context.Context, p *PartitionStore, shard int, a, b cells.Cell) error {
	if err := p.EnsureShards(ctx, []int{shard}); err != nil {
		return err
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := tx.Insert(ctx, shard, []cells.Cell{a}); err != nil {
		return err
	}
	if found, err := tx.Lookup(ctx, shard, []cells.Key{b.Key}); err != nil || len(found) != 0 {
		return fmt.Errorf("Lookup(%s) after inserting only %s: got %d cells, %v; want none", b.Key, a.Key, len(found), err)
	}
	if err := tx.Insert(ctx, shard, []cells.Cell{b}); err != nil {
		return fmt.Errorf("insert %s next to %s: %w", b.Key, a.Key, err)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, c := range []cells.Cell{a, b} {
		got, err := p.GetCell(ctx, shard, c.Key)
		if err != nil {
			return fmt.Errorf("GetCell(%s): %w", c.Key, err)
		}
		if d := cellDiff(got, c); d != "" {
			return fmt.Errorf("GetCell(%s): got %s", c.Key, d)
		}
		latest, err := p.GetLatest(ctx, shard, c.RowKey, c.ColumnKey)
		if err != nil {
			return fmt.Errorf("GetLatest(%s): %w", c.ColumnKey, err)
		}
		if d := cellDiff(latest, c); d != "" {
			return fmt.Errorf("GetLatest(%s): got %s", c.ColumnKey, d)
		}
	}
	row, err := p.GetRow(ctx, shard, a.RowKey)
	if err != nil {
		return err
	}
	if len(row) != 2 || row[0].ColumnKey != "BASE" || row[1].ColumnKey != "base" {
		return fmt.Errorf("GetRow: got %d cells, want BASE and base in byte order", len(row))
	}
	return nil
}

// Column keys are case-sensitive: "base" and "BASE" are two cells. (A case-insensitive
// collation fails this; TestMySQLCaseInsensitiveCollationFails shows it.)
func TestColumnKeysCaseSensitive(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		require.NoError(t, caseProblem(context.Background(), p, 0, mkCell(t, 1, "base", 1, 1), mkCell(t, 1, "BASE", 1, 2)))
	})
}

// The applied state and the cells survive closing and reopening the store.
func TestAppliedPersistsAcrossReopen(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		p := openPartition(t, s, "trips", 3, 8, 11)
		c := mkCell(t, 1, "base", 1, 1)
		write(t, p, map[int][]cells.Cell{9: {c}}, AppliedState{Index: 7, Term: 2})
		write(t, p, map[int][]cells.Cell{9: {mkCell(t, 1, "base", 2, 2)}}, AppliedState{Index: 1 << 40, Term: 1 << 33})
		require.NoError(t, s.Close(), "Close")
		assert.ErrorIs(t, errOf(p.Applied(ctx)), ErrClosed, "Applied after Store.Close")
		assert.ErrorIs(t, errOf(s.Partition(ctx, p.ID(), p.Shards())), ErrClosed, "Partition after Store.Close")

		p = openPartition(t, e.open(t), "trips", 3, 8, 11)
		if a, err := p.Applied(ctx); assert.NoError(t, err, "Applied after reopen: got %+v, %v; want {%d %d}", a, err, uint64(1<<40), uint64(1<<33)) {
			assert.Equal(t, AppliedState{Index: 1 << 40, Term: 1 << 33}, a, "Applied after reopen: got %+v, %v; want {%d %d}", a, err, uint64(1<<40), uint64(1<<33))
		}
		got, err := p.GetCell(ctx, 9, c.Key)
		require.NoError(t, err)
		checkCell(t, "GetCell after reopen", got, c)
		if id, err := p.MaxAddedID(ctx, 9); assert.NoError(t, err, "MaxAddedID after reopen: got %d, %v; want 2, nil", id, err) {
			assert.EqualValues(t, 2, id, "MaxAddedID after reopen: got %d, %v; want 2, nil", id, err)
		}
		// Tables exist already; EnsureShards and writes go on.
		write(t, p, map[int][]cells.Cell{9: {mkCell(t, 1, "base", 3, 3)}, 10: {mkCell(t, 2, "base", 1, 1)}}, AppliedState{Index: 8, Term: 2})
	})
}

// A rolled-back transaction leaves nothing, including after its context ends.
func TestRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 1)
		first := mkCell(t, 1, "base", 1, 1)
		write(t, p, map[int][]cells.Cell{0: {first}}, AppliedState{Index: 1, Term: 1})
		require.NoError(t, p.EnsureShards(ctx, []int{1}))
		check := func(what string) {
			t.Helper()
			cs := scanAll(t, p, 0, 10)
			assert.Len(t, cs, 1, "%s: shard 0 holds %d cells, want 1", what, len(cs))
			cs = scanAll(t, p, 1, 10)
			assert.Empty(t, cs, "%s: shard 1 holds %d cells, want 0", what, len(cs))
			if a, err := p.Applied(ctx); assert.NoError(t, err, "%s: Applied = %+v, %v; want {1 1}", what, a, err) {
				assert.Equal(t, AppliedState{Index: 1, Term: 1}, a, "%s: Applied = %+v, %v; want {1 1}", what, a, err)
			}
		}
		fill := func(ctx context.Context, tx *WriteTx) {
			t.Helper()
			for s, c := range []cells.Cell{mkCell(t, 2, "base", 1, 2), mkCell(t, 3, "base", 1, 1)} {
				require.NoError(t, tx.Insert(ctx, s, []cells.Cell{c}))
			}
			require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 2, Term: 1}))
		}

		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		fill(ctx, tx)
		require.NoError(t, tx.Rollback(), "Rollback")
		check("after Rollback")
		assert.NoError(t, tx.Rollback(), "second Rollback")
		assert.ErrorIs(t, tx.Commit(), ErrClosed, "Commit after Rollback")

		cctx, cancel := context.WithCancel(ctx)
		tx, err = p.Begin(cctx)
		require.NoError(t, err)
		fill(cctx, tx)
		cancel()
		assert.Error(t, tx.Commit(), "Commit after its context was canceled: got nil, want an error")
		assert.NoError(t, tx.Rollback(), "Rollback after a failed Commit")
		check("after the context of the transaction was canceled")

		// The writer is free again.
		write(t, p, map[int][]cells.Cell{1: {mkCell(t, 3, "base", 1, 1)}}, AppliedState{Index: 2, Term: 1})
	})
}

// The partition has one writer: a second Begin, EnsureShards or Restore during a transaction
// fails rather than deadlocks, and a finished transaction refuses more work.
func TestOneWriter(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 1)
		require.NoError(t, p.EnsureShards(ctx, []int{0}))
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		assert.ErrorIs(t, errOf(p.Begin(ctx)), ErrTxOpen, "second Begin")
		assert.ErrorIs(t, p.EnsureShards(ctx, []int{1}), ErrTxOpen, "EnsureShards during a transaction")
		eof := func() (RestoreRecord, error) { return RestoreRecord{}, io.EOF }
		assert.ErrorIs(t, p.Restore(ctx, AppliedState{}, eof, nil, nil), ErrTxOpen, "Restore during a transaction")
		assert.ErrorIs(t, tx.Insert(ctx, 2, nil), ErrShardRange, "Insert into shard 2 of [0, 1]")
		assert.ErrorIs(t, errOf(tx.Lookup(ctx, -1, nil)), ErrShardRange, "Lookup in shard -1")
		require.NoError(t, tx.Commit())
		assert.NoError(t, tx.Rollback(), "Rollback after Commit")
		assert.ErrorIs(t, tx.Commit(), ErrClosed, "second Commit")
		assert.ErrorIs(t, tx.Insert(ctx, 0, []cells.Cell{mkCell(t, 1, "a", 1, 1)}), ErrClosed, "Insert after Commit")
		assert.ErrorIs(t, errOf(tx.Lookup(ctx, 0, nil)), ErrClosed, "Lookup after Commit")
		assert.ErrorIs(t, tx.SetApplied(ctx, AppliedState{}), ErrClosed, "SetApplied after Commit")
		assert.ErrorIs(t, errOf(p.GetCell(ctx, 4, cells.Key{})), ErrShardRange, "GetCell in shard 4 of [0, 1]")
	})
}

// Inserting a key or an added_id that exists fails with ErrDuplicate.
func TestInsertDuplicateFails(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		write(t, p, map[int][]cells.Cell{0: {mkCell(t, 1, "base", 1, 1)}}, AppliedState{Index: 1, Term: 1})
		for _, tc := range []struct {
			name string
			cs   []cells.Cell
		}{
			{"stored key", []cells.Cell{mkCell(t, 1, "base", 1, 2)}},
			{"stored added_id", []cells.Cell{mkCell(t, 1, "base", 2, 1)}},
			{"key twice in one call", []cells.Cell{mkCell(t, 2, "base", 1, 2), mkCell(t, 2, "base", 1, 3)}},
		} {
			tx, err := p.Begin(ctx)
			require.NoError(t, err)
			assert.ErrorIs(t, tx.Insert(ctx, 0, tc.cs), ErrDuplicate, "Insert of a %s", tc.name)
			assert.NoError(t, tx.Rollback(), "Rollback")
		}
		cs := scanAll(t, p, 0, 10)
		assert.Len(t, cs, 1, "shard holds %d cells after failed inserts, want 1", len(cs))
	})
}

// An Insert that fails with ErrDuplicate stores none of its cells, whether they fit in one
// statement or need several (the last one holding the duplicate), and the transaction stays
// usable: what it wrote before and after commits.
func TestInsertDuplicateKeepsNothing(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		write(t, p, map[int][]cells.Cell{0: {mkCell(t, 1, "base", 1, 1)}}, AppliedState{Index: 1, Term: 1})
		added := int64(1)
		for _, n := range []int{3, p.d.insertRows + 5} {
			tx, err := p.Begin(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback() })
			added++
			before := mkCell(t, 100+n, "before", 1, added)
			require.NoError(t, tx.Insert(ctx, 0, []cells.Cell{before}), "%d cells: Insert before", n)
			batch := make([]cells.Cell, 0, n)
			for i := range n - 1 {
				added++
				batch = append(batch, mkCell(t, 1000*n+i, "new", 1, added))
			}
			batch = append(batch, mkCell(t, 1, "base", 1, added+1)) // the stored key, last
			assert.Equal(t, n > p.d.insertRows, manyStatements(p.d, batch), "%d cells: more than one statement", n)
			assert.ErrorIs(t, tx.Insert(ctx, 0, batch), ErrDuplicate, "%d cells: Insert with a stored key last", n)
			found, err := tx.Lookup(ctx, 0, []cells.Key{batch[0].Key, batch[n-2].Key})
			require.NoError(t, err, "%d cells: Lookup after the failed Insert", n)
			assert.Empty(t, found, "%d cells: cells of the failed Insert visible in its transaction", n)
			require.NoError(t, tx.Insert(ctx, 0, batch[:n-1]), "%d cells: Insert without the duplicate", n)
			require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: uint64(1 + n), Term: 1}))
			require.NoError(t, tx.Commit(), "%d cells: Commit", n)
			keys := keysOf(scanAll(t, p, 0, 10000))
			assert.Contains(t, keys, before.Key, "%d cells: the cell inserted before the failure", n)
			assert.Contains(t, keys, batch[n-2].Key, "%d cells: the batch inserted again", n)
		}
		assert.Len(t, scanAll(t, p, 0, 10000), int(added), "cells stored in all")
	})
}

// keysOf returns the keys of cs.
func keysOf(cs []cells.Cell) []cells.Key {
	keys := make([]cells.Key, len(cs))
	for i, c := range cs {
		keys[i] = c.Key
	}
	return keys
}

// A body of 1 MiB and more round trips, also many of them in one Insert (split by bytes).
func TestLargeBodies(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		big := largeBodies(t, 12)
		write(t, p, map[int][]cells.Cell{0: big}, AppliedState{Index: 1, Term: 1})
		for _, c := range big[:2] {
			got, err := p.GetCell(ctx, 0, c.Key)
			require.NoError(t, err)
			checkCell(t, fmt.Sprintf("GetCell of a %d-byte body", len(c.Body)), got, c)
		}
		checkCells(t, "ScanShard of large bodies", scanAll(t, p, 0, 5), big)
	})
}

// largeBodies returns n (at most 20) cells of one row with bodies of at least 1 MiB (stored
// form), built once per test process: compressing them is slow under the race detector.
func largeBodies(t testing.TB, n int) []cells.Cell {
	t.Helper()
	bigOnce.Do(func() {
		const hexDigits = "0123456789abcdef"
		text := make([]byte, 2<<20)
		for i := range bigCells {
			x := uint64(i + 1)
			for j := range text {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				text[j] = hexDigits[x&15]
			}
			b, err := cells.EncodeObject(map[string]any{"data": string(text)})
			if err != nil {
				bigErr = err
				return
			}
			if len(b) < 1<<20 {
				bigErr = fmt.Errorf("large body is %d bytes, want at least 1 MiB", len(b))
				return
			}
			bigCells[i] = cells.Cell{
				Key:       cells.Key{RowKey: rowKey(1), ColumnKey: "blob", RefKey: int64(i)},
				Body:      b,
				AddedID:   int64(i + 1),
				CreatedAt: baseTime.Add(time.Duration(i) * time.Second),
			}
		}
	})
	require.NoError(t, bigErr)
	return slices.Clone(bigCells[:n])
}

var (
	bigOnce  sync.Once
	bigCells [20]cells.Cell
	bigErr   error
)

// Partitions of one datastore, and of two datastores, do not see each other's cells.
func TestPartitionsIsolated(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		a0 := openPartition(t, s, "alpha", 0, 0, 3)
		a1 := openPartition(t, s, "alpha", 1, 4, 7)
		b0 := openPartition(t, s, "beta", 0, 0, 3)
		ca, cb := mkCell(t, 1, "base", 1, 1), mkCell(t, 1, "base", 1, 5)
		cb.Body = body(t, `{"datastore":"beta"}`)
		write(t, a0, map[int][]cells.Cell{0: {ca}}, AppliedState{Index: 10, Term: 1})
		write(t, b0, map[int][]cells.Cell{0: {cb}}, AppliedState{Index: 20, Term: 2})
		write(t, a1, map[int][]cells.Cell{4: {mkCell(t, 2, "base", 1, 1)}}, AppliedState{Index: 30, Term: 3})

		for _, tc := range []struct {
			p       *PartitionStore
			want    cells.Cell
			applied uint64
		}{{a0, ca, 10}, {b0, cb, 20}} {
			got, err := tc.p.GetCell(ctx, 0, ca.Key)
			require.NoError(t, err)
			checkCell(t, fmt.Sprintf("%s GetCell", tc.p.ID().Datastore), got, tc.want)
			checkCells(t, fmt.Sprintf("%s ScanShard", tc.p.ID().Datastore), scanAll(t, tc.p, 0, 10), []cells.Cell{tc.want})
			if a, err := tc.p.Applied(ctx); assert.NoError(t, err, "%s Applied: got %+v, %v; want index %d", tc.p.ID().Datastore, a, err, tc.applied) {
				assert.Equal(t, tc.applied, a.Index, "%s Applied: got %+v, %v; want index %d", tc.p.ID().Datastore, a, err, tc.applied)
			}
		}
		if cs := scanAll(t, a1, 4, 10); assert.Len(t, cs, 1, "alpha/1 shard 4: want only its own cell") {
			assert.Equal(t, rowKey(2), cs[0].RowKey, "alpha/1 shard 4: want only its own cell")
		}
		if a, err := a1.Applied(ctx); assert.NoError(t, err, "alpha/1 Applied: got %+v, %v; want index 30", a, err) {
			assert.EqualValues(t, 30, a.Index, "alpha/1 Applied: got %+v, %v; want index 30", a, err)
		}
		assert.ErrorIs(t, errOf(a1.GetCell(ctx, 0, ca.Key)), ErrShardRange, "alpha/1 GetCell in shard 0")
	})
}

// Store.Partition validates its arguments, opens a partition once, and reopens it after Close.
func TestPartitionOpen(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		got := s.Engine()
		assert.Equal(t, e.name, got, "Engine() = %q, want %q", got, e.name)
		id := PartitionID{Datastore: "trips", Partition: 2}
		p, err := s.Partition(ctx, id, cells.ShardRange{First: 0, Last: 3})
		require.NoError(t, err)
		assert.Equal(t, id, p.ID(), "ID()")
		assert.Equal(t, cells.ShardRange{First: 0, Last: 3}, p.Shards(), "Shards()")
		assert.ErrorIs(t, errOf(s.Partition(ctx, id, cells.ShardRange{First: 0, Last: 3})), ErrPartitionOpen, "Partition twice")
		require.NoError(t, p.Close())
		assert.NoError(t, p.Close(), "second Close")
		assert.ErrorIs(t, errOf(p.GetCell(ctx, 0, cells.Key{})), ErrClosed, "GetCell after Close")
		assert.ErrorIs(t, errOf(p.Begin(ctx)), ErrClosed, "Begin after Close")
		assert.ErrorIs(t, errOf(p.BeginSnapshot(ctx)), ErrClosed, "BeginSnapshot after Close")
		p = openPartition(t, s, "trips", 2, 0, 1)
		for _, tc := range []struct {
			id     PartitionID
			shards cells.ShardRange
		}{
			{PartitionID{"Trips", 0}, cells.ShardRange{First: 0, Last: 1}},
			{PartitionID{"1trips", 0}, cells.ShardRange{First: 0, Last: 1}},
			{PartitionID{"", 0}, cells.ShardRange{First: 0, Last: 1}},
			{PartitionID{"trips-x", 0}, cells.ShardRange{First: 0, Last: 1}},
			{PartitionID{strings.Repeat("a", 33), 0}, cells.ShardRange{First: 0, Last: 1}},
			{PartitionID{"trips", -1}, cells.ShardRange{First: 0, Last: 1}},
			{PartitionID{"trips", 5}, cells.ShardRange{First: 2, Last: 1}},
			{PartitionID{"trips", 5}, cells.ShardRange{First: -1, Last: 1}},
			{PartitionID{"trips", 5}, cells.ShardRange{First: 0, Last: 10000}},
		} {
			assert.ErrorIs(t, errOf(s.Partition(ctx, tc.id, tc.shards)), ErrInvalidConfig, "Partition(%+v, %+v)", tc.id, tc.shards)
		}
		assert.NoError(t, errOf(s.Partition(ctx, PartitionID{strings.Repeat("a", 32), 0}, cells.ShardRange{First: 0, Last: 9999})),
			"Partition with a 32-character name and shards [0, 9999]")
	})
}
