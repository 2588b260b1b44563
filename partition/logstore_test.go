package partition

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWALLogStore runs a group on hashicorp/raft-wal: writes, a follower that misses more than
// the leader keeps (so raft-wal's head truncation and a snapshot install), a restart of the
// whole group, and then the refusal to open the replica's directory with the other format.
func TestWALLogStore(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, func(c *Config) {
		c.LogStore = LogStoreWAL
		c.TrailingLogs = 10
		c.SnapshotThreshold = 1 << 40
	})
	ctx := context.Background()
	for _, r := range g.replicas {
		require.DirExists(t, filepath.Join(r.dir, "raft", "wal"), "replica %s has no wal directory", r.id)
		_, err := os.Stat(filepath.Join(r.dir, "raft", "raft.db"))
		require.ErrorIs(t, err, os.ErrNotExist, "replica %s has a bolt raft.db beside its wal", r.id)
	}
	_, err := g.put(ctx, testCell(t, -1))
	require.NoError(t, err, "put of row -1")
	g.converge()
	l := g.leader()
	follower := (indexOf(g, l) + 1) % len(g.replicas)
	g.stop(follower)
	for i := 0; i < 200; i++ {
		_, err := g.put(ctx, testCell(t, i))
		require.NoError(t, err, "put of row %d", i)
	}
	l = g.leader()
	require.NoError(t, l.p.Raft().Snapshot().Error(), "snapshot on the leader")
	first, err := l.p.logs.FirstIndex()
	require.NoError(t, err, "FirstIndex of the leader's wal")
	require.GreaterOrEqual(t, first, uint64(100), "first index of the leader's wal after the snapshot: want it truncated past the follower")
	g.start(follower)
	require.Len(t, g.sameReplicas(), 201, "cells on the replicas")
	for i := range g.replicas {
		g.stop(i)
	}
	for i := range g.replicas {
		g.start(i)
	}
	res, err := g.put(ctx, testCell(t, 1), testCell(t, 1000))
	require.NoError(t, err, "put after the restart")
	require.Len(t, res, 2, "one result per cell")
	require.True(t, res[0].Status == cells.StatusExists && res[1].Status == cells.StatusCreated, "after restart: %+v, want exists then created", res)
	require.Len(t, g.sameReplicas(), 202, "cells on the replicas after the restart")

	// The other format on the same directory is refused, not opened empty.
	dir := filepath.Join(g.replicas[0].dir, "raft")
	g.stop(0)
	_, _, _, err = openLogStore(dir, LogStoreBolt)
	require.ErrorIs(t, err, ErrLogStoreMismatch, "opening a wal replica as bolt")
	other := t.TempDir()
	_, _, closeB, err := openLogStore(other, LogStoreBolt)
	require.NoError(t, err, "open a bolt log store")
	require.NoError(t, closeB(), "close the bolt log store")
	_, _, _, err = openLogStore(other, LogStoreWAL)
	require.ErrorIs(t, err, ErrLogStoreMismatch, "opening a bolt replica as wal")
	assert.True(t, HasLog(dir), "HasLog of a wal replica directory")
	assert.True(t, HasLog(other), "HasLog of a bolt replica directory")
	assert.False(t, HasLog(t.TempDir()), "HasLog of an empty directory")
}
