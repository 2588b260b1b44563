package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/internal/hclogslog"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/transport"
)

// Errors returned by the node.
var (
	// ErrUnknownDatastore: no datastore of that name in the topology.
	ErrUnknownDatastore = errors.New("cluster: unknown datastore")
	// ErrBadShard: a shard number outside the datastore's shards.
	ErrBadShard = errors.New("cluster: shard out of range")
	// ErrBadGroup: an invalid consumer group name.
	ErrBadGroup = errors.New("cluster: bad consumer group name")
	// ErrUnknownGroup: no consumer group of that name (no worker ever joined it).
	ErrUnknownGroup = errors.New("cluster: unknown consumer group")
)

// Config configures a node. NodeID, Topology, DataDir and Store are required.
type Config struct {
	// NodeID is this node's id in Topology.
	NodeID string
	// Topology is the cluster's static description (already normalized).
	Topology *Topology
	// DataDir holds the raft logs and snapshots ("<DataDir>/raft/<datastore>-p<partition>").
	DataDir string
	// Store holds the node's partition tables; the caller opens and closes it.
	Store *storage.Store
	// Logger is the node's logger. Default slog.Default().
	Logger *slog.Logger
	// Partition carries raft and batching tunables for every hosted replica; its identity
	// fields are ignored.
	Partition partition.Config
	// OnFatal is called when a replica's store keeps failing; it should stop the process.
	OnFatal func(error)
	// BindAddr is the transport's listen address. Default: the node's raft_addr.
	BindAddr string
	// ForwardTimeout bounds one forwarded attempt. Default 10s.
	ForwardTimeout time.Duration
	// Async carries the tunables of every async datastore's storage clusters (probe interval,
	// circuit breakers, pool size); AsyncPartition those of their partitions (reaper, lock
	// wait, batching). Identity fields are ignored.
	Async          partition.ClusterConfig
	AsyncPartition partition.AsyncConfig
	// RetryBackoff is the first wait when no leader is known or a leader moved; doubled up to
	// RetryBackoffMax. Defaults 10ms and 500ms.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
}

func (c *Config) ensureDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ForwardTimeout == 0 {
		c.ForwardTimeout = 10 * time.Second
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 10 * time.Millisecond
	}
	if c.RetryBackoffMax == 0 {
		c.RetryBackoffMax = 500 * time.Millisecond
	}
	if c.OnFatal == nil {
		c.OnFatal = func(error) {}
	}
}

// Validate reports every missing field.
func (c Config) Validate() error {
	var errs []error
	if c.Topology == nil {
		errs = append(errs, errors.New("cluster: Config.Topology is required"))
	} else if _, ok := c.Topology.Node(c.NodeID); !ok {
		errs = append(errs, fmt.Errorf("cluster: Config.NodeID %q is not in the topology", c.NodeID))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("cluster: Config.DataDir is required"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("cluster: Config.Store is required"))
	}
	return errors.Join(errs...)
}

// Node is one running node. Its methods are safe for concurrent use.
type Node struct {
	cfg        Config
	self       NodeSpec
	log        *slog.Logger
	mux        *transport.Mux
	rpcServer  *http.Server
	rpcClient  *http.Client
	datastores map[string]*datastore
	closeOnce  sync.Once
	closeErr   error
}

type datastore struct {
	spec       *DatastoreSpec
	partitions []*route                    // by partition index in spec.Partitions
	clusters   []*partition.StorageCluster // async mode: by index in spec.StorageClusters
}

// route is one partition as this node sees it.
type route struct {
	spec  *PartitionSpec
	local *partition.Raft  // nil when this node hosts no replica
	async *partition.Async // async mode: the partition's storage cluster (every node has one)
	trans *raft.NetworkTransport
	mu    sync.Mutex
	hint  string // last leader id learned from a forwarded answer
	next  int    // round robin over replicas when no leader is known
}

// Start opens the node's transport, RPC server and hosted partition replicas. It does not wait
// for leaders; see Ready.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg.ensureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	self, _ := cfg.Topology.Node(cfg.NodeID)
	n := &Node{cfg: cfg, self: self, log: cfg.Logger.With("node", cfg.NodeID), datastores: map[string]*datastore{}}
	tc := transport.DefaultConfig()
	tc.BindAddr = cfg.BindAddr
	if tc.BindAddr == "" {
		tc.BindAddr = self.RaftAddr
	}
	tc.AdvertiseAddr = self.RaftAddr
	tc.Logger = n.log
	mux, err := transport.New(tc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.mux = mux
	n.rpcClient = mux.HTTPClient(cfg.ForwardTimeout)
	// Idle connections live longer on the server than in the client's pool (60s), so a
	// forwarded request never lands on a connection the server is closing.
	n.rpcServer = &http.Server{Handler: n.rpcHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}
	go func() { _ = n.rpcServer.Serve(mux.RPCListener()) }()

	ok := false
	defer func() {
		if !ok {
			_ = n.Close()
		}
	}()
	for i := range cfg.Topology.Datastores {
		ds := &cfg.Topology.Datastores[i]
		d := &datastore{spec: ds}
		n.datastores[ds.Name] = d
		if ds.Mode == ModeAsync {
			if err := n.openAsync(d); err != nil {
				return nil, err
			}
			continue
		}
		for j := range ds.Partitions {
			ps := &ds.Partitions[j]
			r := &route{spec: ps}
			d.partitions = append(d.partitions, r)
			if !hosts(ps, cfg.NodeID) {
				continue
			}
			if err := n.openReplica(ctx, ds, r); err != nil {
				return nil, err
			}
		}
	}
	ok = true
	n.log.Info("node started", "raft_addr", self.RaftAddr, "http_addr", self.HTTPAddr)
	return n, nil
}

func hosts(p *PartitionSpec, node string) bool {
	for _, r := range p.Replicas {
		if r == node {
			return true
		}
	}
	return false
}

func (n *Node) openReplica(ctx context.Context, ds *DatastoreSpec, r *route) error {
	id := storage.PartitionID{Datastore: ds.Name, Partition: r.spec.ID}
	name := fmt.Sprintf("%s/%d", ds.Name, r.spec.ID)
	ps, err := n.cfg.Store.Partition(ctx, id, r.spec.Shards())
	if err != nil {
		return fmt.Errorf("cluster: partition %s: %w", name, err)
	}
	layer, err := n.mux.RaftLayer(name)
	if err != nil {
		return fmt.Errorf("cluster: partition %s: %w", name, err)
	}
	r.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 4,
		Timeout: 10 * time.Second,
		Logger:  hclogslog.New(n.log.With("partition", name), "raft-net"),
	})
	var peers []raft.Server
	for _, rid := range r.spec.Replicas {
		spec, _ := n.cfg.Topology.Node(rid)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(rid), Address: raft.ServerAddress(spec.RaftAddr)})
	}
	pc := n.cfg.Partition
	pc.ID = id
	pc.Shards = r.spec.Shards()
	pc.NodeID = n.cfg.NodeID
	pc.Dir = filepath.Join(n.cfg.DataDir, "raft", fmt.Sprintf("%s-p%d", ds.Name, r.spec.ID))
	pc.Peers = peers
	pc.Transport = r.trans
	pc.Store = ps
	pc.Logger = n.log
	pc.OnFatal = n.cfg.OnFatal
	p, err := partition.Open(ctx, pc)
	if err != nil {
		_ = r.trans.Close()
		return fmt.Errorf("cluster: %w", err)
	}
	r.local = p
	return nil
}

// openAsync opens the storage clusters of async datastore d and a partition.Async per
// partition: every node serves every partition of an async datastore.
func (n *Node) openAsync(d *datastore) error {
	ds := d.spec
	for _, cs := range ds.StorageClusters {
		cc := n.cfg.Async
		cc.Name = cs.Name
		cc.Members = cs.Members()
		cc.Prefix = ds.MySQLPrefix
		cc.Logger = n.log.With("datastore", ds.Name)
		c, err := partition.OpenCluster(cc)
		if err != nil {
			return fmt.Errorf("cluster: datastore %s: %w", ds.Name, err)
		}
		d.clusters = append(d.clusters, c)
	}
	for j := range ds.Partitions {
		ps := &ds.Partitions[j]
		r := &route{spec: ps}
		d.partitions = append(d.partitions, r)
		ac := n.cfg.AsyncPartition
		ac.Datastore = ds.Name
		ac.Partition = ps.ID
		ac.Shards = ps.Shards()
		ac.Logger = n.log.With("datastore", ds.Name, "partition", ps.ID)
		ac.BufferCopies = ds.BufferClusters
		for k, cs := range ds.StorageClusters {
			if cs.Name == ps.Cluster {
				ac.Primary = d.clusters[k]
			} else {
				ac.Buffers = append(ac.Buffers, d.clusters[k])
			}
		}
		a, err := partition.OpenAsync(ac)
		if err != nil {
			return fmt.Errorf("cluster: datastore %s partition %d: %w", ds.Name, ps.ID, err)
		}
		r.async = a
	}
	return nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Topology returns the cluster topology the node runs.
func (n *Node) Topology() *Topology { return n.cfg.Topology }

// Close stops every hosted replica, the RPC server and the transport. The store is the
// caller's. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		for _, d := range n.datastores {
			for _, r := range d.partitions {
				if r.local != nil {
					errs = append(errs, r.local.Close())
				}
				if r.async != nil {
					errs = append(errs, r.async.Close())
				}
				if r.trans != nil {
					errs = append(errs, r.trans.Close())
				}
			}
		}
		if n.rpcServer != nil {
			errs = append(errs, n.rpcServer.Close())
		}
		if n.mux != nil {
			errs = append(errs, n.mux.Close())
		}
		for _, d := range n.datastores {
			for _, c := range d.clusters {
				errs = append(errs, c.Close())
			}
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// Ready returns nil when every replica this node hosts knows its partition's leader, and every
// storage cluster of an async datastore has a master.
func (n *Node) Ready() error {
	var errs []error
	for name, d := range n.datastores {
		for _, c := range d.clusters {
			if !c.HasMaster() {
				errs = append(errs, fmt.Errorf("%s: storage cluster %s has no master", name, c.Name()))
			}
		}
		for _, r := range d.partitions {
			if r.local == nil {
				continue
			}
			if id, _ := r.local.Leader(); id == "" {
				errs = append(errs, fmt.Errorf("%s/%d has no leader", name, r.spec.ID))
			}
		}
	}
	return errors.Join(errs...)
}

func (n *Node) datastore(name string) (*datastore, error) {
	d, ok := n.datastores[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownDatastore, name)
	}
	return d, nil
}

// Datastore returns the spec of the datastore named name.
func (n *Node) Datastore(name string) (*DatastoreSpec, error) {
	d, err := n.datastore(name)
	if err != nil {
		return nil, err
	}
	return d.spec, nil
}

// routeOf returns the partition route holding shard.
func (d *datastore) routeOf(shard int) *route {
	for _, r := range d.partitions {
		if r.spec.Shards().Contains(shard) {
			return r
		}
	}
	return nil
}

// leader returns the node id to send a leader-only request to, or "" when none is known.
func (n *Node) leader(r *route) string {
	if r.local != nil {
		if id, _ := r.local.Leader(); id != "" {
			return id
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hint != "" {
		return r.hint
	}
	if r.local != nil {
		return "" // an election is under way; our replica will learn the leader
	}
	id := r.spec.Replicas[r.next%len(r.spec.Replicas)]
	r.next++
	return id
}

func (r *route) setHint(id string) {
	r.mu.Lock()
	r.hint = id
	r.mu.Unlock()
}
