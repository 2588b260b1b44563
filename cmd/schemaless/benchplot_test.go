package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// writeResults writes rs as JSON lines, as bench --json prints them, to name in dir, followed
// by extra lines, and returns the file's path.
func writeResults(t *testing.T, dir, name string, rs []benchResult, extra ...string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// plotFixture writes a clients sweep, a scale-cells run and a partitions sweep (one file per
// value, tagged -p<N>) into dir, and returns their paths.
func plotFixture(t *testing.T, dir string) (clients, scale string, partitions []string) {
	t.Helper()
	var rs []benchResult
	for ti, target := range []string{"sqlite", "raft-noop"} {
		k := int64(1 + 2*ti) // raft-noop: 3 times the throughput, a third of the latency
		for i, n := range []int64{1, 4, 16, 64} {
			rs = append(rs,
				benchResult{Target: target, Workload: "put", Clients: int(n), Seconds: 1, Ops: 100 * n * k, Cells: 100 * n * k,
					OpsPerSec: float64(100 * n * k), CellsPerSec: float64(100 * n * k), P50: (1000 + 500*int64(i)) / k, P99: (5000 + 2000*int64(i)) / k},
				benchResult{Target: target, Workload: "put-batch", Clients: int(n), Seconds: 1, Ops: 10 * n * k, Cells: 1000 * n * k,
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
			benchResult{Target: "sqlite", Workload: scaleWorkloadLoad, Clients: 8, Seconds: 10, Cells: stored, CellsPerSec: 9000 - 1000*float64(i), StoredCells: stored},
			benchResult{Target: "sqlite", Workload: scaleWorkloadPut, Clients: 64, Seconds: 1, Ops: 200, OpsPerSec: 200, CellsPerSec: 200,
				P50: int64(3000 + 100*i), P99: int64(9000 + 1000*i), StoredCells: stored},
			benchResult{Target: "sqlite", Workload: scaleWorkloadGet, Consistency: "stale", Clients: 64, Seconds: 1, Ops: 200, OpsPerSec: 200, CellsPerSec: 200,
				P50: int64(800 + 50*i), P99: int64(4000 + 500*i), StoredCells: stored})
	}
	scale = writeResults(t, dir, "scale.jsonl", rs)

	for _, p := range []int{1, 2, 4, 8} {
		name := "partitions-p" + string(rune('0'+p)) + ".jsonl"
		partitions = append(partitions, writeResults(t, dir, name, []benchResult{
			{Target: "sqlite", Workload: "put", Clients: 64, Seconds: 1, Ops: int64(500 * p), OpsPerSec: float64(500 * p), CellsPerSec: float64(500 * p), P50: 2000, P99: 9000},
		}))
	}
	return clients, scale, partitions
}

// runPlot runs `schemaless bench plot` with args.
func runPlot(args ...string) error {
	cmd := newRootCmd()
	cmd.SetArgs(append([]string{"bench", "plot"}, args...))
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	return cmd.Execute()
}

// TestBenchPlot draws the plots of a scale sweep from fixtures, as SVG and PNG, and checks that
// each file is a valid image of the right size with the expected series in its legend.
func TestBenchPlot(t *testing.T) {
	dir := t.TempDir()
	clients, scale, partitions := plotFixture(t, dir)
	tests := []struct {
		name       string
		args       []string
		wantSeries []string // legend entries (checked in the SVG)
		notSeries  []string
	}{
		{"clients", []string{"--in", clients, "--x", "clients", "--y", "cells_per_sec", "--log-x", "--title", "put throughput"},
			[]string{"sqlite put", "raft-noop put", "sqlite put-batch", "raft-noop put-batch", "put throughput"}, []string{"ghost"}},
		{"clients-p99", []string{"--in", clients, "--x", "clients", "--y", "p99", "--log-x", "--log-y", "--workload", "put"},
			[]string{"sqlite put", "raft-noop put", "p99 latency (ms)"}, []string{"put-batch"}},
		{"partitions", append([]string{"--x", "partitions", "--y", "ops_per_sec", "--in", strings.Join(partitions[:2], ",")},
			"--in", partitions[2], "--in", partitions[3]),
			[]string{"sqlite put", "throughput (requests/s) vs partitions"}, nil},
		{"cells-latency", []string{"--in", scale, "--x", "stored_cells", "--y", "p50,p99", "--log-x", "--workload", scaleWorkloadPut + "," + scaleWorkloadGet},
			[]string{"sqlite scale-cells put p50", "sqlite scale-cells put p99", "sqlite scale-cells get stale p50", "sqlite scale-cells get stale p99", "3M", "300k"},
			[]string{"scale-cells load"}},
		{"cells-load", []string{"--in", scale, "--x", "stored_cells", "--y", "cells_per_sec", "--target", "sqlite", "--workload", scaleWorkloadLoad},
			[]string{"sqlite scale-cells load", "cells stored"}, []string{"scale-cells put"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svgPath := filepath.Join(dir, tt.name+".svg")
			if err := runPlot(append(tt.args, "--out", svgPath)...); err != nil {
				t.Fatalf("svg: %v", err)
			}
			svg, err := os.ReadFile(svgPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(svg, []byte("<?xml")) && !bytes.HasPrefix(svg, []byte("<svg")) {
				t.Errorf("svg starts with %q, want <?xml or <svg", svg[:min(len(svg), 20)])
			}
			if !bytes.Contains(svg, []byte("</svg>")) {
				t.Errorf("svg has no </svg>")
			}
			for _, s := range tt.wantSeries {
				if !bytes.Contains(svg, []byte(">"+s+"<")) {
					t.Errorf("svg has no text %q", s)
				}
			}
			for _, s := range tt.notSeries {
				if bytes.Contains(svg, []byte(s)) {
					t.Errorf("svg has %q, want none", s)
				}
			}

			pngPath := filepath.Join(dir, tt.name+".PNG") // the extension in any case
			if err := runPlot(append(tt.args, "--out", pngPath)...); err != nil {
				t.Fatalf("png: %v", err)
			}
			fh, err := os.Open(pngPath)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			img, err := png.Decode(fh)
			if err != nil {
				t.Fatalf("decode png: %v", err)
			}
			if b := img.Bounds(); b.Dx() != 1600 || b.Dy() != 900 {
				t.Errorf("png is %dx%d, want 1600x900", b.Dx(), b.Dy())
			}
		})
	}
}

// TestBenchPlotRefuses checks that bad flags and inputs are refused with an error naming the
// flag (or saying what is missing), and that no file is written.
func TestBenchPlotRefuses(t *testing.T) {
	dir := t.TempDir()
	clients, _, _ := plotFixture(t, dir)
	out := filepath.Join(dir, "out.svg")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"x", []string{"--in", clients, "--x", "threads", "--out", out}, "--x \"threads\""},
		{"y", []string{"--in", clients, "--y", "p42", "--out", out}, "--y \"p42\""},
		{"units", []string{"--in", clients, "--y", "cells_per_sec,p99", "--out", out}, "--y cells_per_sec,p99"},
		{"out ext", []string{"--in", clients, "--out", filepath.Join(dir, "out.jpg")}, "--out"},
		{"no out", []string{"--in", clients}, "--out"},
		{"no in", []string{"--out", out}, "--in"},
		{"missing in", []string{"--in", filepath.Join(dir, "missing.jsonl"), "--out", out}, "--in"},
		// clients.jsonl has no partitions field and no p<N> tag in its name.
		{"no x values", []string{"--in", clients, "--x", "partitions", "--out", out}, "no result"},
		{"filtered out", []string{"--in", clients, "--target", "mysql", "--out", out}, "no result"},
	}
	for _, tt := range tests {
		err := runPlot(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: %s was written", tt.name, out)
		}
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
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("nameTag(%q, %c) = %v, %v; want %v, %v", tt.path, tt.letter, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestBenchPlotPoints checks the points of a plot's series: the x values from fields and
// file names, results of one x averaged, and the skipped count.
func TestBenchPlotPoints(t *testing.T) {
	rows := []plotRow{
		{benchResult: benchResult{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 100}, file: "a-p2.jsonl"},
		{benchResult: benchResult{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 300}, file: "b-p2.jsonl"},
		{benchResult: benchResult{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 50}, file: "c.jsonl"}, // no partitions
		{benchResult: benchResult{Target: "sqlite", Workload: "put", Clients: 4, CellsPerSec: 700}, file: "c.jsonl",
			extra: plotExtra{Partitions: ptr(8.0)}},
	}
	p := plotFlags{in: []string{"x"}, x: "partitions", y: []string{"cells_per_sec"}, out: "x.svg"}
	lines, skipped, err := benchPlotLines(rows, p)
	if err != nil {
		t.Fatal(err)
	}
	if skipped != 1 {
		t.Errorf("got %d skipped, want 1 (c.jsonl without partitions)", skipped)
	}
	want := plotter.XYs{{X: 2, Y: 200}, {X: 8, Y: 700}} // 200: the mean of 100 and 300
	if len(lines) != 1 || lines[0].name != "sqlite put" || !slices.Equal(lines[0].pts, want) {
		t.Fatalf("got lines %+v, want one, sqlite put, with %v", lines, want)
	}

	// Two metrics: one line each, named after it; a latency of 0 has no point.
	rows = []plotRow{
		{benchResult: benchResult{Target: "t", Workload: "w", StoredCells: 10, P50: 2000, P99: 0}},
		{benchResult: benchResult{Target: "t", Workload: "w", StoredCells: 5, P50: 1000, P99: 3000}},
	}
	p = plotFlags{in: []string{"x"}, x: "stored_cells", y: []string{"p50", "p99"}, out: "x.svg"}
	lines, skipped, err = benchPlotLines(rows, p)
	if err != nil {
		t.Fatal(err)
	}
	if skipped != 0 || len(lines) != 2 {
		t.Fatalf("got %d lines, %d skipped; want 2, 0", len(lines), skipped)
	}
	if l := lines[0]; l.name != "t w p50" || l.metric != 0 || !slices.Equal(l.pts, plotter.XYs{{X: 5, Y: 1}, {X: 10, Y: 2}}) {
		t.Errorf("got %+v, want t w p50, metric 0, (5, 1 ms) and (10, 2 ms)", l)
	}
	if l := lines[1]; l.name != "t w p99" || l.metric != 1 || l.group != lines[0].group || !slices.Equal(l.pts, plotter.XYs{{X: 5, Y: 3}}) {
		t.Errorf("got %+v, want t w p99, metric 1, the p50 line's group, only (5, 3 ms)", l)
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
