package storage

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/stretchr/testify/require"
)

// benchEngines runs fn as a sub-benchmark per engine.
func benchEngines(b *testing.B, fn func(b *testing.B, p *PartitionStore)) {
	for _, name := range []string{EngineSQLite, EngineMySQL, EnginePebble} {
		b.Run(name, func(b *testing.B) {
			var e *engineEnv
			switch name {
			case EngineSQLite:
				e = sqliteEnv(b)
			case EnginePebble:
				e = pebbleEnv(b)
			default:
				e = mysqlEnv(b)
			}
			fn(b, openPartition(b, e.open(b), "bench", 0, 0, 3))
		})
	}
}

// benchWrite is the FSM's write path for one batch of n cells spread over 4 shards: Begin,
// Lookup of the batch's keys per shard (none exist), Insert per shard, SetApplied, Commit.
func benchWrite(b *testing.B, n int) {
	benchEngines(b, func(b *testing.B, p *PartitionStore) {
		ctx := context.Background()
		require.NoError(b, p.EnsureShards(ctx, []int{0, 1, 2, 3}), "EnsureShards")
		// A realistic body: a trip record of about 200 bytes of JSON.
		bd, err := cells.EncodeBody([]byte(`{"driver":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","rider":"123e4567-e89b-12d3-a456-426614174000",` +
			`"origin":"LAX","destination":"SFO","fare":{"amount":4250,"currency":"USD"},"status":"completed","distance_m":543210}`))
		require.NoError(b, err, "encode the body")
		added := [4]int64{}
		byShard := make([][]cells.Cell, 4)
		keys := make([][]cells.Key, 4)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			now := time.Now()
			for s := range byShard {
				byShard[s], keys[s] = byShard[s][:0], keys[s][:0]
			}
			for j := 0; j < n; j++ {
				s := j % 4
				added[s]++
				c := cells.Cell{
					Key:       cells.Key{RowKey: uuid.New(), ColumnKey: "base", RefKey: 1},
					Body:      bd,
					AddedID:   added[s],
					CreatedAt: now,
				}
				byShard[s] = append(byShard[s], c)
				keys[s] = append(keys[s], c.Key)
			}
			tx, err := p.Begin(ctx)
			require.NoError(b, err, "Begin")
			for s := range byShard {
				if len(keys[s]) == 0 {
					continue
				}
				found, err := tx.Lookup(ctx, s, keys[s])
				require.NoError(b, err, "Lookup")
				require.Empty(b, found, "Lookup: cells found for new keys")
				require.NoError(b, tx.Insert(ctx, s, byShard[s]), "Insert")
			}
			require.NoError(b, tx.SetApplied(ctx, AppliedState{Index: uint64(i + 1), Term: 1}), "SetApplied")
			require.NoError(b, tx.Commit(), "Commit")
		}
		b.StopTimer()
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "cells/s")
	})
}

func BenchmarkInsertBatch1(b *testing.B)    { benchWrite(b, 1) }
func BenchmarkInsertBatch100(b *testing.B)  { benchWrite(b, 100) }
func BenchmarkInsertBatch1000(b *testing.B) { benchWrite(b, 1000) }

// writeBenchCells writes 10000 cells of column "base" into shard 0 of p, each its own row,
// with the applied state at index 1, and returns them.
func writeBenchCells(b *testing.B, p *PartitionStore) []cells.Cell {
	cs := make([]cells.Cell, 10000)
	for i := range cs {
		cs[i] = mkCell(b, i, "base", 1, int64(i+1))
	}
	write(b, p, map[int][]cells.Cell{0: cs}, AppliedState{Index: 1, Term: 1})
	return cs
}

// BenchmarkGetCell reads one cell by key among 10000.
func BenchmarkGetCell(b *testing.B) {
	benchEngines(b, func(b *testing.B, p *PartitionStore) {
		cs := writeBenchCells(b, p)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			_, err := p.GetCell(ctx, 0, cs[i%len(cs)].Key)
			require.NoError(b, err, "GetCell")
		}
	})
}

// BenchmarkSnapshotScan streams a shard of 10000 cells through a snapshot.
func BenchmarkSnapshotScan(b *testing.B) {
	benchEngines(b, func(b *testing.B, p *PartitionStore) {
		cs := writeBenchCells(b, p)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s, err := p.BeginSnapshot(ctx)
			require.NoError(b, err, "BeginSnapshot")
			n := 0
			require.NoError(b, s.ScanShard(ctx, 0, func(cells.Cell) error { n++; return nil }), "ScanShard")
			require.Equal(b, len(cs), n, "ScanShard: cells scanned")
			s.Close()
		}
		b.ReportMetric(float64(len(cs))*float64(b.N)/b.Elapsed().Seconds(), "cells/s")
	})
}

// BenchmarkGetSnapshotLatest reads the latest cell of one column with the applied state of the
// same snapshot (on SQLite one statement, on MySQL one read transaction), as a get_cell_latest
// does, from 4 goroutines.
func BenchmarkGetSnapshotLatest(b *testing.B) {
	benchEngines(b, func(b *testing.B, p *PartitionStore) {
		cs := writeBenchCells(b, p)
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(2)
		b.ResetTimer()
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := cs[int(n.Add(1))%len(cs)].Key
				_, found, _, err := p.GetSnapshot(ctx, []SnapshotKey{{Shard: 0, Key: k, Latest: true}})
				if err != nil || !found[0] {
					b.Errorf("GetSnapshot: %v, found %v", err, found)
					return
				}
			}
		})
	})
}

// BenchmarkShareShards is a split: a partition of 16 shards holding 200,000 cells of about
// 200 bytes and 5,000 request records of 500 bytes, its shards 8..15 (about 100,000 cells and
// their shard log entries) handed to another partition of the store. On pebble (ShareShards)
// the cells stay where they are; the request records, the KV rows and the applied state are
// written anew, and one synced batch switches the directory. Before the sharing, the same split
// copied the half: 430 to 452 ms through batches, 144 to 207 ms ingested as sstables
// (BENCHMARKS.md, issue 27). On SQLite, a file per partition: "sqlite" clones the parent's
// file (ShareShards into a partition that has applied nothing, cloneSQLite), "sqlite-attach"
// copies the shards' tables inside SQLite (ShareShards into a partition that applied an
// earlier index: the parent's file attached, INSERT INTO ... SELECT per table),
// "sqlite-restore" through Go as splits did before (Restore fed from a snapshot of the parent,
// cell by cell).
func BenchmarkShareShards(b *testing.B) {
	b.Run("pebble", func(b *testing.B) { benchShareShards(b, pebbleEnv(b), "share") })
	b.Run("sqlite", func(b *testing.B) { benchShareShards(b, sqliteEnv(b), "share") })
	b.Run("sqlite-attach", func(b *testing.B) { benchShareShards(b, sqliteEnv(b), "attach") })
	b.Run("sqlite-restore", func(b *testing.B) { benchShareShards(b, sqliteEnv(b), "restore") })
}

// benchShareShards runs BenchmarkShareShards on env; mode is "share", "attach" (the new
// partition has applied index 1 before the split) or "restore".
func benchShareShards(b *testing.B, env *engineEnv, mode string) {
	ctx := context.Background()
	s := env.open(b)
	src := openPartition(b, s, "bench", 0, 0, 15)
	shards := make([]int, 16)
	for i := range shards {
		shards[i] = i
	}
	require.NoError(b, src.EnsureShards(ctx, shards), "EnsureShards")
	bd, err := cells.EncodeBody([]byte(`{"driver":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","rider":"123e4567-e89b-12d3-a456-426614174000",` +
		`"origin":"LAX","destination":"SFO","fare":{"amount":4250,"currency":"USD"},"status":"completed","distance_m":543210}`))
	require.NoError(b, err, "encode the body")
	const total, batch, records = 200_000, 1000, 5000
	added := make([]int64, 16)
	now := time.Now()
	for i := 0; i < total/batch; i++ {
		tx, err := src.Begin(ctx)
		require.NoError(b, err, "Begin")
		byShard := map[int][]cells.Cell{}
		for j := 0; j < batch; j++ {
			k := cells.Key{RowKey: uuid.New(), ColumnKey: "base", RefKey: 1}
			sh := cells.ShardOf(k.RowKey, 16)
			added[sh]++
			byShard[sh] = append(byShard[sh], cells.Cell{Key: k, Body: bd, AddedID: added[sh], CreatedAt: now})
		}
		for sh, cs := range byShard {
			require.NoError(b, tx.Insert(ctx, sh, cs), "Insert")
		}
		reqs := make([]RequestRecord, records/(total/batch))
		for j := range reqs {
			reqs[j] = RequestRecord{ID: uuid.New(), CreatedAt: now, Record: bytes.Repeat([]byte{byte(j)}, 500)}
		}
		require.NoError(b, tx.PutRequests(ctx, reqs), "PutRequests")
		require.NoError(b, tx.SetApplied(ctx, AppliedState{Index: uint64(i + 1), Term: 1}), "SetApplied")
		require.NoError(b, tx.Commit(), "Commit")
	}
	require.NoError(b, s.Flush(), "flush the loaded cells")
	right := cells.ShardRange{First: 8, Last: 15}
	next := 1
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dst := openPartition(b, s, "bench", next, 8, 15)
		next++
		if mode == "attach" {
			tx, err := dst.Begin(ctx)
			require.NoError(b, err, "Begin")
			require.NoError(b, tx.SetApplied(ctx, AppliedState{Index: 1, Term: 1}), "SetApplied")
			require.NoError(b, tx.Commit(), "Commit")
		}
		b.StartTimer()
		snap, err := src.BeginSnapshot(ctx)
		require.NoError(b, err, "BeginSnapshot")
		if mode == "restore" {
			require.NoError(b, dst.Restore(ctx, AppliedState{Index: 2, Term: 1}, shardRecords(ctx, snap, right), nil, nil), "Restore")
		} else {
			require.NoError(b, dst.ShareShards(ctx, snap, right, nil, AppliedState{Index: 2, Term: 1}), "ShareShards")
		}
		require.NoError(b, snap.Close(), "close the snapshot")
	}
	b.StopTimer()
}

// shardRecords returns the cells of shards r of snap, one RestoreRecord each, for Restore.
func shardRecords(ctx context.Context, snap *SnapshotTx, r cells.ShardRange) func() (RestoreRecord, error) {
	ch := make(chan RestoreRecord, 1024)
	errc := make(chan error, 1)
	go func() {
		defer close(ch)
		for s := r.First; s <= r.Last; s++ {
			if err := snap.ScanShard(ctx, s, func(c cells.Cell) error { ch <- RestoreRecord{Shard: s, Cell: c}; return nil }); err != nil {
				errc <- err
				return
			}
		}
	}()
	return func() (RestoreRecord, error) {
		if rec, ok := <-ch; ok {
			return rec, nil
		}
		select {
		case err := <-errc:
			return RestoreRecord{}, err
		default:
			return RestoreRecord{}, io.EOF
		}
	}
}
