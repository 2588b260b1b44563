package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// TestForwarding writes through every node (followers forward to the partition leaders) and
// reads through every node, on each engine.
func TestForwarding(t *testing.T) {
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.MySQL} {
		t.Run(string(engine), func(t *testing.T) { testForwarding(t, engine) })
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
			if err != nil {
				t.Fatalf("GetCells %s through %s: got %v, want nil", cons, n.ID(), err)
			}
			if cons == cluster.Stale && !res[0].Found {
				continue // this replica may not have applied it yet; checked below
			}
			if !res[0].Found || res[0].Cell.RefKey != 9 || bodyJSON(t, res[0].Cell.Body) != `{"v":9}` {
				t.Errorf("latest STATUS %s through %s: got found %v ref %d, want ref 9", cons, n.ID(), res[0].Found, res[0].Cell.RefKey)
			}
			if res[1].Found || res[2].Found {
				t.Errorf("missing keys %s through %s: got found %v and %v, want not found", cons, n.ID(), res[1].Found, res[2].Found)
			}
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
		if err != nil {
			t.Fatalf("rewrite through %s: got %v, want nil", n.ID(), err)
		}
		if res[0].Status != cells.StatusExists || res[0].AddedID != first.addedID {
			t.Errorf("same body again through %s: got %v added_id %d, want exists added_id %d", n.ID(), res[0].Status, res[0].AddedID, first.addedID)
		}
		if res[1].Status != cells.StatusConflict || res[1].AddedID != first.addedID {
			t.Errorf("other body through %s: got %v added_id %d, want conflict added_id %d", n.ID(), res[1].Status, res[1].AddedID, first.addedID)
		}
	}
	if res, err := nodes[0].PutCells(ctx, ds, nil); err != nil || len(res) != 0 {
		t.Errorf("PutCells(no cells): got %v, %v, want no results and nil", res, err)
	}

	// Concurrent writers, one per node, each reading its write back through the next node
	// with a strong read as soon as it is acknowledged.
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes)*10)
	for i, n := range nodes {
		next := nodes[(i+1)%len(nodes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				row := rows[(i*10+j)%len(rows)]
				cell := newCell(t, row, "CONC", int64(i*100+j), fmt.Sprintf(`{"i":%d,"j":%d}`, i, j))
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
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every node answers every cell, strong at once and stale eventually, with one added_id.
	requireStrong(t, l, nodes...)
	for _, n := range nodes {
		eventuallyStale(t, l, n)
	}

	// GetRow: the latest cell of every column, by column key, the same through every node.
	wantCols := []string{"COL0", "COL1", "COL2", "STATUS"}
	for _, n := range nodes {
		got, err := n.GetRow(ctx, ds, row, cluster.Strong)
		if err != nil {
			t.Fatalf("GetRow through %s: got %v, want nil", n.ID(), err)
		}
		var cols []string
		for _, c := range got {
			if c.ColumnKey == "CONC" {
				continue // written concurrently above; whichever ref key is highest
			}
			cols = append(cols, c.ColumnKey)
			if a := ackedCell(l, c.Key); c.AddedID != a.addedID || bodyJSON(t, c.Body) != a.body {
				t.Errorf("GetRow through %s: %s got added_id %d body %s, want %d %s", n.ID(), c.Key, c.AddedID, bodyJSON(t, c.Body), a.addedID, a.body)
			}
			if c.ColumnKey == "STATUS" && c.RefKey != 9 {
				t.Errorf("GetRow through %s: STATUS got ref %d, want the latest, 9", n.ID(), c.RefKey)
			}
		}
		if !slices.Equal(cols, wantCols) {
			t.Errorf("GetRow through %s: got columns %v, want %v", n.ID(), cols, wantCols)
		}
		empty, err := n.GetRow(ctx, ds, uuid.New(), cluster.Strong)
		if err != nil || len(empty) != 0 {
			t.Errorf("GetRow(unknown row) through %s: got %d cells, %v, want none and nil", n.ID(), len(empty), err)
		}
	}

	checkShardLogs(t, spec, l, nodes...)

	// Errors the node reports without asking raft.
	n := nodes[1]
	if _, err := n.PutCells(ctx, "nope", []cells.Cell{newCell(t, row, "A", 1, `{}`)}); !errors.Is(err, cluster.ErrUnknownDatastore) {
		t.Errorf("PutCells(unknown datastore): got %v, want ErrUnknownDatastore", err)
	}
	if _, err := n.GetCells(ctx, "nope", []cluster.GetKey{{Key: cells.Key{RowKey: row, ColumnKey: "A"}}}, cluster.Strong); !errors.Is(err, cluster.ErrUnknownDatastore) {
		t.Errorf("GetCells(unknown datastore): got %v, want ErrUnknownDatastore", err)
	}
	if _, err := n.GetRow(ctx, "nope", row, cluster.Stale); !errors.Is(err, cluster.ErrUnknownDatastore) {
		t.Errorf("GetRow(unknown datastore): got %v, want ErrUnknownDatastore", err)
	}
	for _, shard := range []int{-1, spec.Shards} {
		if _, err := n.ScanShard(ctx, ds, shard, 0, 10, cluster.Strong); !errors.Is(err, cluster.ErrBadShard) {
			t.Errorf("ScanShard(%d): got %v, want ErrBadShard", shard, err)
		}
	}
}

// TestNodeDown stops the leader of partition 0: the two others elect a new leader and serve
// writes and strong reads of every partition; nothing acknowledged is lost; the stopped node
// catches up when it comes back.
func TestNodeDown(t *testing.T) {
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
	if len(survivors) != 2 {
		t.Fatalf("running nodes after StopNode: got %d, want 2", len(survivors))
	}

	// Writes through each survivor, to every partition, succeed once a leader is elected: the
	// node retries until its context ends.
	for _, n := range survivors {
		putAll(t, n, l, batch("DURING_"+n.ID(), n))
	}
	requireStrong(t, l, survivors...)
	for p := range spec.Partitions {
		if lead := c.LeaderOf(p); lead == down {
			t.Fatalf("partition %d: got leader node %d, want one of the running nodes", p, lead)
		}
	}

	c.StartNode(down)
	back := c.Node(down)
	eventuallyStale(t, l, back) // the restarted replica converges
	c.WaitReady()
	putAll(t, back, l, batch("AFTER", back))
	requireStrong(t, l, running(c)...)
	for _, n := range running(c) {
		eventuallyStale(t, l, n)
	}
	checkShardLogs(t, spec, l, running(c)...)
}

// TestRestartAll stops every node and starts them again over their data: every acknowledged
// cell is still there, identical, and the shard logs continue after the old added_ids.
func TestRestartAll(t *testing.T) {
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
		eventuallyStale(t, l, n) // every replica has applied everything before the stop
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
		if err := checkCells(n, cluster.Stale, l.all(), opTimeout); err != nil {
			t.Fatalf("stale read after restart: %v", err)
		}
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
	if err != nil {
		t.Fatalf("rewrite after restart: got %v, want nil", err)
	}
	for i, r := range res {
		if r.Status != cells.StatusExists || r.AddedID != old[i].addedID {
			t.Errorf("rewrite %s after restart: got %v added_id %d, want exists added_id %d", old[i].key, r.Status, r.AddedID, old[i].addedID)
		}
	}
	// New cells: created, each after the last added_id its shard had before the restart.
	var fresh []cells.Cell
	for j, row := range rows {
		fresh = append(fresh, newCell(t, row, "NEW", 1, fmt.Sprintf(`{"j":%d}`, j)))
	}
	for i, r := range putAll(t, nodes[1], l, fresh) {
		s := cells.ShardOf(fresh[i].RowKey, spec.Shards)
		if r.AddedID <= lastAdded[s] {
			t.Errorf("new cell %s in shard %d: got added_id %d, want more than %d (the shard's last before the restart)",
				fresh[i].Key, s, r.AddedID, lastAdded[s])
		}
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
	t.Fatalf("node %s has no replica of partition %d", n.ID(), p)
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
	eventuallyStale(t, l, survivor)
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
		if err == nil {
			t.Fatalf("%s: got results %v and a nil error, want a failure without a quorum", what, res)
		}
		if took > deadline+slack {
			t.Errorf("%s: returned after %v, want within its %v deadline (+%v)", what, took, deadline, slack)
		}
		isUnavailable, isIndeterminate := errors.Is(err, partition.ErrUnavailable), errors.Is(err, partition.ErrIndeterminate)
		if appended && (!isIndeterminate || isUnavailable) {
			t.Errorf("%s was appended to the survivor's raft log: got %v (unavailable %v, indeterminate %v), want ErrIndeterminate only",
				what, err, isUnavailable, isIndeterminate)
		}
		if !appended && (!isUnavailable || isIndeterminate) {
			t.Errorf("%s was not appended anywhere: got %v (unavailable %v, indeterminate %v), want ErrUnavailable only",
				what, err, isUnavailable, isIndeterminate)
		}
	}

	// 1. Both partitions at once, while the survivor still believes it leads partition 0.
	if _, state := lastIndex(t, survivor, 0); state != "Leader" {
		t.Fatalf("survivor state for partition 0: got %s, want Leader (stopping the others took longer than the leader lease)", state)
	}
	mixed := []cells.Cell{
		newCell(t, rows[0][0], "DURING", 1, `{"w":1}`),
		newCell(t, rows[1][0], "DURING", 1, `{"w":1}`),
	}
	failWrite("write to both partitions while the survivor leads partition 0", mixed)
	if _, state := lastIndex(t, survivor, 0); state == "Leader" {
		t.Logf("survivor still leads partition 0 after %v", deadline)
	}
	// 2. Later, once the survivor has stepped down everywhere, nothing can take a write.
	waitUntil(t, 10*time.Second, "the survivor steps down", func() bool {
		for _, r := range survivor.Replicas() {
			if r.State == "Leader" {
				return false
			}
		}
		return true
	})
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
	if !errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate) {
		t.Errorf("strong read without a quorum: got %v, want ErrUnavailable only", err)
	}
	if took > deadline+slack {
		t.Errorf("strong read without a quorum: returned after %v, want within its %v deadline (+%v)", took, deadline, slack)
	}
	ctx, cancel = context.WithTimeout(context.Background(), deadline)
	_, err = survivor.ScanShard(ctx, ds, cells.ShardOf(before[0].RowKey, spec.Shards), 0, 10, cluster.Strong)
	cancel()
	if !errors.Is(err, partition.ErrUnavailable) {
		t.Errorf("strong scan without a quorum: got %v, want ErrUnavailable", err)
	}
	if err := checkCells(survivor, cluster.Stale, l.all(), deadline); err != nil {
		t.Errorf("stale read on the survivor: %v", err)
	}

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
	if err != nil {
		t.Fatalf("retry with the cluster back: got %v, want nil", err)
	}
	for i, r := range res {
		t.Logf("retry of %s: %v", retry[i].Key, r.Status)
		if r.Status != cells.StatusCreated && r.Status != cells.StatusExists {
			t.Errorf("retry of %s: got %v, want created or exists", retry[i].Key, r.Status)
			continue
		}
		if i >= len(mixed) && r.Status != cells.StatusCreated {
			t.Errorf("retry of %s, which no leader took: got %v, want created", retry[i].Key, r.Status)
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
	// Let writes still in flight settle before judging what was applied.
	time.Sleep(500 * time.Millisecond)
	var ok, unavailable, indeterminate, indeterminateStored int
	healthy := via[0]
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, o := range outcomes {
		read, err := healthy.GetCells(ctx, ds, []cluster.GetKey{{Key: o.cell.Key}}, cluster.Strong)
		if err != nil {
			t.Fatalf("strong read of %s: got %v, want nil", o.cell.Key, err)
		}
		found := read[0].Found
		isU, isI := errors.Is(o.err, partition.ErrUnavailable), errors.Is(o.err, partition.ErrIndeterminate)
		switch {
		case o.err == nil:
			ok++
			if o.res.Status != cells.StatusCreated || !found || read[0].Cell.AddedID != o.res.AddedID {
				t.Errorf("acknowledged %s (%v, added_id %d): got found %v added_id %d, want it stored", o.cell.Key, o.res.Status, o.res.AddedID, found, read[0].Cell.AddedID)
			}
		case isI && !isU:
			indeterminate++
			if found {
				indeterminateStored++
			}
		case isU && !isI:
			unavailable++
			if found {
				t.Errorf("%s failed with %v (unavailable: not applied), but it is stored with added_id %d", o.cell.Key, o.err, read[0].Cell.AddedID)
			}
		default:
			t.Errorf("%s: got %v, want nil, ErrUnavailable or ErrIndeterminate (not both)", o.cell.Key, o.err)
		}
		res, err := healthy.PutCells(ctx, ds, []cells.Cell{newCell(t, o.cell.RowKey, o.cell.ColumnKey, o.cell.RefKey, o.body)})
		if err != nil {
			t.Fatalf("retry of %s: got %v, want nil", o.cell.Key, err)
		}
		if want := cells.StatusExists; found && res[0].Status != want {
			t.Errorf("retry of stored %s: got %v, want %v", o.cell.Key, res[0].Status, want)
		}
		if want := cells.StatusCreated; !found && res[0].Status != want {
			t.Errorf("retry of unstored %s: got %v, want %v", o.cell.Key, res[0].Status, want)
		}
	}
	t.Logf("%d writes with deadlines of %v..%v: %d acknowledged, %d unavailable, %d indeterminate (%d of them applied)",
		len(outcomes), deadlines[0], deadlines[len(deadlines)-1], ok, unavailable, indeterminate, indeterminateStored)
}
