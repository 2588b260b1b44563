package bench

// The load runner of the put, put-batch and get-latest workloads and of the mysql baseline:
// closed loop (each client sends its next request when the previous one answered) or open loop
// at a fixed rate, with HDR latency histograms.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// benchOpFunc does one request of a run and returns the cells it wrote or read. The run's
// clients call it concurrently, each with its own rng.
type benchOpFunc func(ctx context.Context, rng *rand.Rand) (cells int, err error)

// runLoad drives op with n clients and returns the run's figures (not Target, Workload and
// Consistency). Requests ending during f.Warmup are not measured. Closed loop (rate 0): each
// client sends its next request when the previous one is answered; a request is measured
// when it ends within f.Duration, or, when f.Ops > 0, when it is one of the first f.Ops
// requests started after the warm-up (then the run ends when those are answered, and
// Ops + Errors == f.Ops). Open loop (rate > 0): request i is due at i/rate seconds from the
// start and is sent then to a free client; its latency runs from its due time, so a stalled
// server shows in the percentiles instead of slowing the load down (no coordinated omission).
// The measured requests are those due from f.Warmup on: until f.Warmup + f.Duration, or the
// next f.Ops; the run waits for their answers. A measured request is late (Late) when every
// client is busy at its due time (none takes it within handOverGrace): it is sent as soon as
// one is free, or, when f.Duration ends first, never. Blocks until the run ends or ctx is done.
func runLoad(ctx context.Context, n, rate int, f Config, op benchOpFunc) Result {
	var l loadFigures
	l.init(n)
	l.cpu.m = cpuMeter{pids: f.CPUPIDs}
	var elapsed time.Duration
	if rate > 0 {
		elapsed = l.openLoop(ctx, n, rate, f, op)
	} else {
		elapsed = l.closedLoop(ctx, n, f, op)
	}
	return l.result(n, rate, elapsed)
}

// loadFigures accumulates the figures of one runLoad run; its methods are safe for concurrent
// use by the run's clients, each with its own histogram.
type loadFigures struct {
	ops, cells, errs, late atomic.Int64
	firstErr               atomic.Value // string
	hists                  []*hdrhistogram.Histogram
	// cpu measures the measured phase's CPU; cpuSeconds is its result, nodeCPUSeconds the
	// part of the --cpu-pid processes.
	cpu                        cpuSpan
	cpuSeconds, nodeCPUSeconds float64
}

// init makes one latency histogram per client of n.
func (l *loadFigures) init(n int) {
	l.hists = make([]*hdrhistogram.Histogram, n)
	for i := range l.hists {
		l.hists[i] = hdrhistogram.New(1, 60_000_000, 3)
	}
}

// record adds one measured request of client i, answered after d.
func (l *loadFigures) record(i int, d time.Duration, cells int, err error) {
	if err != nil {
		l.errs.Add(1)
		l.firstErr.CompareAndSwap(nil, err.Error())
		return
	}
	_ = l.hists[i].RecordValue(d.Microseconds())
	l.ops.Add(1)
	l.cells.Add(int64(cells))
}

// result is the run's Result over elapsed.
func (l *loadFigures) result(n, rate int, elapsed time.Duration) Result {
	all := hdrhistogram.New(1, 60_000_000, 3)
	for _, h := range l.hists {
		all.Merge(h)
	}
	r := Result{
		Clients: n, Rate: rate, Seconds: elapsed.Seconds(),
		Ops: l.ops.Load(), Cells: l.cells.Load(), Errors: l.errs.Load(), Late: l.late.Load(),
		P50: all.ValueAtQuantile(50), P90: all.ValueAtQuantile(90), P99: all.ValueAtQuantile(99), Max: all.Max(),
	}
	if r.Seconds > 0 {
		r.OpsPerSec = float64(r.Ops) / r.Seconds
		r.CellsPerSec = float64(r.Cells) / r.Seconds
	}
	r.CPUSeconds = l.cpuSeconds
	r.NodeCPUSeconds = l.nodeCPUSeconds
	if e, ok := l.firstErr.Load().(string); ok {
		r.FirstError = e
	}
	return r
}

// closedLoop is runLoad's closed loop; it returns the measured time.
func (l *loadFigures) closedLoop(ctx context.Context, n int, f Config, op benchOpFunc) time.Duration {
	limit := int64(f.Ops)
	var measuring atomic.Bool
	var claimed, ended atomic.Int64 // with limit: measured requests started, and answered
	allEnded := make(chan struct{})
	measuring.Store(f.Warmup <= 0)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i)+1, uint64(i)+2))
			for ctx.Err() == nil {
				measured := measuring.Load()
				if limit > 0 && measured && claimed.Add(1) > limit {
					return
				}
				start := time.Now()
				cells, err := op(ctx, rng)
				if ctx.Err() != nil {
					return
				}
				if limit == 0 {
					measured = measuring.Load()
				}
				if !measured {
					continue
				}
				l.record(i, time.Since(start), cells, err)
				if limit > 0 && ended.Add(1) == limit {
					close(allEnded)
				}
			}
		}()
	}
	if f.Warmup > 0 {
		_ = sleepCtx(ctx, f.Warmup)
		measuring.Store(true)
	}
	start := time.Now()
	l.cpu.begin()
	if limit > 0 {
		select {
		case <-allEnded:
		case <-ctx.Done():
		}
	} else {
		_ = sleepCtx(ctx, f.Duration)
		measuring.Store(false)
	}
	elapsed := time.Since(start)
	l.cpuSeconds, l.nodeCPUSeconds = l.cpu.end()
	cancel()
	wg.Wait()
	return elapsed
}

// openLoop is runLoad's open loop; it returns the measured time: f.Duration, or with f.Ops
// from the first measured request's due time to the last answer.
func (l *loadFigures) openLoop(ctx context.Context, n, rate int, f Config, op benchOpFunc) time.Duration {
	due := func(i int64) time.Duration { return time.Duration(i * int64(time.Second) / int64(rate)) }
	// warm is the first measured request: the first due at or after f.Warmup.
	warm := (int64(f.Warmup)*int64(rate) + int64(time.Second) - 1) / int64(time.Second)
	limit := int64(f.Ops)
	base := time.Now()
	var lastEnd atomic.Int64 // of a measured request, in ns since base
	jobs := make(chan int64)
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c)+1, uint64(c)+2))
			for i := range jobs {
				cells, err := op(ctx, rng)
				end := time.Now()
				if i < warm || ctx.Err() != nil {
					continue
				}
				l.record(c, end.Sub(base.Add(due(i))), cells, err)
				for e := int64(end.Sub(base)); ; {
					last := lastEnd.Load()
					if e <= last || lastEnd.CompareAndSwap(last, e) {
						break
					}
				}
			}
		}()
	}
	end := f.Warmup + f.Duration
	// last is the number of requests of the run: those due before end, or warm + limit.
	last := (int64(end)*int64(rate) + int64(time.Second) - 1) / int64(time.Second)
	if limit > 0 {
		last = warm + limit
	}
	i := int64(0)
loop:
	for ; i < last && ctx.Err() == nil; i++ {
		if limit == 0 && time.Since(base) >= end {
			// Requests i..last-1 were due before the end and found every client busy.
			l.late.Add(last - max(i, warm))
			break
		}
		if d := time.Until(base.Add(due(i))); d > 0 && sleepCtx(ctx, d) != nil {
			break
		}
		if i == warm {
			l.cpu.begin()
		}
		if handOver(jobs, i) {
			continue
		}
		if i >= warm { // every client is busy
			l.late.Add(1)
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break loop
		}
	}
	close(jobs)
	wg.Wait()
	if i > warm {
		l.cpuSeconds, l.nodeCPUSeconds = l.cpu.end() // the phase's requests all answered; the tail is idle
	}
	if limit > 0 {
		return max(time.Duration(lastEnd.Load())-due(warm), 0)
	}
	if ctx.Err() != nil {
		return max(min(time.Since(base), end)-f.Warmup, 0)
	}
	return f.Duration
}

// handOverGrace is how long an open-loop request waits for a client to take it before it is
// late: a client that just got its answer needs a moment to come back for the next request.
const handOverGrace = time.Millisecond

// handOver sends i on jobs if a client takes it within handOverGrace, and reports whether one
// did.
func handOver(jobs chan<- int64, i int64) bool {
	select {
	case jobs <- i:
		return true
	default:
	}
	t := time.NewTimer(handOverGrace)
	defer t.Stop()
	select {
	case jobs <- i:
		return true
	case <-t.C:
		return false
	}
}
