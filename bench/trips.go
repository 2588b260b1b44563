package bench

// The trips workload of `schemaless bench`: the Mezzanine flow on the real flights. The flights
// of --flights are loaded as BASE cells of datastore trips, as `schemaless import` does, while
// the billing consumer group (package examples, as `schemaless dev` runs it; workers here) derives
// a STATUS cell from each BASE cell and the index maintainers keep flights_by_origin current.
// Then --clients clients run a closed-loop mix of new trips, reads and index queries, while the
// time from a new trip's write to its STATUS cell and the nodes' resident memory are sampled.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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
	"github.com/schemaless-db/schemaless/wire"
	"github.com/schemaless-db/schemaless/workload"
)

// Fixed settings of the trips workload.
const (
	// tripsIndex is the index the queries read, defined before the load (flightsIndexDefinition
	// over BASE, sharded by origin; the same index as `schemaless dev`'s).
	tripsIndex = examples.IndexName
	// tripsGroup is the consumer group that writes a STATUS cell per BASE cell.
	tripsGroup = examples.GroupBilling
	// The load: put_cells of tripsLoadBatch flights, tripsLoadInflight requests in flight.
	tripsLoadBatch    = 500
	tripsLoadInflight = 8
	// A lag probe's STATUS cell is polled every tripsLagPoll until tripsLagTimeout after the
	// write's answer; one poll reads at most tripsLagMaxKeys probes (a batch get's limit is 1000).
	tripsLagPoll    = 2 * time.Millisecond
	tripsLagTimeout = 10 * time.Second
	tripsLagMaxKeys = 500
	// tripsMemInterval is the time between two memory samples of the measured phase.
	tripsMemInterval = time.Second
	// tripsKeepWrites bounds the measured writes a run keeps (tripsOutcome.written).
	tripsKeepWrites = 1000
	// tripsInProcessLabel names the memory figure of the in-process targets.
	tripsInProcessLabel = "process (3 in-process nodes + clients)"
	// tripsSummaryWorkload is the workload of the JSON summary line (--json).
	tripsSummaryWorkload = "trips-summary"
)

// tripsKind is a kind of operation of the measured phase.
type tripsKind int

// The kinds, in the order of --trips-mix and of the result rows.
const (
	tripsWrite tripsKind = iota
	tripsRead
	tripsQuery
	tripsKinds // the number of kinds
)

// tripsKindNames are the kinds' names in --trips-mix and in the rows ("trips write", ...).
var tripsKindNames = [tripsKinds]string{"write", "read", "query"}

// tripsMix is the percentage of each kind among the measured operations; they sum to 100.
type tripsMix [tripsKinds]int

// parseTripsMix parses "write=40,read=30,query=30": comma-separated kind=percent, each kind at
// most once, percents integers 0..100 summing to 100; a kind left out is 0. Spaces around the
// parts are ignored.
func parseTripsMix(s string) (tripsMix, error) {
	var m tripsMix
	var given [tripsKinds]bool
	sum := 0
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return m, fmt.Errorf("%q: want kind=percent (kinds write, read, query)", part)
		}
		k := tripsKind(-1)
		for i, n := range tripsKindNames {
			if n == name {
				k = tripsKind(i)
			}
		}
		if k < 0 {
			return m, fmt.Errorf("%q: unknown kind %q, want write, read or query", part, name)
		}
		if given[k] {
			return m, fmt.Errorf("%q: kind %s given twice", part, name)
		}
		p, err := strconv.Atoi(val)
		if err != nil || p < 0 || p > 100 {
			return m, fmt.Errorf("%q: percent %q is not an integer 0..100", part, val)
		}
		given[k], m[k] = true, p
		sum += p
	}
	if sum != 100 {
		return m, fmt.Errorf("percents sum to %d, want 100", sum)
	}
	return m, nil
}

// String returns m in the form parseTripsMix reads, every kind given.
func (m tripsMix) String() string {
	parts := make([]string, tripsKinds)
	for k := range tripsKinds {
		parts[k] = fmt.Sprintf("%s=%d", tripsKindNames[k], m[k])
	}
	return strings.Join(parts, ",")
}

// pick draws a kind with m's percentages.
func (m tripsMix) pick(rng *rand.Rand) tripsKind {
	x := rng.IntN(100)
	for k := range tripsKinds {
		if x < m[k] {
			return k
		}
		x -= m[k]
	}
	return tripsWrite // unreachable when the percents sum to 100
}

// tripsMemory is the resident memory of one node (external target: one endpoint's
// process_resident_memory_bytes from its /metrics) or of this process (in-process targets:
// VmRSS of /proc/self/status, and the Go heap in use) over a measured phase, in bytes.
type tripsMemory struct {
	// Node is the endpoint, or tripsInProcessLabel for the in-process targets.
	Node string `json:"node"`
	// RSSStart and RSSEnd are read when the measured phase starts and ends, RSSMax is the
	// highest of those and of the readings every second between them.
	RSSStart int64 `json:"rss_start_bytes"`
	RSSMax   int64 `json:"rss_max_bytes"`
	RSSEnd   int64 `json:"rss_end_bytes"`
	// HeapStart, HeapMax and HeapEnd are runtime.MemStats.HeapInuse (in-process targets only).
	HeapStart int64 `json:"heap_inuse_start_bytes,omitempty"`
	HeapMax   int64 `json:"heap_inuse_max_bytes,omitempty"`
	HeapEnd   int64 `json:"heap_inuse_end_bytes,omitempty"`
	// Samples counts the successful readings; Error is the last failed one's error.
	Samples int    `json:"samples"`
	Error   string `json:"error,omitempty"`
}

// tripsSummary is the figures of one measured run that the result rows cannot hold: printed
// as a note block after the run, or with --json as one JSON line of workload "trips-summary".
// Times are in microseconds unless named otherwise.
type tripsSummary struct {
	Target   string `json:"target"`
	Workload string `json:"workload"`
	Clients  int    `json:"clients"`
	Mix      string `json:"mix"`

	// The load (once per target, before the first run). LoadFlights were written
	// (LoadCreated new, LoadExists already there) in LoadSeconds. IndexReadySeconds and
	// BillingCaughtUpSeconds are from the load's end to the index version's state ready and to
	// the billing group having handled every BASE cell (-1: not within the limit).
	LoadFlights            int64   `json:"load_flights"`
	LoadCreated            int64   `json:"load_created"`
	LoadExists             int64   `json:"load_exists"`
	LoadSeconds            float64 `json:"load_seconds"`
	LoadCellsPerSec        float64 `json:"load_cells_per_sec"`
	Index                  string  `json:"index"`
	IndexVersion           int     `json:"index_version"`
	IndexReadySeconds      float64 `json:"index_ready_after_load_seconds"`
	BillingCaughtUpSeconds float64 `json:"billing_caught_up_after_load_seconds"`

	// The run. StoredCells: BASE cells of trips this workload wrote (load and acknowledged
	// writes) and their STATUS cells, once billing caught up after the run (AfterRunCaughtUp
	// seconds after its end, -1: not within the limit). Wrapped counts the times the writes
	// started the flights file over. BaseMisses and StatusMisses count reads that found no cell.
	StoredCells      int64   `json:"stored_cells"`
	AfterRunCaughtUp float64 `json:"billing_caught_up_after_run_seconds"`
	Wrapped          int     `json:"flights_file_wrapped"`
	BaseMisses       int64   `json:"base_misses"`
	StatusMisses     int64   `json:"status_misses"`

	// Trigger lag: time from a probe write's put_cell answer to the answer of the first poll
	// that found its STATUS cell. LagProbes were sampled, LagSeen found, LagUnseen given up
	// after 10 s. LagPolls batch gets were sent, LagPollErrors failed; LagPollP50 and LagPollP99
	// are their latencies: the lag's resolution (a poll starts at most every 2 ms).
	LagProbes     int64 `json:"lag_probes"`
	LagSeen       int64 `json:"lag_seen"`
	LagUnseen     int64 `json:"lag_unseen"`
	LagP50        int64 `json:"lag_p50_us"`
	LagP90        int64 `json:"lag_p90_us"`
	LagP99        int64 `json:"lag_p99_us"`
	LagMax        int64 `json:"lag_max_us"`
	LagPolls      int64 `json:"lag_polls"`
	LagPollErrors int64 `json:"lag_poll_errors"`
	LagPollP50    int64 `json:"lag_poll_p50_us"`
	LagPollP99    int64 `json:"lag_poll_p99_us"`

	// Billing: cells its handler was called with by this process's workers (all runs so far)
	// and its STATUS writes (created, exists: a redelivery, conflicts).
	BillingDelivered int64 `json:"billing_delivered"`
	BillingCreated   int64 `json:"billing_created"`
	BillingExists    int64 `json:"billing_exists"`
	BillingConflicts int64 `json:"billing_conflicts"`

	// Memory of the nodes over the measured phase.
	Memory []tripsMemory `json:"memory"`
}

// tripsOutcome is what runTrips measured on a target.
type tripsOutcome struct {
	// results: per --clients value, the rows trips write, read, query and trips (the total).
	results   []Result
	summaries []tripsSummary
	// written holds the first measured writes of each run (at most tripsKeepWrites per run).
	written []client.CellWrite
	// loaded are the row keys of the loaded flights, in file order.
	loaded []uuid.UUID
}

// tripsWorkload is the Mezzanine flow on the real flights: the flights of --flights are loaded
// as BASE cells of datastore trips, as `schemaless import` does, while the billing consumer
// group (package examples, workers in this process) derives a STATUS cell from each BASE cell
// and the index maintainers keep flights_by_origin current. Then --clients clients run a
// closed-loop mix of new trips, reads and index queries, while the time from a new trip's write
// to its STATUS cell and the nodes' resident memory are sampled.
type tripsWorkload struct{}

func (tripsWorkload) Name() string { return workloadTrips }

// Run runs the trips workload on t: once per target, define the index and start the billing
// group's workers, load the flights, wait for both to catch up; then one measured run per
// --clients value. After each run it prints the run's note block (env.Stdout), or with --json
// one JSON line of workload "trips-summary". It needs the index maintainers: on the in-process
// targets startTarget starts them when a workload needs them (needsMaintainers). A target that
// stores nothing is skipped.
func (tripsWorkload) Run(ctx context.Context, env *Env, t Target) ([]Result, error) {
	target := t.Name()
	if !storesCells(t) {
		fmt.Fprintf(env.Stderr, "%s %s: skipped (raft-noop stores no cells)\n", target, workloadTrips)
		return nil, nil
	}
	out, err := runTrips(ctx, env, t)
	if err != nil {
		return out.results, fmt.Errorf("%s %s: %w", target, workloadTrips, err)
	}
	return out.results, nil
}

// tripsState is what the runs on one target share.
type tripsState struct {
	target    string
	endpoints []string
	f         Config
	env       *Env
	mix       tripsMix
	where     []wire.IndexCond
	loaded    []uuid.UUID // row keys of the loaded flights
	busy      []string    // the --query-origins busiest origins of the loaded flights
	src       *tripsSource
	version   int // of tripsIndex
	billing   *tripsBilling
	base      atomic.Int64 // BASE cells of trips written by this workload (load + acked writes)
	load      tripsSummary // the load's figures, copied into each run's summary
}

// runTrips is tripsWorkload.Run's work, returning what tests check too.
func runTrips(ctx context.Context, env *Env, t Target) (tripsOutcome, error) {
	f, target := env.Config, t.Name()
	var out tripsOutcome
	mix, err := parseTripsMix(f.Trips.Mix)
	if err != nil {
		return out, fmt.Errorf("--trips-mix: %w", err)
	}
	where, err := parseWhere(f.Index.QueryWhere)
	if err != nil {
		return out, fmt.Errorf("--query-where: %w", err)
	}
	if len(f.Consistency) == 0 || len(f.Index.QueryOrder) == 0 || len(f.Clients) == 0 {
		return out, errors.New("--consistency, --query-order and --clients need a value")
	}
	st := &tripsState{target: target, endpoints: t.Endpoints(), f: f, env: env, mix: mix, where: where}
	src, keys, counts, err := openTripsSource(f.Index.FlightsPath, f.Index.AirportsPath, f.Trips.Flights)
	if err != nil {
		return out, fmt.Errorf("read %s: %w", f.Index.FlightsPath, err)
	}
	defer src.close()
	if len(keys) == 0 {
		return out, fmt.Errorf("%s has no flight", f.Index.FlightsPath)
	}
	st.src, st.loaded, st.busy = src, keys, topOrigins(counts, f.Index.QueryOrigins)
	out.loaded = keys

	admin, err := newClient(st.endpoints, 4)
	if err != nil {
		return out, err
	}
	def, err := defineIndex(ctx, admin, examples.FlightsIndexDefinition(tripsIndex, workload.ColumnBase))
	if err != nil {
		return out, err
	}
	st.version = def.Version
	if err := waitIndexMaintained(ctx, admin, tripsIndex, def.Version, 10*f.Index.PollInterval+10*time.Second); err != nil {
		return out, err
	}
	if st.billing, err = startTripsBilling(ctx, st.endpoints, f.Triggers.LogWarnings, env.Stderr); err != nil {
		return out, err
	}
	defer st.billing.stop()
	if err := st.loadFlights(ctx, admin); err != nil {
		return out, err
	}
	for _, n := range f.Clients {
		rows, sum, written, err := st.measure(ctx, admin, n)
		out.results = append(out.results, rows...)
		if err != nil {
			return out, fmt.Errorf("clients=%d: %w", n, err)
		}
		out.summaries = append(out.summaries, sum)
		out.written = append(out.written, written...)
		if f.JSON {
			if err := json.NewEncoder(env.Stdout).Encode(sum); err != nil {
				return out, err
			}
		} else {
			fmt.Fprint(env.Stdout, sum.note())
		}
	}
	if err := st.billing.stop(); err != nil {
		return out, fmt.Errorf("billing workers: %w", err)
	}
	return out, nil
}

// waitIndexMaintained polls the status of version v of index name every 250 ms until a
// maintainer's worker has joined its group, and fails after limit.
func waitIndexMaintained(ctx context.Context, cl *client.Client, name string, v int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	last := "no status read"
	for {
		st, err := cl.Index(ctx, name)
		if err == nil {
			if vs, ok := versionOf(st, v); ok && vs.Workers > 0 {
				return nil
			} else if ok {
				last = fmt.Sprintf("state %s, no worker", vs.State)
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("index %s version %d has no maintainer after %s (%s): the nodes must run the index maintainers "+
				"(serve does; the in-process targets run them only when startTarget sees a workload that needs them, needsMaintainers)", name, v, limit, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// loadFlights imports the first --trips-flights flights as `schemaless import` does, then waits
// for the index version to be ready and the billing group to catch up, recording the times.
func (st *tripsState) loadFlights(ctx context.Context, admin *client.Client) error {
	f := st.f
	cl, err := newClient(st.endpoints, tripsLoadInflight)
	if err != nil {
		return err
	}
	is, err := examples.ImportFlights(ctx, cl, f.Index.FlightsPath, f.Index.AirportsPath,
		examples.ImportOptions{Batch: tripsLoadBatch, Concurrency: tripsLoadInflight, Limit: len(st.loaded)})
	if err != nil {
		return fmt.Errorf("load flights: %w", err)
	}
	if is.Conflicts > 0 {
		return fmt.Errorf("load flights: %d conflicts (the datastore holds other bodies under the flights' keys)", is.Conflicts)
	}
	loadEnd := time.Now()
	st.base.Store(is.Flights)
	st.load = tripsSummary{LoadFlights: is.Flights, LoadCreated: is.Created, LoadExists: is.Exists,
		LoadSeconds: is.Elapsed.Seconds(), LoadCellsPerSec: float64(is.Flights) / is.Elapsed.Seconds(),
		Index: tripsIndex, IndexVersion: st.version}
	if !f.JSON {
		fmt.Fprintf(st.env.Stderr, "%s trips: loaded %d flights in %.1fs (%.0f cells/s; %d created, %d already there)\n",
			st.target, is.Flights, is.Elapsed.Seconds(), st.load.LoadCellsPerSec, is.Created, is.Exists)
	}
	if err := waitIndexReady(ctx, admin, tripsIndex, st.version, 250*time.Millisecond, f.Index.Timeout, nil); err != nil {
		return err
	}
	st.load.IndexReadySeconds = time.Since(loadEnd).Seconds()
	st.load.BillingCaughtUpSeconds = st.waitBilling(ctx, admin, loadEnd)
	if !f.JSON {
		fmt.Fprintf(st.env.Stderr, "%s trips: index %s v%d ready %.1fs and billing caught up %.1fs after the load\n",
			st.target, tripsIndex, st.version, st.load.IndexReadySeconds, st.load.BillingCaughtUpSeconds)
	}
	return nil
}

// waitBilling waits (up to examples.CatchUpLimit) until the billing group has handled every BASE cell
// written so far and returns the seconds since from, or -1 when it did not catch up (said on
// stderr).
func (st *tripsState) waitBilling(ctx context.Context, cl *client.Client, from time.Time) float64 {
	wctx, cancel := context.WithTimeout(ctx, examples.CatchUpLimit)
	defer cancel()
	cu := examples.WaitCaughtUp(wctx, cl, tripsGroup)
	if err := errors.Join(cu.Err, st.billing.failure()); err != nil {
		fmt.Fprintf(st.env.Stderr, "%s trips: billing did not catch up: %v\n", st.target, err)
		return -1
	}
	return max(cu.At.Sub(from), 0).Seconds()
}

// tripsClient is one client's counts in a measured run; only its goroutine touches it until
// the run's clients have stopped.
type tripsClient struct {
	hists                    [tripsKinds]*hdrhistogram.Histogram
	ops, cells, errs         [tripsKinds]int64
	firstErr                 [tripsKinds]string
	baseMisses, statusMisses int64
	written                  []client.CellWrite
}

// tripsRun is one measured run: what its clients share.
type tripsRun struct {
	st        *tripsState
	cl        *client.Client
	measuring atomic.Bool  // set during the measured phase (not the warmup)
	writeSeq  atomic.Int64 // measured writes acknowledged
	prober    *tripsLagProber
}

// measure runs n clients for --warmup and then --duration, each doing operations drawn from
// the mix back to back, and returns the rows, the summary and the run's first writes. After the
// measured phase it waits for the lag probes and for billing to catch up.
func (st *tripsState) measure(ctx context.Context, admin *client.Client, n int) ([]Result, tripsSummary, []client.CellWrite, error) {
	f := st.f
	sum := st.load
	sum.Target, sum.Workload, sum.Clients, sum.Mix = st.target, tripsSummaryWorkload, n, st.mix.String()
	cl, err := newClient(st.endpoints, n)
	if err != nil {
		return nil, sum, nil, err
	}
	pcl, err := newClient(st.endpoints, 2)
	if err != nil {
		return nil, sum, nil, err
	}
	run := &tripsRun{st: st, cl: cl, prober: newTripsLagProber(pcl)}
	go run.prober.run(ctx)
	stopProber := sync.OnceFunc(run.prober.finish)
	defer stopProber()
	wrapsBefore := st.src.wrapCount()

	mem, err := newTripsMemSampler(st.target, st.endpoints)
	if err != nil {
		return nil, sum, nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs := make([]*tripsClient, n)
	var wg sync.WaitGroup
	for i := range cs {
		c := &tripsClient{}
		for k := range c.hists {
			c.hists[k] = hdrhistogram.New(1, 60_000_000, 3)
		}
		cs[i] = c
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			run.client(rctx, c, seed)
		}(uint64(i) + 1)
	}
	time.Sleep(f.Warmup)
	mem.sample(ctx, true, false)
	run.measuring.Store(true)
	start := time.Now()
	stopMem := mem.every(ctx, tripsMemInterval)
	time.Sleep(f.Duration)
	run.measuring.Store(false)
	elapsed := time.Since(start)
	stopMem()
	mem.sample(ctx, false, true)
	cancel()
	wg.Wait()
	stopProber()
	sum.AfterRunCaughtUp = st.waitBilling(ctx, admin, time.Now())

	base := st.base.Load()
	bs := st.billing.trig.Stats()
	sum.StoredCells = base + min(base, bs.Created+bs.Exists)
	if sum.AfterRunCaughtUp >= 0 {
		sum.StoredCells = 2 * base // every BASE cell written has its STATUS cell
	}
	// Rows: one per kind, then the total.
	var rows []Result
	total := hdrhistogram.New(1, 60_000_000, 3)
	tr := Result{Target: st.target, Workload: workloadTrips, Clients: n, Seconds: elapsed.Seconds(), StoredCells: sum.StoredCells}
	for k := range tripsKinds {
		h := hdrhistogram.New(1, 60_000_000, 3)
		r := Result{Target: st.target, Workload: workloadTrips + " " + tripsKindNames[k], Clients: n,
			Seconds: elapsed.Seconds(), StoredCells: sum.StoredCells}
		for _, c := range cs {
			h.Merge(c.hists[k])
			r.Ops += c.ops[k]
			r.Cells += c.cells[k]
			r.Errors += c.errs[k]
			if r.FirstError == "" {
				r.FirstError = c.firstErr[k]
			}
		}
		total.Merge(h)
		tr.Ops, tr.Cells, tr.Errors = tr.Ops+r.Ops, tr.Cells+r.Cells, tr.Errors+r.Errors
		if tr.FirstError == "" {
			tr.FirstError = r.FirstError
		}
		rows = append(rows, tripsFinish(r, h))
	}
	rows = append(rows, tripsFinish(tr, total))
	var written []client.CellWrite
	for _, c := range cs {
		sum.BaseMisses += c.baseMisses
		sum.StatusMisses += c.statusMisses
		written = append(written, c.written...)
	}
	written = written[:min(len(written), tripsKeepWrites)]
	sum.Wrapped = st.src.wrapCount() - wrapsBefore
	run.prober.fill(&sum)
	b := st.billing.trig.Stats()
	sum.BillingDelivered, sum.BillingCreated, sum.BillingExists, sum.BillingConflicts =
		st.billing.delivered.Load(), b.Created, b.Exists, b.Conflicts
	sum.Memory = mem.figs
	if !f.JSON {
		for _, r := range rows {
			fmt.Fprintf(st.env.Stderr, "%s %s clients=%d: %.0f ops/s, p50 %.2f ms, p99 %.2f ms, %d errors\n",
				r.Target, r.Workload, n, r.OpsPerSec, float64(r.P50)/1000, float64(r.P99)/1000, r.Errors)
		}
	}
	return rows, sum, written, nil
}

// client is one closed-loop client: it does operations drawn from the mix back to back until
// ctx ends, counting into c those that end during the measured phase.
func (run *tripsRun) client(ctx context.Context, c *tripsClient, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed+7))
	for ctx.Err() == nil {
		k := run.st.mix.pick(rng)
		start := time.Now()
		cells, miss, err := run.op(ctx, k, rng, c)
		if ctx.Err() != nil {
			return
		}
		if !run.measuring.Load() {
			continue
		}
		if err != nil {
			c.errs[k]++
			if c.firstErr[k] == "" {
				c.firstErr[k] = err.Error()
			}
			continue
		}
		_ = c.hists[k].RecordValue(time.Since(start).Microseconds())
		c.ops[k]++
		c.cells[k] += int64(cells)
		switch miss {
		case workload.ColumnBase:
			c.baseMisses++
		case examples.ColumnStatus:
			c.statusMisses++
		}
	}
}

// tripsFinish fills r's rates and latency percentiles from h.
func tripsFinish(r Result, h *hdrhistogram.Histogram) Result {
	if r.Seconds > 0 {
		r.OpsPerSec = float64(r.Ops) / r.Seconds
		r.CellsPerSec = float64(r.Cells) / r.Seconds
	}
	r.P50, r.P90, r.P99, r.Max = h.ValueAtQuantile(50), h.ValueAtQuantile(90), h.ValueAtQuantile(99), h.Max()
	return r
}

// op does one operation of kind k and returns the cells it wrote or read (a query: the
// entries), and the column of a read that found no cell ("" otherwise; not an error). A write
// counts toward st.base once acknowledged; a measured one is numbered, and every
// --trips-lag-sample-th is given to the prober. c keeps the first measured writes.
func (run *tripsRun) op(ctx context.Context, k tripsKind, rng *rand.Rand, c *tripsClient) (int, string, error) {
	st, cl := run.st, run.cl
	switch k {
	case tripsWrite:
		body, err := st.src.next()
		if err != nil {
			return 0, "", err
		}
		row := uuid.New()
		if _, err := cl.PutCell(ctx, row, workload.ColumnBase, workload.BaseRefKey, body); err != nil {
			return 0, "", err
		}
		ack := time.Now()
		st.base.Add(1)
		if run.measuring.Load() {
			if (run.writeSeq.Add(1)-1)%int64(st.f.Trips.LagSample) == 0 {
				run.prober.add(row, ack)
			}
			if len(c.written) < tripsKeepWrites {
				c.written = append(c.written, client.CellWrite{
					Key: cells.Key{RowKey: row, ColumnKey: workload.ColumnBase, RefKey: workload.BaseRefKey}, Body: body})
			}
		}
		return 1, "", nil
	case tripsRead:
		row := st.loaded[rng.IntN(len(st.loaded))]
		col, cons := workload.ColumnBase, client.ConsistencyStale
		if rng.IntN(3) == 0 {
			col, cons = examples.ColumnStatus, client.ConsistencyStrong
		}
		_, err := cl.GetCellLatest(ctx, row, col, client.WithConsistency(cons))
		if errors.Is(err, client.ErrNotFound) {
			return 0, col, nil
		}
		if err != nil {
			return 0, "", err
		}
		return 1, "", nil
	default:
		q := wire.IndexQuery{ShardValue: st.busy[rng.IntN(len(st.busy))], Where: st.where, OrderBy: st.f.Index.QueryOrder[0],
			Limit: st.f.Index.QueryLimit, Version: st.version}
		ans, err := cl.QueryIndex(ctx, tripsIndex, q, client.WithConsistency(st.f.Consistency[0]))
		if err != nil {
			return 0, "", err
		}
		return len(ans.Entries), "", nil
	}
}

// note is the block printed after a run (without --json).
func (s tripsSummary) note() string {
	var b strings.Builder
	head := fmt.Sprintf("%s trips clients=%d", s.Target, s.Clients)
	caught := func(sec float64) string {
		if sec < 0 {
			return "did not catch up"
		}
		return fmt.Sprintf("caught up %.1fs", sec)
	}
	fmt.Fprintf(&b, "%s: load of %d flights in %.1fs: %.0f cells/s (%d created, %d already there); index %s v%d ready %.1fs and billing %s after the load\n",
		head, s.LoadFlights, s.LoadSeconds, s.LoadCellsPerSec, s.LoadCreated, s.LoadExists, s.Index, s.IndexVersion, s.IndexReadySeconds, caught(s.BillingCaughtUpSeconds))
	fmt.Fprintf(&b, "%s: mix %s; reads found no BASE cell %d times, no STATUS cell %d times; writes started the flights file over %d times\n",
		head, s.Mix, s.BaseMisses, s.StatusMisses, s.Wrapped)
	fmt.Fprintf(&b, "%s: trigger lag (BASE put_cell answer -> answer of the first strong read finding its STATUS cell): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.1f ms; "+
		"%d probes, %d seen, %d unseen after %s; %d polls (at most one per %s), p50 %.2f ms, p99 %.2f ms (the resolution), %d failed\n",
		head, float64(s.LagP50)/1000, float64(s.LagP90)/1000, float64(s.LagP99)/1000, float64(s.LagMax)/1000,
		s.LagProbes, s.LagSeen, s.LagUnseen, tripsLagTimeout, s.LagPolls, tripsLagPoll, float64(s.LagPollP50)/1000, float64(s.LagPollP99)/1000, s.LagPollErrors)
	fmt.Fprintf(&b, "%s: stored cells %d (BASE and STATUS of the trips written; billing %s after the run); billing: %d delivered here, STATUS %d created, %d exists, %d conflicts\n",
		head, s.StoredCells, caught(s.AfterRunCaughtUp), s.BillingDelivered, s.BillingCreated, s.BillingExists, s.BillingConflicts)
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	var rssTotal [3]int64
	for _, m := range s.Memory {
		fmt.Fprintf(&b, "%s: RSS %s: start %.1f MiB, max %.1f MiB, end %.1f MiB (%d samples)", head, m.Node, mib(m.RSSStart), mib(m.RSSMax), mib(m.RSSEnd), m.Samples)
		if m.HeapMax > 0 {
			fmt.Fprintf(&b, "; Go heap in use start %.1f MiB, max %.1f MiB, end %.1f MiB", mib(m.HeapStart), mib(m.HeapMax), mib(m.HeapEnd))
		}
		if m.Error != "" {
			fmt.Fprintf(&b, "; failed: %s", m.Error)
		}
		b.WriteByte('\n')
		rssTotal[0], rssTotal[1], rssTotal[2] = rssTotal[0]+m.RSSStart, rssTotal[1]+m.RSSMax, rssTotal[2]+m.RSSEnd
	}
	if len(s.Memory) > 1 {
		fmt.Fprintf(&b, "%s: RSS of the %d nodes: start %.1f MiB, max %.1f MiB (sum of each node's max), end %.1f MiB\n",
			head, len(s.Memory), mib(rssTotal[0]), mib(rssTotal[1]), mib(rssTotal[2]))
	}
	return b.String()
}
