package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startAsync starts a private replicated set (2 clusters of a master and 2 minions) and a
// 3-node cluster whose datastore "trips" is async on it, with fast probes and replays.
func startAsync(t *testing.T) (*clustertest.Cluster, *mariadb.ReplicatedSet) {
	t.Helper()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Async, ReplicatedSet: set,
		AsyncCluster: func(set *mariadb.ReplicatedSet) *localcluster.AsyncOptions {
			return &localcluster.AsyncOptions{Prefix: "sl",
				Cluster:   partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond, BreakerTimeout: time.Second},
				Partition: partition.AsyncConfig{ReapInterval: 100 * time.Millisecond, ReplayAfter: 500 * time.Millisecond}}
		}})
	return c, set
}

// putAsync writes cs through n and records each acknowledged cell (created, exists or
// buffered) in l; it returns the results.
func putAsync(t *testing.T, n *cluster.Node, l *ledger, cs []cells.Cell) []cells.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := n.PutCells(ctx, ds, cs)
	if err != nil {
		t.Fatalf("PutCells through %s: got %v, want nil", n.ID(), err)
	}
	for i, r := range res {
		switch r.Status {
		case cells.StatusCreated, cells.StatusExists, cells.StatusBuffered:
			l.add(acked{key: cs[i].Key, body: bodyJSON(t, cs[i].Body), addedID: r.AddedID, created: r.CreatedAt})
		default:
			t.Fatalf("PutCells through %s: cell %s got %v, want created, exists or buffered", n.ID(), cs[i].Key, r.Status)
		}
	}
	return res
}

// requireAllEventually polls strong reads through n until every acknowledged cell is there
// with its body (added_ids of buffered cells are assigned at replay, so only bodies compare).
func requireAllEventually(t *testing.T, n *cluster.Node, l *ledger, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			want := l.all()
			keys := make([]cluster.GetKey, len(want))
			for i, a := range want {
				keys[i] = cluster.GetKey{Key: a.key}
			}
			res, err := n.GetCells(ctx, ds, keys, cluster.Strong)
			if err != nil {
				return err
			}
			for i, a := range want {
				if !res[i].Found {
					return fmt.Errorf("%s not found", a.key)
				}
				if got := bodyJSON(t, res[i].Cell.Body); got != a.body {
					return fmt.Errorf("%s body %s, want %s", a.key, got, a.body)
				}
			}
			return nil
		}()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("acknowledged cells through %s after %s: %v", n.ID(), timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// masterBreaker returns the state of node n's circuit breaker towards the master of partition
// p's storage cluster ("closed", "half-open", "open"), or "" when n knows no master.
func masterBreaker(n *cluster.Node, p int) string {
	for _, r := range n.Replicas() {
		if r.Partition != p || r.Async == nil {
			continue
		}
		for _, m := range r.Async.Members {
			if m.Role == "master" {
				return m.Breaker
			}
		}
	}
	return ""
}

// bufferDepth returns the buffer depth of partition p as node n's reaper last saw it.
func bufferDepth(n *cluster.Node, p int) int64 {
	for _, r := range n.Replicas() {
		if r.Partition == p && r.Async != nil {
			return r.Async.BufferDepth
		}
	}
	return -1
}

// TestAsyncMasterDown kills the master of partition 0's cluster (kill -9): writes to it keep
// succeeding as buffered, strong reads fail fast and retryably while stale reads serve from a
// minion, and once the master is back every buffered cell is replayed, readable, and gone from
// the buffer. Writes to the other partition are never affected.
func TestAsyncMasterDown(t *testing.T) {
	c, set := startAsync(t)
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 20)
	l := newLedger()
	before := []cells.Cell{}
	for i, row := range rows[0][:5] {
		before = append(before, newCell(t, row, "BASE", 1, fmt.Sprintf(`{"before":%d}`, i)))
	}
	for _, r := range putAsync(t, nodes[0], l, before) {
		if r.Status != cells.StatusCreated || r.AddedID < 1 {
			t.Fatalf("write with the master up: got %v added_id %d, want created", r.Status, r.AddedID)
		}
	}
	ctx := context.Background()
	if err := set.WaitCaughtUp(ctx, 0); err != nil {
		t.Fatal(err)
	}

	if err := set.Instance(0, 0).Kill(); err != nil {
		t.Fatal(err)
	}
	t.Log("killed the master of cluster c0 (partition 0)")
	// Until the probes notice, a write may still hit the dead master and answer buffered;
	// either way, every write succeeds.
	var buffered int
	for i, row := range rows[0][5:] {
		res := putAsync(t, nodes[i%3], l, []cells.Cell{newCell(t, row, "BASE", 1, fmt.Sprintf(`{"during":%d}`, i))})
		if res[0].Status == cells.StatusBuffered {
			buffered++
		}
	}
	if buffered != len(rows[0])-5 {
		t.Fatalf("writes to the partition of the dead master: %d of %d buffered, want all", buffered, len(rows[0])-5)
	}
	// Conflicts are still caught with the master down: a key a minion holds with another body,
	// and a second body for a buffered key (refused by the buffer).
	for i, c := range []cells.Cell{newCell(t, rows[0][0], "BASE", 1, `{"another":1}`), newCell(t, rows[0][5], "BASE", 1, `{"another":2}`)} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := nodes[i].PutCells(wctx, ds, []cells.Cell{c})
		cancel()
		if err != nil || res[0].Status != cells.StatusConflict {
			t.Fatalf("conflicting write %d with the master down: got %v, %v; want conflict", i, res, err)
		}
	}
	// The other partition's writes need a buffer on the dead master's cluster, the only other
	// one: with two storage clusters they are unavailable (nothing written) until it is back.
	for i, row := range rows[1][:3] {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := nodes[i%3].PutCells(wctx, ds, []cells.Cell{newCell(t, row, "BASE", 1, `{"other":true}`)})
		cancel()
		if !errors.Is(err, partition.ErrUnavailable) {
			t.Fatalf("write to the other partition with its only buffer cluster's master down: got %v, want ErrUnavailable", err)
		}
	}
	// Strong reads of the dead master's partition fail fast with ErrUnavailable (a 503 the
	// client retries); stale reads serve from a minion.
	key := cluster.GetKey{Key: before[0].Key}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := nodes[1].GetCells(sctx, ds, []cluster.GetKey{key}, cluster.Strong)
	cancel()
	if !errors.Is(err, partition.ErrUnavailable) || time.Since(start) > 2*time.Second {
		t.Fatalf("strong read with the master down: got %v after %s, want ErrUnavailable at once", err, time.Since(start))
	}
	res, err := nodes[2].GetCells(ctx, ds, []cluster.GetKey{key}, cluster.Stale)
	if err != nil || !res[0].Found {
		t.Fatalf("stale read with the master down: got found %v, %v; want the cell from a minion", len(res) > 0 && res[0].Found, err)
	}
	require.Eventually(t, func() bool { return bufferDepth(nodes[0], 0) >= int64(buffered) }, 10*time.Second, 10*time.Millisecond,
		"the reaper sees the %d buffered cells", buffered)
	// The same figures in the node's metrics, with the dead master's breaker or role.
	reg := prometheus.NewRegistry()
	reg.MustRegister(nodes[0].AsyncCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string][]*dto.Metric{}
	for _, mf := range mfs {
		metrics[mf.GetName()] = mf.GetMetric()
	}
	var depth0 float64 = -1
	for _, m := range metrics["schemaless_async_buffer_depth"] {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "partition" && lp.GetValue() == "0" {
				depth0 = m.GetGauge().GetValue()
			}
		}
	}
	if depth0 < float64(buffered) || len(metrics["schemaless_storage_master"]) != 6 || len(metrics["schemaless_storage_breaker_state"]) != 6 {
		t.Fatalf("metrics: buffer depth of partition 0 %v (want >= %d), %d master series and %d breaker series (want 6 each)",
			depth0, buffered, len(metrics["schemaless_storage_master"]), len(metrics["schemaless_storage_breaker_state"]))
	}

	// The master comes back (fenced: read_only), the operator unfences it; the reaper replays.
	if err := set.Restart(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	db, err := replication.Open(set.AdminDSN(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := replication.MakeMaster(ctx, db); err != nil {
		t.Fatal(err)
	}
	// The next writes need that master as their buffer, through each node's circuit breaker
	// towards it: wait until every node has the datastore ready (a master in every storage
	// cluster) and that breaker closed. (A half-open breaker would let one request through
	// and refuse the others.)
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if n.DatastoreReady(ds) != nil || masterBreaker(n, 0) != "closed" {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every node sees the master of c0 again, with its breaker towards it closed")
	for i, row := range rows[1] {
		res := putAsync(t, nodes[i%3], l, []cells.Cell{newCell(t, row, "BASE", 1, `{"other":true}`)})
		assert.Equal(t, cells.StatusCreated, res[0].Status, "write %d to the other partition with every master up", i)
	}
	requireAllEventually(t, nodes[1], l, 30*time.Second)
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if bufferDepth(n, 0) != 0 || bufferDepth(n, 1) != 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "the buffers empty")
	var replayed int64
	for _, n := range nodes {
		for _, r := range n.Replicas() {
			if r.Async != nil {
				replayed += r.Async.Replayed
			}
		}
	}
	if replayed < int64(buffered) {
		t.Fatalf("replayed %d cells, want at least the %d buffered", replayed, buffered)
	}
	t.Logf("%d writes buffered while the master was down, %d replayed, all readable", buffered, replayed)
}

// TestAsyncFailover promotes a minion after the master dies: the nodes switch to it by
// themselves, new writes are created there, and the writes buffered in between are replayed
// into it.
func TestAsyncFailover(t *testing.T) {
	c, set := startAsync(t)
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 10)
	l := newLedger()
	for i, row := range rows[0][:4] {
		putAsync(t, nodes[i%3], l, []cells.Cell{newCell(t, row, "BASE", 1, fmt.Sprintf(`{"i":%d}`, i))})
	}
	ctx := context.Background()
	if err := set.WaitCaughtUp(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := set.Instance(0, 0).Kill(); err != nil {
		t.Fatal(err)
	}
	for i, row := range rows[0][4:7] {
		putAsync(t, nodes[i%3], l, []cells.Cell{newCell(t, row, "BASE", 1, fmt.Sprintf(`{"gap":%d}`, i))})
	}
	members := []string{set.AdminDSN(0, 0), set.AdminDSN(0, 1), set.AdminDSN(0, 2)}
	pr, err := replication.Promote(ctx, members, replication.PromoteOptions{ReplUser: set.User()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted %s (old master reachable: %v)", pr.NewMaster, pr.OldMasterReachable)
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if err := n.DatastoreReady(ds); err != nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every node sees the new master")
	// Within a few seconds of the promotion every node writes to the new master (a write may
	// still be buffered while a node's probe or breaker catches up).
	statuses := map[cells.Status]int{}
	deadline := time.Now().Add(10 * time.Second)
	for i, row := range rows[0][7:] {
		for {
			res := putAsync(t, nodes[i%3], l, []cells.Cell{newCell(t, row, "BASE", 1, fmt.Sprintf(`{"after":%d}`, i))})
			statuses[res[0].Status]++
			if res[0].Status != cells.StatusBuffered || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if statuses[cells.StatusCreated]+statuses[cells.StatusExists] < len(rows[0][7:]) {
		t.Fatalf("writes after the promotion: %v, want every one created on the new master within 10s", statuses)
	}
	requireAllEventually(t, nodes[2], l, 30*time.Second)
}

// TestAsyncMasterStalled stops the master's process (SIGSTOP: connections hang rather than
// fail). Strong reads must not hang for long: once the probes or the circuit breaker give up on
// the master they fail at once, while stale reads keep serving.
func TestAsyncMasterStalled(t *testing.T) {
	c, set := startAsync(t)
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 1)
	l := newLedger()
	cell := newCell(t, rows[0][0], "BASE", 1, `{"x":1}`)
	putAsync(t, nodes[0], l, []cells.Cell{cell})
	ctx := context.Background()
	if err := set.WaitCaughtUp(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pid := set.Instance(0, 0).Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	key := []cluster.GetKey{{Key: cell.Key}}
	// The probes give up on the master within a few seconds; from then on every strong read
	// fails at once.
	stopped := time.Now()
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if n.DatastoreReady(ds) == nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every node gives up on the stalled master")
	for _, n := range nodes {
		// Another node would do no better: the node stays ready, only the datastore is not.
		assert.NoError(t, n.Ready(), "node %s readiness with its async datastore's master stalled", n.ID())
	}
	t.Logf("every node gave up on the stalled master after %s", time.Since(stopped).Round(time.Millisecond))
	for i := 0; i < 5; i++ {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := nodes[i%3].GetCells(rctx, ds, key, cluster.Strong)
		cancel()
		if !errors.Is(err, partition.ErrUnavailable) || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("strong read %d with the master stalled: got %v after %s, want ErrUnavailable within 500ms", i, err, time.Since(start))
		}
		res, err := nodes[i%3].GetCells(ctx, ds, key, cluster.Stale)
		if err != nil || !res[0].Found {
			t.Fatalf("stale read %d with the master stalled: %v", i, err)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		res, err := nodes[1].GetCells(rctx, ds, key, cluster.Strong)
		return err == nil && res[0].Found
	}, 15*time.Second, 10*time.Millisecond, "strong reads serve again")
}
