package topology_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schemaless-db/schemaless/topology"
)

func TestStorageClustersOf(t *testing.T) {
	got := topology.StorageClustersOf([][]string{{"a@tcp(h:1)/", "a@tcp(h:2)/", "a@tcp(h:3)/"}, {"a@tcp(h:4)/"}})
	assert.Equal(t, []topology.StorageClusterSpec{
		{Name: "c0", Master: "a@tcp(h:1)/", Minions: []string{"a@tcp(h:2)/", "a@tcp(h:3)/"}},
		{Name: "c1", Master: "a@tcp(h:4)/"},
	}, got, "cluster i named c<i>, its first member the master")
	assert.Empty(t, topology.StorageClustersOf(nil), "no members: no clusters")
}
