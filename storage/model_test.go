package storage

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

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
	t.Parallel()
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
			require.NoError(t, err)
			pending := model{}
			touched := []int{}
			for range 1 + rng.IntN(30) {
				shard := rng.IntN(4)
				k := cells.Key{RowKey: rowKey(shard*10 + rng.IntN(4)), ColumnKey: columns[rng.IntN(len(columns))], RefKey: rng.Int64N(6)}
				if !slices.Contains(touched, shard) {
					// A new shard of the batch: create its tables outside the transaction, as
					// the FSM does. Here the transaction is open, so this must fail.
					require.ErrorIs(t, p.EnsureShards(ctx, []int{shard}), ErrTxOpen, "seed %d: EnsureShards inside a transaction", seed)
				}
				found, err := tx.Lookup(ctx, shard, []cells.Key{k})
				require.NoError(t, err, "seed %d: Lookup", seed)
				want, inModel := committed.cell(shard, k)
				if c, ok := pending.cell(shard, k); ok {
					want, inModel = c, true
				}
				ex, ok := found[k]
				require.Equal(t, inModel, ok, "seed %d round %d: Lookup(%d, %s) found = %v, want %v", seed, round, shard, k, ok, inModel)
				if ok {
					d := cellDiff(cells.Cell{Key: k, Body: ex.Body, AddedID: ex.AddedID, CreatedAt: ex.CreatedAt}, want)
					require.Empty(t, d, "seed %d round %d: Lookup: got %s", seed, round, d)
					continue
				}
				if !tableExists(t, p, shard) {
					// The FSM would have called EnsureShards before Begin; start over.
					require.NoError(t, tx.Rollback())
					require.NoError(t, p.EnsureShards(ctx, []int{shard}))
					tx, err = p.Begin(ctx)
					require.NoError(t, err)
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
				require.NoError(t, tx.Insert(ctx, shard, []cells.Cell{c}), "seed %d: Insert", seed)
				if pending[shard] == nil {
					pending[shard] = map[cells.Key]cells.Cell{}
				}
				pending[shard][k] = c
			}
			next := AppliedState{Index: applied.Index + 1, Term: 1}
			require.NoError(t, tx.SetApplied(ctx, next))
			if rng.IntN(4) == 0 {
				require.NoError(t, tx.Rollback())
				// Rolled-back added ids are reused, as the FSM would.
				for shard := range nextAdded {
					nextAdded[shard] = maxAdded(committed[shard])
				}
			} else {
				require.NoError(t, tx.Commit())
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
	at := fmt.Sprintf("seed %d round %d", seed, round)
	a, err := p.Applied(ctx)
	require.NoError(t, err, "%s: Applied", at)
	require.Equal(t, applied, a, "%s: Applied", at)
	for shard := 0; shard <= 3; shard++ {
		var all []cells.Cell
		for _, c := range m[shard] {
			all = append(all, c)
		}
		all = sortByAddedID(all)
		checkCells(t, fmt.Sprintf("%s: ScanShard(%d)", at, shard), scanAll(t, p, shard, 1+rng.IntN(10)), all)
		got, err := p.MaxAddedID(ctx, shard)
		require.NoError(t, err, "%s: MaxAddedID(%d)", at, shard)
		require.Equal(t, maxAdded(m[shard]), got, "%s: MaxAddedID(%d)", at, shard)
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
			require.NoError(t, err, "%s: GetRow", at)
			checkCells(t, fmt.Sprintf("%s: GetRow(%d, %s)", at, shard, rk), row, want)
			for _, col := range []string{"base", "BASE", "Base", "status", "s"} {
				got, err := p.GetLatest(ctx, shard, rk, col)
				l, ok := latest[rk][col]
				if !ok {
					require.ErrorIs(t, err, ErrNotFound, "%s: GetLatest(%d, %s, %s)", at, shard, rk, col)
					continue
				}
				require.NoError(t, err, "%s: GetLatest(%d, %s, %s)", at, shard, rk, col)
				d := cellDiff(got, l)
				require.Empty(t, d, "%s: GetLatest: got %s", at, d)
			}
		}
		for k, c := range m[shard] {
			got, err := p.GetCell(ctx, shard, k)
			require.NoError(t, err, "%s: GetCell(%s)", at, k)
			d := cellDiff(got, c)
			require.Empty(t, d, "%s: GetCell: got %s", at, d)
		}
	}
}
