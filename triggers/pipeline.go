package triggers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// beginPage records page p of st as read at now (the shard's lag; a page with no cells moves
// the offset past the cells the read filtered out) and, when p has cells, marks st busy and
// reports true: the caller then delivers p.
func (w *worker) beginPage(st *shardState, p Page, now time.Time) bool {
	lagSeconds := 0.0
	if len(p.Cells) > 0 {
		lagSeconds = max(now.Sub(p.Cells[0].CreatedAt).Seconds(), 0)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.HighWater >= 0 {
		w.m.lag(st.shard, max(p.HighWater-st.offset, 0), lagSeconds)
	}
	if len(p.Cells) == 0 {
		if !st.lost && p.NextLocation > st.offset {
			st.offset = p.NextLocation
		}
		return false
	}
	st.busy = true
	return true
}

// pipelineLoop is deliverLoop with Config.Pipeline: it reads the owned shards that have no page
// in delivery, starts delivering each page read at once (at most Concurrency at a time), and
// reads again as soon as a delivery ends, cutting the running long poll short so that the
// shard just handled joins the next read. Each shard still has one page in delivery at a time,
// in added_id order. It returns like deliverLoop, after every delivery it started has ended.
func (w *worker) pipelineLoop(ctx context.Context) error {
	sem := make(chan struct{}, w.cfg.Concurrency)
	wake := make(chan struct{}, 1)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for ctx.Err() == nil {
		ready, changed, halted := w.beginRound(ctx)
		if halted {
			inflight.Wait()
			w.commit(ctx)
			return ErrHalted
		}
		w.mu.Lock()
		idle := ready[:0]
		for _, st := range ready {
			if !st.busy {
				idle = append(idle, st)
			}
		}
		req := w.logRead(idle)
		w.mu.Unlock()
		if len(idle) == 0 {
			select {
			case <-ctx.Done():
			case <-changed:
			case <-wake:
			case <-time.After(w.cfg.HeartbeatInterval):
			}
			continue
		}
		pages, ok := w.poll(ctx, req, changed, wake) // a shard free again ends the poll early
		if !ok {
			continue
		}
		now := time.Now()
		for i, p := range pages {
			st := idle[i]
			if !w.beginPage(st, p, now) {
				continue
			}
			inflight.Add(1)
			sem <- struct{}{}
			go func() {
				defer inflight.Done()
				w.deliverShard(ctx, st, p) // a halt sets w.halted, which the loop sees
				<-sem
				w.requestCommit()
				select {
				case wake <- struct{}{}:
				default:
				}
			}()
		}
	}
	return nil
}

// poll reads req's shards, the long poll cut short when changed is closed (an assignment
// change) or wake delivers (nil: never). It returns one page per shard of req, or false after
// a failed read (logged, then a backoff unless it was cut short or ctx ended).
func (w *worker) poll(ctx context.Context, req LogRead, changed, wake <-chan struct{}) ([]Page, bool) {
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-changed:
		case <-wake:
		case <-pctx.Done():
		}
		cancel()
	}()
	pages, err := w.src.ReadLogs(pctx, req)
	cancel()
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			w.cfg.Logger.Warn("triggers: log read failed", "group", w.cfg.Group, "error", err)
			sleepCtx(ctx, w.cfg.Backoff)
		}
		return nil, false
	}
	if len(pages) != len(req.Shards) {
		w.cfg.Logger.Warn("triggers: log read failed", "group", w.cfg.Group, "error",
			fmt.Errorf("%d pages for %d shards", len(pages), len(req.Shards)))
		sleepCtx(ctx, w.cfg.Backoff)
		return nil, false
	}
	return pages, true
}
