package jepsen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
	"gopkg.in/yaml.v3"
)

// ClusterConfig describes the cluster under test: real `schemaless serve` processes, node i on
// its own loopback address (FirstIP + i), listening and dialing from it.
type ClusterConfig struct {
	// Binary is the schemaless executable.
	Binary string
	// Dir holds the topology file, one data directory and one log file per node.
	Dir string
	// Nodes is the number of nodes: 3 or 5.
	Nodes int
	// FirstIP is node n1's address; the others follow (127.0.0.2 gives 127.0.0.2, .3, ...).
	FirstIP string
	// HTTPPort and RaftPort are every node's ports (each node has its own IP, so they repeat).
	HTTPPort, RaftPort int
	// MySQLDSN stores every node's cells in this MySQL/MariaDB server, in databases named
	// MySQLPrefix + "_" + node id; empty means embedded SQLite in each node's data directory.
	MySQLDSN, MySQLPrefix string
	// Datastores are the topology's datastores. Partitions without replicas get 3 replicas:
	// every node of a 3-node cluster; on 5 nodes, the k-th partition of all datastores (counted
	// across them) nodes k, k+1, k+2 (mod 5).
	Datastores []topology.DatastoreSpec
	// ServeArgs are extra flags of every `schemaless serve` (raft timeouts, say).
	ServeArgs []string
	// Secure turns security on: StartCluster makes Dir/certs a development bundle
	// (security.EnsureDevBundle: a CA, a certificate per node for its IP and localhost, a gossip
	// key and a token per principal), every node serves with TLS (mutual TLS on the raft port),
	// the principals file and the gossip key, the nodes' URLs are https, and ClientConfig trusts
	// the CA and sends the admin token.
	Secure bool
}

// Node is one process of the cluster under test.
type Node struct {
	ID       string
	IP       string
	HTTPAddr string
	RaftAddr string
	DataDir  string
	LogPath  string
	// Scheme is the API's scheme: "https" on a secure cluster, else "http".
	Scheme string

	// status asks the node alone for its view (one attempt, no fail-over, 2 s).
	status *client.Client
	// admin asks the node alone for its admin reports (one attempt, no fail-over, 10 s).
	admin *client.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process exits
	paused bool
}

// URL is the node's HTTP base URL.
func (n *Node) URL() string { return n.Scheme + "://" + n.HTTPAddr }

// Running reports whether the node's process is alive (paused counts as alive).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Cluster is the running cluster under test. Its methods are safe for concurrent use.
type Cluster struct {
	cfg      ClusterConfig
	Nodes    []*Node
	Topology *topology.Topology
	topoPath string

	// sec is the security bundle of a secure cluster (nil: plain HTTP, no tokens); tls the
	// client TLS configuration trusting its CA.
	sec *security.DevBundle
	tls *tls.Config

	placeMu sync.Mutex
	// placement is each raft partition's servers by "ds/p", as RefreshPlacement last learned
	// them (placement.go); nil until then.
	placement map[string][]string
}

// StartCluster writes the topology (and, with cfg.Secure, the security bundle), starts every
// node and waits (until ctx ends) for each to report ready. On error, the nodes started are
// killed.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	c, err := newCluster(cfg)
	if err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		for _, addr := range []string{n.HTTPAddr, n.RaftAddr} {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, fmt.Errorf("jepsen: %s cannot use %s: %w", n.ID, addr, err)
			}
			ln.Close()
		}
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.WaitReady(ctx, n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// newCluster places the nodes, writes the topology file and, with cfg.Secure, the security
// bundle under cfg.Dir, and builds the nodes' status clients. It starts nothing.
func newCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		return nil, fmt.Errorf("jepsen: %d nodes: want 3 or 5", cfg.Nodes)
	}
	first := net.ParseIP(cfg.FirstIP).To4()
	if first == nil || !first.IsLoopback() {
		return nil, fmt.Errorf("jepsen: first IP %q is not an IPv4 loopback address", cfg.FirstIP)
	}
	c := &Cluster{cfg: cfg, Topology: &topology.Topology{}}
	scheme := "http"
	if cfg.Secure {
		scheme = "https"
	}
	for i := 0; i < cfg.Nodes; i++ {
		ip := net.IPv4(first[0], first[1], first[2], first[3]+byte(i)).String()
		id := fmt.Sprintf("n%d", i+1)
		n := &Node{
			ID: id, IP: ip,
			HTTPAddr: net.JoinHostPort(ip, strconv.Itoa(cfg.HTTPPort)),
			RaftAddr: net.JoinHostPort(ip, strconv.Itoa(cfg.RaftPort)),
			DataDir:  filepath.Join(cfg.Dir, id),
			LogPath:  filepath.Join(cfg.Dir, id+".log"),
			Scheme:   scheme,
		}
		c.Nodes = append(c.Nodes, n)
		c.Topology.Nodes = append(c.Topology.Nodes, topology.NodeSpec{ID: id, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr})
	}
	if cfg.Secure {
		if err := c.ensureSecurity(); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		sc := c.ClientConfig()
		sc.Endpoints, sc.MaxAttempts, sc.RequestTimeout = []string{n.URL()}, 1, 2*time.Second
		var err error
		if n.status, err = client.New(sc); err != nil {
			return nil, err
		}
		sc.RequestTimeout = 10 * time.Second
		if n.admin, err = client.New(sc); err != nil {
			return nil, err
		}
	}
	placed := 0 // partitions placed so far: the next one starts on the next node
	for _, d := range cfg.Datastores {
		if len(d.Partitions) == 0 && len(d.Replicas) == 0 && cfg.Nodes > 3 && d.Mode != topology.ModeAsync {
			count := max(d.PartitionCount, 1)
			per := d.Shards / count
			for p := 0; p < count; p++ {
				last := (p+1)*per - 1
				if p == count-1 {
					last = d.Shards - 1
				}
				var reps []string
				for k := 0; k < 3; k++ {
					reps = append(reps, c.Nodes[(placed+k)%cfg.Nodes].ID)
				}
				placed++
				d.Partitions = append(d.Partitions, topology.PartitionSpec{ID: p, FirstShard: p * per, LastShard: last, Replicas: reps})
			}
			d.PartitionCount = 0
		}
		c.Topology.Datastores = append(c.Topology.Datastores, d)
	}
	if err := c.Topology.Normalize(); err != nil {
		return nil, err
	}
	text, err := yaml.Marshal(c.Topology)
	if err != nil {
		return nil, err
	}
	c.topoPath = filepath.Join(cfg.Dir, "topology.yaml")
	if err := os.WriteFile(c.topoPath, text, 0o644); err != nil {
		return nil, err
	}
	return c, nil
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Start starts n's process (again), appending to its log. It does not wait for readiness.
func (c *Cluster) Start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.exited:
		default:
			return fmt.Errorf("jepsen: %s is already running", n.ID)
		}
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.cfg.Binary, c.serveArgs(n)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C of the harness does not reach the nodes, which the
	// harness stops itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("jepsen: start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited, n.paused = cmd, exited, false
	return nil
}

// serveArgs are n's `schemaless serve` arguments.
func (c *Cluster) serveArgs(n *Node) []string {
	args := []string{"serve", "--config", c.topoPath, "--node-id", n.ID, "--data-dir", n.DataDir, "--log-format", "json"}
	if c.cfg.MySQLDSN != "" {
		args = append(args, "--mysql", c.cfg.MySQLDSN, "--mysql-prefix", c.cfg.MySQLPrefix+"_"+n.ID)
	}
	args = append(args, c.secureServeArgs(n)...)
	return append(args, c.cfg.ServeArgs...)
}

// Kill sends SIGKILL to n (resuming it first if paused, so the kernel reaps it at once) and waits
// for it to exit.
func (c *Cluster) Kill(n *Node) error { return c.signalAndWait(n, syscall.SIGKILL, 10*time.Second) }

// Terminate stops n cleanly (SIGTERM), killing it if it has not exited after 10 s.
func (c *Cluster) Terminate(n *Node) error {
	if err := c.signalAndWait(n, syscall.SIGTERM, 10*time.Second); err != nil {
		return c.Kill(n)
	}
	return nil
}

func (c *Cluster) signalAndWait(n *Node, sig syscall.Signal, wait time.Duration) error {
	n.mu.Lock()
	cmd, exited, paused := n.cmd, n.exited, n.paused
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		n.mu.Lock()
		n.paused = false
		n.mu.Unlock()
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("jepsen: %s did not exit within %s of %s", n.ID, wait, sig)
	}
}

// Pause stops n with SIGSTOP; Resume continues it with SIGCONT.
func (c *Cluster) Pause(n *Node) error { return c.setPaused(n, true) }

// Resume continues a paused node.
func (c *Cluster) Resume(n *Node) error { return c.setPaused(n, false) }

func (c *Cluster) setPaused(n *Node, pause bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.paused == pause {
		return nil
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := n.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("jepsen: %s %s: %w", sig, n.ID, err)
	}
	n.paused = pause
	return nil
}

// Stop resumes and terminates every node.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Resume(n)
			_ = c.Terminate(n)
		}()
	}
	wg.Wait()
}

// WaitReady polls n's /readyz?datastore=NAME for every datastore until each answers 200 (the
// partitions n hosts have a leader, every storage cluster of an async datastore a master) or
// ctx ends.
func (c *Cluster) WaitReady(ctx context.Context, n *Node) error {
	for _, d := range c.Topology.Datastores {
		if err := c.waitDatastoreReady(ctx, n, d.Name); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitDatastoreReady(ctx context.Context, n *Node, ds string) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := n.status.DatastoreReady(pctx, n.URL(), ds)
		cancel()
		if err == nil {
			return nil
		}
		if !n.Running() {
			return fmt.Errorf("jepsen: %s exited while starting (see %s)", n.ID, n.LogPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jepsen: %s not ready: %w (last: %w)", n.ID, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Status asks n for its view of the cluster (GET /v1/cluster), within timeout (at most 2 s).
func (c *Cluster) Status(ctx context.Context, n *Node, timeout time.Duration) (wire.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return n.status.Cluster(ctx)
}

// LeaderInfo is a partition and the node that leads it.
type LeaderInfo struct {
	Datastore string
	Partition int
	Leader    string
	Term      uint64
}

// Leaders asks every running node for its view and returns, per partition, the leader named
// with the highest term (the most recent election any node knows of). Partitions with no known
// leader are left out.
func (c *Cluster) Leaders(ctx context.Context) []LeaderInfo {
	type key struct {
		ds string
		id int
	}
	best := map[key]LeaderInfo{}
	var order []key
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		st, err := c.Status(ctx, n, 500*time.Millisecond)
		if err != nil {
			continue
		}
		for _, d := range st.Datastores {
			for _, p := range d.Partitions {
				if p.Leader == "" || !p.Local {
					continue
				}
				k := key{d.Name, p.ID}
				cur, ok := best[k]
				if !ok {
					order = append(order, k)
				}
				if !ok || p.Term > cur.Term {
					best[k] = LeaderInfo{Datastore: d.Name, Partition: p.ID, Leader: p.Leader, Term: p.Term}
				}
			}
		}
	}
	out := make([]LeaderInfo, 0, len(order))
	for _, k := range order {
		out = append(out, best[k])
	}
	return out
}

// ShardReplicas returns, for datastore ds, each shard's replica node ids: the current placement
// as last refreshed (RefreshPlacement; WaitConverged does), the topology's before.
func (c *Cluster) ShardReplicas(ds string) map[int][]string {
	out := map[int][]string{}
	d, ok := c.Topology.Datastore(ds)
	if !ok {
		return out
	}
	for _, p := range d.Partitions {
		for s := p.FirstShard; s <= p.LastShard; s++ {
			out[s] = c.replicasOf(ds, p)
		}
	}
	return out
}

// WaitConverged waits until, for every partition, all its replicas (the current placement,
// refreshed at every round) answer and report the same
// commit and applied index twice in a row 500 ms apart, or ctx ends. The partitions of the
// datastores named in busy keep taking writes from the nodes themselves (the index
// maintainers' group heartbeats), so they never report the same index twice: for them it waits
// instead until every replica has applied what its leader had committed (WaitApplied), after
// the others converged.
func (c *Cluster) WaitConverged(ctx context.Context, busy ...string) error {
	var last string
	stable := 0
	for {
		view, err := c.convergence(ctx, busy)
		switch {
		case err != nil:
			stable, last = 0, err.Error()
		case view == last:
			stable++
		default:
			stable, last = 1, view
		}
		if stable >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jepsen: replicas did not converge: %w (last: %s)", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if len(busy) == 0 {
		return nil
	}
	return c.WaitApplied(ctx, busy...)
}

// WaitApplied waits until every replica of every partition of the datastores dss has applied
// the highest commit index any replica of the partition reported at the first round in which
// they all answered (the leader's commit index then), or ctx ends. Unlike WaitConverged it
// does not need the partitions to go quiet.
func (c *Cluster) WaitApplied(ctx context.Context, dss ...string) error {
	target := map[string]uint64{} // "ds/p" -> commit index to reach
	last := "no status yet"
	for {
		seen, err := c.indexes(ctx)
		if err == nil {
			err = c.RefreshPlacement(ctx)
		}
		if err != nil {
			last = err.Error()
		} else {
			last = ""
			for _, d := range c.Topology.Datastores {
				if !slices.Contains(dss, d.Name) {
					continue
				}
				for _, p := range d.Partitions {
					k := fmt.Sprintf("%s/%d", d.Name, p.ID)
					if _, ok := target[k]; !ok {
						var commit uint64
						all := true
						for _, r := range c.replicasOf(d.Name, p) {
							got, ok := seen[k][r]
							all = all && ok
							commit = max(commit, got.commit)
						}
						if !all {
							last = fmt.Sprintf("%s: a replica did not answer", k)
							continue
						}
						target[k] = commit
					}
					for _, r := range c.replicasOf(d.Name, p) {
						if got := seen[k][r]; got.applied < target[k] {
							last = fmt.Sprintf("%s: %s applied %d of %d", k, r, got.applied, target[k])
						}
					}
				}
			}
			if last == "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jepsen: replicas did not apply their leaders' commits: %w (last: %s)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// raftIndexes are a replica's commit and applied index.
type raftIndexes struct{ commit, applied uint64 }

// indexes asks every node for the commit and applied index of each partition it hosts: by
// "ds/p", then node id. A node that does not answer is an error.
func (c *Cluster) indexes(ctx context.Context) (map[string]map[string]raftIndexes, error) {
	seen := map[string]map[string]raftIndexes{}
	for _, n := range c.Nodes {
		st, err := c.Status(ctx, n, 2*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.ID, err)
		}
		for _, d := range st.Datastores {
			for _, p := range d.Partitions {
				if !p.Local {
					continue
				}
				k := fmt.Sprintf("%s/%d", d.Name, p.ID)
				if seen[k] == nil {
					seen[k] = map[string]raftIndexes{}
				}
				seen[k][n.ID] = raftIndexes{p.CommitIndex, p.AppliedIndex}
			}
		}
	}
	return seen, nil
}

// convergence returns a description of every partition's agreed indexes, or an error naming
// a partition whose replicas disagree or do not answer. The partitions of the datastores in
// skip are left out.
func (c *Cluster) convergence(ctx context.Context, skip []string) (string, error) {
	seen, err := c.indexes(ctx)
	if err != nil {
		return "", err
	}
	if err := c.RefreshPlacement(ctx); err != nil {
		return "", err
	}
	var view string
	for _, d := range c.Topology.Datastores {
		if slices.Contains(skip, d.Name) {
			continue
		}
		for _, p := range d.Partitions {
			k := fmt.Sprintf("%s/%d", d.Name, p.ID)
			var ref *raftIndexes
			reps := c.replicasOf(d.Name, p)
			for _, r := range reps {
				got, ok := seen[k][r]
				if !ok {
					return "", fmt.Errorf("%s: no status from replica %s", k, r)
				}
				if ref == nil {
					ref = &got
				} else if got != *ref {
					return "", fmt.Errorf("%s: replicas at %+v and %+v", k, *ref, got)
				}
			}
			view += fmt.Sprintf("%s=%d/%d%v ", k, ref.commit, ref.applied, reps)
		}
	}
	return view, nil
}

// ReadBack reads every cell of datastore ds from every replica: each node hosting a partition
// (the current placement as last refreshed, see ShardReplicas) is asked (stale reads, which a replica serves from its own store) for every shard of that
// partition, in added_id order. The map is by node id.
func (c *Cluster) ReadBack(ctx context.Context, ds string) (map[string][]StoredCell, error) {
	d, ok := c.Topology.Datastore(ds)
	if !ok {
		return nil, fmt.Errorf("jepsen: no datastore %q", ds)
	}
	out := map[string][]StoredCell{}
	for _, n := range c.Nodes {
		cfg := c.ClientConfig()
		cfg.Endpoints = []string{n.URL()}
		cfg.Datastore = ds
		cfg.RequestTimeout = 10 * time.Second
		cl, err := client.New(cfg)
		if err != nil {
			return nil, err
		}
		out[n.ID] = []StoredCell{}
		for _, p := range d.Partitions {
			if !slices.Contains(c.replicasOf(ds, p), n.ID) {
				continue
			}
			for s := p.FirstShard; s <= p.LastShard; s++ {
				var after int64
				for {
					page, err := cl.ShardCells(ctx, s, after, 1000, client.WithConsistency(client.ConsistencyStale))
					if err != nil {
						return nil, fmt.Errorf("jepsen: read shard %d of %s from %s: %w", s, ds, n.ID, err)
					}
					for _, cell := range page.Cells {
						out[n.ID] = append(out[n.ID], StoredCell{Node: n.ID, Shard: s, RowKey: cell.RowKey, ColumnKey: cell.ColumnKey,
							RefKey: cell.RefKey, Body: string(cell.Body), AddedID: cell.AddedID})
					}
					if len(page.Cells) == 0 {
						break
					}
					after = page.NextLocation
				}
			}
		}
	}
	return out, nil
}
