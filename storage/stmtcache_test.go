package storage

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// TestStmtCacheBounded writes FSM-shaped batches of every row count from 1 to 60 into 16
// shards of a SQLite partition and checks what the write connection's statement cache kept:
// the one-row lookups and inserts of every shard prepared, even after the longer statements
// have used their budget; no statement longer than maxCachedStmtText; at most
// maxCachedStmtBytes of longer statements' text; the counts matching the statements held. A
// compiled multi-row statement's program, outside Go's heap, grows with its rows.
func TestStmtCacheBounded(t *testing.T) {
	ctx := context.Background()
	p := openPartition(t, sqliteEnv(t).open(t), "cache", 0, 0, 15)
	var shards []int
	for s := 0; s < 16; s++ {
		shards = append(shards, s)
	}
	if err := p.EnsureShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	bd := body(t, `{"origin":"LAX","destination":"SFO"}`)
	added := make([]int64, 16)
	write := func(index uint64, rows func(shard int) int) {
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shards {
			var cs []cells.Cell
			var keys []cells.Key
			for j := rows(s); j > 0; j-- {
				added[s]++
				c := cells.Cell{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, Body: bd, AddedID: added[s], CreatedAt: baseTime}
				cs, keys = append(cs, c), append(keys, c.Key)
			}
			if _, err := tx.Lookup(ctx, s, keys); err != nil {
				t.Fatal(err)
			}
			if err := tx.Insert(ctx, s, cs); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.SetApplied(ctx, AppliedState{Index: index, Term: 1}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
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
		if len(q) > maxCachedStmtText {
			t.Errorf("cached a statement of %d bytes (at most %d): %.80s...", len(q), maxCachedStmtText, q)
		}
	}
	for q := range c.m {
		count(q)
	}
	for q := range c.pending {
		count(q)
	}
	if short != c.short || long != c.bytes || long > maxCachedStmtBytes {
		t.Errorf("cache holds %d short statements and %d bytes of longer ones, counts %d and %d; at most %d bytes",
			short, long, c.short, c.bytes, maxCachedStmtBytes)
	}
	if long < maxCachedStmtBytes/2 {
		t.Errorf("only %d bytes of longer statements cached: the budget was not reached, the test shows nothing", long)
	}
	c.mu.Unlock()
	d := p.d
	write(100, func(int) int { return 1 }) // runs the one-row shapes again, after the budget is used
	write(101, func(int) int { return 1 })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range shards {
		for _, q := range []string{insertSQL(d, s, 1), lookupSQL(d, s, 1)} {
			if c.m[q] == nil {
				t.Errorf("not prepared after transactions ran it: %.80s", q)
			}
		}
	}
	if c.m[d.upsertApplied] == nil {
		t.Errorf("the applied-state update is not prepared")
	}
	if c.m[insertSQL(d, 3, 60)] != nil {
		t.Errorf("a 60-row INSERT is cached")
	}
	t.Logf("%d statements cached: %d short, %d bytes of longer ones", len(c.m), c.short, c.bytes)
}
