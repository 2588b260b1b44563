package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smallFlights writes the header and the first n flights of testdata/flights-100k.csv.gz to a
// plain CSV file in a temp dir and returns its path.
func smallFlights(t *testing.T, n int) string {
	t.Helper()
	in, err := os.Open("../../testdata/flights-100k.csv.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	gz, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flights.csv")
	var b strings.Builder
	sc := bufio.NewScanner(gz)
	for i := 0; i <= n && sc.Scan(); i++ {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchScaleCells runs scale-cells on the in-process SQLite target with two tiny steps, from
// a file of 600 flights (so that each step reads it more than once), and checks the rows of
// each step. It asserts no speed.
func TestBenchScaleCells(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := benchFlags{
		workloads: []string{workloadScaleCells}, clients: []int{4},
		duration: time.Second, warmup: 500 * time.Millisecond,
		batch: 10, valueSize: 100, rows: 10, shards: 8, partitions: 2, inflight: 8, asJSON: true,
		idx:   indexFlags{airportsPath: "../../testdata/airports.csv"},
		scale: scaleFlags{steps: []int{1000, 2500}, rate: 50, file: smallFlights(t, 600)},
	}
	if err := f.scale.validate(f); err != nil {
		t.Fatalf("validate: %v", err)
	}
	var repl replicatedServers
	defer repl.close()
	env, err := startTarget(ctx, "sqlite", f, &repl)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := benchTarget(ctx, "sqlite", env, f)
	env.stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		t.Logf("%+v", r)
	}
	want := []string{scaleWorkloadLoad, scaleWorkloadPut, scaleWorkloadGet, scaleWorkloadLoad, scaleWorkloadPut, scaleWorkloadGet}
	if len(rs) != len(want) {
		t.Fatalf("got %d rows, want %d (%v)", len(rs), len(want), want)
	}
	// Every put_cell due before the end of a step's warmup and duration is sent, and stores a
	// cell when it succeeds (all do: no errors), measured or not; the next load counts them.
	putsPerStep := int64(math.Ceil(f.scale.rate * (f.warmup + f.duration).Seconds()))
	var stored int64 // cells stored after the previous row
	for i, r := range rs {
		step := int64(f.scale.steps[i/3])
		if r.Workload != want[i] || r.Target != "sqlite" {
			t.Errorf("row %d: got %s %q, want sqlite %q", i, r.Target, r.Workload, want[i])
		}
		if r.Errors != 0 {
			t.Errorf("row %d %s: got %d errors (first: %s), want 0", i, r.Workload, r.Errors, r.FirstError)
		}
		if r.StoredCells != step {
			t.Errorf("row %d %s: got StoredCells %d, want %d", i, r.Workload, r.StoredCells, step)
		}
		switch r.Workload {
		case scaleWorkloadLoad:
			if r.Cells != step-stored || r.Clients != scaleLoadInflight || r.CellsPerSec <= 0 || r.Ops <= 0 {
				t.Errorf("row %d load: got %d cells, %d clients, %.0f cells/s, %d requests; want %d, %d and positive",
					i, r.Cells, r.Clients, r.CellsPerSec, r.Ops, step-stored, scaleLoadInflight)
			}
			stored = step
		default:
			if r.Ops <= 0 || r.OpsPerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 || r.Clients != 4 || r.Seconds < 1 {
				t.Errorf("row %d %s: got %d ops, %.1f ops/s, p50 %d p99 %d max %d us, %d clients, %.2fs; want positive, ordered, 4, >= 1s",
					i, r.Workload, r.Ops, r.OpsPerSec, r.P50, r.P99, r.Max, r.Clients, r.Seconds)
			}
			if r.Workload == scaleWorkloadPut {
				stored += putsPerStep
			}
		}
	}
}

// TestScaleFlagsValidate checks that bad scale-cells flags are refused, naming the flag.
func TestScaleFlagsValidate(t *testing.T) {
	ok := scaleFlags{steps: []int{10, 20}, rate: 5, file: "../../testdata/flights-100k.csv.gz"}
	f := benchFlags{workloads: []string{workloadScaleCells}, clients: []int{1}}
	if err := ok.validate(f); err != nil {
		t.Fatalf("valid flags: got %v, want nil", err)
	}
	tests := []struct {
		name    string
		edit    func(s *scaleFlags, f *benchFlags)
		wantErr string
	}{
		{"decreasing", func(s *scaleFlags, _ *benchFlags) { s.steps = []int{300, 100} }, "--scale-steps"},
		{"repeated", func(s *scaleFlags, _ *benchFlags) { s.steps = []int{100, 100} }, "--scale-steps"},
		{"zero", func(s *scaleFlags, _ *benchFlags) { s.steps = []int{0, 100} }, "--scale-steps"},
		{"none", func(s *scaleFlags, _ *benchFlags) { s.steps = nil }, "--scale-steps"},
		{"rate", func(s *scaleFlags, _ *benchFlags) { s.rate = 0 }, "--scale-rate"},
		{"file", func(s *scaleFlags, _ *benchFlags) { s.file = filepath.Join(t.TempDir(), "missing.csv") }, "--scale-file"},
		{"clients", func(_ *scaleFlags, f *benchFlags) { f.clients = []int{0} }, "--clients"},
	}
	for _, tt := range tests {
		s, ff := ok, f
		s.steps = append([]int(nil), ok.steps...)
		tt.edit(&s, &ff)
		err := s.validate(ff)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: got %v, want an error naming %s", tt.name, err, tt.wantErr)
		}
	}
	// The file and --clients are not checked when scale-cells is not selected.
	s := ok
	s.file = filepath.Join(t.TempDir(), "missing.csv")
	if err := s.validate(benchFlags{workloads: []string{"put"}}); err != nil {
		t.Errorf("missing file without scale-cells: got %v, want nil", err)
	}
}

// TestRunOpenLoopNoCoordinatedOmission runs a schedule that the operation cannot keep (one in
// flight, 10 ms apart, 20 ms each) and checks that every due request is sent and that
// latencies count from the scheduled start: the last request waits for all the ones before it.
// The bounds are lower bounds that a slow machine only makes larger.
func TestRunOpenLoopNoCoordinatedOmission(t *testing.T) {
	m := &scaleRun{workload: "test"}
	start := time.Now()
	runOpenLoop(context.Background(), m, start, 100, 1, 0, 500*time.Millisecond, func(context.Context, uint64) error {
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	if m.ops != 50 || m.errs != 0 {
		t.Fatalf("got %d ops, %d errors, want 50 and 0", m.ops, m.errs)
	}
	// Request k (due at 10k ms) returns no sooner than 20(k+1) ms: latency >= 10k + 20 ms.
	if got, want := m.hist.Max(), int64(510_000); got < want {
		t.Errorf("got max latency %dus, want at least %dus (the wait behind earlier requests)", got, want)
	}
	if got, want := m.elapsed, time.Second; got < want {
		t.Errorf("got elapsed %v, want at least %v (50 requests of 20 ms in a row)", got, want)
	}
	if m.behindMax < 400*time.Millisecond {
		t.Errorf("got behindMax %v, want at least 400ms", m.behindMax)
	}
}
