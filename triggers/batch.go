package triggers

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/schemaless-db/schemaless/cells"
)

// A page delivered through the batch handler (RunBatch, and RunPages before its cell-by-cell
// fallback).

// deliverBatch hands one page of a shard to the batch handler, retrying until it succeeds or
// the shard is lost or the worker stops, then moves the shard's offset past the page (ready:
// see deliverShard).
func (w *worker) deliverBatch(ctx context.Context, st *shardState, p Page, ready func() bool) {
	cs := p.Cells
	backoff := w.cfg.Backoff
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil || !w.owns(st) {
			return
		}
		err := w.callBatch(pageContext(st.ctx, p), st.shard, cs)
		if !ready() {
			return
		}
		if err == nil {
			break
		}
		w.m.incError()
		if st.ctx.Err() != nil {
			return
		}
		level := slog.LevelDebug
		if attempt%w.cfg.MaxAttempts == 0 {
			level = slog.LevelWarn
		}
		w.cfg.Logger.Log(ctx, level, "triggers: batch handler failed; retrying", "group", w.cfg.Group, "shard", st.shard,
			"cells", len(cs), "attempt", attempt, "error", err)
		if !sleepCtx(st.ctx, backoff/2+rand.N(backoff/2+1)) {
			return
		}
		backoff = min(backoff*2, w.cfg.BackoffMax)
	}
	w.passPage(st, p)
}

// passPage counts the cells of page p delivered and moves st's offset past them.
func (w *worker) passPage(st *shardState, p Page) {
	for range p.Cells {
		w.m.incDelivered()
	}
	w.mu.Lock()
	if !st.lost {
		st.offset = p.Cells[len(p.Cells)-1].AddedID
	}
	if p.HighWater >= 0 {
		w.m.lag(st.shard, max(p.HighWater-st.offset, 0), 0)
	}
	w.mu.Unlock()
}

// callBatch runs the batch handler, turning a panic into an error.
func (w *worker) callBatch(ctx context.Context, shard int, cs []cells.Cell) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return w.bh(ctx, shard, cs)
}
