package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadStorageCluster is an async datastore whose one storage cluster's master listens nowhere:
// it never has a master.
func deadStorageCluster(t *testing.T, name string) topology.DatastoreSpec {
	return topology.DatastoreSpec{Name: name, Mode: topology.ModeAsync, Shards: 4, UnsafeNoBufferedWrites: true,
		StorageClusters: []topology.StorageClusterSpec{{Name: "c0", Master: fmt.Sprintf("root@tcp(%s)/", loopbackAddr(t))}}}
}

// TestDatastoreReadiness: readiness is per datastore. A raft datastore whose replica knows its
// leader is ready beside an async datastore without a master, and the node is ready: another
// node would reach that storage cluster no better. A raft datastore without a leader makes
// the node unready.
func TestDatastoreReadiness(t *testing.T) {
	t.Parallel()
	n1 := topology.NodeSpec{ID: "n1", RaftAddr: loopbackAddr(t), HTTPAddr: loopbackAddr(t)}
	n2 := topology.NodeSpec{ID: "n2", RaftAddr: loopbackAddr(t), HTTPAddr: loopbackAddr(t)} // never started
	top := &topology.Topology{Nodes: []topology.NodeSpec{n1, n2}, Datastores: []topology.DatastoreSpec{
		{Name: "trips", Shards: 4, Replicas: []string{"n1"}},
		deadStorageCluster(t, "flights"),
	}}
	require.NoError(t, top.Normalize())
	n := startBareNode(t, top, "n1").node

	require.Eventually(t, func() bool { return n.DatastoreReady("trips") == nil }, opTimeout, 10*time.Millisecond,
		"trips (one replica, on n1) ready")
	assert.NoError(t, n.Ready(), "the node's readiness with flights' storage cluster masterless")
	err := n.DatastoreReady("flights")
	assert.ErrorContains(t, err, "flights: storage cluster c0 has no master")
	assert.NotContains(t, fmt.Sprint(err), "flights/0 has no leader", "an async partition is served here: it knows where its requests go")
	assert.ErrorIs(t, n.DatastoreReady("nope"), cluster.ErrUnknownDatastore)

	// The raft datastore serves; the async one fails at once and retryably (its answer is
	// final: no retry until the deadline).
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cell := newCell(t, uuid.New(), "BASE", 1, `{"x":1}`)
	res, err := n.PutCells(ctx, "trips", []cells.Cell{cell})
	require.NoError(t, err, "write to trips")
	assert.Equal(t, cells.StatusCreated, res[0].Status)
	_, err = n.PutCells(ctx, "flights", []cells.Cell{cell})
	assert.ErrorIs(t, err, cluster.ErrUnavailable, "write to flights without a master")
	assert.NoError(t, ctx.Err(), "the write to flights waited for its deadline")
	_, err = n.GetCells(ctx, "flights", []cluster.GetKey{{Key: cell.Key}}, cluster.Strong)
	assert.ErrorIs(t, err, cluster.ErrUnavailable, "strong read of flights without a master")
	assert.NoError(t, ctx.Err(), "the read of flights waited for its deadline")

	// Clients are told the raft partition's leader, never a node for the async one.
	_, url := n.LeaderHint("trips", cell.Key.RowKey)
	assert.Equal(t, "http://"+n1.HTTPAddr, url, "leader hint of trips")
	_, url = n.LeaderHint("flights", cell.Key.RowKey)
	assert.Empty(t, url, "leader hint of flights")

	// A raft datastore replicated on n1 and n2, which never starts: no quorum, no leader.
	top2 := &topology.Topology{Nodes: []topology.NodeSpec{
		{ID: "n1", RaftAddr: loopbackAddr(t), HTTPAddr: loopbackAddr(t)},
		{ID: "n2", RaftAddr: loopbackAddr(t), HTTPAddr: loopbackAddr(t)},
	}, Datastores: []topology.DatastoreSpec{
		{Name: "trips", Shards: 4, Replicas: []string{"n1"}},
		{Name: "orders", Shards: 4, Replicas: []string{"n1", "n2"}},
	}}
	require.NoError(t, top2.Normalize())
	m := startBareNode(t, top2, "n1").node
	require.Eventually(t, func() bool { return m.DatastoreReady("trips") == nil }, opTimeout, 10*time.Millisecond, "trips ready")
	assert.ErrorContains(t, m.Ready(), "orders/0 has no leader", "the node's readiness")
	assert.ErrorContains(t, m.DatastoreReady("orders"), "orders/0 has no leader")
}
