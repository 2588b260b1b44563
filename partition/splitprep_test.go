package partition

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/storage"
)

// PrepareSplitReplica writes the base WriteSplitBase would (a snapshot at the split's index in
// term 1 naming the voters, holding only the right half's range and applied state) and the
// base's entry in the replica's raft log, and leaves a directory that holds a log alone.
// SplitPrepared lets the replica open from it only when its store holds the split's copy at
// that base; else it reports the preparation stale (shown failing by a store without the
// copy, and by one holding the copy of another split).
func TestPrepareSplitReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	voters := []command.Voter{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}, {ID: "n3", Addr: "127.0.0.1:3"}}
	right := cells.ShardRange{First: 32, Last: 63}
	base := SplitBase{Index: 40, Shards: right, Voters: voters}
	dir := filepath.Join(t.TempDir(), "trips-p1")
	require.NoError(t, PrepareSplitReplica(dir, LogStoreWAL, nil, "trips/1", base, logger))
	require.True(t, HasLog(dir), "the base's entry is in a raft log")

	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogslog.New(logger, "raft"))
	require.NoError(t, err)
	metas, err := snaps.List()
	require.NoError(t, err)
	require.Len(t, metas, 1, "one base snapshot")
	assert.Equal(t, uint64(40), metas[0].Index)
	assert.Equal(t, uint64(1), metas[0].Term)
	assert.Equal(t, uint64(40), metas[0].ConfigurationIndex)
	require.Len(t, metas[0].Configuration.Servers, 3)
	for i, s := range metas[0].Configuration.Servers {
		assert.Equal(t, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(voters[i].ID), Address: raft.ServerAddress(voters[i].Addr)}, s)
	}
	_, rc, err := snaps.Open(metas[0].ID)
	require.NoError(t, err)
	hdr, err := fsm.ReadSnapshotHeader(rc)
	require.NoError(t, rc.Close())
	assert.ErrorIs(t, err, fsm.ErrSplitBase, "the base holds no data")
	assert.Equal(t, storage.AppliedState{Index: 40, Term: 1}, hdr.Applied)
	assert.Equal(t, right, cells.ShardRange{First: hdr.FirstShard, Last: hdr.LastShard})

	logs, _, closeLog, err := openLogStore(dir, LogStoreWAL, nil, "trips/1")
	require.NoError(t, err)
	last, err := logs.LastIndex()
	require.NoError(t, err)
	var entry raft.Log
	require.NoError(t, logs.GetLog(40, &entry))
	require.NoError(t, closeLog())
	assert.Equal(t, uint64(40), last, "the log ends at the base's entry")
	assert.Equal(t, raft.Log{Index: 40, Term: 1, Type: raft.LogNoop}, raft.Log{Index: entry.Index, Term: entry.Term, Type: entry.Type})

	// Again (the split applied again after a crash): the directory holds a log, nothing is
	// written.
	require.NoError(t, PrepareSplitReplica(dir, LogStoreWAL, nil, "trips/1", SplitBase{Index: 99, Shards: right, Voters: voters}, logger))
	metas, err = snaps.List()
	require.NoError(t, err)
	require.Len(t, metas, 1)
	assert.Equal(t, uint64(40), metas[0].Index, "a prepared directory is not prepared again")

	st, err := storage.OpenSQLite(ctx, storage.SQLiteConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ps, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 1}, right)
	require.NoError(t, err)
	marker := filepath.Join(dir, preparedMarker)

	stale, err := SplitPrepared(ctx, dir, ps)
	require.NoError(t, err)
	assert.True(t, stale, "a store without the split's copy makes the preparation stale")
	assert.FileExists(t, marker)

	copyOf := func(index uint64) {
		origin, err := msgpack.Marshal(&fsm.SplitOrigin{Parent: -1, Index: index, Term: 3, Voters: voters})
		require.NoError(t, err)
		tx, err := ps.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutKV(ctx, fsm.SplitKey, origin))
		require.NoError(t, tx.SetApplied(ctx, storage.AppliedState{Index: index, Term: 1}))
		require.NoError(t, tx.Commit())
	}
	copyOf(38) // the copy of another split
	stale, err = SplitPrepared(ctx, dir, ps)
	require.NoError(t, err)
	assert.True(t, stale, "a store holding another split's copy makes the preparation stale")

	copyOf(40)
	stale, err = SplitPrepared(ctx, dir, ps)
	require.NoError(t, err)
	assert.False(t, stale, "a store holding the split's copy opens from the preparation")
	_, err = os.Stat(marker)
	assert.ErrorIs(t, err, os.ErrNotExist, "the marker is gone once the replica opens from it")
	stale, err = SplitPrepared(ctx, dir, ps)
	require.NoError(t, err)
	assert.False(t, stale, "a directory without the marker is not a preparation")
}

// A voter other than the split's first records its vote for the first voter in term 1 when it
// prepares: raft then grants that candidate's term-1 request and refuses any other candidate's
// in term 1, which it would grant without the recorded vote (shown failing without preVote);
// the first voter records no vote (it campaigns).
func TestPreparedVote(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	voters := []command.Voter{{ID: "n1", Addr: "n1"}, {ID: "n2", Addr: "n2"}, {ID: "n3", Addr: "n3"}}
	right := cells.ShardRange{First: 4, Last: 7}
	const index = 12
	first := filepath.Join(t.TempDir(), "first")
	require.NoError(t, PrepareSplitReplica(first, LogStoreWAL, nil, "trips/1", SplitBase{Index: index, Shards: right, Voters: voters, Self: "n1"}, logger))
	_, stable, closeLog, err := openLogStore(first, LogStoreWAL, nil, "trips/1")
	require.NoError(t, err)
	term, _ := stable.GetUint64(keyCurrentTerm)
	voted, _ := stable.GetUint64(keyLastVoteTerm)
	require.NoError(t, closeLog())
	assert.Zero(t, term, "the first voter takes no term ahead")
	assert.Zero(t, voted, "the first voter records no vote")

	dir := filepath.Join(t.TempDir(), "voter")
	require.NoError(t, PrepareSplitReplica(dir, LogStoreWAL, nil, "trips/1", SplitBase{Index: index, Shards: right, Voters: voters, Self: "n2"}, logger))
	logs, stable, closeLog, err := openLogStore(dir, LogStoreWAL, nil, "trips/1")
	require.NoError(t, err)
	term, err = stable.GetUint64(keyCurrentTerm)
	require.NoError(t, err)
	voted, err = stable.GetUint64(keyLastVoteTerm)
	require.NoError(t, err)
	cand, err := stable.Get(keyLastVoteCand)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), term)
	assert.Equal(t, uint64(1), voted)
	assert.Equal(t, "n1", string(cand), "the vote is the first voter's, by its raft address")

	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogslog.New(logger, "raft"))
	require.NoError(t, err)
	_, trans := raft.NewInmemTransport("n2")
	rc := raft.DefaultConfig()
	rc.LocalID, rc.Logger = "n2", hclogslog.New(logger, "raft")
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour // it never campaigns here
	rc.NoSnapshotRestoreOnStart = true
	r, err := raft.NewRaft(rc, baseFSM{}, logs, stable, snaps, trans)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = r.Shutdown().Error()
		_ = closeLog()
	})
	ask := func(id string) bool {
		_, from := raft.NewInmemTransport(raft.ServerAddress(id))
		from.Connect("n2", trans)
		trans.Connect(raft.ServerAddress(id), from)
		req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(id)},
			Term: 1, LastLogIndex: index, LastLogTerm: 1}
		var resp raft.RequestVoteResponse
		require.NoError(t, from.RequestVote("n2", "n2", req, &resp))
		return resp.Granted
	}
	assert.False(t, ask("n3"), "another candidate gets no vote in term 1")
	assert.True(t, ask("n1"), "the first voter gets the recorded vote")
}
