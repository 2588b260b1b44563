package cluster_test

import (
	"context"
	"fmt"
	"github.com/schemaless-db/schemaless/wire"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestIdempotentRetryAcrossSplitAndMerge: batches written with an idempotency key (a UUID, and
// a key of the client's own), retried through every node after a split divided their cells
// between two partitions and again after the merge joined them, are answered with their first
// outcome, every cell's added_id and created_at, and write nothing: those written before the
// split (one record, copied into both halves) and those written between the split and the
// merge (a record in each half, joined by the merge). Another batch under a used key is still
// refused as a reused key.
func TestIdempotentRetryAcrossSplitAndMerge(t *testing.T) {
	// Not parallel, like the other split and merge tests.
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble})
	nodes := runningImported(t, c)
	spec := &c.Topology.Datastores[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*opTimeout)
	defer cancel()

	const at = 12 // partition 1 holds shards 8..15
	rows := flatten(rowsPerPartition(t, spec, t.Name(), 12))
	halves := map[bool]int{}
	for _, row := range rows {
		if s := cells.ShardOf(row, spec.Shards); s >= 8 {
			halves[s >= at]++
		}
	}
	require.True(t, halves[false] > 0 && halves[true] > 0, "rows on both sides of shard %d: %v", at, halves)

	var keys []string
	batches := map[string][]cells.Cell{}
	first := map[string]cluster.WriteResponse{}
	write := func(key string) {
		t.Helper()
		i := len(keys)
		var cs []cells.Cell
		for j, row := range rows {
			cs = append(cs, newCell(t, row, "BASE", int64(i+1), fmt.Sprintf(`{"key":%d,"j":%d}`, i, j)))
		}
		res, err := nodes[0].Write(ctx, ds, cluster.WriteRequest{Cells: cs, IdempotencyKey: key})
		require.NoError(t, err, "key %q: first write", key)
		require.True(t, res.Applied(), "key %q: first write applied: %+v", key, res.WriteResult)
		require.False(t, res.Replayed, "key %q: first write", key)
		keys = append(keys, key)
		batches[key], first[key] = cs, res
	}
	write(uuid.NewString())
	write("order-4711")
	retry := func(when string) {
		t.Helper()
		for _, key := range keys {
			for _, n := range nodes {
				res, err := n.Write(ctx, ds, cluster.WriteRequest{Cells: batches[key], IdempotencyKey: key})
				require.NoError(t, err, "key %q %s through %s", key, when, n.ID())
				assert.False(t, res.KeyReused, "key %q %s through %s: not a reused key", key, when, n.ID())
				assert.True(t, res.Replayed, "key %q %s through %s: replayed", key, when, n.ID())
				assert.Equal(t, first[key].Cells, res.Cells, "key %q %s through %s: the first outcome of every cell", key, when, n.ID())
			}
		}
	}
	retry("before the split")

	split, err := nodes[1].SplitPartition(ctx, ds, 1, wire.SplitRequest{AtShard: at})
	require.NoError(t, err, "split partition 1 at %d", at)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= split.Generation }, opTimeout, 10*time.Millisecond)
	}
	retry("after the split")
	// Written now, the batch leaves a record in each half; the merge joins them.
	write(uuid.NewString())
	write("order-4712")
	retry("after the split")

	other := append([]cells.Cell(nil), batches[keys[0]]...)
	other[len(other)-1] = newCell(t, other[len(other)-1].RowKey, "BASE", 99, `{"another":"request"}`)
	res, err := nodes[2].Write(ctx, ds, cluster.WriteRequest{Cells: other, IdempotencyKey: keys[0]})
	require.NoError(t, err, "another batch under a used key")
	assert.True(t, res.KeyReused, "another batch under a used key is refused")

	m, err := nodes[2].MergePartitions(ctx, ds, 1, split.Right.ID)
	require.NoError(t, err, "merge the halves back")
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= m.Generation }, opTimeout, 10*time.Millisecond)
	}
	retry("after the merge")

	l := newLedger()
	for _, key := range keys {
		for i, cl := range batches[key] {
			l.add(acked{key: cl.Key, body: bodyJSON(t, cl.Body), addedID: first[key].Cells[i].AddedID, created: first[key].Cells[i].CreatedAt})
		}
	}
	requireStrong(t, l, nodes...)
	checkShardLogs(t, spec, l, nodes...)
}
