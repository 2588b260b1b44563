package storage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// On SQLite a split copies the right half's shards into its file (Restore) and DropShards then
// drops their tables from the parent's file, in the transaction: the shards left keep their
// cells, the dropped ones read as empty, and their tables are gone from the file.
func TestDropShardsSQLite(t *testing.T) {
	ctx := context.Background()
	s := sqliteEnv(t).open(t)
	p := openPartition(t, s, "drop", 0, 0, 7)
	require.NoError(t, p.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	filled := fillShards(t, p, 0, 200, map[int]int64{})
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.DropShards(ctx, cells.ShardRange{First: 4, Last: 7}), "DropShards 4..7")
	require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 3, Term: 1}))
	require.NoError(t, tx.Commit())
	p.SetShards(cells.ShardRange{First: 0, Last: 3})
	for sh := 0; sh <= 3; sh++ {
		got, err := p.ScanShard(ctx, sh, 0, 1000)
		require.NoError(t, err, "scan shard %d", sh)
		assert.Len(t, got, len(filled[sh]), "cells of shard %d, which stays", sh)
	}
	var tables int
	require.NoError(t, p.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'entity\_%' ESCAPE '\'`).Scan(&tables))
	assert.Equal(t, 4, tables, "entity tables left in the parent's file")
	require.Greater(t, len(filled[5]), 0, "cells were written to shard 5")
}
