package storage

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// TestGetSnapshotIsOneCommit commits, over and over, one transaction that appends version n of
// two columns in two shards and sets the applied index to n, while GetSnapshot reads the latest
// of both columns: every read must see both columns at the same version, equal to its applied
// index. Reads of one key after the other (each its own transaction) would see a commit land
// between them.
func TestGetSnapshotIsOneCommit(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "snap", 0, 0, 1)
		require.NoError(t, p.EnsureShards(ctx, []int{0, 1}))
		rowA, rowB := uuid.New(), uuid.New()
		keys := []SnapshotKey{
			{Shard: 0, Key: cells.Key{RowKey: rowA, ColumnKey: "A"}, Latest: true},
			{Shard: 1, Key: cells.Key{RowKey: rowB, ColumnKey: "B"}, Latest: true},
		}
		bd := body(t, `{"v":1}`)
		write := func(n int64) error {
			tx, err := p.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			for s, rk := range []uuid.UUID{rowA, rowB} {
				col := []string{"A", "B"}[s]
				if err := tx.Insert(ctx, s, []cells.Cell{{Key: cells.Key{RowKey: rk, ColumnKey: col, RefKey: n}, Body: bd, AddedID: n, CreatedAt: baseTime}}); err != nil {
					return err
				}
			}
			if err := tx.SetApplied(ctx, AppliedState{Index: uint64(n), Term: 1}); err != nil {
				return err
			}
			return tx.Commit()
		}
		require.NoError(t, write(1))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var writeErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := int64(2); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if writeErr = write(n); writeErr != nil {
					return
				}
			}
		}()
		// Read for a second, and on until the writer committed between reads more than 10
		// times (a loaded machine starves the writer; 20 s at most).
		start := time.Now()
		reads, moved := 0, 0
		last := uint64(0)
		for since := time.Duration(0); since < time.Second || (moved <= 10 && since < 20*time.Second); since = time.Since(start) {
			cs, found, applied, err := p.GetSnapshot(ctx, keys)
			require.NoError(t, err)
			require.Equal(t, []bool{true, true}, found)
			if !assert.Equal(t, cs[0].RefKey, cs[1].RefKey, "read %d: both columns at one version", reads) ||
				!assert.Equal(t, uint64(cs[0].RefKey), applied.Index, "read %d: the applied index of that commit", reads) {
				break
			}
			if applied.Index != last {
				moved++
				last = applied.Index
			}
			reads++
		}
		close(stop)
		wg.Wait()
		require.NoError(t, writeErr)
		t.Logf("%s: %d snapshot reads over %d commits", e.name, reads, last)
		assert.Greater(t, moved, 10, "the writer committed between the reads: the test would catch a torn read")
	})
}

// TestGetSnapshotConcurrent runs more concurrent GetSnapshot calls than the read pool has
// connections, over statements not prepared yet: a snapshot read that prepared a statement on
// the pool while holding one of its connections would wait for another, and with every
// connection so held the reads would wait on each other until their contexts end.
func TestGetSnapshotConcurrent(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(context.Background(), SQLiteConfig{Dir: t.TempDir(), ReadConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	p := openPartition(t, s, "snapc", 0, 0, 15)
	var shards []int
	for i := 0; i < 16; i++ {
		shards = append(shards, i)
	}
	require.NoError(t, p.EnsureShards(context.Background(), shards))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 16; i++ {
				k := SnapshotKey{Shard: (g + i) % 16, Key: cells.Key{RowKey: uuid.New(), ColumnKey: "C", RefKey: int64(i)}, Latest: i%2 == 0}
				if _, _, _, err := p.GetSnapshot(ctx, []SnapshotKey{k, k}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	assert.NoError(t, <-errs, "concurrent snapshot reads")
}
