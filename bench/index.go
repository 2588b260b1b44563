package bench

// The secondary-index workloads of `schemaless bench`: index-lag (write acknowledged to index
// entry queryable, at a fixed write rate; in indexlag.go), index-query (pages of an index query over the flights
// sample, following cursors) and index-backfill (how fast a new index is built over cells
// already stored).

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/wire"
)

// defaultIndexLagRate is index-lag's write rate when --rate is not given (trigger-latency's
// default, 1,000, is --rate's own).
const defaultIndexLagRate = 2000

// parseWhere parses conditions written "<field><op><value>", comma-separated ("delay>15,
// distance>=500, origin=ORD"), into index query conditions. An integer value becomes a JSON
// integer, another number a JSON number, true and false bools, anything else a string (a
// datetime is a string). Spaces around the parts are ignored; an empty s gives no condition.
func parseWhere(s string) ([]wire.IndexCond, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []wire.IndexCond
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		at := strings.IndexAny(part, "=!<>")
		if at <= 0 {
			return nil, fmt.Errorf("%q: want <field><op><value>", part)
		}
		field, rest := strings.TrimSpace(part[:at]), part[at:]
		var op string
		for _, o := range []string{"!=", "<=", ">=", "=", "<", ">"} {
			if strings.HasPrefix(rest, o) {
				op = o
				break
			}
		}
		if op == "" {
			return nil, fmt.Errorf("%q: unknown operator", part)
		}
		text := strings.TrimSpace(rest[len(op):])
		if text == "" || strings.ContainsAny(text, "=!<>") {
			return nil, fmt.Errorf("%q: want one value after %s", part, op)
		}
		var v any = text
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			v = i
		} else if fl, err := strconv.ParseFloat(text, 64); err == nil {
			v = fl
		} else if b, err := strconv.ParseBool(text); err == nil && (text == "true" || text == "false") {
			v = b
		}
		out = append(out, wire.IndexCond{Field: field, Op: op, Value: v})
	}
	return out, nil
}

// IndexFigures are the figures only the index workloads have (Result.Index). Times are in
// microseconds.
type IndexFigures struct {
	// Index is the index the run defined or queried, Version its version.
	Index   string `json:"index"`
	Version int    `json:"version"`
	// Variant describes an index-query run: its order_by and columns.
	Variant string `json:"variant,omitempty"`

	// index-lag. Rate is the write rate asked for, WritesPerSec the one kept; BehindMax how late
	// the latest measured write started after its due time; PutP50/PutP99 the put_cell
	// latencies of the measured writes. Probes counts the measured probe writes acknowledged,
	// Seen those whose entry a query returned, Unseen those never returned before the drain
	// ended, Early those returned before their put_cell answer arrived (0 ms). Polls counts the
	// probe queries, PollP50/PollP99 their latency (the resolution of the lag), PollErrors
	// their failures.
	Rate         int     `json:"rate,omitempty"`
	WritesPerSec float64 `json:"writes_per_sec,omitempty"`
	BehindMax    int64   `json:"behind_max_us,omitempty"`
	PutP50       int64   `json:"put_p50_us,omitempty"`
	PutP99       int64   `json:"put_p99_us,omitempty"`
	Probes       int64   `json:"probes,omitempty"`
	Seen         int64   `json:"seen,omitempty"`
	Unseen       int64   `json:"unseen,omitempty"`
	Early        int64   `json:"early,omitempty"`
	Polls        int64   `json:"polls,omitempty"`
	PollP50      int64   `json:"poll_p50_us,omitempty"`
	PollP99      int64   `json:"poll_p99_us,omitempty"`
	PollErrors   int64   `json:"poll_errors,omitempty"`
	// RaftEntriesPerSec is the rate of raft entries committed over every partition during the
	// measured writes (from one node's GET /v1/cluster: the partitions it hosts), and
	// EntriesPerWrite its ratio to the write rate: what the writes, the index maintainers'
	// upserts and group commits cost in raft entries together.
	RaftEntriesPerSec float64 `json:"raft_entries_per_sec,omitempty"`
	EntriesPerWrite   float64 `json:"raft_entries_per_write,omitempty"`

	// index-query. Scans counts the scans that reached their last page or --query-pages, Pages
	// the pages that had entries.
	Scans int64 `json:"scans,omitempty"`

	// index-backfill. Flights were loaded before the index was defined (LoadCellsPerSec: the
	// import's rate). TotalCells is what the version's maintainers had to handle (every
	// shard's log); FirstHandled is the time from defining it to the first handled cell seen in
	// its status, AllHandled to every cell handled, Ready to the version's state ready.
	// AfterFirstPerSec is the rate between the first and last progress readings. Entries is
	// the entries of the version once ready.
	Flights          int     `json:"flights,omitempty"`
	LoadCellsPerSec  float64 `json:"load_cells_per_sec,omitempty"`
	TotalCells       int64   `json:"total_cells,omitempty"`
	FirstHandled     int64   `json:"first_handled_us,omitempty"`
	AllHandled       int64   `json:"all_handled_us,omitempty"`
	Ready            int64   `json:"ready_us,omitempty"`
	AfterFirstPerSec float64 `json:"after_first_cells_per_sec,omitempty"`
	Entries          int64   `json:"entries,omitempty"`
}

// profilePhase starts a CPU profile of one measured phase of workload on target when
// --index-cpuprofile is set; the returned function stops it (once; later calls do nothing). A
// failure to start is reported on env.Stderr only.
func profilePhase(env *Env, target, workload string) (stop func()) {
	x := env.Config.Index
	if x.CPUProfile == "" {
		return func() {}
	}
	path := fmt.Sprintf("%s.%s.%s.%d", x.CPUProfile, target, workload, env.run.profiles.Add(1))
	pf, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(env.Stderr, "bench: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		fmt.Fprintf(env.Stderr, "bench: profile %s: %v\n", path, err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			pf.Close()
		})
	}
}

// indexFixture is what a target's index-query and index-backfill runs share: the flights
// loaded (once) and a ready index over them.
type indexFixture struct {
	flights     int      // flights loaded; 0 until loaded
	loadPerSec  float64  // the load's cells/s
	busy        []string // origins of the loaded flights, busiest first
	index       string   // a ready index over the flights' BASE cells; "" until one is
	indexVer    int
	indexBuilds int // indexes defined over the flights so far
}

// defineIndex defines the index of def and returns its version.
func defineIndex(ctx context.Context, cl *client.Client, def []byte) (wire.IndexDefineResult, error) {
	res, err := cl.DefineIndex(ctx, def)
	if err != nil {
		return res, fmt.Errorf("define index: %w", err)
	}
	return res, nil
}

// versionOf returns version v of st, or false.
func versionOf(st wire.IndexStatus, v int) (wire.IndexVersionStatus, bool) {
	for _, vs := range st.Versions {
		if vs.Version == v {
			return vs, true
		}
	}
	return wire.IndexVersionStatus{}, false
}

// waitIndexReady polls the status of version v of index name every interval until it is ready
// or timeout passes. onStatus, when not nil, sees every status read (and the time since start).
func waitIndexReady(ctx context.Context, cl *client.Client, name string, v int, interval, timeout time.Duration,
	onStatus func(time.Duration, wire.IndexVersionStatus)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := "no status read"
	for {
		st, err := cl.Index(ctx, name)
		if err == nil {
			vs, ok := versionOf(st, v)
			switch {
			case !ok:
				last = fmt.Sprintf("no version %d", v)
			default:
				if onStatus != nil {
					onStatus(time.Since(start), vs)
				}
				if vs.State == wire.IndexReady {
					return nil
				}
				last = fmt.Sprintf("state %s, %d of %d cells handled", vs.State, vs.HandledCells, vs.TotalCells)
				if vs.Error != "" {
					last += " (" + vs.Error + ")"
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("index %s version %d not ready after %s: %s", name, v, timeout, last)
		case <-time.After(interval):
		}
	}
}

// dropIndex drops version v of index name, reporting a failure on stderr only: the run's
// figures are measured by then.
func dropIndex(ctx context.Context, stderr io.Writer, cl *client.Client, name string, v int) {
	if _, err := cl.DropIndexVersion(ctx, name, v); err != nil {
		fmt.Fprintf(stderr, "bench: drop index %s version %d: %v\n", name, v, err)
	}
}

// topOrigins returns the k origins of counts with the most flights, busiest first (ties by
// code).
func topOrigins(counts map[string]int, k int) []string {
	out := make([]string, 0, len(counts))
	for o := range counts {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if counts[out[i]] != counts[out[j]] {
			return counts[out[i]] > counts[out[j]]
		}
		return out[i] < out[j]
	})
	return out[:min(k, len(out))]
}

// countOrigins counts the flights of each origin among the first limit flights of path.
func countOrigins(path, airportsPath string, limit int) (map[string]int, error) {
	r, _, closeFile, err := examples.OpenFlights(path, airportsPath)
	if err != nil {
		return nil, err
	}
	defer closeFile()
	counts := map[string]int{}
	for n := 0; n < limit; n++ {
		fl, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		counts[fl.Origin]++
	}
	return counts, nil
}

// loadFlights loads the flights of the index workloads into the target, once.
func (fx *indexFixture) loadFlights(ctx context.Context, endpoints []string, env *Env) error {
	f := env.Config
	if fx.flights > 0 {
		return nil
	}
	x := f.Index
	counts, err := countOrigins(x.FlightsPath, x.AirportsPath, x.Flights)
	if err != nil {
		return fmt.Errorf("read %s: %w", x.FlightsPath, err)
	}
	fx.busy = topOrigins(counts, len(counts))
	cl, err := newClient(endpoints, 8)
	if err != nil {
		return err
	}
	st, err := examples.ImportFlights(ctx, cl, x.FlightsPath, x.AirportsPath, examples.ImportOptions{Batch: 500, Concurrency: 8, Limit: x.Flights})
	if err != nil {
		return fmt.Errorf("load flights: %w", err)
	}
	fx.flights = int(st.Flights)
	fx.loadPerSec = float64(st.Flights) / st.Elapsed.Seconds()
	if !f.JSON {
		fmt.Fprintf(env.Stderr, "loaded %d flights in %.1fs (%.0f cells/s; %d created, %d already there)\n",
			st.Flights, st.Elapsed.Seconds(), fx.loadPerSec, st.Created, st.Exists)
	}
	return nil
}

// benchIndexBackfill loads the flights (once per target), defines a new index over their BASE
// cells and measures the time until its version has handled every cell and is ready, reading
// its status every 250 ms and printing its progress every second. The index stays, for
// index-query.
func benchIndexBackfill(ctx context.Context, env *Env, target string, endpoints []string) (Result, error) {
	f, fx := env.Config, &env.fx
	res := Result{Workload: workloadIndexBackfill}
	if err := fx.loadFlights(ctx, endpoints, env); err != nil {
		return res, err
	}
	name := "flights_by_origin"
	if fx.indexBuilds > 0 {
		_, tag := runTag()
		name += "_" + tag
	}
	fx.indexBuilds++
	admin, err := newClient(endpoints, 2)
	if err != nil {
		return res, err
	}
	fig := &IndexFigures{Index: name, Flights: fx.flights, LoadCellsPerSec: fx.loadPerSec}
	res.Index = fig
	stopProfile := profilePhase(env, target, workloadIndexBackfill)
	defer stopProfile()
	start := time.Now()
	def, err := defineIndex(ctx, admin, examples.FlightsIndexDefinition(name, "BASE"))
	if err != nil {
		return res, err
	}
	fig.Version = def.Version
	var firstAt, allAt, lastPrint time.Duration
	var firstHandled int64
	var last wire.IndexVersionStatus
	err = waitIndexReady(ctx, admin, name, def.Version, 250*time.Millisecond, f.Index.Timeout, func(_ time.Duration, vs wire.IndexVersionStatus) {
		el := time.Since(start)
		last = vs
		if vs.HandledCells > 0 && firstAt == 0 {
			firstAt, firstHandled = el, vs.HandledCells
		}
		if vs.TotalCells > 0 && vs.HandledCells >= vs.TotalCells && allAt == 0 {
			allAt = el
			fig.TotalCells = vs.TotalCells
		}
		if !f.JSON && el-lastPrint >= time.Second {
			lastPrint = el
			fmt.Fprintf(env.Stderr, "%s index-backfill %s: %5.1fs %s, %d of %d cells handled (%.0f%%), %.0f cells/s so far, lag %.1fs, %d workers\n",
				target, name, el.Seconds(), vs.State, vs.HandledCells, vs.TotalCells, 100*vs.Progress,
				float64(vs.HandledCells)/el.Seconds(), vs.LagSeconds, vs.Workers)
		}
	})
	if err != nil {
		return res, err
	}
	fig.Ready = time.Since(start).Microseconds()
	stopProfile()
	if allAt == 0 { // ready before a reading showed every cell handled
		allAt, fig.TotalCells = time.Since(start), last.TotalCells
	}
	fig.FirstHandled, fig.AllHandled = firstAt.Microseconds(), allAt.Microseconds()
	if st, err := admin.Index(ctx, name); err == nil {
		if vs, ok := versionOf(st, def.Version); ok {
			fig.Entries = vs.Entries
		}
	}
	if allAt > firstAt && firstAt > 0 {
		fig.AfterFirstPerSec = float64(fig.TotalCells-firstHandled) / (allAt - firstAt).Seconds()
	}
	res.Ops, res.Cells, res.Seconds = fig.TotalCells, fig.TotalCells, allAt.Seconds()
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.CellsPerSec = res.OpsPerSec
	fx.index, fx.indexVer = name, def.Version
	return res, nil
}

// queryColumns turns a --query-columns value into the query's columns.
func queryColumns(v string) []string {
	if v == "none" || v == "" {
		return nil
	}
	return []string{v}
}

// benchIndexQuery runs n clients that each scan the index of fx: a random origin among the
// --query-origins busiest, --query-where, order_by order, pages of --query-limit followed by
// cursor up to --query-pages, then another origin; for --warmup and then --duration. Each page
// is one measured query.
func benchIndexQuery(ctx context.Context, env *Env, target string, endpoints []string, consistency, order, columns string, n int) (Result, error) {
	f, fx := env.Config, &env.fx
	x := f.Index
	where, err := parseWhere(x.QueryWhere)
	if err != nil {
		return Result{}, fmt.Errorf("--query-where: %w", err)
	}
	cl, err := newClient(endpoints, n)
	if err != nil {
		return Result{}, err
	}
	origins := fx.busy[:min(x.QueryOrigins, len(fx.busy))]
	var measuring atomic.Bool
	var ops, entries, errs, scans atomic.Int64
	var firstErr atomic.Value
	hists := make([]*hdrhistogram.Histogram, n)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	opt := client.WithConsistency(consistency)
	for i := 0; i < n; i++ {
		hists[i] = hdrhistogram.New(1, 60_000_000, 3)
		wg.Add(1)
		go func(h *hdrhistogram.Histogram, seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed+1))
			for rctx.Err() == nil {
				q := wire.IndexQuery{ShardValue: origins[rng.IntN(len(origins))], Where: where, OrderBy: order,
					Limit: x.QueryLimit, Columns: queryColumns(columns)}
				for pages := 1; rctx.Err() == nil; pages++ {
					start := time.Now()
					ans, err := cl.QueryIndex(rctx, fx.index, q, opt)
					if rctx.Err() != nil {
						return
					}
					m := measuring.Load()
					if err != nil {
						if m {
							errs.Add(1)
							firstErr.CompareAndSwap(nil, err.Error())
						}
						break
					}
					if m {
						_ = h.RecordValue(time.Since(start).Microseconds())
						ops.Add(1)
						entries.Add(int64(len(ans.Entries)))
					}
					if ans.NextCursor == "" || (x.QueryPages > 0 && pages >= x.QueryPages) {
						if m {
							scans.Add(1)
						}
						break
					}
					q.Cursor = ans.NextCursor
				}
			}
		}(hists[i], uint64(i)+1)
	}
	time.Sleep(f.Warmup)
	stopProfile := profilePhase(env, target, workloadIndexQuery)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(f.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stopProfile()
	cancel()
	wg.Wait()
	all := hdrhistogram.New(1, 60_000_000, 3)
	for _, h := range hists {
		all.Merge(h)
	}
	fig := &IndexFigures{Index: fx.index, Version: fx.indexVer, Variant: fmt.Sprintf("order=%s columns=%s", order, columns), Scans: scans.Load()}
	r := Result{Workload: workloadIndexQuery, Consistency: consistency, Clients: n, Seconds: elapsed.Seconds(),
		Ops: ops.Load(), Cells: entries.Load(), Errors: errs.Load(), Index: fig,
		P50: all.ValueAtQuantile(50), P90: all.ValueAtQuantile(90), P99: all.ValueAtQuantile(99), Max: all.Max()}
	r.OpsPerSec = float64(r.Ops) / r.Seconds
	r.CellsPerSec = float64(r.Cells) / r.Seconds
	if e, ok := firstErr.Load().(string); ok {
		r.FirstError = e
	}
	return r, nil
}

// indexWorkload is a secondary-index workload (package indexes): index-lag (write acknowledged
// to index entry queryable, at a fixed write rate), index-query (pages of an index query over
// the flights sample, following cursors) or index-backfill (how fast a new index is built over
// cells already stored). On the in-process targets the nodes run the index maintainers.
type indexWorkload struct{ name string }

func (w indexWorkload) Name() string { return w.name }

// Run runs the workload on t: index-lag once per --rate, index-backfill once, index-query once
// per --consistency, --query-order, --query-columns and --clients value. The target's flights
// and their index (env's fixture) are loaded and built on first use. A target that stores no
// cells is skipped.
func (w indexWorkload) Run(ctx context.Context, env *Env, t Target) ([]Result, error) {
	f, target, endpoints := env.Config, t.Name(), t.Endpoints()
	fx := &env.fx
	if !storesCells(t) {
		fmt.Fprintf(env.Stderr, "%s %s: skipped (raft-noop stores no cells to index)\n", target, w.name)
		return nil, nil
	}
	var out []Result
	add := func(r Result) {
		r.Target = target
		if !f.JSON {
			fmt.Fprintln(env.Stderr, indexNote(r))
		}
		out = append(out, r)
	}
	switch w.name {
	case workloadIndexLag:
		rates := []int{defaultIndexLagRate}
		if f.RateSet {
			rates = f.Rates
		}
		for _, rate := range rates {
			r, err := benchIndexLag(ctx, env, target, endpoints, rate)
			if err != nil {
				return out, fmt.Errorf("%s %s rate=%d: %w", target, w.name, rate, err)
			}
			add(r)
		}
	case workloadIndexBackfill:
		r, err := benchIndexBackfill(ctx, env, target, endpoints)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", target, w.name, err)
		}
		add(r)
	case workloadIndexQuery:
		if fx.index == "" {
			r, err := benchIndexBackfill(ctx, env, target, endpoints)
			if err != nil {
				return out, fmt.Errorf("%s %s: build the index: %w", target, w.name, err)
			}
			if !f.JSON {
				fmt.Fprintf(env.Stderr, "(built for index-query) %s\n", indexNote(Result{Target: target, Workload: r.Workload, Seconds: r.Seconds, CellsPerSec: r.CellsPerSec, Index: r.Index}))
			}
		}
		for _, cons := range f.Consistency {
			for _, order := range f.Index.QueryOrder {
				for _, cols := range f.Index.QueryColumns {
					for _, n := range f.Clients {
						r, err := benchIndexQuery(ctx, env, target, endpoints, cons, order, cols, n)
						if err != nil {
							return out, fmt.Errorf("%s %s: %w", target, w.name, err)
						}
						add(r)
					}
				}
			}
		}
	}
	return out, nil
}

// indexNote is the line printed under the table for an index workload's run.
func indexNote(r Result) string {
	x := r.Index
	switch r.Workload {
	case workloadIndexLag:
		return fmt.Sprintf("%s index-lag %s v%d: rate %d/s asked, %.0f writes/s done (latest start %.1f ms behind schedule, put p50 %.2f ms, p99 %.2f ms), "+
			"ack->queryable p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.1f ms over %d probes (%d unseen, %d early); "+
			"%d probe queries, p50 %.2f ms, p99 %.2f ms, %d failed; %.0f raft entries/s (%.2f per write); %d write errors",
			r.Target, x.Index, x.Version, x.Rate, x.WritesPerSec, float64(x.BehindMax)/1000, float64(x.PutP50)/1000, float64(x.PutP99)/1000,
			float64(r.P50)/1000, float64(r.P90)/1000, float64(r.P99)/1000, float64(r.Max)/1000, x.Probes, x.Unseen, x.Early,
			x.Polls, float64(x.PollP50)/1000, float64(x.PollP99)/1000, x.PollErrors, x.RaftEntriesPerSec, x.EntriesPerWrite, r.Errors)
	case workloadIndexBackfill:
		return fmt.Sprintf("%s index-backfill %s v%d: %d flights loaded (%.0f cells/s); %d cells handled in %.2fs (%.0f cells/s; first cell after %.2fs, "+
			"%.0f cells/s after it), ready after %.2fs, %d entries",
			r.Target, x.Index, x.Version, x.Flights, x.LoadCellsPerSec, x.TotalCells, r.Seconds, r.CellsPerSec,
			float64(x.FirstHandled)/1e6, x.AfterFirstPerSec, float64(x.Ready)/1e6, x.Entries)
	default:
		return fmt.Sprintf("%s index-query %s %s clients=%d: %.0f queries/s, %.0f entries/s, p50 %.2f ms, p99 %.2f ms, %d scans, %d errors (index %s v%d)",
			r.Target, x.Variant, r.Consistency, r.Clients, r.OpsPerSec, r.CellsPerSec, float64(r.P50)/1000, float64(r.P99)/1000, x.Scans, r.Errors, x.Index, x.Version)
	}
}
