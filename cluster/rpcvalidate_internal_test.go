package cluster

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/topology"
)

// The node RPC refuses what no public request could have produced (issue 19's probe: a put of
// column "../../BAD COLUMN; DROP TABLE", ref key -5 and a body that is not zlib was stored).
func TestValidateWrite(t *testing.T) {
	ds := &topology.DatastoreSpec{Name: "trips", Shards: 8}
	p := &topology.PartitionSpec{ID: 0, FirstShard: 0, LastShard: 3}
	var row uuid.UUID
	for row = uuid.New(); cells.ShardOf(row, 8) > 3; row = uuid.New() {
	}
	var other uuid.UUID
	for other = uuid.New(); cells.ShardOf(other, 8) <= 3; other = uuid.New() {
	}
	shard := cells.ShardOf(row, 8)
	good, err := cells.EncodeBody([]byte(`{"fare":10}`))
	require.NoError(t, err)
	cell := func(row uuid.UUID, shard int, col string, ref int64, body cells.Body) command.Cell {
		return command.Cell{Shard: shard, Key: cells.Key{RowKey: row, ColumnKey: col, RefKey: ref}, Body: body}
	}
	ok := command.Write{Cells: []command.Cell{cell(row, shard, "BASE", 1, good)},
		Conditions: []command.Condition{{Shard: shard, RowKey: row, ColumnKey: "BASE", LatestRefKey: 0}}}
	require.NoError(t, validateWrite(ds, p, &ok), "a write the API would send")
	for name, w := range map[string]command.Write{
		"a column key with path and SQL": {Cells: []command.Cell{cell(row, shard, "../../BAD COLUMN; DROP TABLE", 1, good)}},
		"a negative ref key":             {Cells: []command.Cell{cell(row, shard, "BASE", -5, good)}},
		"a body that is not zlib":        {Cells: []command.Cell{cell(row, shard, "BASE", 1, cells.Body("not zlib"))}},
		"a shard not the row key's":      {Cells: []command.Cell{cell(row, (shard+1)%4, "BASE", 1, good)}},
		"a row of another partition":     {Cells: []command.Cell{cell(other, cells.ShardOf(other, 8), "BASE", 1, good)}},
		"a condition's bad column":       {Cells: ok.Cells, Conditions: []command.Condition{{Shard: shard, RowKey: row, ColumnKey: "A B"}}},
		"a condition's negative ref key": {Cells: ok.Cells, Conditions: []command.Condition{{Shard: shard, RowKey: row, ColumnKey: "BASE", LatestRefKey: -1}}},
		"a condition's wrong shard":      {Cells: ok.Cells, Conditions: []command.Condition{{Shard: (shard + 1) % 4, RowKey: row, ColumnKey: "BASE"}}},
	} {
		assert.ErrorIs(t, validateWrite(ds, p, &w), ErrBadRPC, name)
	}

	// A write for a shard of a split child of p may reach p (splitFallback); one for a shard
	// of a partition of another lineage may not, nor one for p's shards at its child.
	parent := 0
	ds.Partitions = []topology.PartitionSpec{*p, {ID: 1, FirstShard: 4, LastShard: 7, Parent: &parent}}
	toChild := command.Write{Cells: []command.Cell{cell(other, cells.ShardOf(other, 8), "BASE", 1, good)}}
	require.NoError(t, validateWrite(ds, p, &toChild), "a row of p's split child, sent to p")
	assert.ErrorIs(t, validateWrite(ds, &ds.Partitions[1], &ok), command.ErrShardOutOfRange, "a row of p, sent to its child")
	ds.Partitions[1].Parent = nil
	assert.ErrorIs(t, validateWrite(ds, p, &toChild), command.ErrShardOutOfRange, "a row of a partition not split from p")
}
