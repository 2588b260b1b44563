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

func entryLog(t *testing.T, index uint64, s command.Command) *raft.Log {
	t.Helper()
	data, err := command.Encode(s)
	require.NoError(t, err)
	return &raft.Log{Index: index, Term: 3, Type: raft.LogCommand, Data: data}
}

// scanShards returns the cells of shards r of p, shard by shard in added_id order.
func scanShards(t *testing.T, p *storage.PartitionStore, r cells.ShardRange) []cells.Cell {
	t.Helper()
	var all []cells.Cell
	for s := r.First; s <= r.Last; s++ {
		cs, err := p.ScanShard(context.Background(), s, 0, 1<<30)
		require.NoError(t, err, "ScanShard(%d)", s)
		all = append(all, cs...)
	}
	return all
}

// TestSplit: a split entry applied among cell and group entries hands shards 10..11 to partition
// 7 (cells with their added_ids and times, consumer offsets of those shards, the split's
// origin), shrinks the parent to 8..9 (later writes to 10..11 refused as out of range, its
// dropped shards gone, a restart keeping the range), and the right partition's FSM continues
// each shard's added_ids. A second split at the same shard is refused, and a snapshot of the
// parent restores into a replica that never saw the split.
//
// The right half shares the parent's shards in place when both partitions are in one pebble
// store (storage ShareShards), and gets a copy through Store.Restore's records otherwise: both
// are run.
func TestSplit(t *testing.T) {
	t.Parallel()
	t.Run("same-store", func(t *testing.T) { testSplit(t, true) })
	t.Run("other-store", func(t *testing.T) { testSplit(t, false) })
}

func testSplit(t *testing.T, sameStore bool) {
	ctx := context.Background()
	st, err := storage.OpenPebble(ctx, storage.PebbleConfig{Dir: t.TempDir(), Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	rightSt := st
	if !sameStore {
		rightSt, err = storage.OpenPebble(ctx, storage.PebbleConfig{Dir: t.TempDir(), Logger: testLogger(t)})
		require.NoError(t, err)
		t.Cleanup(func() { rightSt.Close() })
	}
	parent, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 2}, testShards)
	require.NoError(t, err)
	rightRange := cells.ShardRange{First: 10, Last: 11}
	var events, starts []SplitEvent
	var rightApplied []uint64 // the right store's applied index as each split began
	cfg := Config{Store: parent, StoreBackoff: time.Millisecond, Logger: testLogger(t),
		SplitStore: func(ctx context.Context, right int, shards cells.ShardRange) (Store, func() error, error) {
			assert.Equal(t, 7, right)
			assert.Equal(t, rightRange, shards)
			p, err := rightSt.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: right}, shards)
			if err != nil {
				return nil, nil, err
			}
			return p, p.Close, nil
		},
		OnSplit: func(e SplitEvent) { events = append(events, e) },
		OnSplitStart: func(e SplitEvent) {
			starts = append(starts, e)
			p, err := rightSt.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: e.Right}, e.Shards)
			if assert.NoError(t, err) {
				a, err := p.Applied(ctx)
				assert.NoError(t, err)
				rightApplied = append(rightApplied, a.Index)
				assert.NoError(t, p.Close())
			}
		},
	}
	f, err := New(ctx, cfg)
	require.NoError(t, err)

	rng := rand.New(rand.NewSource(5))
	logs := randomLog(t, rng, 39)
	at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	applyInBatches(t, f, logs, rng)
	var ups []command.IndexEntry
	for row := range 12 {
		ups = append(ups, update(8+row%4, 500+row, "BASE", 1, fmt.Sprintf("city-%d", row%3), int64(row), uuid.Nil))
	}
	idx := responses(t, f.ApplyBatch([]*raft.Log{indexLog(t, 40, command.Index{Op: command.IndexUpsert, Table: testTable, Fields: testFields, Entries: ups})}))
	require.NoError(t, idx[0].Err, "index upsert")
	entriesBefore := dumpIndex(t, parent)
	require.Len(t, entriesBefore, 12)
	group := groupLog(t, 41, at, "trips", consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", Shards: 16, SessionTimeout: time.Minute})
	commit := groupLog(t, 42, at, "trips", consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16,
		Commits: []consumer.Offset{{Shard: 9, Epoch: 1, Offset: 1}, {Shard: 11, Epoch: 1, Offset: 2}}})
	voters := []command.Voter{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}}
	split := entryLog(t, 43, &command.Split{AtShard: 10, Right: 7, Generation: 5, Voters: voters})
	after := cmdLog(t, 44, at, cell(10, 900, "BASE", 1, body(t, `{"late":true}`)), cell(8, 901, "BASE", 1, body(t, `{"kept":true}`)))
	before := dump(t, parent)
	movedWant := scanShards(t, parent, rightRange)
	var max10 int64
	if s10 := scanShards(t, parent, cells.ShardRange{First: 10, Last: 10}); len(s10) > 0 {
		max10 = s10[len(s10)-1].AddedID
	}
	require.NotEmpty(t, movedWant, "the random log wrote no cell in shards 10..11; the test cannot tell")

	out := responses(t, f.ApplyBatch([]*raft.Log{group, commit, split, after}))
	require.NoError(t, out[0].Err)
	require.NoError(t, out[1].Err)
	require.NoError(t, out[2].Err, "the split")
	assert.Equal(t, command.SplitResult{Left: cells.ShardRange{First: 8, Last: 9}, Right: rightRange}, out[2].Result)
	assert.ErrorIs(t, out[3].Err, command.ErrShardOutOfRange, "a write to shard 10 after the split is refused by the parent")
	// The group is coordinated by shard 11 (of 16): the parent keeps a copy of its state, but
	// refuses its commands now, as a node routing by an older catalog would send them.
	late := responses(t, f.ApplyBatch([]*raft.Log{groupLog(t, 45, at, "trips", consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16,
		Commits: []consumer.Offset{{Shard: 11, Epoch: 1, Offset: 7}}})}))
	assert.ErrorIs(t, late[0].Err, command.ErrShardOutOfRange, "a commit in group trips (coordinated by shard 11) after the split is refused by the parent")
	assert.Equal(t, cells.ShardRange{First: 8, Last: 9}, f.Shards())
	assert.Equal(t, cells.ShardRange{First: 8, Last: 9}, parent.Shards())
	assert.Equal(t, uint64(45), f.Applied().Index)
	require.Len(t, events, 1)
	want := SplitEvent{Right: 7, Left: cells.ShardRange{First: 8, Last: 9}, Shards: rightRange, Applied: storage.AppliedState{Index: 43, Term: 3}, Voters: voters}
	assert.Equal(t, want, events[0])
	require.Len(t, starts, 1, "OnSplitStart is called once for the split, and not for the refused entries")
	assert.Equal(t, want, starts[0])
	assert.Equal(t, []uint64{0}, rightApplied, "OnSplitStart is called before the right half's store holds the split's copy")
	_, err = parent.ScanShard(ctx, 10, 0, 10)
	assert.ErrorIs(t, err, storage.ErrShardRange, "the parent no longer holds shard 10")
	kept := scanShards(t, parent, cells.ShardRange{First: 8, Last: 9})
	assert.Len(t, kept, len(before)-len(movedWant), "the parent keeps its shards' cells, and only them")

	// Index entries: shards 8..9 stay, 10..11 move.
	var keptEntries, movedEntries []storage.IndexEntry
	for _, e := range entriesBefore {
		if s := 8 + (int(e.Values[1].(int64)) % 4); s >= 10 {
			movedEntries = append(movedEntries, e)
		} else {
			keptEntries = append(keptEntries, e)
		}
	}
	assert.Equal(t, keptEntries, dumpIndex(t, parent), "the parent keeps the index entries of its shards")

	// The right partition: its cells, range, origin, offsets; its FSM continues the added_ids.
	rp, err := rightSt.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 7}, rightRange)
	require.NoError(t, err)
	sameCells(t, scanShards(t, rp, rightRange), movedWant)
	rf, err := New(ctx, Config{Store: rp, StoreBackoff: time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
	assert.Equal(t, rightRange, rf.Shards())
	assert.Equal(t, storage.AppliedState{Index: 43, Term: 1}, rf.Applied(), "the right half starts at the split's index, in term 1")
	assert.Equal(t, movedEntries, dumpIndex(t, rp), "the right half holds the index entries of its shards")
	origin, ok, err := ReadSplitOrigin(ctx, rp)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, voters, origin.Voters)
	assert.Equal(t, uint64(5), origin.Generation)
	rg, err := LoadGroup(ctx, rp, "trips")
	require.NoError(t, err)
	assert.Equal(t, int64(2), committed(rg.Status(at))[11], "shard 11's offset moved with it")
	pg, err := LoadGroup(ctx, parent, "trips")
	require.NoError(t, err)
	assert.Equal(t, int64(1), committed(pg.Status(at))[9], "shard 9's offset stays")
	assert.Equal(t, committed(pg.Status(at)), committed(rg.Status(at)), "the group's state is copied whole")
	res := responses(t, rf.ApplyBatch([]*raft.Log{cmdLog(t, 44, at, cell(10, 900, "BASE", 1, body(t, `{"late":true}`)))}))
	require.NoError(t, res[0].Err)
	assert.Equal(t, max10+1, res[0].writes()[0].Cells[0].AddedID, "shard 10's added_ids continue in the right partition")

	// The parent records the split it applied (SplitApplied); the right half does not inherit
	// the record, and no other split is recorded.
	for _, c := range []struct {
		what  string
		st    Store
		right int
		want  bool
	}{{"the parent, of partition 7", parent, 7, true}, {"the parent, of partition 8", parent, 8, false}, {"the right half, of partition 7", rp, 7, false}} {
		got, err := SplitApplied(ctx, c.st, c.right)
		require.NoError(t, err, c.what)
		assert.Equal(t, c.want, got, "SplitApplied: %s", c.what)
	}

	// A second split at 10 is refused; the applied index moves.
	again := responses(t, f.ApplyBatch([]*raft.Log{entryLog(t, 46, &command.Split{AtShard: 10, Right: 8})}))
	assert.ErrorIs(t, again[0].Err, command.ErrShardOutOfRange)
	assert.Equal(t, uint64(46), f.Applied().Index)

	// A restart keeps the range.
	f2, err := New(ctx, Config{Store: parent, Logger: testLogger(t)})
	require.NoError(t, err)
	assert.Equal(t, cells.ShardRange{First: 8, Last: 9}, f2.Shards())

	// A snapshot of the parent restores into a replica of the whole range that never split.
	snap, err := f.Snapshot()
	require.NoError(t, err)
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	snap.Release()
	fresh := openStore(t)
	g := newFSM(t, fresh)
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	assert.Equal(t, cells.ShardRange{First: 8, Last: 9}, g.Shards(), "the snapshot's range")
	recorded, err := SplitApplied(ctx, fresh, 7)
	require.NoError(t, err)
	assert.True(t, recorded, "the snapshot carries the record of the split")
	sameCells(t, scanShards(t, fresh, cells.ShardRange{First: 8, Last: 9}), kept)
}

// committed returns the offsets of a group's leases, by shard.
func committed(st consumer.Status) map[int]int64 {
	out := map[int]int64{}
	for _, l := range st.Leases {
		out[l.Shard] = l.Offset
	}
	return out
}
