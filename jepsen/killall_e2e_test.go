package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The durability workload for 30 s while every node is killed at once (kill -9, then all
// restarted) every few seconds, on the default raft log: no acknowledged cell may be lost, and
// every replica of a shard must hold the same added_id sequence afterwards.
func TestKillAllLosesNothing(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = runDir(t)
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.62", 27270, 27370, "SLJEPSENKILL"
	cfg.Workloads = []string{"durability"}
	cfg.Duration, cfg.Quiet = 30*time.Second, 8*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{KillAll}, Interval: 3 * time.Second, FaultDuration: 2 * time.Second}
	cfg.Seed = testSeed(t)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	require.NoError(t, err, "Run")
	require.GreaterOrEqual(t, sum.Faults[KillAll], 2, "kill-all faults: %v (seed %d)", sum.Faults, cfg.Seed)
	require.True(t, sum.Valid, "got %d violations, want none (seed %d, run kept in %s):\n%v", len(sum.Violations), cfg.Seed, sum.Dir, sum.Violations)
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
