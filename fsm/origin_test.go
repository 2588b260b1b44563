package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// TestOrigins: a write's origin is stored with every cell it creates, on both apply paths
// (plain writes and atomic ones), on both embedded engines, and a snapshot carries it to
// another replica; an append with a bad origin is refused whole as a value.
func TestOrigins(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *storage.PartitionStore{"pebble": openStore, "sqlite": openSQLite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := open(t)
			f := newFSM(t, src)
			at := time.Date(2026, 11, 30, 1, 2, 3, 4000, time.UTC)
			b := body(t, `{"fare":12}`)
			// Plain writes alone in a batch take the per-shard path (decideByShard), an atomic
			// one the in-order path (decideInOrder): both store the origin.
			res := applyOne(t, f, writesLog(t, 1, at,
				command.Write{Cells: []command.Cell{cell(8, 1, "BASE", 1, b)}},
				command.Write{Cells: []command.Cell{cell(8, 2, "BASE", 1, b), cell(9, 4, "BASE", 1, b)}, Origin: "west"},
			))
			res = append(res, applyOne(t, f, writesLog(t, 2, at,
				command.Write{Atomic: true, Cells: []command.Cell{cell(10, 3, "BASE", 1, b)}, Origin: "east-2"}))...)
			require.Len(t, res, 3)
			for i, r := range res {
				for j, c := range r.Cells {
					require.Equal(t, cells.StatusCreated, c.Status, "write %d cell %d", i, j)
				}
			}
			got := map[cells.Key]string{}
			for _, c := range dump(t, src) {
				got[c.Key] = c.Origin
			}
			assert.Equal(t, map[cells.Key]string{
				cell(8, 1, "BASE", 1, b).Key: "", cell(8, 2, "BASE", 1, b).Key: "west",
				cell(9, 4, "BASE", 1, b).Key: "west", cell(10, 3, "BASE", 1, b).Key: "east-2",
			}, got, "origins stored")

			// The same cell again from a peer: exists, and the stored origin stays.
			again := applyOne(t, f, writesLog(t, 3, at, command.Write{Cells: []command.Cell{cell(8, 1, "BASE", 1, b)}, Origin: "west"}))
			assert.Equal(t, cells.StatusExists, again[0].Cells[0].Status)

			// A bad origin in a log entry: refused as a value, nothing written.
			data, err := command.Encode(&command.Append{CreatedAt: at, Writes: []command.Write{{Cells: []command.Cell{cell(8, 9, "BASE", 1, b)}, Origin: "West!"}}})
			require.NoError(t, err)
			r := responses(t, f.ApplyBatch([]*raft.Log{{Index: 4, Term: 1, Type: raft.LogCommand, Data: data}}))[0]
			require.ErrorIs(t, r.Err, cells.ErrInvalidClusterName)
			before := dump(t, src)
			assert.Len(t, before, 4, "the refused append wrote nothing")

			// An erasure from another cluster: its tombstone stores the origin.
			data, err = command.Encode(&command.Erase{CreatedAt: at, Shard: 8, RowKey: rowKey(1), Origin: "west"})
			require.NoError(t, err)
			er := responses(t, f.ApplyBatch([]*raft.Log{{Index: 5, Term: 1, Type: raft.LogCommand, Data: data}}))[0]
			require.NoError(t, er.Err, "erase with an origin")
			require.Equal(t, 1, er.erase().Erased)
			var tomb *cells.Cell
			for _, c := range dump(t, src) {
				if c.Key.IsTombstone() {
					tomb = &c
				}
			}
			require.NotNil(t, tomb, "a tombstone")
			assert.Equal(t, "west", tomb.Origin, "the tombstone's origin")
			before = dump(t, src)

			snap, err := f.Snapshot()
			require.NoError(t, err, "Snapshot")
			var sink memSink
			require.NoError(t, snap.Persist(&sink), "Persist")
			snap.Release()
			dst := open(t)
			g := newFSM(t, dst)
			require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))), "Restore")
			sameCells(t, dump(t, dst), before)
		})
	}
}

// TestSnapshotRecordForms: a cell record without an origin is the seven-element array of
// builds before origins; one with an origin has an eighth element; both decode.
func TestSnapshotRecordForms(t *testing.T) {
	plain := snapshotRecord{Shard: 9, AddedID: 4, RowKey: []byte("0123456789abcdef"), Column: "BASE", RefKey: 1, Body: []byte{1}, CreatedAtMicros: 5}
	var buf bytes.Buffer
	require.NoError(t, msgpack.NewEncoder(&buf).Encode(&plain))
	assert.Equal(t, byte(0x97), buf.Bytes()[0], "seven elements")
	withOrigin := plain
	withOrigin.Origin = "west"
	var buf2 bytes.Buffer
	require.NoError(t, msgpack.NewEncoder(&buf2).Encode(&withOrigin))
	assert.Equal(t, byte(0x98), buf2.Bytes()[0], "eight elements")
	for _, want := range []snapshotRecord{plain, withOrigin} {
		var b bytes.Buffer
		require.NoError(t, msgpack.NewEncoder(&b).Encode(&want))
		var got snapshotRecord
		require.NoError(t, msgpack.NewDecoder(&b).Decode(&got))
		assert.Equal(t, want, got)
	}
}
