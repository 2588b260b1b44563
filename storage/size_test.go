package storage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// TestShardSizes: after a flush, a shard holding twice the cells of another takes about twice
// its bytes, an empty shard next to nothing, and a shard outside the partition, or a SQL store, is refused.
func TestShardSizes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pebbleEnv(t).open(t)
	p := openPartition(t, s, "trips", 1, 8, 11)
	byShard := map[int][]cells.Cell{}
	for i := range 3000 {
		shard := 9
		if i%3 == 0 {
			shard = 8
		}
		byShard[shard] = append(byShard[shard], mkCell(t, i, "BASE", 1, int64(len(byShard[shard])+1)))
	}
	write(t, p, byShard, AppliedState{Index: 1, Term: 1})
	require.NoError(t, s.Flush())
	sizes, err := p.ShardSizes(ctx, cells.ShardRange{First: 8, Last: 11})
	require.NoError(t, err)
	require.Len(t, sizes, 4)
	assert.Greater(t, sizes[0], int64(1000*50), "shard 8: 1,000 cells of some 100 bytes")
	assert.InDelta(t, 2.0, float64(sizes[1])/float64(sizes[0]), 0.4, "shard 9 holds twice the cells of shard 8: %v", sizes)
	// An estimate: an empty shard whose keys would sit in a data block of its neighbour's
	// counts that block.
	assert.Less(t, sizes[2]+sizes[3], sizes[0]/10, "shards 10 and 11 are empty: %v", sizes)
	_, err = p.ShardSizes(ctx, cells.ShardRange{First: 8, Last: 12})
	assert.ErrorIs(t, err, ErrShardRange)
	sq := openPartition(t, sqliteEnv(t).open(t), "trips", 1, 8, 11)
	_, err = sq.ShardSizes(ctx, cells.ShardRange{First: 8, Last: 11})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}
