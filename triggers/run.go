package triggers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
)

// shardState is a shard the worker owns under one lease epoch. Its fields are guarded by
// worker.mu, except ctx and cancel which are set once.
type shardState struct {
	shard     int
	epoch     uint64
	offset    int64     // added_id of the last cell handled (or parked), -1 until the start is resolved
	committed int64     // last offset the coordinator accepted
	revoke    bool      // the coordinator asked for the shard back: stop, commit, release
	lost      bool      // the lease ended (fenced, expired, or reassigned)
	inflight  int       // pages of the shard in delivery (at most Config.PipelineDepth)
	next      int64     // with pages in delivery: where the next read starts (past the last page handed out)
	tail      *delivery // the last page handed to delivery, nil when none is in delivery
	broken    bool      // a page in delivery was not delivered: hand out no more until none is in delivery
	ctx       context.Context
	cancel    context.CancelFunc
}

// worker is one member of a consumer group.
type worker struct {
	cfg Config
	h   Handler
	bh  BatchHandler // set instead of h by RunBatch, beside h by RunPages
	src Source
	m   *metrics

	mu       sync.Mutex
	shards   map[int]*shardState
	deadline time.Time // local lease deadline of every owned shard
	halted   bool
	retries  []consumer.ParkedCell
	// resolved holds the parked cells this worker redelivered and resolved while the
	// coordinator may still list them for retry (a heartbeat answered before the resolve):
	// they are not delivered again. An id leaves it once a heartbeat no longer lists it; ids are
	// never reused.
	resolved map[uint64]bool
	// orphans are shards the coordinator asked back (Revoke) that this worker no longer holds,
	// having dropped them when its local lease ran out: the coordinator still counts them as
	// ours until they are released, so the next heartbeat releases them.
	orphans map[int]bool
	changed chan struct{} // closed and replaced when the assignment changes
	// commitNow asks the committer goroutine to send the pending commits (buffered, 1).
	commitNow chan struct{}
}

// Run joins cfg.Group as cfg.Worker and delivers the cells of the shards the group gives it to
// h until ctx ends, then commits, leaves the group and returns nil. It returns ErrHalted when
// the group halts (too many parked cells), and an error wrapping ErrInvalidConfig for a bad
// cfg. Network and server errors are retried for as long as ctx lasts; the shards of a worker
// that cannot reach the coordinator for SessionTimeout go to other members. See the package
// documentation for the delivery guarantees.
func Run(ctx context.Context, cfg Config, h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidConfig)
	}
	return run(ctx, cfg, h, nil)
}

// RunBatch is Run with a handler called once per page of a shard (at most cfg.BatchSize cells,
// in added_id order) instead of once per cell. A page is never split and never parked: h is
// retried with backoff (cfg.Backoff up to cfg.BackoffMax) for as long as the worker owns the
// shard, and the shard's offset moves past the page only when h returns nil. It suits handlers
// whose failures are transient and that must not skip a cell, such as index maintenance.
// Errors as for Run (never ErrHalted from this worker's own pages).
func RunBatch(ctx context.Context, cfg Config, h BatchHandler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidConfig)
	}
	return run(ctx, cfg, nil, h)
}

// RunPages is Run with a fast path: each page of a shard (at most cfg.BatchSize cells, in
// added_id order) goes first to bh, once. When bh returns nil the shard's offset moves past the
// page. When it fails (or panics), the page's cells go to h one by one, as Run delivers them:
// retried up to cfg.MaxAttempts times and then parked, the group halting at its threshold. So a
// handler that can write a page in one request (one put_cells of the page's derived cells)
// keeps up with the log, while a bad cell is still parked on its own. bh may have done part of
// its work before failing: h then meets it again, and must be idempotent (at-least-once
// delivery asks that of every handler). Errors as for Run.
func RunPages(ctx context.Context, cfg Config, bh BatchHandler, h Handler) error {
	if h == nil || bh == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidConfig)
	}
	return run(ctx, cfg, h, bh)
}

func run(ctx context.Context, cfg Config, h Handler, bh BatchHandler) error {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	m, err := newMetrics(cfg.Registerer, cfg.Group, cfg.Worker)
	if err != nil {
		return fmt.Errorf("triggers: metrics: %w", err)
	}
	defer m.unregister(cfg.Registerer)
	w := &worker{cfg: cfg, h: h, bh: bh, src: cfg.Source, m: m,
		shards: map[int]*shardState{}, changed: make(chan struct{}), commitNow: make(chan struct{}, 1)}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		w.heartbeatLoop(runCtx)
	}()
	go func() {
		defer wg.Done()
		w.commitLoop(runCtx)
	}()
	err = w.deliverLoop(runCtx)
	stop()
	wg.Wait()
	w.leave()
	return err
}

// signal wakes the delivery loop after an assignment change. Caller holds mu.
func (w *worker) signal() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// heartbeatLoop keeps the membership alive and applies the coordinator's answers.
func (w *worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		w.heartbeat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeat sends one heartbeat carrying pending commits and releases.
func (w *worker) heartbeat(ctx context.Context) {
	cmd := consumer.Command{Op: consumer.OpHeartbeat, Worker: w.cfg.Worker, SessionTimeout: w.cfg.SessionTimeout,
		HaltThreshold: max(w.cfg.HaltThreshold, 0), Start: consumer.Start{Kind: consumer.StartKind(w.cfg.Start)}}
	if w.cfg.Start == StartTimestamp {
		cmd.Start.Time = w.cfg.StartTime.UTC()
	}
	w.mu.Lock()
	var releasing []*shardState
	commits := w.pendingCommits()
	for _, st := range w.shards {
		if st.revoke && st.inflight == 0 {
			releasing = append(releasing, st)
			cmd.Released = append(cmd.Released, st.shard)
		}
	}
	orphans := make([]int, 0, len(w.orphans))
	for s := range w.orphans {
		if _, held := w.shards[s]; !held {
			orphans = append(orphans, s)
			cmd.Released = append(cmd.Released, s)
		}
	}
	w.mu.Unlock()
	cmd.Commits = commits
	sort.Ints(cmd.Released)
	hctx, cancel := context.WithTimeout(ctx, w.cfg.SessionTimeout)
	defer cancel()
	sent := time.Now()
	res, err := w.src.GroupCommand(hctx, w.cfg.Group, cmd)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Logger.Warn("triggers: heartbeat failed", "group", w.cfg.Group, "worker", w.cfg.Worker, "error", err)
		}
		if time.Now().After(w.deadline) && len(w.shards) > 0 {
			w.cfg.Logger.Warn("triggers: lease expired without a heartbeat; stopping every shard", "group", w.cfg.Group, "worker", w.cfg.Worker)
			for _, st := range w.shards {
				w.drop(st)
			}
			w.signal()
		}
		return
	}
	w.deadline = sent.Add(w.cfg.SessionTimeout - w.cfg.LeaseMargin)
	w.applyCommits(commits, res.Accepted)
	for _, s := range orphans {
		delete(w.orphans, s)
	}
	for _, st := range releasing {
		if w.shards[st.shard] == st {
			w.drop(st)
		}
	}
	changed := false
	assigned := map[int]consumer.Lease{}
	for _, l := range res.Assigned {
		assigned[l.Shard] = l
	}
	revoke := map[int]bool{}
	for _, s := range res.Revoke {
		revoke[s] = true
		if _, held := w.shards[s]; !held {
			if w.orphans == nil {
				w.orphans = map[int]bool{}
			}
			w.orphans[s] = true
			changed = true
		}
	}
	for s, st := range w.shards {
		l, ok := assigned[s]
		switch {
		case revoke[s]:
			if !st.revoke {
				st.revoke = true
				changed = true
			}
		case !ok || l.Epoch != st.epoch:
			w.drop(st) // reassigned while we did not hear from the coordinator
			changed = true
		}
	}
	for s, l := range assigned {
		if _, ok := w.shards[s]; ok {
			continue
		}
		sctx, scancel := context.WithCancel(ctx)
		w.shards[s] = &shardState{shard: s, epoch: l.Epoch, offset: l.Offset, committed: l.Offset, ctx: sctx, cancel: scancel}
		changed = true
	}
	if len(assigned) > 0 || changed {
		w.cfg.Logger.Debug("triggers: assignment", "group", w.cfg.Group, "worker", w.cfg.Worker, "shards", len(w.shards), "generation", res.Generation)
	}
	w.retries = nil
	listed := make(map[uint64]bool, len(res.Retry))
	for _, p := range res.Retry {
		listed[p.ID] = true
		if !w.resolved[p.ID] {
			w.retries = append(w.retries, p)
		}
	}
	for id := range w.resolved {
		if !listed[id] {
			delete(w.resolved, id)
		}
	}
	if res.Halted && !w.halted {
		w.halted = true
		changed = true
	}
	w.m.setOwned(len(w.shards))
	if changed {
		w.signal()
	}
}

// drop forgets a shard: its lease ended or was released. Caller holds mu.
func (w *worker) drop(st *shardState) {
	st.lost = true
	st.cancel()
	if w.shards[st.shard] == st {
		delete(w.shards, st.shard)
	}
	w.m.forget(st.shard)
}

// pendingCommits lists the offsets handled but not yet committed. Caller holds mu.
func (w *worker) pendingCommits() []consumer.Offset {
	var out []consumer.Offset
	for _, st := range w.shards {
		if st.offset >= 0 && st.offset > st.committed {
			out = append(out, consumer.Offset{Shard: st.shard, Epoch: st.epoch, Offset: st.offset})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// applyCommits records the coordinator's answer to commits. A refused commit means the lease
// is gone: the shard is dropped. Caller holds mu.
func (w *worker) applyCommits(commits []consumer.Offset, accepted []bool) {
	for i, c := range commits {
		st, ok := w.shards[c.Shard]
		if !ok || st.epoch != c.Epoch {
			continue
		}
		if i < len(accepted) && accepted[i] {
			st.committed = max(st.committed, c.Offset)
			if w.cfg.OnCommit != nil {
				w.cfg.OnCommit(c.Shard, c.Offset)
			}
			continue
		}
		w.cfg.Logger.Info("triggers: commit fenced, shard lost", "group", w.cfg.Group, "worker", w.cfg.Worker, "shard", c.Shard, "epoch", c.Epoch)
		w.drop(st)
		w.signal()
	}
}

// commit sends the pending commits now.
func (w *worker) commit(ctx context.Context) {
	w.mu.Lock()
	commits := w.pendingCommits()
	w.mu.Unlock()
	if len(commits) == 0 {
		return
	}
	res, err := w.src.GroupCommand(ctx, w.cfg.Group, consumer.Command{Op: consumer.OpCommit, Worker: w.cfg.Worker, Commits: commits})
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Logger.Warn("triggers: commit failed; retried with the next heartbeat", "group", w.cfg.Group, "error", err)
		}
		return
	}
	w.mu.Lock()
	w.applyCommits(commits, res.Accepted)
	w.mu.Unlock()
}

// commitLoop sends the pending commits whenever the delivery loop asks, so that delivery never
// waits for a commit (a raft write) before reading on. Commits are also carried by every
// heartbeat and by leave; a commit that fails is sent again with the next one.
func (w *worker) commitLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.commitNow:
			w.commit(ctx)
		}
	}
}

// requestCommit asks commitLoop to commit soon; requests made while one is pending merge.
func (w *worker) requestCommit() {
	select {
	case w.commitNow <- struct{}{}:
	default:
	}
}

// leave commits what was handled and leaves the group, so the shards move at once.
func (w *worker) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.SessionTimeout)
	defer cancel()
	w.mu.Lock()
	commits := w.pendingCommits()
	for _, st := range w.shards {
		st.cancel()
	}
	w.mu.Unlock()
	if _, err := w.src.GroupCommand(ctx, w.cfg.Group, consumer.Command{Op: consumer.OpLeave, Worker: w.cfg.Worker, Commits: commits}); err != nil {
		w.cfg.Logger.Warn("triggers: leave failed; the shards move when the session expires", "group", w.cfg.Group, "worker", w.cfg.Worker, "error", err)
	}
	w.m.setOwned(0)
}

// deliverable returns the shards to read now and resolves start positions. ok is false when
// the group halted.
func (w *worker) deliverable() (ready []*shardState, start []*shardState, changed <-chan struct{}, halted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.halted {
		return nil, nil, w.changed, true
	}
	if time.Now().Before(w.deadline) {
		for _, st := range w.shards {
			switch {
			case st.revoke || st.lost:
			case st.offset < 0:
				start = append(start, st)
			default:
				ready = append(ready, st)
			}
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].shard < ready[j].shard })
	return ready, start, w.changed, false
}

// beginRound starts a round of a delivery loop: the shards that may be delivered now (see
// deliverable), with the start positions of new ones resolved and committed and the parked
// cells due redelivered; changed is closed at the next assignment change. halted: the group
// halted, nothing else was done.
func (w *worker) beginRound(ctx context.Context) (ready []*shardState, changed <-chan struct{}, halted bool) {
	ready, start, changed, halted := w.deliverable()
	if halted {
		return nil, nil, true
	}
	for _, st := range start {
		w.resolveStart(ctx, st)
	}
	if len(start) > 0 {
		w.commit(ctx)
	}
	w.redeliverParked(ctx)
	return ready, changed, false
}

// logRead is the log read of states from their offsets. The caller holds mu.
func (w *worker) logRead(states []*shardState) LogRead {
	req := LogRead{ColumnKey: w.cfg.ColumnKey, Limit: w.cfg.BatchSize, Wait: w.cfg.PollWait, Consistency: w.cfg.Consistency}
	for _, st := range states {
		req.Shards = append(req.Shards, ShardLocation{Shard: st.shard, Location: st.readFrom()})
	}
	return req
}

// deliverLoop reads the owned shards' logs and delivers their cells until ctx ends or the group
// halts.
func (w *worker) deliverLoop(ctx context.Context) error {
	if w.cfg.Pipeline {
		return w.pipelineLoop(ctx)
	}
	for ctx.Err() == nil {
		ready, changed, halted := w.beginRound(ctx)
		if halted {
			return ErrHalted
		}
		if len(ready) == 0 {
			select {
			case <-ctx.Done():
			case <-changed:
			case <-time.After(w.cfg.HeartbeatInterval):
			}
			continue
		}
		w.mu.Lock()
		req := w.logRead(ready)
		w.mu.Unlock()
		pages, ok := w.poll(ctx, req, changed, nil)
		if !ok {
			continue
		}
		if w.deliverPages(ctx, ready, req, pages) {
			w.commit(ctx)
			return ErrHalted
		}
		w.requestCommit()
	}
	return nil
}

// deliverPages delivers the cells of each page, the answer to req (shards concurrently, each in
// order), and moves positions past filtered cells. It reports whether the group halted.
func (w *worker) deliverPages(ctx context.Context, ready []*shardState, req LogRead, pages []Page) bool {
	sem := make(chan struct{}, w.cfg.Concurrency)
	var wg sync.WaitGroup
	var halted sync.Once
	stop := false
	now := time.Now()
	for i, p := range pages {
		st := ready[i]
		if !w.beginPage(st, p, req.Shards[i].Location, now) {
			continue
		}
		if w.cfg.OnPage != nil {
			p.token = w.cfg.OnPage(st.shard, p.Cells)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer w.endPage(st)
			defer w.pageEnded(p)
			if w.deliverShard(ctx, st, p, nil) {
				halted.Do(func() { stop = true })
			}
		}()
	}
	wg.Wait()
	return stop
}

// owns reports whether st may be delivered now: still owned under its epoch, not revoked, and
// within the local lease deadline.
func (w *worker) owns(st *shardState) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !st.lost && !st.revoke && !w.halted && w.shards[st.shard] == st && time.Now().Before(w.deadline)
}

// deliverShard delivers one page of a shard in order. ready, when not nil, waits until the
// page before it (still in delivery beside it, Config.PipelineDepth) has ended and reports
// whether that page was delivered: the page's offset moves, and its cells are delivered one
// by one, only after that, and not at all when it was not. It reports whether the group
// halted.
func (w *worker) deliverShard(ctx context.Context, st *shardState, p Page, ready func() bool) (halted bool) {
	if ready == nil {
		ready = func() bool { return true }
	}
	switch {
	case w.bh != nil && w.h == nil:
		w.deliverBatch(ctx, st, p, ready)
		return false
	case w.bh != nil: // RunPages: the page at once, else cell by cell below
		if ctx.Err() != nil || !w.owns(st) {
			return false
		}
		err := w.callBatch(pageContext(st.ctx, p), st.shard, p.Cells)
		if !ready() {
			return false
		}
		if err == nil {
			w.passPage(st, p)
			return false
		}
		w.m.incError()
		if st.ctx.Err() != nil {
			return false
		}
		w.cfg.Logger.Debug("triggers: page handler failed; delivering its cells one by one", "group", w.cfg.Group,
			"shard", st.shard, "cells", len(p.Cells), "error", err)
	default:
		if !ready() {
			return false
		}
	}
	for i, c := range p.Cells {
		if ctx.Err() != nil || !w.owns(st) {
			return false
		}
		herr := w.attempt(st.ctx, c)
		if herr != nil {
			if st.ctx.Err() != nil {
				return false // lost the shard or stopping: the next owner delivers it again
			}
			res, err := w.park(ctx, st, c, 0, herr)
			if err != nil {
				w.cfg.Logger.Warn("triggers: park failed; the cell is delivered again", "group", w.cfg.Group, "shard", st.shard, "error", err)
				return false
			}
			if res.Fenced {
				w.mu.Lock()
				w.drop(st)
				w.mu.Unlock()
				return false
			}
			w.mu.Lock()
			st.offset = c.AddedID
			w.mu.Unlock()
			if res.Halted {
				w.mu.Lock()
				w.halted = true
				w.mu.Unlock()
				return true
			}
			continue
		}
		w.m.incDelivered()
		w.mu.Lock()
		if !st.lost {
			st.offset = c.AddedID
		}
		lagSec := 0.0
		if i+1 < len(p.Cells) {
			lagSec = max(time.Since(p.Cells[i+1].CreatedAt).Seconds(), 0)
		}
		if p.HighWater >= 0 {
			w.m.lag(st.shard, max(p.HighWater-st.offset, 0), lagSec)
		}
		w.mu.Unlock()
	}
	return false
}

// attempt calls the handler up to MaxAttempts times with exponential backoff and full jitter.
// It returns the last error, or ctx's error if ctx ends first.
func (w *worker) attempt(ctx context.Context, c cells.Cell) error {
	backoff := w.cfg.Backoff
	var err error
	for a := 1; a <= w.cfg.MaxAttempts; a++ {
		if err = w.call(ctx, c); err == nil {
			return nil
		}
		w.m.incError()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.cfg.Logger.Debug("triggers: handler failed", "group", w.cfg.Group, "cell", c.Key.String(), "attempt", a, "error", err)
		if a < w.cfg.MaxAttempts {
			if !sleepCtx(ctx, backoff/2+rand.N(backoff/2+1)) {
				return ctx.Err()
			}
			backoff = min(backoff*2, w.cfg.BackoffMax)
		}
	}
	return err
}

// call runs the handler, turning a panic into an error.
func (w *worker) call(ctx context.Context, c cells.Cell) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return w.h(ctx, c)
}

// park parks c (id 0: a new parked cell) with its error.
func (w *worker) park(ctx context.Context, st *shardState, c cells.Cell, id uint64, herr error) (consumer.Result, error) {
	w.mu.Lock()
	epoch := st.epoch
	w.mu.Unlock()
	w.m.incParked()
	w.cfg.Logger.Warn("triggers: parking cell", "group", w.cfg.Group, "shard", st.shard, "cell", c.Key.String(), "added_id", c.AddedID, "error", herr)
	pctx, cancel := context.WithTimeout(ctx, w.cfg.SessionTimeout)
	defer cancel()
	msg := herr.Error()
	if len(msg) > maxParkErrorBytes {
		msg = msg[:maxParkErrorBytes]
	}
	return w.src.GroupCommand(pctx, w.cfg.Group, consumer.Command{
		Op: consumer.OpPark, Worker: w.cfg.Worker, Epoch: epoch, HaltThreshold: max(w.cfg.HaltThreshold, 0),
		Park: &consumer.ParkedCell{ID: id, Shard: st.shard, AddedID: c.AddedID, RowKey: c.RowKey, ColumnKey: c.ColumnKey,
			RefKey: c.RefKey, Error: msg, Attempts: w.cfg.MaxAttempts},
	})
}

// maxParkErrorBytes bounds the handler error kept with a parked cell, as the HTTP API does.
const maxParkErrorBytes = 4096

// readOne reads one page of shard st's log (at most one cell) from loc, or from t when t is not
// zero.
func (w *worker) readOne(ctx context.Context, st *shardState, loc int64, t time.Time) (Page, error) {
	pages, err := w.src.ReadLogs(ctx, LogRead{Shards: []ShardLocation{{Shard: st.shard, Location: loc}}, Time: t, Limit: 1,
		Consistency: w.cfg.Consistency})
	if err != nil {
		return Page{}, err
	}
	if len(pages) != 1 {
		return Page{}, fmt.Errorf("triggers: %d pages for one shard", len(pages))
	}
	return pages[0], nil
}

// resolveStart sets the position of a shard with no committed offset from the group's start.
func (w *worker) resolveStart(ctx context.Context, st *shardState) {
	var loc int64
	switch w.cfg.Start {
	case StartEarliest:
	case StartLatest:
		p, err := w.readOne(ctx, st, 0, time.Time{})
		if err != nil {
			w.cfg.Logger.Warn("triggers: resolve start", "group", w.cfg.Group, "shard", st.shard, "error", err)
			return
		}
		loc = p.HighWater
	case StartTimestamp:
		p, err := w.readOne(ctx, st, 0, w.cfg.StartTime)
		if err != nil {
			w.cfg.Logger.Warn("triggers: resolve start", "group", w.cfg.Group, "shard", st.shard, "error", err)
			return
		}
		loc = p.NextLocation
		if len(p.Cells) > 0 {
			loc = p.Cells[0].AddedID - 1
		}
	}
	w.mu.Lock()
	if st.offset < 0 {
		st.offset = loc
	}
	w.mu.Unlock()
}

// redeliverParked delivers the parked cells an operator marked for retry on owned shards:
// resolved on success, parked again (same id) on failure.
func (w *worker) redeliverParked(ctx context.Context) {
	w.mu.Lock()
	retries := w.retries
	w.retries = nil
	w.mu.Unlock()
	for _, p := range retries {
		w.mu.Lock()
		st, ok := w.shards[p.Shard]
		w.mu.Unlock()
		if !ok || !w.owns(st) {
			continue
		}
		key := cells.Key{RowKey: p.RowKey, ColumnKey: p.ColumnKey, RefKey: p.RefKey}
		var c cells.Cell
		var err error
		if key.IsTombstone() {
			// A tombstone (an erased row) is never read back as a cell: it is rebuilt from its
			// key, without the created_at the parked cell does not keep.
			c = cells.NewTombstone(p.RowKey, p.AddedID, time.Time{})
		} else {
			c, err = w.src.GetCell(ctx, key, w.cfg.Consistency)
		}
		if err != nil {
			w.cfg.Logger.Warn("triggers: read parked cell", "group", w.cfg.Group, "id", p.ID, "error", err)
			continue
		}
		if herr := w.attempt(st.ctx, c); herr != nil {
			if st.ctx.Err() == nil {
				if _, err := w.park(ctx, st, c, p.ID, herr); err != nil {
					w.cfg.Logger.Warn("triggers: park again", "group", w.cfg.Group, "id", p.ID, "error", err)
				}
			}
			continue
		}
		w.m.incDelivered()
		w.mu.Lock()
		epoch := st.epoch
		w.mu.Unlock()
		if _, err := w.src.GroupCommand(ctx, w.cfg.Group, consumer.Command{Op: consumer.OpResolve, Worker: w.cfg.Worker, Epoch: epoch, IDs: []uint64{p.ID}}); err != nil {
			w.cfg.Logger.Warn("triggers: resolve parked cell", "group", w.cfg.Group, "id", p.ID, "error", err)
			continue
		}
		w.mu.Lock()
		if w.resolved == nil {
			w.resolved = map[uint64]bool{}
		}
		w.resolved[p.ID] = true
		w.mu.Unlock()
	}
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
