package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/topology"
)

// A topology datastore goes into the catalog and comes back with the same layout, raft and
// async alike (empty and absent lists are one), so that the import reopens nothing; a changed
// range, replica or storage cluster is a different layout.
func TestCatalogSpecRoundTrip(t *testing.T) {
	top := topology.Topology{Nodes: []topology.NodeSpec{{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}, {ID: "n2", RaftAddr: "127.0.0.1:3", HTTPAddr: "127.0.0.1:4"}},
		Datastores: []topology.DatastoreSpec{
			{Name: "trips", Shards: 8, PartitionCount: 2},
			{Name: "rides", Mode: topology.ModeAsync, Shards: 4, StorageClusters: []topology.StorageClusterSpec{
				{Name: "c0", Master: "u@tcp(127.0.0.1:3306)/", Minions: []string{}}, {Name: "c1", Master: "u@tcp(127.0.0.1:3307)/"}}},
		}}
	require.NoError(t, top.Normalize())
	c := catalog.New()
	var specs []catalog.Spec
	for i := range top.Datastores {
		s, err := catalogSpec(&top.Datastores[i])
		require.NoError(t, err)
		specs = append(specs, s)
	}
	_, err := c.Apply(catalog.Command{Op: catalog.OpImport, Import: specs})
	require.NoError(t, err)
	for i := range top.Datastores {
		ds := &top.Datastores[i]
		back, err := specOf(c.Datastores[ds.Name])
		require.NoError(t, err)
		assert.True(t, sameLayout(ds, back), "%s: the same layout after the catalog: %+v vs %+v", ds.Name, ds, back)
		changed := *back
		changed.Partitions = append([]topology.PartitionSpec(nil), back.Partitions...)
		changed.Partitions[0].LastShard--
		assert.False(t, sameLayout(ds, &changed), "%s: a changed range", ds.Name)
	}
	moved, _ := specOf(c.Datastores["trips"])
	moved.Partitions[1].Replicas = []string{"n1"}
	assert.False(t, sameLayout(&top.Datastores[0], moved), "changed replicas")
	assert.Equal(t, "trips/1", groupName("trips", 1, 0))
	assert.Equal(t, "trips/1:g7", groupName("trips", 1, 7))
}
