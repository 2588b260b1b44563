package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/wire"
)

// partitionOf returns partition pid of trips as the cluster reports it. t is the test, or the
// *assert.CollectT of an EventuallyWithT condition (which runs in a goroutine of its own).
func partitionOf(t require.TestingT, ctx context.Context, cl *client.Client, pid int) wire.PartitionReport {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	reps, err := cl.Partitions(ctx, "trips")
	require.NoError(t, err)
	i := slices.IndexFunc(reps, func(r wire.PartitionReport) bool { return r.Partition == pid })
	require.GreaterOrEqual(t, i, 0, "no partition %d in %+v", pid, reps)
	return reps[i]
}

// TestAdminIntegration drives every admin call against a 3-node cluster with 2 partitions. Not
// parallel: leadership transfers and voter changes are timed by raft's elections.
func TestAdminIntegration(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Partitions: 2})
	cl := itClient(t, append([]string{deadURL(t)}, c.URLs()...), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 20 {
		_, err := cl.PutCell(ctx, itRow(t, i), "BASE", 1, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
		require.NoError(t, err)
	}

	nodes, err := cl.Nodes(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, nodes.Self)
	var ids []string
	for _, m := range nodes.Nodes {
		ids = append(ids, m.ID)
	}
	assert.Equal(t, []string{"n1", "n2", "n3"}, ids)

	reps, err := cl.Partitions(ctx, "")
	require.NoError(t, err)
	require.Len(t, reps, 2)
	for _, p := range reps {
		assert.NotEmpty(t, p.Leader, "partition %d", p.Partition)
		assert.Len(t, p.Voters(), 3, "partition %d", p.Partition)
		assert.Len(t, p.Replicas, 3, "partition %d", p.Partition)
		assert.Equal(t, "raft", p.Mode)
	}
	_, err = cl.Partitions(ctx, "nope")
	assert.ErrorIs(t, err, client.ErrNotFound)

	// Transfer p0's leadership to a named follower, then remove another follower.
	p0 := partitionOf(t, ctx, cl, 0)
	target, other := "n2", "n3"
	if p0.Leader == "n2" {
		target, other = "n3", "n2"
	}
	cfg, err := cl.TransferLeader(ctx, "trips", 0, target, client.AdminIdempotent())
	require.NoError(t, err)
	assert.Equal(t, target, cfg.Leader)
	cfg, err = cl.RemoveVoter(ctx, "trips", 0, other)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"n1", target}, cfg.Voters())

	// A dry-run drain of n1 plans to move its p0 replica to the node just removed; nothing moves.
	rep, err := cl.Drain(ctx, "n1", true)
	require.NoError(t, err)
	assert.True(t, rep.DryRun)
	assert.Equal(t, []wire.Move{{Datastore: "trips", Partition: 0, From: "n1", To: other}}, rep.Moves)
	assert.Equal(t, 1, rep.ReplicasAfter["n1"], "n1's p1 replica has nowhere to go")
	assert.Len(t, partitionOf(t, ctx, cl, 0).Voters(), 2, "a dry run changes nothing")

	// Move n1's replica to the removed node, then add n1 back.
	cfg, err = cl.MoveReplica(ctx, "trips", 0, "n1", other)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{other, target}, cfg.Voters())
	var via string
	cfg, err = cl.AddVoter(ctx, "trips", 0, "n1", client.AdminIdempotent(), client.AdminEndpoint(&via))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"n1", "n2", "n3"}, cfg.Voters())
	assert.Contains(t, c.URLs(), via)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		p := partitionOf(ct, ctx, cl, 0)
		i := slices.IndexFunc(p.Replicas, func(r wire.ReplicaLag) bool { return r.Node == "n1" })
		if assert.GreaterOrEqual(ct, i, 0) {
			r := p.Replicas[i]
			assert.Equal(ct, wire.SuffrageVoter, r.Suffrage)
			assert.True(ct, r.Reachable, "reachable")
			assert.NotEmpty(ct, r.State)
			assert.Zero(ct, r.Lag, "lag")
		}
	}, 10*time.Second, 100*time.Millisecond, "n1 caught up as a voter of trips/0")

	rep, err = cl.Rebalance(ctx, wire.RebalanceRequest{Datastore: "trips", DryRun: true})
	require.NoError(t, err)
	assert.True(t, rep.DryRun)
	assert.Empty(t, rep.Moves, "a balanced cluster needs no move")
	assert.ElementsMatch(t, []string{"n1", "n2", "n3"}, rep.Nodes)

	// Refusals: unknown node, not a voter, bad partition.
	_, err = cl.AddVoter(ctx, "trips", 0, "n9")
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrNotFound)
	assert.Equal(t, "node", ae.Field)
	_, err = cl.TransferLeader(ctx, "trips", 0, "n9")
	assert.ErrorIs(t, err, client.ErrConflict)
	_, err = cl.AddVoter(ctx, "trips", -1, "n2")
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "partition", ae.Field)
	_, err = cl.Drain(ctx, "n9", true)
	assert.ErrorIs(t, err, client.ErrNotFound)

	got, err := cl.GetCellLatest(ctx, itRow(t, 7), "BASE")
	require.NoError(t, err)
	assert.JSONEq(t, `{"i":7}`, string(got.Body), "a cell after the moves")
}

// TestBackupRestoreIntegration backs a partition up through the client, checks the stream, and
// restores it into the same cluster: refused without Force, accepted with it. Not parallel: the
// followers' snapshot installs race raft's timeouts, which parallel load would stretch.
func TestBackupRestoreIntegration(t *testing.T) {
	// The production raft timeouts: followers install the restored snapshot without answering
	// heartbeats (see cmd/schemaless/adminbackup_test.go).
	pc := partition.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond}
	c := clustertest.Start(t, clustertest.Options{Partition: pc})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 100 {
		_, err := cl.PutCell(ctx, itRow(t, i), "BASE", 1, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
		require.NoError(t, err)
	}

	var buf bytes.Buffer
	info, err := cl.Backup(ctx, "trips", 0, &buf)
	require.NoError(t, err)
	v, err := fsm.VerifySnapshot(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err, "the stream verifies")
	sum := sha256.Sum256(buf.Bytes())
	assert.Equal(t, wire.BackupInfo{SnapshotVersion: v.Header.Version, FirstShard: 0, LastShard: 7,
		AppliedIndex: v.Header.Applied.Index, AppliedTerm: v.Header.Applied.Term, Trailers: true, Cells: v.Cells,
		KVRows: v.KVs, IndexEntries: v.IndexEntries, Bytes: int64(buf.Len()), SHA256: hex.EncodeToString(sum[:])}, info)
	assert.Positive(t, info.Cells)

	_, err = cl.Backup(ctx, "trips", 7, &bytes.Buffer{})
	assert.ErrorIs(t, err, client.ErrNotFound)

	src := bytes.NewReader(buf.Bytes())
	_, err = cl.Restore(ctx, "trips", 0, src, int64(buf.Len()), client.RestoreOptions{})
	assert.ErrorIs(t, err, client.ErrConflict, "the partition holds cells")
	res, err := cl.Restore(ctx, "trips", 0, src, int64(buf.Len()), client.RestoreOptions{Force: true})
	require.NoError(t, err)
	assert.Equal(t, info.Cells, res.Cells)
	assert.Equal(t, info.AppliedIndex, res.AppliedIndex)
	assert.Equal(t, int64(buf.Len()), res.Bytes)
	assert.Len(t, res.Shards, 8)

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for i := range 100 {
			got, err := cl.GetCellLatest(ctx, itRow(t, i), "BASE")
			if assert.NoError(ct, err) {
				assert.JSONEq(ct, fmt.Sprintf(`{"i":%d}`, i), string(got.Body))
			}
		}
	}, 30*time.Second, 200*time.Millisecond, "every cell readable after the restore")
}
