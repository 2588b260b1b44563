package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/storage"
)

// The cells and durability workloads for 20 s on SQLite while the split nemesis splits their
// partitions every second or two, and merges some back: the cells history must stay
// linearizable, no acknowledged cell may be lost, and the checks must cover the partitions the
// splits made (the final partition map is the catalog's, every replica of every shard
// compared). SQLite copies a split's shards into a file of their own and a merge's back; pebble,
// which copies nothing, runs the split nemesis in make jepsen-short.
func TestSplitUnderTraffic(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Store = storage.EngineSQLite
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = runDir(t)
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.72", 27470, 27570, "SLJEPSENSPLIT"
	cfg.Workloads = []string{"cells", "durability"}
	cfg.Duration, cfg.Quiet = 20*time.Second, 6*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{Split}, Interval: 1500 * time.Millisecond, FaultDuration: time.Second}
	sum := runSplits(t, cfg)
	require.Equal(t, "yes", sum.Linearizable, "cells linearizable")
	require.Equal(t, 4+sum.Faults[Split]-sum.Faults[Merge], sum.Partitions["cells"]+sum.Partitions["durability"],
		"partitions at the end: 2 per datastore, plus one per split, less one per merge (%v)", sum.Partitions)
	t.Logf("%d splits, %d merges", sum.Faults[Split], sum.Faults[Merge])
	var res DurabilityResult
	for _, v := range sum.Verdicts {
		if d, ok := v.Details.(DurabilityResult); ok {
			res = d
		}
	}
	require.NotZero(t, res.Acknowledged, "acknowledged cells (%+v)", res)
	require.Empty(t, res.Lost, "lost cells")
	require.Empty(t, res.Diverged, "diverged shards")
}

// The split nemesis in async mode: the cells and durability workloads on 2 MariaDB storage
// clusters for 24 s while partitions split in place and merge back on their master, with
// failovers of the storage clusters beside them. No acknowledged cell may be lost, the strong
// reads and every storage member must agree, and the checks must read the partitions the
// splits made (the catalog's map, each partition's shards from its storage cluster).
func TestAsyncSplitUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("a 24 s run of the harness on MariaDB storage clusters")
	}
	requireFaults(t)
	mariadbtest.RequireServerBinary(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = runDir(t)
	cfg.Mode = "async"
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.82", 57270, 57370, "SLJEPSENASPLIT"
	cfg.StorageFirstIP = "127.0.2.22"
	cfg.Workloads = []string{"cells", "durability"}
	cfg.Duration, cfg.Quiet = 24*time.Second, 8*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{Split, Failover}, Interval: 1500 * time.Millisecond, FaultDuration: 2 * time.Second}
	sum := runSplits(t, cfg)
	t.Logf("%d splits, %d merges, partitions at the end %v", sum.Faults[Split], sum.Faults[Merge], sum.Partitions)
	require.NotNil(t, sum.Async, "async summary")
	d := sum.Async.Durability
	require.NotNil(t, d, "no durability result")
	require.NotZero(t, d.Acknowledged, "acknowledged cells (%+v)", d)
	require.Zero(t, d.LostKeys, "lost cells")
	require.Empty(t, d.Diverged, "diverged shards")
	require.Equal(t, 4+sum.Faults[Split]-sum.Faults[Merge], sum.Partitions["cells"]+sum.Partitions["durability"],
		"the checks read the partitions the splits made: 2 per datastore, plus one per split, less one per merge (%v)", sum.Partitions)
}

// runSplits runs the harness with cfg (its seed, logger and output the test's) and requires that
// it found no violation and split a partition at least once. The nemesis draws its faults at
// random, and a run whose few faults all drew the other kinds (slow failovers leave room for
// two or three) runs again with the next seed, up to three runs, each of which must be valid.
func runSplits(t *testing.T, cfg Config) *Summary {
	t.Helper()
	seed := testSeed(t)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	var sum *Summary
	for run := uint64(0); run < 3; run++ {
		cfg.Seed = seed + run
		var err error
		sum, err = Run(context.Background(), cfg)
		require.NoError(t, err, "Run")
		require.True(t, sum.Valid, "got %d violations, want none (seed %d, run kept in %s):\n%v", len(sum.Violations), cfg.Seed, sum.Dir, sum.Violations)
		if sum.Faults[Split] > 0 {
			break
		}
		t.Logf("no split happened with seed %d (faults %v): again with seed %d", cfg.Seed, sum.Faults, cfg.Seed+1)
	}
	require.NotZero(t, sum.Faults[Split], "no split happened in three runs: faults %v (last seed %d, run kept in %s)", sum.Faults, cfg.Seed, sum.Dir)
	return sum
}
