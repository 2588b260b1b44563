package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startAsync starts a private replicated set (2 clusters of a master and 2 minions) and a
// 3-node cluster whose datastore "trips" is async on it, with fast probes and replays.
func startAsync(t *testing.T) (*clustertest.Cluster, *mariadb.ReplicatedSet) {
	t.Helper()
	return startAsyncProbing(t, 200*time.Millisecond)
}

// startAsyncProbing is startAsync with the nodes probing the storage clusters every interval.
func startAsyncProbing(t *testing.T, interval time.Duration) (*clustertest.Cluster, *mariadb.ReplicatedSet) {
	t.Helper()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{})
	require.NoError(t, err, "start a replicated set")
	t.Cleanup(func() { _ = set.Close() })
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Async, ReplicatedSet: set,
		AsyncCluster: func(set *mariadb.ReplicatedSet) *localcluster.AsyncOptions {
			return &localcluster.AsyncOptions{Prefix: "sl",
				Cluster:   partition.ClusterConfig{ProbeInterval: interval, BreakerTimeout: time.Second},
				Partition: partition.AsyncConfig{ReapInterval: 100 * time.Millisecond, ReplayAfter: 500 * time.Millisecond}}
		}})
	return c, set
}

// tryPutAsync writes cs through n and records each acknowledged cell (created, exists or
// buffered) in l; it returns the results, or an error when the write failed or a cell was
// answered otherwise.
func tryPutAsync(n *cluster.Node, l *ledger, cs []cells.Cell) ([]cells.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := n.PutCells(ctx, ds, cs)
	if err != nil {
		return nil, fmt.Errorf("PutCells through %s: got %w, want nil", n.ID(), err)
	}
	for i, r := range res {
		switch r.Status {
		case cells.StatusCreated, cells.StatusExists, cells.StatusBuffered:
			body, err := cs[i].Body.JSON()
			if err != nil {
				return nil, fmt.Errorf("body of %s to JSON: %w", cs[i].Key, err)
			}
			l.add(acked{key: cs[i].Key, body: string(body), addedID: r.AddedID, created: r.CreatedAt})
		default:
			return nil, fmt.Errorf("PutCells through %s: cell %s got %v, want created, exists or buffered", n.ID(), cs[i].Key, r.Status)
		}
	}
	return res, nil
}

// putAsync is tryPutAsync that requires the write to succeed.
func putAsync(t *testing.T, n *cluster.Node, l *ledger, cs []cells.Cell) []cells.Result {
	t.Helper()
	res, err := tryPutAsync(n, l, cs)
	require.NoError(t, err)
	return res
}

// requireAllEventually polls strong reads through n until every acknowledged cell is there
// with its body (added_ids of buffered cells are assigned at replay, so only bodies compare),
// for up to timeout.
func requireAllEventually(t *testing.T, n *cluster.Node, l *ledger, timeout time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		want := l.all()
		keys := make([]cluster.GetKey, len(want))
		for i, a := range want {
			keys[i] = cluster.GetKey{Key: a.key}
		}
		res, err := n.GetCells(ctx, ds, keys, cluster.Strong)
		require.NoError(ct, err, "strong read")
		for i, a := range want {
			require.True(ct, res[i].Found, "%s found", a.key)
			require.Equal(ct, a.body, bodyJSON(ct, res[i].Cell.Body), "body of %s", a.key)
		}
	}, timeout, 100*time.Millisecond, "acknowledged cells readable through %s", n.ID())
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
		require.Equal(t, cells.StatusCreated, r.Status, "write with the master up")
		require.GreaterOrEqual(t, r.AddedID, int64(1), "write with the master up: added_id")
	}
	ctx := context.Background()
	require.NoError(t, set.WaitCaughtUp(ctx, 0), "minions of c0 catch up")

	require.NoError(t, set.Instance(0, 0).Kill(), "kill the master of c0")
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
	require.Equal(t, len(rows[0])-5, buffered, "writes to the partition of the dead master buffered: want all")
	// Conflicts are still caught with the master down: a key a minion holds with another body,
	// and a second body for a buffered key (refused by the buffer).
	for i, c := range []cells.Cell{newCell(t, rows[0][0], "BASE", 1, `{"another":1}`), newCell(t, rows[0][5], "BASE", 1, `{"another":2}`)} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := nodes[i].PutCells(wctx, ds, []cells.Cell{c})
		cancel()
		require.NoError(t, err, "conflicting write %d with the master down", i)
		require.Equal(t, cells.StatusConflict, res[0].Status, "conflicting write %d with the master down", i)
	}
	// A conditional write and a transaction are never buffered (a buffer cannot check a
	// condition): with the master down they are refused as unavailable, nothing written.
	condRow := rows[0][1]
	for i, req := range []cluster.WriteRequest{
		{Cells: []cells.Cell{newCell(t, condRow, "STATUS", 1, `{"s":"cond"}`)}, Conditions: []cluster.Condition{{RowKey: condRow, ColumnKey: "STATUS", None: true}}},
		{Atomic: true, Cells: []cells.Cell{newCell(t, condRow, "STATUS", 1, `{"s":"tx"}`)}},
	} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := nodes[i].Write(wctx, ds, req)
		cancel()
		require.ErrorIs(t, err, partition.ErrUnavailable, "atomic write %d with the master down", i)
	}
	// The other partition's writes need a buffer on the dead master's cluster, the only other
	// one: with two storage clusters they are unavailable (nothing written) until it is back.
	for i, row := range rows[1][:3] {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := nodes[i%3].PutCells(wctx, ds, []cells.Cell{newCell(t, row, "BASE", 1, `{"other":true}`)})
		cancel()
		require.ErrorIs(t, err, partition.ErrUnavailable, "write to the other partition with its only buffer cluster's master down")
	}
	// Strong reads of the dead master's partition fail fast with ErrUnavailable (a 503 the
	// client retries); stale reads serve from a minion.
	key := cluster.GetKey{Key: before[0].Key}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := nodes[1].GetCells(sctx, ds, []cluster.GetKey{key}, cluster.Strong)
	took := time.Since(start)
	cancel()
	require.ErrorIs(t, err, partition.ErrUnavailable, "strong read with the master down")
	require.LessOrEqual(t, took, 2*time.Second, "strong read with the master down: time to fail, want at once")
	// A schema registration needs every partition's master (a schema command has no buffered
	// path): refused, retryably, and nothing registered.
	sctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	_, err = nodes[2].PutSchema(sctx, ds, "ASYNC_SCHEMA", []byte(`{"type":"object"}`))
	cancel()
	require.ErrorIs(t, err, partition.ErrUnavailable, "schema registration with a master down")
	res, err := nodes[2].GetCells(ctx, ds, []cluster.GetKey{key}, cluster.Stale)
	require.NoError(t, err, "stale read with the master down")
	require.True(t, res[0].Found, "stale read with the master down: want the cell from a minion")
	require.Eventually(t, func() bool { return bufferDepth(nodes[0], 0) >= int64(buffered) }, 10*time.Second, 10*time.Millisecond,
		"the reaper sees the %d buffered cells", buffered)
	// The same figures in the node's metrics, with the dead master's breaker or role.
	reg := prometheus.NewRegistry()
	reg.MustRegister(nodes[0].AsyncCollector())
	mfs, err := reg.Gather()
	require.NoError(t, err, "gather the async metrics")
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
	require.GreaterOrEqual(t, depth0, float64(buffered), "metrics: buffer depth of partition 0")
	require.Len(t, metrics["schemaless_storage_master"], 6, "metrics: master series")
	require.Len(t, metrics["schemaless_storage_breaker_state"], 6, "metrics: breaker series")

	// The buffer cluster's master goes away too: the reaper cannot read the buffer, and the
	// depth it reports keeps what it saw there (a buffer it cannot read is not an empty one).
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if bufferDepth(n, 0) < int64(buffered) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "every node's reaper sees the %d buffered cells", buffered)
	require.NoError(t, set.Instance(1, 0).Kill(), "kill the master of c1, partition 0's buffer cluster")
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if err := n.DatastoreReady(ds); err == nil || strings.Count(err.Error(), "has no master") != 2 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every node sees no master in either storage cluster")
	require.Never(t, func() bool {
		for _, n := range nodes {
			if bufferDepth(n, 0) < int64(buffered) {
				return true
			}
		}
		return false
	}, time.Second, 10*time.Millisecond, "the buffer depth of partition 0 with its buffer cluster unreadable, want at least %d on every node", buffered)
	require.NoError(t, set.Restart(ctx, 1, 0), "restart the master of c1")
	db1, err := replication.Open(set.AdminDSN(1, 0))
	require.NoError(t, err)
	defer db1.Close()
	require.NoError(t, replication.MakeMaster(ctx, db1), "unfence the master of c1")

	// The master comes back (fenced: read_only), the operator unfences it; the reaper replays.
	require.NoError(t, set.Restart(ctx, 0, 0), "restart the master of c0")
	db, err := replication.Open(set.AdminDSN(0, 0))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, replication.MakeMaster(ctx, db), "unfence the master of c0")
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
	require.GreaterOrEqual(t, replayed, int64(buffered), "cells replayed, want at least the buffered ones")
	got, err := nodes[0].GetCells(ctx, ds, []cluster.GetKey{{Key: cells.Key{RowKey: condRow, ColumnKey: "STATUS"}, Latest: true}}, cluster.Strong)
	require.NoError(t, err)
	assert.False(t, got[0].Found, "the refused conditional write and transaction left no cell")
	// With the master back both run on it.
	wres, err := nodes[1].Write(ctx, ds, cluster.WriteRequest{Cells: []cells.Cell{newCell(t, condRow, "STATUS", 1, `{"s":"cond"}`)},
		Conditions: []cluster.Condition{{RowKey: condRow, ColumnKey: "STATUS", None: true}}})
	require.NoError(t, err, "conditional write with the master back")
	require.True(t, wres.Applied() && wres.Cells[0].Status == cells.StatusCreated, "conditional write with the master back: %+v", wres)
	wres, err = nodes[2].Write(ctx, ds, cluster.WriteRequest{Cells: []cells.Cell{newCell(t, condRow, "STATUS", 2, `{"s":"again"}`)},
		Conditions: []cluster.Condition{{RowKey: condRow, ColumnKey: "STATUS", None: true}}})
	require.NoError(t, err, "second conditional write")
	assert.Equal(t, []command.ConditionFailure{{Index: 0, LatestRefKey: 1, Found: true}}, wres.Failed, "second if-none write")
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
	require.NoError(t, set.WaitCaughtUp(ctx, 0), "minions of c0 catch up")
	require.NoError(t, set.Instance(0, 0).Kill(), "kill the master of c0")
	for i, row := range rows[0][4:7] {
		putAsync(t, nodes[i%3], l, []cells.Cell{newCell(t, row, "BASE", 1, fmt.Sprintf(`{"gap":%d}`, i))})
	}
	members := []string{set.AdminDSN(0, 0), set.AdminDSN(0, 1), set.AdminDSN(0, 2)}
	pr, err := replication.Promote(ctx, members, replication.PromoteOptions{ReplUser: set.User()})
	require.NoError(t, err, "promote a minion of c0")
	t.Logf("promoted %s (old master reachable: %v)", pr.NewMaster, pr.OldMasterReachable)
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if err := n.DatastoreReady(ds); err != nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every node sees the new master")
	// Within a few seconds of the promotion every node writes to the new master: a write may
	// still be buffered while a node's probe or breaker catches up, and is then written again
	// until it is created (or exists); any other answer fails the test.
	var after []cells.Cell
	for i, row := range rows[0][7:] {
		after = append(after, newCell(t, row, "BASE", 1, fmt.Sprintf(`{"after":%d}`, i)))
	}
	statuses := map[cells.Status]int{}
	stored := make([]bool, len(after))
	var putErr error
	require.Eventually(t, func() bool {
		for i, cell := range after {
			if stored[i] {
				continue
			}
			res, err := tryPutAsync(nodes[i%3], l, []cells.Cell{cell})
			if err != nil {
				putErr = err
				return true // reported below
			}
			statuses[res[0].Status]++
			stored[i] = res[0].Status != cells.StatusBuffered
		}
		return !slices.Contains(stored, false)
	}, 10*time.Second, 200*time.Millisecond, "every write after the promotion created on the new master")
	require.NoError(t, putErr, "write after the promotion")
	t.Logf("writes after the promotion: %v", statuses)
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
	require.NoError(t, set.WaitCaughtUp(ctx, 0), "minions of c0 catch up")
	pid := set.Instance(0, 0).Pid()
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP), "stop the master of c0")
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
		took := time.Since(start)
		cancel()
		require.ErrorIs(t, err, partition.ErrUnavailable, "strong read %d with the master stalled", i)
		require.LessOrEqual(t, took, 500*time.Millisecond, "strong read %d with the master stalled: time to fail", i)
		res, err := nodes[i%3].GetCells(ctx, ds, key, cluster.Stale)
		require.NoError(t, err, "stale read %d with the master stalled", i)
		require.True(t, res[0].Found, "stale read %d with the master stalled: found", i)
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT), "continue the master of c0")
	require.Eventually(t, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		res, err := nodes[1].GetCells(rctx, ds, key, cluster.Strong)
		return err == nil && res[0].Found
	}, 15*time.Second, 10*time.Millisecond, "strong reads serve again")
}

// TestAsyncStrongReadRefusesFencedMaster fences the master of partition 0's cluster
// (read_only) behind the nodes' backs, as a failover does while a node is paused, with probes
// an hour apart so that no node learns of it by probing: a strong read must not answer from
// the fenced server, which misses what the next master takes. It is refused as unavailable
// (a 503 the client retries elsewhere), and the refusal makes the node probe at once, after
// which it knows the cluster has no master.
func TestAsyncStrongReadRefusesFencedMaster(t *testing.T) {
	c, set := startAsyncProbing(t, time.Hour)
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 1)
	l := newLedger()
	cell := newCell(t, rows[0][0], "BASE", 1, `{"v":1}`)
	res := putAsync(t, nodes[0], l, []cells.Cell{cell})
	require.Equal(t, cells.StatusCreated, res[0].Status, "write with the master up")
	ctx := context.Background()
	key := []cluster.GetKey{{Key: cell.Key}}
	got, err := nodes[1].GetCells(ctx, ds, key, cluster.Strong)
	require.NoError(t, err, "strong read before the fence")
	require.True(t, got[0].Found, "strong read before the fence")

	db, err := replication.Open(set.AdminDSN(0, 0))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, "SET GLOBAL read_only = 1")
	require.NoError(t, err, "fence the master of c0")
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = nodes[1].GetCells(rctx, ds, key, cluster.Strong)
	cancel()
	require.ErrorIs(t, err, partition.ErrUnavailable, "strong read from the fenced master")
	assert.ErrorIs(t, err, storage.ErrNotMaster, "strong read from the fenced master")
	require.Eventually(t, func() bool {
		err := nodes[1].DatastoreReady(ds)
		return err != nil && strings.Contains(err.Error(), "has no master")
	}, 5*time.Second, 10*time.Millisecond, "the refused read made the node probe: no master in c0")
	// A minion may lag behind the master it replicates (a stale read may miss recent writes):
	// the cell reaches it in time, and stale reads serve with the master fenced.
	require.Eventually(t, func() bool {
		got, err = nodes[1].GetCells(ctx, ds, key, cluster.Stale)
		return err == nil && got[0].Found
	}, 10*time.Second, 20*time.Millisecond, "stale read with the master fenced: the cell from a minion")
}
