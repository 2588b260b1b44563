package triggers_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RunPages hands whole pages to the page handler while they succeed; a page holding a cell the
// handlers cannot handle falls back to the cell handler, which delivers its good cells and parks
// the bad one alone.
func TestRunPagesFallsBackToCells(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	bad := rand.New(rand.NewPCG(seed, 0)).IntN(80)
	isBad := func(obj map[string]any) bool { return obj["fail"] == true }

	rec := newRecorder()
	var mu sync.Mutex
	pages, pageCells, badPages := 0, 0, 0
	page := func(ctx context.Context, shard int, cs []cells.Cell) error {
		for _, c := range cs {
			obj, err := c.Body.Object()
			if err != nil {
				return err
			}
			if isBad(obj) {
				mu.Lock()
				badPages++
				mu.Unlock()
				return fmt.Errorf("page of shard %d holds cell %v", shard, obj["i"])
			}
		}
		mu.Lock()
		pages++
		pageCells += len(cs)
		mu.Unlock()
		h := rec.handler("pages")
		for _, c := range cs {
			if err := h(ctx, c); err != nil {
				return err
			}
		}
		return nil
	}
	cell := func(ctx context.Context, c cells.Cell) error {
		obj, err := c.Body.Object()
		if err != nil {
			return err
		}
		if isBad(obj) {
			return fmt.Errorf("cannot handle cell %v", obj["i"])
		}
		return rec.handler("cells")(ctx, c)
	}
	cfg := baseConfig(t, cl, "pages", "a")
	cfg.MaxAttempts = 2
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- triggers.RunPages(wctx, cfg, page, cell) }()
	t.Cleanup(func() { cancel(); <-done })

	isBadIndex := func(i int) bool { return i == bad }
	ws := write(t, cl, "BASE", 80, isBadIndex)
	good := without(ws, isBadIndex)
	require.Eventually(t, func() bool { return len(rec.missing(good)) == 0 }, 60*time.Second, tick, "the good cells delivered")
	p := waitParked(t, cl, "pages", 1).Parked[0]
	assert.Equal(t, ws[bad].key.String(), fmt.Sprintf("%s/%s/%d", p.RowKey, p.ColumnKey, p.RefKey), "the parked cell")
	mu.Lock()
	defer mu.Unlock()
	assert.Positive(t, pages, "pages handled whole")
	assert.Positive(t, badPages, "pages that fell back to the cell handler")
	assert.Greater(t, pageCells, len(good)/2, "cells handled in whole pages: want most of the %d", len(good))
	rec.checkOrder(t)
}
