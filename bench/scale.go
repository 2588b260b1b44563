package bench

// The scale-cells workload: latency at a fixed, open-loop request rate as the stored cells grow.
// Each step loads flights (put_cells of 500, 8 in flight) until the datastore holds the step's
// cell count, then measures put_cell and get_cell_latest at --scale-rate each. See
// scaleCellsWorkload.Run.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/schemaless-db/schemaless/workload"
)

// Result rows of the scale-cells workload (Result.Workload).
const (
	scaleWorkloadPut  = workloadScaleCells + " put"
	scaleWorkloadGet  = workloadScaleCells + " get"
	scaleWorkloadLoad = workloadScaleCells + " load"
)

// Loading and sampling of the scale-cells workload.
const (
	// scaleLoadBatch is the cells per put_cells request of a step's load, and
	// scaleLoadInflight the requests in flight (the defaults of 'schemaless import flights').
	scaleLoadBatch    = 500
	scaleLoadInflight = 8
	// scaleSampleRows is the size of the uniform sample (reservoir) of loaded row keys that
	// get_cell_latest picks from.
	scaleSampleRows = 100_000
	// scaleFile3M and scaleFile100k are the default --scale-file: the first if it exists.
	scaleFile3M   = "../shared/datasets/flights-3m.csv.gz"
	scaleFile100k = "testdata/flights-100k.csv.gz"
)

// path returns the flights file to load: --scale-file, or its default.
func (s ScaleConfig) path() string {
	if s.File != "" {
		return s.File
	}
	if _, err := os.Stat(scaleFile3M); err == nil {
		return scaleFile3M
	}
	return scaleFile100k
}

// scaleCellsWorkload measures latency at a fixed rate as the stored cells grow.
type scaleCellsWorkload struct{}

func (scaleCellsWorkload) Name() string { return workloadScaleCells }

// Run runs the scale-cells workload on t: for each --scale-steps value,
// it loads flights from --scale-file until the cells this run stored reach the step, then
// runs put_cell of new cells (bodies of about --value-size bytes) and stale get_cell_latest of
// random loaded rows, each at --scale-rate requests/s on a fixed schedule, for --warmup then
// the measured --duration. At most --clients (its first value) requests of each kind are in
// flight: a request whose turn comes while that many are pending waits, and that wait counts
// in its latency, which runs from its scheduled start, not from when it was sent (no
// coordinated omission). Every request due before the end is sent, so a target that cannot
// keep the rate shows lower ops/s and higher latencies, not fewer requests.
//
// It returns three rows per step: "scale-cells load" (the step's load: cells/s and put_cells
// requests/s, 8 in flight, no latency; StoredCells at its end; no row when there was nothing
// to load), then "scale-cells put" and "scale-cells get" (stale), whose StoredCells is the
// cells stored when the step's warmup began: the step, unless the previous steps' put_cell
// calls already passed it. Only cells this run wrote are counted: on an
// external target, earlier data is not. raft-noop stores nothing to read: it is skipped with
// a note on stderr. A load error ends the workload, returned with the rows so far; request
// errors of a measurement are counted in its rows.
func (scaleCellsWorkload) Run(ctx context.Context, env *Env, t Target) ([]Result, error) {
	f, target := env.Config, t.Name()
	if !storesCells(t) {
		fmt.Fprintf(env.Stderr, "%s %s: skipped (raft-noop stores no cells to read)\n", target, workloadScaleCells)
		return nil, nil
	}
	s := f.Scale
	if len(f.Clients) == 0 || f.Clients[0] < 1 {
		return nil, errors.New("--clients: scale-cells needs a positive first value (its requests in flight)")
	}
	inflight := f.Clients[0]
	loadCl, err := newClient(t.Endpoints(), scaleLoadInflight)
	if err != nil {
		return nil, err
	}
	cl, err := newClient(t.Endpoints(), 2*inflight)
	if err != nil {
		return nil, err
	}
	airportsPath := f.Index.AirportsPath
	if airportsPath == "" {
		airportsPath = "testdata/airports.csv"
	}
	ld, err := newScaleLoader(loadCl, s.path(), airportsPath)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", target, workloadScaleCells, err)
	}
	defer ld.close()

	var out []Result
	var stored int64 // cells this run stored: loaded, and by the measurements' put_cell calls (warmups included)
	for _, step := range s.Steps {
		if want := int64(step) - stored; want > 0 {
			ls, err := ld.load(ctx, want)
			stored += ls.cells
			if err != nil {
				return out, fmt.Errorf("%s %s: load step %d: %w", target, workloadScaleCells, step, err)
			}
			secs := ls.elapsed.Seconds()
			r := Result{
				Target: target, Workload: scaleWorkloadLoad, Clients: scaleLoadInflight, Seconds: secs,
				Ops: ls.requests, Cells: ls.cells, Errors: ls.conflicts, StoredCells: stored,
				OpsPerSec: float64(ls.requests) / secs, CellsPerSec: float64(ls.cells) / secs,
			}
			if ls.conflicts > 0 {
				r.FirstError = fmt.Sprintf("%d cells answered conflict", ls.conflicts)
			}
			if !f.JSON {
				fmt.Fprintf(env.Stderr, "%s %s: loaded %d cells in %.1fs (%.0f cells/s), %d stored\n",
					target, workloadScaleCells, ls.cells, secs, r.CellsPerSec, stored)
			}
			out = append(out, r)
		}
		at := stored
		put, get, written := scaleMeasure(ctx, cl, ld.sample, inflight, s.Rate, f)
		stored += written
		if err := ctx.Err(); err != nil {
			return out, err
		}
		for _, m := range []*scaleRun{put, get} {
			r := m.result()
			r.Target, r.Clients, r.StoredCells = target, inflight, at
			if !f.JSON {
				fmt.Fprintf(env.Stderr, "%s %s stored=%d: %.0f ops/s, p50 %dus, p99 %dus, %d errors; sent up to %s behind schedule\n",
					target, r.Workload, at, r.OpsPerSec, r.P50, r.P99, r.Errors, m.behindMax.Round(time.Millisecond))
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// scaleLoadStats are the figures of one load.
type scaleLoadStats struct {
	// cells acknowledged (created, exists or buffered), conflicts the others (none expected:
	// the row keys are new), requests the put_cells calls that succeeded.
	cells, conflicts, requests int64
	elapsed                    time.Duration
}

// scaleLoader loads flights from a file as BASE cells with new row keys and keeps a uniform
// sample of the loaded row keys. It is not safe for concurrent use.
type scaleLoader struct {
	cl       *client.Client
	path     string
	airports workload.Airports
	r        *workload.Reader
	closeR   func()
	// sample is a uniform sample of at most scaleSampleRows loaded row keys (reservoir
	// sampling, Vitter's algorithm R), seen the row keys offered to it so far.
	sample []uuid.UUID
	seen   int64
	rng    *rand.Rand
}

// newScaleLoader opens path (and the airports file) for loading through cl.
func newScaleLoader(cl *client.Client, path, airportsPath string) (*scaleLoader, error) {
	r, airports, closeR, err := examples.OpenFlights(path, airportsPath)
	if err != nil {
		return nil, fmt.Errorf("--scale-file %s: %w", path, err)
	}
	return &scaleLoader{cl: cl, path: path, airports: airports, r: r, closeR: closeR, rng: rand.New(rand.NewPCG(3, 4))}, nil
}

// close closes the flights file.
func (l *scaleLoader) close() { l.closeR() }

// load writes n more flights, put_cells of scaleLoadBatch with scaleLoadInflight in flight,
// reading the file again from the top whenever it ends. Every flight gets a new random row key,
// which is offered to the sample before its batch is sent (a failed load ends the workload, so
// the sample then no longer matters). It returns at the first failed request, with the figures
// of the requests that succeeded, or when ctx is done.
func (l *scaleLoader) load(ctx context.Context, n int64) (scaleLoadStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cells, conflicts, requests atomic.Int64
	var firstErr error
	var errOnce sync.Once
	batches := make(chan []workload.Trip)
	var wg sync.WaitGroup
	for i := 0; i < scaleLoadInflight; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				ws := make([]client.CellWrite, len(b))
				for i, t := range b {
					ws[i] = client.CellWrite{Key: t.Key(), Body: t.Body}
				}
				res, err := l.cl.PutCells(ctx, ws)
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				requests.Add(1)
				for _, r := range res {
					switch r.Status {
					case wire.StatusCreated, wire.StatusExists, wire.StatusBuffered:
						cells.Add(1)
					default:
						conflicts.Add(1)
					}
				}
			}
		}()
	}
	send := func(ctx context.Context, b []workload.Trip) error {
		for i := range b {
			b[i].RowKey = uuid.New()
			l.offer(b[i].RowKey)
		}
		select {
		case batches <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	start := time.Now()
	var readErr error
	for left := n; left > 0; {
		got, err := workload.Import(ctx, l.r, l.airports, scaleLoadBatch, int(left), send, nil)
		left -= int64(got)
		if err != nil {
			readErr = err
			break
		}
		if left == 0 {
			break
		}
		// The file ended: read it again, unless it has no flights at all.
		if got == 0 && l.r.Line() <= 1 {
			readErr = fmt.Errorf("%s: no flights", l.path)
			break
		}
		if readErr = l.reopen(); readErr != nil {
			break
		}
	}
	close(batches)
	wg.Wait()
	st := scaleLoadStats{cells: cells.Load(), conflicts: conflicts.Load(), requests: requests.Load(), elapsed: time.Since(start)}
	if firstErr != nil {
		return st, firstErr
	}
	return st, readErr
}

// reopen starts reading the flights file again from its first flight.
func (l *scaleLoader) reopen() error {
	l.closeR()
	l.closeR = func() {}
	fh, err := os.Open(l.path)
	if err != nil {
		return err
	}
	r, err := workload.NewReader(fh)
	if err != nil {
		fh.Close()
		return err
	}
	l.r, l.closeR = r, func() { fh.Close() }
	return nil
}

// offer adds row to the sample with the probability that keeps it uniform.
func (l *scaleLoader) offer(row uuid.UUID) {
	l.seen++
	if len(l.sample) < scaleSampleRows {
		l.sample = append(l.sample, row)
		return
	}
	if j := l.rng.Int64N(l.seen); j < scaleSampleRows {
		l.sample[j] = row
	}
}

// scaleRun is the measurement of one request kind of a scale-cells step. Its fields are set by
// runOpenLoop; the histogram holds the latencies of the measured requests that succeeded, in
// microseconds from their scheduled start.
type scaleRun struct {
	workload, consistency string
	hist                  *hdrhistogram.Histogram
	ops, errs             int64
	firstErr              string
	// elapsed is from the start of the measured period to the answer of its last request, at
	// least --duration; behindMax how late the latest measured request was sent.
	elapsed   time.Duration
	behindMax time.Duration
}

// result returns the run's figures as a Result (Target, Clients and StoredCells unset).
func (m *scaleRun) result() Result {
	secs := m.elapsed.Seconds()
	r := Result{
		Workload: m.workload, Consistency: m.consistency, Seconds: secs, Ops: m.ops, Cells: m.ops, Errors: m.errs,
		OpsPerSec: float64(m.ops) / secs, CellsPerSec: float64(m.ops) / secs, FirstError: m.firstErr,
		P50: m.hist.ValueAtQuantile(50), P90: m.hist.ValueAtQuantile(90), P99: m.hist.ValueAtQuantile(99), Max: m.hist.Max(),
	}
	return r
}

// scaleMeasure runs the put and get schedules of one step side by side for f.Warmup then
// f.Duration, at rate requests/s each with at most inflight of each pending, and returns their
// measurements and the cells the puts stored (warmup included). rows must not be empty and is
// only read.
func scaleMeasure(ctx context.Context, cl *client.Client, rows []uuid.UUID, inflight int, rate float64, f Config) (put, get *scaleRun, written int64) {
	var stored atomic.Int64
	put = &scaleRun{workload: scaleWorkloadPut}
	get = &scaleRun{workload: scaleWorkloadGet, consistency: client.ConsistencyStale}
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		runOpenLoop(ctx, put, start, rate, inflight, f.Warmup, f.Duration, func(ctx context.Context, i uint64) error {
			rng := rand.New(rand.NewPCG(i, 0x5ca1e))
			k := cellKey(uuid.New())
			_, err := cl.PutCell(ctx, k.RowKey, k.ColumnKey, k.RefKey, benchBody(rng, f.ValueSize))
			if err == nil {
				stored.Add(1)
			}
			return err
		})
	}()
	go func() {
		defer wg.Done()
		runOpenLoop(ctx, get, start, rate, inflight, f.Warmup, f.Duration, func(ctx context.Context, _ uint64) error {
			_, err := cl.GetCellLatest(ctx, rows[rand.IntN(len(rows))], "BASE", client.WithConsistency(client.ConsistencyStale))
			return err
		})
	}()
	wg.Wait()
	return put, get, stored.Load()
}

// runOpenLoop calls op for requests 0, 1, 2, ... scheduled at start + i/rate seconds, for those
// due before start + warmup + duration, each in its own goroutine, with at most inflight calls
// pending: a request due while inflight are pending is sent when one returns. It returns once
// every call has returned, having filled m with the requests due in the measured period (from
// start + warmup): latency from the scheduled start to the return, successes and errors. If
// ctx ends, no more requests are sent.
func runOpenLoop(ctx context.Context, m *scaleRun, start time.Time, rate float64, inflight int, warmup, duration time.Duration,
	op func(ctx context.Context, i uint64) error) {
	m.hist = hdrhistogram.New(1, 60_000_000, 3)
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)
	var mu sync.Mutex // guards m and lastDone
	lastDone := end
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
schedule:
	for i := uint64(0); ; i++ {
		due := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		if !due.Before(end) {
			break
		}
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break schedule
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break schedule
		}
		measured := !due.Before(measureFrom)
		if measured {
			behind := time.Since(due)
			mu.Lock()
			m.behindMax = max(m.behindMax, behind)
			mu.Unlock()
		}
		wg.Add(1)
		go func(i uint64, due time.Time, measured bool) {
			defer wg.Done()
			defer func() { <-sem }()
			err := op(ctx, i)
			done := time.Now()
			if !measured || ctx.Err() != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if done.After(lastDone) {
				lastDone = done
			}
			if err != nil {
				m.errs++
				if m.firstErr == "" {
					m.firstErr = err.Error()
				}
				return
			}
			m.ops++
			_ = m.hist.RecordValue(done.Sub(due).Microseconds())
		}(i, due, measured)
	}
	wg.Wait()
	m.elapsed = lastDone.Sub(measureFrom)
}
