package localcluster

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
)

// TestStoreOptionErrors checks that Start refuses an unknown Options.Store, mysql without a
// DSN and an embedded store with one, before it writes anything.
func TestStoreOptionErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store, dsn, want string
	}{
		{"rocksdb", "", `localcluster: Options.Store "rocksdb": want sqlite, pebble or mysql`},
		{"mysql", "", "localcluster: Options.Store mysql needs Options.MySQLDSN"},
		{"pebble", "root@tcp(127.0.0.1:1)/", "localcluster: Options.Store pebble with Options.MySQLDSN: the DSN is for store mysql"},
		{"sqlite", "root@tcp(127.0.0.1:1)/", "localcluster: Options.Store sqlite with Options.MySQLDSN: the DSN is for store mysql"},
	} {
		dir := t.TempDir()
		c, err := Start(context.Background(), Options{Dir: dir, Store: tc.store, MySQLDSN: tc.dsn})
		assert.Nil(t, c, "Store %q, DSN %q", tc.store, tc.dsn)
		assert.EqualError(t, err, tc.want, "Store %q, DSN %q", tc.store, tc.dsn)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "Store %q, DSN %q: nothing written", tc.store, tc.dsn)
	}
}

// TestStorePebble starts a 1-node cluster with Options.Store pebble: the node's store is
// pebble, under its data directory's pebble/ (no sqlite/), and a cell written before a restart
// of the node is read after it.
func TestStorePebble(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc := partition.DefaultConfig()
	pc.HeartbeatTimeout, pc.ElectionTimeout, pc.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	c, err := Start(ctx, Options{Dir: t.TempDir(), Nodes: 1, Shards: 4, Partitions: 2, Store: storage.EnginePebble, Partition: pc})
	require.NoError(t, err)
	defer c.Close()
	c.mu.Lock()
	engine := c.nodes[0].store.Engine()
	c.mu.Unlock()
	assert.Equal(t, storage.EnginePebble, engine, "node 0's store")
	assert.DirExists(t, filepath.Join(c.DataDir(0), "pebble"))
	assert.NoDirExists(t, filepath.Join(c.DataDir(0), "sqlite"))

	cell := c.URL(0) + "/v1/trips/cells/" + uuid.NewSHA1(uuid.NameSpaceURL, []byte("localcluster-pebble")).String() + "/BASE/1"
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, cell, strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "put_cell")
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "put_cell")

	require.NoError(t, c.StopNode(0))
	require.NoError(t, c.StartNode(ctx, 0))
	require.NoError(t, c.WaitReady(ctx, 30*time.Second))
	resp, err = http.Get(cell)
	require.NoError(t, err, "get_cell after the restart")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "get_cell after the restart: %s", body)
	assert.Contains(t, string(body), `"n":1`, "get_cell after the restart")
}
