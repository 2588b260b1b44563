package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

// asyncFailoverSeed fixes the schedule of TestAsyncFailoverLosesWritesOnlyWithoutBuffers: both
// runs draw the same faults.
const asyncFailoverSeed = 5

// The lossy failover, twice with the same seed: a master cut from its minions while it goes on
// acknowledging writes, killed while cut off, a minion promoted. Without buffered writes the
// harness must report acknowledged writes lost; with them (the default), a valid run with none
// lost.
func TestAsyncFailoverLosesWritesOnlyWithoutBuffers(t *testing.T) {
	if testing.Short() {
		t.Skip("two 26 s runs of the harness")
	}
	requireFaults(t)
	mariadbtest.RequireServerBinary(t)
	t.Logf("seed %d", asyncFailoverSeed)
	run := func(unsafe bool) *Summary {
		cfg := DefaultConfig()
		cfg.Binary = schemalessBinary(t)
		cfg.OutDir = runDir(t)
		cfg.Mode = "async"
		cfg.UnsafeNoBufferedWrites = unsafe
		cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.52", 57070, 57170, "SLJEPSENASYNC"
		cfg.StorageFirstIP = "127.0.2.2"
		cfg.Workloads = []string{"cells", "durability"}
		cfg.Duration, cfg.Quiet = 26*time.Second, 8*time.Second
		cfg.Nemesis = NemesisConfig{Kinds: []string{PartitionFailover}, Interval: 2 * time.Second, FaultDuration: 6 * time.Second}
		cfg.Seed = asyncFailoverSeed
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
		cfg.Out = testWriter{t}
		sum, err := Run(context.Background(), cfg)
		require.NoError(t, err, "Run (unsafe %v)", unsafe)
		promoted := 0
		for _, f := range sum.Async.Failovers {
			if f.NewMaster != "" {
				promoted++
			}
		}
		require.NotZero(t, promoted, "unsafe %v: no failover promoted a minion: faults %v, failovers %+v (seed %d)", unsafe, sum.Faults, sum.Async.Failovers, cfg.Seed)
		return sum
	}

	sum := run(true)
	require.False(t, sum.Valid, "without buffered writes: want lost writes caught (seed %d, run kept in %s)", uint64(asyncFailoverSeed), sum.Dir)
	require.NotZero(t, sum.Lost, "without buffered writes: acknowledged cells lost; want lost writes caught (seed %d, run kept in %s)",
		uint64(asyncFailoverSeed), sum.Dir)
	t.Logf("without buffered writes: %d acknowledged durability cells lost, as expected", sum.Lost)

	sum = run(false)
	require.True(t, sum.Valid, "with buffered writes: violations %v (seed %d, run kept in %s)", sum.Violations, uint64(asyncFailoverSeed), sum.Dir)
	require.Zero(t, sum.Lost, "with buffered writes: acknowledged cells lost (seed %d, run kept in %s)", uint64(asyncFailoverSeed), sum.Dir)
	d := sum.Async.Durability
	require.NotNil(t, d, "with buffered writes: no durability result")
	require.NotZero(t, d.Acknowledged, "with buffered writes: no acknowledged durability cell: %+v", d)
}
