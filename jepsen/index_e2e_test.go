package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The index workload for 50 s under node kills and partitions (a kill with a partition a third
// of the time): every acknowledged cell must be in the index with its row's latest values, under
// the row's first k, once, nothing invented, and the index must catch up within the bound.
func TestIndexUnderFaults(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = runDir(t)
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.42", 47070, 47170, "SLJEPSENIDX"
	cfg.Workloads = []string{"index"}
	cfg.Duration, cfg.Quiet = 50*time.Second, 15*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{KillRandom, KillLeader, PartitionLeader}, Interval: 2 * time.Second,
		FaultDuration: 4 * time.Second, CombineProbability: 0.3}
	cfg.Seed = testSeed(t)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	require.NoError(t, err, "Run")
	require.NotZero(t, sum.Faults[KillRandom]+sum.Faults[KillLeader], "no node was killed: faults %v (seed %d)", sum.Faults, cfg.Seed)
	require.True(t, sum.Valid, "got %d violations, want none (seed %d, run kept in %s):\n%v", len(sum.Violations), cfg.Seed, sum.Dir, sum.Violations)
	var res IndexResult
	for _, v := range sum.Verdicts {
		if d, ok := v.Details.(IndexResult); ok {
			res = d
		}
	}
	require.NotZero(t, res.Acknowledged, "acknowledged cells (%+v)", res)
	require.NotZero(t, res.Entries, "index entries (%+v)", res)
	require.NotZero(t, res.KChanges, "k changes (%+v)", res)
	require.NotZero(t, res.Marked, "marked entries (%+v)", res)
	require.True(t, res.CaughtUp, "caught up (%+v)", res)
}
