package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// Every replica of a split's parent starts the split from its pre-copy, even one whose copy
// its catalog started late: the split asks each replica for its pre-copy and waits for them
// before it proposes the split's entry. It waited for the leader's alone before, and a
// follower whose copy was still under way then applied the entry late, and the new group's
// first election waited for it (BENCHMARKS.md).
func TestSplitAwaitsReplicasPrecopies(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.SQLite})
	nodes := runningImported(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	used := make([]int64, len(nodes))
	for i, n := range nodes {
		n.DelayPrecopies(3 * time.Second) // the copies the catalog starts come after the split
		used[i] = n.SplitPrecopiesUsed()
	}
	w := startWriters(nodes)
	l := w.l
	w.await(t, 20)
	res, err := nodes[0].SplitPartition(ctx, ds, 0, wire.SplitRequest{AtShard: 4})
	require.NoError(t, err, "split partition 0 at 4 under writes")
	assert.True(t, res.Ready, "the right half has a leader")
	w.await(t, 20)
	w.finish(t, "the split")
	for i, n := range nodes {
		assert.Equal(t, used[i]+1, n.SplitPrecopiesUsed(), "node %s started the split from its pre-copy", n.ID())
	}
	requireStrong(t, l, nodes...)
	checkShardLogs(t, &c.Topology.Datastores[0], l, nodes...)
}
