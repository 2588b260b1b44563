package storage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// CopyShards gives the same content through batches and through ingested sstables: every cell
// of the copied shards, with its added_id, and none of the others, the KV rows and the applied
// state it was given; and the source is untouched.
func TestCopyShardsBothPaths(t *testing.T) {
	ctx := context.Background()
	for _, path := range []struct {
		name string
		min  uint64
	}{{"batches", 1 << 62}, {"ingested", 0}} {
		t.Run(path.name, func(t *testing.T) {
			old := ingestMinBytes
			ingestMinBytes = path.min
			t.Cleanup(func() { ingestMinBytes = old })
			s := pebbleEnv(t).open(t)
			src := openPartition(t, s, "copy", 0, 0, 7)
			require.NoError(t, src.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}), "EnsureShards")
			tx, err := src.Begin(ctx)
			require.NoError(t, err)
			want := map[int][]cells.Cell{}
			added := map[int]int64{}
			for i := 0; i < 400; i++ {
				c := mkCell(t, i, "BASE", 1, 0)
				sh := cells.ShardOf(c.Key.RowKey, 8)
				added[sh]++
				c.AddedID = added[sh]
				require.NoError(t, tx.Insert(ctx, sh, []cells.Cell{c}), "insert row %d", i)
				want[sh] = append(want[sh], c)
			}
			require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 7, Term: 1}))
			require.NoError(t, tx.Commit())
			require.NoError(t, s.Flush(), "flush: the ingested path reads tables")

			dst := openPartition(t, s, "copy", 1, 4, 7)
			snap, err := src.BeginSnapshot(ctx)
			require.NoError(t, err)
			right := cells.ShardRange{First: 4, Last: 7}
			kv := []KV{{Key: "k", Value: []byte("v")}}
			require.NoError(t, dst.CopyShards(ctx, snap, right, kv, AppliedState{Index: 9, Term: 1}), "CopyShards")
			require.NoError(t, snap.Close())

			got, err := dst.BeginSnapshot(ctx)
			require.NoError(t, err)
			defer got.Close()
			assert.Equal(t, AppliedState{Index: 9, Term: 1}, got.Applied(), "applied state of the copy")
			for sh := 4; sh <= 7; sh++ {
				var cs []cells.Cell
				require.NoError(t, got.ScanShard(ctx, sh, func(c cells.Cell) error { cs = append(cs, c); return nil }), "scan shard %d", sh)
				require.Len(t, cs, len(want[sh]), "cells of shard %d in the copy", sh)
				for i, c := range cs {
					assert.Equal(t, want[sh][i].Key, c.Key, "shard %d cell %d", sh, i)
					assert.Equal(t, want[sh][i].AddedID, c.AddedID, "shard %d cell %d added_id", sh, i)
				}
			}
			var rows []KV
			require.NoError(t, got.ScanKV(ctx, func(r KV) error { rows = append(rows, r); return nil }))
			assert.Contains(t, rows, KV{Key: "k", Value: []byte("v")}, "KV rows of the copy")
			again, err := src.BeginSnapshot(ctx)
			require.NoError(t, err)
			defer again.Close()
			n := 0
			for sh := 0; sh <= 7; sh++ {
				require.NoError(t, again.ScanShard(ctx, sh, func(cells.Cell) error { n++; return nil }))
			}
			assert.Equal(t, 400, n, "cells of the source after the copy")
		})
	}
}
