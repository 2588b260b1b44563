package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// TestShardSizes, on every engine: a shard of 1,000 cells of some 2,000 bytes is estimated at
// 2 MB or more (InnoDB allocates a table's pages by extents of 1 MiB past its first 32 pages,
// so smaller tables would all look alike there), a shard holding twice its cells at about twice its bytes, the empty shards
// of the range at little, and a shard outside the partition is refused. Pebble counts flushed
// sstables (Flush first); MySQL counts InnoDB's statistics (ANALYZE TABLE first, as InnoDB
// does in the background once a tenth of a table changed).
func TestShardSizes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		p := openPartition(t, s, "trips", 1, 8, 11)
		rng := rand.New(rand.NewPCG(1, 2)) // bodies that do not compress
		byShard := map[int][]cells.Cell{}
		for i := range 3000 {
			shard := 9
			if i%3 == 0 {
				shard = 8
			}
			c := mkCell(t, i, "BASE", 1, int64(len(byShard[shard])+1))
			pad := make([]byte, 1000)
			for j := range pad {
				pad[j] = byte(rng.IntN(256))
			}
			c.Body = body(t, fmt.Sprintf(`{"row":%d,"pad":"%x"}`, i, pad))
			byShard[shard] = append(byShard[shard], c)
		}
		write(t, p, byShard, AppliedState{Index: 1, Term: 1})
		require.NoError(t, s.Flush())
		if e.name == EngineMySQL {
			for sh := 8; sh <= 11; sh++ {
				rows, err := p.write.QueryContext(ctx, "ANALYZE TABLE "+p.d.entity(sh))
				require.NoError(t, err, "ANALYZE TABLE shard %d", sh)
				require.NoError(t, rows.Close())
			}
		}
		sizes, err := p.ShardSizes(ctx, cells.ShardRange{First: 8, Last: 11})
		require.NoError(t, err)
		require.Len(t, sizes, 4)
		t.Logf("%s: shard sizes %v", e.name, sizes)
		assert.Greater(t, sizes[0], int64(1000*2000), "shard 8: 1,000 cells of some 2,000 bytes")
		assert.InDelta(t, 2.0, float64(sizes[1])/float64(sizes[0]), 0.5, "shard 9 holds twice the cells of shard 8: %v", sizes)
		// Estimates: pebble may count a data block of a neighbour's keys, MySQL an empty
		// table's first pages.
		assert.Less(t, sizes[2]+sizes[3], sizes[0]/5, "shards 10 and 11 are empty: %v", sizes)
		_, err = p.ShardSizes(ctx, cells.ShardRange{First: 8, Last: 12})
		assert.ErrorIs(t, err, ErrShardRange)
	})
}

// ShardSizes asked while its pebble Store closes (the size sampler runs beside the node's
// shutdown) answers sizes until the close and ErrClosed after it, never reading the database
// while it closes: under -race the test failed on pebble's table cache, and a call after the
// close could reach the closed database.
func TestShardSizesDuringClose(t *testing.T) {
	s := pebbleEnv(t).open(t)
	p := openPartition(t, s, "sizes", 0, 0, 7)
	fillShards(t, p, 0, 200, map[int]int64{})
	require.NoError(t, s.Flush())
	r := cells.ShardRange{First: 0, Last: 7}
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			if i == 1 {
				close(started)
			}
			if _, err := p.ShardSizes(context.Background(), r); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case <-started:
	case err := <-done:
		require.NoError(t, err, "ShardSizes before the close")
	}
	require.NoError(t, s.Close())
	assert.ErrorIs(t, <-done, ErrClosed, "ShardSizes after the Store closed")
}
