package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// testSplit is a split of trips/2 (shards 0..7) at shard 6 into 2 and 5.
var testSplit = wire.SplitResponse{Generation: 9, Ready: true, TookMillis: 40,
	Left:  wire.CatalogPartition{ID: 2, LastShard: 5, Replicas: []string{"n1", "n2", "n3"}, Generation: 9, Parent: -1},
	Right: wire.CatalogPartition{ID: 5, FirstShard: 6, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}, Generation: 9, Parent: 2}}

// TestSplitRequests checks the method, path and body of SplitPartition (at_shard absent for
// 0), and that its answer decodes into wire.SplitResponse.
func TestSplitRequests(t *testing.T) {
	ctx := context.Background()
	n := newAdminNode(t, answer(200, testSplit))
	c := adminClient(t, n.srv.URL)

	got, err := c.SplitPartition(ctx, "trips", 2, 6)
	require.NoError(t, err)
	assert.Equal(t, testSplit, got)
	got, err = c.SplitPartition(ctx, "trips", 2, 0) // the node picks the middle: 6 here
	require.NoError(t, err)
	assert.Equal(t, testSplit, got)

	assert.Equal(t, []string{"POST /v1/admin/partitions/trips/2/split", "POST /v1/admin/partitions/trips/2/split"}, n.requests())
	assert.Equal(t, `{"at_shard":6}`, string(n.bodies[0]))
	assert.Equal(t, `{}`, string(n.bodies[1]))
}

// TestSplitErrors: a missing datastore or a negative shard is refused unsent; the API's errors
// become their sentinels, each final; an answer about another partition, or halves that do not
// meet at at_shard, is ErrBadResponse. A split answered 503 is retried on the next endpoint;
// one answered 504 or timing out ends indeterminate, the next endpoint not asked.
func TestSplitErrors(t *testing.T) {
	ctx := context.Background()
	otherLeft, gap := testSplit, testSplit
	otherLeft.Left.ID = 3
	gap.Right.FirstShard = 7
	n := newAdminNode(t,
		apiError(400, wire.CodeInvalidArgument, "cluster: at_shard: 9: want 1 to 7", "at_shard"),
		apiError(409, wire.CodeConflict, "cluster: admin operation refused: splitting needs the pebble store", ""),
		apiError(404, wire.CodeNotFound, `cluster: shard out of range: no partition 2 in "trips"`, "partition"),
		answer(200, otherLeft),
		answer(200, gap),
		apiError(501, wire.CodeUnimplemented, "this server has no datastore catalog", ""))
	c := adminClient(t, n.srv.URL)

	_, err := c.SplitPartition(ctx, "", 2, 6)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "SplitPartition without a datastore")
	_, err = c.SplitPartition(ctx, "trips", 2, -1)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "SplitPartition at a negative shard")
	require.Zero(t, n.hits.Load(), "refused calls are not sent")

	var ae *client.APIError
	_, err = c.SplitPartition(ctx, "trips", 2, 9)
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrInvalidArgument)
	assert.Equal(t, "at_shard", ae.Field)
	_, err = c.SplitPartition(ctx, "trips", 2, 6)
	assert.ErrorIs(t, err, client.ErrConflict)
	_, err = c.SplitPartition(ctx, "trips", 2, 6)
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrNotFound)
	assert.Equal(t, "partition", ae.Field)
	_, err = c.SplitPartition(ctx, "trips", 2, 6)
	assert.ErrorIs(t, err, client.ErrBadResponse, "an answer about partition 3")
	_, err = c.SplitPartition(ctx, "trips", 2, 6)
	assert.ErrorIs(t, err, client.ErrBadResponse, "halves that do not meet at shard 6")
	_, err = c.SplitPartition(ctx, "trips", 2, 6)
	assert.ErrorIs(t, err, client.ErrInternal, "a node without a catalog (501)")
	assert.Equal(t, int32(6), n.hits.Load(), "each error of a split is final: one request per call")

	checkChangeRetries(t, answer(200, testSplit), func(c *client.Client) error {
		_, err := c.SplitPartition(ctx, "trips", 2, 6)
		return err
	})
}

// TestSplitThroughAPI sends SplitPartition to package api's server: the partition and at_shard
// reach the catalog as sent (0 as 0: the cluster picks the middle), and a refused at_shard
// comes back with its field.
func TestSplitThroughAPI(t *testing.T) {
	ctx := context.Background()
	cat := &recordingCatalog{}
	c := catalogClient(t, cat)

	res, err := c.SplitPartition(ctx, "trips", 0, 0)
	require.NoError(t, err)
	assert.Equal(t, wire.CatalogPartition{ID: 1, FirstShard: 4, LastShard: 7, Parent: 0}, res.Right, "the right half")
	_, err = c.SplitPartition(ctx, "trips", 1, 6)
	require.NoError(t, err)
	var ae *client.APIError
	_, err = c.SplitPartition(ctx, "trips", 1, 8)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "at_shard", ae.Field, "at_shard 8: %v", err)
	_, err = c.SplitPartition(ctx, "trips", -1, 4)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "partition", ae.Field, "partition -1: %v", err)
	assert.Equal(t, []string{"trips/0@0", "trips/1@6", "trips/1@8"}, cat.splits)
}
