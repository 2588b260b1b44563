package storage

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// fillShards inserts n cells (rows from first) into p, whose range holds the datastore's 8
// shards or some of them, each after the shard's highest added_id (added), and returns the
// cells by shard.
func fillShards(t *testing.T, p *PartitionStore, first, n int, added map[int]int64) map[int][]cells.Cell {
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	out := map[int][]cells.Cell{}
	for i := first; len(out) == 0 || count(out) < n; i++ {
		c := mkCell(t, i, "BASE", 1, 0)
		sh := cells.ShardOf(c.Key.RowKey, 8)
		if !p.Shards().Contains(sh) {
			continue
		}
		added[sh]++
		c.AddedID = added[sh]
		require.NoError(t, tx.Insert(ctx, sh, []cells.Cell{c}), "insert row %d", i)
		out[sh] = append(out[sh], c)
	}
	require.NoError(t, tx.Commit())
	return out
}

func count(m map[int][]cells.Cell) int {
	n := 0
	for _, cs := range m {
		n += len(cs)
	}
	return n
}

// heldCells returns the keys and added_ids of every cell of p's range, by shard, from a
// snapshot.
func heldCells(t *testing.T, p *PartitionStore) map[int][]cells.Cell {
	ctx := context.Background()
	snap, err := p.BeginSnapshot(ctx)
	require.NoError(t, err)
	defer snap.Close()
	out := map[int][]cells.Cell{}
	for sh := p.Shards().First; sh <= p.Shards().Last; sh++ {
		require.NoError(t, snap.ScanShard(ctx, sh, func(c cells.Cell) error {
			out[sh] = append(out[sh], cells.Cell{Key: c.Key, AddedID: c.AddedID})
			return nil
		}), "scan shard %d", sh)
	}
	return out
}

// keysOnly strips cells to their keys and added_ids, as heldCells returns them.
func keysOnly(m map[int][]cells.Cell, r cells.ShardRange) map[int][]cells.Cell {
	out := map[int][]cells.Cell{}
	for sh, cs := range m {
		if !r.Contains(sh) {
			continue
		}
		for _, c := range cs {
			out[sh] = append(out[sh], cells.Cell{Key: c.Key, AddedID: c.AddedID})
		}
	}
	return out
}

func merge(ms ...map[int][]cells.Cell) map[int][]cells.Cell {
	out := map[int][]cells.Cell{}
	for _, m := range ms {
		for sh, cs := range m {
			out[sh] = append(out[sh], cs...)
		}
	}
	return out
}

// cellKeys counts the cell and log keys of every generation of the store: what a leak of a
// shared generation would leave behind.
func cellKeys(t *testing.T, s *Store) int {
	it, err := s.pebble.db.NewIter(nil)
	require.NoError(t, err)
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) > dataPrefixLen && k[0] == dataTag && (k[dataPrefixLen] == tagCell || k[dataPrefixLen] == tagLog) {
			n++
		}
	}
	return n
}

// split shares shards r of parent with child as the state machine's split does: ShareShards,
// then the parent's transaction that lets them go.
func split(t *testing.T, parent, child *PartitionStore, r cells.ShardRange, applied AppliedState) {
	ctx := context.Background()
	snap, err := parent.BeginSnapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, child.ShareShards(ctx, snap, r, []KV{{Key: "k", Value: []byte("v")}}, applied), "ShareShards")
	require.NoError(t, snap.Close())
	tx, err := parent.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.ReleaseShards(ctx, r), "ReleaseShards")
	require.NoError(t, tx.SetApplied(ctx, applied))
	require.NoError(t, tx.Commit())
	parent.SetShards(cells.ShardRange{First: parent.Shards().First, Last: r.First - 1})
	// As the right half's state machine does when it starts: its range is the one its file
	// stores. On SQLite both halves then drop the other's tables (strays.go).
	child.SetShards(r)
	waitStrays(t, parent)
	waitStrays(t, child)
}

// reset empties p as a replica's reset and a merged partition's retirement do: a Restore of
// nothing.
func reset(t *testing.T, p *PartitionStore) {
	require.NoError(t, p.Restore(context.Background(), AppliedState{}, func() (RestoreRecord, error) { return RestoreRecord{}, io.EOF }, nil, nil), "empty Restore")
}

// TestShareShardsLifecycle: a split shares the right half's cells in place (request records,
// KV rows and the applied state are the right partition's own) and each partition then writes,
// restarts, merges, restores and retires without touching the other's shards, and once every
// partition is emptied no cell key is left in any generation.
func TestShareShardsLifecycle(t *testing.T) {
	ctx := context.Background()
	for _, path := range []struct {
		name     string
		min, cut uint64
	}{{"request records through batches", 1 << 62, 1 << 62}, {"request records ingested", 0, 1 << 62}, {"request records ingested in parts", 0, 0}} {
		t.Run(path.name, func(t *testing.T) {
			old, oldCut := ingestMinBytes, copySplitBytes
			ingestMinBytes, copySplitBytes = path.min, path.cut
			t.Cleanup(func() { ingestMinBytes, copySplitBytes = old, oldCut })
			env := pebbleEnv(t)
			s := env.open(t)
			all, left, right := cells.ShardRange{First: 0, Last: 7}, cells.ShardRange{First: 0, Last: 3}, cells.ShardRange{First: 4, Last: 7}
			src := openPartition(t, s, "share", 0, 0, 7)
			added := map[int]int64{}
			first := fillShards(t, src, 0, 400, added)
			tx, err := src.Begin(ctx)
			require.NoError(t, err)
			req := RequestRecord{ID: uuid.New(), CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Record: []byte("outcome")}
			require.NoError(t, tx.InsertRequests(ctx, []RequestRecord{req}))
			require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 7, Term: 1}))
			require.NoError(t, tx.Commit())
			require.NoError(t, s.Flush(), "flush: the ingested path reads tables")

			dst := openPartition(t, s, "share", 1, 4, 7)
			split(t, src, dst, right, AppliedState{Index: 9, Term: 1})
			got, err := dst.BeginSnapshot(ctx)
			require.NoError(t, err)
			assert.Equal(t, AppliedState{Index: 9, Term: 1}, got.Applied(), "applied state of the right half")
			var rows []KV
			require.NoError(t, got.ScanKV(ctx, func(r KV) error { rows = append(rows, r); return nil }))
			assert.Contains(t, rows, KV{Key: "k", Value: []byte("v")}, "KV rows of the right half")
			var reqs []RequestRecord
			require.NoError(t, got.ScanRequests(ctx, func(r RequestRecord) error { reqs = append(reqs, r); return nil }))
			assert.Equal(t, []RequestRecord{req}, reqs, "request records of the right half")
			require.NoError(t, got.Close())
			assert.Equal(t, keysOnly(first, right), heldCells(t, dst), "the right half's cells, shared in place")
			assert.Equal(t, keysOnly(first, left), heldCells(t, src), "the parent's cells")

			// Both write after the split; a restart (which collects unnamed generations) keeps all.
			more := merge(fillShards(t, src, 1000, 50, added), fillShards(t, dst, 2000, 50, added))
			want := merge(first, more)
			s = env.open(t)
			src, dst = openPartition(t, s, "share", 0, 0, 3), openPartition(t, s, "share", 1, 4, 7)
			assert.Equal(t, keysOnly(want, left), heldCells(t, src), "the parent's cells after a restart")
			assert.Equal(t, keysOnly(want, right), heldCells(t, dst), "the right half's cells after a restart")

			// A merge takes the right half back in place; retiring it leaves the merged cells.
			snap, err := dst.BeginSnapshot(ctx)
			require.NoError(t, err)
			tx, err = src.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.AbsorbShards(ctx, snap, right, nil, nil), "AbsorbShards")
			require.NoError(t, tx.Commit())
			require.NoError(t, snap.Close())
			src.SetShards(all)
			reset(t, dst)
			assert.Equal(t, keysOnly(want, all), heldCells(t, src), "the merged partition's cells, the retired one emptied")
			s = env.open(t)
			src = openPartition(t, s, "share", 0, 0, 7)
			assert.Equal(t, keysOnly(want, all), heldCells(t, src), "the merged partition's cells after a restart")

			// Split again; a reset of either partition (a replica replaced by a snapshot) leaves
			// the other's cells; emptying both leaves no cell key anywhere.
			dst2 := openPartition(t, s, "share", 2, 4, 7)
			split(t, src, dst2, right, AppliedState{Index: 20, Term: 2})
			reset(t, dst2)
			assert.Equal(t, keysOnly(want, left), heldCells(t, src), "the parent's cells after the right half's reset")
			assert.Empty(t, heldCells(t, dst2), "the reset right half")
			assert.Equal(t, 2*count(keysOnly(want, left)), cellKeys(t, s), "cell keys in the store after the right half's reset: the parent's (a unique key and a log entry each)")
			dst3 := openPartition(t, s, "share", 3, 2, 3)
			split(t, src, dst3, cells.ShardRange{First: 2, Last: 3}, AppliedState{Index: 30, Term: 2})
			reset(t, src)
			assert.Equal(t, keysOnly(want, cells.ShardRange{First: 2, Last: 3}), heldCells(t, dst3), "the right half's cells after the parent's reset")
			reset(t, dst3)
			assert.Zero(t, cellKeys(t, s), "cell keys left once every partition is emptied")
		})
	}
}
