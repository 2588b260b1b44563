package bench

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	f := Config{
		Workloads: []string{workloadPut, workloadPutBatch, workloadReaper, workloadReplicationLag},
		Clients:   []int{2}, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Batch: 10, ValueSize: 100, Rows: 10, Shards: 8, Partitions: 4, MaxInflight: 8,
		Async: AsyncConfig{ReaperCells: 60},
	}
	env := testEnv(f)
	defer env.run.repl.close(io.Discard)
	tg, err := startTarget(ctx, targetAsync, env)
	require.NoError(t, err)
	rs, err := runTarget(ctx, env, tg)
	_ = tg.Close()
	require.NoError(t, err)
	for _, r := range rs {
		t.Logf("%+v reaper %+v lag %+v", r, r.Reaper, r.Lag)
	}
	require.Len(t, rs, 5, "results: put, put-batch, reaper drain and replay, replication-lag")
	for _, r := range rs {
		name := r.Workload
		if r.Reaper != nil {
			name += " " + r.Reaper.Variant
		}
		assert.Equal(t, targetAsync, r.Target, name)
		assert.Equal(t, 2, r.Clients, name)
		for what, v := range map[string]float64{"seconds": r.Seconds, "ops": float64(r.Ops), "cells": float64(r.Cells), "ops/s": r.OpsPerSec, "cells/s": r.CellsPerSec} {
			assert.Positive(t, v, "%s: %s", name, what)
		}
		assert.Equal(t, int64(0), r.Errors, "%s: errors (first: %s)", name, r.FirstError)
		switch r.Workload {
		case workloadReaper:
			x := r.Reaper
			if !assert.NotNil(t, x, "reaper: reaper figures") {
				continue
			}
			assert.Equal(t, int64(60), x.Written, "%s: written", name)
			assert.Equal(t, 1, x.Copies, "%s: copies", name)
			assert.Positive(t, x.WriteSeconds, "%s: write seconds", name)
			assert.Positive(t, x.PutP50, "%s: put p50", name)
			assert.Positive(t, x.RowsCreatedPerSec, "%s: rows created/s", name)
			assert.Positive(t, x.Empty, "%s: empty", name)
			assert.Positive(t, x.ReportedEmpty, "%s: reported empty", name)
			assert.Zero(t, x.Unreadable, "%s: unreadable", name)
			assert.Zero(t, x.Left, "%s: left", name)
			switch x.Variant {
			case reaperReplay:
				assert.Equal(t, int64(60), x.Buffered, "%s: every write buffered", name)
				assert.Equal(t, int64(60), x.StartDepth, "%s: in the buffer at the unfence", name)
				assert.Positive(t, x.Replayed, "%s: replayed", name)
				assert.Positive(t, x.MasterSeen, "%s: master seen", name)
				assert.Positive(t, x.FirstReplay, "%s: first replay", name)
				assert.Positive(t, x.LastReplay, "%s: last replay", name)
			case reaperDrain:
				assert.Zero(t, x.Buffered, "%s: buffered", name)
			}
		case workloadReplicationLag:
			x := r.Lag
			if !assert.NotNil(t, x, "replication-lag: lag figures") {
				continue
			}
			assert.Positive(t, x.Markers, "%s: markers", name)
			assert.GreaterOrEqual(t, x.Polls, x.Markers, "%s: polls", name)
			assert.Positive(t, x.Samples, "%s: samples", name)
			assert.Zero(t, x.ProbeErrors, "%s: probe errors", name)
			assert.Positive(t, x.PutP50, "%s: put p50", name)
			assert.Positive(t, r.P50, "%s: p50", name)
			assert.GreaterOrEqual(t, r.Max, r.P50, "%s: max >= p50", name)
		default:
			assert.Positive(t, r.P50, "%s: p50", name)
			assert.GreaterOrEqual(t, r.P99, r.P50, "%s: p99 >= p50", name)
		}
	}

	// A raft target skips the async workloads.
	rs, err = asyncWorkload{workloadReaper}.Run(ctx, env, &clusterTarget{name: targetSQLite})
	assert.NoError(t, err, "reaper on sqlite")
	assert.Empty(t, rs, "reaper on sqlite: no results")
}

func TestQuantile(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tt := range []struct {
		q    float64
		want int64
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		assert.Equal(t, tt.want, quantile(xs, tt.q), "quantile(1..10, %v)", tt.q)
	}
	assert.Equal(t, int64(0), quantile(nil, 0.5), "quantile(nil, 0.5)")
}
