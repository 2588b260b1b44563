package bench

// The trips workload's helpers: the flights source, the billing group's workers, the trigger
// lag prober and the memory sampler (see trips.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/workload"
)

// tripsSource hands out the flights of the measured writes: those of the file after the loaded
// ones, then, at the file's end, the file again from its first flight (with new row keys these
// are new trips too). Safe for concurrent use.
type tripsSource struct {
	path, airportsPath string

	mu        sync.Mutex
	r         *workload.Reader
	airports  workload.Airports
	closeFile func()
	wraps     int
}

// openTripsSource reads the first limit flights of path (fewer when the file has fewer) and
// returns their row keys and origin counts, and the source of the flights after them.
func openTripsSource(path, airportsPath string, limit int) (*tripsSource, []uuid.UUID, map[string]int, error) {
	r, airports, closeFile, err := examples.OpenFlights(path, airportsPath)
	if err != nil {
		return nil, nil, nil, err
	}
	keys := make([]uuid.UUID, 0, min(limit, 1<<20))
	counts := map[string]int{}
	for len(keys) < limit {
		fl, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			closeFile()
			return nil, nil, nil, err
		}
		keys = append(keys, fl.RowKey())
		counts[fl.Origin]++
	}
	return &tripsSource{path: path, airportsPath: airportsPath, r: r, airports: airports, closeFile: closeFile}, keys, counts, nil
}

// next returns the BASE body (JSON) of the next flight.
func (s *tripsSource) next() (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 2 {
		fl, err := s.r.Next()
		if err == io.EOF {
			s.closeFile()
			r, airports, closeFile, err := examples.OpenFlights(s.path, s.airportsPath)
			if err != nil {
				s.r, s.closeFile = nil, func() {}
				return nil, err
			}
			s.r, s.airports, s.closeFile = r, airports, closeFile
			s.wraps++
			continue
		}
		if err != nil {
			return nil, err
		}
		return fl.BaseJSON(s.airports)
	}
	return nil, fmt.Errorf("%s: no flight", s.path)
}

// wrapCount returns the times next started the file over.
func (s *tripsSource) wrapCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wraps
}

// close closes the file.
func (s *tripsSource) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeFile()
}

// tripsBilling runs the billing group's workers in this process: the example billing trigger
// of package examples (examples.Workers workers, examples.Concurrency shards each, from the
// earliest position), whose handler (examples.Trigger.Write) writes for each BASE cell a STATUS
// cell under the same row and ref key, coalesced into put_cells by an examples.CellBatcher.
type tripsBilling struct {
	trig      *examples.Trigger
	delivered atomic.Int64
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu   sync.Mutex
	errs []error // of workers that stopped before stop
}

// startTripsBilling starts the workers, each with its own client to endpoints; their warnings
// go to stderr when logWarnings. They run until stop.
func startTripsBilling(ctx context.Context, endpoints []string, logWarnings bool, stderr io.Writer) (*tripsBilling, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &tripsBilling{cancel: cancel}
	wcl, err := newClient(endpoints, examples.BatchSenders+2)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, t := range examples.NewTriggers(examples.NewCellBatcher(ctx, wcl)) {
		if t.Group == tripsGroup {
			b.trig = t
		}
	}
	if b.trig == nil {
		cancel()
		return nil, fmt.Errorf("no %s trigger among the examples'", tripsGroup)
	}
	level := slog.LevelError + 4 // silent
	if logWarnings {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	for i := 1; i <= examples.Workers; i++ {
		cl, err := newClient(endpoints, 4)
		if err != nil {
			b.stop()
			return nil, err
		}
		cfg := triggers.DefaultConfig()
		cfg.Source, cfg.Group, cfg.Worker = cl.TriggerSource(), tripsGroup, fmt.Sprintf("bench-trips-%d", i)
		cfg.ColumnKey, cfg.Start, cfg.Concurrency = workload.ColumnBase, triggers.StartEarliest, examples.Concurrency
		cfg.Logger = logger
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := triggers.Run(ctx, cfg, b.handle); err != nil && ctx.Err() == nil {
				b.mu.Lock()
				b.errs = append(b.errs, fmt.Errorf("worker %s: %w", cfg.Worker, err))
				b.mu.Unlock()
			}
		}()
	}
	return b, nil
}

// handle is the workers' handler: the example billing trigger's write, counted.
func (b *tripsBilling) handle(ctx context.Context, c cells.Cell) error {
	b.delivered.Add(1)
	return b.trig.Write(ctx, c)
}

// failure returns the errors of the workers that stopped by themselves (a halted group), or nil.
func (b *tripsBilling) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return errors.Join(b.errs...)
}

// stop stops the workers (each commits and leaves the group), waits for them and returns
// failure(). It may be called more than once.
func (b *tripsBilling) stop() error {
	b.cancel()
	b.wg.Wait()
	return b.failure()
}

// tripsLagProbe is a sampled write: its row and the time its put_cell answer arrived.
type tripsLagProbe struct {
	row uuid.UUID
	ack time.Time
}

// tripsLagProber measures the trigger lag of sampled writes: while probes are pending, every
// tripsLagPoll one strong batch get of the latest STATUS cell of the (oldest tripsLagMaxKeys)
// pending probes, the batched form of a get_cell_latest per probe; a probe's lag is from its ack
// to the answer of the first poll that found its STATUS cell. add is safe for concurrent use;
// run is one goroutine; fill reads the figures after finish.
type tripsLagProber struct {
	cl   *client.Client
	wake chan struct{} // buffered, 1
	done chan struct{} // closed when run returns

	mu      sync.Mutex
	pending []tripsLagProbe // in ack order
	probes  int64
	closing bool

	// Written by run only: the lags and the polls' latencies.
	hist, pollHist                  *hdrhistogram.Histogram
	seen, unseen, polls, pollErrors int64
}

// newTripsLagProber returns a prober reading through cl; start its run.
func newTripsLagProber(cl *client.Client) *tripsLagProber {
	return &tripsLagProber{cl: cl, wake: make(chan struct{}, 1), done: make(chan struct{}),
		hist: hdrhistogram.New(1, 600_000_000, 3), pollHist: hdrhistogram.New(1, 600_000_000, 3)}
}

// add registers a probe whose put_cell answer arrived at ack.
func (p *tripsLagProber) add(row uuid.UUID, ack time.Time) {
	p.mu.Lock()
	p.pending = append(p.pending, tripsLagProbe{row: row, ack: ack})
	p.probes++
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run polls until ctx ends or, after finish, no probe is pending.
func (p *tripsLagProber) run(ctx context.Context) {
	defer close(p.done)
	strong := client.WithConsistency(client.ConsistencyStrong)
	for {
		p.mu.Lock()
		batch := append([]tripsLagProbe(nil), p.pending[:min(len(p.pending), tripsLagMaxKeys)]...)
		closing := p.closing
		p.mu.Unlock()
		if len(batch) == 0 {
			if closing {
				return
			}
			select {
			case <-p.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		start := time.Now()
		keys := make([]client.GetKey, len(batch))
		for i, pr := range batch {
			keys[i] = client.GetKey{RowKey: pr.row, ColumnKey: examples.ColumnStatus, Latest: true}
		}
		resp, err := p.cl.GetCells(ctx, keys, strong)
		at := time.Now()
		if ctx.Err() != nil {
			return
		}
		p.polls++
		_ = p.pollHist.RecordValue(at.Sub(start).Microseconds())
		found := map[uuid.UUID]bool{}
		if err != nil {
			p.pollErrors++
		} else {
			for _, c := range resp.Cells {
				if u, err := uuid.Parse(c.RowKey); err == nil {
					found[u] = true
				}
			}
		}
		p.mu.Lock()
		kept := p.pending[:0]
		for _, pr := range p.pending {
			switch {
			case found[pr.row]:
				p.seen++
				_ = p.hist.RecordValue(at.Sub(pr.ack).Microseconds())
			case at.Sub(pr.ack) > tripsLagTimeout:
				p.unseen++
			default:
				kept = append(kept, pr)
			}
		}
		p.pending = kept
		p.mu.Unlock()
		select {
		case <-time.After(tripsLagPoll - time.Since(start)):
		case <-ctx.Done():
			return
		}
	}
}

// finish lets run return once every probe is seen or given up (at most tripsLagTimeout after
// the last add) and waits for it.
func (p *tripsLagProber) finish() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
}

// fill copies the figures into s; call it after finish.
func (p *tripsLagProber) fill(s *tripsSummary) {
	s.LagProbes, s.LagSeen, s.LagUnseen, s.LagPolls, s.LagPollErrors = p.probes, p.seen, p.unseen, p.polls, p.pollErrors
	s.LagP50, s.LagP90, s.LagP99, s.LagMax = p.hist.ValueAtQuantile(50), p.hist.ValueAtQuantile(90), p.hist.ValueAtQuantile(99), p.hist.Max()
	s.LagPollP50, s.LagPollP99 = p.pollHist.ValueAtQuantile(50), p.pollHist.ValueAtQuantile(99)
}

// tripsMemSampler reads the resident memory of a target: for the external target each
// endpoint's process_resident_memory_bytes (serve exposes /metrics on its API address), for the
// in-process targets this process's VmRSS and Go heap in use. Not safe for concurrent use: one
// reading at a time (sample, or the goroutine of every).
type tripsMemSampler struct {
	inProcess bool
	endpoints []string
	cl        *client.Client // of the endpoints, 2 s a request
	figs      []tripsMemory
}

// newTripsMemSampler returns a sampler of target's nodes.
func newTripsMemSampler(target string, endpoints []string) (*tripsMemSampler, error) {
	m := &tripsMemSampler{inProcess: target != targetExternal, endpoints: endpoints}
	if m.inProcess {
		label := tripsInProcessLabel
		if target != targetSQLite && target != targetPebble {
			label += " (not the MySQL/MariaDB servers)"
		}
		m.figs = []tripsMemory{{Node: label}}
		return m, nil
	}
	for _, ep := range endpoints {
		m.figs = append(m.figs, tripsMemory{Node: ep})
	}
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.Datastore, cfg.RequestTimeout = endpoints, "trips", 2*time.Second
	cl, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	return m, nil
}

// sample reads every node once: start and end mark the phase's first and last readings.
func (m *tripsMemSampler) sample(ctx context.Context, start, end bool) {
	for i := range m.figs {
		var rss, heap int64
		var err error
		if m.inProcess {
			rss, err = tripsProcessRSS()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap = int64(ms.HeapInuse)
		} else {
			rss, err = nodeRSS(ctx, m.cl, m.endpoints[i])
		}
		fig := &m.figs[i]
		if err != nil {
			fig.Error = err.Error()
			continue
		}
		fig.Samples++
		fig.RSSMax, fig.HeapMax = max(fig.RSSMax, rss), max(fig.HeapMax, heap)
		if start {
			fig.RSSStart, fig.HeapStart = rss, heap
		}
		if end {
			fig.RSSEnd, fig.HeapEnd = rss, heap
		}
	}
}

// every samples every interval in a goroutine until ctx ends or the returned function is
// called; that function waits for the goroutine to end (for a reading in flight to finish).
func (m *tripsMemSampler) every(ctx context.Context, interval time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.sample(ctx, false, false)
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// tripsProcessRSS returns this process's resident set size (VmRSS of /proc/self/status), in
// bytes.
func tripsProcessRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fs := strings.Fields(v)
			if len(fs) == 2 && fs[1] == "kB" {
				if n, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
					return n << 10, nil
				}
			}
			return 0, fmt.Errorf("/proc/self/status: bad line %q", line)
		}
	}
	return 0, errors.New("/proc/self/status has no VmRSS")
}
