package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain stops the MariaDB servers the tests started. Tests whose in-process cluster is
// cheap and entirely their own (random ports, temp dirs, database prefixes) run in parallel;
// those that start MariaDB servers, judge timings, run long loads or several clusters stay
// serial: on a small machine, concurrent elections would make them flap.
func TestMain(m *testing.M) { mariadbtest.Main(m) }

// TestForwarding writes through every node (followers forward to the partition leaders) and
// reads through every node, on each engine.
func TestForwarding(t *testing.T) {
	t.Parallel()
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL} {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			testForwarding(t, engine)
		})
	}
}

func testForwarding(t *testing.T, engine clustertest.Engine) {
	c := clustertest.Start(t, clustertest.Options{Engine: engine})
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	t.Logf("leaders: partition 0 on node %d, partition 1 on node %d", c.LeaderOf(0), c.LeaderOf(1))
	rows := flatten(rowsPerPartition(t, spec, t.Name(), 3))
	l := newLedger()

	// A batch spanning both partitions through every node; after each acknowledgement, strong
	// reads through every node see everything acknowledged so far.
	for i, n := range nodes {
		var cs []cells.Cell
		for j, row := range rows {
			cs = append(cs, newCell(t, row, fmt.Sprintf("COL%d", i), 1, fmt.Sprintf(`{"node":%q,"row":%d}`, n.ID(), j)))
		}
		putAll(t, n, l, cs)
		requireStrong(t, l, nodes...)
	}

	// Versions of one column written through different nodes; latest is the highest ref key.
	row := rows[0]
	for i, ref := range []int64{2, 9, 5} {
		putAll(t, nodes[i], l, []cells.Cell{newCell(t, row, "STATUS", ref, fmt.Sprintf(`{"v":%d}`, ref))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, n := range nodes {
		for _, cons := range []cluster.Consistency{cluster.Strong, cluster.Stale} {
			res, err := n.GetCells(ctx, ds, []cluster.GetKey{
				{Key: cells.Key{RowKey: row, ColumnKey: "STATUS"}, Latest: true},
				{Key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: 3}},
				{Key: cells.Key{RowKey: rows[len(rows)-1], ColumnKey: "NOPE"}, Latest: true},
			}, cons)
			require.NoError(t, err, "GetCells %s through %s", cons, n.ID())
			require.Len(t, res, 3, "GetCells %s through %s: results", cons, n.ID())
			if cons == cluster.Stale && (!res[0].Found || res[0].Cell.RefKey != 9) {
				// This replica may not have applied every version yet: what it has is one of them.
				if res[0].Found {
					assert.Contains(t, []int64{2, 5}, res[0].Cell.RefKey, "latest STATUS stale through %s: ref key", n.ID())
					assert.Equal(t, fmt.Sprintf(`{"v":%d}`, res[0].Cell.RefKey), bodyJSON(t, res[0].Cell.Body), "latest STATUS stale through %s: body", n.ID())
				}
				continue
			}
			if assert.True(t, res[0].Found, "latest STATUS %s through %s: found", cons, n.ID()) {
				assert.Equal(t, int64(9), res[0].Cell.RefKey, "latest STATUS %s through %s: ref key", cons, n.ID())
				assert.Equal(t, `{"v":9}`, bodyJSON(t, res[0].Cell.Body), "latest STATUS %s through %s: body", cons, n.ID())
			}
			assert.False(t, res[1].Found, "STATUS ref 3 (never written) %s through %s: found", cons, n.ID())
			assert.False(t, res[2].Found, "latest NOPE (never written) %s through %s: found", cons, n.ID())
		}
	}

	// Rewrites through another node: the same body is exists, another body conflict, both
	// with the stored cell's added_id.
	first := l.all()[0]
	for i, n := range nodes {
		res, err := n.PutCells(ctx, ds, []cells.Cell{
			newCell(t, first.key.RowKey, first.key.ColumnKey, first.key.RefKey, first.body),
			newCell(t, first.key.RowKey, first.key.ColumnKey, first.key.RefKey, fmt.Sprintf(`{"other":%d}`, i)),
		})
		require.NoError(t, err, "rewrite through %s", n.ID())
		require.Len(t, res, 2, "rewrite through %s: results", n.ID())
		assert.Equal(t, cells.StatusExists, res[0].Status, "same body again through %s", n.ID())
		assert.Equal(t, first.addedID, res[0].AddedID, "same body again through %s: added_id of the stored cell", n.ID())
		assert.Equal(t, cells.StatusConflict, res[1].Status, "other body through %s", n.ID())
		assert.Equal(t, first.addedID, res[1].AddedID, "other body through %s: added_id of the stored cell", n.ID())
	}
	res, err := nodes[0].PutCells(ctx, ds, nil)
	assert.NoError(t, err, "PutCells(no cells)")
	assert.Empty(t, res, "PutCells(no cells): results")

	// Each phase below gets opTimeout of its own: on a loaded machine the phases before can
	// take most of one.
	ctx, cancel = context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	// Concurrent writers, one per node, each reading its write back through the next node
	// with a strong read as soon as it is acknowledged.
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes)*10)
	for i, n := range nodes {
		next := nodes[(i+1)%len(nodes)]
		var cs []cells.Cell
		for j := 0; j < 10; j++ {
			row := rows[(i*10+j)%len(rows)]
			cs = append(cs, newCell(t, row, "CONC", int64(i*100+j), fmt.Sprintf(`{"i":%d,"j":%d}`, i, j)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, cell := range cs {
				res, err := n.PutCells(ctx, ds, []cells.Cell{cell})
				if err != nil || res[0].Status != cells.StatusCreated {
					errs <- fmt.Errorf("concurrent put through %s: got %v %v, want created", n.ID(), res, err)
					return
				}
				a := acked{key: cell.Key, body: fmt.Sprintf(`{"i":%d,"j":%d}`, i, j), addedID: res[0].AddedID, created: res[0].CreatedAt}
				l.add(a)
				if err := checkCells(next, cluster.Strong, []acked{a}, opTimeout); err != nil {
					errs <- fmt.Errorf("read after acknowledged write: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err, "concurrent writer")
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every node answers every cell, strong at once and stale eventually, with one added_id.
	requireStrong(t, l, nodes...)
	for _, n := range nodes {
		requireStale(t, l, n)
	}

	// GetRow: the latest cell of every column, by column key, the same through every node.
	ctx, cancel = context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	wantCols := []string{"COL0", "COL1", "COL2", "STATUS"}
	for _, n := range nodes {
		got, err := n.GetRow(ctx, ds, row, cluster.Strong)
		require.NoError(t, err, "GetRow through %s", n.ID())
		var cols []string
		for _, c := range got {
			if c.ColumnKey == "CONC" {
				continue // written concurrently above; whichever ref key is highest
			}
			cols = append(cols, c.ColumnKey)
			a := ackedCell(l, c.Key)
			assert.Equal(t, a.addedID, c.AddedID, "GetRow through %s: added_id of %s", n.ID(), c.Key)
			assert.Equal(t, a.body, bodyJSON(t, c.Body), "GetRow through %s: body of %s", n.ID(), c.Key)
			if c.ColumnKey == "STATUS" {
				assert.Equal(t, int64(9), c.RefKey, "GetRow through %s: STATUS ref key, want the latest", n.ID())
			}
		}
		assert.Equal(t, wantCols, cols, "GetRow through %s: columns", n.ID())
		empty, err := n.GetRow(ctx, ds, uuid.New(), cluster.Strong)
		assert.NoError(t, err, "GetRow(unknown row) through %s", n.ID())
		assert.Empty(t, empty, "GetRow(unknown row) through %s: cells", n.ID())
	}

	checkShardLogs(t, spec, l, nodes...)

	// Errors the node reports without asking raft.
	n := nodes[1]
	_, err = n.PutCells(ctx, "nope", []cells.Cell{newCell(t, row, "A", 1, `{}`)})
	assert.ErrorIs(t, err, cluster.ErrUnknownDatastore, "PutCells(unknown datastore)")
	_, err = n.GetCells(ctx, "nope", []cluster.GetKey{{Key: cells.Key{RowKey: row, ColumnKey: "A"}}}, cluster.Strong)
	assert.ErrorIs(t, err, cluster.ErrUnknownDatastore, "GetCells(unknown datastore)")
	_, err = n.GetRow(ctx, "nope", row, cluster.Stale)
	assert.ErrorIs(t, err, cluster.ErrUnknownDatastore, "GetRow(unknown datastore)")
	for _, shard := range []int{-1, spec.Shards} {
		_, err := n.ScanShard(ctx, ds, shard, 0, 10, cluster.Strong)
		assert.ErrorIs(t, err, cluster.ErrBadShard, "ScanShard(%d)", shard)
	}
}

// TestNodeDown stops the leader of partition 0: the two others elect a new leader and serve
// writes and strong reads of every partition; nothing acknowledged is lost; the stopped node
// catches up when it comes back.
func TestNodeDown(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	spec := &c.Topology.Datastores[0]
	rows := flatten(rowsPerPartition(t, spec, t.Name(), 2))
	l := newLedger()
	batch := func(col string, n *cluster.Node) []cells.Cell {
		var cs []cells.Cell
		for j, row := range rows {
			cs = append(cs, newCell(t, row, col, 1, fmt.Sprintf(`{"by":%q,"row":%d}`, n.ID(), j)))
		}
		return cs
	}
	for _, n := range running(c) {
		putAll(t, n, l, batch("BEFORE_"+n.ID(), n))
	}

	down := c.LeaderOf(0)
	downID := c.Topology.Nodes[down].ID
	t.Logf("stopping node %d (%s), leader of partition 0", down, downID)
	c.StopNode(down)
	survivors := running(c)
	require.Len(t, survivors, 2, "running nodes after StopNode")

	// Writes through each survivor, to every partition, succeed once a leader is elected: the
	// node retries until its context ends.
	for _, n := range survivors {
		putAll(t, n, l, batch("DURING_"+n.ID(), n))
	}
	requireStrong(t, l, survivors...)
	for p := range spec.Partitions {
		require.NotEqual(t, down, c.LeaderOf(p), "partition %d: leader node, want one of the running nodes", p)
	}

	c.StartNode(down)
	back := c.Node(down)
	requireStale(t, l, back) // the restarted replica converges
	c.WaitReady()
	putAll(t, back, l, batch("AFTER", back))
	requireStrong(t, l, running(c)...)
	for _, n := range running(c) {
		requireStale(t, l, n)
	}
	checkShardLogs(t, spec, l, running(c)...)
}

// TestRestartAll stops every node and starts them again over their data: every acknowledged
// cell is still there, identical, and the shard logs continue after the old added_ids.
func TestRestartAll(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	spec := &c.Topology.Datastores[0]
	rows := flatten(rowsPerPartition(t, spec, t.Name(), 5))
	l := newLedger()
	nodes := running(c)
	for i := 0; i < 4; i++ {
		var cs []cells.Cell
		for j, row := range rows {
			cs = append(cs, newCell(t, row, "BASE", int64(i), fmt.Sprintf(`{"i":%d,"j":%d,"s":"x"}`, i, j)))
		}
		putAll(t, nodes[i%len(nodes)], l, cs)
	}
	for _, n := range nodes {
		requireStale(t, l, n) // every replica has applied everything before the stop
	}
	lastAdded := map[int]int64{}
	for _, a := range l.all() {
		s := cells.ShardOf(a.key.RowKey, spec.Shards)
		lastAdded[s] = max(lastAdded[s], a.addedID)
	}

	for i := range c.Topology.Nodes {
		c.StopNode(i)
	}
	for i := range c.Topology.Nodes {
		c.StartNode(i)
	}
	c.WaitReady()
	nodes = running(c)
	requireStrong(t, l, nodes...)
	for _, n := range nodes {
		require.NoError(t, checkCells(n, cluster.Stale, l.all(), opTimeout), "stale read after restart")
	}
	checkShardLogs(t, spec, l, nodes...)

	// Old cells rewritten: exists, same added_id.
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	old := l.all()[:4]
	var again []cells.Cell
	for _, a := range old {
		again = append(again, newCell(t, a.key.RowKey, a.key.ColumnKey, a.key.RefKey, a.body))
	}
	res, err := nodes[2].PutCells(ctx, ds, again)
	require.NoError(t, err, "rewrite after restart")
	require.Len(t, res, len(again), "rewrite after restart: results")
	for i, r := range res {
		assert.Equal(t, cells.StatusExists, r.Status, "rewrite %s after restart", old[i].key)
		assert.Equal(t, old[i].addedID, r.AddedID, "rewrite %s after restart: added_id of the stored cell", old[i].key)
	}
	// New cells: created, each after the last added_id its shard had before the restart.
	var fresh []cells.Cell
	for j, row := range rows {
		fresh = append(fresh, newCell(t, row, "NEW", 1, fmt.Sprintf(`{"j":%d}`, j)))
	}
	for i, r := range putAll(t, nodes[1], l, fresh) {
		s := cells.ShardOf(fresh[i].RowKey, spec.Shards)
		assert.Greater(t, r.AddedID, lastAdded[s], "new cell %s in shard %d: added_id, want more than the shard's last before the restart", fresh[i].Key, s)
	}
	requireStrong(t, l, nodes...)
}

// lastIndex returns node n's raft last index for partition p (its replica must be local).
func lastIndex(t *testing.T, n *cluster.Node, p int) (uint64, string) {
	t.Helper()
	for _, r := range n.Replicas() {
		if r.Datastore == ds && r.Partition == p {
			return r.LastIndex, r.State
		}
	}
	require.FailNow(t, "no replica", "node %s has no replica of partition %d", n.ID(), p)
	return 0, ""
}

// TestNoQuorum stops two of three nodes. A write through the survivor fails within its
// deadline: ErrIndeterminate (and not ErrUnavailable) when it was appended to the survivor's
// raft log, which may still commit it later, and ErrUnavailable when no leader took it. Strong
// reads fail with ErrUnavailable; stale reads still answer. Once the cluster is back, the failed
// writes are retried: created or exists, never conflict.
func TestNoQuorum(t *testing.T) {
	// A leader lease longer than stopping two nodes takes, so that the survivor is still the
	// leader of partition 0 when the first write arrives: that write is appended, cannot commit.
	c := clustertest.Start(t, clustertest.Options{Partition: partition.Config{
		HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: time.Second,
	}})
	spec := &c.Topology.Datastores[0]
	rows := rowsPerPartition(t, spec, t.Name(), 2)
	l := newLedger()
	nodes := running(c)
	var before []cells.Cell
	for j, row := range flatten(rows) {
		before = append(before, newCell(t, row, "BEFORE", 1, fmt.Sprintf(`{"j":%d}`, j)))
	}
	putAll(t, nodes[0], l, before)

	survivorIdx := c.LeaderOf(0)
	survivor := c.Node(survivorIdx)
	requireStale(t, l, survivor)
	var wg sync.WaitGroup
	stopStart := time.Now()
	for i := range c.Topology.Nodes {
		if i != survivorIdx {
			wg.Add(1)
			go func() { defer wg.Done(); c.StopNode(i) }()
		}
	}
	wg.Wait()
	t.Logf("only node %d (%s) is running; it led partition 0; stopping the others took %v", survivorIdx, survivor.ID(), time.Since(stopStart))

	const deadline = 1500 * time.Millisecond
	const slack = time.Second // how long after its deadline a call may still be returning
	// failWrite writes cs through the survivor and checks the error against what the
	// survivor's raft logs show was appended.
	failWrite := func(what string, cs []cells.Cell) {
		t.Helper()
		parts := map[int]bool{}
		for _, cell := range cs {
			parts[spec.PartitionOf(cells.ShardOf(cell.RowKey, spec.Shards)).ID] = true
		}
		lastBefore := map[int]uint64{}
		states := map[int]string{}
		for p := range parts {
			lastBefore[p], states[p] = lastIndex(t, survivor, p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		res, err := survivor.PutCells(ctx, ds, cs)
		took := time.Since(start)
		appended := false
		for p := range parts {
			last, _ := lastIndex(t, survivor, p)
			appended = appended || last > lastBefore[p]
		}
		t.Logf("%s: states before %v, appended %v, took %v, error %v", what, states, appended, took, err)
		require.Error(t, err, "%s: got results %v, want a failure without a quorum", what, res)
		assert.LessOrEqual(t, took, deadline+slack, "%s: time to return, want within its %v deadline (+%v)", what, deadline, slack)
		if appended {
			assert.ErrorIs(t, err, partition.ErrIndeterminate, "%s was appended to the survivor's raft log: want ErrIndeterminate", what)
			assert.NotErrorIs(t, err, partition.ErrUnavailable, "%s was appended to the survivor's raft log: want ErrIndeterminate only", what)
		} else {
			assert.ErrorIs(t, err, partition.ErrUnavailable, "%s was not appended anywhere: want ErrUnavailable", what)
			assert.NotErrorIs(t, err, partition.ErrIndeterminate, "%s was not appended anywhere: want ErrUnavailable only", what)
		}
	}

	// 1. Both partitions at once, while the survivor still believes it leads partition 0.
	_, state := lastIndex(t, survivor, 0)
	require.Equal(t, "Leader", state, "survivor state for partition 0 (stopping the others took longer than the leader lease)")
	mixed := []cells.Cell{
		newCell(t, rows[0][0], "DURING", 1, `{"w":1}`),
		newCell(t, rows[1][0], "DURING", 1, `{"w":1}`),
	}
	failWrite("write to both partitions while the survivor leads partition 0", mixed)
	if _, state := lastIndex(t, survivor, 0); state == "Leader" {
		t.Logf("survivor still leads partition 0 after %v", deadline)
	}
	// 2. Later, once the survivor has stepped down everywhere, nothing can take a write.
	require.Eventually(t, func() bool {
		for _, r := range survivor.Replicas() {
			if r.State == "Leader" {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the survivor steps down")
	later := []cells.Cell{
		newCell(t, rows[0][1], "DURING", 2, `{"w":2}`),
		newCell(t, rows[1][1], "DURING", 2, `{"w":2}`),
	}
	failWrite("write with no leader anywhere", later)

	// Strong reads fail (unavailable, never indeterminate); stale reads answer from the
	// survivor's replica.
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	start := time.Now()
	_, err := survivor.GetCells(ctx, ds, []cluster.GetKey{{Key: before[0].Key}, {Key: before[len(before)-1].Key}}, cluster.Strong)
	took := time.Since(start)
	cancel()
	assert.ErrorIs(t, err, partition.ErrUnavailable, "strong read without a quorum")
	assert.NotErrorIs(t, err, partition.ErrIndeterminate, "strong read without a quorum: want ErrUnavailable only")
	assert.LessOrEqual(t, took, deadline+slack, "strong read without a quorum: time to return, want within its %v deadline (+%v)", deadline, slack)
	ctx, cancel = context.WithTimeout(context.Background(), deadline)
	_, err = survivor.ScanShard(ctx, ds, cells.ShardOf(before[0].RowKey, spec.Shards), 0, 10, cluster.Strong)
	cancel()
	assert.ErrorIs(t, err, partition.ErrUnavailable, "strong scan without a quorum")
	assert.NoError(t, checkCells(survivor, cluster.Stale, l.all(), deadline), "stale read on the survivor")

	// Back to three nodes: retrying the failed writes is safe.
	for i := range c.Topology.Nodes {
		if i != survivorIdx {
			c.StartNode(i)
		}
	}
	c.WaitReady()
	retryCtx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	retry := append(append([]cells.Cell(nil), mixed...), later...)
	res, err := survivor.PutCells(retryCtx, ds, retry)
	require.NoError(t, err, "retry with the cluster back")
	require.Len(t, res, len(retry), "retry with the cluster back: results")
	for i, r := range res {
		t.Logf("retry of %s: %v", retry[i].Key, r.Status)
		if !assert.Contains(t, []cells.Status{cells.StatusCreated, cells.StatusExists}, r.Status, "retry of %s", retry[i].Key) {
			continue
		}
		if i >= len(mixed) {
			assert.Equal(t, cells.StatusCreated, r.Status, "retry of %s, which no leader took", retry[i].Key)
		}
		l.add(acked{key: retry[i].Key, body: bodyJSON(t, retry[i].Body), addedID: r.AddedID, created: r.CreatedAt})
	}
	requireStrong(t, l, running(c)...)
}

// TestForwardedWriteDeadlines writes through followers with deadlines of a few milliseconds,
// so that forwarded writes end at every stage: before sending, in flight, after applying. An
// acknowledged write is stored; a write that failed with ErrUnavailable was never applied, so
// retrying it creates it; an indeterminate write's retry is created or exists, never conflict.
func TestForwardedWriteDeadlines(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	spec := &c.Topology.Datastores[0]
	// For each partition, a node that does not lead it: its writes are forwarded.
	via := map[int]*cluster.Node{}
	for p := range spec.Partitions {
		via[p] = c.Node((c.LeaderOf(p) + 1) % len(c.Topology.Nodes))
	}
	rows := rowsPerPartition(t, spec, t.Name(), 30)
	deadlines := []time.Duration{200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
		3 * time.Millisecond, 5 * time.Millisecond, 8 * time.Millisecond, 13 * time.Millisecond, 34 * time.Millisecond, 89 * time.Millisecond}
	type outcome struct {
		cell cells.Cell
		body string
		err  error
		res  cells.Result
	}
	var outcomes []outcome
	for p, rs := range rows {
		for i, row := range rs {
			body := fmt.Sprintf(`{"p":%d,"i":%d}`, p, i)
			cell := newCell(t, row, "FWD", 1, body)
			ctx, cancel := context.WithTimeout(context.Background(), deadlines[i%len(deadlines)])
			res, err := via[p].PutCells(ctx, ds, []cells.Cell{cell})
			cancel()
			o := outcome{cell: cell, body: body, err: err}
			if err == nil {
				o.res = res[0]
			}
			outcomes = append(outcomes, o)
		}
	}
	// Time passing is the point: a write that failed unavailable must stay unapplied, and an
	// attempt still in flight when its deadline ended has this long to land (or not) before
	// the reads below judge what was applied.
	time.Sleep(500 * time.Millisecond)
	var ok, unavailable, indeterminate, indeterminateStored int
	healthy := via[0]
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, o := range outcomes {
		read, err := healthy.GetCells(ctx, ds, []cluster.GetKey{{Key: o.cell.Key}}, cluster.Strong)
		require.NoError(t, err, "strong read of %s", o.cell.Key)
		found := read[0].Found
		isU, isI := errors.Is(o.err, partition.ErrUnavailable), errors.Is(o.err, partition.ErrIndeterminate)
		switch {
		case o.err == nil:
			ok++
			assert.True(t, o.res.Status == cells.StatusCreated && found && read[0].Cell.AddedID == o.res.AddedID,
				"acknowledged %s (%v, added_id %d): got found %v added_id %d, want it stored", o.cell.Key, o.res.Status, o.res.AddedID, found, read[0].Cell.AddedID)
		case isI && !isU:
			indeterminate++
			if found {
				indeterminateStored++
			}
		case isU && !isI:
			unavailable++
			assert.False(t, found, "%s failed with %v (unavailable: not applied), but it is stored with added_id %d", o.cell.Key, o.err, read[0].Cell.AddedID)
		default:
			assert.Failf(t, "write error of neither class", "%s: got %v, want nil, ErrUnavailable or ErrIndeterminate (not both)", o.cell.Key, o.err)
		}
		res, err := healthy.PutCells(ctx, ds, []cells.Cell{newCell(t, o.cell.RowKey, o.cell.ColumnKey, o.cell.RefKey, o.body)})
		require.NoError(t, err, "retry of %s", o.cell.Key)
		if found {
			assert.Equal(t, cells.StatusExists, res[0].Status, "retry of stored %s", o.cell.Key)
		} else {
			assert.Equal(t, cells.StatusCreated, res[0].Status, "retry of unstored %s", o.cell.Key)
		}
	}
	t.Logf("%d writes with deadlines of %v..%v: %d acknowledged, %d unavailable, %d indeterminate (%d of them applied)",
		len(outcomes), deadlines[0], deadlines[len(deadlines)-1], ok, unavailable, indeterminate, indeterminateStored)
}
