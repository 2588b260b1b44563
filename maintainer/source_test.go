package maintainer_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingBackend records what a Source asks of the node and answers with canned values.
type recordingBackend struct {
	read    cluster.LogRead
	pages   []cluster.LogPage
	keys    []cluster.GetKey
	getC    cluster.Consistency
	found   []cluster.ReadResult
	group   string
	cmd     consumer.Command
	result  consumer.Result
	ds      string
	timeout time.Duration
}

func (b *recordingBackend) ReadLogs(ctx context.Context, ds string, req cluster.LogRead) ([]cluster.LogPage, error) {
	b.ds, b.read = ds, req
	if d, ok := ctx.Deadline(); ok {
		b.timeout = time.Until(d)
	}
	return b.pages, nil
}

func (b *recordingBackend) GetCells(_ context.Context, ds string, keys []cluster.GetKey, c cluster.Consistency) ([]cluster.ReadResult, error) {
	b.ds, b.keys, b.getC = ds, keys, c
	return b.found, nil
}

func (b *recordingBackend) GroupApply(_ context.Context, ds, group string, cmd consumer.Command) (consumer.Result, error) {
	b.ds, b.group, b.cmd = ds, group, cmd
	return b.result, nil
}

// The in-process Source maps each call of a worker to the node's call on its datastore: log
// reads (by added_id or from a time, with the consistency asked, bounded by SourceTimeout plus
// the wait), cell reads (a missing cell is ErrCellNotFound) and group commands, as they are.
func TestSourceCalls(t *testing.T) {
	ctx := context.Background()
	key := cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 2}
	be := &recordingBackend{
		pages:  []cluster.LogPage{{Shard: 3, Cells: []cells.Cell{{Key: key, AddedID: 12}}, NextLocation: 12, HighWater: 20}},
		result: consumer.Result{Generation: 4, Accepted: []bool{true}},
	}
	src := maintainer.NewSource(be, "trips")

	pages, err := src.ReadLogs(ctx, triggers.LogRead{Shards: []triggers.ShardLocation{{Shard: 3, Location: 7}}, ColumnKey: "BASE",
		Limit: 50, Wait: time.Second, Consistency: triggers.ConsistencyStale})
	require.NoError(t, err)
	assert.Equal(t, []triggers.Page{{Shard: 3, Cells: []cells.Cell{{Key: key, AddedID: 12}}, NextLocation: 12, HighWater: 20}}, pages)
	assert.Equal(t, "trips", be.ds)
	assert.Equal(t, cluster.LogRead{Shards: []cluster.ShardLocation{{Shard: 3, Location: 7}}, LocationType: cluster.LocationAddedID,
		ColumnKey: "BASE", Limit: 50, Wait: time.Second, Consistency: cluster.Stale}, be.read)
	assert.InDelta(t, (maintainer.SourceTimeout + time.Second).Seconds(), be.timeout.Seconds(), 1, "the read's deadline")

	from := time.Date(2024, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 7200))
	_, err = src.ReadLogs(ctx, triggers.LogRead{Shards: []triggers.ShardLocation{{Shard: 1}}, Time: from, Limit: 1, Consistency: triggers.ConsistencyStrong})
	require.NoError(t, err)
	assert.Equal(t, cluster.LogRead{Shards: []cluster.ShardLocation{{Shard: 1}}, LocationType: cluster.LocationTimestamp, Time: from.UTC(),
		Limit: 1, Consistency: cluster.Strong}, be.read, "a read from a time")

	_, err = src.ReadLogs(ctx, triggers.LogRead{Shards: []triggers.ShardLocation{{Shard: 1}}, Limit: 1, Consistency: "eventual"})
	assert.ErrorIs(t, err, maintainer.ErrBadConsistency)

	_, err = src.GetCell(ctx, key, triggers.ConsistencyStrong)
	assert.ErrorIs(t, err, maintainer.ErrCellNotFound, "a cell the node does not have")
	assert.Equal(t, []cluster.GetKey{{Key: key}}, be.keys)
	assert.Equal(t, cluster.Strong, be.getC)
	be.found = []cluster.ReadResult{{Found: true, Cell: cells.Cell{Key: key, AddedID: 12}}}
	c, err := src.GetCell(ctx, key, triggers.ConsistencyStale)
	require.NoError(t, err)
	assert.Equal(t, cells.Cell{Key: key, AddedID: 12}, c)
	assert.Equal(t, cluster.Stale, be.getC)

	cmd := consumer.Command{Op: consumer.OpCommit, Worker: "n1", Commits: []consumer.Offset{{Shard: 3, Epoch: 2, Offset: 12}}}
	res, err := src.GroupCommand(ctx, "_index.by_city_v1", cmd)
	require.NoError(t, err)
	assert.Equal(t, be.result, res)
	assert.Equal(t, "_index.by_city_v1", be.group)
	assert.Equal(t, cmd, be.cmd)
}

// Validate names every missing field and Run refuses the config.
func TestConfigValidate(t *testing.T) {
	err := maintainer.Config{BatchSize: 5000, PollInterval: -time.Second}.Validate()
	require.ErrorIs(t, err, maintainer.ErrInvalidConfig)
	for _, want := range []string{"Backend is required", "Datastores or DatastoresFunc is required", "PollInterval", "BatchSize 5000"} {
		assert.ErrorContains(t, err, want)
	}
	assert.ErrorIs(t, maintainer.Run(context.Background(), maintainer.Config{}), maintainer.ErrInvalidConfig)
}
