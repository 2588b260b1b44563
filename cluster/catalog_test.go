package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// putIn writes cs to datastore dsName through n and records them in l.
func putIn(t *testing.T, n *cluster.Node, dsName string, l *ledger, cs []cells.Cell) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := n.PutCells(ctx, dsName, cs)
	require.NoError(t, err, "PutCells %s through %s", dsName, n.ID())
	require.Len(t, res, len(cs))
	for i, r := range res {
		require.Equal(t, cells.StatusCreated, r.Status, "cell %s", cs[i].Key)
		body, err := cs[i].Body.JSON()
		require.NoError(t, err)
		l.add(acked{key: cs[i].Key, body: string(body), addedID: r.AddedID, created: r.CreatedAt})
	}
}

// TestCatalogDatastores: the topology file's datastore is imported into the catalog; a datastore
// created at run time through a node that holds no catalog replica is served by every node,
// survives restarts of a catalog voter and of a follower (which start from their cache), and
// once dropped is gone everywhere; created again under its name, it is a new, empty datastore.
// Refused creations name their field and change nothing.
func TestCatalogDatastores(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble, Nodes: 4})
	nodes := running(c)
	require.Len(t, nodes, 4)

	// The import: every node learns generation 1 with trips, imported (created 0).
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			cat := n.CatalogDatastores()
			return cat.Generation >= 1 && len(cat.Datastores) == 1 && cat.Datastores[0].Name == ds && cat.Datastores[0].Created == 0
		}, opTimeout, 20*time.Millisecond, "node %s learns the imported catalog", n.ID())
	}
	follower := nodes[3] // the fourth node holds no catalog replica
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()

	res, err := follower.CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "users", Shards: 8, Partitions: 2, ReplicaCount: 3})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), res.Generation, "the creation's generation")
	assert.Equal(t, "users", res.Datastore.Name)
	assert.Equal(t, uint64(2), res.Datastore.Created)
	require.Len(t, res.Datastore.Partitions, 2)
	for i, p := range res.Datastore.Partitions {
		assert.Len(t, p.Replicas, 3, "partition %d replicas", i)
		assert.Equal(t, []int{i * 4, i*4 + 3}, []int{p.FirstShard, p.LastShard}, "partition %d range", i)
	}
	assert.NotEqual(t, res.Datastore.Partitions[0].Replicas[0], res.Datastore.Partitions[1].Replicas[0], "partitions start on different nodes")

	// Refusals name their field and leave the catalog as it is.
	for _, tc := range []struct {
		o     cluster.CreateDatastoreOptions
		field string
	}{
		{cluster.CreateDatastoreOptions{Name: "Bad-Name", Shards: 4}, "name"},
		{cluster.CreateDatastoreOptions{Name: "x", Shards: 0}, "shards"},
		{cluster.CreateDatastoreOptions{Name: "x", Shards: 4, Partitions: 5}, "partitions"},
		{cluster.CreateDatastoreOptions{Name: "x", Shards: 4, ReplicaCount: 5}, "replicas"},
		{cluster.CreateDatastoreOptions{Name: "x", Shards: 4, Replicas: []string{"n1", "nope"}}, "replicas"},
		{cluster.CreateDatastoreOptions{Name: "x", Shards: 4, Mode: "async"}, "storage_clusters"},
		{cluster.CreateDatastoreOptions{Name: "x", Shards: 4, Mode: "paxos"}, "mode"},
	} {
		_, err := nodes[0].CreateDatastore(ctx, tc.o)
		var fe *cluster.FieldError
		require.ErrorAs(t, err, &fe, "%+v", tc.o)
		assert.Equal(t, tc.field, fe.Field, "%+v: %v", tc.o, err)
	}
	_, err = nodes[1].CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "users", Shards: 4})
	assert.ErrorIs(t, err, cluster.ErrDatastoreExists)
	assert.Equal(t, uint64(2), nodes[1].CatalogDatastores().Generation, "refusals change nothing")

	// Every node serves users: writes through each, strong reads through each.
	l := newLedger()
	for i, n := range nodes {
		var cs []cells.Cell
		for j := range 8 {
			cs = append(cs, newCell(t, uuid.New(), "BASE", 1, fmt.Sprintf(`{"node":%d,"j":%d}`, i, j)))
		}
		putIn(t, n, "users", l, cs)
	}
	for _, n := range nodes {
		require.NoError(t, checkCellsIn(n, "users", cluster.Strong, l.all(), opTimeout))
	}

	// A catalog voter and the follower restart from their caches and serve users at once.
	for _, i := range []int{0, 3} {
		c.StopNode(i)
		c.StartNode(i)
		n := c.Node(i)
		spec, err := n.Datastore("users")
		require.NoError(t, err, "node %d serves users after its restart", i)
		assert.Len(t, spec.Partitions, 2)
		require.NoError(t, checkCellsIn(n, "users", cluster.Strong, l.all(), opTimeout))
	}
	nodes = running(c)

	// Drop: named twice, then gone from every node; trips is untouched.
	_, err = nodes[2].DropDatastore(ctx, "users", "user")
	var fe *cluster.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "confirm", fe.Field)
	_, err = nodes[2].DropDatastore(ctx, "nope", "nope")
	assert.ErrorIs(t, err, cluster.ErrUnknownDatastore)
	drop, err := nodes[2].DropDatastore(ctx, "users", "users")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), drop.Generation)
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			_, err := n.Datastore("users")
			return err != nil
		}, opTimeout, 20*time.Millisecond, "node %s drops users", n.ID())
	}
	_, err = nodes[0].GetCells(ctx, "users", []cluster.GetKey{{Key: l.all()[0].key}}, cluster.Strong)
	assert.ErrorIs(t, err, cluster.ErrUnknownDatastore)

	// Created again, users is a new datastore: none of the old cells, new writes work.
	again, err := nodes[1].CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "users", Shards: 8, Partitions: 2, ReplicaCount: 3})
	require.NoError(t, err)
	assert.Equal(t, uint64(4), again.Datastore.Created)
	old := l.all()
	for _, n := range nodes {
		got, err := n.GetCells(ctx, "users", []cluster.GetKey{{Key: old[0].key}, {Key: old[len(old)-1].key}}, cluster.Strong)
		require.NoError(t, err, "through %s", n.ID())
		for _, r := range got {
			assert.False(t, r.Found, "through %s: %s of the dropped datastore", n.ID(), r.Cell.Key)
		}
	}
	l2 := newLedger()
	putIn(t, nodes[3], "users", l2, []cells.Cell{newCell(t, uuid.New(), "BASE", 1, `{"again":true}`)})
	for _, n := range nodes {
		require.NoError(t, checkCellsIn(n, "users", cluster.Strong, l2.all(), opTimeout))
	}

	lt := newLedger()
	putIn(t, nodes[0], ds, lt, []cells.Cell{newCell(t, uuid.New(), "BASE", 1, `{"trips":true}`)})
	requireStrong(t, lt, nodes...)
}
