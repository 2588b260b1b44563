package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

type tLogWriter struct{ t testing.TB }

func (w tLogWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func loopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

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
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.Start(context.Background(), cluster.Config{
		NodeID: id, Topology: top, DataDir: dir, Store: st,
		Logger: slog.New(slog.NewTextHandler(tLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", id),
		Partition: partition.Config{HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 10 * time.Millisecond},
		OnFatal: func(err error) { t.Errorf("node %s: fatal storage error: %v", id, err) },
	})
	if err != nil {
		st.Close()
		t.Fatalf("start %s: %v", id, err)
	}
	b := &bareNode{node: n, store: st}
	t.Cleanup(b.stop)
	return b
}

// TestForwardingFromNodeWithoutReplica: datastore "pairs" lives on n1 and n2 only. n3, which
// hosts no replica of it, serves it by forwarding: writes and strong reads find the leader
// (round robin over the replicas, then the leader they name), stale reads go to any replica
// that answers, including when one replica is down.
func TestForwardingFromNodeWithoutReplica(t *testing.T) {
	top := &topology.Topology{Datastores: []topology.DatastoreSpec{{Name: "pairs", Shards: 4, Replicas: []string{"n1", "n2"}}}}
	for i := 1; i <= 3; i++ {
		top.Nodes = append(top.Nodes, topology.NodeSpec{ID: fmt.Sprintf("n%d", i), RaftAddr: loopbackAddr(t), HTTPAddr: loopbackAddr(t)})
	}
	if err := top.Normalize(); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*bareNode{}
	for _, n := range top.Nodes {
		nodes[n.ID] = startBareNode(t, top, n.ID)
	}
	var leader string
	waitUntil(t, 20*time.Second, "pairs/0 has a leader on n1 and n2", func() bool {
		l1 := replicaStatus(t, nodes["n1"].node, "pairs", 0).Leader
		l2 := replicaStatus(t, nodes["n2"].node, "pairs", 0).Leader
		leader = l1
		return l1 != "" && l1 == l2
	})
	n3 := nodes["n3"].node
	if st := replicaStatus(t, n3, "pairs", 0); st.Local || st.State != "" {
		t.Fatalf("n3's view of pairs/0: got %+v, want not local and no raft state", st)
	}
	t.Logf("pairs/0 leader: %s", leader)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var acks []acked
	for i := 0; i < 4; i++ {
		row := rowsPerPartition(t, &top.Datastores[0], fmt.Sprint(t.Name(), i), 1)[0][0]
		cell := newCell(t, row, "BASE", int64(i), fmt.Sprintf(`{"i":%d}`, i))
		res, err := n3.PutCells(ctx, "pairs", []cells.Cell{cell})
		if err != nil || res[0].Status != cells.StatusCreated {
			t.Fatalf("PutCells through n3 (no replica), write %d: got %v %v, want created", i, res, err)
		}
		acks = append(acks, acked{key: cell.Key, body: fmt.Sprintf(`{"i":%d}`, i), addedID: res[0].AddedID, created: res[0].CreatedAt})
	}
	// After writes that went round robin, n3 has learned the leader from a NotLeader answer.
	if st := replicaStatus(t, n3, "pairs", 0); st.Leader != leader {
		t.Errorf("n3's leader hint for pairs/0 after 4 forwarded writes: got %q, want %q", st.Leader, leader)
	}
	if err := checkCellsIn(n3, "pairs", cluster.Strong, acks, opTimeout); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "stale reads through n3 see every write", func() bool {
		// Stale reads through n3 go to either replica in turn: ask a few times.
		for i := 0; i < 4; i++ {
			if checkCellsIn(n3, "pairs", cluster.Stale, acks, opTimeout) != nil {
				return false
			}
		}
		return true
	})
	row, err := n3.GetRow(ctx, "pairs", acks[0].key.RowKey, cluster.Strong)
	if err != nil || len(row) != 1 || row[0].AddedID != acks[0].addedID {
		t.Errorf("GetRow through n3: got %v, %v, want the one cell with added_id %d", row, err, acks[0].addedID)
	}
	shard := cells.ShardOf(acks[0].key.RowKey, 4)
	scan, err := n3.ScanShard(ctx, "pairs", shard, 0, 100, cluster.Stale)
	if err != nil || len(scan) == 0 {
		t.Errorf("ScanShard(%d) stale through n3: got %d cells, %v, want at least one", shard, len(scan), err)
	}

	// One replica down: the group has no quorum, so strong reads fail with ErrUnavailable,
	// but stale reads through n3 still find the replica that is up.
	// n1 is the first replica listed, so stale reads through n3 must skip it to find n2.
	down := "n1"
	nodes[down].stop()
	for i := 0; i < 4; i++ {
		if err := checkCellsIn(n3, "pairs", cluster.Stale, acks, 5*time.Second); err != nil {
			t.Fatalf("stale read through n3 with %s down (attempt %d): %v", down, i, err)
		}
	}
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	_, err = n3.GetCells(short, "pairs", []cluster.GetKey{{Key: acks[0].key}}, cluster.Strong)
	if !errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate) {
		t.Errorf("strong read through n3 without a quorum: got %v, want ErrUnavailable only", err)
	}
}

func replicaStatus(t *testing.T, n *cluster.Node, ds string, p int) cluster.ReplicaStatus {
	t.Helper()
	for _, r := range n.Replicas() {
		if r.Datastore == ds && r.Partition == p {
			return r
		}
	}
	t.Fatalf("node %s reports no status for %s/%d", n.ID(), ds, p)
	return cluster.ReplicaStatus{}
}
