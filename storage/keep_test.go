package storage

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// Release of a SQLite partition keeps its open pools for the next Partition call of it, which
// opens on them and reads what was written; the released store refuses calls. Pools nobody
// takes within the keep time are closed, and the next Partition opens new ones. RemovePartition
// and the Store's Close close kept pools.
func TestReleaseKeepsPools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := sqliteEnv(t)
	s := env.open(t)
	s.keepFor = 300 * time.Millisecond
	r := cells.ShardRange{First: 0, Last: 3}
	p := openPartition(t, s, "keep", 0, 0, 3)
	require.NoError(t, p.EnsureShards(ctx, []int{0, 1, 2, 3}))
	added := map[int]int64{}
	all := fillShards(t, p, 0, 50, added)
	write := p.write
	require.NoError(t, p.Release())
	_, err := p.Applied(ctx)
	assert.ErrorIs(t, err, ErrClosed, "a call on a released store")
	assert.NoError(t, write.PingContext(ctx), "the released store's pools are open")

	again, err := s.Partition(ctx, p.ID(), r)
	require.NoError(t, err)
	assert.Same(t, write, again.write, "the next Partition opens on the kept pools")
	assert.Equal(t, keysOnly(all, r), heldCells(t, again), "the cells, read through the kept pools")
	all = merge(all, fillShards(t, again, 1000, 20, added))

	require.NoError(t, again.Release())
	assert.Eventually(t, func() bool { return write.PingContext(ctx) != nil }, 5*time.Second, 20*time.Millisecond,
		"kept pools closed once the keep time passed")
	third, err := s.Partition(ctx, p.ID(), r)
	require.NoError(t, err)
	assert.NotSame(t, write, third.write, "a Partition after the keep time opens new pools")
	assert.Equal(t, keysOnly(all, r), heldCells(t, third), "the cells after the kept pools were closed")

	write = third.write
	require.NoError(t, third.Release())
	require.NoError(t, s.RemovePartition(ctx, p.ID()))
	assert.Error(t, write.PingContext(ctx), "kept pools closed by RemovePartition")
	_, err = os.Stat(sqlitePath(s.sqliteDir, p.ID()))
	assert.ErrorIs(t, err, os.ErrNotExist, "the removed partition's file")

	other := openPartition(t, s, "keep", 1, 0, 3)
	write = other.write
	require.NoError(t, other.Release())
	require.NoError(t, s.Close())
	assert.Error(t, write.PingContext(ctx), "kept pools closed by the Store's Close")
}
