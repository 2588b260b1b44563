package fsm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/storage"
)

// TestMerge: a partition split at shard 10 into partition 7, which then takes writes, an index
// entry and the offsets of a group it coordinates, freezes (later writes refused as out of
// range, a second freeze answering the first's index) and is merged back: the left partition
// holds every cell of both with its added_id, the index entries, the moved group's state, and
// continues shard 10's added_ids; a restart keeps the range, a second merge is refused, and a
// snapshot of the merged partition restores into a replica that never merged.
func TestMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := storage.OpenPebble(ctx, storage.PebbleConfig{Dir: t.TempDir(), Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	left, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 2}, testShards)
	require.NoError(t, err)
	rightRange := cells.ShardRange{First: 10, Last: 11}
	var right *storage.PartitionStore
	var events []MergeEvent
	f, err := New(ctx, Config{Store: left, StoreBackoff: time.Millisecond, StoreAttempts: 2, Logger: testLogger(t),
		SplitStore: func(ctx context.Context, id int, shards cells.ShardRange) (Store, func() error, error) {
			p, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: id}, shards)
			right = p
			return p, func() error { return nil }, err
		},
		MergeSource: func(ctx context.Context, id int) (Store, func() error, error) {
			assert.Equal(t, 7, id)
			return right, func() error { return nil }, nil
		},
		OnMerge: func(e MergeEvent) { events = append(events, e) },
	})
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(11))
	applyInBatches(t, f, randomLog(t, rng, 30), rng)
	at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	split := responses(t, f.ApplyBatch([]*raft.Log{entryLog(t, 31, &command.Split{AtShard: 10, Right: 7, Generation: 5})}))
	require.NoError(t, split[0].Err, "split")
	require.NotNil(t, right)
	rf, err := New(ctx, Config{Store: right, StoreBackoff: time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)

	// The right partition lives on: a cell, an index entry, a group it coordinates.
	group := ""
	for i := 0; group == ""; i++ {
		if name := fmt.Sprintf("g%d", i); rightRange.Contains(consumer.CoordinatorShard(name, 16)) {
			group = name
		}
	}
	var max10 int64
	if s10 := scanShards(t, right, cells.ShardRange{First: 10, Last: 10}); len(s10) > 0 {
		max10 = s10[len(s10)-1].AddedID
	}
	out := responses(t, rf.ApplyBatch([]*raft.Log{
		cmdLog(t, 32, at, cell(10, 700, "BASE", 1, body(t, `{"right":true}`))),
		indexLog(t, 33, command.Index{Op: command.IndexUpsert, Table: testTable, Fields: testFields,
			Entries: []command.IndexEntry{update(11, 701, "BASE", 1, "city-r", 7, uuid.Nil)}}),
		groupLog(t, 34, at, group, consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", Shards: 16, SessionTimeout: time.Minute}),
		groupLog(t, 35, at, group, consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16, Commits: []consumer.Offset{{Shard: 11, Epoch: 1, Offset: 5}}}),
	}))
	for i, r := range out {
		require.NoError(t, r.Err, "entry %d of the right partition", i)
	}
	assert.Equal(t, max10+1, out[0].writes()[0].Cells[0].AddedID)
	rightCells := scanShards(t, right, rightRange)
	rightEntries := dumpIndex(t, right)
	require.NotEmpty(t, rightEntries)

	// The freeze: the range empties, writes are refused, a second freeze answers the first.
	fr := responses(t, rf.ApplyBatch([]*raft.Log{
		entryLog(t, 36, &command.Freeze{Into: 2, Generation: 6}),
		cmdLog(t, 37, at, cell(10, 702, "BASE", 1, body(t, `{"late":true}`))),
		entryLog(t, 38, &command.Freeze{Into: 2, Generation: 6}),
	}))
	require.NoError(t, fr[0].Err, "freeze")
	assert.Equal(t, command.FreezeResult{Index: 36, Shards: rightRange}, fr[0].Result)
	assert.ErrorIs(t, fr[1].Err, command.ErrShardOutOfRange, "a write after the freeze")
	require.NoError(t, fr[2].Err, "the second freeze")
	assert.Equal(t, command.FreezeResult{Index: 36, Shards: rightRange, Already: true}, fr[2].Result, "the second freeze answers the first")
	assert.Equal(t, 0, rf.Shards().Len(), "a frozen partition holds no shard")
	state, ok, err := ReadFreeze(ctx, right)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, FreezeState{Into: 2, Generation: 6, Index: 36, Term: 3, First: 10, Last: 11}, state)
	rf2, err := New(ctx, Config{Store: right, Logger: testLogger(t)})
	require.NoError(t, err)
	assert.Equal(t, 0, rf2.Shards().Len(), "a restart keeps the freeze")

	// A merge naming another freeze index is not applied: the FSM retries, then stops.
	other, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 3}, testShards)
	require.NoError(t, err)
	g, err := New(ctx, Config{Store: other, StoreBackoff: time.Millisecond, StoreAttempts: 2, Logger: testLogger(t),
		MergeSource: func(context.Context, int) (Store, func() error, error) {
			return right, func() error { return nil }, nil
		}})
	require.NoError(t, err)
	bad := responses(t, g.ApplyBatch([]*raft.Log{entryLog(t, 1, &command.Merge{Right: 7, First: 12, Last: 13, FrozenAt: 35, Shards: 16})}))
	assert.ErrorIs(t, bad[0].Err, ErrFailed, "a right partition not frozen at FrozenAt")

	// The merge.
	merged := cells.ShardRange{First: 8, Last: 11}
	m := responses(t, f.ApplyBatch([]*raft.Log{
		entryLog(t, 32, &command.Merge{Right: 7, First: 10, Last: 11, FrozenAt: 36, Shards: 16, Generation: 7}),
		cmdLog(t, 33, at, cell(10, 703, "BASE", 1, body(t, `{"merged":true}`))),
		entryLog(t, 34, &command.Merge{Right: 7, First: 10, Last: 11, FrozenAt: 36, Shards: 16, Generation: 7}),
	}))
	require.NoError(t, m[0].Err, "merge")
	assert.Equal(t, command.MergeResult{Merged: merged}, m[0].Result)
	require.NoError(t, m[1].Err, "a write to shard 10 after the merge")
	assert.Equal(t, max10+2, m[1].writes()[0].Cells[0].AddedID, "shard 10's added_ids continue")
	assert.ErrorIs(t, m[2].Err, command.ErrShardOutOfRange, "the merge again")
	assert.Equal(t, merged, f.Shards())
	assert.Equal(t, []MergeEvent{{Right: 7, Merged: merged, Applied: storage.AppliedState{Index: 32, Term: 3}}}, events)
	var held []cells.Cell
	for _, c := range scanShards(t, left, rightRange) {
		if c.Key.RowKey != rowKey(703) {
			held = append(held, c)
		}
	}
	sameCells(t, held, rightCells)
	entries := dumpIndex(t, left)
	for _, e := range rightEntries {
		assert.Contains(t, entries, e, "the right partition's index entries")
	}
	lg, err := LoadGroup(ctx, left, group)
	require.NoError(t, err)
	assert.Equal(t, int64(5), committed(lg.Status(at))[11], "the moved group's offset")
	f2, err := New(ctx, Config{Store: left, Logger: testLogger(t)})
	require.NoError(t, err)
	assert.Equal(t, merged, f2.Shards(), "a restart keeps the merged range")

	// A snapshot of the merged partition restores into a replica that never merged.
	snap, err := f.Snapshot()
	require.NoError(t, err)
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	snap.Release()
	narrow, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 9}, cells.ShardRange{First: 8, Last: 9})
	require.NoError(t, err)
	h := newFSM(t, narrow)
	require.NoError(t, h.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	assert.Equal(t, merged, h.Shards(), "the snapshot's range")
	sameCells(t, scanShards(t, narrow, merged), scanShards(t, left, merged))
}

// TestThaw: a thaw gives a frozen partition its range back; a thaw of a partition that is not
// frozen is refused.
func TestThaw(t *testing.T) {
	t.Parallel()
	p := openStore(t)
	f := newFSM(t, p)
	at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	out := responses(t, f.ApplyBatch([]*raft.Log{
		entryLog(t, 1, &command.Freeze{Into: 1, Thaw: true}),
		entryLog(t, 2, &command.Freeze{Into: 1}),
		entryLog(t, 3, &command.Freeze{Into: 5, Thaw: true}),
		entryLog(t, 4, &command.Freeze{Into: 1, Thaw: true}),
		cmdLog(t, 5, at, cell(9, 1, "BASE", 1, body(t, `{}`))),
	}))
	assert.ErrorIs(t, out[0].Err, command.ErrBadCommand, "thaw of a partition not frozen")
	require.NoError(t, out[1].Err)
	assert.ErrorIs(t, out[2].Err, command.ErrBadCommand, "thaw for another partition")
	require.NoError(t, out[3].Err, "thaw")
	assert.Equal(t, command.FreezeResult{Index: 4, Shards: testShards}, out[3].Result)
	require.NoError(t, out[4].Err, "a write after the thaw")
	assert.Equal(t, testShards, f.Shards())
	_, frozen, err := ReadFreeze(context.Background(), p)
	require.NoError(t, err)
	assert.False(t, frozen)
}
