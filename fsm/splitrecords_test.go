package fsm

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
)

// writeLog is an append of one write with ID id.
func writeLog(t *testing.T, index uint64, at time.Time, id uuid.UUID, cs ...command.Cell) *raft.Log {
	t.Helper()
	data, err := command.Encode(&command.Append{CreatedAt: at, Writes: []command.Write{{ID: id, Cells: cs}}})
	require.NoError(t, err)
	return &raft.Log{Index: index, Term: 3, Type: raft.LogCommand, Data: data}
}

// TestSplitRequestRecords: a request whose shares were routed across a split. Its first share
// (shards 8..9, by the new catalog) is applied by the parent before the split entry; the split
// copies the parent's record into the right half, which then gets the request's other share
// (shards 10..11): that share is applied and recorded, not refused as a reused key. Retries of
// either share then answer their first outcomes.
func TestSplitRequestRecords(t *testing.T) {
	ctx := context.Background()
	st, err := storage.OpenPebble(ctx, storage.PebbleConfig{Dir: t.TempDir(), Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	parent, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 2}, testShards)
	require.NoError(t, err)
	rightRange := cells.ShardRange{First: 10, Last: 11}
	f, err := New(ctx, Config{Store: parent, StoreBackoff: time.Millisecond, Logger: testLogger(t),
		SplitStore: func(ctx context.Context, right int, shards cells.ShardRange) (Store, func() error, error) {
			p, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: right}, shards)
			if err != nil {
				return nil, nil, err
			}
			return p, p.Close, nil
		}})
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	id := uuid.Must(uuid.NewV7())
	left := []command.Cell{cell(8, 1, "BASE", 1, body(t, `{"share":"left"}`)), cell(9, 2, "BASE", 1, body(t, `{"share":"left"}`))}
	right := []command.Cell{cell(10, 3, "BASE", 1, body(t, `{"share":"right"}`)), cell(11, 4, "BASE", 1, body(t, `{"share":"right"}`))}

	out := responses(t, f.ApplyBatch([]*raft.Log{
		writeLog(t, 1, at, id, left...),
		entryLog(t, 2, &command.Split{AtShard: 10, Right: 7, Generation: 2, Voters: []command.Voter{{ID: "n1", Addr: "127.0.0.1:1"}}}),
	}))
	require.NoError(t, out[0].Err)
	require.NoError(t, out[1].Err, "the split")
	first := out[0].writes()[0]
	require.True(t, first.Applied(), "the left share: %+v", first)

	rp, err := st.Partition(ctx, storage.PartitionID{Datastore: "trips", Partition: 7}, rightRange)
	require.NoError(t, err)
	rf, err := New(ctx, Config{Store: rp, StoreBackoff: time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
	res := responses(t, rf.ApplyBatch([]*raft.Log{writeLog(t, 3, at, id, right...)}))
	require.NoError(t, res[0].Err)
	got := res[0].writes()[0]
	assert.False(t, got.KeyReused, "the right share is not a reused key")
	assert.False(t, got.Replayed, "the right share is applied")
	require.True(t, got.Applied(), "the right share: %+v", got)
	for i, c := range got.Cells {
		assert.Equal(t, cells.StatusCreated, c.Status, "right share cell %d", i)
	}

	again := responses(t, rf.ApplyBatch([]*raft.Log{writeLog(t, 4, at.Add(time.Second), id, right...), writeLog(t, 5, at.Add(time.Second), id, left[:1]...)}))
	assert.True(t, again[0].writes()[0].Replayed, "the right share's retry is replayed")
	assert.Equal(t, got.Cells, again[0].writes()[0].Cells, "the right share's retry: its first outcome")
	assert.ErrorIs(t, again[1].Err, command.ErrShardOutOfRange, "the left share is not the right half's")
	back := responses(t, f.ApplyBatch([]*raft.Log{writeLog(t, 3, at.Add(time.Second), id, left...)}))
	require.NoError(t, back[0].Err)
	assert.True(t, back[0].writes()[0].Replayed, "the left share's retry is replayed")
	assert.Equal(t, first.Cells, back[0].writes()[0].Cells, "the left share's retry: its first outcome")
}
