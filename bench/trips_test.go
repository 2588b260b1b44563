package bench

import (
	"context"
	"io"
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
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tripsTestConfig returns the configuration of a small trips run on the in-process targets:
// the defaults of the trigger, index and trips settings, and small general ones.
func tripsTestConfig() Config {
	f := DefaultConfig()
	f.Workloads, f.Clients, f.Duration, f.Warmup = []string{workloadTrips}, []int{2}, 2*time.Second, 500*time.Millisecond
	f.Batch, f.ValueSize, f.Rows, f.Shards, f.Partitions, f.MaxInflight = 100, 200, 10, 32, 2, 8
	f.Consistency = []string{client.ConsistencyStrong}
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
	f := tripsTestConfig()
	f.Index.FlightsPath, f.Index.AirportsPath = "../testdata/flights-100k.csv.gz", "../testdata/airports.csv"
	f.Trips.Flights, f.Trips.LagSample = flights, 2
	f.Index.PollInterval, f.Index.QueryWhere = 200*time.Millisecond, "delay>0"
	require.NoError(t, f.validateTrips())
	// trips needs the index maintainers, which startTarget starts when a workload needs them.
	env := testEnv(f)
	defer env.run.repl.close(io.Discard)
	tg, err := startTarget(ctx, targetSQLite, env)
	require.NoError(t, err)
	defer tg.Close()
	out, err := runTrips(ctx, env, tg)
	for _, r := range out.results {
		t.Logf("%+v", r)
	}
	require.NoError(t, err)

	// The rows: one per kind and the total, each with operations and no error.
	wantRows := []string{"trips write", "trips read", "trips query", "trips"}
	require.Len(t, out.results, len(wantRows), "rows: want %v", wantRows)
	var sumOps int64
	for i, r := range out.results {
		assert.Equal(t, wantRows[i], r.Workload, "row %d", i)
		assert.Equal(t, targetSQLite, r.Target, "row %d", i)
		assert.Equal(t, 2, r.Clients, "row %d", i)
		assert.Positive(t, r.Ops, "%s: ops", r.Workload)
		assert.Positive(t, r.OpsPerSec, "%s: ops/s", r.Workload)
		assert.Positive(t, r.Seconds, "%s: seconds", r.Workload)
		assert.Positive(t, r.P50, "%s: p50", r.Workload)
		assert.GreaterOrEqual(t, r.Max, r.P99, "%s: max >= p99", r.Workload)
		assert.Equal(t, int64(0), r.Errors, "%s: errors (first: %s)", r.Workload, r.FirstError)
		if i < 3 {
			sumOps += r.Ops
		}
	}
	write, query, total := out.results[0], out.results[2], out.results[3]
	assert.Equal(t, sumOps, total.Ops, "trips: ops, the kinds' sum")
	assert.Positive(t, query.Cells, "trips query: entries (the index over the loaded flights)")

	// The summary.
	require.Len(t, out.summaries, 1, "summaries")
	s := out.summaries[0]
	t.Logf("%+v\n%s", s, s.note())
	assert.Equal(t, int64(flights), s.LoadFlights, "load: flights")
	assert.Positive(t, s.LoadCellsPerSec, "load: cells/s")
	assert.GreaterOrEqual(t, s.BillingCaughtUpSeconds, 0.0, "billing caught up after the load")
	assert.GreaterOrEqual(t, s.AfterRunCaughtUp, 0.0, "billing caught up after the run")
	assert.Positive(t, s.LagProbes, "lag: probes")
	assert.Equal(t, s.LagProbes, s.LagSeen, "lag: every probe seen")
	assert.Zero(t, s.LagUnseen, "lag: unseen")
	assert.Positive(t, s.LagP50, "lag: p50")
	assert.GreaterOrEqual(t, s.LagP99, s.LagP50, "lag: p99 >= p50")
	assert.Positive(t, s.LagPolls, "lag: polls")
	assert.Positive(t, s.LagPollP50, "lag: poll p50")
	assert.GreaterOrEqual(t, s.LagProbes, write.Ops/2-2, "lag: one probe in 2 measured writes") // -2: a write may end as the measured phase does
	least := 2 * (flights + write.Ops)
	assert.GreaterOrEqual(t, s.StoredCells, least, "stored cells: the loaded and written BASE cells and their STATUS")
	assert.Equal(t, s.StoredCells, write.StoredCells, "stored cells of the write row")
	assert.Zero(t, s.BaseMisses, "reads of loaded trips that found no BASE cell")
	assert.Zero(t, s.StatusMisses, "reads of loaded trips that found no STATUS cell")
	require.Len(t, s.Memory, 1, "memory: this process")
	m := s.Memory[0]
	assert.Equal(t, tripsInProcessLabel, m.Node, "memory: node")
	assert.Empty(t, m.Error, "memory: error")
	assert.GreaterOrEqual(t, m.Samples, 2, "memory: samples")
	assert.Positive(t, m.RSSStart, "memory: RSS start")
	assert.Positive(t, m.RSSEnd, "memory: RSS end")
	assert.GreaterOrEqual(t, m.RSSMax, max(m.RSSStart, m.RSSEnd), "memory: RSS max >= start, end")
	assert.Positive(t, m.HeapMax, "memory: heap")

	// The measured writes are stored, with their bodies, and billing wrote their STATUS cells.
	cl, err := newClient(tg.Endpoints(), 2)
	require.NoError(t, err)
	require.NotEmpty(t, out.written, "measured writes kept")
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
	require.NoError(t, err, "%s: read BASE", what)
	require.Empty(t, resp.Missing, "%s: BASE cells missing", what)
	require.Len(t, resp.Cells, len(keys), "%s: BASE cells", what)
	status := make([]client.GetKey, len(keys))
	for i, k := range keys {
		status[i] = client.GetKey{RowKey: k.RowKey, ColumnKey: examples.ColumnStatus, RefKey: k.RefKey}
	}
	sresp, err := cl.GetCells(ctx, status, strong)
	require.NoError(t, err, "%s: read STATUS", what)
	require.Empty(t, sresp.Missing, "%s: STATUS cells missing", what)
	require.Len(t, sresp.Cells, len(keys), "%s: STATUS cells", what)
	for i, c := range resp.Cells { // in the order of keys
		if want != nil {
			assert.NoError(t, examples.SameJSON(c.Body, want(i)), "%s: %s BASE", what, c.RowKey)
		}
		body, err := cells.EncodeBody(c.Body)
		require.NoError(t, err)
		obj, err := body.Object()
		require.NoError(t, err)
		wantStatus, err := examples.BillingBody(obj)
		require.NoError(t, err)
		sc := sresp.Cells[i]
		if assert.True(t, strings.EqualFold(sc.RowKey, c.RowKey), "%s: STATUS %d is of row %s, want %s", what, i, sc.RowKey, c.RowKey) {
			assert.NoError(t, examples.SameJSON(sc.Body, wantStatus), "%s: %s STATUS", what, c.RowKey)
		}
	}
}

// TestTripsConfigValidate checks that validateTrips accepts the defaults and refuses each bad
// value with an error naming its flag.
func TestTripsConfigValidate(t *testing.T) {
	f := tripsTestConfig()
	require.NoError(t, f.validateTrips(), "defaults")
	for _, ok := range []string{"read=100", " write = 50 , query=50 ", "query=30,read=30,write=40", "write=100,read=0"} {
		f := tripsTestConfig()
		f.Trips.Mix = ok
		assert.NoError(t, f.validateTrips(), "--trips-mix %q", ok)
	}
	mix := func(m string) func(*TripsConfig) { return func(c *TripsConfig) { c.Mix = m } }
	bad := []struct {
		edit  func(*TripsConfig)
		flags []string
	}{
		{mix("write=40,read=30"), []string{"--trips-mix"}},                  // sums to 70
		{mix("write=40,read=30,query=40"), []string{"--trips-mix"}},         // 110
		{mix("write=40,read=30,query=30,write=0"), []string{"--trips-mix"}}, // twice
		{mix("walk=100"), []string{"--trips-mix"}},                          // unknown kind
		{mix("write=x,read=100"), []string{"--trips-mix"}},                  // not a number
		{mix("write=-10,read=110"), []string{"--trips-mix"}},                // out of range
		{mix("write40,read=60"), []string{"--trips-mix"}},                   // no =
		{mix(""), []string{"--trips-mix"}},                                  // nothing
		{mix("write=40,,read=30,query=30"), []string{"--trips-mix"}},        // empty part
		{func(c *TripsConfig) { c.Flights = 0 }, []string{"--trips-flights"}},
		{func(c *TripsConfig) { c.LagSample = 0 }, []string{"--trips-lag-sample"}},
		{func(c *TripsConfig) { c.LagSample, c.Flights = -3, -1 }, []string{"--trips-lag-sample", "--trips-flights"}}, // both named
	}
	for i, tt := range bad {
		f := tripsTestConfig()
		tt.edit(&f.Trips)
		err := f.validateTrips()
		if !assert.Error(t, err, "case %d (%+v): accepted", i, f.Trips) {
			continue
		}
		for _, flag := range tt.flags {
			assert.Contains(t, err.Error(), flag, "case %d: the error names %s", i, flag)
		}
	}
}

// TestBenchTripsMix checks the parsed percentages and that pick draws only kinds with a share.
func TestBenchTripsMix(t *testing.T) {
	m, err := parseTripsMix(" query=30, write=45 ,read=25")
	require.NoError(t, err)
	assert.Equal(t, tripsMix{45, 25, 30}, m)
	assert.Equal(t, "write=45,read=25,query=30", m.String())
	only, err := parseTripsMix("query=100")
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	var n [tripsKinds]int
	for range 1000 {
		n[only.pick(rng)]++
		n[m.pick(rng)]++
	}
	assert.GreaterOrEqual(t, n[tripsQuery], 1000, "picks %v: the 1000 of query=100", n)
	assert.Positive(t, n[tripsWrite], "picks %v: every kind of %v", n, m)
	assert.Positive(t, n[tripsRead], "picks %v: every kind of %v", n, m)
}

// TestBenchTripsNodeRSS reads process_resident_memory_bytes from a Prometheus handler with the
// process collector (as serve's /metrics), and fails on one without it.
func TestBenchTripsNodeRSS(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	empty := httptest.NewServer(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	defer empty.Close()
	m, err := newTripsMemSampler(targetExternal, []string{srv.URL + "/", empty.URL})
	require.NoError(t, err)
	ctx := context.Background()
	rss, err := nodeRSS(ctx, m.cl, srv.URL+"/")
	require.NoError(t, err)
	own, err := tripsProcessRSS()
	require.NoError(t, err)
	assert.Positive(t, rss, "RSS from /metrics")
	assert.Positive(t, own, "RSS from /proc")
	got, err := nodeRSS(ctx, m.cl, empty.URL)
	assert.Error(t, err, "no process collector: got %d", got)

	// The sampler records both: a reading of the first node, an error for the second.
	m.sample(ctx, true, true)
	require.Len(t, m.figs, 2)
	assert.Equal(t, 1, m.figs[0].Samples, "samples of %s", m.figs[0].Node)
	assert.Positive(t, m.figs[0].RSSStart, "RSS start of %s", m.figs[0].Node)
	assert.Zero(t, m.figs[1].Samples, "samples of %s", m.figs[1].Node)
	assert.NotEmpty(t, m.figs[1].Error, "error of %s", m.figs[1].Node)
}
