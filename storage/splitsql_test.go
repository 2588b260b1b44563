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

// DropShards on SQLite drops the shards' tables from the partition's file, in the transaction:
// the shards left keep their cells, the dropped ones read as empty, and their tables are gone
// from the file.
func TestDropShardsSQLite(t *testing.T) {
	ctx := context.Background()
	s := sqliteEnv(t).open(t)
	p := openPartition(t, s, "drop", 0, 0, 7)
	require.NoError(t, p.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	filled := fillShards(t, p, 0, 200, map[int]int64{})
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.DropShards(ctx, cells.ShardRange{First: 4, Last: 7}), "DropShards 4..7")
	require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 3, Term: 1}))
	require.NoError(t, tx.Commit())
	p.SetShards(cells.ShardRange{First: 0, Last: 3})
	for sh := 0; sh <= 3; sh++ {
		got, err := p.ScanShard(ctx, sh, 0, 1000)
		require.NoError(t, err, "scan shard %d", sh)
		assert.Len(t, got, len(filled[sh]), "cells of shard %d, which stays", sh)
	}
	var tables int
	require.NoError(t, p.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'entity\_%' ESCAPE '\'`).Scan(&tables))
	assert.Equal(t, 4, tables, "entity tables left in the parent's file")
	require.Greater(t, len(filled[5]), 0, "cells were written to shard 5")
}

// A merge on the SQL engines: the left partition takes the frozen right one's shards (their
// cells with their added_ids, their index tables and entries; on MySQL they stay in the shards'
// own databases, on SQLite they are copied into the left one's file) and joins its request
// records into its own. Removing the retired right partition then leaves the left one's cells,
// on MySQL where the shards' databases are shared too, and a restart keeps them.
//
// Each engine runs it with the transaction of Begin and of BeginAbsorb (what the state machine
// uses: on SQLite the right partition's file attached and the shards copied inside SQLite).
func TestAbsorbShardsSQL(t *testing.T) {
	t.Parallel()
	for _, attach := range []bool{false, true} {
		name := map[bool]string{false: "Begin", true: "BeginAbsorb"}[attach]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachSQLEngine(t, func(t *testing.T, e *engineEnv) {
				t.Parallel()
				testAbsorbShardsSQL(t, e, attach)
			})
		})
	}
}

func testAbsorbShardsSQL(t *testing.T, e *engineEnv, attach bool) {
	ctx := context.Background()
	s := e.open(t)
	left, right := openPartition(t, s, "absorb", 0, 0, 3), openPartition(t, s, "absorb", 1, 4, 7)
	idx := IndexTable{Name: "city_v1", Columns: []IndexColumn{{"city", IndexString}}}
	require.NoError(t, left.EnsureShards(ctx, []int{0, 1, 2, 3}))
	require.NoError(t, right.EnsureShards(ctx, []int{4, 5, 6, 7}))
	require.NoError(t, right.EnsureIndex(ctx, idx, []int{5}), "index table on shard 5 only")
	added := map[int]int64{}
	want := merge(fillShards(t, left, 0, 100, added), fillShards(t, right, 0, 100, added))
	require.NotEmpty(t, want[5], "cells in shard 5")

	at := func(ms int) time.Time {
		return baseTime.Add(time.Duration(ms) * time.Millisecond).UTC().Truncate(time.Microsecond)
	}
	rec := func(id int, what string, ms int) RequestRecord {
		return RequestRecord{ID: rowKey(9000 + id), CreatedAt: at(ms), Record: []byte(what)}
	}
	put := func(p *PartitionStore, rs ...RequestRecord) {
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutRequests(ctx, rs))
		if p == right {
			require.NoError(t, tx.UpsertIndex(ctx, 5, idx, []IndexEntry{{RowKey: rowKey(1), Values: []any{"Austin"}, Refs: []byte{1}}}))
		}
		require.NoError(t, tx.Commit())
	}
	put(left, rec(1, "alike", 10), rec(2, "left share", 20), rec(3, "left only", 30))
	put(right, rec(1, "alike", 10), rec(2, "right share", 5), rec(4, "right only", 40))

	// The right partition froze: its range is empty, as the state machine makes it.
	right.SetShards(cells.ShardRange{First: 4, Last: 3})
	snap, err := right.BeginSnapshot(ctx)
	require.NoError(t, err)
	tx, err := left.Begin(ctx)
	if attach {
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())
		tx, err = left.BeginAbsorb(ctx, snap)
	}
	require.NoError(t, err)
	join := func(held, incoming []byte) ([]byte, error) { return append(append(held, '+'), incoming...), nil }
	require.NoError(t, tx.AbsorbShards(ctx, snap, cells.ShardRange{First: 4, Last: 7}, []IndexTable{idx}, join), "AbsorbShards")
	require.NoError(t, tx.Commit())
	require.NoError(t, snap.Close())
	if e.name == EngineSQLite {
		var attached int
		require.NoError(t, left.write.QueryRowContext(ctx, "SELECT count(*) FROM pragma_database_list WHERE name = ?", splitSourceSchema).Scan(&attached))
		assert.Zero(t, attached, "the right partition's file is detached after the merge")
	}
	all := cells.ShardRange{First: 0, Last: 7}
	left.SetShards(all)
	check := func(p *PartitionStore, when string) {
		t.Helper()
		assert.Equal(t, keysOnly(want, all), heldCells(t, p), "the merged partition's cells %s", when)
		got, err := p.QueryIndex(ctx, 5, idx, IndexQuery{ShardValue: "Austin", Limit: 10})
		require.NoError(t, err, "query the index on shard 5 %s", when)
		assert.Len(t, got, 1, "index entries of shard 5 %s", when)
		snap, err := p.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer snap.Close()
		recs := map[uuid.UUID]RequestRecord{}
		require.NoError(t, snap.ScanRequests(ctx, func(r RequestRecord) error { recs[r.ID] = r; return nil }))
		for _, r := range []RequestRecord{rec(1, "alike", 10), rec(2, "left share+right share", 5), rec(3, "left only", 30), rec(4, "right only", 40)} {
			if assert.Contains(t, recs, r.ID, "request record %s %s", r.Record, when) {
				assert.Equal(t, string(r.Record), string(recs[r.ID].Record), "request record %s", when)
				assert.True(t, r.CreatedAt.Equal(recs[r.ID].CreatedAt), "created_at of %s %s: %v", r.Record, when, recs[r.ID].CreatedAt)
			}
		}
		assert.Len(t, recs, 4, "request records %s", when)
	}
	check(left, "after the merge")

	require.NoError(t, right.Close())
	require.NoError(t, s.RemovePartition(ctx, PartitionID{Datastore: "absorb", Partition: 1}), "RemovePartition")
	check(left, "after the right partition's removal")
	s = e.open(t)
	left = openPartition(t, s, "absorb", 0, 0, 7)
	check(left, "after a restart")
	gone := openPartition(t, s, "absorb", 1, 4, 7)
	kv, err := gone.ScanKV(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, kv, "the removed partition's KV rows")
	a, err := gone.Applied(ctx)
	require.NoError(t, err)
	assert.Zero(t, a.Index, "the removed partition's applied index")
}

// A split on SQLite: ShareShards gives the new partition's file the right half's shards,
// replacing what that file held; ReleaseShards drops them from the parent's. With "clone" the
// new partition has applied nothing (a split's first apply): its file becomes a copy of the
// parent's, less the other shards' tables (cloneSQLite); with "attach" it has applied an
// earlier index, and the shards' tables are copied inside SQLite with the parent's file
// attached. Either way the right half then holds every cell of its shards with its added_id,
// created_at and body, the index tables with their entries and b-tree indexes, every request
// record, the KV rows and applied state given, one meta row (its own), and nothing it held
// before; the parent keeps its other shards; the connection is left without the parent
// attached; both write afterwards and keep everything across a restart.
func TestShareShardsSQLite(t *testing.T) {
	t.Parallel()
	for _, attach := range []bool{false, true} {
		name := map[bool]string{false: "clone", true: "attach"}[attach]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testShareShardsSQLite(t, attach)
		})
	}
}

func testShareShardsSQLite(t *testing.T, attach bool) {
	ctx := context.Background()
	env := sqliteEnv(t)
	s := env.open(t)
	left, right := cells.ShardRange{First: 0, Last: 3}, cells.ShardRange{First: 4, Last: 7}
	src := openPartition(t, s, "sqsplit", 0, 0, 7)
	idx := IndexTable{Name: "city_v1", Columns: []IndexColumn{{"city", IndexString}}}
	require.NoError(t, src.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	require.NoError(t, src.EnsureIndex(ctx, idx, []int{2, 5}), "index tables on shards 2 and 5")
	added := map[int]int64{}
	first := fillShards(t, src, 0, 300, added)
	req := RequestRecord{ID: uuid.New(), CreatedAt: baseTime.UTC().Truncate(time.Microsecond), Record: []byte("outcome")}
	tx, err := src.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutRequests(ctx, []RequestRecord{req}))
	for _, sh := range []int{2, 5} {
		require.NoError(t, tx.UpsertIndex(ctx, sh, idx, []IndexEntry{{RowKey: rowKey(sh), Values: []any{"Austin"}, Refs: []byte{1}}}))
	}
	require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 7, Term: 1}))
	require.NoError(t, tx.Commit())

	// The new partition's file holds something already (an earlier attempt): it is replaced.
	dst := openPartition(t, s, "sqsplit", 1, 4, 7)
	require.NoError(t, dst.EnsureShards(ctx, []int{4, 5, 6, 7}))
	fillShards(t, dst, 5000, 20, map[int]int64{})
	tx, err = dst.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutRequests(ctx, []RequestRecord{{ID: uuid.New(), CreatedAt: req.CreatedAt, Record: []byte("stale")}}))
	if attach {
		require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 3, Term: 1}))
	}
	require.NoError(t, tx.Commit())

	split(t, src, dst, right, AppliedState{Index: 9, Term: 1})
	check := func(when string) {
		t.Helper()
		for sh := right.First; sh <= right.Last; sh++ {
			checkCells(t, fmt.Sprintf("shard %d of the right half %s", sh, when), scanAll(t, dst, sh, 1000), first[sh])
		}
		assert.Equal(t, keysOnly(first, left), keysOnly(heldCells(t, src), left), "the parent's cells %s", when)
		got, err := dst.QueryIndex(ctx, 5, idx, IndexQuery{ShardValue: "Austin", Limit: 10})
		require.NoError(t, err, "query the index on shard 5 %s", when)
		assert.Len(t, got, 1, "index entries of shard 5 in the right half %s", when)
		got, err = src.QueryIndex(ctx, 2, idx, IndexQuery{ShardValue: "Austin", Limit: 10})
		require.NoError(t, err, "query the index on shard 2 %s", when)
		assert.Len(t, got, 1, "index entries of shard 2 in the parent %s", when)
		snap, err := dst.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer snap.Close()
		assert.Equal(t, AppliedState{Index: 9, Term: 1}, snap.Applied(), "applied state of the right half %s", when)
		var reqs []RequestRecord
		require.NoError(t, snap.ScanRequests(ctx, func(r RequestRecord) error { reqs = append(reqs, r); return nil }))
		assert.Equal(t, []RequestRecord{req}, reqs, "request records of the right half %s", when)
		var rows []KV
		require.NoError(t, snap.ScanKV(ctx, func(r KV) error { rows = append(rows, r); return nil }))
		assert.Equal(t, []KV{{Key: "k", Value: []byte("v")}}, rows, "KV rows of the right half %s", when)
		tables := func(p *PartitionStore) (n int) {
			require.NoError(t, p.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND (name LIKE 'entity\_%' ESCAPE '\' OR name LIKE 'index\_%' ESCAPE '\')`).Scan(&n))
			return n
		}
		assert.Equal(t, 5, tables(src), "shard tables in the parent's file %s: entity 0..3, index on 2", when)
		assert.Equal(t, 5, tables(dst), "shard tables in the right half's file %s: entity 4..7, index on 5", when)
		var metaRows int
		require.NoError(t, dst.read.QueryRowContext(ctx, "SELECT count(*) FROM meta").Scan(&metaRows))
		assert.Equal(t, 1, metaRows, "meta rows in the right half's file %s: its own", when)
	}
	check("after the split")
	var attached int
	require.NoError(t, dst.write.QueryRowContext(ctx, "SELECT count(*) FROM pragma_database_list WHERE name = ?", splitSourceSchema).Scan(&attached))
	assert.Zero(t, attached, "the parent's file is detached after the split")

	more := merge(fillShards(t, src, 1000, 40, added), fillShards(t, dst, 2000, 40, added))
	want := merge(first, more)
	s = env.open(t)
	src, dst = openPartition(t, s, "sqsplit", 0, 0, 3), openPartition(t, s, "sqsplit", 1, 4, 7)
	assert.Equal(t, keysOnly(want, left), heldCells(t, src), "the parent's cells after writes and a restart")
	assert.Equal(t, keysOnly(want, right), heldCells(t, dst), "the right half's cells after writes and a restart")
}
