package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestSizeBasedSplit, on every store: with a size threshold of 100 KiB, partition 1 (shards
// 8..15), given 400 cells of some 1.5 KB of random text, splits on its own, at a shard inside
// its range (and its halves may split again), while partition 0, which holds nothing, does
// not; every acknowledged cell stays readable. Each store estimates its shards' sizes its own way (storage ShardSizes); MySQL
// counts at least the first pages of each shard's table (32 KiB), so it splits early here.
func TestSizeBasedSplit(t *testing.T) {
	t.Parallel()
	for _, engine := range []clustertest.Engine{clustertest.Pebble, clustertest.SQLite, clustertest.MySQL} {
		t.Run(string(engine), func(t *testing.T) { testSizeBasedSplit(t, engine) })
	}
}

func testSizeBasedSplit(t *testing.T, engine clustertest.Engine) {
	c := clustertest.Start(t, clustertest.Options{Engine: engine,
		AutoSplit: cluster.AutoSplitConfig{Size: 100 << 10, SizeEvery: 200 * time.Millisecond, Cooldown: time.Hour}})
	nodes := running(c)
	spec := &c.Topology.Datastores[0]
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond)
	}
	rows := rowsPerPartition(t, spec, t.Name(), 400)[1] // partition 1 only
	l := newLedger()
	for i := 0; i < len(rows); i += 40 {
		var cs []cells.Cell
		for _, row := range rows[i:min(i+40, len(rows))] {
			var pad strings.Builder // random text: bodies are compressed
			for range 40 {
				pad.WriteString(uuid.NewString())
			}
			cs = append(cs, newCell(t, row, "BASE", 1, fmt.Sprintf(`{"pad":%q}`, pad.String())))
		}
		putIn(t, nodes[i/40%3], ds, l, cs)
	}
	began := time.Now()
	require.Eventually(t, func() bool {
		require.NoError(t, c.FlushStores())
		d, err := nodes[0].Datastore(ds)
		return err == nil && len(d.Partitions) >= 3
	}, 30*time.Second, 200*time.Millisecond, "partition 1 splits by size")
	t.Logf("split by size %s after the flush", time.Since(began).Round(100*time.Millisecond))
	// Its halves may split again while they stay above the threshold (each holds some 300 KB
	// here), down to partitions of one shard; the empty partition 0 never splits.
	cat := nodes[0].CatalogDatastores()
	hist := cat.Datastores[0].History
	require.NotEmpty(t, hist)
	ev := hist[0]
	assert.Equal(t, 1, ev.Left, "the large partition split first, not the empty one")
	assert.True(t, ev.AtShard > 8 && ev.AtShard <= 15, "at shard %d, inside 8..15", ev.AtShard)
	for _, e := range hist {
		assert.Equal(t, "split", e.Op, "only splits: %+v", e)
		assert.True(t, e.Auto, "size-based splits are automatic: %+v", e)
		assert.True(t, e.AtShard > 8 && e.AtShard <= 15, "every split inside the written shards 8..15: %+v", e)
	}
	d, err := nodes[0].Datastore(ds)
	require.NoError(t, err)
	assert.Equal(t, 0, d.Partitions[0].ID, "partition 0 keeps its range")
	assert.Equal(t, 7, d.Partitions[0].LastShard, "partition 0 keeps its range")
	requireStrong(t, l, nodes...)
}
