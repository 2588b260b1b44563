package bench

// The consumer-group workloads of `schemaless bench`: trigger-latency (write acknowledged to
// handler called, at a fixed write rate) and log-read (how fast one group reads a preloaded log).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/triggers"
)

// TriggerFigures are the figures only the consumer-group workloads have (Result.Triggers).
// Times are in microseconds.
type TriggerFigures struct {
	// Group is the consumer group the run created (a new one per run).
	Group string `json:"group"`
	// Workers of the group; also Result.Clients.
	Workers int `json:"workers"`
	// Rate is the write rate asked for (trigger-latency), WritesPerSec the one achieved.
	Rate         int     `json:"rate,omitempty"`
	WritesPerSec float64 `json:"writes_per_sec,omitempty"`
	// BehindMax is how late the latest measured write started after its scheduled time: more
	// than a few ms means the writers (--max-writers) or the cluster could not keep the rate.
	BehindMax int64 `json:"behind_max_us"`
	// PutP50 and PutP99 are the put_cell latencies of the measured writes.
	PutP50 int64 `json:"put_p50_us,omitempty"`
	PutP99 int64 `json:"put_p99_us,omitempty"`
	// Delivered counts the measured cells the handler saw, Undelivered the acknowledged ones it
	// did not see before the drain ended, Early those it saw before their put_cell answer
	// arrived (recorded as 0 latency), Duplicates the second and later calls for one cell.
	Delivered   int64 `json:"delivered"`
	Undelivered int64 `json:"undelivered"`
	Early       int64 `json:"early"`
	Duplicates  int64 `json:"duplicates"`
	// Drain is how long after the last write the last measured cell was delivered (or the
	// drain limit when some never were).
	Drain int64 `json:"drain_us"`
	// Preloaded is the log-read's log size, FirstCell the time from starting the workers to the
	// first delivered cell (joining the group, assignment, first poll).
	Preloaded int   `json:"preloaded,omitempty"`
	FirstCell int64 `json:"first_cell_us,omitempty"`
}

// triggerRun is one run of a trigger workload.
type triggerRun struct {
	target      string
	endpoints   []string
	workers     int
	consistency string
	f           Config
	stderr      io.Writer
}

// benchKey returns the row key of cell i of a run: random, with prefix in bytes 0..3 and i in
// bytes 12..15, so a handler finds the cell's index without a map.
func benchKey(prefix uint32, i int) uuid.UUID {
	u := uuid.New()
	binary.BigEndian.PutUint32(u[0:4], prefix)
	binary.BigEndian.PutUint32(u[12:16], uint32(i))
	return u
}

// benchIndex returns the index of a cell written by benchKey with prefix, or -1.
func benchIndex(prefix uint32, rk uuid.UUID, n int) int {
	if binary.BigEndian.Uint32(rk[0:4]) != prefix {
		return -1
	}
	i := int(binary.BigEndian.Uint32(rk[12:16]))
	if i >= n {
		return -1
	}
	return i
}

// runTag is a short random tag naming a run's group and column.
func runTag() (uint32, string) {
	p := rand.Uint32()
	return p, fmt.Sprintf("%08x", p)
}

// startWorkers starts n workers of group with cfg's other fields, each with its own client;
// stop cancels them and waits until every one has committed and left.
func (r triggerRun) startWorkers(ctx context.Context, cfg triggers.Config, h triggers.Handler) (stop func() error, err error) {
	level := slog.LevelError + 4 // silent
	if r.f.Triggers.LogWarnings {
		level = slog.LevelWarn
	}
	cfg.Logger = slog.New(slog.NewTextHandler(r.stderr, &slog.HandlerOptions{Level: level}))
	cfg.BatchSize, cfg.Concurrency, cfg.PollWait, cfg.Consistency = r.f.Triggers.BatchSize, r.f.Triggers.Concurrency, r.f.Triggers.PollWait, r.consistency
	if cfg.PollWait == 0 {
		cfg.PollWait = time.Millisecond // triggers treats 0 as the default
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, r.workers)
	for i := 0; i < r.workers; i++ {
		cl, err := newClient(r.endpoints, 4)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		wc := cfg
		wc.Source, wc.Worker = cl.TriggerSource(), fmt.Sprintf("bench-%d", i+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = triggers.Run(ctx, wc, h)
		}()
	}
	return func() error {
		cancel()
		wg.Wait()
		return errors.Join(errs...)
	}, nil
}

// waitGroupReady polls the group's status until it has r.workers members, every shard an owner
// and a committed offset, and the shards split evenly: the state in which the measurement
// starts.
func (r triggerRun) waitGroupReady(ctx context.Context, group string) error {
	cl, err := newClient(r.endpoints, 2)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	strong := client.WithConsistency(client.ConsistencyStrong)
	var last string
	for {
		st, err := cl.GroupStatus(ctx, group, strong)
		switch {
		case err != nil:
			last = err.Error()
		case len(st.Members) != r.workers:
			last = fmt.Sprintf("%d members of %d", len(st.Members), r.workers)
		default:
			ready := len(st.Shards) > 0
			for _, s := range st.Shards {
				ready = ready && s.Owner != "" && s.Offset >= 0
			}
			lo, hi := len(st.Shards), 0
			for _, m := range st.Members {
				lo, hi = min(lo, m.Shards), max(hi, m.Shards)
			}
			if ready && hi-lo <= 1 {
				return nil
			}
			last = fmt.Sprintf("shards not all owned and committed (members own %d..%d)", lo, hi)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %s not ready: %s", group, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// latencyCell is the state of one trigger-latency write; times are nanoseconds since the run's
// base time, 0 when not (yet) seen.
type latencyCell struct {
	start, ack, delivered atomic.Int64
	failed                atomic.Bool
	dups                  atomic.Int32
}

// benchTriggerLatency writes put_cells at rate per second (open loop: each write is due at
// base + i/rate and starts then, or as soon as one of maxWriters writers is free) while a group
// of r.workers workers, started from the latest position, delivers them; it records the time
// from each write's answer to its handler call.
func (r triggerRun) benchTriggerLatency(ctx context.Context, rate int) (Result, error) {
	f := r.f
	prefix, tag := runTag()
	group, column := "bench-latency-"+tag, "TRIGLAT_"+tag
	warm := int(int64(rate) * int64(f.Warmup) / int64(time.Second))
	total := warm + int(int64(rate)*int64(f.Duration)/int64(time.Second))
	if total >= 1<<32 {
		return Result{}, errors.New("--rate times --duration is too large")
	}
	cs := make([]latencyCell, total)
	var base time.Time // set before the first write; read by the handler only after
	var baseSet atomic.Bool
	since := func() int64 { return max(time.Since(base).Nanoseconds(), 1) }

	cfg := triggers.DefaultConfig()
	cfg.Group, cfg.ColumnKey, cfg.Start = group, column, triggers.StartLatest
	stop, err := r.startWorkers(ctx, cfg, func(_ context.Context, c cells.Cell) error {
		i := benchIndex(prefix, c.RowKey, total)
		if i < 0 || !baseSet.Load() {
			return nil
		}
		if !cs[i].delivered.CompareAndSwap(0, since()) {
			cs[i].dups.Add(1)
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()
	if err := r.waitGroupReady(ctx, group); err != nil {
		return Result{}, err
	}

	cl, err := newClient(r.endpoints, f.Triggers.MaxWriters)
	if err != nil {
		return Result{}, err
	}
	due := func(i int) int64 { return int64(i) * int64(time.Second) / int64(rate) }
	jobs := make(chan int)
	var writers sync.WaitGroup
	var firstErr atomic.Value
	body := benchBody(rand.New(rand.NewPCG(3, 4)), f.ValueSize)
	for w := 0; w < f.Triggers.MaxWriters; w++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range jobs {
				c := &cs[i]
				c.start.Store(since())
				_, err := cl.PutCell(ctx, benchKey(prefix, i), column, 1, body)
				if err != nil {
					c.failed.Store(true)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				c.ack.Store(since())
			}
		}()
	}
	base = time.Now()
	baseSet.Store(true)
	for i := 0; i < total && ctx.Err() == nil; i++ {
		if d := time.Duration(due(i) - time.Since(base).Nanoseconds()); d > 0 {
			time.Sleep(d)
		}
		jobs <- i
	}
	close(jobs)
	writers.Wait()
	writesDone := since()

	// Drain: wait until every acknowledged measured write was delivered, or f.Triggers.Drain.
	pending := func() int {
		n := 0
		for i := warm; i < total; i++ {
			if cs[i].ack.Load() > 0 && cs[i].delivered.Load() == 0 {
				n++
			}
		}
		return n
	}
	drainEnd := time.Now().Add(f.Triggers.Drain)
	for pending() > 0 && time.Now().Before(drainEnd) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopped = true
	if err := stop(); err != nil {
		return Result{}, fmt.Errorf("group %s: %w", group, err)
	}

	lat := hdrhistogram.New(1, 600_000_000, 3)
	put := hdrhistogram.New(1, 600_000_000, 3)
	tf := &TriggerFigures{Group: group, Workers: r.workers, Rate: rate}
	res := Result{Workload: workloadTriggerLatency, Consistency: r.consistency, Clients: r.workers, Triggers: tf}
	var firstDue, lastStart, lastAck, lastDelivered int64 = due(warm), 0, 0, 0
	for i := warm; i < total; i++ {
		c := &cs[i]
		if c.start.Load() > 0 {
			tf.BehindMax = max(tf.BehindMax, (c.start.Load()-due(i))/1000)
		}
		tf.Duplicates += int64(c.dups.Load())
		d := c.delivered.Load()
		if d > 0 {
			tf.Delivered++
			lastDelivered = max(lastDelivered, d)
		}
		if c.failed.Load() {
			res.Errors++
			continue
		}
		a := c.ack.Load()
		if a == 0 {
			continue // never written (ctx ended)
		}
		res.Ops++
		lastAck, lastStart = max(lastAck, a), max(lastStart, c.start.Load())
		_ = put.RecordValue((a - c.start.Load()) / 1000)
		switch {
		case d == 0:
			tf.Undelivered++
		case d < a:
			tf.Early++
			_ = lat.RecordValue(0)
		default:
			_ = lat.RecordValue((d - a) / 1000)
		}
	}
	res.Cells = tf.Delivered
	res.Seconds = float64(max(lastAck, lastDelivered)-firstDue) / 1e9
	if res.Seconds > 0 {
		// Writes per second as they started: the rate the cluster kept up with.
		res.OpsPerSec = float64(res.Ops) / (float64(lastStart-firstDue+int64(time.Second)/int64(rate)) / 1e9)
		res.CellsPerSec = float64(res.Cells) / res.Seconds
	}
	tf.WritesPerSec = res.OpsPerSec
	tf.Drain = max(lastDelivered-writesDone, 0) / 1000
	if tf.Undelivered > 0 {
		tf.Drain = f.Triggers.Drain.Microseconds()
	}
	res.P50, res.P90, res.P99, res.Max = lat.ValueAtQuantile(50), lat.ValueAtQuantile(90), lat.ValueAtQuantile(99), lat.Max()
	tf.PutP50, tf.PutP99 = put.ValueAtQuantile(50), put.ValueAtQuantile(99)
	if e, ok := firstErr.Load().(string); ok {
		res.FirstError = e
	}
	return res, nil
}

// logPreload is the log a target's log-read runs read: n cells of column, row keys from
// benchKey(prefix, i).
type logPreload struct {
	prefix uint32
	column string
	n      int
}

// preloadLog writes f.Triggers.LogCells cells of a new column with put_cells of 500, 8 in flight.
func preloadLog(ctx context.Context, endpoints []string, env *Env) (logPreload, error) {
	f := env.Config
	prefix, tag := runTag()
	lp := logPreload{prefix: prefix, column: "LOGREAD_" + tag, n: f.Triggers.LogCells}
	cl, err := newClient(endpoints, 8)
	if err != nil {
		return lp, err
	}
	const per, inflight = 500, 8
	start := time.Now()
	next := make(chan int)
	errs := make(chan error, inflight)
	var wg sync.WaitGroup
	for w := 0; w < inflight; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed+1))
			for from := range next {
				ws := make([]client.CellWrite, 0, per)
				for i := from; i < min(from+per, lp.n); i++ {
					ws = append(ws, client.CellWrite{Key: cells.Key{RowKey: benchKey(prefix, i), ColumnKey: lp.column, RefKey: 1},
						Body: benchBody(rng, f.ValueSize)})
				}
				if _, err := cl.PutCells(ctx, ws); err != nil {
					errs <- err
					return
				}
			}
		}(uint64(w) + 10)
	}
	var err2 error
loop:
	for from := 0; from < lp.n; from += per {
		select {
		case next <- from:
		case err2 = <-errs:
			break loop
		}
	}
	close(next)
	wg.Wait()
	if err2 == nil {
		select {
		case err2 = <-errs:
		default:
		}
	}
	if err2 != nil {
		return lp, err2
	}
	if !f.JSON {
		el := time.Since(start)
		fmt.Fprintf(env.Stderr, "preloaded %d cells of %s in %.1fs (%.0f cells/s)\n", lp.n, lp.column, el.Seconds(), float64(lp.n)/el.Seconds())
	}
	return lp, nil
}

// benchLogRead starts a new group of r.workers workers from the earliest position on lp's
// column and measures how long it takes to deliver every cell of lp.
func (r triggerRun) benchLogRead(ctx context.Context, lp logPreload) (Result, error) {
	f := r.f
	_, tag := runTag()
	group := "bench-read-" + tag
	seen := make([]atomic.Bool, lp.n)
	var distinct, dups, firstAt, lastAt atomic.Int64
	done := make(chan struct{})
	var t0 time.Time
	handler := func(_ context.Context, c cells.Cell) error {
		i := benchIndex(lp.prefix, c.RowKey, lp.n)
		if i < 0 {
			return nil
		}
		if !seen[i].CompareAndSwap(false, true) {
			dups.Add(1)
			return nil
		}
		n := distinct.Add(1)
		if n == 1 {
			firstAt.Store(int64(time.Since(t0)))
		}
		if n == int64(lp.n) {
			lastAt.Store(int64(time.Since(t0)))
			close(done)
		}
		return nil
	}
	if f.Triggers.ReadCPUProfile != "" {
		path := fmt.Sprintf("%s.%s.w%d", f.Triggers.ReadCPUProfile, r.target, r.workers)
		pf, err := os.Create(path)
		if err != nil {
			return Result{}, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return Result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	cfg := triggers.DefaultConfig()
	cfg.Group, cfg.ColumnKey, cfg.Start = group, lp.column, triggers.StartEarliest
	t0 = time.Now()
	stop, err := r.startWorkers(ctx, cfg, handler)
	if err != nil {
		return Result{}, err
	}
	// Wait for the last cell; give up after f.Triggers.Drain without progress.
	last, lastChange := int64(0), time.Now()
	complete := false
	for !complete && ctx.Err() == nil {
		select {
		case <-done:
			complete = true
		case <-time.After(100 * time.Millisecond):
			if n := distinct.Load(); n != last {
				last, lastChange = n, time.Now()
			} else if time.Since(lastChange) > f.Triggers.Drain {
				lastAt.Store(int64(time.Since(t0)))
				complete = true
			}
		}
	}
	if err := stop(); err != nil {
		return Result{}, fmt.Errorf("group %s: %w", group, err)
	}
	tf := &TriggerFigures{Group: group, Workers: r.workers, Preloaded: lp.n, Delivered: distinct.Load(),
		Undelivered: int64(lp.n) - distinct.Load(), Duplicates: dups.Load(), FirstCell: firstAt.Load() / 1000}
	res := Result{Workload: workloadLogRead, Consistency: r.consistency, Clients: r.workers, Triggers: tf,
		Ops: tf.Delivered, Cells: tf.Delivered, Seconds: time.Duration(lastAt.Load()).Seconds()}
	if res.Seconds > 0 {
		res.OpsPerSec = float64(res.Ops) / res.Seconds
		res.CellsPerSec = res.OpsPerSec
	}
	return res, nil
}

// triggerWorkload is a consumer-group workload (package triggers): trigger-latency (write
// acknowledged to handler called, at a fixed write rate) or log-read (how fast one group reads a
// preloaded log). Each run creates a new group whose workers run in this process.
type triggerWorkload struct{ name string }

func (w triggerWorkload) Name() string { return w.name }

// Run runs the workload on t once per --workers, --trigger-consistency (and, for
// trigger-latency, --rate) value. log-read preloads its log (env's) on first use. A target that
// stores no cells is skipped.
func (w triggerWorkload) Run(ctx context.Context, env *Env, t Target) ([]Result, error) {
	f, target, endpoints, lp := env.Config, t.Name(), t.Endpoints(), &env.log
	var out []Result
	if !storesCells(t) {
		fmt.Fprintf(env.Stderr, "%s %s: skipped (raft-noop stores no cells to read)\n", target, w.name)
		return nil, nil
	}
	if w.name == workloadLogRead && lp.n == 0 {
		var err error
		if *lp, err = preloadLog(ctx, endpoints, env); err != nil {
			return nil, fmt.Errorf("%s: preload log: %w", target, err)
		}
	}
	rates := []int{0}
	if w.name == workloadTriggerLatency {
		rates = f.Rates
	}
	for _, cons := range f.Triggers.Consistency {
		for _, n := range f.Triggers.Workers {
			for _, rate := range rates {
				r := triggerRun{target: target, endpoints: endpoints, workers: n, consistency: cons, f: f, stderr: env.Stderr}
				var res Result
				var err error
				if w.name == workloadLogRead {
					res, err = r.benchLogRead(ctx, *lp)
				} else {
					res, err = r.benchTriggerLatency(ctx, rate)
				}
				if err != nil {
					return out, fmt.Errorf("%s %s workers=%d: %w", target, w.name, n, err)
				}
				res.Target = target
				if !f.JSON {
					fmt.Fprintf(env.Stderr, "%s\n", triggerNote(res))
				}
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// triggerNote is the line printed under the table for a trigger workload's run.
func triggerNote(r Result) string {
	t := r.Triggers
	head := fmt.Sprintf("%s %s %s workers=%d", r.Target, r.Workload, r.Consistency, t.Workers)
	if r.Workload == workloadLogRead {
		return fmt.Sprintf("%s: %d of %d cells in %.2fs (%.0f cells/s), first cell after %.0f ms, %d undelivered, %d duplicates, group %s",
			head, t.Delivered, t.Preloaded, r.Seconds, r.CellsPerSec, float64(t.FirstCell)/1000, t.Undelivered, t.Duplicates, t.Group)
	}
	return fmt.Sprintf("%s: rate %d/s asked, %.0f writes/s done (latest start %.1f ms behind schedule, put p50 %.2f ms, p99 %.2f ms), "+
		"ack->handler p50 %.2f ms, p99 %.2f ms, max %.1f ms; %d delivered, %d undelivered, %d early (before the ack, counted as 0 ms), %d duplicates, %d write errors, drain %.0f ms, group %s",
		head, t.Rate, t.WritesPerSec, float64(t.BehindMax)/1000, float64(t.PutP50)/1000, float64(t.PutP99)/1000,
		float64(r.P50)/1000, float64(r.P99)/1000, float64(r.Max)/1000, t.Delivered, t.Undelivered, t.Early, t.Duplicates, r.Errors, float64(t.Drain)/1000, t.Group)
}
