package partition

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWALLogStore runs a group on hashicorp/raft-wal (see exerciseLogStore), and then checks
// the refusal to open the replica's directory with another format.
func TestWALLogStore(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, func(c *Config) {
		c.LogStore = LogStoreWAL
		c.TrailingLogs = 10
		c.SnapshotThreshold = 1 << 40
	})
	for _, r := range g.replicas {
		require.DirExists(t, filepath.Join(r.dir, "raft", "wal"), "replica %s has no wal directory", r.id)
		_, err := os.Stat(filepath.Join(r.dir, "raft", "raft.db"))
		require.ErrorIs(t, err, os.ErrNotExist, "replica %s has a bolt raft.db beside its wal", r.id)
	}
	exerciseLogStore(t, g)

	// The other format on the same directory is refused, not opened empty.
	dir := filepath.Join(g.replicas[0].dir, "raft")
	g.stop(0)
	_, _, _, err := openLogStore(dir, LogStoreBolt, nil, "")
	require.ErrorIs(t, err, ErrLogStoreMismatch, "opening a wal replica as bolt")
	other := t.TempDir()
	_, _, closeB, err := openLogStore(other, LogStoreBolt, nil, "")
	require.NoError(t, err, "open a bolt log store")
	require.NoError(t, closeB(), "close the bolt log store")
	_, _, _, err = openLogStore(other, LogStoreWAL, nil, "")
	require.ErrorIs(t, err, ErrLogStoreMismatch, "opening a bolt replica as wal")
	assert.True(t, HasLog(dir), "HasLog of a wal replica directory")
	assert.True(t, HasLog(other), "HasLog of a bolt replica directory")
	assert.False(t, HasLog(t.TempDir()), "HasLog of an empty directory")
}

// exerciseLogStore drives a group through what its raft logs must survive: writes, a follower
// that misses more than the leader keeps (so head truncation and a snapshot install), and a
// restart of the whole group, after which every cell is there and a retried write answers
// exists.
func exerciseLogStore(t *testing.T, g *group) {
	ctx := context.Background()
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
	require.NoError(t, err, "FirstIndex of the leader's log")
	require.GreaterOrEqual(t, first, uint64(100), "first index of the leader's log after the snapshot: want it truncated past the follower")
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
}

// The default log store, auto, opens the format a replica directory holds (a bolt replica of
// an older version keeps its log) and creates an AutoLogStoreForNewReplica (wal) log in a new one.
func TestAutoLogStore(t *testing.T) {
	t.Parallel()
	require.Equal(t, LogStoreAuto, DefaultConfig().LogStore, "default log store")
	for _, kind := range []string{LogStoreBolt, LogStoreWAL, ""} {
		dir := t.TempDir()
		if kind != "" {
			logs, _, closeLog, err := openLogStore(dir, kind, nil, "")
			require.NoError(t, err, "create a %s log", kind)
			require.NoError(t, logs.StoreLog(&raft.Log{Index: 1, Term: 3, Data: []byte(kind)}), "store an entry in the %s log", kind)
			require.NoError(t, closeLog(), "close the %s log", kind)
		}
		logs, _, closeLog, err := openLogStore(dir, LogStoreAuto, nil, "")
		require.NoError(t, err, "open a directory holding %q with auto", kind)
		var got raft.Log
		if kind != "" {
			require.NoError(t, logs.GetLog(1, &got), "auto on a %s log: read its entry", kind)
			assert.Equal(t, []byte(kind), got.Data, "auto on a %s log: entry", kind)
		}
		require.NoError(t, closeLog(), "close")
		_, boltErr := os.Stat(filepath.Join(dir, "raft.db"))
		_, walErr := os.Stat(filepath.Join(dir, "wal"))
		want := map[string]string{LogStoreBolt: "bolt", LogStoreWAL: "wal", "": AutoLogStoreForNewReplica}[kind]
		assert.Equal(t, want == "bolt", boltErr == nil, "directory holding %q: raft.db present after auto", kind)
		assert.Equal(t, want == "wal", walErr == nil, "directory holding %q: wal/ present after auto", kind)
	}
}

// A wal log whose suffix raft truncated (a follower's log conflicting with a new leader's)
// opens again after a restart with every entry readable: raft-wal v0.4.0 sealed the tail
// segment without its index and then failed every read of it ("sealed segment has no index
// block", hashicorp/raft-wal issue 31), so the replica could not start (third_party/raft-wal).
func TestWALTailTruncationReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs, _, closeLog, err := OpenLogStore(dir, LogStoreWAL, nil, "")
	require.NoError(t, err, "open a wal log")
	for i := uint64(1); i <= 10; i++ {
		require.NoError(t, logs.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte{byte(i)}}), "store entry %d", i)
	}
	require.NoError(t, logs.DeleteRange(8, 10), "truncate the suffix 8..10")
	require.NoError(t, logs.StoreLog(&raft.Log{Index: 8, Term: 2, Data: []byte{80}}), "store the new entry 8")
	require.NoError(t, closeLog(), "close")
	logs, _, closeLog, err = OpenLogStore(dir, LogStoreWAL, nil, "")
	require.NoError(t, err, "reopen")
	defer func() { assert.NoError(t, closeLog(), "close after reopen") }()
	last, err := logs.LastIndex()
	require.NoError(t, err, "LastIndex after reopen")
	assert.Equal(t, uint64(8), last, "last index after reopen")
	for i := uint64(1); i <= 8; i++ {
		var l raft.Log
		require.NoError(t, logs.GetLog(i, &l), "entry %d after reopen", i)
		want := []byte{byte(i)}
		if i == 8 {
			want = []byte{80}
		}
		assert.Equal(t, want, l.Data, "entry %d after reopen", i)
	}
}

// TestNodeLogStore runs a group whose replicas keep their logs in their node's shared log store
// (each replica its own node, so its own raftlog.Store), then reopened by the default auto (see
// exerciseLogStore); then checks the refusals (another format, no node store, a
// marker naming another group) and that a new replica of the same partition on the node (its
// directory deleted, as Unhost does) starts with an empty log, not with what the earlier one
// left in the store.
func TestNodeLogStore(t *testing.T) {
	t.Parallel()
	stores := map[string]*raftlog.Store{}
	for _, id := range []string{"r1", "r2", "r3"} {
		s, err := raftlog.Open(t.TempDir(), raftlog.Options{})
		require.NoError(t, err, "open the node log of %s", id)
		t.Cleanup(func() { assert.NoError(t, s.Close(), "close the node log of %s", id) })
		stores[id] = s
	}
	g := newGroup(t, 3, func(c *Config) {
		c.NodeLog = stores[c.NodeID]
		c.LogStore = LogStoreNode
		if InNodeLog(c.Dir) {
			c.LogStore = LogStoreAuto // a restart with the default finds the log in the node's store
		}
		c.TrailingLogs = 10
		c.SnapshotThreshold = 1 << 40
	})
	for _, r := range g.replicas {
		require.FileExists(t, filepath.Join(r.dir, "raft", nodeLogMarker), "replica %s has no node log marker", r.id)
		require.NoDirExists(t, filepath.Join(r.dir, "raft", "wal"), "replica %s has a wal beside its node log", r.id)
	}
	exerciseLogStore(t, g)

	r := g.replicas[0]
	dir := filepath.Join(r.dir, "raft")
	g.stop(0)
	name := LogName(storage.PartitionID{Datastore: "trips", Partition: 0})
	_, _, _, err := openLogStore(dir, LogStoreWAL, nil, "")
	require.ErrorIs(t, err, ErrLogStoreMismatch, "opening a node-log replica as wal")
	_, _, _, err = openLogStore(dir, LogStoreAuto, nil, name)
	require.ErrorIs(t, err, ErrLogStoreMismatch, "opening a node-log replica without the node's store")
	assert.True(t, InNodeLog(dir), "InNodeLog of a node-log replica directory")
	_, _, _, err = openLogStore(dir, LogStoreNode, stores[r.id], "trips/7")
	require.ErrorIs(t, err, ErrLogStoreMismatch, "opening a node-log replica under another group name")
	assert.True(t, HasLog(dir), "HasLog of a node-log replica directory")
	has, err := stores[r.id].HasState(name)
	require.NoError(t, err)
	require.True(t, has, "the stopped replica's log is in its node's store")

	require.NoError(t, os.RemoveAll(dir), "delete the replica directory")
	logs, _, closeLog, err := openLogStore(dir, LogStoreNode, stores[r.id], name)
	require.NoError(t, err, "open a new replica of the partition")
	last, err := logs.LastIndex()
	require.NoError(t, err)
	assert.Zero(t, last, "a new replica's log does not start with an earlier replica's entries")
	require.NoError(t, closeLog())
	require.NoError(t, DropLog(stores[r.id], storage.PartitionID{Datastore: "trips", Partition: 0}))
	has, err = stores[r.id].HasState(name)
	require.NoError(t, err)
	assert.False(t, has, "DropLog leaves nothing of the group")
}
