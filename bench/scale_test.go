package bench

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallFlights writes the header and the first n flights of testdata/flights-100k.csv.gz to a
// plain CSV file in a temp dir and returns its path.
func smallFlights(t *testing.T, n int) string {
	t.Helper()
	in, err := os.Open("../testdata/flights-100k.csv.gz")
	require.NoError(t, err)
	defer in.Close()
	gz, err := gzip.NewReader(in)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "flights.csv")
	var b strings.Builder
	sc := bufio.NewScanner(gz)
	for i := 0; i <= n && sc.Scan(); i++ {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	require.NoError(t, sc.Err())
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
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
	f := Config{
		Workloads: []string{workloadScaleCells}, Clients: []int{4},
		Duration: time.Second, Warmup: 500 * time.Millisecond,
		Batch: 10, ValueSize: 100, Rows: 10, Shards: 8, Partitions: 2, MaxInflight: 8, JSON: true,
		Index: IndexConfig{AirportsPath: "../testdata/airports.csv"},
		Scale: ScaleConfig{Steps: []int{1000, 2500}, Rate: 50, File: smallFlights(t, 600)},
	}
	require.NoError(t, f.validateScale())
	env := testEnv(f)
	defer env.run.repl.close(io.Discard)
	tg, err := startTarget(ctx, targetSQLite, env)
	require.NoError(t, err)
	rs, err := runTarget(ctx, env, tg)
	_ = tg.Close()
	require.NoError(t, err)
	for _, r := range rs {
		t.Logf("%+v", r)
	}
	want := []string{scaleWorkloadLoad, scaleWorkloadPut, scaleWorkloadGet, scaleWorkloadLoad, scaleWorkloadPut, scaleWorkloadGet}
	require.Len(t, rs, len(want), "rows: want %v", want)
	// Every put_cell due before the end of a step's warmup and duration is sent, and stores a
	// cell when it succeeds (all do: no errors), measured or not; the next load counts them.
	putsPerStep := int64(math.Ceil(f.Scale.Rate * (f.Warmup + f.Duration).Seconds()))
	var stored int64 // cells stored after the previous row
	for i, r := range rs {
		step := int64(f.Scale.Steps[i/3])
		assert.Equal(t, want[i], r.Workload, "row %d", i)
		assert.Equal(t, targetSQLite, r.Target, "row %d", i)
		assert.Equal(t, int64(0), r.Errors, "row %d %s: errors (first: %s)", i, r.Workload, r.FirstError)
		assert.Equal(t, step, r.StoredCells, "row %d %s: StoredCells", i, r.Workload)
		switch r.Workload {
		case scaleWorkloadLoad:
			assert.Equal(t, step-stored, r.Cells, "row %d load: cells", i)
			assert.Equal(t, scaleLoadInflight, r.Clients, "row %d load: clients", i)
			assert.Positive(t, r.CellsPerSec, "row %d load: cells/s", i)
			assert.Positive(t, r.Ops, "row %d load: requests", i)
			stored = step
		default:
			assert.Positive(t, r.Ops, "row %d %s: ops", i, r.Workload)
			assert.Positive(t, r.OpsPerSec, "row %d %s: ops/s", i, r.Workload)
			assert.Positive(t, r.P50, "row %d %s: p50", i, r.Workload)
			assert.GreaterOrEqual(t, r.P99, r.P50, "row %d %s: p99 >= p50", i, r.Workload)
			assert.GreaterOrEqual(t, r.Max, r.P99, "row %d %s: max >= p99", i, r.Workload)
			assert.Equal(t, 4, r.Clients, "row %d %s: clients", i, r.Workload)
			assert.GreaterOrEqual(t, r.Seconds, 1.0, "row %d %s: seconds", i, r.Workload)
			if r.Workload == scaleWorkloadPut {
				stored += putsPerStep
			}
		}
	}
}

// TestScaleConfigValidate checks that bad scale-cells settings are refused, naming the flag.
func TestScaleConfigValidate(t *testing.T) {
	ok := Config{Workloads: []string{workloadScaleCells}, Clients: []int{1},
		Scale: ScaleConfig{Steps: []int{10, 20}, Rate: 5, File: "../testdata/flights-100k.csv.gz"}}
	require.NoError(t, ok.validateScale(), "valid settings")
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr string
	}{
		{"decreasing", func(c *Config) { c.Scale.Steps = []int{300, 100} }, "--scale-steps"},
		{"repeated", func(c *Config) { c.Scale.Steps = []int{100, 100} }, "--scale-steps"},
		{"zero", func(c *Config) { c.Scale.Steps = []int{0, 100} }, "--scale-steps"},
		{"none", func(c *Config) { c.Scale.Steps = nil }, "--scale-steps"},
		{"rate", func(c *Config) { c.Scale.Rate = 0 }, "--scale-rate"},
		{"file", func(c *Config) { c.Scale.File = filepath.Join(t.TempDir(), "missing.csv") }, "--scale-file"},
		{"clients", func(c *Config) { c.Clients = []int{0} }, "--clients"},
	}
	for _, tt := range tests {
		c := ok
		c.Scale.Steps = append([]int(nil), ok.Scale.Steps...)
		tt.edit(&c)
		err := c.validateScale()
		if assert.Error(t, err, tt.name) {
			assert.Contains(t, err.Error(), tt.wantErr, "%s: the error names the flag", tt.name)
		}
	}
	// The file and --clients are not checked when scale-cells is not selected.
	c := ok
	c.Workloads = []string{workloadPut}
	c.Scale.File = filepath.Join(t.TempDir(), "missing.csv")
	assert.NoError(t, c.validateScale(), "missing file without scale-cells")
}

// TestRunOpenLoopNoCoordinatedOmission runs a schedule that the operation cannot keep (one in
// flight, 10 ms apart, 20 ms each), on synctest's fake clock, and checks that every due request
// is sent and that latencies count from the scheduled start: request k (due at 10k ms) is sent
// when request k-1 returns, at 20k ms, and returns at 20(k+1) ms.
func TestRunOpenLoopNoCoordinatedOmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scaleRun{workload: "test"}
		start := time.Now()
		runOpenLoop(context.Background(), m, start, 100, 1, 0, 500*time.Millisecond, func(context.Context, uint64) error {
			time.Sleep(20 * time.Millisecond)
			return nil
		})
		assert.Equal(t, int64(50), m.ops, "ops: every request due in 0.5 s")
		assert.Equal(t, int64(0), m.errs)
		// Request 49: due at 490 ms, returns at 1000 ms (3 digits of HDR).
		assert.InEpsilon(t, 510_000, m.hist.Max(), 1e-3, "max latency in µs: the wait behind earlier requests")
		assert.Equal(t, time.Second, m.elapsed, "elapsed: 50 requests of 20 ms in a row")
		assert.Equal(t, 490*time.Millisecond, m.behindMax, "behindMax: request 49 sent at 980 ms")
	})
}
