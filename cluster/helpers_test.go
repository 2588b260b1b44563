package cluster_test

import (
	"context"
	"errors"
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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ds is the datastore clustertest creates: 16 shards in 2 partitions, replicated on every node.
const ds = "trips"

// opTimeout bounds one operation that must succeed, elections included.
const opTimeout = 20 * time.Second

// tHelper is implemented by *testing.T, not by the *assert.CollectT of an EventuallyWithT
// condition: helpers taking a require.TestingT mark themselves through it.
type tHelper interface{ Helper() }

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

// len returns the number of acknowledged cells.
func (l *ledger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cells)
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
			require.FailNow(t, "no row keys for every partition", "after %d tries", i)
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

// encodeCell returns the cell (row, col, ref) with the JSON body, encoded.
func encodeCell(row uuid.UUID, col string, ref int64, body string) (cells.Cell, error) {
	b, err := cells.EncodeBody([]byte(body))
	if err != nil {
		return cells.Cell{}, fmt.Errorf("EncodeBody(%s): %w", body, err)
	}
	return cells.Cell{Key: cells.Key{RowKey: row, ColumnKey: col, RefKey: ref}, Body: b}, nil
}

// newCell is encodeCell for the test goroutine (or an EventuallyWithT condition's collector).
func newCell(t require.TestingT, row uuid.UUID, col string, ref int64, body string) cells.Cell {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	c, err := encodeCell(row, col, ref, body)
	require.NoError(t, err)
	return c
}

func bodyJSON(t require.TestingT, b cells.Body) string {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	j, err := b.JSON()
	require.NoError(t, err, "body to JSON")
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
	require.NoError(t, err, "PutCells through %s (%d cells)", n.ID(), len(cs))
	require.Len(t, res, len(cs), "PutCells through %s: results", n.ID())
	for i, r := range res {
		require.True(t, (r.Status == cells.StatusCreated || r.Status == cells.StatusExists) && r.AddedID >= 1 && !r.CreatedAt.IsZero(),
			"PutCells through %s: cell %s got %v added_id %d created_at %v, want created with an added_id and a time",
			n.ID(), cs[i].Key, r.Status, r.AddedID, r.CreatedAt)
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
// as an error (nil when all match), for require.NoError or, polling stale reads, for the
// collector of an EventuallyWithT condition.
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
		return fmt.Errorf("GetCells %s through %s: got %w, want nil", c, n.ID(), err)
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
			return fmt.Errorf("GetCells %s through %s: %s body: %w", c, n.ID(), a.key, err)
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
		require.NoError(t, checkCells(n, cluster.Strong, l.all(), opTimeout))
	}
}

// requireStale checks every acknowledged cell with stale reads through n, which may lag: it
// polls until they all match, for up to opTimeout.
func requireStale(t *testing.T, l *ledger, n *cluster.Node) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.NoError(ct, checkCells(n, cluster.Stale, l.all(), 5*time.Second))
	}, opTimeout, 20*time.Millisecond, "stale reads through %s catch up with every acknowledged cell", n.ID())
}

// runningImported returns c's running nodes once every one of them serves the catalog that
// imported the topology's datastores (generation 1 or later).
func runningImported(t *testing.T, c *clustertest.Cluster) []*cluster.Node {
	t.Helper()
	nodes := running(c)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.CatalogDatastores().Generation >= 1 }, opTimeout, 20*time.Millisecond, "node %s imports the catalog", n.ID())
	}
	return nodes
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

// scanSettled is n.ScanShard with strong consistency, asked again (each attempt bounded at
// 5s) while it answers ErrUnavailable, for up to opTimeout: a leader that steps down under a
// loaded machine (it missed its followers' answers for a lease), or a forward to it that times
// out meanwhile, is not what the callers check. Any other error, or none after opTimeout,
// fails t.
func scanSettled(t *testing.T, n *cluster.Node, shard int, after int64, limit int) []cells.Cell {
	t.Helper()
	var got []cells.Cell
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		got, err = n.ScanShard(ctx, ds, shard, after, limit, cluster.Strong)
		if err != nil && !errors.Is(err, cluster.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			require.NoError(t, err, "ScanShard(%d) through %s", shard, n.ID())
		}
		assert.NoError(ct, err)
	}, opTimeout, 100*time.Millisecond, "ScanShard(%d) through %s", shard, n.ID())
	return got
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
	for shard := 0; shard < spec.Shards; shard++ {
		w := want[shard]
		sort.Slice(w, func(i, j int) bool { return w[i].addedID < w[j].addedID })
		for _, n := range nodes {
			got := scanSettled(t, n, shard, 0, 1000)
			require.Len(t, got, len(w), "ScanShard(%d) through %s: cells", shard, n.ID())
			for i, c := range got {
				require.True(t, c.Key == w[i].key && c.AddedID == w[i].addedID,
					"ScanShard(%d) through %s: cell %d got %s added_id %d, want %s added_id %d",
					shard, n.ID(), i, c.Key, c.AddedID, w[i].key, w[i].addedID)
				require.Equal(t, shard, cells.ShardOf(c.RowKey, spec.Shards), "ScanShard(%d) through %s: shard of cell %s", shard, n.ID(), c.Key)
			}
			if len(got) >= 2 {
				// Paging: after the first cell, with limit 1, comes the second.
				page := scanSettled(t, n, shard, got[0].AddedID, 1)
				require.Len(t, page, 1, "ScanShard(%d, after %d, limit 1) through %s", shard, got[0].AddedID, n.ID())
				require.Equal(t, got[1].AddedID, page[0].AddedID, "ScanShard(%d, after %d, limit 1) through %s: added_id of the one cell", shard, got[0].AddedID, n.ID())
			}
		}
	}
}

// leaderAndOther returns the node of nodes that leads partition pid of ds and another of them
// (the last listed that does not lead it), requiring that the partition has a leader.
func leaderAndOther(ctx context.Context, t *testing.T, nodes []*cluster.Node, pid int) (leader, other *cluster.Node) {
	t.Helper()
	cfg, err := nodes[0].PartitionConfig(ctx, ds, pid)
	require.NoError(t, err)
	require.NotEmpty(t, cfg.Leader, "partition %d has a leader", pid)
	for _, n := range nodes {
		if n.ID() == cfg.Leader {
			leader = n
		} else {
			other = n
		}
	}
	require.NotNil(t, leader, "partition %d's leader %s is one of the nodes", pid, cfg.Leader)
	require.NotNil(t, other)
	return leader, other
}
