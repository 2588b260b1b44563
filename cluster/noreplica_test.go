package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopbackAddr returns a free address on 127.0.0.1, one not handed out before in this process.
func loopbackAddr(t *testing.T) string {
	t.Helper()
	given.Lock()
	defer given.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		_ = ln.Close()
		// The kernel may hand a closed port out again: never give one address twice.
		if !given.addrs[addr] {
			given.addrs[addr] = true
			return addr
		}
	}
}

// given holds the addresses loopbackAddr handed out in this test process.
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// bareNode is a node started directly with cluster.Start (clustertest only builds topologies
// that place every partition on every node).
type bareNode struct {
	node  *cluster.Node
	store *storage.Store
	once  sync.Once
}

func (b *bareNode) stop() {
	b.once.Do(func() {
		_ = b.node.Close()
		_ = b.store.Close()
	})
}

func startBareNode(t *testing.T, top *topology.Topology, id string) *bareNode {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: filepath.Join(dir, "sqlite")})
	require.NoError(t, err)
	n, err := cluster.Start(context.Background(), cluster.Config{
		NodeID: id, Topology: top, DataDir: dir, Store: st,
		Logger: slog.New(slog.NewTextHandler(clustertest.NewTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", id),
		Partition: partition.Config{HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 10 * time.Millisecond},
		OnFatal: func(err error) { assert.NoError(t, err, "node %s: fatal storage error", id) },
	})
	if err != nil {
		st.Close()
	}
	require.NoError(t, err, "start %s", id)
	b := &bareNode{node: n, store: st}
	t.Cleanup(b.stop)
	return b
}

// TestForwardingFromNodeWithoutReplica: datastore "pairs" lives on n1 and n2 only. n3, which
// hosts no replica of it, serves it by forwarding: writes and strong reads find the leader
// (round robin over the replicas, then the leader they name), stale reads go to any replica
// that answers, including when one replica is down.
func TestForwardingFromNodeWithoutReplica(t *testing.T) {
	t.Parallel()
	top := &topology.Topology{Datastores: []topology.DatastoreSpec{{Name: "pairs", Shards: 4, Replicas: []string{"n1", "n2"}}}}
	for i := 1; i <= 3; i++ {
		top.Nodes = append(top.Nodes, topology.NodeSpec{ID: fmt.Sprintf("n%d", i), RaftAddr: loopbackAddr(t), HTTPAddr: loopbackAddr(t)})
	}
	require.NoError(t, top.Normalize())
	nodes := map[string]*bareNode{}
	for _, n := range top.Nodes {
		nodes[n.ID] = startBareNode(t, top, n.ID)
	}
	var leader string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		l1 := replicaStatus(ct, nodes["n1"].node, "pairs", 0).Leader
		l2 := replicaStatus(ct, nodes["n2"].node, "pairs", 0).Leader
		require.NotEmpty(ct, l1, "leader known to n1")
		require.Equal(ct, l1, l2, "leader known to n2, want n1's")
		leader = l1
	}, 20*time.Second, 10*time.Millisecond, "pairs/0 has a leader on n1 and n2")
	n3 := nodes["n3"].node
	st := replicaStatus(t, n3, "pairs", 0)
	require.False(t, st.Local || st.State != "", "n3's view of pairs/0: got %+v, want not local and no raft state", st)
	t.Logf("pairs/0 leader: %s", leader)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var acks []acked
	for i := 0; i < 4; i++ {
		row := rowsPerPartition(t, &top.Datastores[0], fmt.Sprint(t.Name(), i), 1)[0][0]
		cell := newCell(t, row, "BASE", int64(i), fmt.Sprintf(`{"i":%d}`, i))
		res, err := n3.PutCells(ctx, "pairs", []cells.Cell{cell})
		require.NoError(t, err, "PutCells through n3 (no replica), write %d", i)
		require.Equal(t, cells.StatusCreated, res[0].Status, "PutCells through n3 (no replica), write %d", i)
		acks = append(acks, acked{key: cell.Key, body: fmt.Sprintf(`{"i":%d}`, i), addedID: res[0].AddedID, created: res[0].CreatedAt})
	}
	// After writes that went round robin, n3 has learned the leader from a NotLeader answer.
	assert.Equal(t, leader, replicaStatus(t, n3, "pairs", 0).Leader, "n3's leader hint for pairs/0 after 4 forwarded writes")
	require.NoError(t, checkCellsIn(n3, "pairs", cluster.Strong, acks, opTimeout))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		// Stale reads through n3 go to either replica in turn: ask a few times.
		for i := 0; i < 4; i++ {
			require.NoError(ct, checkCellsIn(n3, "pairs", cluster.Stale, acks, opTimeout))
		}
	}, 10*time.Second, 10*time.Millisecond, "stale reads through n3 see every write")
	row, err := n3.GetRow(ctx, "pairs", acks[0].key.RowKey, cluster.Strong)
	if assert.NoError(t, err, "GetRow through n3") && assert.Len(t, row, 1, "GetRow through n3: cells") {
		assert.Equal(t, acks[0].addedID, row[0].AddedID, "GetRow through n3: added_id of the one cell")
	}
	shard := cells.ShardOf(acks[0].key.RowKey, 4)
	scan, err := n3.ScanShard(ctx, "pairs", shard, 0, 100, cluster.Stale)
	assert.NoError(t, err, "ScanShard(%d) stale through n3", shard)
	assert.NotEmpty(t, scan, "ScanShard(%d) stale through n3: cells", shard)

	// One replica down: the group has no quorum, so strong reads fail with ErrUnavailable,
	// but stale reads through n3 still find the replica that is up.
	// n1 is the first replica listed, so stale reads through n3 must skip it to find n2.
	down := "n1"
	nodes[down].stop()
	for i := 0; i < 4; i++ {
		require.NoError(t, checkCellsIn(n3, "pairs", cluster.Stale, acks, 5*time.Second), "stale read through n3 with %s down (attempt %d)", down, i)
	}
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	_, err = n3.GetCells(short, "pairs", []cluster.GetKey{{Key: acks[0].key}}, cluster.Strong)
	assert.ErrorIs(t, err, partition.ErrUnavailable, "strong read through n3 without a quorum")
	assert.NotErrorIs(t, err, partition.ErrIndeterminate, "strong read through n3 without a quorum: want ErrUnavailable only")
}

// replicaStatus returns n's status of partition p of datastore ds, failing t (the test, or an
// EventuallyWithT condition's collector) when n reports none.
func replicaStatus(t require.TestingT, n *cluster.Node, ds string, p int) cluster.ReplicaStatus {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	for _, r := range n.Replicas() {
		if r.Datastore == ds && r.Partition == p {
			return r
		}
	}
	require.FailNow(t, "no replica status", "node %s reports no status for %s/%d", n.ID(), ds, p)
	return cluster.ReplicaStatus{}
}
