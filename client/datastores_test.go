package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

var testDatastoreInfo = wire.DatastoreInfo{Name: "users", Mode: "raft", Shards: 8, Created: 4,
	Partitions: []wire.CatalogPartition{{ID: 0, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}, Generation: 4, Parent: -1}}}

// TestDatastoreRequests checks the method, path, query and body of the catalog calls, and that
// their answers decode into their wire shapes.
func TestDatastoreRequests(t *testing.T) {
	ctx := context.Background()
	n := newAdminNode(t,
		answer(201, wire.CreateDatastoreResponse{Generation: 4, Datastore: testDatastoreInfo, Ready: true}),
		answer(201, wire.CreateDatastoreResponse{Generation: 5}), // a node that had not applied it yet
		answer(200, wire.DatastoresResponse{Generation: 5, Datastores: []wire.DatastoreInfo{testDatastoreInfo}}),
		answer(200, wire.DatastoresResponse{Generation: 6}),
		answer(200, wire.DropDatastoreResponse{Generation: 6, Dropped: "users"}))
	c := adminClient(t, n.srv.URL)

	created, err := c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "users", Shards: 8, Replicas: 3})
	require.NoError(t, err)
	assert.Equal(t, wire.CreateDatastoreResponse{Generation: 4, Datastore: testDatastoreInfo, Ready: true}, created)
	created, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "users", Mode: "raft", Shards: 8, Partitions: 2, Replicas: []string{"n1", "n2"}})
	require.NoError(t, err)
	assert.Equal(t, wire.CreateDatastoreResponse{Generation: 5}, created, "an answer without the datastore")
	list, err := c.Datastores(ctx)
	require.NoError(t, err)
	assert.Equal(t, wire.DatastoresResponse{Generation: 5, Datastores: []wire.DatastoreInfo{testDatastoreInfo}}, list)
	list, err = c.Datastores(ctx)
	require.NoError(t, err)
	assert.Equal(t, wire.DatastoresResponse{Generation: 6, Datastores: []wire.DatastoreInfo{}}, list, "no datastores: an empty slice")
	dropped, err := c.DropDatastore(ctx, "users")
	require.NoError(t, err)
	assert.Equal(t, wire.DropDatastoreResponse{Generation: 6, Dropped: "users"}, dropped)

	assert.Equal(t, []string{
		"POST /v1/admin/datastores",
		"POST /v1/admin/datastores",
		"GET /v1/admin/datastores",
		"GET /v1/admin/datastores",
		"DELETE /v1/admin/datastores/users?confirm=users",
	}, n.requests())
	var bodies []string
	for _, b := range n.bodies {
		bodies = append(bodies, string(b))
	}
	assert.Equal(t, []string{`{"name":"users","shards":8,"replicas":3}`,
		`{"name":"users","mode":"raft","shards":8,"partitions":2,"replicas":["n1","n2"]}`, "", "", ""}, bodies)
}

// TestDatastoreErrors: a missing name is refused unsent; the API's errors become their
// sentinels, each final for a change; an answer about another datastore is ErrBadResponse. A
// creation answered 503 is retried on the next endpoint; one answered 504 or timing out ends
// indeterminate, the next endpoint not asked.
func TestDatastoreErrors(t *testing.T) {
	ctx := context.Background()
	n := newAdminNode(t,
		apiError(400, wire.CodeInvalidArgument, `replicas: "3" is neither a replica count (1 to 9) nor a list of node ids`, "replicas"),
		apiError(409, wire.CodeConflict, `cluster: datastore exists: "users"`, "name"),
		apiError(404, wire.CodeNotFound, `cluster: unknown datastore: "users"`, "datastore"),
		answer(201, wire.CreateDatastoreResponse{Datastore: wire.DatastoreInfo{Name: "trips"}}),
		answer(200, wire.DropDatastoreResponse{Dropped: "trips"}),
		apiError(501, wire.CodeUnimplemented, "this server has no datastore catalog", ""))
	c := adminClient(t, n.srv.URL)

	_, err := c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Shards: 8})
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "CreateDatastore without a name")
	_, err = c.DropDatastore(ctx, "")
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "DropDatastore without a name")
	require.Zero(t, n.hits.Load(), "refused calls are not sent")

	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "users", Shards: 8, Replicas: "3"})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrInvalidArgument)
	assert.Equal(t, "replicas", ae.Field)
	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "users", Shards: 8})
	assert.ErrorIs(t, err, client.ErrConflict)
	_, err = c.DropDatastore(ctx, "users")
	assert.ErrorIs(t, err, client.ErrNotFound)
	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "users", Shards: 8})
	assert.ErrorIs(t, err, client.ErrBadResponse, "an answer about trips")
	_, err = c.DropDatastore(ctx, "users")
	assert.ErrorIs(t, err, client.ErrBadResponse, "an answer about trips")
	assert.Equal(t, int32(5), n.hits.Load(), "each error of a change is final: one request per call")
	_, err = c.Datastores(ctx) // a read: retried after a 5xx, then failed
	assert.ErrorIs(t, err, client.ErrInternal, "a node without a catalog (501)")

	checkChangeRetries(t, answer(201, wire.CreateDatastoreResponse{Generation: 4, Datastore: testDatastoreInfo}), func(c *client.Client) error {
		_, err := c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "users", Shards: 8})
		return err
	})
}

// recordingCatalog is an api.CatalogBackend recording the options of each creation.
type recordingCatalog struct {
	mu      sync.Mutex
	creates []cluster.CreateDatastoreOptions
	drops   []string
	splits  []string // ds/pid@atShard
	merges  []string // ds/left+right
}

func (b *recordingCatalog) CreateDatastore(_ context.Context, o cluster.CreateDatastoreOptions) (wire.CreateDatastoreResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.creates) > 0 && b.creates[len(b.creates)-1].Name == o.Name {
		return wire.CreateDatastoreResponse{}, fmt.Errorf("%w: %q", cluster.ErrDatastoreExists, o.Name)
	}
	b.creates = append(b.creates, o)
	return wire.CreateDatastoreResponse{Generation: uint64(len(b.creates)), Datastore: wire.DatastoreInfo{Name: o.Name, Shards: o.Shards}}, nil
}

func (b *recordingCatalog) DropDatastore(_ context.Context, name, confirm string) (wire.DropDatastoreResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drops = append(b.drops, name+"="+confirm)
	return wire.DropDatastoreResponse{Dropped: name}, nil
}

func (b *recordingCatalog) SetDatastoreSettings(_ context.Context, name string, req wire.DatastoreSettingsRequest) (wire.DatastoreSettingsResponse, error) {
	info := wire.DatastoreInfo{Name: name}
	if req.LeaderZone != nil {
		info.LeaderZone = *req.LeaderZone
	}
	return wire.DatastoreSettingsResponse{Generation: 3, Datastore: info}, nil
}

func (b *recordingCatalog) CatalogDatastores() wire.DatastoresResponse {
	return wire.DatastoresResponse{}
}

// SplitPartition splits a partition of shards 0..7 at atShard (0: 4) into pid and pid+1, or
// refuses an atShard past 7 as the cluster does.
func (b *recordingCatalog) SplitPartition(_ context.Context, ds string, pid int, req wire.SplitRequest) (wire.SplitResponse, error) {
	atShard := req.AtShard
	b.mu.Lock()
	defer b.mu.Unlock()
	b.splits = append(b.splits, fmt.Sprintf("%s/%d@%d", ds, pid, atShard))
	if atShard == 0 {
		atShard = 4
	}
	if atShard > 7 {
		return wire.SplitResponse{}, &cluster.FieldError{Field: "at_shard", Msg: fmt.Sprintf("%d: want 1 to 7", atShard)}
	}
	return wire.SplitResponse{Generation: 2, Ready: true, Left: wire.CatalogPartition{ID: pid, LastShard: atShard - 1, Parent: -1},
		Right: wire.CatalogPartition{ID: pid + 1, FirstShard: atShard, LastShard: 7, Parent: pid}}, nil
}

// MergePartitions merges right into left, shards 0..3 and 4..7, when right is left+1; else it
// refuses right as the cluster does.
func (b *recordingCatalog) MergePartitions(_ context.Context, ds string, left, right int) (wire.MergeResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.merges = append(b.merges, fmt.Sprintf("%s/%d+%d", ds, left, right))
	if right != left+1 {
		return wire.MergeResponse{}, &cluster.FieldError{Field: "right", Msg: fmt.Sprintf("partition %d does not follow partition %d", right, left)}
	}
	return wire.MergeResponse{Generation: 3, TookMillis: 20, PauseMillis: 2, Merged: wire.CatalogPartition{ID: left, LastShard: 7, Parent: -1}}, nil
}

// catalogClient returns an admin client of package api's server over cat.
func catalogClient(t *testing.T, cat api.CatalogBackend) *client.Client {
	t.Helper()
	srv, err := api.NewServer(api.Backends{Node: struct{ api.NodeBackend }{}, Catalog: cat}, api.Config{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return adminClient(t, hs.URL)
}

// TestDatastoreThroughAPI sends the catalog calls to package api's server: the replicas the
// client sends (a count, a list) reach the catalog as the API reads them; the confirmation
// names the datastore; the API's refusals come back with their field.
func TestDatastoreThroughAPI(t *testing.T) {
	ctx := context.Background()
	cat := &recordingCatalog{}
	c := catalogClient(t, cat)

	_, err := c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "a", Shards: 8, Replicas: 5})
	require.NoError(t, err)
	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "b", Shards: 8, Replicas: []string{"n1", "n2"}})
	require.NoError(t, err)
	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "c", Shards: 8})
	require.NoError(t, err)
	assert.Equal(t, []cluster.CreateDatastoreOptions{{Name: "a", Shards: 8, ReplicaCount: 5}, {Name: "b", Shards: 8, Replicas: []string{"n1", "n2"}},
		{Name: "c", Shards: 8}}, cat.creates)
	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "c", Shards: 8})
	assert.ErrorIs(t, err, client.ErrConflict)

	var ae *client.APIError
	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "d", Shards: 8, Replicas: 2.5})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "replicas", ae.Field, "replicas 2.5: %v", err)
	_, err = c.CreateDatastore(ctx, wire.CreateDatastoreRequest{Name: "d"})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "shards", ae.Field, "no shards: %v", err)

	_, err = c.DropDatastore(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []string{"a=a"}, cat.drops)
	list, err := c.Datastores(ctx)
	require.NoError(t, err)
	assert.Equal(t, wire.DatastoresResponse{Datastores: []wire.DatastoreInfo{}}, list)
}

// MoveToCluster is not used here.
func (b *recordingCatalog) MoveToCluster(context.Context, string, int, wire.ClusterMoveRequest) (wire.ClusterMoveResponse, error) {
	return wire.ClusterMoveResponse{}, errors.New("no storage clusters here")
}

// MoveCatalogVoters is not used here.
func (b *recordingCatalog) MoveCatalogVoters(context.Context, []string) (wire.CatalogVotersResponse, error) {
	return wire.CatalogVotersResponse{}, errors.New("no catalog group here")
}
