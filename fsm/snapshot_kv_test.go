package fsm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// commitKV commits puts (a nil value deletes the key) straight into the store, as the FSM's
// writer would; the FSM must not be applying meanwhile.
func commitKV(t *testing.T, p *storage.PartitionStore, puts ...storage.KV) {
	t.Helper()
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	require.NoError(t, err, "Begin")
	defer tx.Rollback()
	for _, kv := range puts {
		if kv.Value == nil {
			err = tx.DeleteKV(ctx, kv.Key)
		} else {
			err = tx.PutKV(ctx, kv.Key, kv.Value)
		}
		require.NoError(t, err, "put/delete KV %q", kv.Key)
	}
	require.NoError(t, tx.Commit(), "Commit")
}

// checkKVRows checks every KV row of p against want (empty and nil values are the same).
func checkKVRows(t *testing.T, what string, p *storage.PartitionStore, want []storage.KV) {
	t.Helper()
	got, err := p.ScanKV(context.Background(), "")
	require.NoError(t, err, "%s: ScanKV", what)
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		same = got[i].Key == want[i].Key && bytes.Equal(got[i].Value, want[i].Value)
	}
	assert.True(t, same, "%s: got KV rows %q, want %q", what, got, want)
}

// snapshotKVRows are rows whose keys and values exercise the encoding: binary bytes, an
// empty value, a large value, and the bounds of the key length.
func snapshotKVRows() []storage.KV {
	big := make([]byte, 3<<20)
	rand.New(rand.NewSource(5)).Read(big)
	return []storage.KV{
		{Key: "\x00bin\xff", Value: []byte{0, 0xff}},
		{Key: "a", Value: []byte{}},
		{Key: "consumer/g/big", Value: big},
		{Key: "consumer/g/members", Value: []byte(`{"m1":1}`)},
		{Key: string(bytes.Repeat([]byte{'z'}, storage.MaxKVKeyBytes)), Value: []byte("longest key")},
	}
}

// persist takes a snapshot of f and returns the stream. between runs after Snapshot and
// before Persist, while the snapshot is open.
func persist(t *testing.T, f *FSM, between func()) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	require.NoError(t, err, "Snapshot")
	defer snap.Release()
	between()
	var sink memSink
	require.NoError(t, snap.Persist(&sink), "Persist")
	return sink.Bytes()
}

// A snapshot carries the KV rows as of Snapshot(), and Restore replaces the KV rows of the
// replica it restores; a truncated snapshot leaves them.
func TestSnapshotRestoreKV(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(13))
	logs := randomLog(t, rng, 40)
	src := openStore(t)
	f := newFSM(t, src)
	applyInBatches(t, f, logs[:30], rng)
	rows := snapshotKVRows()
	commitKV(t, src, rows...)
	atSnapshot := dump(t, src)

	stream := persist(t, f, func() {
		// Changes after Snapshot() are not in the stream.
		commitKV(t, src, storage.KV{Key: "a"}, storage.KV{Key: "after", Value: []byte("x")},
			storage.KV{Key: "consumer/g/members", Value: []byte("changed")})
		applyInBatches(t, f, logs[30:], rng)
	})

	dst := openStore(t)
	g := newFSM(t, dst)
	applyInBatches(t, g, randomLog(t, rand.New(rand.NewSource(99)), 10), rng)
	commitKV(t, dst, storage.KV{Key: "a", Value: []byte("to be replaced")}, storage.KV{Key: "only/dst", Value: []byte("gone")})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(stream))), "Restore")
	checkKVRows(t, "after Restore", dst, rows)
	sameCells(t, dump(t, dst), atSnapshot)
	assert.Equal(t, uint64(30), g.Applied().Index, "applied after Restore")

	// A truncated stream, cut in the trailer or among the KV records, changes nothing.
	commitKV(t, dst, storage.KV{Key: "a", Value: []byte("kept")})
	want := append([]storage.KV{rows[0], {Key: "a", Value: []byte("kept")}}, rows[2:]...)
	for _, cut := range []int{len(stream) - 5, len(stream) / 2, 200} {
		assert.ErrorIs(t, g.Restore(io.NopCloser(bytes.NewReader(stream[:cut]))), ErrBadSnapshot,
			"Restore of the stream cut at %d of %d bytes", cut, len(stream))
		checkKVRows(t, fmt.Sprintf("after Restore of the stream cut at %d", cut), dst, want)
	}
}

// rawStream builds a snapshot stream of the given version from records, for shards 8..11.
func rawStream(t *testing.T, version int, records ...snapshotRecord) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(snapshotMagic)
	enc := msgpack.NewEncoder(&b)
	err := enc.Encode(&SnapshotHeader{Version: version, FirstShard: testShards.First, LastShard: testShards.Last,
		Applied: storage.AppliedState{Index: 7, Term: 2}})
	require.NoError(t, err, "encode the header")
	for i := range records {
		require.NoError(t, enc.Encode(&records[i]), "encode record %d", i)
	}
	return b.Bytes()
}

// Version 1 streams (no KV records) still restore, emptying the KV rows; malformed KV
// records are rejected and change nothing.
func TestRestoreKVRecords(t *testing.T) {
	t.Parallel()
	rk := rowKey(1)
	cellRec := snapshotRecord{Shard: 9, AddedID: 1, RowKey: rk[:], Column: "BASE", RefKey: 1,
		Body: body(t, `{"a":1}`), CreatedAtMicros: 1_700_000_000_000_000}
	kvRec := func(k, v string) snapshotRecord { return snapshotRecord{Shard: kvShard, Column: k, Body: []byte(v)} }
	trailer := func(cells, kvs int64) snapshotRecord {
		return snapshotRecord{Shard: trailerShard, AddedID: cells, RefKey: kvs}
	}

	p := openStore(t)
	f := newFSM(t, p)
	before := []storage.KV{{Key: "old", Value: []byte("old")}}
	commitKV(t, p, before...)
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"a KV record in a version 1 stream", rawStream(t, 1, kvRec("k", "v"), cellRec, trailer(1, 1))},
		{"a KV record after a cell", rawStream(t, 2, cellRec, kvRec("k", "v"), trailer(1, 1))},
		{"a trailer counting fewer KV rows", rawStream(t, 2, kvRec("j", "v"), kvRec("k", "v"), cellRec, trailer(1, 1))},
		{"a trailer counting more KV rows", rawStream(t, 2, kvRec("k", "v"), trailer(0, 2))},
		{"version 4", rawStream(t, 4, trailer(0, 0))},
	} {
		assert.ErrorIs(t, f.Restore(io.NopCloser(bytes.NewReader(tc.raw))), ErrBadSnapshot, "Restore of a stream with %s", tc.name)
		checkKVRows(t, "after Restore of a stream with "+tc.name, p, before)
	}

	// An empty KV key is refused by the store; nothing changes either.
	assert.ErrorIs(t, f.Restore(io.NopCloser(bytes.NewReader(rawStream(t, 2, kvRec("", "v"), trailer(0, 1))))), storage.ErrKVTooLarge,
		"Restore of a stream with an empty KV key")
	checkKVRows(t, "after Restore of a stream with an empty KV key", p, before)

	// Only KV records, no cell.
	require.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(rawStream(t, 2, kvRec("k1", "1"), kvRec("k2", ""), trailer(0, 2))))),
		"Restore of a stream of KV records only")
	checkKVRows(t, "after Restore of KV records only", p, []storage.KV{{Key: "k1", Value: []byte("1")}, {Key: "k2"}})
	assert.Empty(t, dump(t, p), "cells after Restore of KV records only")

	// A version 1 stream restores its cells and leaves no KV row.
	require.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(rawStream(t, 1, cellRec, trailer(1, 0))))), "Restore of a version 1 stream")
	checkKVRows(t, "after Restore of a version 1 stream", p, nil)
	cs := dump(t, p)
	assert.True(t, len(cs) == 1 && cs[0].Key.RowKey == rk && cs[0].AddedID == 1,
		"cells after Restore of a version 1 stream: got %+v, want the one cell of row %s", cs, rk)
	assert.Equal(t, storage.AppliedState{Index: 7, Term: 2}, f.Applied(), "applied after Restore of a version 1 stream")
}

// KV rows cross engines through a snapshot, both ways.
func TestSnapshotKVAcrossEngines(t *testing.T) {
	t.Parallel()
	rows := snapshotKVRows()
	for _, tc := range []struct {
		name     string
		src, dst func(*testing.T) *storage.PartitionStore
	}{
		{"mysql to sqlite", openMySQL, openSQLite},
		{"sqlite to mysql", openSQLite, openMySQL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, dst := tc.src(t), tc.dst(t)
			commitKV(t, src, rows...)
			commitKV(t, dst, storage.KV{Key: "only/dst", Value: []byte("gone")})
			stream := persist(t, newFSM(t, src), func() {})
			require.NoError(t, newFSM(t, dst).Restore(io.NopCloser(bytes.NewReader(stream))), "Restore")
			checkKVRows(t, "after Restore", dst, rows)
		})
	}
}
