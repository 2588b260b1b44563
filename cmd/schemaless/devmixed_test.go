package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/topology"
)

// TestDevMixedTopology: `dev --mode mixed` writes a topology with trips in raft mode,
// replicated on every node, beside rides in async mode on the 2 storage clusters of the
// MariaDB servers dev starts (partition i on c(i mod 2)), and the other modes keep theirs.
func TestDevMixedTopology(t *testing.T) {
	t.Parallel()
	f := devFlags{nodes: 3, host: "127.0.0.1", httpPort: 7070, raftPort: 7170, shards: 64, partitions: 4, mariadbPort: 7400}

	f.mode = devModeMixed
	top := f.topology()
	require.NoError(t, top.Normalize(), "the mixed topology")
	require.Len(t, top.Datastores, 2, "datastores of --mode mixed")
	trips, rides := top.Datastores[0], top.Datastores[1]
	assert.Equal(t, "trips", trips.Name)
	assert.Equal(t, topology.ModeRaft, trips.Mode, "trips' mode")
	assert.Empty(t, trips.StorageClusters, "trips' storage clusters")
	for _, p := range trips.Partitions {
		assert.Equal(t, []string{"n1", "n2", "n3"}, p.Replicas, "replicas of trips/%d", p.ID)
	}
	assert.Equal(t, devMixedAsync, rides.Name)
	assert.Equal(t, topology.ModeAsync, rides.Mode, "rides' mode")
	assert.Equal(t, 64, rides.Shards, "rides' shards")
	require.Len(t, rides.Partitions, 4, "rides' partitions")
	for _, p := range rides.Partitions {
		assert.Empty(t, p.Replicas, "replicas of rides/%d: every node serves it", p.ID)
		assert.Equal(t, []string{"c0", "c1"}[p.ID%2], p.Cluster, "storage cluster of rides/%d", p.ID)
	}
	require.Len(t, rides.StorageClusters, 2, "rides' storage clusters")
	assert.Equal(t, topology.StorageClusterSpec{Name: "c0", Master: "schemaless@tcp(127.0.0.1:7400)/",
		Minions: []string{"schemaless@tcp(127.0.0.1:7401)/", "schemaless@tcp(127.0.0.1:7402)/"}}, rides.StorageClusters[0])
	assert.Equal(t, "schemaless@tcp(127.0.0.1:7403)/", rides.StorageClusters[1].Master, "c1's master")
	assert.Equal(t, 1, rides.BufferClusters, "rides' buffer clusters")

	f.mode = topology.ModeAsync
	top = f.topology()
	require.Len(t, top.Datastores, 1, "datastores of --mode async")
	assert.Equal(t, "trips", top.Datastores[0].Name)
	assert.Equal(t, topology.ModeAsync, top.Datastores[0].Mode, "trips' mode in --mode async")

	f.mode = topology.ModeRaft
	top = f.topology()
	require.Len(t, top.Datastores, 1, "datastores of --mode raft")
	assert.Equal(t, topology.ModeRaft, top.Datastores[0].Mode, "trips' mode in --mode raft")
}

// TestDevModeErrors: dev refuses an unknown mode and --mysql in --mode async, and takes
// --mysql in --mode mixed (trips' cells), before it starts anything.
func TestDevModeErrors(t *testing.T) {
	t.Parallel()
	f := devFlags{nodes: 3, mariadbPort: 0, mode: "both"}
	assert.EqualError(t, runDev(context.Background(), f), `--mode "both": want raft, async or mixed`)
	f.mode, f.mysqlDSN = topology.ModeAsync, "root@tcp(127.0.0.1:3306)/"
	assert.ErrorContains(t, runDev(context.Background(), f), "--mysql is for --mode raft")
	f.mode = devModeMixed
	assert.ErrorContains(t, runDev(context.Background(), f), "--mariadb-port 0: want 1..",
		"--mode mixed with --mysql: want it past the --mysql check, refused on its port")
}
