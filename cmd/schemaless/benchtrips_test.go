package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/workload"
	"github.com/spf13/pflag"
)

// tripsTestFlags returns the bench flags of a small trips run on the in-process targets, with
// the flag defaults of the trigger, index and trips flags and then args.
func tripsTestFlags(t *testing.T, args ...string) benchFlags {
	t.Helper()
	f := benchFlags{
		workloads: []string{workloadTrips}, clients: []int{2}, duration: 2 * time.Second, warmup: 500 * time.Millisecond,
		batch: 100, valueSize: 200, rows: 10, shards: 32, partitions: 2, inflight: 8,
		consistency: []string{client.ConsistencyStrong},
	}
	fl := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	f.trig.register(fl)
	f.idx.register(fl)
	f.trips.register(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBenchTrips runs trips on the in-process SQLite target (3,000 flights of the sample, 2
// clients, 2 s) and checks every row, that the measured writes and billing's STATUS cells of
// loaded and written trips are stored, and the lag and memory figures. It asserts no speed.
func TestBenchTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const flights = 3000
	f := tripsTestFlags(t, "--flights", "../../testdata/flights-100k.csv.gz", "--airports", "../../testdata/airports.csv",
		"--trips-flights", "3000", "--trips-lag-sample", "2", "--index-poll-interval", "200ms", "--query-where", "delay>0")
	if err := f.trips.validate(f); err != nil {
		t.Fatalf("validate: %v", err)
	}
	// trips needs the index maintainers, which startTarget starts when an index workload is
	// listed: index-query is, whether or not startTarget counts trips as one.
	tf := f
	tf.workloads = []string{workloadTrips, workloadIndexQuery}
	var repl replicatedServers
	defer repl.close()
	env, err := startTarget(ctx, "sqlite", tf, &repl)
	if err != nil {
		t.Fatal(err)
	}
	defer env.stop()
	out, err := runTrips(ctx, "sqlite", env, f)
	for _, r := range out.results {
		t.Logf("%+v", r)
	}
	if err != nil {
		t.Fatal(err)
	}

	// The rows: one per kind and the total, each with operations and no error.
	wantRows := []string{"trips write", "trips read", "trips query", "trips"}
	if len(out.results) != len(wantRows) {
		t.Fatalf("got %d rows, want %d (%v)", len(out.results), len(wantRows), wantRows)
	}
	var sumOps int64
	for i, r := range out.results {
		if r.Workload != wantRows[i] || r.Target != "sqlite" || r.Clients != 2 {
			t.Errorf("row %d: workload %q, target %q, clients %d; want %q, sqlite, 2", i, r.Workload, r.Target, r.Clients, wantRows[i])
		}
		if r.Ops <= 0 || r.OpsPerSec <= 0 || r.Seconds <= 0 || r.P50 <= 0 || r.Max < r.P99 {
			t.Errorf("%s: %d ops, %.0f ops/s, %.2fs, p50 %d us, p99 %d, max %d: want positive and max >= p99", r.Workload, r.Ops, r.OpsPerSec, r.Seconds, r.P50, r.P99, r.Max)
		}
		if r.Errors != 0 {
			t.Errorf("%s: got %d errors (first: %s), want 0", r.Workload, r.Errors, r.FirstError)
		}
		if i < 3 {
			sumOps += r.Ops
		}
	}
	write, query, total := out.results[0], out.results[2], out.results[3]
	if total.Ops != sumOps {
		t.Errorf("trips: got %d ops, want %d (the kinds' sum)", total.Ops, sumOps)
	}
	if query.Cells <= 0 {
		t.Errorf("trips query: got %d entries, want some (the index over the loaded flights)", query.Cells)
	}

	// The summary.
	if len(out.summaries) != 1 {
		t.Fatalf("got %d summaries, want 1", len(out.summaries))
	}
	s := out.summaries[0]
	t.Logf("%+v\n%s", s, s.note())
	if s.LoadFlights != flights || s.LoadCellsPerSec <= 0 {
		t.Errorf("load: got %d flights at %.0f cells/s, want %d at a positive rate", s.LoadFlights, s.LoadCellsPerSec, flights)
	}
	if s.BillingCaughtUpSeconds < 0 || s.AfterRunCaughtUp < 0 {
		t.Errorf("billing caught up %.1fs after the load and %.1fs after the run: want both >= 0", s.BillingCaughtUpSeconds, s.AfterRunCaughtUp)
	}
	if s.LagProbes <= 0 || s.LagSeen != s.LagProbes || s.LagUnseen != 0 || s.LagP50 <= 0 || s.LagP99 < s.LagP50 || s.LagPolls <= 0 || s.LagPollP50 <= 0 {
		t.Errorf("lag: %d probes, %d seen, %d unseen, p50 %d us, p99 %d us, %d polls: want every probe seen, 0 < p50 <= p99, polls",
			s.LagProbes, s.LagSeen, s.LagUnseen, s.LagP50, s.LagP99, s.LagPolls)
	}
	if s.LagProbes < write.Ops/2-2 { // -2: a write may end as the measured phase does
		t.Errorf("lag: %d probes for %d measured writes, want one in 2", s.LagProbes, write.Ops)
	}
	if least := 2 * (flights + write.Ops); s.StoredCells < least || write.StoredCells != s.StoredCells {
		t.Errorf("stored cells: got %d (write row %d), want at least %d: the loaded and written BASE cells and their STATUS", s.StoredCells, write.StoredCells, least)
	}
	if s.StatusMisses != 0 || s.BaseMisses != 0 {
		t.Errorf("reads of loaded trips found no cell: %d BASE, %d STATUS; want 0", s.BaseMisses, s.StatusMisses)
	}
	if len(s.Memory) != 1 {
		t.Fatalf("memory: got %d figures, want 1 (this process)", len(s.Memory))
	}
	if m := s.Memory[0]; m.Node != tripsInProcessLabel || m.Error != "" || m.Samples < 2 || m.RSSStart <= 0 || m.RSSEnd <= 0 ||
		m.RSSMax < m.RSSStart || m.RSSMax < m.RSSEnd || m.HeapMax <= 0 {
		t.Errorf("memory: got %+v, want %q with RSS start, end > 0, max >= both, heap > 0", m, tripsInProcessLabel)
	}

	// The measured writes are stored, with their bodies, and billing wrote their STATUS cells.
	cl, err := benchClient(env.endpoints, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.written) == 0 {
		t.Fatal("no measured write kept")
	}
	ws := out.written[:min(len(out.written), 200)]
	var keys []client.GetKey
	for _, w := range ws {
		keys = append(keys, client.GetKey{RowKey: w.Key.RowKey, ColumnKey: w.Key.ColumnKey, RefKey: w.Key.RefKey})
	}
	checkTripsCells(ctx, t, cl, "measured writes", keys, func(i int) []byte { return ws[i].Body })

	// Billing wrote the STATUS cell of every one of the first 1,000 loaded flights.
	keys = keys[:0]
	for _, rk := range out.loaded[:1000] {
		keys = append(keys, client.GetKey{RowKey: rk, ColumnKey: workload.ColumnBase, RefKey: workload.BaseRefKey})
	}
	checkTripsCells(ctx, t, cl, "loaded flights", keys, nil)
}

// checkTripsCells reads (strong) the cells of keys, BASE cells, and their STATUS cells, and
// checks that every one is there, the BASE body equal to want(i) (when want is not nil) and
// the STATUS body the billing trigger's for it.
func checkTripsCells(ctx context.Context, t *testing.T, cl *client.Client, what string, keys []client.GetKey, want func(i int) []byte) {
	t.Helper()
	strong := client.WithConsistency(client.ConsistencyStrong)
	resp, err := cl.GetCells(ctx, keys, strong)
	if err != nil {
		t.Fatalf("%s: read BASE: %v", what, err)
	}
	if len(resp.Missing) > 0 || len(resp.Cells) != len(keys) {
		t.Fatalf("%s: %d of %d BASE cells missing, want none", what, len(resp.Missing), len(keys))
	}
	status := make([]client.GetKey, len(keys))
	for i, k := range keys {
		status[i] = client.GetKey{RowKey: k.RowKey, ColumnKey: columnStatus, RefKey: k.RefKey}
	}
	sresp, err := cl.GetCells(ctx, status, strong)
	if err != nil {
		t.Fatalf("%s: read STATUS: %v", what, err)
	}
	if len(sresp.Missing) > 0 || len(sresp.Cells) != len(keys) {
		t.Fatalf("%s: %d of %d STATUS cells missing, want none", what, len(sresp.Missing), len(keys))
	}
	for i, c := range resp.Cells { // in the order of keys
		if want != nil {
			if err := sameJSON(c.Body, want(i)); err != nil {
				t.Errorf("%s: %s BASE: %v", what, c.RowKey, err)
			}
		}
		body, err := cells.EncodeBody(c.Body)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := body.Object()
		if err != nil {
			t.Fatal(err)
		}
		wantStatus, err := billingBody(obj)
		if err != nil {
			t.Fatal(err)
		}
		if sc := sresp.Cells[i]; !strings.EqualFold(sc.RowKey, c.RowKey) {
			t.Errorf("%s: STATUS %d is of row %s, want %s", what, i, sc.RowKey, c.RowKey)
		} else if err := sameJSON(sc.Body, wantStatus); err != nil {
			t.Errorf("%s: %s STATUS: %v", what, c.RowKey, err)
		}
	}
}

// TestBenchTripsFlagsValidate checks that validate accepts the defaults and refuses each bad value
// with an error naming its flag.
func TestBenchTripsFlagsValidate(t *testing.T) {
	f := tripsTestFlags(t)
	if err := f.trips.validate(f); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, ok := range []string{"read=100", " write = 50 , query=50 ", "query=30,read=30,write=40", "write=100,read=0"} {
		f := tripsTestFlags(t, "--trips-mix", ok)
		if err := f.trips.validate(f); err != nil {
			t.Errorf("--trips-mix %q: %v, want accepted", ok, err)
		}
	}
	bad := [][]string{
		{"--trips-mix", "write=40,read=30"},                   // sums to 70
		{"--trips-mix", "write=40,read=30,query=40"},          // 110
		{"--trips-mix", "write=40,read=30,query=30,write=0"},  // twice
		{"--trips-mix", "walk=100"},                           // unknown kind
		{"--trips-mix", "write=x,read=100"},                   // not a number
		{"--trips-mix", "write=-10,read=110"},                 // out of range
		{"--trips-mix", "write40,read=60"},                    // no =
		{"--trips-mix", ""},                                   // nothing
		{"--trips-mix", "write=40,,read=30,query=30"},         // empty part
		{"--trips-flights", "0"},                              //
		{"--trips-lag-sample", "0"},                           //
		{"--trips-lag-sample", "-3", "--trips-flights", "-1"}, // both named
	}
	for _, args := range bad {
		f := tripsTestFlags(t, args...)
		err := f.trips.validate(f)
		if err == nil {
			t.Errorf("%q: accepted, want an error", args)
			continue
		}
		for i := 0; i < len(args); i += 2 {
			if !strings.Contains(err.Error(), args[i]) {
				t.Errorf("%q: error %q does not name %s", args, err, args[i])
			}
		}
	}
}

// TestBenchTripsMix checks the parsed percentages and that pick draws only kinds with a share.
func TestBenchTripsMix(t *testing.T) {
	m, err := parseTripsMix(" query=30, write=45 ,read=25")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m, (tripsMix{45, 25, 30}); got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, want := m.String(), "write=45,read=25,query=30"; got != want {
		t.Errorf("String: got %q, want %q", got, want)
	}
	only, err := parseTripsMix("query=100")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var n [tripsKinds]int
	for range 1000 {
		n[only.pick(rng)]++
		n[m.pick(rng)]++
	}
	if n[tripsQuery] < 1000 || n[tripsWrite] == 0 || n[tripsRead] == 0 {
		t.Errorf("picks %v: want every kind of %v and the 1000 of query=100", n, m)
	}
}

// TestBenchTripsScrapeRSS reads process_resident_memory_bytes from a Prometheus handler with the
// process collector (as serve's /metrics), and fails on one without it.
func TestBenchTripsScrapeRSS(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	rss, err := tripsScrapeRSS(ctx, srv.Client(), srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	own, err := tripsProcessRSS()
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || own <= 0 {
		t.Errorf("RSS: got %d from /metrics and %d from /proc, want both positive", rss, own)
	}
	empty := httptest.NewServer(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	defer empty.Close()
	if got, err := tripsScrapeRSS(ctx, empty.Client(), empty.URL); err == nil {
		t.Errorf("no process collector: got %d, want an error", got)
	}
}
