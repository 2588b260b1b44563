package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// TestStmtCacheBounded writes FSM-shaped batches of every row count from 1 to 60 into 16
// shards of a SQLite partition and checks what the write connection's statement cache kept:
// the one-row lookups and inserts of every shard prepared, even after the longer statements
// have used their budget; no statement longer than maxCachedStmtText; at most
// maxCachedStmtBytes of longer statements' text; the counts matching the statements held. A
// compiled multi-row statement's program, outside Go's heap, grows with its rows.
func TestStmtCacheBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openPartition(t, sqliteEnv(t).open(t), "cache", 0, 0, 15)
	var shards []int
	for s := 0; s < 16; s++ {
		shards = append(shards, s)
	}
	require.NoError(t, p.EnsureShards(ctx, shards))
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	bd := body(t, `{"origin":"LAX","destination":"SFO"}`)
	added := make([]int64, 16)
	write := func(index uint64, rows func(shard int) int) {
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		for _, s := range shards {
			var cs []cells.Cell
			var keys []cells.Key
			for j := rows(s); j > 0; j-- {
				added[s]++
				c := cells.Cell{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, Body: bd, AddedID: added[s], CreatedAt: baseTime}
				cs, keys = append(cs, c), append(keys, c.Key)
			}
			require.NoError(t, errOf(tx.Lookup(ctx, s, keys)))
			require.NoError(t, tx.Insert(ctx, s, cs))
		}
		require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: index, Term: 1}))
		require.NoError(t, tx.Commit())
	}
	write(1, func(int) int { return 1 })
	for n := 1; n <= 60; n++ {
		write(uint64(n+1), func(int) int { return 1 + rng.IntN(60) })
	}

	c := &p.stmts
	c.mu.Lock()
	short, long := 0, 0
	count := func(q string) {
		if len(q) <= shortStmtText {
			short++
		} else {
			long += len(q)
		}
		assert.LessOrEqual(t, len(q), maxCachedStmtText, "cached a statement of %d bytes (at most %d): %.80s...", len(q), maxCachedStmtText, q)
	}
	for q := range c.m {
		count(q)
	}
	for q := range c.pending {
		count(q)
	}
	assert.Equal(t, [2]int{short, long}, [2]int{c.short, c.bytes}, "the cache's counts of short statements and bytes of longer ones: want what it holds")
	assert.LessOrEqual(t, long, maxCachedStmtBytes, "bytes of longer statements cached: at most the budget")
	assert.GreaterOrEqual(t, long, maxCachedStmtBytes/2, "bytes of longer statements cached: the budget was not reached, the test shows nothing")
	c.mu.Unlock()
	d := p.d
	write(100, func(int) int { return 1 }) // runs the one-row shapes again, after the budget is used
	write(101, func(int) int { return 1 })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range shards {
		for _, q := range []string{insertSQL(d, s, 1), lookupSQL(d, s, 1)} {
			assert.NotNil(t, c.m[q], "not prepared after transactions ran it: %.80s", q)
		}
	}
	assert.NotNil(t, c.m[d.upsertApplied], "the applied-state update is not prepared")
	assert.Nil(t, c.m[insertSQL(d, 3, 60)], "a 60-row INSERT is cached")
	t.Logf("%d statements cached: %d short, %d bytes of longer ones", len(c.m), c.short, c.bytes)
}

// TestIndexStmtsPrepared checks that the FSM's one-row index lookup and upsert (the shapes of a
// maintainer's page at low rates) run prepared from the second transaction on, and that the
// prepared statements write what the unprepared ones did.
func TestIndexStmtsPrepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openPartition(t, sqliteEnv(t).open(t), "idxcache", 0, 0, 0)
	tbl := IndexTable{Name: "by_city_v1", Columns: []IndexColumn{{"city", IndexString}, {"n", IndexInt}}}
	require.NoError(t, p.EnsureIndex(ctx, tbl, []int{0}))
	for i := 1; i <= 3; i++ {
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		got, err := tx.LookupIndex(ctx, 0, tbl, []uuid.UUID{rowKey(1)})
		require.NoError(t, err)
		if i > 1 {
			assert.Equal(t, int64(i-1), got[rowKey(1)].Values[1], "transaction %d reads the previous one's entry", i)
		}
		require.NoError(t, tx.UpsertIndex(ctx, 0, tbl, []IndexEntry{{RowKey: rowKey(1), Values: []any{"LAX", int64(i)}, Refs: []byte{1}}}))
		require.NoError(t, tx.Commit())
	}
	d := p.d
	c := &p.stmts
	c.mu.Lock()
	defer c.mu.Unlock()
	upsert := d.insertIndexSQL(&tbl, d.indexTable(tbl.Name, 0), 1, true)
	assert.NotNil(t, c.m[upsert], "the one-row index upsert is not prepared: %.80s", upsert)
	lookup := false
	for q := range c.m {
		lookup = lookup || strings.HasPrefix(q, "SELECT "+indexColumns(&tbl)+" FROM "+d.indexTable(tbl.Name, 0))
	}
	assert.True(t, lookup, "the one-row index lookup is not prepared")
}

// TestSnapshotReadStmtsPrepared checks that GetSnapshot's statements (the meta row, a cell by
// key and the latest cell of a column) are prepared on the read pool, with more concurrent
// readers than read connections (a prepare that waited for a connection while readers held
// them all would hang), and that the prepared reads answer what was written.
func TestSnapshotReadStmtsPrepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openPartition(t, sqliteEnv(t).open(t), "readcache", 0, 0, 0)
	require.NoError(t, p.EnsureShards(ctx, []int{0}))
	bd := body(t, `{"origin":"LAX"}`)
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	key := cells.Key{RowKey: rowKey(1), ColumnKey: "BASE", RefKey: 2}
	require.NoError(t, tx.Insert(ctx, 0, []cells.Cell{{AddedID: 1, Key: key, Body: bd, CreatedAt: baseTime}}))
	require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 7, Term: 1}))
	require.NoError(t, tx.Commit())
	keys := []SnapshotKey{{Shard: 0, Key: key}, {Shard: 0, Key: cells.Key{RowKey: rowKey(1), ColumnKey: "BASE"}, Latest: true},
		{Shard: 0, Key: cells.Key{RowKey: rowKey(2), ColumnKey: "BASE"}, Latest: true}}
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			out, found, applied, err := p.GetSnapshot(ctx, keys)
			if err == nil && (!found[0] || !found[1] || found[2] || out[1].Key != key || applied.Index != 7) {
				err = fmt.Errorf("read %v %v %+v", found, out[1].Key, applied)
			}
			errs <- err
		}()
	}
	for range 32 {
		require.NoError(t, <-errs, "GetSnapshot")
	}
	c := &p.readStmts
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range []string{appliedSQL(p.d), first(p.cellSQL(0, key, false)), first(p.cellSQL(0, key, true))} {
		assert.NotNil(t, c.m[q], "not prepared on the read pool: %s", q)
	}
}

// first returns its first argument.
func first[A, B any](a A, _ B) A { return a }

// TestSnapshotOneKey checks GetSnapshot of a single key, read by one statement joining the meta
// row (getSnapshotOne), against the transaction it replaces: before any table or meta row
// exists, with a shard table but no meta row (both read in a transaction), then with both: a
// cell found by key and as the latest of its column, a column with no cell, and the applied
// state of the same snapshot.
func TestSnapshotOneKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openPartition(t, sqliteEnv(t).open(t), "onekey", 0, 0, 0)
	key := cells.Key{RowKey: rowKey(1), ColumnKey: "BASE", RefKey: 2}
	latest := SnapshotKey{Shard: 0, Key: cells.Key{RowKey: rowKey(1), ColumnKey: "BASE"}, Latest: true}
	read := func(k SnapshotKey) (cells.Cell, bool, AppliedState) {
		t.Helper()
		out, found, applied, err := p.GetSnapshot(ctx, []SnapshotKey{k})
		require.NoError(t, err, "GetSnapshot(%+v)", k)
		return out[0], found[0], applied
	}
	_, found, applied := read(latest)
	assert.False(t, found, "no shard table yet")
	assert.Zero(t, applied, "no meta row yet")

	require.NoError(t, p.EnsureShards(ctx, []int{0}))
	bd := body(t, `{"origin":"LAX"}`)
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Insert(ctx, 0, []cells.Cell{{AddedID: 1, Key: key, Body: bd, CreatedAt: baseTime}}))
	require.NoError(t, tx.Commit())
	c, found, applied := read(latest)
	assert.True(t, found, "a cell and no meta row")
	assert.Equal(t, key, c.Key)
	assert.Zero(t, applied)

	tx, err = p.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Insert(ctx, 0, []cells.Cell{{AddedID: 2, Key: cells.Key{RowKey: rowKey(1), ColumnKey: "BASE", RefKey: 5}, Body: bd, CreatedAt: baseTime.Add(time.Second)}}))
	require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 9, Term: 2}))
	require.NoError(t, tx.Commit())
	c, found, applied = read(latest)
	require.True(t, found, "the latest cell")
	assert.Equal(t, int64(5), c.Key.RefKey, "the highest ref key")
	assert.Equal(t, int64(2), c.AddedID)
	assert.True(t, c.CreatedAt.Equal(baseTime.Add(time.Second).Truncate(time.Microsecond)), "created_at %v, in microseconds", c.CreatedAt)
	assert.Equal(t, AppliedState{Index: 9, Term: 2}, applied)
	c, found, _ = read(SnapshotKey{Shard: 0, Key: key})
	require.True(t, found, "the cell by key")
	assert.Equal(t, int64(1), c.AddedID)
	same, err := cells.SameBody(bd, c.Body)
	require.NoError(t, err)
	assert.True(t, same, "the body read back")
	_, found, applied = read(SnapshotKey{Shard: 0, Key: cells.Key{RowKey: rowKey(2), ColumnKey: "BASE"}, Latest: true})
	assert.False(t, found, "a column with no cell")
	assert.Equal(t, AppliedState{Index: 9, Term: 2}, applied, "the applied state beside a cell not found")

	c2 := &p.readStmts
	c2.mu.Lock()
	defer c2.mu.Unlock()
	joined := 0
	for q := range c2.m {
		if strings.Contains(q, "LEFT JOIN") {
			joined++
		}
	}
	assert.Equal(t, 2, joined, "the one-statement reads (latest and by key) are prepared")
}
