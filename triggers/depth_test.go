package triggers_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// TestPipelineDepth: with PipelineDepth 3 a shard's next pages reach the batch handler while
// its first page is still in it, in order (OnPage sees them in added_id order, and each
// handler gets its page's token), and the shard's committed offset does not pass the first
// page until that one was delivered. With depth 1 (the check shown failing) no page of the
// shard is handed over while one is in the handler.
func TestPipelineDepth(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	const shard = 5
	for _, depth := range []int{3, 1} {
		t.Run(fmt.Sprintf("depth-%d", depth), func(t *testing.T) {
			group := fmt.Sprintf("depth-%d", depth)
			var (
				mu        sync.Mutex
				active    int                    // pages of the shard in the handler
				overlap   bool                   // a page entered while another was in the handler
				onPage    []int64                // first added_id of each page, in OnPage's order
				delivered = map[uuid.UUID]bool{} // rows whose page handler returned
				badToken  []string
			)
			release := make(chan struct{})
			var first uuid.UUID
			h := func(ctx context.Context, s int, cs []cells.Cell) error {
				if s != shard {
					return nil
				}
				if tok, _ := triggers.PageToken(ctx).(int64); tok != cs[0].AddedID {
					mu.Lock()
					badToken = append(badToken, fmt.Sprintf("token %v for a page from %d", triggers.PageToken(ctx), cs[0].AddedID))
					mu.Unlock()
				}
				mu.Lock()
				active++
				overlap = overlap || active > 1
				hold := cs[0].RowKey == first
				mu.Unlock()
				if hold {
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				mu.Lock()
				active--
				for _, c := range cs {
					delivered[c.RowKey] = true
				}
				mu.Unlock()
				return nil
			}
			cellHandler := func(ctx context.Context, c cells.Cell) error { return h(ctx, shard, []cells.Cell{c}) }
			cfg := baseConfig(t, cl, group, "w")
			cfg.Pipeline, cfg.PipelineDepth, cfg.Start = true, depth, triggers.StartLatest
			cfg.OnPage = func(s int, cs []cells.Cell) any {
				if s == shard {
					mu.Lock()
					onPage = append(onPage, cs[0].AddedID)
					mu.Unlock()
				}
				return cs[0].AddedID
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- triggers.RunPages(ctx, cfg, h, cellHandler) }()
			put := func(row uuid.UUID) int64 {
				res, err := cl.PutCells(context.Background(), []client.CellWrite{{Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{}`)}})
				require.NoError(t, err)
				return res[0].AddedID
			}
			// The worker holds the shard once a cell written after its start went through.
			warm := rowIn(shard)
			require.Eventually(t, func() bool {
				mu.Lock()
				ok := delivered[warm]
				mu.Unlock()
				if !ok {
					warm = rowIn(shard)
					put(warm)
				}
				return ok
			}, 30*time.Second, 300*time.Millisecond, "a first cell delivered")

			mu.Lock()
			first = rowIn(shard)
			mu.Unlock()
			firstID := put(first)
			time.Sleep(300 * time.Millisecond) // the first page is read and held in the handler
			var later []uuid.UUID
			for range 3 {
				r := rowIn(shard)
				later = append(later, r)
				put(r)
				time.Sleep(100 * time.Millisecond) // pages of their own
			}
			time.Sleep(time.Second)
			mu.Lock()
			sawOverlap := overlap
			mu.Unlock()
			st, err := cl.GroupStatus(context.Background(), group)
			require.NoError(t, err)
			for _, ss := range st.Shards {
				if ss.Shard == shard {
					assert.Less(t, ss.Offset, firstID, "the offset stays before the held page")
				}
			}
			close(release)
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range later {
					if !delivered[r] {
						return false
					}
				}
				return delivered[first]
			}, 10*time.Second, 50*time.Millisecond, "every cell delivered")
			if depth > 1 {
				assert.True(t, sawOverlap, "with PipelineDepth %d the next pages reach the handler beside the held one", depth)
			} else {
				assert.False(t, sawOverlap, "with PipelineDepth 1 no page of the shard is handed over while one is in the handler")
			}
			mu.Lock()
			assert.IsIncreasing(t, onPage, "OnPage sees the shard's pages in added_id order")
			assert.Empty(t, badToken, "each page's handler gets its OnPage token")
			mu.Unlock()
			cancel()
			assert.NoError(t, <-done)
		})
	}
}
