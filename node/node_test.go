package node_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/node"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Three nodes run the index maintainer in-process: a defined index is built and marked ready
// with no HTTP between a maintainer and its node, each node's worker is a member of the
// index's group, and a graceful stop (Shutdown) takes the node's worker out of the group at
// once, long before its session would expire.
func TestMaintainerBuildsAndShutdownLeaves(t *testing.T) {
	pc := partition.DefaultConfig()
	pc.HeartbeatTimeout, pc.ElectionTimeout, pc.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
	m := maintainer.DefaultConfig()
	m.PollInterval, m.SessionTimeout = 200*time.Millisecond, 20*time.Second
	c, err := localcluster.Start(context.Background(), localcluster.Options{Dir: t.TempDir(), Shards: 8, Partitions: 2, Partition: pc,
		Maintainer: &m, OnFatal: func(node string, err error) { t.Errorf("node %s: %v", node, err) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	n := c.Node(1)
	for i := range 40 {
		b, err := cells.EncodeBody([]byte(fmt.Sprintf(`{"driver":"d%d"}`, i%5)))
		require.NoError(t, err)
		_, err = n.PutCells(ctx, "trips", []cells.Cell{{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, Body: b}})
		require.NoError(t, err, "put cell %d", i)
	}
	def, err := indexes.ParseDefinition([]byte("table: by_driver\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: driver, type: string}\n"))
	require.NoError(t, err)
	_, err = n.CatalogApply(ctx, "trips", indexes.Command{Op: indexes.OpDefine, Name: def.Table, Definition: def})
	require.NoError(t, err, "define the index")
	group := indexes.GroupName("by_driver", 1)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cat, err := n.Catalog(ctx, "trips", cluster.Strong)
		require.NoError(ct, err)
		v, err := cat.Resolve("by_driver", 0)
		require.NoError(ct, err, "a ready version")
		assert.Equal(ct, indexes.StateReady, v.State)
		st, err := n.GroupStatus(ctx, "trips", group, cluster.Strong)
		require.NoError(ct, err)
		assert.Len(ct, st.Members, 3, "members of %s", group)
	}, 60*time.Second, 100*time.Millisecond, "index by_driver ready, maintained by every node")

	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.StopNodeGracefully(sctx, 0), "graceful stop of node 0")
	// Well within the 20s session: only a leave removes the member this soon.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		st, err := n.GroupStatus(ctx, "trips", group, cluster.Strong)
		require.NoError(ct, err)
		ids := []string{}
		for _, m := range st.Members {
			ids = append(ids, m.ID)
		}
		assert.ElementsMatch(ct, []string{"n2", "n3"}, ids, "members of %s", group)
	}, 5*time.Second, 50*time.Millisecond, "node 0's worker out of the group after Shutdown")
}

// A store that fails under a replica stops it from applying: the node reports ErrFatal on
// Failed and keeps running until it is closed, which closes Failed.
func TestFatalStoreFailure(t *testing.T) {
	n, store := startSingle(t, nil)
	api := "http://" + n.Addr()
	code, body := do(t, http.MethodPut, api+"/v1/users/cells/"+uuid.NewString()+"/BASE/1", `{"n":1}`)
	require.Equal(t, http.StatusCreated, code, "put_cell before the failure: %s", body)
	require.NoError(t, store.Close())
	b, err := cells.EncodeBody([]byte(`{"n":2}`))
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		_, _ = n.Cluster().PutCells(wctx, "users", []cells.Cell{{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, Body: b}})
	}()
	select {
	case err := <-n.Failed():
		assert.ErrorIs(t, err, node.ErrFatal, "Failed after the store closed")
	case <-time.After(30 * time.Second):
		require.Fail(t, "no error on Failed 30s after the store closed under a write")
	}
	code, _ = do(t, http.MethodGet, api+"/healthz", "")
	assert.Equal(t, http.StatusOK, code, "GET /healthz: the API answers until the node is closed")
	assert.NoError(t, n.Close(), "Close")
	_, open := <-n.Failed()
	assert.False(t, open, "Failed is closed after Close")
}

// Validate names every missing field; Start refuses a bad config and closes the listener it
// was given.
func TestConfigErrors(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.EnsureDefaults()
	err := cfg.Validate()
	require.ErrorIs(t, err, node.ErrInvalidConfig)
	for _, want := range []string{"Topology is required", "DataDir is required", "Store is required", "HTTPAddr is required"} {
		assert.ErrorContains(t, err, want)
	}
	cfg.Cluster.OnFatal = func(error) {}
	cfg.HandoffTimeout = -time.Second
	err = cfg.Validate()
	assert.ErrorContains(t, err, "OnFatal must be nil")
	assert.ErrorContains(t, err, "HandoffTimeout")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg = node.DefaultConfig()
	cfg.Listener = ln
	_, err = node.Start(context.Background(), cfg)
	require.ErrorIs(t, err, node.ErrInvalidConfig)
	_, err = ln.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "the listener given to a failed Start is closed")
}

// A Start that fails part way (the admin port taken) stops what it started: the same node then
// starts over the same data and ports (each Start with a store of its own, as each process
// opens one).
func TestStartFailureCleansUp(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var cfg node.Config
	n, store := startSingle(t, func(c *node.Config) { cfg = *c })
	require.NoError(t, n.Close())
	require.NoError(t, store.Close())
	openStore := func() *storage.Store {
		st, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: filepath.Join(cfg.Cluster.DataDir, "sqlite")})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}

	bad := cfg
	bad.Cluster.Store = openStore()
	bad.AdminAddr = taken.Addr().String()
	_, err = node.Start(context.Background(), bad)
	require.ErrorIs(t, err, syscall.EADDRINUSE, "Start with the admin port taken")

	// The raft and API ports are free again.
	cfg.Cluster.Store = openStore()
	n2, err := node.Start(context.Background(), cfg)
	require.NoError(t, err, "Start after a failed Start")
	defer n2.Close()
	assert.Eventually(t, func() bool { return n2.Cluster().Ready() == nil }, 30*time.Second, 20*time.Millisecond, "the restarted node ready")
	assert.Equal(t, cfg.Cluster.Topology.Nodes[0].HTTPAddr, n2.Addr(), "the API on the node's http_addr")
}
