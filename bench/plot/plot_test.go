package plot

import (
	"bytes"
	"encoding/json"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/schemaless-db/schemaless/bench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"
)

// writeResults writes rs as JSON lines, as bench --json prints them, to name in dir, followed
// by extra lines, and returns the file's path.
func writeResults(t *testing.T, dir, name string, rs []bench.Result, extra ...string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range rs {
		require.NoError(t, enc.Encode(r))
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	return path
}

// plotFixture writes a clients sweep, a scale-cells run and a partitions sweep (one file per
// value, tagged -p<N>) into dir, and returns their paths.
func plotFixture(t *testing.T, dir string) (clients, scale string, partitions []string) {
	t.Helper()
	var rs []bench.Result
	for ti, target := range []string{"sqlite", "raft-noop"} {
		k := int64(1 + 2*ti) // raft-noop: 3 times the throughput, a third of the latency
		for i, n := range []int64{1, 4, 16, 64} {
			rs = append(rs,
				bench.Result{Target: target, Workload: "put", Clients: int(n), Seconds: 1, Ops: 100 * n * k, Cells: 100 * n * k,
					OpsPerSec: float64(100 * n * k), CellsPerSec: float64(100 * n * k), P50: (1000 + 500*int64(i)) / k, P99: (5000 + 2000*int64(i)) / k},
				bench.Result{Target: target, Workload: "put-batch", Clients: int(n), Seconds: 1, Ops: 10 * n * k, Cells: 1000 * n * k,
					OpsPerSec: float64(10 * n * k), CellsPerSec: float64(1000 * n * k), P50: (8000 + 1000*int64(i)) / k, P99: (20000 + 5000*int64(i)) / k})
		}
	}
	clients = writeResults(t, dir, "clients.jsonl", rs,
		"# 2024-01-01T00:00:00Z, 2 CPUs, go1.23",              // a table's header line
		`{"workload":"ghost","clients":3,"cells_per_sec":99}`, // no target
		`{"target":"sqlite","workload":`,                      // truncated
		`not json at all`)

	rs = nil
	for i, stored := range []int64{100_000, 300_000, 1_000_000, 3_000_000} {
		rs = append(rs,
			bench.Result{Target: "sqlite", Workload: "scale-cells load", Clients: 8, Seconds: 10, Cells: stored, CellsPerSec: 9000 - 1000*float64(i), StoredCells: stored},
			bench.Result{Target: "sqlite", Workload: "scale-cells put", Clients: 64, Seconds: 1, Ops: 200, OpsPerSec: 200, CellsPerSec: 200,
				P50: int64(3000 + 100*i), P99: int64(9000 + 1000*i), StoredCells: stored},
			bench.Result{Target: "sqlite", Workload: "scale-cells get", Consistency: "stale", Clients: 64, Seconds: 1, Ops: 200, OpsPerSec: 200, CellsPerSec: 200,
				P50: int64(800 + 50*i), P99: int64(4000 + 500*i), StoredCells: stored})
	}
	scale = writeResults(t, dir, "scale.jsonl", rs)

	for _, p := range []int{1, 2, 4, 8} {
		name := "partitions-p" + string(rune('0'+p)) + ".jsonl"
		partitions = append(partitions, writeResults(t, dir, name, []bench.Result{
			{Target: "sqlite", Workload: "put", Clients: 64, Seconds: 1, Ops: int64(500 * p), OpsPerSec: float64(500 * p), CellsPerSec: float64(500 * p), P50: 2000, P99: 9000},
		}))
	}
	return clients, scale, partitions
}

// TestBenchPlot draws the plots of a scale sweep from fixtures, as SVG and PNG, and checks that
// each file is a valid image of the right size with the expected series in its legend.
func TestBenchPlot(t *testing.T) {
	dir := t.TempDir()
	clients, scale, partitions := plotFixture(t, dir)
	tests := []struct {
		name       string
		cfg        Config
		wantSeries []string // legend entries (checked in the SVG)
		notSeries  []string
	}{
		{"clients", Config{In: []string{clients}, X: "clients", Y: []string{"cells_per_sec"}, LogX: true, Title: "put throughput"},
			[]string{"sqlite put", "raft-noop put", "sqlite put-batch", "raft-noop put-batch", "put throughput"}, []string{"ghost"}},
		{"clients-p99", Config{In: []string{clients}, X: "clients", Y: []string{"p99"}, LogX: true, LogY: true, Workloads: []string{"put"}},
			[]string{"sqlite put", "raft-noop put", "p99 latency (ms)"}, []string{"put-batch"}},
		{"partitions", Config{X: "partitions", Y: []string{"ops_per_sec"}, In: partitions},
			[]string{"sqlite put", "throughput (requests/s) vs partitions"}, nil},
		{"cells-latency", Config{In: []string{scale}, X: "stored_cells", Y: []string{"p50", "p99"}, LogX: true, Workloads: []string{"scale-cells put", "scale-cells get"}},
			[]string{"sqlite scale-cells put p50", "sqlite scale-cells put p99", "sqlite scale-cells get stale p50", "sqlite scale-cells get stale p99", "3M", "300k"},
			[]string{"scale-cells load"}},
		{"cells-load", Config{In: []string{scale}, X: "stored_cells", Y: []string{"cells_per_sec"}, Targets: []string{"sqlite"}, Workloads: []string{"scale-cells load"}},
			[]string{"sqlite scale-cells load", "cells stored"}, []string{"scale-cells put"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Out = filepath.Join(dir, tt.name+".svg")
			require.NoError(t, Run(cfg, io.Discard), "svg")
			svg, err := os.ReadFile(cfg.Out)
			require.NoError(t, err)
			assert.True(t, bytes.HasPrefix(svg, []byte("<?xml")) || bytes.HasPrefix(svg, []byte("<svg")), "svg starts with %q, want <?xml or <svg", svg[:min(len(svg), 20)])
			assert.Contains(t, string(svg), "</svg>")
			for _, s := range tt.wantSeries {
				assert.Contains(t, string(svg), ">"+s+"<", "svg text")
			}
			for _, s := range tt.notSeries {
				assert.NotContains(t, string(svg), s)
			}

			cfg.Out = filepath.Join(dir, tt.name+".PNG") // the extension in any case
			require.NoError(t, Run(cfg, io.Discard), "png")
			fh, err := os.Open(cfg.Out)
			require.NoError(t, err)
			defer fh.Close()
			img, err := png.Decode(fh)
			require.NoError(t, err, "decode png")
			assert.Equal(t, 1600, img.Bounds().Dx(), "png width")
			assert.Equal(t, 900, img.Bounds().Dy(), "png height")
		})
	}
}

// TestBenchPlotRefuses checks that bad settings and inputs are refused with an error naming the
// flag (or saying what is missing), and that no file is written.
func TestBenchPlotRefuses(t *testing.T) {
	dir := t.TempDir()
	clients, _, _ := plotFixture(t, dir)
	out := filepath.Join(dir, "out.svg")
	base := func(edit func(*Config)) Config {
		c := DefaultConfig()
		c.In, c.Out = []string{clients}, out
		edit(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"x", base(func(c *Config) { c.X = "threads" }), "--x \"threads\""},
		{"y", base(func(c *Config) { c.Y = []string{"p42"} }), "--y \"p42\""},
		{"units", base(func(c *Config) { c.Y = []string{"cells_per_sec", "p99"} }), "--y cells_per_sec,p99"},
		{"out ext", base(func(c *Config) { c.Out = filepath.Join(dir, "out.jpg") }), "--out"},
		{"no out", base(func(c *Config) { c.Out = "" }), "--out"},
		{"no in", base(func(c *Config) { c.In = nil }), "--in"},
		{"missing in", base(func(c *Config) { c.In = []string{filepath.Join(dir, "missing.jsonl")} }), "--in"},
		// clients.jsonl has no partitions field and no p<N> tag in its name.
		{"no x values", base(func(c *Config) { c.X = "partitions" }), "no result"},
		{"filtered out", base(func(c *Config) { c.Targets = []string{"mysql"} }), "no result"},
	}
	for _, tt := range tests {
		err := Run(tt.cfg, io.Discard)
		if assert.Error(t, err, tt.name) {
			assert.Contains(t, err.Error(), tt.wantErr, tt.name)
		}
		_, err = os.Stat(out)
		require.Error(t, err, "%s: %s was written", tt.name, out)
	}
}

// TestNameTag checks how --x partitions and rate read a file name.
func TestNameTag(t *testing.T) {
	tests := []struct {
		path   string
		letter byte
		want   float64
		wantOK bool
	}{
		{"dir/put-p16.jsonl", 'p', 16, true},
		{"sqlite_p4-r500.json", 'p', 4, true},
		{"sqlite_p4-r500.json", 'r', 500, true},
		{"a-r2.5.jsonl", 'r', 2, true}, // the stem ends at the first dot
		{"p3-x-p8.jsonl", 'p', 8, true},
		{"p7", 'p', 7, true},
		{"put.jsonl", 'p', 0, false},
		{"bench-p.jsonl", 'p', 0, false},
		{"bench-pp4.jsonl", 'p', 0, false},
		{"bench-P4.jsonl", 'p', 0, false},
		{"dir-p9/put.jsonl", 'p', 0, false}, // directories do not count
	}
	for _, tt := range tests {
		got, ok := nameTag(tt.path, tt.letter)
		assert.Equal(t, tt.want, got, "nameTag(%q, %c)", tt.path, tt.letter)
		assert.Equal(t, tt.wantOK, ok, "nameTag(%q, %c) ok", tt.path, tt.letter)
	}
}

// TestBenchPlotPoints checks the points of a plot's series: the x values from fields and
// file names, results of one x averaged, and the skipped count.
func TestBenchPlotPoints(t *testing.T) {
	rows := []plotRow{
		{Result: bench.Result{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 100}, file: "a-p2.jsonl"},
		{Result: bench.Result{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 300}, file: "b-p2.jsonl"},
		{Result: bench.Result{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 50}, file: "c.jsonl"}, // no partitions
		{Result: bench.Result{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 700}, file: "c.jsonl",
			extra: plotExtra{Partitions: ptr(8.0)}},
	}
	p := Config{In: []string{"x"}, X: "partitions", Y: []string{"cells_per_sec"}, Out: "x.svg"}
	lines, skipped, err := benchPlotLines(rows, p)
	require.NoError(t, err)
	assert.Equal(t, 1, skipped, "skipped: c.jsonl without partitions")
	want := plotter.XYs{{X: 2, Y: 200}, {X: 8, Y: 700}} // 200: the mean of 100 and 300
	require.Len(t, lines, 1, "lines: %+v", lines)
	assert.Equal(t, "sqlite put", lines[0].name)
	assert.Equal(t, want, lines[0].pts)

	// Two metrics: one line each, named after it; a latency of 0 has no point.
	rows = []plotRow{
		{Result: bench.Result{Target: "t", Workload: "w", StoredCells: 10, P50: 2000, P99: 0}},
		{Result: bench.Result{Target: "t", Workload: "w", StoredCells: 5, P50: 1000, P99: 3000}},
	}
	p = Config{In: []string{"x"}, X: "stored_cells", Y: []string{"p50", "p99"}, Out: "x.svg"}
	lines, skipped, err = benchPlotLines(rows, p)
	require.NoError(t, err)
	assert.Zero(t, skipped, "skipped")
	require.Len(t, lines, 2, "lines")
	assert.Equal(t, "t w p50", lines[0].name)
	assert.Equal(t, 0, lines[0].metric)
	assert.Equal(t, plotter.XYs{{X: 5, Y: 1}, {X: 10, Y: 2}}, lines[0].pts, "t w p50: (5, 1 ms) and (10, 2 ms)")
	assert.Equal(t, "t w p99", lines[1].name)
	assert.Equal(t, 1, lines[1].metric)
	assert.Equal(t, lines[0].group, lines[1].group, "the p50 line's group")
	assert.Equal(t, plotter.XYs{{X: 5, Y: 3}}, lines[1].pts, "t w p99: only (5, 3 ms)")
}

// TestBenchPlotClients checks that the rows of each --client value make a series of their own,
// named after it, and that rows naming no client keep the series name they had.
func TestBenchPlotClients(t *testing.T) {
	rows := []plotRow{
		{Result: bench.Result{Target: "sqlite", Workload: "put", Client: "go", Clients: 4, CellsPerSec: 100}},
		{Result: bench.Result{Target: "sqlite", Workload: "put", Client: "plain", Clients: 4, CellsPerSec: 60}},
		{Result: bench.Result{Target: "sqlite", Workload: "put", Client: "go", Clients: 8, CellsPerSec: 150}},
		{Result: bench.Result{Target: "sqlite", Workload: "put", Clients: 8, CellsPerSec: 140}},
	}
	p := Config{In: []string{"x"}, X: "clients", Y: []string{"cells_per_sec"}, Out: "x.svg"}
	lines, skipped, err := benchPlotLines(rows, p)
	require.NoError(t, err)
	assert.Zero(t, skipped, "skipped")
	require.Len(t, lines, 3, "lines: %+v", lines)
	assert.Equal(t, "sqlite put go", lines[0].name)
	assert.Equal(t, plotter.XYs{{X: 4, Y: 100}, {X: 8, Y: 150}}, lines[0].pts, "go")
	assert.Equal(t, "sqlite put plain", lines[1].name)
	assert.Equal(t, plotter.XYs{{X: 4, Y: 60}}, lines[1].pts, "plain")
	assert.Equal(t, "sqlite put", lines[2].name, "a row without a client")
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
