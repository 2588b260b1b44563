package storage

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// strayTables returns the tables of p's SQLite file whose shard is outside p's range (none for
// the other engines).
func strayTables(t *testing.T, p *PartitionStore) []string {
	t.Helper()
	if p.pb != nil || p.d.engine != EngineSQLite {
		return nil
	}
	held, err := sqliteSchema(context.Background(), p.read, "main")
	require.NoError(t, err, "list the tables of partition %d", p.ID().Partition)
	var out []string
	for _, o := range held {
		if s, ok := sqliteShardOf(o.table); ok && o.kind == "table" && !p.Shards().Contains(s) {
			out = append(out, o.name)
		}
	}
	return out
}

// waitStrays waits until p's file holds no stray table.
func waitStrays(t *testing.T, p *PartitionStore) {
	t.Helper()
	require.Eventually(t, func() bool { return len(strayTables(t, p)) == 0 }, 30*time.Second, 5*time.Millisecond,
		"stray tables of partition %d (range %v) dropped", p.ID().Partition, p.Shards())
}

// shardTables counts the tables (entity and index) of p's SQLite file of shards r.
func shardTables(t *testing.T, p *PartitionStore, r cells.ShardRange) int {
	t.Helper()
	held, err := sqliteSchema(context.Background(), p.read, "main")
	require.NoError(t, err)
	n := 0
	for _, o := range held {
		if s, ok := sqliteShardOf(o.table); ok && o.kind == "table" && r.Contains(s) {
			n++
		}
	}
	return n
}

// A SQLite split drops no table in its transaction: each half's tables of the other's shards
// are strays, dropped in the background once SetShards gives the half its range, paced
// (strayDelay, strayPace: shown failing without), while the half takes writes; each half then
// holds exactly its own cells.
func TestSplitLeavesStraysForTheSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqliteEnv(t).open(t)
	left, right := cells.ShardRange{First: 0, Last: 3}, cells.ShardRange{First: 4, Last: 7}
	parent := openPartition(t, s, "strays", 0, 0, 7)
	require.NoError(t, parent.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	idx := IndexTable{Name: "city_v1", Columns: []IndexColumn{{"city", IndexString}}}
	require.NoError(t, parent.EnsureIndex(ctx, idx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	added := map[int]int64{}
	all := fillShards(t, parent, 0, 2000, added)

	child := openPartition(t, s, "strays", 1, 4, 7)
	snap, err := parent.BeginSnapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, child.ShareShards(ctx, snap, right, nil, AppliedState{Index: 9, Term: 1}), "ShareShards")
	require.NoError(t, snap.Close())
	tx, err := parent.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.ReleaseShards(ctx, right))
	require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 9, Term: 1}))
	require.NoError(t, tx.Commit())
	assert.Equal(t, 8, shardTables(t, parent, right), "the right half's tables in the parent's file after the split's commit: entity and index, dropped later")
	assert.Equal(t, 8, shardTables(t, child, left), "the left half's tables in the right half's file after the split: entity and index, dropped later")

	// The parent takes writes while it drops its strays: none fails (a writer call waits for
	// the sweeper's token). The sweep drops its first table a second after it starts and the
	// next ones 50 ms apart.
	swept := time.Now()
	parent.SetShards(left)
	for i := 1; len(strayTables(t, parent)) > 0; i++ {
		all = merge(all, fillShards(t, parent, i*100_000, 20, added))
	}
	assert.GreaterOrEqual(t, time.Since(swept), time.Second+7*50*time.Millisecond, "8 tables dropped no sooner than a second after the sweep started, then 50 ms apart")
	assert.EqualValues(t, 8, parent.strays.dropped.Load(), "stray tables the parent dropped")
	child.SetShards(right)
	waitStrays(t, child)
	assert.EqualValues(t, 8, child.strays.dropped.Load(), "stray tables the right half dropped")
	assert.Zero(t, shardTables(t, parent, right), "the right half's tables in the parent's file")
	assert.Equal(t, 8, shardTables(t, parent, left), "the parent's own tables")
	assert.Equal(t, 8, shardTables(t, child, right), "the right half's own tables")
	checkSQLiteParts(t, "after the sweeps", all, parent, child)
}

// A writer call that finds the writer token held by the stray sweeper waits for it instead of
// failing with ErrTxOpen; one that finds it held by another writer fails at once.
func TestWriterWaitsForTheSweeper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openPartition(t, sqliteEnv(t).open(t), "wait", 0, 0, 7)
	// The sweeper's hold, as dropOneStray takes it.
	p.strays.holding.Store(true)
	p.writer <- struct{}{}
	const hold = 100 * time.Millisecond
	go func() {
		time.Sleep(hold)
		p.unlockWriter()
		p.strays.holding.Store(false)
	}()
	began := time.Now()
	tx, err := p.Begin(ctx)
	require.NoError(t, err, "Begin while the sweeper holds the token")
	assert.GreaterOrEqual(t, time.Since(began), hold-10*time.Millisecond, "Begin waited for the sweeper")
	_, err = p.Begin(ctx)
	assert.ErrorIs(t, err, ErrTxOpen, "Begin while another transaction is open")
	require.NoError(t, tx.Rollback())
}

// A merge that takes shards back into a partition whose file still holds stray tables of them
// drops those first, and its commit widens the partition's range, so that a sweep running
// before the state machine's SetShards keeps the merged shards' new tables.
func TestAbsorbOverStrays(t *testing.T) {
	t.Parallel()
	for _, attach := range []bool{false, true} {
		t.Run(map[bool]string{false: "Begin", true: "BeginAbsorb"}[attach], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := sqliteEnv(t).open(t)
			left, right, all := cells.ShardRange{First: 0, Last: 3}, cells.ShardRange{First: 4, Last: 7}, cells.ShardRange{First: 0, Last: 7}
			parent := openPartition(t, s, "over", 0, 0, 7)
			require.NoError(t, parent.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
			added := map[int]int64{}
			want := fillShards(t, parent, 0, 400, added)
			child := openPartition(t, s, "over", 1, 4, 7)
			snap, err := parent.BeginSnapshot(ctx)
			require.NoError(t, err)
			require.NoError(t, child.ShareShards(ctx, snap, right, nil, AppliedState{Index: 9, Term: 1}))
			require.NoError(t, snap.Close())
			tx, err := parent.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.ReleaseShards(ctx, right))
			require.NoError(t, tx.Commit())
			// The parent's range narrows with no sweep (as if it had not come to the strays
			// yet): its file keeps the right half's tables as they were at the split.
			parent.shardsMu.Lock()
			parent.shards = left
			parent.shardsMu.Unlock()
			child.SetShards(right)
			waitStrays(t, child)
			want = merge(want, fillShards(t, child, 100_000, 200, added))
			require.Equal(t, 4, shardTables(t, parent, right), "stray tables in the parent before the merge")

			child.SetShards(cells.ShardRange{First: 4, Last: 3}) // frozen
			snap, err = child.BeginSnapshot(ctx)
			require.NoError(t, err)
			if attach {
				tx, err = parent.BeginAbsorb(ctx, snap)
			} else {
				tx, err = parent.Begin(ctx)
			}
			require.NoError(t, err)
			require.NoError(t, tx.AbsorbShards(ctx, snap, right, nil, func(held, _ []byte) ([]byte, error) { return held, nil }), "AbsorbShards")
			require.NoError(t, tx.Commit())
			require.NoError(t, snap.Close())
			assert.Equal(t, all, parent.Shards(), "the parent's range after the merge's commit, before the state machine's SetShards")
			// A sweep now (one kicked before the merge would run on) keeps every table.
			parent.kickStrays(left)
			require.Eventually(t, func() bool {
				parent.strays.mu.Lock()
				defer parent.strays.mu.Unlock()
				return !parent.strays.running
			}, 10*time.Second, 5*time.Millisecond, "the sweep ends")
			parent.SetShards(all) // the state machine's, after the commit
			checkSQLiteParts(t, "after the merge over strays", want, parent)
		})
	}
}
