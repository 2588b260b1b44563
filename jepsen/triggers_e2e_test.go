package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The triggers workload for 75 s under trigger worker kills and pauses (some pauses outlast the
// 3 s session, so the paused worker's shards move and its late commits are fenced) combined,
// every time, with a node kill: every acknowledged cell must be delivered, in added_id order per
// shard within each lease, and nothing else.
func TestTriggersUnderFaults(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = runDir(t)
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.32", 37070, 37170, "SLJEPSENTRIG"
	cfg.Workloads = []string{"triggers"}
	cfg.Duration, cfg.Quiet = 75*time.Second, 15*time.Second
	// Every fault is a node kill and a worker fault at once; about 12 faults in the 60 s of
	// faults, so each worker kind is drawn at least once but for a chance of about 1 in 2,000.
	cfg.Nemesis = NemesisConfig{Kinds: []string{KillWorker, PauseWorker, KillRandom}, Interval: time.Second,
		FaultDuration: 3 * time.Second, CombineProbability: 1}
	cfg.Seed = testSeed(t)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	require.NoError(t, err, "Run")
	for _, k := range cfg.Nemesis.Kinds {
		require.NotZero(t, sum.Faults[k], "no %s fault was injected: faults %v (seed %d)", k, sum.Faults, cfg.Seed)
	}
	require.True(t, sum.Valid, "got %d violations, want none (seed %d, run kept in %s):\n%v", len(sum.Violations), cfg.Seed, sum.Dir, sum.Violations)
	var res TriggersResult
	for _, v := range sum.Verdicts {
		if d, ok := v.Details.(TriggersResult); ok {
			res = d
		}
	}
	require.NotZero(t, res.Acknowledged, "acknowledged cells (%+v)", res)
	require.GreaterOrEqual(t, res.Delivered, res.Acknowledged, "deliveries: want every acknowledged cell delivered (%+v)", res)
	require.True(t, res.CaughtUp, "caught up (%+v)", res)
	require.Greater(t, res.Incarnations, 3, "worker incarnations: want restarted workers (%+v)", res)
}
