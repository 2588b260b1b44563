package jepsen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/launcher"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
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
	// Store is every node's serve --store: "pebble" or "sqlite" (embedded, in each node's data
	// directory), or "mysql" (with MySQLDSN); empty gives none, so serve's default applies
	// (pebble, or mysql with MySQLDSN).
	Store string
	// MySQLDSN stores every node's cells in this MySQL/MariaDB server, in databases named
	// MySQLPrefix + "_" + node id; empty means each node's embedded store (Store).
	MySQLDSN, MySQLPrefix string
	// ClusterName is the topology's cluster_name ("" for none): the replication workload
	// names its two clusters.
	ClusterName string
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

// gossipPortOffset places every node's gossip (TCP and UDP) at RaftPort + 100 on its own IP, as
// `schemaless dev` does: the nodes run as deployed, with the node-level liveness that lets idle
// partitions quiesce (serve --quiesce-after), and a cut link cuts their gossip too.
const gossipPortOffset = 100

// Node is one process of the cluster under test: its launcher slot (id, addresses, data
// directory, log; Start, Kill, Pause, Resume, Running, Paused) and its loopback address.
type Node struct {
	*launcher.Node
	// IP is the node's own loopback address, which it listens and dials from.
	IP string

	// status asks the node alone for its view (one attempt, no fail-over, 2 s).
	status *client.Client
	// admin asks the node alone for its admin reports (one attempt, no fail-over, 10 s).
	admin *client.Client
}

// Cluster is the running cluster under test. Its methods are safe for concurrent use.
type Cluster struct {
	cfg   ClusterConfig
	Nodes []*Node
	procs *launcher.Cluster

	// top is the current topology (see Topology): never modified once stored, replaced whole
	// (under placeMu) when RefreshPlacement learns a new partition map.
	top atomic.Pointer[topology.Topology]

	// sec is the security bundle of a secure cluster (nil: plain HTTP, no tokens); tls the
	// client TLS configuration trusting its CA.
	sec *security.DevBundle
	tls *tls.Config

	placeMu sync.Mutex
	// placement is each raft partition's servers by "ds/p", as RefreshPlacement last learned
	// them (placement.go); nil until then.
	placement map[string][]string
	// catalogGen is the generation of the catalog whose partition map top holds; catalogKnown
	// is false until RefreshPlacement learned one (top then holds the topology file's map).
	catalogGen   uint64
	catalogKnown bool
}

// Topology returns the cluster's topology: the nodes and datastores of the topology file, with
// each raft datastore's partitions (ids, shard ranges, replicas as the catalog placed them) as
// RefreshPlacement last learned them from the cluster's catalog, so that partitions made by
// splits are there; the file's partitions until then. The value is shared and must not be
// modified: a refresh stores a new one, and a caller keeps a consistent view by calling
// Topology once. Which nodes hold a partition's replicas now is replicasOf's (placement.go).
func (c *Cluster) Topology() *topology.Topology { return c.top.Load() }

// StartCluster writes the topology (and, with cfg.Secure, the security bundle), starts every
// node and waits (until ctx ends) for each to report ready. On error, the nodes started are
// stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	c, err := newCluster(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.procs.CheckAddrs(); err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	if err := c.procs.Start(); err != nil {
		return nil, err
	}
	if err := c.procs.WaitReady(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	return c, nil
}

// newCluster places the nodes, writes the topology file and, with cfg.Secure, the security
// bundle under cfg.Dir (launcher.New), and builds the nodes' status clients. It starts
// nothing.
func newCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		return nil, fmt.Errorf("jepsen: %d nodes: want 3 or 5", cfg.Nodes)
	}
	first := net.ParseIP(cfg.FirstIP).To4()
	if first == nil || !first.IsLoopback() {
		return nil, fmt.Errorf("jepsen: first IP %q is not an IPv4 loopback address", cfg.FirstIP)
	}
	top := &topology.Topology{ClusterName: cfg.ClusterName}
	var ips []string
	for i := 0; i < cfg.Nodes; i++ {
		ip := net.IPv4(first[0], first[1], first[2], first[3]+byte(i)).String()
		ips = append(ips, ip)
		top.Nodes = append(top.Nodes, topology.NodeSpec{ID: fmt.Sprintf("n%d", i+1),
			RaftAddr: net.JoinHostPort(ip, strconv.Itoa(cfg.RaftPort)), HTTPAddr: net.JoinHostPort(ip, strconv.Itoa(cfg.HTTPPort)),
			GossipAddr: net.JoinHostPort(ip, strconv.Itoa(cfg.RaftPort+gossipPortOffset))})
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
					reps = append(reps, top.Nodes[(placed+k)%cfg.Nodes].ID)
				}
				placed++
				d.Partitions = append(d.Partitions, topology.PartitionSpec{ID: p, FirstShard: p * per, LastShard: last, Replicas: reps})
			}
			d.PartitionCount = 0
		}
		top.Datastores = append(top.Datastores, d)
	}
	procs, err := launcher.New(launcher.Config{Binary: cfg.Binary, Dir: cfg.Dir, Topology: top, Secure: cfg.Secure,
		Args: func(_ int, id string) []string { return serveArgs(cfg, id) }})
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	c := &Cluster{cfg: cfg, procs: procs, sec: procs.Security()}
	c.top.Store(procs.Topology())
	if c.sec != nil {
		if c.tls, err = security.ClientTLS(c.sec.CA, "", ""); err != nil {
			return nil, err
		}
	}
	for i, ln := range procs.Nodes {
		n := &Node{Node: ln, IP: ips[i]}
		sc := c.ClientConfig()
		sc.Endpoints, sc.MaxAttempts, sc.RequestTimeout = []string{n.URL()}, 1, 2*time.Second
		if n.status, err = client.New(sc); err != nil {
			return nil, err
		}
		sc.RequestTimeout = 10 * time.Second
		if n.admin, err = client.New(sc); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
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

// serveArgs are the flags of node id's `schemaless serve` beyond the launcher's: JSON logs, its
// store and MySQL databases, and cfg.ServeArgs last.
func serveArgs(cfg ClusterConfig, id string) []string {
	args := []string{"--log-format", "json"}
	if cfg.Store != "" {
		args = append(args, "--store", cfg.Store)
	}
	if cfg.MySQLDSN != "" {
		args = append(args, "--mysql", cfg.MySQLDSN, "--mysql-prefix", cfg.MySQLPrefix+"_"+id)
	}
	return append(args, cfg.ServeArgs...)
}

// Stop resumes and terminates every node.
func (c *Cluster) Stop() { c.procs.Stop() }

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
	d, ok := c.Topology().Datastore(ds)
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
			for _, d := range c.Topology().Datastores {
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
	for _, d := range c.Topology().Datastores {
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

// unfrozenWait bounds how long readUnfrozen waits for a shard to be readable: longer than the
// cluster takes to complete or undo a merge whose answer was lost (a minute after its freeze).
const unfrozenWait = 90 * time.Second

// readUnfrozen reads a page of shard s after added_id after with a stale read through cl, again
// every second while the answer is 503 for up to unfrozenWait: a shard whose partition a merge
// froze, when the merge's answer was lost (an indeterminate merge of the split nemesis), is
// refused until the cluster completes or undoes the merge.
func readUnfrozen(ctx context.Context, cl *client.Client, s int, after int64) (wire.ShardCellsResponse, error) {
	deadline := time.Now().Add(unfrozenWait)
	for {
		page, err := cl.ShardCells(ctx, s, after, 1000, client.WithConsistency(client.ConsistencyStale))
		if err == nil || !errors.Is(err, client.ErrUnavailable) || time.Now().After(deadline) {
			return page, err
		}
		select {
		case <-ctx.Done():
			return page, err
		case <-time.After(time.Second):
		}
	}
}

// ReadBack reads every cell of datastore ds from every replica: each node hosting a partition
// (the current placement as last refreshed, see ShardReplicas) is asked (stale reads, which a replica serves from its own store) for every shard of that
// partition, in added_id order. The map is by node id.
func (c *Cluster) ReadBack(ctx context.Context, ds string) (map[string][]StoredCell, error) {
	d, ok := c.Topology().Datastore(ds)
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
					page, err := readUnfrozen(ctx, cl, s, after)
					if err != nil {
						return nil, fmt.Errorf("jepsen: read shard %d of %s from %s: %w", s, ds, n.ID, err)
					}
					for _, cell := range page.Cells {
						out[n.ID] = append(out[n.ID], StoredCell{Node: n.ID, Shard: s, RowKey: cell.RowKey, ColumnKey: cell.ColumnKey,
							RefKey: cell.RefKey, Body: string(cell.Body), AddedID: cell.AddedID, Origin: cell.Origin})
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
