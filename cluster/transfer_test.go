package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// A leadership transfer that does not take is asked for again. The partition's leader answers
// the first transfer it is asked to run as done and does nothing (DropTransfers: as when the
// target loses its election and the old leader wins the next); TransferLeadership still returns
// a new leader, after asking again once, well before its context ends; one that never takes
// gives up after three requests (ErrUnavailable). A transfer that waited for the first request
// alone waited out its context: the load-based split's move of its new partition's leader did
// so for a minute under load, holding the node's one automatic split or merge at a time
// (TestAutomaticMerge then timed out waiting for its merge).
func TestTransferLeadershipAsksAgain(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble, Shards: 8, Partitions: 1})
	nodes := running(c)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	before, err := nodes[0].PartitionConfig(ctx, ds, 0)
	require.NoError(t, err, "partition 0's configuration")
	require.NotEmpty(t, before.Leader, "partition 0's leader")
	for _, n := range nodes {
		n.DropTransfers(1)
	}
	began := time.Now()
	to, err := nodes[0].TransferLeadership(ctx, ds, 0, "")
	took := time.Since(began)
	require.NoError(t, err, "transfer, its first request dropped by the leader %s", before.Leader)
	assert.NotEqual(t, before.Leader, to, "the new leader")
	// Asked again once its first request had not taken for three election timeouts (1.5 s in
	// these clusters), at least 3 s.
	assert.GreaterOrEqual(t, took, 3*time.Second, "the transfer took %v: the first request was not dropped", took)
	assert.Less(t, took, opTimeout/2, "the transfer took %v", took)
	after, err := nodes[1].PartitionConfig(ctx, ds, 0)
	require.NoError(t, err, "partition 0's configuration after the transfer")
	assert.Equal(t, to, after.Leader, "the leader node 1 finds")
	t.Logf("leadership moved from %s to %s in %v, its first request dropped", before.Leader, to, took.Round(10*time.Millisecond))

	// Naming the target: the same, to a named voter.
	for _, n := range nodes {
		n.DropTransfers(1)
	}
	target := before.Leader
	to, err = nodes[2].TransferLeadership(ctx, ds, 0, target)
	require.NoError(t, err, "transfer to %s, its first request dropped", target)
	assert.Equal(t, target, to, "the new leader")

	// A transfer that never takes ends after three requests (a transfer holds the leader's
	// writes meanwhile), the leadership where it was.
	for _, n := range nodes {
		n.DropTransfers(3)
	}
	_, err = nodes[0].TransferLeadership(ctx, ds, 0, "")
	require.ErrorIs(t, err, cluster.ErrUnavailable, "a transfer whose three requests were dropped")
	assert.Contains(t, err.Error(), "in 3 requests")
	after, err = nodes[0].PartitionConfig(ctx, ds, 0)
	require.NoError(t, err, "partition 0's configuration after the transfer that did not take")
	assert.Equal(t, target, after.Leader, "the leader after the transfer that did not take")
}
