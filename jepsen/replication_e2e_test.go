package jepsen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The replication workload for 60 s: two 3-node clusters written on both sides while a node of
// east is killed or cut off, a node of west is killed (kill-worker: west's nodes are the
// workload's processes), and the links between the clusters are cut (the workload's own
// fault, for a quarter of the 45 s of faults). Every acknowledged cell must reach the other
// cluster, in its origin's order per shard, and the two must end identical.
// CheckReplication's own test shows each violation caught.
func TestReplicationUnderFaults(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = runDir(t)
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.92", 27870, 27970, "SLJEPSENREPL"
	cfg.Workloads = []string{"replication"}
	cfg.Duration, cfg.Quiet = 60*time.Second, 15*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{KillRandom, PartitionOne, KillWorker}, Interval: 2 * time.Second,
		FaultDuration: 3 * time.Second, CombineProbability: 0.3}
	cfg.Seed = testSeed(t)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	require.NoError(t, err, "Run")
	require.NotZero(t, sum.Faults[KillWorker], "a node of west killed: faults %v (seed %d)", sum.Faults, cfg.Seed)
	require.True(t, sum.Valid, "got %d violations, want none (seed %d, run kept in %s):\n%v", len(sum.Violations), cfg.Seed, sum.Dir, sum.Violations)
	var res ReplicationResult
	for _, v := range sum.Verdicts {
		if d, ok := v.Details.(ReplicationResult); ok {
			res = d
		}
	}
	assert.NotEmpty(t, res.Cuts, "the links between the clusters cut (seed %d)", cfg.Seed)
	for _, c := range []string{LocalClusterName, PeerClusterName} {
		assert.Greater(t, res.Acknowledged[c], 500, "cells acknowledged by %s (%+v)", c, res.Acknowledged)
	}
	assert.Equal(t, res.Cells[LocalClusterName], res.Cells[PeerClusterName], "both clusters hold the same cells")
}
