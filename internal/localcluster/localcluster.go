package localcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/node"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/peering"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// Options shape a local cluster. Zero fields take defaults: 3 nodes on 127.0.0.1, datastore
// "trips" with 16 shards in 2 partitions, SQLite, and no other datastore.
type Options struct {
	// AutoSplit sets every node's load-based splitting (cluster.Config.AutoSplit; zero: off).
	AutoSplit  cluster.AutoSplitConfig
	Nodes      int
	Host       string
	Shards     int
	Partitions int
	// Dir holds every node's data ("<Dir>/n<i>"). Required.
	Dir string
	// Store is every node's store, as serve --store: "sqlite" (storage.EngineSQLite, one file
	// per partition under "<Dir>/n<i>/sqlite"), "pebble" (storage.EnginePebble, one pebble
	// store per node under "<Dir>/n<i>/pebble", default tuning) or "mysql" (with MySQLDSN).
	// Empty: mysql with MySQLDSN, else sqlite. Start refuses any other value, and sqlite or
	// pebble with MySQLDSN.
	Store string
	// MySQLDSN, when set, stores cells in that server with prefix MySQLPrefix+"_n<i>" per node;
	// otherwise the embedded store of Store under Dir.
	MySQLDSN    string
	MySQLPrefix string
	// Partition carries raft tunables and, for baselines, NewStateMachine.
	Partition partition.Config
	// Async, when set, makes "trips" an async datastore on those storage clusters (the nodes'
	// own stores then hold nothing of it).
	Async *AsyncOptions
	// Datastores are more datastores beside "trips", each in raft mode (replicated on every
	// node, in the nodes' stores) or, with its Async set, in async mode on its storage
	// clusters: a raft "trips" beside an async datastore is a mixed cluster, as `schemaless
	// dev --mode mixed` runs one.
	Datastores []DatastoreOptions
	// API sets the HTTP API's limits.
	API api.Config
	// Logger receives every node's logs. Default: discard.
	Logger *slog.Logger
	// OnFatal is called when a node's store keeps failing (err wraps node.ErrFatal), or its
	// API server fails (node.ErrServe). The node keeps running until stopped.
	OnFatal func(node string, err error)
	// Gossip gives every node a gossip address (hashicorp/memberlist): nodes added with
	// AddNode join through the first node's.
	Gossip bool
	// Zones, when set, are the nodes' zones: node i (AddNode's too) in Zones[i % len(Zones)].
	Zones []string
	// Maintainer, when set, runs the index maintainer in every node, as `schemaless serve`
	// does (see node.Config.Maintainer; Backend, Datastores, Logger and Registerer are set per
	// node). Nil: no maintainer, and defined indexes stay building.
	Maintainer *maintainer.Config
	// Secure runs every node as `schemaless serve --tls-cert --tls-key --tls-ca
	// --principals-file --gossip-key-file` does, with a development bundle made in
	// "<Dir>/certs" (security.EnsureDevBundle; Cluster.Security): TLS on the API (https URLs),
	// mutual TLS on the node port, a bearer token needed on every request but /healthz and
	// /readyz, and gossip on (as Gossip) encrypted with the bundle's key.
	Secure bool
	// ClusterName is the topology's cluster_name (replication between clusters); "": none.
	ClusterName string
	// Replication tunes every node's replicator (node.Config.Replication).
	Replication peering.Config
}

// DatastoreOptions describe a datastore of a local cluster beside "trips".
type DatastoreOptions struct {
	// Name is the datastore's name (topology rules apply; not "trips"). Required.
	Name string
	// Shards and Partitions default to Options.Shards and Options.Partitions.
	Shards, Partitions int
	// Async, when set, makes it an async datastore on Async.Clusters; nil: raft mode.
	Async *AsyncOptions
}

// AsyncOptions describe an async datastore of a local cluster.
type AsyncOptions struct {
	// Clusters are the storage clusters (at least 2 with buffered writes).
	Clusters []topology.StorageClusterSpec
	// Prefix names the datastore's databases on them (topology.DatastoreSpec.MySQLPrefix).
	Prefix string
	// BufferClusters and Unsafe are topology.DatastoreSpec's BufferClusters and
	// UnsafeNoBufferedWrites.
	BufferClusters int
	Unsafe         bool
	// Cluster and Partition tune the storage clusters and async partitions (identity fields
	// are set per datastore). A node has one set for all its async datastores
	// (cluster.Config's Async and AsyncPartition): the first async datastore's, Options.Async
	// before Options.Datastores.
	Cluster   partition.ClusterConfig
	Partition partition.AsyncConfig
}

// Cluster is a running local cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts     Options
	Topology *topology.Topology
	mu       sync.Mutex
	nodes    []*member           // by index in specs; nil when stopped
	specs    []topology.NodeSpec // the topology's nodes, then those AddNode added
	sec      *security.DevBundle // with Options.Secure; nil otherwise
}

// member is a running node and its store (the node does not close it).
type member struct {
	n     *node.Node
	store *storage.Store
}

// FreeAddrs returns n distinct host:port addresses on host that were free a moment ago. Ports
// are drawn at random below Linux's default ephemeral range (32768-60999), so that a restarted
// node does not find its port taken by some process's outgoing connection while it was down.
// Every listener is held open until all n are chosen, so one port is never handed out twice.
func FreeAddrs(host string, n int) ([]string, error) {
	const first, last = 20000, 32767
	out := make([]string, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("localcluster: no free port in %d..%d on %s", first, last, host)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(first+rand.IntN(last-first+1))))
		if err != nil {
			continue
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// Start starts every node and waits up to 30s until all are ready.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("localcluster: Options.Dir is required")
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Shards == 0 {
		opts.Shards = 16
	}
	if opts.Partitions == 0 {
		opts.Partitions = 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Store == "" {
		opts.Store = storage.EngineSQLite
		if opts.MySQLDSN != "" {
			opts.Store = storage.EngineMySQL
		}
	}
	switch opts.Store {
	case storage.EngineSQLite, storage.EnginePebble:
		if opts.MySQLDSN != "" {
			return nil, fmt.Errorf("localcluster: Options.Store %s with Options.MySQLDSN: the DSN is for store mysql", opts.Store)
		}
	case storage.EngineMySQL:
		if opts.MySQLDSN == "" {
			return nil, errors.New("localcluster: Options.Store mysql needs Options.MySQLDSN")
		}
	default:
		return nil, fmt.Errorf("localcluster: Options.Store %q: want %s, %s or %s", opts.Store, storage.EngineSQLite, storage.EnginePebble, storage.EngineMySQL)
	}
	if opts.Secure {
		opts.Gossip = true
	}
	// A port chosen free can be taken (by another process's outgoing connection, say) before
	// the node binds it: start over on other ports.
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, opts)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			return c, err
		}
	}
}

func start(ctx context.Context, opts Options) (*Cluster, error) {
	top := &topology.Topology{ClusterName: opts.ClusterName}
	per := 2
	if opts.Gossip {
		per = 3
	}
	addrs, err := FreeAddrs(opts.Host, per*opts.Nodes)
	if err != nil {
		return nil, err
	}
	for i := 0; i < opts.Nodes; i++ {
		spec := topology.NodeSpec{ID: fmt.Sprintf("n%d", i+1), RaftAddr: addrs[per*i], HTTPAddr: addrs[per*i+1]}
		if opts.Gossip {
			spec.GossipAddr = addrs[per*i+2]
		}
		if len(opts.Zones) > 0 {
			spec.Zone = opts.Zones[i%len(opts.Zones)]
		}
		top.Nodes = append(top.Nodes, spec)
	}
	top.Datastores = []topology.DatastoreSpec{datastoreSpec("trips", opts.Shards, opts.Partitions, opts.Async)}
	for _, d := range opts.Datastores {
		if d.Name == "" {
			return nil, errors.New("localcluster: Options.Datastores: a datastore without a name")
		}
		shards, parts := cmp.Or(d.Shards, opts.Shards), cmp.Or(d.Partitions, opts.Partitions)
		top.Datastores = append(top.Datastores, datastoreSpec(d.Name, shards, parts, d.Async))
	}
	if err := top.Normalize(); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, Topology: top, nodes: make([]*member, opts.Nodes), specs: append([]topology.NodeSpec(nil), top.Nodes...)}
	if opts.Secure {
		if c.sec, err = c.ensureBundle(c.specs...); err != nil {
			return nil, err
		}
	}
	for i := range top.Nodes {
		if err := c.StartNode(ctx, i); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx, 30*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// URL returns node i's HTTP base URL (https with Options.Secure).
func (c *Cluster) URL(i int) string {
	if c.opts.Secure {
		return "https://" + c.Spec(i).HTTPAddr
	}
	return "http://" + c.Spec(i).HTTPAddr
}

// Security returns the cluster's development bundle with Options.Secure (its CA for clients'
// TLS, its tokens: admin, app with the write role, reader, prometheus), nil without.
func (c *Cluster) Security() *security.DevBundle { return c.sec }

// ensureBundle makes (or completes) the development bundle in <Dir>/certs with a certificate
// for each of nodes, valid for its host and localhost.
func (c *Cluster) ensureBundle(nodes ...topology.NodeSpec) (*security.DevBundle, error) {
	hosts := map[string][]string{}
	for _, n := range nodes {
		h, _, err := net.SplitHostPort(n.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("localcluster: node %s: %w", n.ID, err)
		}
		hosts[n.ID] = []string{h, "localhost"}
	}
	b, err := security.EnsureDevBundle(filepath.Join(c.opts.Dir, "certs"), hosts)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	return b, nil
}

// URLs returns every node's HTTP base URL (added nodes included).
func (c *Cluster) URLs() []string {
	out := make([]string, c.Len())
	for i := range out {
		out[i] = c.URL(i)
	}
	return out
}

// Len returns the number of nodes: the topology's and those AddNode added.
func (c *Cluster) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.specs)
}

// Spec returns node i's addresses.
func (c *Cluster) Spec(i int) topology.NodeSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.specs[i]
}

// AddNode starts a new node that is not in the topology (it joins the running cluster, through
// gossip when Options.Gossip) and returns its index. It hosts nothing until an admin operation
// adds it to partitions.
func (c *Cluster) AddNode(ctx context.Context) (int, error) {
	per := 2
	if c.opts.Gossip {
		per = 3
	}
	addrs, err := FreeAddrs(c.opts.Host, per)
	if err != nil {
		return -1, err
	}
	c.mu.Lock()
	i := len(c.specs)
	spec := topology.NodeSpec{ID: fmt.Sprintf("n%d", i+1), RaftAddr: addrs[0], HTTPAddr: addrs[1]}
	if c.opts.Gossip {
		spec.GossipAddr = addrs[2]
	}
	if len(c.opts.Zones) > 0 {
		spec.Zone = c.opts.Zones[i%len(c.opts.Zones)]
	}
	c.specs = append(c.specs, spec)
	c.nodes = append(c.nodes, nil)
	c.mu.Unlock()
	if c.opts.Secure {
		if _, err := c.ensureBundle(spec); err != nil {
			return -1, err
		}
	}
	return i, c.StartNode(ctx, i)
}

// retry calls f until it succeeds, fails with another error than a port in use, or 2s pass: a
// restarted node's ports may still be held for a moment by its previous listeners.
func retry(f func() error) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := f()
		if err == nil || !portInUse(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// portInUse reports whether err is a listen's "address already in use" (memberlist reports it
// in text only).
func portInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// DataDir is node i's data directory (its embedded store, raft logs and snapshots).
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.opts.Dir, c.Spec(i).ID) }

// StartNode starts (or restarts) node i over its data, with node.Start: its cluster node, its
// API on its HTTP address, and its index maintainer with Options.Maintainer.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i] != nil {
		return fmt.Errorf("localcluster: node %d is running", i)
	}
	spec := c.specs[i]
	var self *topology.NodeSpec
	var join []string
	if i >= len(c.Topology.Nodes) {
		self = &spec
		if spec.GossipAddr != "" {
			join = []string{c.Topology.Nodes[0].GossipAddr}
		}
	}
	dir := filepath.Join(c.opts.Dir, spec.ID)
	var st *storage.Store
	var err error
	log := c.opts.Logger.With("node", spec.ID)
	switch c.opts.Store {
	case storage.EngineMySQL:
		st, err = storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: c.opts.MySQLDSN, Prefix: c.opts.MySQLPrefix + "_" + spec.ID})
	case storage.EnginePebble:
		st, err = storage.OpenPebble(ctx, storage.PebbleConfig{Dir: filepath.Join(dir, "pebble"), Logger: log.With("component", "pebble")})
	default:
		st, err = storage.OpenSQLite(ctx, storage.SQLiteConfig{Dir: filepath.Join(dir, "sqlite")})
	}
	if err != nil {
		return fmt.Errorf("localcluster: node %s store: %w", spec.ID, err)
	}
	sec, err := c.nodeSecurity(spec.ID, log)
	if err != nil {
		st.Close()
		return err
	}
	var n *node.Node
	err = retry(func() error {
		ln, err := net.Listen("tcp", spec.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		n, err = node.Start(ctx, node.Config{
			Cluster: cluster.Config{NodeID: spec.ID, Topology: c.Topology, DataDir: dir, Store: st, Partition: c.opts.Partition,
				Async: c.asyncCluster(), AsyncPartition: c.asyncPartition(), Self: self, Join: join, GossipKeys: sec.gossipKeys,
				AutoSplit: c.opts.AutoSplit},
			API: c.opts.API, Listener: ln, Maintainer: c.opts.Maintainer, Logger: log, TLS: sec.certs, Auth: sec.auth,
			Replication: c.opts.Replication,
		})
		return err
	})
	if err != nil {
		st.Close()
		return fmt.Errorf("localcluster: node %s: %w", spec.ID, err)
	}
	if c.opts.OnFatal != nil {
		go func() {
			if err, ok := <-n.Failed(); ok {
				c.opts.OnFatal(spec.ID, err)
			}
		}()
	}
	c.nodes[i] = &member{n: n, store: st}
	return nil
}

// nodeSecurity is what a node of a secure cluster loads from the bundle; nil fields are off.
type nodeSecurity struct {
	certs      *security.Certs
	auth       *security.Authenticator
	gossipKeys [][]byte
}

// nodeSecurity loads node id's certificate, the principals and the gossip key from the
// cluster's bundle (none without Options.Secure). They are not watched for changes.
func (c *Cluster) nodeSecurity(id string, log *slog.Logger) (nodeSecurity, error) {
	if c.sec == nil {
		return nodeSecurity{}, nil
	}
	var s nodeSecurity
	var err error
	if s.certs, err = security.LoadCerts(c.sec.Node(id), log); err != nil {
		return s, fmt.Errorf("localcluster: node %s: %w", id, err)
	}
	if s.auth, err = security.LoadAuthenticator(c.sec.Principals, log); err != nil {
		return s, fmt.Errorf("localcluster: node %s: %w", id, err)
	}
	if s.gossipKeys, err = security.LoadGossipKeys(c.sec.GossipKey); err != nil {
		return s, fmt.Errorf("localcluster: node %s: %w", id, err)
	}
	return s, nil
}

// StopNodeGracefully stops node i as `schemaless serve` does on SIGTERM (node.Shutdown): its
// maintainer leaves its groups, it hands the leadership of its partitions to other replicas
// and lets the API finish its requests (each bounded by ctx and 5s), then stops.
func (c *Cluster) StopNodeGracefully(ctx context.Context, i int) error {
	c.mu.Lock()
	nd := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if nd == nil {
		return nil
	}
	return errors.Join(nd.n.Shutdown(ctx), nd.store.Close())
}

// StopNode stops node i abruptly (node.Close: no leadership transfer), like a crash of its
// process as its peers see it; its maintainer, if any, leaves its groups first. Its data stays
// for StartNode. Stopping a stopped node does nothing.
func (c *Cluster) StopNode(i int) error {
	c.mu.Lock()
	nd := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if nd == nil {
		return nil
	}
	return errors.Join(nd.n.Close(), nd.store.Close())
}

// StartMaintainer starts the index maintainer of node i again after StopMaintainer (with
// Options.Maintainer; otherwise, or when the node is stopped, it does nothing).
func (c *Cluster) StartMaintainer(i int) {
	c.mu.Lock()
	nd := c.nodes[i]
	c.mu.Unlock()
	if nd != nil {
		nd.n.StartMaintainer()
	}
}

// StopMaintainer stops the index maintainer of node i, if it runs, and waits for it (its
// workers leave their groups); the node keeps serving.
func (c *Cluster) StopMaintainer(i int) {
	c.mu.Lock()
	nd := c.nodes[i]
	c.mu.Unlock()
	if nd != nil {
		nd.n.StopMaintainer()
	}
}

// Close stops every node.
func (c *Cluster) Close() error {
	var errs []error
	for i := range c.Len() {
		errs = append(errs, c.StopNode(i))
	}
	return errors.Join(errs...)
}

// Node returns node i, or nil when it is stopped.
func (c *Cluster) Node(i int) *cluster.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i] == nil {
		return nil
	}
	return c.nodes[i].n.Cluster()
}

// FlushStores has every running node's store write its memtables to disk (storage.Store.Flush),
// so that pebble's size estimates count them (size-based splitting). It blocks until done.
func (c *Cluster) FlushStores() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, m := range c.nodes {
		if m != nil {
			errs = append(errs, m.store.Flush())
		}
	}
	return errors.Join(errs...)
}

// WaitReady waits until every datastore is ready on every running node (cluster.Node's
// DatastoreReady: the raft partitions the node hosts know their leaders, every storage cluster
// of an async datastore has a master), or timeout passes.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := range c.Len() {
		for {
			n := c.Node(i)
			if n == nil {
				break
			}
			err := c.datastoresReady(n)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("localcluster: node %d not ready: %w", i, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// LeaderOf returns the index of a node whose replica leads partition p of "trips", waiting up to
// timeout.
// In async mode every node serves every partition itself: it returns the first running node.
func (c *Cluster) LeaderOf(ctx context.Context, p int, timeout time.Duration) (int, error) {
	if c.opts.Async != nil {
		for i := range c.Len() {
			if c.Node(i) != nil {
				return i, nil
			}
		}
		return -1, errors.New("localcluster: no node is running")
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i := range c.Len() {
			n := c.Node(i)
			if n == nil {
				continue
			}
			for _, r := range n.Replicas() {
				if r.Partition == p && r.State == "Leader" {
					return i, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return -1, fmt.Errorf("localcluster: partition %d has no leader", p)
}

// datastoreSpec is the spec of datastore name: in raft mode with a nil a, else in async mode on
// a's storage clusters.
func datastoreSpec(name string, shards, partitions int, a *AsyncOptions) topology.DatastoreSpec {
	if a == nil {
		return topology.DatastoreSpec{Name: name, Mode: topology.ModeRaft, Shards: shards, PartitionCount: partitions}
	}
	return topology.DatastoreSpec{Name: name, Mode: topology.ModeAsync, Shards: shards, PartitionCount: partitions,
		StorageClusters: a.Clusters, MySQLPrefix: a.Prefix, BufferClusters: a.BufferClusters, UnsafeNoBufferedWrites: a.Unsafe}
}

// asyncTuning returns the async options whose tunables every node applies to all its async
// datastores: Options.Async's, else the first of Options.Datastores'; nil when none is async.
func (c *Cluster) asyncTuning() *AsyncOptions {
	if c.opts.Async != nil {
		return c.opts.Async
	}
	for _, d := range c.opts.Datastores {
		if d.Async != nil {
			return d.Async
		}
	}
	return nil
}

func (c *Cluster) asyncCluster() partition.ClusterConfig {
	if a := c.asyncTuning(); a != nil {
		return a.Cluster
	}
	return partition.ClusterConfig{}
}

func (c *Cluster) asyncPartition() partition.AsyncConfig {
	if a := c.asyncTuning(); a != nil {
		return a.Partition
	}
	return partition.AsyncConfig{}
}

// datastoresReady returns nil when every datastore of the topology is ready on n.
func (c *Cluster) datastoresReady(n *cluster.Node) error {
	var errs []error
	for _, d := range c.Topology.Datastores {
		errs = append(errs, n.DatastoreReady(d.Name))
	}
	return errors.Join(errs...)
}
