package triggers_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/triggers"
)

// rowIn returns a new row key of shard.
func rowIn(shard int) uuid.UUID {
	for {
		if u := uuid.New(); cells.ShardOf(u, shards) == shard {
			return u
		}
	}
}

// TestPipeline: with Config.Pipeline a shard is read and delivered while another shard's page is
// still in its (slow) handler; without it, the fast shard's cell waits until the slow page is
// handled, since the next poll starts only after every page of the last one.
func TestPipeline(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	const slow, fast = 3, 9
	const hold = 3 * time.Second
	for _, pipeline := range []bool{true, false} {
		name := map[bool]string{true: "pipeline", false: "rounds"}[pipeline]
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			delivered := map[uuid.UUID]time.Time{}
			h := func(ctx context.Context, shard int, cs []cells.Cell) error {
				if shard == slow {
					select {
					case <-time.After(hold):
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				mu.Lock()
				for _, c := range cs {
					delivered[c.RowKey] = time.Now()
				}
				mu.Unlock()
				return nil
			}
			put := func(row uuid.UUID) {
				_, err := cl.PutCells(context.Background(), []client.CellWrite{{Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{}`)}})
				require.NoError(t, err)
			}
			seen := func(row uuid.UUID) func() bool {
				return func() bool { mu.Lock(); defer mu.Unlock(); _, ok := delivered[row]; return ok }
			}
			cfg := baseConfig(t, cl, "pipe-"+name, "w")
			cfg.Pipeline, cfg.Start = pipeline, triggers.StartLatest
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- triggers.RunBatch(ctx, cfg, h) }()
			// The worker holds every shard once a cell written after its start went through
			// (StartLatest skips what came before).
			require.Eventually(t, func() bool {
				mu.Lock()
				n := len(delivered)
				mu.Unlock()
				if n == 0 {
					put(rowIn(fast))
				}
				return n > 0
			}, 30*time.Second, 300*time.Millisecond, "a first cell delivered")

			// A page of the slow shard goes into its handler; then a cell of the fast shard.
			slowRow, fastRow := rowIn(slow), rowIn(fast)
			put(slowRow)
			time.Sleep(300 * time.Millisecond) // the slow page is read and handed over
			put(fastRow)
			written := time.Now()
			require.Eventually(t, seen(fastRow), 2*hold, tick, "the fast shard's cell")
			mu.Lock()
			took := delivered[fastRow].Sub(written)
			mu.Unlock()
			t.Logf("%s: the fast shard's cell delivered %v after its write (the slow page takes %v)", name, took, hold)
			if pipeline {
				assert.Less(t, took, hold/2, "with Pipeline the fast shard does not wait for the slow one")
			} else {
				assert.Greater(t, took, hold/2, "without Pipeline the fast shard's page waits for the slow page's poll to end")
			}
			require.Eventually(t, seen(slowRow), 2*hold, tick, "the slow shard's cell")
			cancel()
			assert.NoError(t, <-done)
		})
	}
}
