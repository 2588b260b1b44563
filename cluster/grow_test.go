package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// growPhase is how long each measured phase of the growth and rolling restart runs lasts
// (GROW_PHASE, e.g. "30s", for `make grow`; short by default for `make test`).
func growPhase(t *testing.T) time.Duration {
	if v := os.Getenv("GROW_PHASE"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "GROW_PHASE=%q", v)
		return d
	}
	return 4 * time.Second
}

// loader writes cells through the public client (its retries of retryable answers included)
// from several goroutines until stopped, and keeps every acknowledged key and every failure:
// a write the client gave up on (after its retries) is a failed write.
type loader struct {
	t       *testing.T
	cl      atomic.Pointer[client.Client]
	mu      sync.Mutex
	acked   map[cellKey]string
	fails   []error
	writes  atomic.Int64
	stop    chan struct{}
	done    sync.WaitGroup
	started time.Time
}

type cellKey struct {
	row uuid.UUID
	col string
}

func newLoader(t *testing.T, endpoints []string, workers int) *loader {
	t.Helper()
	l := &loader{t: t, acked: map[cellKey]string{}, stop: make(chan struct{}), started: time.Now()}
	l.setEndpoints(endpoints)
	for w := range workers {
		l.done.Add(1)
		go l.run(w)
	}
	return l
}

// setEndpoints points the load at these nodes (new ones after a growth). It is called from
// the test goroutine.
func (l *loader) setEndpoints(endpoints []string) {
	l.t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = ds
	cfg.MaxAttempts = 10
	cl, err := client.New(cfg)
	require.NoError(l.t, err, "client for %v", endpoints)
	l.cl.Store(cl)
}

func (l *loader) run(w int) {
	defer l.done.Done()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		k := cellKey{row: uuid.New(), col: "BASE"}
		body := fmt.Sprintf(`{"worker":%d,"seq":%d}`, w, i)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := l.cl.Load().PutCell(ctx, k.row, k.col, 1, json.RawMessage(body))
		cancel()
		l.mu.Lock()
		if err != nil {
			l.fails = append(l.fails, err)
		} else {
			l.acked[k] = body
		}
		l.mu.Unlock()
		l.writes.Add(1)
	}
}

// rate measures acknowledged writes per second over d.
func (l *loader) rate(d time.Duration) float64 {
	before := l.writes.Load()
	time.Sleep(d) // the measured phase: the load runs for d
	return float64(l.writes.Load()-before) / d.Seconds()
}

// requireWrites waits until the load has made n more writes than it had made at since
// (writes.Load()), saying when.
func (l *loader) requireWrites(t *testing.T, since, n int64, when string) {
	t.Helper()
	require.Eventually(t, func() bool { return l.writes.Load() >= since+n }, opTimeout, 10*time.Millisecond,
		"%d writes of the load %s", n, when)
}

// finish stops the load and fails the test on any failed write; then every acknowledged cell
// must read back (strong) with its body.
func (l *loader) finish(t *testing.T, endpoints []string) int {
	t.Helper()
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, err := range l.fails {
		if i < 5 {
			assert.NoError(t, err, "write %d of the load", i)
		}
	}
	require.Zero(t, len(l.fails), "failed writes, of %d", l.writes.Load())
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.Datastore = endpoints, ds
	cl, err := client.New(cfg)
	require.NoError(t, err)
	var keys []client.GetKey
	var want []string
	check := func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		res, err := cl.GetCells(ctx, keys)
		require.NoError(t, err, "read back")
		if len(res.Missing) > 0 {
			require.Failf(t, "acknowledged cells missing", "%d missing, e.g. %+v", len(res.Missing), res.Missing[0])
		}
		got := map[string]string{}
		for _, c := range res.Cells {
			got[c.RowKey] = string(c.Body)
		}
		for i, k := range keys {
			require.JSONEq(t, want[i], got[k.RowKey.String()], "body of acknowledged cell %v", k)
		}
		keys, want = keys[:0], want[:0]
	}
	for k, body := range l.acked {
		keys = append(keys, client.GetKey{RowKey: k.row, ColumnKey: k.col, RefKey: 1})
		want = append(want, body)
		if len(keys) == 500 {
			check()
		}
	}
	if len(keys) > 0 {
		check()
	}
	return len(l.acked)
}

// adminNode returns a running node to run admin operations on.
func adminNode(t *testing.T, c *clustertest.Cluster) *cluster.Node {
	t.Helper()
	for i := range c.Len() {
		if n := c.Node(i); n != nil {
			return n
		}
	}
	require.FailNow(t, "no node is running")
	return nil
}

// placementOf returns the voters per node and the leaders per node of every partition.
func placementOf(t *testing.T, n *cluster.Node, partitions int) (map[string]int, map[string]int) {
	t.Helper()
	voters, leaders := map[string]int{}, map[string]int{}
	for p := range partitions {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		cfg, err := n.PartitionConfig(ctx, ds, p)
		cancel()
		require.NoError(t, err, "configuration of partition %d", p)
		for _, v := range cfg.Voters() {
			voters[v]++
		}
		assert.Len(t, cfg.Servers, len(cfg.Voters()), "partition %d: servers, want only voters (no nonvoter left)", p)
		leaders[cfg.Leader]++
	}
	return voters, leaders
}

// TestGrowOnline is the "split each server in two" story: 3 nodes holding 6 partitions of 3
// replicas take write load; 3 new nodes join through gossip; a rebalance moves replicas onto
// them (add voter, catch up, promote, remove the old) until each node holds 3 replicas and
// leads one; then one node is drained and leaves. No write may fail (the client retries what
// is retryable) and every acknowledged cell must read back. GROW_PHASE sets the measured
// phases' length (`make grow`).
func TestGrowOnline(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	phase := growPhase(t)
	const partitions = 6
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Shards: 24, Partitions: partitions, Gossip: true})
	l := newLoader(t, c.URLs(), 16)
	before := l.rate(phase)
	t.Logf("figures: 3 nodes: %.0f writes/s", before)

	for range 3 {
		_, err := c.AddNode(context.Background())
		require.NoError(t, err, "add a node")
	}
	n := adminNode(t, c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		alive := 0
		members := n.Members()
		for _, m := range members {
			if m.State == "alive" {
				alive++
			}
		}
		assert.Equal(ct, 6, alive, "alive nodes in %+v", members)
	}, 20*time.Second, 50*time.Millisecond, "gossip sees the 6 nodes alive")
	l.setEndpoints(c.URLs())

	start := time.Now()
	writesBefore := l.writes.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	rep, err := n.Rebalance(ctx, cluster.RebalanceOptions{})
	cancel()
	require.NoError(t, err, "rebalance (report %+v)", rep)
	took := time.Since(start)
	during := float64(l.writes.Load()-writesBefore) / took.Seconds()
	t.Logf("figures: rebalance 3 -> 6 nodes: %d moves, %d leader transfers in %.1fs, %.0f writes/s during",
		len(rep.Moves), len(rep.Transfers), took.Seconds(), during)

	voters, leaders := placementOf(t, n, partitions)
	for i := range 6 {
		id := fmt.Sprintf("n%d", i+1)
		assert.Equal(t, 3, voters[id], "after the rebalance: replicas on %s (%v)", id, voters)
		if leaders[id] != 1 {
			t.Logf("after the rebalance %s leads %d partitions (%v)", id, leaders[id], leaders)
		}
	}
	assert.Len(t, rep.Moves, 9, "rebalance: replicas moved (18 replicas from 6 per node to 3)")
	after := l.rate(phase)
	t.Logf("figures: 6 nodes: %.0f writes/s", after)

	// A drained node holds nothing and may leave.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	drain, err := n.Drain(ctx, "n6", false)
	cancel()
	require.NoError(t, err, "drain n6")
	voters, leaders = placementOf(t, n, partitions)
	require.Zero(t, voters["n6"], "after draining n6: replicas it holds")
	require.Zero(t, leaders["n6"], "after draining n6: partitions it leads")
	for p := range partitions {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		cfg, err := n.PartitionConfig(ctx, ds, p)
		cancel()
		require.NoError(t, err, "partition %d after the drain", p)
		require.Len(t, cfg.Voters(), 3, "partition %d after the drain: voters (%+v)", p, cfg)
	}
	require.NoError(t, c.Node(5).Leave(5*time.Second), "n6 leaves")
	var rest []string
	for i := range 5 {
		rest = append(rest, c.URL(i))
	}
	l.setEndpoints(rest)
	c.Cluster.StopNode(5)
	t.Logf("figures: drained n6 with %d moves in %.1fs", len(drain.Moves), drain.DurationSeconds)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		m, ok := memberState(n, "n6")
		assert.True(ct, ok, "n6 among the members")
		assert.Equal(ct, "left", m, "gossip state of n6")
	}, 20*time.Second, 50*time.Millisecond, "gossip sees n6 leave")
	time.Sleep(phase / 2) // the load runs on the 5 nodes left
	acked := l.finish(t, rest)
	t.Logf("figures: %d writes acknowledged, 0 failed, every one read back", acked)
}

func memberState(n *cluster.Node, id string) (string, bool) {
	for _, m := range n.Members() {
		if m.ID == id {
			return m.State, true
		}
	}
	return "", false
}

// TestRollingRestart restarts every node in turn under write load, as an operator upgrading
// would: a node hands off its leaderships, stops, starts again over its data and catches up
// before the next one goes. No write may fail and every acknowledged cell must read back.
func TestRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	phase := growPhase(t)
	const partitions = 3
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Partitions: partitions, Gossip: true})
	l := newLoader(t, c.URLs(), 16)
	t.Logf("figures: before: %.0f writes/s", l.rate(phase))
	start := time.Now()
	writesBefore := l.writes.Load()
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.StopNodeGracefully(ctx, i); err != nil {
			t.Logf("stop node %d: %v", i, err)
		}
		cancel()
		time.Sleep(500 * time.Millisecond) // the node stays down a while under the load
		c.StartNode(i)
		// Caught up: every replica of the restarted node applied what its leader committed.
		n := c.Node(i)
		caughtUp := make([]bool, partitions) // once caught up, a partition is not checked again
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			for p := range partitions {
				if caughtUp[p] {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				cfg, err := n.PartitionConfig(ctx, ds, p)
				cancel()
				require.NoError(ct, err, "configuration of partition %d", p)
				var applied uint64
				for _, r := range n.Replicas() {
					if r.Partition == p {
						applied = r.AppliedIndex
					}
				}
				require.GreaterOrEqual(ct, applied, cfg.CommitIndex-min(cfg.CommitIndex, 50),
					"partition %d: applied index of node %d, want within 50 of the commit index (%+v)", p, i, cfg)
				caughtUp[p] = true
			}
		}, 30*time.Second, 50*time.Millisecond, "node %d catches up on every partition", i)
	}
	took := time.Since(start)
	t.Logf("figures: rolling restart of 3 nodes in %.1fs, %.0f writes/s during", took.Seconds(), float64(l.writes.Load()-writesBefore)/took.Seconds())
	t.Logf("figures: after: %.0f writes/s", l.rate(phase))
	acked := l.finish(t, c.URLs())
	t.Logf("figures: %d writes acknowledged, 0 failed, every one read back", acked)
}

// TestAdminVoterChanges checks the single operations and their refusals: remove a follower,
// add it back (its replica is rebuilt from the leader, holding every cell), transfer
// leadership, and refuse to remove the last voter or an unknown node.
func TestAdminVoterChanges(t *testing.T) {
	for _, store := range []string{partition.LogStoreAuto, partition.LogStoreNode} {
		t.Run(store, func(t *testing.T) { adminVoterChanges(t, store) })
	}
}

// adminVoterChanges is TestAdminVoterChanges with the replicas' raft logs in a log store; with
// the node's shared store, the removed replica's log must leave the store (the re-added
// replica starts empty and catches up) and the restarts reopen it there.
func adminVoterChanges(t *testing.T, store string) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Partitions: 1, Partition: partition.Config{LogStore: store}})
	l := newLoader(t, c.URLs(), 4)
	n := c.Node(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := n.PartitionConfig(ctx, ds, 0)
	require.NoError(t, err)
	var follower string
	for _, v := range cfg.Voters() {
		if v != cfg.Leader {
			follower = v
		}
	}
	require.NoError(t, n.RemoveVoter(ctx, ds, 0, follower), "remove voter %s", follower)
	cfg, err = n.PartitionConfig(ctx, ds, 0)
	require.NoError(t, err, "after removing %s", follower)
	require.NotContains(t, cfg.Voters(), follower, "after removing %s: voters", follower)
	require.Len(t, cfg.Servers, 2, "after removing %s: servers", follower)
	fi := slices.IndexFunc(c.Topology.Nodes, func(s topology.NodeSpec) bool { return s.ID == follower })
	for _, r := range c.Node(fi).Replicas() {
		require.False(t, r.Local, "%s still hosts a replica after its removal: %+v", follower, r)
	}
	// Restarted, a removed node remembers it hosts nothing (replicas.json), whatever the
	// topology's replica lists say.
	c.StopNode(fi)
	if store == partition.LogStoreNode {
		nodeLog, err := raftlog.Open(filepath.Join(c.DataDir(fi), "raftlog"), raftlog.Options{})
		require.NoError(t, err, "open the stopped node's raft log store")
		has, err := nodeLog.HasState(partition.LogName(storage.PartitionID{Datastore: ds, Partition: 0}))
		require.NoError(t, err)
		require.NoError(t, nodeLog.Close())
		require.False(t, has, "the removed replica's raft log is still in %s's store", follower)
	}
	c.StartNode(fi)
	for _, r := range c.Node(fi).Replicas() {
		require.False(t, r.Local, "%s hosts a replica again after a restart: %+v", follower, r)
	}
	l.requireWrites(t, l.writes.Load(), 20, "the removed node misses")
	require.NoError(t, n.AddVoter(ctx, ds, 0, follower), "add voter %s back", follower)
	cfg, err = n.PartitionConfig(ctx, ds, 0)
	require.NoError(t, err, "after adding %s back", follower)
	require.Contains(t, cfg.Voters(), follower, "after adding %s back: voters", follower)
	var st cluster.ReplicaStatus
	for _, r := range c.Node(fi).Replicas() {
		if r.Local {
			st = r
		}
	}
	require.NotZero(t, st.AppliedIndex, "%s's new replica: applied index (%+v)", follower, st)
	to, err := n.TransferLeadership(ctx, ds, 0, follower)
	require.NoError(t, err, "transfer to %s", follower)
	require.Equal(t, follower, to, "transfer to %s: new leader", follower)
	// The re-added replica, now leader, serves every acknowledged cell (finish reads strongly).
	acked := l.finish(t, c.URLs())
	require.NotZero(t, acked, "writes acknowledged")
	// Restarted, the re-added node opens its replica again.
	c.StopNode(fi)
	c.StartNode(fi)
	hosts := false
	for _, r := range c.Node(fi).Replicas() {
		hosts = hosts || r.Local
	}
	require.True(t, hosts, "%s hosts its replica after a restart", follower)
	require.NoError(t, n.RemoveVoter(ctx, ds, 0, "nope"), "removing a node that holds nothing")
	require.ErrorIs(t, n.AddVoter(ctx, ds, 0, "nope"), cluster.ErrUnknownNode, "adding an unknown node")
	// Down to one voter, which may not go.
	for _, v := range cfg.Voters() {
		if v != follower {
			require.NoError(t, n.RemoveVoter(ctx, ds, 0, v), "remove voter %s", v)
		}
	}
	require.ErrorIs(t, n.RemoveVoter(ctx, ds, 0, follower), cluster.ErrRefused, "removing the last voter")
}
