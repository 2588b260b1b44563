package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// The triggers workload for 75 s under trigger worker kills and pauses (some pauses outlast the
// 3 s session, so the paused worker's shards move and its late commits are fenced) combined,
// every time, with a node kill: every acknowledged cell must be delivered, in added_id order per
// shard within each lease, and nothing else.
func TestTriggersUnderFaults(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = t.TempDir()
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.32", 37070, 37170, "SLJEPSENTRIG"
	cfg.Workloads = []string{"triggers"}
	cfg.Duration, cfg.Quiet = 75*time.Second, 15*time.Second
	// Every fault is a node kill and a worker fault at once; about 12 faults in the 60 s of
	// faults, so each worker kind is drawn at least once but for a chance of about 1 in 2,000.
	cfg.Nemesis = NemesisConfig{Kinds: []string{KillWorker, PauseWorker, KillRandom}, Interval: time.Second,
		FaultDuration: 3 * time.Second, CombineProbability: 1}
	cfg.Seed = uint64(time.Now().UnixNano())
	t.Logf("seed %d", cfg.Seed)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range cfg.Nemesis.Kinds {
		if sum.Faults[k] == 0 {
			t.Fatalf("no %s fault was injected: faults %v (seed %d)", k, sum.Faults, cfg.Seed)
		}
	}
	if !sum.Valid {
		t.Fatalf("got %d violations, want none (seed %d, run kept in %s):\n%v", len(sum.Violations), cfg.Seed, sum.Dir, sum.Violations)
	}
	var res TriggersResult
	for _, v := range sum.Verdicts {
		if d, ok := v.Details.(TriggersResult); ok {
			res = d
		}
	}
	if res.Acknowledged == 0 || res.Delivered < res.Acknowledged || !res.CaughtUp || res.Incarnations <= 3 {
		t.Fatalf("got %d acknowledged, %d delivered, caught up %v, %d worker incarnations; want cells acknowledged and delivered, a catch-up, restarted workers",
			res.Acknowledged, res.Delivered, res.CaughtUp, res.Incarnations)
	}
}
