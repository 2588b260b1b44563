package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// testMerge is a merge of trips/3 (shards 4..7) into trips/2 (shards 0..3).
var testMerge = wire.MergeResponse{Generation: 11, TookMillis: 60, PauseMillis: 7,
	Merged: wire.CatalogPartition{ID: 2, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}, Generation: 11, Parent: -1}}

// TestMergeRequests checks the method, path and body of MergePartitions (both partitions
// sent, 0 too; the datastore escaped in the path), and that its answer decodes into
// wire.MergeResponse.
func TestMergeRequests(t *testing.T) {
	ctx := context.Background()
	n := newAdminNode(t, answer(200, testMerge), answer(200, wire.MergeResponse{Merged: wire.CatalogPartition{ID: 0, LastShard: 7}}))
	c := adminClient(t, n.srv.URL)

	got, err := c.MergePartitions(ctx, "trips", 2, 3)
	require.NoError(t, err)
	assert.Equal(t, testMerge, got)
	got, err = c.MergePartitions(ctx, "a b", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, 0, got.Merged.ID)

	assert.Equal(t, []string{"POST /v1/admin/partitions/trips/merge", "POST /v1/admin/partitions/a%20b/merge"}, n.requests())
	assert.Equal(t, `{"left":2,"right":3}`, string(n.bodies[0]))
	assert.Equal(t, `{"left":0,"right":1}`, string(n.bodies[1]))
}

// TestMergeErrors: a missing datastore, a negative partition or the same partition twice is
// refused unsent; the API's errors become their sentinels, each final; an answer about
// another partition is ErrBadResponse. A merge answered 503 is retried on the next endpoint;
// one answered 504 or timing out ends indeterminate, the next endpoint not asked.
func TestMergeErrors(t *testing.T) {
	ctx := context.Background()
	other := testMerge
	other.Merged.ID = 3
	n := newAdminNode(t,
		apiError(400, wire.CodeInvalidArgument, "cluster: right: partition 4 does not follow partition 2", "right"),
		apiError(409, wire.CodeConflict, "cluster: admin operation refused: merging needs the pebble store", ""),
		apiError(404, wire.CodeNotFound, `cluster: shard out of range: no partition 3 in "trips"`, "partition"),
		answer(200, other),
		apiError(501, wire.CodeUnimplemented, "this server has no datastore catalog", ""))
	c := adminClient(t, n.srv.URL)

	for _, tc := range []struct {
		name        string
		ds          string
		left, right int
	}{
		{"without a datastore", "", 2, 3},
		{"with a negative left", "trips", -1, 3},
		{"with a negative right", "trips", 2, -3},
		{"of one partition", "trips", 2, 2},
	} {
		_, err := c.MergePartitions(ctx, tc.ds, tc.left, tc.right)
		assert.ErrorIs(t, err, client.ErrInvalidArgument, "MergePartitions %s", tc.name)
	}
	require.Zero(t, n.hits.Load(), "refused calls are not sent")

	for _, want := range []struct {
		err        error
		field, why string
	}{
		{client.ErrInvalidArgument, "right", "400 naming right"},
		{client.ErrConflict, "", "409"},
		{client.ErrNotFound, "partition", "404 naming partition"},
		{client.ErrBadResponse, "", "an answer about partition 3"},
		{client.ErrInternal, "", "a node without a catalog (501)"},
	} {
		_, err := c.MergePartitions(ctx, "trips", 2, 3)
		assert.ErrorIs(t, err, want.err, want.why)
		var ae *client.APIError
		if want.field != "" && assert.ErrorAs(t, err, &ae, want.why) {
			assert.Equal(t, want.field, ae.Field, want.why)
		}
	}
	assert.Equal(t, int32(5), n.hits.Load(), "each error of a merge is final: one request per call")

	checkChangeRetries(t, answer(200, testMerge), func(c *client.Client) error {
		_, err := c.MergePartitions(ctx, "trips", 2, 3)
		return err
	})
}

// TestMergeThroughAPI sends MergePartitions to package api's server: the datastore, left and
// right reach the catalog as sent (partition 0 too), and a refused right comes back with its
// field.
func TestMergeThroughAPI(t *testing.T) {
	ctx := context.Background()
	cat := &recordingCatalog{}
	c := catalogClient(t, cat)

	res, err := c.MergePartitions(ctx, "trips", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, wire.MergeResponse{Generation: 3, TookMillis: 20, PauseMillis: 2, Merged: wire.CatalogPartition{ID: 0, LastShard: 7, Parent: -1}}, res)
	var ae *client.APIError
	_, err = c.MergePartitions(ctx, "trips", 1, 3)
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrInvalidArgument)
	assert.Equal(t, "right", ae.Field, "right 3 after left 1: %v", err)
	assert.Equal(t, []string{"trips/0+1", "trips/1+3"}, cat.merges)
}
