package cluster_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/topology"
)

// ds is the datastore clustertest creates: 16 shards in 2 partitions, replicated on every node.
const ds = "trips"

// opTimeout bounds one operation that must succeed, elections included.
const opTimeout = 20 * time.Second

// acked is what the cluster acknowledged for one cell: the write's result and the body sent, as
// canonical JSON (sorted keys, no spaces), which is what the store gives back.
type acked struct {
	key     cells.Key
	body    string
	addedID int64
	created time.Time
}

// ledger records every acknowledged write of a test.
type ledger struct {
	mu    sync.Mutex
	cells map[cells.Key]acked
}

func newLedger() *ledger { return &ledger{cells: map[cells.Key]acked{}} }

func (l *ledger) add(a acked) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cells[a.key] = a
}

func ackedCell(l *ledger, k cells.Key) acked {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cells[k]
}

// all returns the acknowledged cells sorted by key, for stable iteration.
func (l *ledger) all() []acked {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]acked, 0, len(l.cells))
	for _, a := range l.cells {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key.String() < out[j].key.String() })
	return out
}

// rowsPerPartition returns perPartition row keys for each partition of the datastore, derived
// from salt (deterministic: no seed to print), partition by partition.
func rowsPerPartition(t *testing.T, spec *topology.DatastoreSpec, salt string, perPartition int) [][]uuid.UUID {
	t.Helper()
	out := make([][]uuid.UUID, len(spec.Partitions))
	need := len(spec.Partitions) * perPartition
	for i := 0; need > 0; i++ {
		if i > 100000 {
			t.Fatalf("no row keys for every partition after %d tries", i)
		}
		row := uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("%s-%d", salt, i)))
		p := partitionIndex(spec, cells.ShardOf(row, spec.Shards))
		if len(out[p]) < perPartition {
			out[p] = append(out[p], row)
			need--
		}
	}
	return out
}

// partitionIndex returns the index in spec.Partitions of the partition holding shard.
func partitionIndex(spec *topology.DatastoreSpec, shard int) int {
	for i, p := range spec.Partitions {
		if p.Shards().Contains(shard) {
			return i
		}
	}
	return -1
}

func flatten(rows [][]uuid.UUID) []uuid.UUID {
	var out []uuid.UUID
	for _, rs := range rows {
		out = append(out, rs...)
	}
	return out
}

func newCell(t *testing.T, row uuid.UUID, col string, ref int64, body string) cells.Cell {
	t.Helper()
	b, err := cells.EncodeBody([]byte(body))
	if err != nil {
		t.Fatalf("EncodeBody(%s): %v", body, err)
	}
	return cells.Cell{Key: cells.Key{RowKey: row, ColumnKey: col, RefKey: ref}, Body: b}
}

func bodyJSON(t *testing.T, b cells.Body) string {
	t.Helper()
	j, err := b.JSON()
	if err != nil {
		t.Fatalf("body to JSON: %v", err)
	}
	return string(j)
}

// putAll writes cs through n, cells never written before, and requires each to be stored: created,
// or exists when the node retried an attempt that had been applied (leader change); it
// records them in l.
func putAll(t *testing.T, n *cluster.Node, l *ledger, cs []cells.Cell) []cells.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := n.PutCells(ctx, ds, cs)
	if err != nil {
		t.Fatalf("PutCells through %s (%d cells): got %v, want nil", n.ID(), len(cs), err)
	}
	if len(res) != len(cs) {
		t.Fatalf("PutCells through %s: got %d results, want %d", n.ID(), len(res), len(cs))
	}
	for i, r := range res {
		if (r.Status != cells.StatusCreated && r.Status != cells.StatusExists) || r.AddedID < 1 || r.CreatedAt.IsZero() {
			t.Fatalf("PutCells through %s: cell %s got %v added_id %d created_at %v, want created with an added_id and a time",
				n.ID(), cs[i].Key, r.Status, r.AddedID, r.CreatedAt)
		}
		if r.Status == cells.StatusExists {
			t.Logf("PutCells through %s: new cell %s reported exists (a retried attempt had applied it)", n.ID(), cs[i].Key)
		}
		if l != nil {
			l.add(acked{key: cs[i].Key, body: bodyJSON(t, cs[i].Body), addedID: r.AddedID, created: r.CreatedAt})
		}
	}
	return res
}

// checkCells reads every cell of want through n with consistency c and compares it with what
// was acknowledged: found, same added_id, created_at and body. It returns the first mismatch
// as an error (nil when all match), so callers can poll stale reads.
func checkCells(n *cluster.Node, c cluster.Consistency, want []acked, timeout time.Duration) error {
	return checkCellsIn(n, ds, c, want, timeout)
}

// checkCellsIn is checkCells for datastore dsName.
func checkCellsIn(n *cluster.Node, dsName string, c cluster.Consistency, want []acked, timeout time.Duration) error {
	if len(want) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	keys := make([]cluster.GetKey, len(want))
	for i, a := range want {
		keys[i] = cluster.GetKey{Key: a.key}
	}
	res, err := n.GetCells(ctx, dsName, keys, c)
	if err != nil {
		return fmt.Errorf("GetCells %s through %s: got %v, want nil", c, n.ID(), err)
	}
	if len(res) != len(want) {
		return fmt.Errorf("GetCells %s through %s: got %d results, want %d", c, n.ID(), len(res), len(want))
	}
	for i, a := range want {
		r := res[i]
		if !r.Found {
			return fmt.Errorf("GetCells %s through %s: %s got not found, want the acknowledged cell (added_id %d)", c, n.ID(), a.key, a.addedID)
		}
		body, err := r.Cell.Body.JSON()
		if err != nil {
			return fmt.Errorf("GetCells %s through %s: %s body: %v", c, n.ID(), a.key, err)
		}
		if r.Cell.Key != a.key || r.Cell.AddedID != a.addedID || !r.Cell.CreatedAt.Equal(a.created) || string(body) != a.body {
			return fmt.Errorf("GetCells %s through %s: got %s added_id %d created_at %v body %s, want %s added_id %d created_at %v body %s",
				c, n.ID(), r.Cell.Key, r.Cell.AddedID, r.Cell.CreatedAt, body, a.key, a.addedID, a.created, a.body)
		}
	}
	return nil
}

// requireStrong checks every acknowledged cell with a strong read through each node: strong
// reads are linearizable, so there is no waiting.
func requireStrong(t *testing.T, l *ledger, nodes ...*cluster.Node) {
	t.Helper()
	for _, n := range nodes {
		if err := checkCells(n, cluster.Strong, l.all(), opTimeout); err != nil {
			t.Fatal(err)
		}
	}
}

// eventuallyStale polls stale reads through n until every acknowledged cell is there.
func eventuallyStale(t *testing.T, l *ledger, n *cluster.Node) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		err := checkCells(n, cluster.Stale, l.all(), 5*time.Second)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale reads through %s never caught up: %v", n.ID(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func running(c *clustertest.Cluster) []*cluster.Node {
	var out []*cluster.Node
	for i := range c.Topology.Nodes {
		if n := c.Node(i); n != nil {
			out = append(out, n)
		}
	}
	return out
}

// checkShardLogs scans every shard through each node (strong) and checks the logs: added_id
// strictly increasing, exactly the acknowledged cells of the shard, identical on every node.
func checkShardLogs(t *testing.T, spec *topology.DatastoreSpec, l *ledger, nodes ...*cluster.Node) {
	t.Helper()
	want := map[int][]acked{}
	for _, a := range l.all() {
		s := cells.ShardOf(a.key.RowKey, spec.Shards)
		want[s] = append(want[s], a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for shard := 0; shard < spec.Shards; shard++ {
		w := want[shard]
		sort.Slice(w, func(i, j int) bool { return w[i].addedID < w[j].addedID })
		for _, n := range nodes {
			got, err := n.ScanShard(ctx, ds, shard, 0, 1000, cluster.Strong)
			if err != nil {
				t.Fatalf("ScanShard(%d) through %s: got %v, want nil", shard, n.ID(), err)
			}
			if len(got) != len(w) {
				t.Fatalf("ScanShard(%d) through %s: got %d cells, want %d", shard, n.ID(), len(got), len(w))
			}
			for i, c := range got {
				if c.Key != w[i].key || c.AddedID != w[i].addedID {
					t.Fatalf("ScanShard(%d) through %s: cell %d got %s added_id %d, want %s added_id %d",
						shard, n.ID(), i, c.Key, c.AddedID, w[i].key, w[i].addedID)
				}
				if s := cells.ShardOf(c.RowKey, spec.Shards); s != shard {
					t.Fatalf("ScanShard(%d) through %s: got a cell of shard %d", shard, n.ID(), s)
				}
			}
			if len(got) >= 2 {
				// Paging: after the first cell, with limit 1, comes the second.
				page, err := n.ScanShard(ctx, ds, shard, got[0].AddedID, 1, cluster.Strong)
				if err != nil || len(page) != 1 || page[0].AddedID != got[1].AddedID {
					t.Fatalf("ScanShard(%d, after %d, limit 1) through %s: got %d cells %v, want the cell with added_id %d",
						shard, got[0].AddedID, n.ID(), len(page), err, got[1].AddedID)
				}
			}
		}
	}
}

// waitUntil polls cond every 10ms until it holds; the test fails after timeout, saying what it
// waited for.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
