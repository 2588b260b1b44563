package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/topology"
)

// growPhase is how long each measured phase of the growth and rolling restart runs lasts
// (GROW_PHASE, e.g. "30s", for `make grow`; short by default for `make test`).
func growPhase(t *testing.T) time.Duration {
	if v := os.Getenv("GROW_PHASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("GROW_PHASE=%q: %v", v, err)
		}
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
	l := &loader{t: t, acked: map[cellKey]string{}, stop: make(chan struct{}), started: time.Now()}
	l.setEndpoints(endpoints)
	for w := range workers {
		l.done.Add(1)
		go l.run(w)
	}
	return l
}

// setEndpoints points the load at these nodes (new ones after a growth).
func (l *loader) setEndpoints(endpoints []string) {
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = ds
	cfg.MaxAttempts = 10
	cl, err := client.New(cfg)
	if err != nil {
		l.t.Fatal(err)
	}
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
	time.Sleep(d)
	return float64(l.writes.Load()-before) / d.Seconds()
}

// finish stops the load and fails the test on any failed write; then every acknowledged cell
// must read back (strong) with its body.
func (l *loader) finish(t *testing.T, endpoints []string) int {
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, err := range l.fails {
		if i < 5 {
			t.Errorf("failed write: %v", err)
		}
	}
	if len(l.fails) > 0 {
		t.Fatalf("%d of %d writes failed", len(l.fails), l.writes.Load())
	}
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.Datastore = endpoints, ds
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []client.GetKey
	var want []string
	check := func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		res, err := cl.GetCells(ctx, keys)
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		if len(res.Missing) > 0 {
			t.Fatalf("%d acknowledged cells missing, e.g. %+v", len(res.Missing), res.Missing[0])
		}
		got := map[string]string{}
		for _, c := range res.Cells {
			got[c.RowKey] = string(c.Body)
		}
		for i, k := range keys {
			var w, g any
			_ = json.Unmarshal([]byte(want[i]), &w)
			_ = json.Unmarshal([]byte(got[k.RowKey.String()]), &g)
			if fmt.Sprint(w) != fmt.Sprint(g) {
				t.Fatalf("acknowledged cell %v: body %s, want %s", k, got[k.RowKey.String()], want[i])
			}
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
	for i := range c.Len() {
		if n := c.Node(i); n != nil {
			return n
		}
	}
	t.Fatal("no node is running")
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
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		for _, v := range cfg.Voters() {
			voters[v]++
		}
		if len(cfg.Servers) != len(cfg.Voters()) {
			t.Errorf("partition %d has nonvoters left: %+v", p, cfg.Servers)
		}
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
		if _, err := c.AddNode(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	n := adminNode(t, c)
	deadline := time.Now().Add(20 * time.Second)
	for {
		alive := 0
		for _, m := range n.Members() {
			if m.State == "alive" {
				alive++
			}
		}
		if alive == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gossip sees %d alive nodes, want 6: %+v", alive, n.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.setEndpoints(c.URLs())

	start := time.Now()
	writesBefore := l.writes.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	rep, err := n.Rebalance(ctx, cluster.RebalanceOptions{})
	cancel()
	if err != nil {
		t.Fatalf("rebalance: %v (report %+v)", err, rep)
	}
	took := time.Since(start)
	during := float64(l.writes.Load()-writesBefore) / took.Seconds()
	t.Logf("figures: rebalance 3 -> 6 nodes: %d moves, %d leader transfers in %.1fs, %.0f writes/s during",
		len(rep.Moves), len(rep.Transfers), took.Seconds(), during)

	voters, leaders := placementOf(t, n, partitions)
	for i := range 6 {
		id := fmt.Sprintf("n%d", i+1)
		if voters[id] != 3 {
			t.Errorf("after the rebalance %s holds %d replicas, want 3 (%v)", id, voters[id], voters)
		}
		if leaders[id] != 1 {
			t.Logf("after the rebalance %s leads %d partitions (%v)", id, leaders[id], leaders)
		}
	}
	if len(rep.Moves) != 9 {
		t.Errorf("rebalance moved %d replicas, want 9 (18 replicas from 6 per node to 3)", len(rep.Moves))
	}
	after := l.rate(phase)
	t.Logf("figures: 6 nodes: %.0f writes/s", after)

	// A drained node holds nothing and may leave.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	drain, err := n.Drain(ctx, "n6", false)
	cancel()
	if err != nil {
		t.Fatalf("drain n6: %v", err)
	}
	voters, leaders = placementOf(t, n, partitions)
	if voters["n6"] != 0 || leaders["n6"] != 0 {
		t.Fatalf("after draining n6 it holds %d replicas and leads %d", voters["n6"], leaders["n6"])
	}
	for p := range partitions {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		cfg, err := n.PartitionConfig(ctx, ds, p)
		cancel()
		if err != nil || len(cfg.Voters()) != 3 {
			t.Fatalf("partition %d after the drain: %+v, %v", p, cfg, err)
		}
	}
	if err := c.Node(5).Leave(5 * time.Second); err != nil {
		t.Fatalf("leave: %v", err)
	}
	var rest []string
	for i := range 5 {
		rest = append(rest, c.URL(i))
	}
	l.setEndpoints(rest)
	c.Cluster.StopNode(5)
	t.Logf("figures: drained n6 with %d moves in %.1fs", len(drain.Moves), drain.DurationSeconds)
	deadline = time.Now().Add(20 * time.Second)
	for {
		m, ok := memberState(n, "n6")
		if ok && m == "left" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gossip state of n6 after leaving: %q", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(phase / 2)
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
		time.Sleep(500 * time.Millisecond)
		c.StartNode(i)
		// Caught up: every replica of the restarted node applied what its leader committed.
		n := c.Node(i)
		deadline := time.Now().Add(30 * time.Second)
		for p := range partitions {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				cfg, err := n.PartitionConfig(ctx, ds, p)
				cancel()
				var applied uint64
				for _, r := range n.Replicas() {
					if r.Partition == p {
						applied = r.AppliedIndex
					}
				}
				if err == nil && applied >= cfg.CommitIndex-min(cfg.CommitIndex, 50) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d did not catch up on partition %d: applied %d, %+v, %v", i, p, applied, cfg, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
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
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Partitions: 1})
	l := newLoader(t, c.URLs(), 4)
	n := c.Node(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := n.PartitionConfig(ctx, ds, 0)
	if err != nil {
		t.Fatal(err)
	}
	var follower string
	for _, v := range cfg.Voters() {
		if v != cfg.Leader {
			follower = v
		}
	}
	if err := n.RemoveVoter(ctx, ds, 0, follower); err != nil {
		t.Fatal(err)
	}
	cfg, err = n.PartitionConfig(ctx, ds, 0)
	if err != nil || slices.Contains(cfg.Voters(), follower) || len(cfg.Servers) != 2 {
		t.Fatalf("after removing %s: %+v, %v", follower, cfg, err)
	}
	fi := slices.IndexFunc(c.Topology.Nodes, func(s topology.NodeSpec) bool { return s.ID == follower })
	for _, r := range c.Node(fi).Replicas() {
		if r.Local {
			t.Fatalf("%s still hosts a replica after its removal: %+v", follower, r)
		}
	}
	// Restarted, a removed node remembers it hosts nothing (replicas.json), whatever the
	// topology's replica lists say.
	c.StopNode(fi)
	c.StartNode(fi)
	for _, r := range c.Node(fi).Replicas() {
		if r.Local {
			t.Fatalf("%s hosts a replica again after a restart: %+v", follower, r)
		}
	}
	time.Sleep(500 * time.Millisecond) // writes the removed node misses
	if err := n.AddVoter(ctx, ds, 0, follower); err != nil {
		t.Fatal(err)
	}
	cfg, err = n.PartitionConfig(ctx, ds, 0)
	if err != nil || !slices.Contains(cfg.Voters(), follower) {
		t.Fatalf("after adding %s back: %+v, %v", follower, cfg, err)
	}
	var st cluster.ReplicaStatus
	for _, r := range c.Node(fi).Replicas() {
		if r.Local {
			st = r
		}
	}
	if st.AppliedIndex == 0 {
		t.Fatalf("%s's new replica applied nothing: %+v", follower, st)
	}
	to, err := n.TransferLeadership(ctx, ds, 0, follower)
	if err != nil || to != follower {
		t.Fatalf("transfer to %s: got %q, %v", follower, to, err)
	}
	// The re-added replica, now leader, serves every acknowledged cell (finish reads strongly).
	acked := l.finish(t, c.URLs())
	if acked == 0 {
		t.Fatal("no write was acknowledged")
	}
	// Restarted, the re-added node opens its replica again.
	c.StopNode(fi)
	c.StartNode(fi)
	hosts := false
	for _, r := range c.Node(fi).Replicas() {
		hosts = hosts || r.Local
	}
	if !hosts {
		t.Fatalf("%s does not host its replica after a restart", follower)
	}
	if err := n.RemoveVoter(ctx, ds, 0, "nope"); err != nil {
		t.Fatalf("removing a node that holds nothing: %v", err)
	}
	if err := n.AddVoter(ctx, ds, 0, "nope"); !errors.Is(err, cluster.ErrUnknownNode) {
		t.Fatalf("adding an unknown node: got %v, want ErrUnknownNode", err)
	}
	// Down to one voter, which may not go.
	for _, v := range cfg.Voters() {
		if v != follower {
			if err := n.RemoveVoter(ctx, ds, 0, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.RemoveVoter(ctx, ds, 0, follower); !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("removing the last voter: got %v, want ErrRefused", err)
	}
}
