package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestMoveCatalogVoters moves the catalog's votes from the topology file's first three nodes
// to nodes 2 to 4, through the fourth node (which held no replica of the catalog), and checks:
// every node lists the new voters; the first node's replica of the catalog is deleted and the
// fourth holds one; with the first two nodes stopped the catalog still takes a command (nodes
// 3 and 4 are a majority of the new voters, not of the old); a removed voter restarted follows
// the catalog without a replica, a kept one restarted votes again; moved back, the first node
// opens its replica again (in the same process) and the fourth deletes its own, and nodes 1 and
// 3 then carry the catalog alone. Refused lists name their field and change nothing.
func TestMoveCatalogVoters(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble, Nodes: 4})
	nodes := running(c)
	require.Len(t, nodes, 4)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond,
			"node %s learns the imported catalog", n.ID())
	}
	ids := []string{nodes[0].ID(), nodes[1].ID(), nodes[2].ID(), nodes[3].ID()}
	assert.Equal(t, ids[:3], nodes[3].CatalogDatastores().CatalogVoters, "voters before: the topology file's first three")
	ctx, cancel := context.WithTimeout(context.Background(), 4*opTimeout)
	defer cancel()

	for _, bad := range [][]string{nil, {ids[1], ids[1]}, {ids[1], "nobody"}} {
		_, err := nodes[3].MoveCatalogVoters(ctx, bad)
		var fe *cluster.FieldError
		require.ErrorAs(t, err, &fe, "voters %q", bad)
		assert.Equal(t, "voters", fe.Field, "voters %q", bad)
	}

	// A drain of the first node plans to give its vote to the fourth.
	plan, err := nodes[2].Drain(ctx, ids[0], true)
	require.NoError(t, err, "dry-run drain of %s", ids[0])
	assert.Equal(t, []string{ids[3], ids[1], ids[2]}, plan.CatalogVoters, "the catalog's voters after a drain of %s", ids[0])
	assert.False(t, plan.CatalogVoteKept, "a drain of %s with a fourth node: the vote moves", ids[0])

	want := ids[1:]
	res, err := nodes[3].MoveCatalogVoters(ctx, want)
	require.NoError(t, err, "move the catalog's votes to %v", want)
	assert.Equal(t, want, res.Voters)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return slices.Equal(n.CatalogDatastores().CatalogVoters, want) }, opTimeout, 20*time.Millisecond,
			"node %s lists the new voters", n.ID())
	}
	require.Eventually(t, func() bool {
		return noDir(filepath.Join(c.DataDir(0), "catalog"))
	}, opTimeout, 20*time.Millisecond, "the first node's replica of the catalog is deleted")
	assert.DirExists(t, filepath.Join(c.DataDir(3), "catalog"), "the fourth node's replica of the catalog")

	// Nodes 3 and 4 are a majority of the new voters: without the move, stopping nodes 1 and 2
	// would leave the catalog without a leader.
	c.StopNode(0)
	c.StopNode(1)
	created := createRetried(t, nodes[3], cluster.CreateDatastoreOptions{Name: "users", Shards: 4, Partitions: 1, Replicas: []string{ids[2], ids[3]}},
		"with the first two nodes stopped")

	// The removed voter restarts as a follower; the kept one votes again.
	c.StartNode(0)
	c.StartNode(1)
	restarted := running(c)
	for _, n := range restarted {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= created }, opTimeout, 20*time.Millisecond,
			"node %s learns the datastore created while it was down", n.ID())
	}
	assert.True(t, noDir(filepath.Join(c.DataDir(0), "catalog")), "the removed voter holds no replica after its restart")
	c.StopNode(2)
	_, err = restarted[1].DropDatastore(ctx, "users", "users")
	require.NoError(t, err, "drop a datastore with nodes 2 and 4 voting (node 3 stopped)")
	c.StartNode(2)

	// And back: the first node, which deleted its replica, votes again and the fourth stops.
	back, err := restarted[0].MoveCatalogVoters(ctx, ids[:3])
	require.NoError(t, err, "move the catalog's votes back to %v", ids[:3])
	for _, n := range running(c) {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= back.Generation }, opTimeout, 20*time.Millisecond,
			"node %s learns the voters moved back", n.ID())
		assert.Equal(t, ids[:3], n.CatalogDatastores().CatalogVoters, "voters on %s after the move back", n.ID())
	}
	require.Eventually(t, func() bool { return noDir(filepath.Join(c.DataDir(3), "catalog")) }, opTimeout, 20*time.Millisecond,
		"the fourth node's replica of the catalog is deleted")
	assert.DirExists(t, filepath.Join(c.DataDir(0), "catalog"), "the first node's replica of the catalog, opened again")
	c.StopNode(3)
	c.StopNode(1)
	createRetried(t, running(c)[0], cluster.CreateDatastoreOptions{Name: "orders", Shards: 4, Partitions: 1, Replicas: []string{ids[0], ids[2]}},
		"with nodes 1 and 3 voting (nodes 2 and 4 stopped)")
}

// createRetried creates a datastore through n and returns the catalog generation that holds
// it. A command sent to a catalog leader as it stopped may be indeterminate: the creation is
// retried as a client would, and one that was applied meanwhile answers that the datastore
// exists.
func createRetried(t *testing.T, n *cluster.Node, o cluster.CreateDatastoreOptions, when string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	var created uint64
	require.Eventually(t, func() bool {
		res, err := n.CreateDatastore(ctx, o)
		switch {
		case err == nil:
			created = res.Generation
		case errors.Is(err, cluster.ErrDatastoreExists):
			created = n.CatalogDatastores().Generation
		default:
			t.Logf("create %s %s: %v (retried)", o.Name, when, err)
			return false
		}
		return true
	}, 2*opTimeout, 100*time.Millisecond, "create %s %s", o.Name, when)
	t.Logf("created %s at generation %d", o.Name, created)
	return created
}

// noDir reports whether nothing exists at path.
func noDir(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}
