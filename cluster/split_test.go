package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/schemaless-db/schemaless/wire"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeLoop writes one new cell at a time through n until stop closes, recording each
// acknowledged one in l and counting failures.
func writeLoop(n *cluster.Node, l *ledger, stop <-chan struct{}, failures *atomic.Int64, lastErr *atomic.Value) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		c, err := encodeCell(uuid.New(), "BASE", 1, fmt.Sprintf(`{"writer":%q,"i":%d}`, n.ID(), i))
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		res, err := n.PutCells(ctx, ds, []cells.Cell{c})
		cancel()
		if err != nil || len(res) != 1 || res[0].Status != cells.StatusCreated {
			failures.Add(1)
			lastErr.Store(fmt.Sprintf("%v %+v", err, res))
			continue
		}
		body, _ := c.Body.JSON()
		l.add(acked{key: c.Key, body: string(body), addedID: res[0].AddedID, created: res[0].CreatedAt})
	}
}

// writers is one writeLoop per node, recording acknowledged cells in l.
type writers struct {
	l        *ledger
	stop     chan struct{}
	wg       sync.WaitGroup
	failures atomic.Int64
	lastErr  atomic.Value
}

// startWriters starts a writeLoop through each of nodes.
func startWriters(nodes []*cluster.Node) *writers {
	w := &writers{l: newLedger(), stop: make(chan struct{})}
	for _, n := range nodes {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			writeLoop(n, w.l, w.stop, &w.failures, &w.lastErr)
		}()
	}
	return w
}

// await waits until the writers have acknowledged n more writes, so that each step of a test
// runs under writes however loaded the machine is.
func (w *writers) await(t *testing.T, n int) {
	t.Helper()
	from := w.l.len()
	require.Eventually(t, func() bool { return w.l.len() >= from+n }, opTimeout, 10*time.Millisecond, "%d more acknowledged writes", n)
}

// finish stops the writers and checks that no write failed (what: during what).
func (w *writers) finish(t *testing.T, what string) {
	t.Helper()
	close(w.stop)
	w.wg.Wait()
	if v := w.lastErr.Load(); v != nil {
		t.Logf("last failure: %v", v)
	}
	assert.Zero(t, w.failures.Load(), "writes that failed during %s", what)
}

// TestSplitPartition splits trips' partitions under writers through every node: every write
// is answered with success, every acknowledged cell is read back strongly through every node
// with its added_id, the shard logs hold exactly the acknowledged cells, the catalog shows the
// new partitions and their history, a second split of a split-made partition works, and a
// restarted node serves the split partitions from its own state.
func TestSplitPartition(t *testing.T) {
	t.Parallel()
	testSplitPartition(t, clustertest.Pebble)
}

// TestSplitPartitionMySQL is TestSplitPartition on nodes whose store is MySQL (MariaDB): a
// split moves no cell there either, since each shard's tables are in a database of the shard's
// own; the right half gets the parent's KV rows and request records in the meta tables.
func TestSplitPartitionMySQL(t *testing.T) {
	t.Parallel()
	testSplitPartition(t, clustertest.MySQL)
}

// TestSplitPartitionSQLite is TestSplitPartition on SQLite stores, a file per partition: the
// right half's shards are copied into its file inside SQLite (the parent's file attached), and
// dropped from the parent's, at the split's index.
func TestSplitPartitionSQLite(t *testing.T) {
	t.Parallel()
	testSplitPartition(t, clustertest.SQLite)
}

func testSplitPartition(t *testing.T, engine clustertest.Engine) {
	c := clustertest.Start(t, clustertest.Options{Engine: engine})
	nodes := runningImported(t, c)
	spec := &c.Topology.Datastores[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()

	// Refusals: no such partition, a shard outside it, a store that is fine.
	_, err := nodes[0].SplitPartition(ctx, ds, 9, wire.SplitRequest{AtShard: 0})
	assert.ErrorIs(t, err, cluster.ErrBadShard)
	_, err = nodes[0].SplitPartition(ctx, ds, 0, wire.SplitRequest{AtShard: 8})
	var fe *cluster.FieldError
	require.ErrorAs(t, err, &fe, "partition 0 holds 0..7: at shard 8 is outside")
	assert.Equal(t, "at_shard", fe.Field)
	_, err = nodes[0].SplitPartition(ctx, ds, 0, wire.SplitRequest{AtShard: 0 + 0}) // the middle: fine, done below
	require.NoError(t, err, "split partition 0 at its middle")

	// A consumer group coordinated by shard 12 (of 16): its state moves to the right half of
	// partition 1's split, and the left half keeps a copy that must not answer for it.
	group := "billing"
	require.Equal(t, 12, cluster.CoordinatorShard(group, spec.Shards))
	_, err = nodes[0].GroupApply(ctx, ds, group, consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", SessionTimeout: time.Hour})
	require.NoError(t, err, "join group %s", group)

	w := startWriters(nodes)
	l := w.l
	w.await(t, 20) // writes before, between and after the splits, however loaded the machine
	res, err := nodes[1].SplitPartition(ctx, ds, 1, wire.SplitRequest{AtShard: 12})
	require.NoError(t, err, "split partition 1 at 12 under writes")
	assert.Equal(t, []int{8, 11}, []int{res.Left.FirstShard, res.Left.LastShard})
	assert.Equal(t, []int{12, 15}, []int{res.Right.FirstShard, res.Right.LastShard})
	assert.Equal(t, 1, res.Right.Parent)
	assert.True(t, res.Ready, "the right half has a leader")
	t.Logf("split of partition 1 under writes: %d ms", res.TookMillis)
	w.await(t, 20)
	// A partition made by a split splits again.
	res2, err := nodes[2].SplitPartition(ctx, ds, res.Right.ID, wire.SplitRequest{AtShard: 14})
	require.NoError(t, err, "split partition %d at 14", res.Right.ID)
	assert.Equal(t, []int{14, 15}, []int{res2.Right.FirstShard, res2.Right.LastShard})
	w.await(t, 20)
	w.finish(t, "the splits")

	// Every node routes by the new catalog: 5 partitions, with the splits' history.
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			d, err := n.Datastore(ds)
			return err == nil && len(d.Partitions) == 5
		}, opTimeout, 20*time.Millisecond, "node %s serves 5 partitions", n.ID())
	}
	cat := nodes[0].CatalogDatastores()
	require.Len(t, cat.Datastores, 1)
	assert.Len(t, cat.Datastores[0].History, 3, "three splits in the history")
	for _, n := range nodes {
		names, err := n.Groups(ctx, ds, cluster.Strong)
		require.NoError(t, err, "list groups through %s", n.ID())
		assert.Equal(t, []string{group}, names, "groups through %s after the split: each once", n.ID())
		st, err := n.GroupStatus(ctx, ds, group, cluster.Strong)
		require.NoError(t, err, "group %s through %s", group, n.ID())
		assert.Len(t, st.Members, 1, "group %s through %s", group, n.ID())
	}
	requireStrong(t, l, nodes...)
	checkShardLogs(t, spec, l, nodes...)
	if engine == clustertest.SQLite {
		requireNoStrayTables(t, c)
	}
	// Each node's own replica of every partition holds the acknowledged cells (stale reads are
	// served by the local replica).
	for _, n := range nodes {
		requireStale(t, l, n)
	}

	// A restarted node serves the split partitions from its own state; writes go on.
	c.StopNode(2)
	c.StartNode(2)
	nodes = running(c)
	d, err := nodes[2].Datastore(ds)
	require.NoError(t, err)
	assert.Len(t, d.Partitions, 5, "after a restart")
	more := newLedger()
	for _, n := range nodes {
		var cs []cells.Cell
		for j := range 10 {
			cs = append(cs, newCell(t, uuid.New(), "BASE", 1, fmt.Sprintf(`{"after":%q,"j":%d}`, n.ID(), j)))
		}
		putIn(t, n, ds, more, cs)
	}
	for _, a := range more.all() {
		l.add(a)
	}
	requireStrong(t, l, nodes...)
	require.Eventually(t, func() bool { return checkCells(nodes[2], cluster.Stale, l.all(), 5*time.Second) == nil }, opTimeout, 100*time.Millisecond,
		"the restarted node's replicas catch up")
	if err := checkCells(nodes[2], cluster.Stale, l.all(), 5*time.Second); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

// TestSplitCatchUpFromSnapshot: a node down during a split catches up when it restarts: its
// parent replica applies the split (from the log, or from a snapshot of the parent taken after
// it: fsm's TestSplit restores one), and its replica of the new partition, whose log was
// compacted meanwhile (snapshots every 8 entries), gets the new partition's snapshot from its
// leader; its own replicas then serve every acknowledged cell of both halves.
func TestSplitCatchUpFromSnapshot(t *testing.T) {
	t.Parallel()
	testSplitCatchUpFromSnapshot(t, clustertest.Pebble)
}

// TestSplitCatchUpFromSnapshotMySQL is TestSplitCatchUpFromSnapshot on MySQL stores: the
// snapshot restores the new partition's shards into the restarted node's own databases.
func TestSplitCatchUpFromSnapshotMySQL(t *testing.T) {
	t.Parallel()
	testSplitCatchUpFromSnapshot(t, clustertest.MySQL)
}

// TestSplitCatchUpFromSnapshotSQLite is TestSplitCatchUpFromSnapshot on SQLite stores: the
// snapshot restores the new partition's shards into a file of its own.
func TestSplitCatchUpFromSnapshotSQLite(t *testing.T) {
	t.Parallel()
	testSplitCatchUpFromSnapshot(t, clustertest.SQLite)
}

func testSplitCatchUpFromSnapshot(t *testing.T, engine clustertest.Engine) {
	c := clustertest.Start(t, clustertest.Options{Engine: engine,
		Partition: partition.Config{SnapshotThreshold: 8, SnapshotInterval: 200 * time.Millisecond, TrailingLogs: 4}})
	nodes := running(c)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond)
	}
	l := newLedger()
	put := func(n *cluster.Node, tag string, count int) {
		for i := range count {
			putIn(t, n, ds, l, []cells.Cell{newCell(t, uuid.New(), "BASE", 1, fmt.Sprintf(`{"%s":%d}`, tag, i))})
		}
	}
	put(nodes[0], "before", 20)
	c.StopNode(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	res, err := nodes[0].SplitPartition(ctx, ds, 0, wire.SplitRequest{AtShard: 4})
	require.NoError(t, err, "split with one replica down")
	// Enough entries on both halves that their logs are compacted past the split.
	put(nodes[1], "after", 60)
	time.Sleep(time.Second) // snapshots every 200ms once 8 entries are past
	c.StartNode(2)
	back := c.Node(2)
	require.Eventually(t, func() bool {
		d, err := back.Datastore(ds)
		return err == nil && len(d.Partitions) == 3
	}, opTimeout, 20*time.Millisecond, "the restarted node learns the split from the catalog")
	require.Eventually(t, func() bool {
		for _, r := range back.Replicas() {
			if r.Partition == res.Right.ID && r.Local && r.AppliedIndex > 0 {
				return true
			}
		}
		return false
	}, opTimeout, 50*time.Millisecond, "the restarted node hosts the new partition %d", res.Right.ID)
	require.Eventually(t, func() bool { return checkCells(back, cluster.Stale, l.all(), 5*time.Second) == nil }, opTimeout, 100*time.Millisecond,
		"the restarted node's own replicas hold every acknowledged cell")
	requireStrong(t, l, running(c)...)
}

// TestLoadBasedSplit: with a threshold of 40 requests/s over 2s, writers on one partition of
// trips (the other idle) make a node split it on its own, at a shard boundary inside it, and
// every acknowledged write stays readable; the idle partition is left alone.
func TestLoadBasedSplit(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Pebble,
		AutoSplit: cluster.AutoSplitConfig{Load: 40, Window: 2 * time.Second, Cooldown: time.Hour}})
	nodes := running(c)
	spec := &c.Topology.Datastores[0]
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond)
	}
	rows := rowsPerPartition(t, spec, t.Name(), 200)[1] // partition 1 only: shards 8..15
	l := newLedger()
	stop := make(chan struct{})
	done := make(chan struct{})
	// The writer ends on every way out of the test, a failed require included.
	halt := sync.OnceFunc(func() { close(stop); <-done })
	defer halt()
	began := time.Now()
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			putIn(t, nodes[i%3], ds, l, []cells.Cell{newCell(t, rows[i%len(rows)], "BASE", int64(1+i/len(rows)), fmt.Sprintf(`{"i":%d}`, i))})
		}
	}()
	require.Eventually(t, func() bool {
		d, err := nodes[0].Datastore(ds)
		return err == nil && len(d.Partitions) == 3
	}, 30*time.Second, 100*time.Millisecond, "partition 1 splits by load")
	t.Logf("split by load %s after the load began", time.Since(began).Round(100*time.Millisecond))
	halt()
	cat := nodes[0].CatalogDatastores()
	require.Len(t, cat.Datastores[0].History, 1)
	ev := cat.Datastores[0].History[0]
	assert.Equal(t, 1, ev.Left, "the loaded partition split")
	assert.True(t, ev.AtShard > 8 && ev.AtShard <= 15, "at shard %d, inside 8..15", ev.AtShard)
	// The halves are led by two nodes.
	require.Eventually(t, func() bool {
		var leaders []string
		for _, r := range nodes[0].Replicas() {
			if r.Partition == ev.Left || r.Partition == ev.Right {
				leaders = append(leaders, r.Leader)
			}
		}
		return len(leaders) == 2 && leaders[0] != "" && leaders[1] != "" && leaders[0] != leaders[1]
	}, opTimeout, 50*time.Millisecond, "the two halves' leaders are on two nodes")
	requireStrong(t, l, nodes...)
}
