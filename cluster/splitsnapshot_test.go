package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// A replica added to a split's new partition before the partition took a snapshot of its own
// gets one: its leader's latest snapshot is the split's base, which holds no data, so the
// leader takes a real snapshot once raft would send the base (partition.baseSnapshots), and
// the replica catches up from it. The new partition takes no snapshot before that (a snapshot
// of the right half streams every cell of it): fails when its replicas take one at once, as
// they did, and when nothing asks for the snapshot (the learner then never catches up).
func TestSplitSnapshotOnDemand(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble, Nodes: 4, Shards: 8, Partitions: 1})
	n1, n4 := c.Node(0), c.Node(3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*opTimeout)
	defer cancel()
	require.Eventually(t, func() bool { return n1.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond)
	_, err := n1.CreateDatastore(ctx, cluster.CreateDatastoreOptions{Name: "far", Shards: 8, Partitions: 1, Replicas: []string{"n1", "n2", "n3"}})
	require.NoError(t, err)
	l := newLedger()
	put := func(tag string) {
		var cs []cells.Cell
		for j := range 32 {
			cs = append(cs, newCell(t, uuid.New(), "BASE", 1, fmt.Sprintf(`{"%s":%d}`, tag, j)))
		}
		putIn(t, n1, "far", l, cs)
	}
	put("before")
	split, err := n1.SplitPartition(ctx, "far", 0, wire.SplitRequest{AtShard: 4})
	require.NoError(t, err, "split far at shard 4")
	put("after")
	// Each replica of the new partition holds its base alone: no snapshot streamed its cells.
	snapshots := func(i int) int {
		ents, err := os.ReadDir(filepath.Join(c.DataDir(i), "raft", fmt.Sprintf("far-p%d", split.Right.ID), "snapshots"))
		require.NoError(t, err)
		n := 0
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".tmp") {
				n++
			}
		}
		return n
	}
	assert.Never(t, func() bool { return snapshots(0)+snapshots(1)+snapshots(2) > 3 }, time.Second, 50*time.Millisecond,
		"a replica of the new partition took a snapshot that nothing asked for")

	_, err = n1.AddLearner(ctx, "far", split.Right.ID, "n4")
	require.NoError(t, err, "a learner on n4, which holds no replica of the parent")
	require.NoError(t, checkCellsIn(n4, "far", cluster.Strong, l.all(), 2*opTimeout), "every cell read through n4, the right half's from its learner")
	require.Eventually(t, func() bool {
		for _, r := range n4.Replicas() {
			if r.Datastore == "far" && r.Partition == split.Right.ID && r.Local && r.AppliedIndex > 0 {
				return true
			}
		}
		return false
	}, opTimeout, 50*time.Millisecond, "n4's learner applied the right half's snapshot")
}
