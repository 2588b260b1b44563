package cluster

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// A merged partition's data, once deleted, stays deleted: a reconcileMerge of its left
// partition that began while the merge was on its way here (it looks for the frozen right
// partition in this node's store) neither delays the deletion for good nor opens the deleted
// store again, which on SQLite created the file anew and left it for good (a CI run of
// TestMergePartitionsSQLite found the file of a merged partition still there). While
// reconcileMerge reads the store, the deletion waits for it.
func TestMergedPartitionStaysDeleted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storage.OpenSQLite(ctx, storage.SQLiteConfig{Dir: filepath.Join(dir, "sqlite")})
	require.NoError(t, err, "open the SQLite store")
	t.Cleanup(func() { _ = st.Close() })
	n := &Node{cfg: Config{NodeID: "n1", DataDir: dir, Store: st}, log: slog.Default(), stopWatch: make(chan struct{})}
	n.view.Store(&nodeView{byName: map[string]*datastore{}, top: &topology.Topology{}})

	right := storage.PartitionID{Datastore: "trips", Partition: 1}
	file := filepath.Join(dir, "sqlite", "trips-p1.db")
	ps, err := st.Partition(ctx, right, cells.ShardRange{First: 4, Last: 7})
	require.NoError(t, err, "open the right partition's store")
	require.NoError(t, ps.Close())
	require.NoError(t, os.MkdirAll(n.replicaDir("trips", 1), 0o755))
	require.FileExists(t, file)

	// Merged into partition 0 here, its data waits while a reconcileMerge reads it.
	n.retireMerged("trips", 1)
	require.True(t, n.beginReadingRetired(right), "the store of a partition not yet deleted may be read")
	n.retireMergedLocked(ctx)
	assert.FileExists(t, file, "deleted while reconcileMerge reads it")
	n.endReadingRetired(right)
	n.retireMergedLocked(ctx)
	assert.NoFileExists(t, file, "the merged partition's file once no one reads it")
	assert.NoDirExists(t, n.replicaDir("trips", 1), "the merged partition's replica directory")

	// A reconcileMerge of the left partition that runs now finds no frozen right partition
	// and creates nothing.
	left := &route{spec: &topology.PartitionSpec{ID: 0}}
	n.reconcileMerge("trips", left, []int{1}, cells.ShardRange{First: 0, Last: 3})
	require.Eventually(t, func() bool { return !left.splitting.Load() }, 10*time.Second, 5*time.Millisecond, "reconcileMerge ends")
	assert.NoFileExists(t, file, "the merged partition's file after a late reconcileMerge")
	assert.False(t, n.beginReadingRetired(right), "the store of a deleted partition (no replica directory here) may not be read")
	n.retiring.Lock()
	n.retiring.deleting = map[storage.PartitionID]bool{right: true}
	n.retiring.Unlock()
	require.NoError(t, os.MkdirAll(n.replicaDir("trips", 1), 0o755))
	assert.False(t, n.beginReadingRetired(right), "the store of a partition being deleted may not be read")
}
