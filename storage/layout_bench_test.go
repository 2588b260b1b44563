package storage

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/stretchr/testify/require"
)

// BenchmarkCellLayouts measures what the apply of one raft entry's cells costs in two layouts:
// the SQLite partition file as the FSM writes it (a transaction: each shard's cells, a request
// record per write, the applied index, COMMIT without fsync at synchronous=NORMAL), and a
// sequential store, pebble, holding the same rows as keys (per cell: the cell under its shard and
// added_id, its unique key, probed first, through bloom filters, as the SQLite unique index is; per write: the request
// record and its entry in the time order; the applied index), committed without fsync. Entries of
// 8 cells in 8 of 16 shards, each cell its own write with an ID, random row keys, a trip body:
// the shape of put_cell at 64 clients. It is the measurement that led to the pebble engine
// (OpenPebble), whose real apply BenchmarkApplyWrites (package fsm) measures beside SQLite's.
func BenchmarkCellLayouts(b *testing.B) {
	const perEntry, shards = 8, 16
	bd, err := cells.EncodeBody([]byte(`{"driver":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","rider":"123e4567-e89b-12d3-a456-426614174000",` +
		`"origin":"LAX","destination":"SFO","fare":{"amount":4250,"currency":"USD"},"status":"completed","distance_m":543210}`))
	require.NoError(b, err)
	record := make([]byte, 24)
	entry := func(i int, added []int64) ([]cells.Cell, []RequestRecord) {
		now := time.Now()
		cs := make([]cells.Cell, perEntry)
		rs := make([]RequestRecord, perEntry)
		for j := range cs {
			s := (i*perEntry + j) % shards
			added[s]++
			cs[j] = cells.Cell{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "base", RefKey: 1}, Body: bd, AddedID: added[s], CreatedAt: now}
			id, _ := uuid.NewV7()
			rs[j] = RequestRecord{ID: id, CreatedAt: now, Record: record}
		}
		return cs, rs
	}
	b.Run("sqlite", func(b *testing.B) {
		ctx := context.Background()
		p := openPartition(b, sqliteEnv(b).open(b), "bench", 0, 0, shards-1)
		all := make([]int, shards)
		for i := range all {
			all[i] = i
		}
		require.NoError(b, p.EnsureShards(ctx, all))
		added := make([]int64, shards)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			cs, rs := entry(i, added)
			tx, err := p.Begin(ctx)
			require.NoError(b, err)
			for j, c := range cs {
				require.NoError(b, tx.Insert(ctx, (i*perEntry+j)%shards, []cells.Cell{c}))
			}
			require.NoError(b, tx.InsertRequests(ctx, rs))
			require.NoError(b, tx.SetApplied(ctx, AppliedState{Index: uint64(i + 1), Term: 1}))
			require.NoError(b, tx.Commit())
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*perEntry), "µs/cell")
	})
	b.Run("pebble", func(b *testing.B) {
		// Bloom filters answer the unique-key probes of new keys without reading blocks.
		opts := &pebble.Options{Cache: pebble.NewCache(64 << 20)}
		defer opts.Cache.Unref()
		opts.Levels = make([]pebble.LevelOptions, 7)
		for i := range opts.Levels {
			opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
		db, err := pebble.Open(b.TempDir(), opts)
		require.NoError(b, err)
		defer func() { require.NoError(b, db.Close()) }()
		added := make([]int64, shards)
		var k, v []byte
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			cs, rs := entry(i, added)
			batch := db.NewBatch()
			for j, c := range cs {
				s := uint16((i*perEntry + j) % shards)
				// The unique key: probed, then set to the cell's added_id.
				k = append(append(binary.BigEndian.AppendUint16(append(k[:0], 'u'), s), c.RowKey[:]...), c.ColumnKey...)
				k = binary.BigEndian.AppendUint64(append(k, 0), uint64(c.RefKey))
				if _, closer, err := db.Get(k); err == nil {
					require.NoError(b, closer.Close())
					b.Fatal("a new key is stored")
				} else {
					require.ErrorIs(b, err, pebble.ErrNotFound)
				}
				require.NoError(b, batch.Set(k, binary.BigEndian.AppendUint64(v[:0], uint64(c.AddedID)), nil))
				// The cell, in its shard's added_id order.
				k = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint16(append(k[:0], 'c'), s), uint64(c.AddedID))
				v = append(append(append(v[:0], c.RowKey[:]...), c.ColumnKey...), 0)
				v = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(v, uint64(c.RefKey)), uint64(c.CreatedAt.UnixMicro()))
				require.NoError(b, batch.Set(k, append(v, c.Body...), nil))
			}
			for _, r := range rs {
				require.NoError(b, batch.Set(append(append(k[:0], 'r'), r.ID[:]...), append(binary.BigEndian.AppendUint64(v[:0], uint64(r.CreatedAt.UnixMicro())), r.Record...), nil))
				k = append(binary.BigEndian.AppendUint64(append(k[:0], 't'), uint64(r.CreatedAt.UnixMicro())), r.ID[:]...)
				require.NoError(b, batch.Set(k, nil, nil))
			}
			require.NoError(b, batch.Set([]byte("meta"), binary.BigEndian.AppendUint64(v[:0], uint64(i+1)), nil))
			require.NoError(b, batch.Commit(pebble.NoSync))
			require.NoError(b, batch.Close())
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*perEntry), "µs/cell")
	})
}
