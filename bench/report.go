package bench

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Result is one run's figures, as a table row or a JSON line of --json. Latencies are in
// microseconds. For the trigger workloads, Clients is the group's workers and Triggers holds
// their other figures. Client is the HTTP client of a put, put-batch or get-latest run (go or
// plain), set only when some --client value is not go, so that the default's rows read as
// before.
type Result struct {
	Target      string  `json:"target"`
	Workload    string  `json:"workload"`
	Client      string  `json:"client,omitempty"`
	Consistency string  `json:"consistency,omitempty"`
	Clients     int     `json:"clients"`
	Seconds     float64 `json:"seconds"`
	Ops         int64   `json:"ops"`
	Cells       int64   `json:"cells"`
	Errors      int64   `json:"errors"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	CellsPerSec float64 `json:"cells_per_sec"`
	P50         int64   `json:"p50_us"`
	P90         int64   `json:"p90_us"`
	P99         int64   `json:"p99_us"`
	Max         int64   `json:"max_us"`
	FirstError  string  `json:"first_error,omitempty"`
	// StoredCells is the cells the datastore held during the run (scale-cells, trips).
	StoredCells int64 `json:"stored_cells,omitempty"`
	// Rate is the requests/s asked of an open-loop run of put, put-batch or get-latest (--rate);
	// 0 for a closed-loop run. Late counts its measured requests that found every client busy
	// at their scheduled time: sent late, or never when the run ended first (see runLoad).
	Rate int   `json:"rate,omitempty"`
	Late int64 `json:"late,omitempty"`
	// VsRaftNoop and VsMySQL are a put or put-batch row's cells/s as a fraction of the matching
	// row (same workload, clients and rate) of the raft-noop target and of the mysql baseline
	// (see setBaselineRatios); 0 when there is none.
	VsRaftNoop float64 `json:"vs_raft_noop,omitempty"`
	VsMySQL    float64 `json:"vs_mysql,omitempty"`
	// VsRaftRaw is a put or put-batch row's cells/s as a fraction of the matching row of the
	// raft-raw baseline (hashicorp/raft alone); 0 when there is none.
	VsRaftRaw float64 `json:"vs_raft_raw,omitempty"`
	// CPUSeconds is the CPU time (user + system) spent during a put, put-batch or get-latest
	// run's measured phase (a split run's whole "split put" row, splits included) by this
	// process (clients and in-process nodes) and the --cpu-pid processes; 0 when not measured.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// NodeCPUSeconds is the part of CPUSeconds spent by the --cpu-pid processes (an external
	// target's nodes), without this process; 0 when none was given.
	NodeCPUSeconds float64 `json:"node_cpu_seconds,omitempty"`

	Triggers *TriggerFigures `json:"triggers,omitempty"`
	Index    *IndexFigures   `json:"index,omitempty"`
	Reaper   *ReaperFigures  `json:"reaper,omitempty"`
	Lag      *LagFigures     `json:"replication_lag,omitempty"`
}

// printTable prints rs to w as a table, then the notes of the rows that have one and their
// first errors. The columns client (Client, after target), cpu-s/10k (CPUSeconds per 10,000
// cells), node cpu (NodeCPUSeconds per 10,000 cells), vs raw, vs noop, vs mysql (see setBaselineRatios) and stored (StoredCells) appear
// only when some row has a value for them.
func printTable(w io.Writer, rs []Result) {
	var cl, cpu, nodeCPU, vsRaw, vsNoop, vsMySQL, stored bool
	for _, r := range rs {
		cl = cl || r.Client != ""
		cpu = cpu || r.CPUSeconds > 0
		nodeCPU = nodeCPU || r.NodeCPUSeconds > 0
		vsRaw = vsRaw || r.VsRaftRaw > 0
		vsNoop = vsNoop || r.VsRaftNoop > 0
		vsMySQL = vsMySQL || r.VsMySQL > 0
		stored = stored || r.StoredCells > 0
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "target\tworkload\tclients\tops/s\tcells/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\t"
	if cl {
		head = "target\tclient\t" + strings.TrimPrefix(head, "target\t")
	}
	if cpu {
		head += "cpu-s/10k\t"
	}
	if nodeCPU {
		head += "node cpu\t"
	}
	if vsRaw {
		head += "vs raw\t"
	}
	if vsNoop {
		head += "vs noop\t"
	}
	if vsMySQL {
		head += "vs mysql\t"
	}
	if stored {
		head += "stored\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rs {
		lat := fmt.Sprintf("%.2f\t%.2f\t%.2f\t%.1f", float64(r.P50)/1000, float64(r.P90)/1000, float64(r.P99)/1000, float64(r.Max)/1000)
		if r.Workload == workloadLogRead || r.Workload == workloadIndexBackfill || r.Workload == workloadReaper || r.Workload == scaleWorkloadLoad { // no latency figures
			lat = "-\t-\t-\t-"
		}
		target := r.Target
		if cl {
			target += "\t" + cmp.Or(r.Client, "-")
		}
		line := fmt.Sprintf("%s\t%s\t%d\t%.0f\t%.0f\t%s\t%d\t", target, label(r), r.Clients, r.OpsPerSec, r.CellsPerSec, lat, r.Errors)
		if cpu {
			line += cpuPer10k(r) + "\t"
		}
		if nodeCPU {
			line += per10k(r.NodeCPUSeconds, r.Cells) + "\t"
		}
		if vsRaw {
			line += percent(r.VsRaftRaw) + "\t"
		}
		if vsNoop {
			line += percent(r.VsRaftNoop) + "\t"
		}
		if vsMySQL {
			line += percent(r.VsMySQL) + "\t"
		}
		if stored {
			line += fmt.Sprintf("%d\t", r.StoredCells)
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	for _, r := range rs {
		if r.Triggers != nil {
			fmt.Fprintln(w, triggerNote(r))
		}
		if r.Index != nil {
			fmt.Fprintln(w, indexNote(r))
		}
		if r.Reaper != nil {
			fmt.Fprintln(w, reaperNote(r))
		}
		if r.Lag != nil {
			fmt.Fprintln(w, lagNote(r))
		}
		if r.Rate > 0 && isLoadWorkload(r.Workload) {
			fmt.Fprintln(w, openLoopNote(r))
		}
	}
	for _, r := range rs {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s %s clients=%d%s first error: %s\n", r.Target, label(r), r.Clients, clientTag(r), strings.TrimSpace(r.FirstError))
		}
	}
}

// label is the workload column of r: the workload and its variant, consistency and, for an
// open-loop run, its rate ("put @500/s").
func label(r Result) string {
	w := r.Workload
	if r.Index != nil && r.Index.Variant != "" {
		w += " " + r.Index.Variant
	}
	if r.Consistency != "" {
		w += " " + r.Consistency
	}
	if r.Reaper != nil && r.Reaper.Variant != "" {
		w += " " + r.Reaper.Variant
	}
	if r.Rate > 0 && isLoadWorkload(r.Workload) {
		w += fmt.Sprintf(" @%d/s", r.Rate)
	}
	return w
}

// cpuPer10k formats r's CPU seconds per 10,000 cells, "-" when not measured.
func cpuPer10k(r Result) string { return per10k(r.CPUSeconds, r.Cells) }

// per10k formats seconds per 10,000 cells, "-" when either is not positive.
func per10k(seconds float64, cells int64) string {
	if seconds <= 0 || cells <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", seconds*10000/float64(cells))
}

// percent formats a fraction as a percentage, "-" for 0.
func percent(x float64) string {
	switch {
	case x <= 0:
		return "-"
	case x < 0.1:
		return fmt.Sprintf("%.1f%%", 100*x)
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// runLine is the line printed on stderr after a run of put, put-batch or get-latest.
func runLine(r Result) string {
	s := fmt.Sprintf("%s %s clients=%d%s: %.0f ops/s, %.0f cells/s, p50 %dus, p99 %dus, %d errors", r.Target, label(r), r.Clients,
		clientTag(r), r.OpsPerSec, r.CellsPerSec, r.P50, r.P99, r.Errors)
	if r.CPUSeconds > 0 {
		s += fmt.Sprintf(", %s CPU-s per 10k cells", cpuPer10k(r))
	}
	if r.NodeCPUSeconds > 0 {
		s += fmt.Sprintf(" (%s in the --cpu-pid processes)", per10k(r.NodeCPUSeconds, r.Cells))
	}
	if r.Rate > 0 {
		s += fmt.Sprintf(", %d late", r.Late)
	}
	return s
}

// openLoopNote is the line printed under the table for an open-loop run.
func openLoopNote(r Result) string {
	return fmt.Sprintf("%s %s clients=%d%s: open loop, %d requests/s asked, %.0f done; %d late (every client busy at their scheduled time: sent late, or never when the run ended first); latency counts from the scheduled time",
		r.Target, label(r), r.Clients, clientTag(r), r.Rate, r.OpsPerSec, r.Late)
}

// clientTag is " client=<r.Client>" for the lines about r, "" when r names no client.
func clientTag(r Result) string {
	if r.Client == "" {
		return ""
	}
	return " client=" + r.Client
}
