package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// hostsReplica reports whether n hosts a replica of partition 0 of ds.
func hostsReplica(n *cluster.Node) bool {
	for _, r := range n.Replicas() {
		if r.Datastore == ds && r.Partition == 0 && r.Local {
			return true
		}
	}
	return false
}

// replicaDir is where node i of c keeps partition 0's raft state.
func replicaDir(c *clustertest.Cluster, i int) string {
	return filepath.Join(c.DataDir(i), "raft", ds+"-p0")
}

// writeSome writes a few cells of partition 0 through n and returns the ledger.
func writeSome(t *testing.T, c *clustertest.Cluster, n *cluster.Node) *ledger {
	t.Helper()
	l := newLedger()
	var cs []cells.Cell
	for i, row := range rowsPerPartition(t, &c.Topology.Datastores[0], t.Name(), 5)[0] {
		cs = append(cs, newCell(t, row, "BASE", 1, fmt.Sprintf(`{"i":%d}`, i)))
	}
	putAll(t, n, l, cs)
	return l
}

// An unhost of a replica that is still a member of its partition (a voter here, a follower and
// the leader) is refused with 409 and deletes nothing: the replica keeps serving and receiving
// writes (issue 19, item 4: an admin host RPC dropped any replica it was asked to).
func TestUnhostRefusesMember(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Partitions: 1})
	li := c.LeaderOf(0)
	fi := (li + 1) % 3
	l := writeSome(t, c, c.Node(li))
	for _, i := range []int{fi, li} {
		status, msg := postRPC(t, c.Spec(i).RaftAddr, "/internal/v1/admin/host", adminHostRPC{Datastore: ds, Partition: 0, Op: "unhost"})
		assert.Equal(t, http.StatusConflict, status, "unhost of %s's voter: got %d %q, want 409", c.Spec(i).ID, status, msg)
		assert.Contains(t, msg, "still a member", "unhost of %s's voter: the refusal says why", c.Spec(i).ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	assert.ErrorIs(t, c.Node(fi).Unhost(ctx, ds, 0), cluster.ErrStillVoter, "Unhost on the follower itself")

	for _, i := range []int{fi, li} {
		require.True(t, hostsReplica(c.Node(i)), "%s still hosts its replica", c.Spec(i).ID)
		_, err := os.Stat(replicaDir(c, i))
		require.NoError(t, err, "%s's replica directory is still there", c.Spec(i).ID)
	}
	cfg, err := c.Node(li).PartitionConfig(ctx, ds, 0)
	require.NoError(t, err)
	assert.Contains(t, cfg.Voters(), c.Spec(fi).ID, "the follower is still a voter")
	// Its data is there and it still serves: stale reads through it (its own replica) see
	// every acknowledged cell, the new ones too.
	requireStale(t, l, c.Node(fi))
	putAll(t, c.Node(li), l, []cells.Cell{newCell(t, l.all()[0].key.RowKey, "BASE", 2, `{"after":true}`)})
	requireStale(t, l, c.Node(fi))
}

// A replica removed from its partition's configuration can be unhosted over the node RPC,
// though its own raft state may still list it: the node asks the leader, not its replica.
func TestUnhostRemovedReplica(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Partitions: 1})
	li := c.LeaderOf(0)
	fi := (li + 1) % 3
	l := writeSome(t, c, c.Node(li))
	// Removed through the leader's admin raft RPC alone (RemoveVoter would unhost it too); a
	// leader change on a loaded machine answers "not leader": ask the new one.
	remove := adminRaftRPC{Datastore: ds, Partition: 0, Op: "remove", Node: c.Spec(fi).ID, TimeoutMicros: opTimeout.Microseconds()}
	require.Eventually(t, func() bool {
		i, err := c.Cluster.LeaderOf(context.Background(), 0, opTimeout)
		if err != nil {
			return false
		}
		status, msg, err := tryRPC(c.Spec(i).RaftAddr, "/internal/v1/admin/raft", remove)
		t.Logf("remove %s through %s: %d %q %v", c.Spec(fi).ID, c.Spec(i).ID, status, msg, err)
		return err == nil && status == http.StatusOK
	}, opTimeout, 100*time.Millisecond, "remove %s through the leader", c.Spec(fi).ID)
	li = c.LeaderOf(0)
	require.True(t, hostsReplica(c.Node(fi)), "%s still hosts its removed replica before the unhost", c.Spec(fi).ID)

	status, msg := postRPC(t, c.Spec(fi).RaftAddr, "/internal/v1/admin/host", adminHostRPC{Datastore: ds, Partition: 0, Op: "unhost"})
	require.Equal(t, http.StatusOK, status, "unhost of the removed replica: got %d %q, want 200", status, msg)
	assert.False(t, hostsReplica(c.Node(fi)), "%s hosts no replica after the unhost", c.Spec(fi).ID)
	_, err := os.Stat(replicaDir(c, fi))
	assert.True(t, os.IsNotExist(err), "%s's replica directory: got %v, want it gone", c.Spec(fi).ID, err)
	// The two voters left serve every acknowledged cell, and new writes.
	putAll(t, c.Node(li), l, []cells.Cell{newCell(t, l.all()[0].key.RowKey, "BASE", 2, `{"after":true}`)})
	requireStrong(t, l, c.Node(li), c.Node(fi))
}

// With no leader to ask (two of three nodes down), an unhost is refused as unavailable (503,
// retryable) rather than risk a replica that may still count: nothing is deleted.
func TestUnhostWithoutLeaderRefused(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Partitions: 1})
	li := c.LeaderOf(0)
	writeSome(t, c, c.Node(li))
	fi := (li + 1) % 3
	for i := range 3 {
		if i != fi {
			c.StopNode(i)
		}
	}
	status, msg := postRPC(t, c.Spec(fi).RaftAddr, "/internal/v1/admin/host", adminHostRPC{Datastore: ds, Partition: 0, Op: "unhost"})
	assert.Equal(t, http.StatusServiceUnavailable, status, "unhost with no leader: got %d %q, want 503", status, msg)
	assert.True(t, hostsReplica(c.Node(fi)), "%s still hosts its replica", c.Spec(fi).ID)
	_, err := os.Stat(replicaDir(c, fi))
	assert.NoError(t, err, "%s's replica directory is still there", c.Spec(fi).ID)
}
