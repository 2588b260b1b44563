package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// model is what a partition should hold: the committed cells of each shard.
type model map[int]map[cells.Key]cells.Cell

func (m model) cell(shard int, k cells.Key) (cells.Cell, bool) {
	c, ok := m[shard][k]
	return c, ok
}

// Random transactions (some rolled back, some with keys written before) against a model: every
// read agrees with it after every transaction.
func TestRandomAgainstModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(seed, 1))
		p := openPartition(t, e.open(t), "trips", 0, 0, 3)
		columns := []string{"base", "BASE", "Base", "status", "s"}
		committed := model{}
		nextAdded := map[int]int64{}
		applied := AppliedState{}
		for round := range 30 {
			tx, err := p.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pending := model{}
			touched := []int{}
			for range 1 + rng.IntN(30) {
				shard := rng.IntN(4)
				k := cells.Key{RowKey: rowKey(shard*10 + rng.IntN(4)), ColumnKey: columns[rng.IntN(len(columns))], RefKey: rng.Int64N(6)}
				if !slices.Contains(touched, shard) {
					// A new shard of the batch: create its tables outside the transaction, as
					// the FSM does. Here the transaction is open, so this must fail.
					if err := p.EnsureShards(ctx, []int{shard}); !errors.Is(err, ErrTxOpen) {
						t.Fatalf("seed %d: EnsureShards inside a transaction: got %v, want ErrTxOpen", seed, err)
					}
				}
				found, err := tx.Lookup(ctx, shard, []cells.Key{k})
				if err != nil {
					t.Fatalf("seed %d: Lookup: %v", seed, err)
				}
				want, inModel := committed.cell(shard, k)
				if c, ok := pending.cell(shard, k); ok {
					want, inModel = c, true
				}
				ex, ok := found[k]
				if ok != inModel {
					t.Fatalf("seed %d round %d: Lookup(%d, %s) found = %v, want %v", seed, round, shard, k, ok, inModel)
				}
				if ok {
					if d := cellDiff(cells.Cell{Key: k, Body: ex.Body, AddedID: ex.AddedID, CreatedAt: ex.CreatedAt}, want); d != "" {
						t.Fatalf("seed %d round %d: Lookup: got %s", seed, round, d)
					}
					continue
				}
				if !tableExists(t, p, shard) {
					// The FSM would have called EnsureShards before Begin; start over.
					if err := tx.Rollback(); err != nil {
						t.Fatal(err)
					}
					if err := p.EnsureShards(ctx, []int{shard}); err != nil {
						t.Fatal(err)
					}
					if tx, err = p.Begin(ctx); err != nil {
						t.Fatal(err)
					}
					pending = model{}
					touched = touched[:0]
					continue
				}
				touched = append(touched, shard)
				nextAdded[shard]++
				c := cells.Cell{
					Key:       k,
					Body:      body(t, fmt.Sprintf(`{"round":%d,"v":%d}`, round, rng.IntN(1000))),
					AddedID:   nextAdded[shard],
					CreatedAt: baseTime.Add(time.Duration(rng.Int64N(1e15))),
				}
				if err := tx.Insert(ctx, shard, []cells.Cell{c}); err != nil {
					t.Fatalf("seed %d: Insert: %v", seed, err)
				}
				if pending[shard] == nil {
					pending[shard] = map[cells.Key]cells.Cell{}
				}
				pending[shard][k] = c
			}
			next := AppliedState{Index: applied.Index + 1, Term: 1}
			if err := tx.SetApplied(ctx, next); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(4) == 0 {
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
				// Rolled-back added ids are reused, as the FSM would.
				for shard := range nextAdded {
					nextAdded[shard] = maxAdded(committed[shard])
				}
			} else {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				applied = next
				for shard, cs := range pending {
					if committed[shard] == nil {
						committed[shard] = map[cells.Key]cells.Cell{}
					}
					for k, c := range cs {
						committed[shard][k] = c
					}
				}
			}
			checkModel(t, seed, round, p, committed, applied, rng)
		}
	})
}

func maxAdded(cs map[cells.Key]cells.Cell) int64 {
	var m int64
	for _, c := range cs {
		m = max(m, c.AddedID)
	}
	return m
}

// checkModel compares every read of p with the model.
func checkModel(t *testing.T, seed uint64, round int, p *PartitionStore, m model, applied AppliedState, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d round %d: %s", seed, round, fmt.Sprintf(format, args...))
	}
	if a, err := p.Applied(ctx); err != nil || a != applied {
		fail("Applied = %+v, %v; want %+v", a, err, applied)
	}
	for shard := 0; shard <= 3; shard++ {
		var all []cells.Cell
		for _, c := range m[shard] {
			all = append(all, c)
		}
		all = sortByAddedID(all)
		checkCells(t, fmt.Sprintf("seed %d round %d: ScanShard(%d)", seed, round, shard), scanAll(t, p, shard, 1+rng.IntN(10)), all)
		if got, err := p.MaxAddedID(ctx, shard); err != nil || got != maxAdded(m[shard]) {
			fail("MaxAddedID(%d) = %d, %v; want %d", shard, got, err, maxAdded(m[shard]))
		}
		// Latest per (row, column), and rows.
		latest := map[uuid.UUID]map[string]cells.Cell{}
		for _, c := range m[shard] {
			if latest[c.RowKey] == nil {
				latest[c.RowKey] = map[string]cells.Cell{}
			}
			if l, ok := latest[c.RowKey][c.ColumnKey]; !ok || c.RefKey > l.RefKey {
				latest[c.RowKey][c.ColumnKey] = c
			}
		}
		for r := range 4 {
			rk := rowKey(shard*10 + r)
			var want []cells.Cell
			for _, c := range latest[rk] {
				want = append(want, c)
			}
			slices.SortFunc(want, func(a, b cells.Cell) int { return cmp.Compare(a.ColumnKey, b.ColumnKey) })
			row, err := p.GetRow(ctx, shard, rk)
			if err != nil {
				fail("GetRow: %v", err)
			}
			checkCells(t, fmt.Sprintf("seed %d round %d: GetRow(%d, %s)", seed, round, shard, rk), row, want)
			for _, col := range []string{"base", "BASE", "Base", "status", "s"} {
				got, err := p.GetLatest(ctx, shard, rk, col)
				l, ok := latest[rk][col]
				if !ok {
					if !errors.Is(err, ErrNotFound) {
						fail("GetLatest(%d, %s, %s) = %v, want ErrNotFound", shard, rk, col, err)
					}
					continue
				}
				if err != nil {
					fail("GetLatest(%d, %s, %s): %v", shard, rk, col, err)
				}
				if d := cellDiff(got, l); d != "" {
					fail("GetLatest: got %s", d)
				}
			}
		}
		for k, c := range m[shard] {
			got, err := p.GetCell(ctx, shard, k)
			if err != nil {
				fail("GetCell(%s): %v", k, err)
			}
			if d := cellDiff(got, c); d != "" {
				fail("GetCell: got %s", d)
			}
		}
	}
}
