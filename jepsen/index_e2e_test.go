package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// The index workload for 50 s under node kills and partitions (a kill with a partition a third
// of the time): every acknowledged cell must be in the index with its row's latest values, under
// the row's first k, once, nothing invented, and the index must catch up within the bound.
func TestIndexUnderFaults(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = t.TempDir()
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.42", 47070, 47170, "SLJEPSENIDX"
	cfg.Workloads = []string{"index"}
	cfg.Duration, cfg.Quiet = 50*time.Second, 15*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{KillRandom, KillLeader, PartitionLeader}, Interval: 2 * time.Second,
		FaultDuration: 4 * time.Second, CombineProbability: 0.3}
	cfg.Seed = uint64(time.Now().UnixNano())
	t.Logf("seed %d", cfg.Seed)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Faults[KillRandom]+sum.Faults[KillLeader] == 0 {
		t.Fatalf("no node was killed: faults %v (seed %d)", sum.Faults, cfg.Seed)
	}
	if !sum.Valid {
		t.Fatalf("got %d violations, want none (seed %d, run kept in %s):\n%v", len(sum.Violations), cfg.Seed, sum.Dir, sum.Violations)
	}
	var res IndexResult
	for _, v := range sum.Verdicts {
		if d, ok := v.Details.(IndexResult); ok {
			res = d
		}
	}
	if res.Acknowledged == 0 || res.Entries == 0 || res.KChanges == 0 || res.Marked == 0 || !res.CaughtUp {
		t.Fatalf("got %d acknowledged cells, %d entries, %d k changes, %d marked, caught up %v; want cells, entries, k changes, marks and a catch-up",
			res.Acknowledged, res.Entries, res.KChanges, res.Marked, res.CaughtUp)
	}
}
