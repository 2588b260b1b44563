package main

import (
	"context"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

// TestBenchAsyncTarget runs every workload of the async target (and a raft target's skip of
// the async workloads) with tiny counts, and checks that each result row has its figures.
// It asserts no speed.
func TestBenchAsyncTarget(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	if testing.Short() {
		t.Skip("starts 6 MariaDB servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := benchFlags{
		workloads: []string{"put", "put-batch", workloadReaper, workloadReplicationLag},
		clients:   []int{2}, duration: time.Second, warmup: 200 * time.Millisecond,
		batch: 10, valueSize: 100, rows: 10, shards: 8, partitions: 4, inflight: 8,
		async: asyncFlags{reaperCells: 60},
	}
	var repl replicatedServers
	defer repl.close()
	env, err := startTarget(ctx, targetAsync, f, &repl)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := benchTarget(ctx, targetAsync, env, f)
	env.stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		t.Logf("%+v reaper %+v lag %+v", r, r.Reaper, r.Lag)
	}
	if got, want := len(rs), 5; got != want { // put, put-batch, reaper drain and replay, replication-lag
		t.Fatalf("got %d results, want %d", got, want)
	}
	for _, r := range rs {
		name := r.Workload
		if r.Target != targetAsync || r.Clients != 2 || r.Seconds <= 0 || r.Ops <= 0 || r.Cells <= 0 || r.OpsPerSec <= 0 || r.CellsPerSec <= 0 {
			t.Errorf("%s: target %q, clients %d, %.2fs, %d ops, %d cells, %.0f ops/s, %.0f cells/s: want async, 2 and all positive",
				name, r.Target, r.Clients, r.Seconds, r.Ops, r.Cells, r.OpsPerSec, r.CellsPerSec)
		}
		if r.Errors != 0 {
			t.Errorf("%s: got %d errors (first: %s), want 0", name, r.Errors, r.FirstError)
		}
		switch r.Workload {
		case workloadReaper:
			x := r.Reaper
			if x == nil {
				t.Errorf("reaper: no reaper figures")
				continue
			}
			name += " " + x.Variant
			if x.Written != 60 || x.Copies != 1 || x.WriteSeconds <= 0 || x.PutP50 <= 0 || x.RowsCreatedPerSec <= 0 || x.Empty <= 0 || x.ReportedEmpty <= 0 || x.Unreadable != 0 || x.Left != 0 {
				t.Errorf("%s: got %+v, want 60 written, 1 copy, positive times and rates, none unreadable or left", name, *x)
			}
			if x.Variant == reaperReplay && (x.Buffered != 60 || x.Replayed <= 0 || x.MasterSeen <= 0 || x.FirstReplay <= 0 || x.LastReplay <= 0 || x.StartDepth != 60) {
				t.Errorf("%s: got %+v, want 60 buffered and in the buffer at the unfence, some replayed, positive replay times", name, *x)
			}
			if x.Variant == reaperDrain && x.Buffered != 0 {
				t.Errorf("%s: got %d buffered, want 0", name, x.Buffered)
			}
		case workloadReplicationLag:
			x := r.Lag
			if x == nil {
				t.Errorf("replication-lag: no lag figures")
				continue
			}
			if x.Markers <= 0 || x.Polls < x.Markers || x.Samples <= 0 || x.ProbeErrors != 0 || x.PutP50 <= 0 || r.P50 <= 0 || r.Max < r.P50 {
				t.Errorf("%s: got %+v, p50 %dus, max %dus: want markers, polls, samples, no probe errors, positive latencies", name, *x, r.P50, r.Max)
			}
		default:
			if r.P50 <= 0 || r.P99 < r.P50 {
				t.Errorf("%s: p50 %dus, p99 %dus: want 0 < p50 <= p99", name, r.P50, r.P99)
			}
		}
	}

	// A raft target skips the async workloads.
	rs, err = benchAsyncWorkload(ctx, "sqlite", benchEnv{}, workloadReaper, f)
	if err != nil || len(rs) != 0 {
		t.Errorf("reaper on sqlite: got %d results, %v; want none, nil", len(rs), err)
	}
}

func TestQuantile(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tt := range []struct {
		q    float64
		want int64
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		if got := quantile(xs, tt.q); got != tt.want {
			t.Errorf("quantile(1..10, %v) = %d, want %d", tt.q, got, tt.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile(nil, 0.5) = %d, want 0", got)
	}
}
