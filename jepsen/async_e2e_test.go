package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"

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
		cfg.OutDir = t.TempDir()
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
		if err != nil {
			t.Fatal(err)
		}
		promoted := 0
		for _, f := range sum.Async.Failovers {
			if f.NewMaster != "" {
				promoted++
			}
		}
		if promoted == 0 {
			t.Fatalf("unsafe %v: no failover promoted a minion: faults %v, failovers %+v (seed %d)", unsafe, sum.Faults, sum.Async.Failovers, cfg.Seed)
		}
		return sum
	}

	sum := run(true)
	if sum.Valid || sum.Lost == 0 {
		t.Fatalf("without buffered writes: got valid %v with %d acknowledged cells lost; want lost writes caught (seed %d, run kept in %s)",
			sum.Valid, sum.Lost, uint64(asyncFailoverSeed), sum.Dir)
	}
	t.Logf("without buffered writes: %d acknowledged durability cells lost, as expected", sum.Lost)

	sum = run(false)
	if !sum.Valid || sum.Lost != 0 {
		t.Fatalf("with buffered writes: got valid %v, %d lost, violations %v; want valid, 0 lost (seed %d, run kept in %s)",
			sum.Valid, sum.Lost, sum.Violations, uint64(asyncFailoverSeed), sum.Dir)
	}
	if d := sum.Async.Durability; d == nil || d.Acknowledged == 0 {
		t.Fatalf("with buffered writes: no acknowledged durability cell: %+v", d)
	}
}
