package wire_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

func TestPartitionViews(t *testing.T) {
	t.Parallel()
	n1 := wire.ClusterStatus{Node: "n1", Datastores: []wire.DatastoreStatus{{Name: "trips", Partitions: []wire.PartitionStatus{
		{ID: 0, FirstShard: 0, LastShard: 3, Local: true, State: "Follower", AppliedIndex: 7},
		{ID: 1, FirstShard: 4, LastShard: 7, Leader: "n2", Local: true, State: "Follower", AppliedIndex: 9},
	}}}}
	n3 := wire.ClusterStatus{Node: "n3", Datastores: []wire.DatastoreStatus{
		{Name: "trips", Partitions: []wire.PartitionStatus{{ID: 0, FirstShard: 0, LastShard: 3, Leader: "n3", Local: true, State: "Leader", AppliedIndex: 8}}},
		{Name: "rides", Partitions: []wire.PartitionStatus{{ID: 0, FirstShard: 0, LastShard: 7, Leader: "n3"}}},
	}}
	views := wire.PartitionViews([]wire.ClusterStatus{n1, {}, n3}) // n2 did not answer
	require.Len(t, views, 3)
	type row struct {
		key    string
		shards [2]int
		leader string
	}
	var got []row
	for _, v := range views {
		got = append(got, row{fmt.Sprintf("%s/%d", v.Datastore, v.Partition), [2]int{v.FirstShard, v.LastShard}, v.Leader})
		assert.Len(t, v.Nodes, 3, "%s/%d: one entry per status", v.Datastore, v.Partition)
	}
	assert.Equal(t, []row{{"trips/0", [2]int{0, 3}, "n3"}, {"trips/1", [2]int{4, 7}, "n2"}, {"rides/0", [2]int{0, 7}, "n3"}}, got,
		"first-seen order; the first leader any node names")
	assert.Equal(t, uint64(7), views[0].Nodes[0].AppliedIndex, "trips/0 on n1")
	assert.Equal(t, wire.PartitionStatus{}, views[0].Nodes[1], "n2 did not answer")
	assert.Equal(t, "Leader", views[0].Nodes[2].State, "trips/0 on n3")
	assert.Equal(t, wire.PartitionStatus{}, views[1].Nodes[2], "n3 does not list trips/1")
	assert.Empty(t, views[2].Nodes[2].State, "rides/0: n3 hosts no replica")
	assert.Empty(t, wire.PartitionViews(nil))
}
