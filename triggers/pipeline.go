package triggers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// delivery is a page handed to a delivery goroutine: done is closed when its delivery ended,
// after ok is set (whether the shard's offset reached the page's last cell).
type delivery struct {
	done chan struct{}
	ok   bool
}

// pageTokenKey is the context key of PageToken.
type pageTokenKey struct{}

// PageToken returns what Config.OnPage returned for the page whose batch handler got ctx, nil
// when there is none (no OnPage, or cell-by-cell delivery).
func PageToken(ctx context.Context) any {
	return ctx.Value(pageTokenKey{})
}

// pageContext is ctx with p's OnPage token, when it has one.
func pageContext(ctx context.Context, p Page) context.Context {
	if p.token == nil {
		return ctx
	}
	return context.WithValue(ctx, pageTokenKey{}, p.token)
}

// beginPage records page p of st, read from location from, as read at now (the shard's lag; a
// page with no cells moves the offset past the cells the read filtered out, or with pages in
// delivery the next read) and, when p has cells, counts it in delivery and reports true: the
// caller then delivers p.
//
// A page read past the pages in delivery is dropped, and reports false, when the shard's
// reads no longer start where it was read from: a page in delivery was not delivered while
// the read was on its way (the shard is then read again from its offset), or one is failing
// (broken). Taken, such a page would be delivered, or its empty answer move the offset, past
// the cells of the page that failed, which no one would deliver.
func (w *worker) beginPage(st *shardState, p Page, from int64, now time.Time) bool {
	lagSeconds := 0.0
	if len(p.Cells) > 0 {
		lagSeconds = max(now.Sub(p.Cells[0].CreatedAt).Seconds(), 0)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if from != st.readFrom() || st.broken {
		return false
	}
	if p.HighWater >= 0 {
		w.m.lag(st.shard, max(p.HighWater-st.offset, 0), lagSeconds)
	}
	if len(p.Cells) == 0 {
		switch {
		case st.lost:
		case st.inflight > 0:
			st.next = max(st.next, p.NextLocation)
		case p.NextLocation > st.offset:
			st.offset = p.NextLocation
		}
		return false
	}
	st.inflight++
	st.next = max(p.NextLocation, p.Cells[len(p.Cells)-1].AddedID)
	return true
}

// endPage ends a page's delivery begun by beginPage; when it was the shard's last page in
// delivery, the next read starts from the offset again.
func (w *worker) endPage(st *shardState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.inflight--
	if st.inflight == 0 {
		st.tail, st.broken = nil, false
	}
}

// readFrom is where st's next log read starts: past the last page handed out while pages are
// in delivery, else its offset. The caller holds mu.
func (st *shardState) readFrom() int64 {
	if st.inflight > 0 {
		return st.next
	}
	return st.offset
}

// pipelineLoop is deliverLoop with Config.Pipeline: it reads the owned shards that have fewer
// than PipelineDepth pages in delivery, starts delivering each page read at once (at most
// Concurrency at a time), and reads again as soon as a delivery ends, cutting the running long
// poll short so that the shard just handled joins the next read. A shard's pages are handed
// out in added_id order, each linked to the one before it (deliverShard's ready). It returns
// like deliverLoop, after every delivery it started has ended.
func (w *worker) pipelineLoop(ctx context.Context) error {
	sem := make(chan struct{}, w.cfg.Concurrency)
	wake := make(chan struct{}, 1)
	depth := max(w.cfg.PipelineDepth, 1)
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
			if st.inflight < depth && !st.broken {
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
			if !w.beginPage(st, p, req.Shards[i].Location, now) {
				continue
			}
			if w.cfg.OnPage != nil {
				p.token = w.cfg.OnPage(st.shard, p.Cells)
			}
			d := &delivery{done: make(chan struct{})}
			w.mu.Lock()
			prev := st.tail
			st.tail = d
			w.mu.Unlock()
			inflight.Add(1)
			sem <- struct{}{}
			go func() {
				defer inflight.Done()
				w.deliverShard(ctx, st, p, w.after(prev)) // a halt sets w.halted, which the loop sees
				w.pageEnded(p)
				w.mu.Lock()
				d.ok = !st.lost && st.offset >= p.Cells[len(p.Cells)-1].AddedID
				if !d.ok {
					st.broken = true
				}
				w.mu.Unlock()
				close(d.done)
				w.endPage(st)
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

// pageEnded calls Config.OnPageEnd for p's token, if any.
func (w *worker) pageEnded(p Page) {
	if w.cfg.OnPageEnd != nil && p.token != nil {
		w.cfg.OnPageEnd(p.token)
	}
}

// after returns deliverShard's ready for a page whose predecessor in delivery is prev (nil:
// none).
func (w *worker) after(prev *delivery) func() bool {
	if prev == nil {
		return nil
	}
	return func() bool {
		<-prev.done
		return prev.ok
	}
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
