package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/membership"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
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
	Topology *topology.Topology
	// DataDir holds the replicas' snapshots and own raft logs
	// ("<DataDir>/raft/<datastore>-p<partition>") and the node's shared raft log store
	// ("<DataDir>/raftlog", package raftlog, opened when a replica first needs it).
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
	// Self gives this node's addresses when it is not in the topology (a node joining a
	// running cluster); its ID must be NodeID. Nil: the topology's entry of NodeID.
	Self *topology.NodeSpec
	// Join lists gossip addresses of running nodes to join through. Default: the gossip
	// addresses of the topology's other nodes. Gossip runs only when this node has a gossip
	// address (Self or the topology's gossip_addr).
	Join []string
	// GossipBindAddr is the gossip listen address. Default: the node's gossip_addr.
	GossipBindAddr string
	// GossipKeys, when set, encrypt and authenticate gossip (memberlist's keyring, AES-GCM):
	// the first key encrypts, every key is accepted (security.LoadGossipKeys). Nil: plaintext
	// gossip.
	GossipKeys [][]byte
	// PeerServerTLS and PeerClientTLS, when set (both or neither), make the node port mutual
	// TLS: raft and the node RPC are accepted only from, and sent only to, peers holding a node
	// certificate of the cluster's CA (transport.Config.ServerTLS and ClientTLS;
	// security.Certs.PeerServerConfig and PeerClientConfig). Nil: plaintext.
	PeerServerTLS *tls.Config
	PeerClientTLS *tls.Config
	// RetryBackoff is the first wait when no leader is known or a leader moved; doubled up to
	// RetryBackoffMax. Defaults 10ms and 500ms.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// ClusterName names this node's cluster among clusters that replicate to each other
	// (cells.ValidateClusterName's form). Default: the topology's cluster_name; "" for none.
	// A write whose origin is this name is refused (a peer sending back this cluster's own
	// cells).
	ClusterName string
	// AutoSplit sets load-based splitting of the raft partitions this node leads (see
	// AutoSplitConfig; zero: off, unless a datastore sets its own threshold).
	AutoSplit AutoSplitConfig
}

func (c *Config) ensureDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ClusterName == "" && c.Topology != nil {
		c.ClusterName = c.Topology.ClusterName
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
	c.AutoSplit.ensureDefaults()
}

// Validate reports every missing field.
func (c Config) Validate() error {
	var errs []error
	if c.Topology == nil {
		errs = append(errs, errors.New("cluster: Config.Topology is required"))
	} else if c.Self != nil {
		if c.Self.ID != c.NodeID || c.Self.RaftAddr == "" || c.Self.HTTPAddr == "" {
			errs = append(errs, fmt.Errorf("cluster: Config.Self must have ID %q, a raft_addr and an http_addr", c.NodeID))
		}
	} else if _, ok := c.Topology.Node(c.NodeID); !ok {
		errs = append(errs, fmt.Errorf("cluster: Config.NodeID %q is not in the topology (give Config.Self to join a running cluster)", c.NodeID))
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
	cfg       Config
	self      topology.NodeSpec
	log       *slog.Logger
	mux       *transport.Mux
	rpcServer *http.Server
	rpcClient *http.Client
	view      atomic.Pointer[nodeView] // the datastores served, replaced whole by the catalog's changes
	// catalogHeld makes applyCatalog keep the catalog served as it is (tests: a node whose
	// catalog lags, HoldCatalog in export_test.go).
	catalogHeld atomic.Bool
	// precopyDelay delays the pre-copies that a catalog change starts (prepareSplitCopies),
	// in nanoseconds (tests: a replica whose pre-copy starts late; the split's own request for
	// it, awaitSplitCopies, is not delayed).
	precopyDelay atomic.Int64
	// retireHeld keeps retireMergedLocked from deleting merged partitions' data (tests: a node
	// that has not deleted it yet, HoldRetirement in export_test.go).
	retireHeld atomic.Bool
	// dropTransfers is how many of the next leadership transfers this node, as a partition's
	// leader, answers as done without asking raft (tests: transfers that do not take,
	// DropTransfers in export_test.go).
	dropTransfers atomic.Int32

	hosted     *hostedFile
	hostMu     sync.Mutex // serializes Host, Unhost and Close
	hostClosed bool       // set by Close under hostMu: Host and Unhost refuse from then on
	dir        directory
	gossip     *membership.Membership                // nil without a gossip address
	live       atomic.Pointer[membership.Membership] // gossip, once started: read by the raft groups (nodeDown)
	stopWatch  chan struct{}
	watchDone  chan struct{}
	nodeLogMu  sync.Mutex
	nodeLog    *raftlog.Store // the shared raft log store, once a replica opened it (see sharedLog)
	closeOnce  sync.Once
	closeErr   error
	cat        catalogState  // the catalog: this node's replica of it, its view, its follower (catalog.go)
	splitKick  chan struct{} // wakes splitLoop: a split was applied here (split.go)
	// splitKickedAt is when kickSplits last ran (unix nanoseconds), for splitLoop's log lines.
	splitKickedAt atomic.Int64
	// splitPrep holds the split-made replicas whose start is being prepared beside the
	// split's copy (splitprep.go), each with the channel closed once it is.
	splitPrep struct {
		sync.Mutex
		m map[storage.PartitionID]chan struct{}
	}
	// recKick wakes recorderLoop; recDirty (guarded by recMu) holds the partitions whose
	// replicas it is to record in the catalog (automerge.go).
	recKick  chan struct{}
	recMu    sync.Mutex
	recDirty map[recordKey]bool
	// notSplitVoter holds the split-made partitions this node's parent replica replayed the
	// split of without being one of its voters (splitVoterHere). Guarded by hostMu.
	notSplitVoter map[storage.PartitionID]bool
	// retiring holds the partitions merged into a replica here whose data is still to be
	// deleted (merge.go).
	retiring struct {
		sync.Mutex
		ids map[storage.PartitionID]bool
		// deleting holds the merged partitions whose data retireMergedLocked is deleting, and
		// reading those whose store reconcileMerge is reading: neither waits for the other
		// (beginReadingRetired).
		deleting map[storage.PartitionID]bool
		reading  map[storage.PartitionID]int
	}
}

// nodeView is the set of datastores a node serves at one moment: by name, and as a topology (the
// topology file's nodes with the datastores in name order, or in the file's order before the
// catalog is known). A view is never changed: a change of the catalog makes a new one.
type nodeView struct {
	byName map[string]*datastore
	top    *topology.Topology
}

// datastores returns the datastores this node serves now, by name; callers must not modify it.
func (n *Node) datastores() map[string]*datastore { return n.view.Load().byName }

type datastore struct {
	spec *topology.DatastoreSpec
	// created is the catalog generation that created the datastore, 0 for one of the topology
	// file (see catalog.Datastore.Created): it names its raft groups on the wire (groupName).
	created    uint64
	partitions []*route                    // by partition index in spec.Partitions
	clusters   []*partition.StorageCluster // async mode: by index in spec.StorageClusters
	schemas    schemaCache                 // latest column schemas, for the check before proposing (schema.go)
}

// route is one partition as this node sees it.
type route struct {
	spec    *topology.PartitionSpec
	ds      *topology.DatastoreSpec
	created uint64 // the datastore's (datastore.created)
	// splitting is set while this node proposes a split or merge of the partition
	// (reconcileSplits, reconcileMerges).
	splitting atomic.Bool
	// settled is set once this partition, made by a split, is known to take its own writes:
	// a leader of its group was known here, or its parent refused one of its shards. Until
	// then a write for its shards goes to its parent (splitFallback).
	settled atomic.Bool
	// frozenSince is when this node, leading the partition, first saw it frozen for a merge
	// (UnixNano; 0: not seen so: reconcileMerges).
	frozenSince atomic.Int64
	// part is the partition this node serves (see local): its raft replica, or, for an async
	// datastore, the partition every node serves. nil when the node hosts no replica.
	part  atomic.Pointer[Partition]
	mu    sync.Mutex
	trans *raft.NetworkTransport // the local replica's transport (under mu)
	hint  string                 // last leader id learned from a forwarded answer
	next  int                    // round robin over replicas when no leader is known
	// replicas are the partition's replica node ids as last learned: the topology's, then the
	// raft configuration of the local replica or of a not-leader answer.
	replicas []string
}

// Start opens the node's transport, RPC server and hosted partition replicas. It does not wait
// for leaders; see Ready.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg.ensureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	self, _ := cfg.Topology.Node(cfg.NodeID)
	if cfg.Self != nil {
		self = *cfg.Self
	}
	hosted, err := loadHosted(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, self: self, log: cfg.Logger.With("node", cfg.NodeID), hosted: hosted,
		stopWatch: make(chan struct{}), watchDone: make(chan struct{}), splitKick: make(chan struct{}, 1),
		recKick: make(chan struct{}, 1)}
	n.view.Store(&nodeView{byName: map[string]*datastore{}, top: &topology.Topology{Nodes: cfg.Topology.Nodes, Security: cfg.Topology.Security}})
	tc := transport.DefaultConfig()
	tc.BindAddr = cfg.BindAddr
	if tc.BindAddr == "" {
		tc.BindAddr = self.RaftAddr
	}
	tc.AdvertiseAddr = self.RaftAddr
	tc.Logger = n.log
	tc.ServerTLS, tc.ClientTLS = cfg.PeerServerTLS, cfg.PeerClientTLS
	mux, err := transport.New(tc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.mux = mux
	// No whole-request timeout: forward bounds each call by its context (ForwardTimeout plus
	// the call's own wait, such as an admin host's or a long poll's).
	n.rpcClient = mux.HTTPClient(0)
	// Idle connections live longer on the server than in the client's pool (60s), so a
	// forwarded request never lands on a connection the server is closing.
	n.rpcServer = &http.Server{Handler: n.rpcHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}

	ok := false
	defer func() {
		if !ok {
			_ = n.Close()
		}
	}()
	specs, created, err := n.startingDatastores()
	if err != nil {
		return nil, err
	}
	byName := map[string]*datastore{}
	for i := range specs {
		d, err := n.openDatastore(ctx, specs[i], created[i])
		if d != nil {
			byName[d.spec.Name] = d
		}
		if err != nil {
			n.view.Store(&nodeView{byName: byName, top: n.view.Load().top})
			return nil, err
		}
	}
	n.setView(byName)
	// Served once the datastores are open: the handlers read them. A request that arrives
	// before waits in the listener's queue.
	go func() { _ = n.rpcServer.Serve(mux.RPCListener()) }()
	if err := n.startGossip(); err != nil {
		return nil, fmt.Errorf("cluster: gossip: %w", err)
	}
	if err := n.startCatalog(ctx); err != nil {
		return nil, fmt.Errorf("cluster: catalog: %w", err)
	}
	go func() {
		defer close(n.watchDone)
		n.watchReplicas(n.stopWatch)
	}()
	go n.splitLoop()
	go n.autoSplitLoop()
	go n.recorderLoop()
	n.kickSplits() // a split applied before a restart whose new partition has no replica here yet
	ok = true
	n.log.Info("node started", "raft_addr", self.RaftAddr, "http_addr", self.HTTPAddr)
	return n, nil
}

// openDatastore opens the routes of datastore ds (a copy the node keeps), created at catalog
// generation created, and the replicas this node hosts: those replicas.json says it hosts, and
// those the spec places here that it never dropped (bootstrapping their raft groups). On error
// it returns what it opened so far, for the caller to close.
func (n *Node) openDatastore(ctx context.Context, ds *topology.DatastoreSpec, created uint64) (*datastore, error) {
	d := &datastore{spec: ds, created: created}
	if ds.Mode == topology.ModeAsync {
		return d, n.openAsync(d)
	}
	for j := range ds.Partitions {
		ps := &ds.Partitions[j]
		r := &route{spec: ps, ds: ds, created: created, replicas: slices.Clone(ps.Replicas)}
		d.partitions = append(d.partitions, r)
		state := n.hosted.state(ds.Name, ps.ID)
		switch {
		case state == hostedRemoved:
			continue // moved away by an admin operation: the topology's list is history
		case state == hostedUnknown && ps.Parent != nil:
			continue // made by a split: opened from the split's copy (openSplitReplicasLocked)
		case state == hostedMember:
			// Added at runtime (or bootstrapped before): raft holds the configuration.
			if err := n.openReplica(ctx, ds, r, nil); err != nil {
				return d, err
			}
			continue
		}
		if !hosts(ps, n.cfg.NodeID) {
			continue
		}
		if err := n.openReplica(ctx, ds, r, n.bootstrapPeers(ps)); err != nil {
			return d, err
		}
		if err := n.hosted.set(ds.Name, ps.ID, hostedMember); err != nil {
			return d, err
		}
	}
	return d, nil
}

// setView makes byName the datastores this node serves.
func (n *Node) setView(byName map[string]*datastore) {
	top := &topology.Topology{Nodes: n.cfg.Topology.Nodes, Security: n.cfg.Topology.Security}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	// The topology file's order while the node runs its datastores, then names.
	order := map[string]int{}
	for i, d := range n.cfg.Topology.Datastores {
		order[d.Name] = i - len(n.cfg.Topology.Datastores)
	}
	slices.SortFunc(names, func(a, b string) int {
		oa, oka := order[a]
		ob, okb := order[b]
		switch {
		case oka && okb:
			return oa - ob
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		top.Datastores = append(top.Datastores, *byName[name].spec)
	}
	n.view.Store(&nodeView{byName: byName, top: top})
}

func hosts(p *topology.PartitionSpec, node string) bool {
	for _, r := range p.Replicas {
		if r == node {
			return true
		}
	}
	return false
}

// openAsync opens the storage clusters of async datastore d and a partition.Async per
// partition: every node serves every partition of an async datastore. Each partition starts
// on the cluster the topology names and follows its placement record when it was moved
// (partition.MoveAsync).
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
		if err := n.openAsyncPartition(d, &ds.Partitions[j]); err != nil {
			return err
		}
	}
	return nil
}

// openAsyncPartition adds to d (an async datastore whose storage clusters are open) the route
// of partition ps, served by a partition.Async of its own.
func (n *Node) openAsyncPartition(d *datastore, ps *topology.PartitionSpec) error {
	ds := d.spec
	r := &route{spec: ps, ds: ds, created: d.created}
	d.partitions = append(d.partitions, r)
	ac := n.cfg.AsyncPartition
	ac.Datastore = ds.Name
	ac.Partition = ps.ID
	ac.NodeID = n.cfg.NodeID
	ac.Shards = ps.Shards()
	ac.Logger = n.log.With("datastore", ds.Name, "partition", ps.ID)
	ac.BufferCopies = ds.BufferClusters
	if ac.PlacementInterval == 0 {
		// The placement of a moved partition is re-read at the pace of the probes.
		ac.PlacementInterval = n.cfg.Async.ProbeInterval
	}
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
	r.serve(a)
	return nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// SourceIP returns the IP the node's transport listens on, which its outgoing connections are
// dialed from (see package transport), or nil when it listens on every address.
func (n *Node) SourceIP() net.IP {
	a, ok := n.mux.ListenAddr().(*net.TCPAddr)
	if !ok || a.IP.IsUnspecified() {
		return nil
	}
	return a.IP
}

// Topology returns the cluster topology the node runs.
// It is the topology file's nodes and the datastores the node serves now (the catalog's, once
// known). The value is never changed: a catalog change makes a new one.
func (n *Node) Topology() *topology.Topology { return n.view.Load().top }

// Close stops every hosted replica, the RPC server and the transport. The store is the
// caller's. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		select {
		case <-n.stopWatch:
		default:
			close(n.stopWatch) // also cancels a Host or Unhost under way (see untilClose)
		}
		// The catalog's follower first: applying a catalog takes the hosting lock, which
		// Close holds from here on.
		errs := []error{n.closeCatalog()}
		// A Host or Unhost under way (an admin RPC) finishes first, and none starts after:
		// a replica opened after this point would never be closed.
		n.hostMu.Lock()
		defer n.hostMu.Unlock()
		n.hostClosed = true
		if n.gossip != nil {
			errs = append(errs, n.gossip.Close())
		}
		for _, d := range n.datastores() {
			for _, r := range d.partitions {
				errs = append(errs, r.closeReplica())
			}
		}
		n.nodeLogMu.Lock()
		if n.nodeLog != nil {
			errs = append(errs, n.nodeLog.Close())
		}
		n.nodeLogMu.Unlock()
		if n.rpcServer != nil {
			errs = append(errs, n.rpcServer.Close())
		}
		if n.mux != nil {
			errs = append(errs, n.mux.Close())
		}
		for _, d := range n.datastores() {
			for _, c := range d.clusters {
				errs = append(errs, c.Close())
			}
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// untilClose returns ctx, also cancelled when Close starts.
func (n *Node) untilClose(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-n.stopWatch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Readiness. A node is ready when what routing depends on works here: every partition it
// serves knows where its leader-only requests go (a raft replica knows its group's leader).
// A node that is not ready has a partition whose requests wait for an election, and a load
// balancer does better sending them to another node. A storage cluster of an async datastore
// without a master is another matter: every node reaches it alike, so another node could not
// do better, and it makes only its own datastore unready (DatastoreReady), not the node.

// Ready returns nil when every partition this node serves knows its leader: every raft replica
// it hosts, of every datastore (an async partition always does: it is served here). It does
// not look at the storage clusters of async datastores; DatastoreReady does. Otherwise it
// returns one error per partition without a leader, joined. No I/O.
func (n *Node) Ready() error {
	var errs []error
	v := n.view.Load()
	for _, ds := range v.top.Datastores {
		errs = append(errs, v.byName[ds.Name].leadersKnown())
	}
	return errors.Join(errs...)
}

// DatastoreReady returns nil when datastore name can be served from this node: every partition
// of it that this node serves knows its leader (as Ready), and, in async mode, every one of its
// storage clusters has a master. Errors: ErrUnknownDatastore; otherwise one error per reason
// ("trips/0 has no leader", "trips: storage cluster c0 has no master"), joined. No I/O.
func (n *Node) DatastoreReady(name string) error {
	d, err := n.datastore(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range d.clusters {
		if !c.HasMaster() {
			errs = append(errs, fmt.Errorf("%s: storage cluster %s has no master", name, c.Name()))
		}
	}
	errs = append(errs, d.leadersKnown())
	return errors.Join(errs...)
}

// leadersKnown returns an error per partition of d this node serves that knows no leader.
func (d *datastore) leadersKnown() error {
	var errs []error
	for _, r := range d.partitions {
		p := r.local()
		if p == nil {
			continue
		}
		if id, _ := p.Leader(); id == "" {
			errs = append(errs, fmt.Errorf("%s/%d has no leader", d.spec.Name, r.spec.ID))
		}
	}
	return errors.Join(errs...)
}

func (n *Node) datastore(name string) (*datastore, error) {
	d, ok := n.datastores()[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownDatastore, name)
	}
	return d, nil
}

// Datastore returns the spec of the datastore named name.
func (n *Node) Datastore(name string) (*topology.DatastoreSpec, error) {
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

// leader returns the node id to send a leader-only request to, or "" when none is known: the
// leader the partition served here names (this node, for an async partition), the last hint,
// or else the partition's replicas in turn (alive ones first, as gossip sees them).
func (n *Node) leader(r *route) string {
	p := r.local()
	if p != nil {
		if id, _ := p.Leader(); id != "" {
			return id
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hint != "" {
		return r.hint
	}
	if p != nil {
		return "" // an election is under way; our replica will learn the leader
	}
	cands := n.candidatesLocked(r)
	if len(cands) == 0 {
		return ""
	}
	id := cands[r.next%len(cands)]
	r.next++
	return id
}

func (r *route) setHint(id string) {
	r.mu.Lock()
	r.hint = id
	r.mu.Unlock()
}

// LeaderHint tells a client where to send the next request for rowKey of datastore ds: the
// datastore's shard count (a client computes a row's shard with cells.ShardOf) and the HTTP
// base URL ("http://host:port") of the leader of the row's partition as this node knows it,
// without I/O: its replica's view, or the last leader a forwarded answer named. url is "" when
// no leader is known or the partition's leader is not elected (async mode: every node serves
// the partition itself); shards is 0 for an unknown datastore. Clients use it to skip the
// forwarding hop (see package client).
func (n *Node) LeaderHint(ds string, rowKey uuid.UUID) (shards int, url string) {
	d, ok := n.datastores()[ds]
	if !ok {
		return 0, ""
	}
	shards = d.spec.Shards
	r := d.routeOf(cells.ShardOf(rowKey, shards))
	if r == nil {
		return shards, ""
	}
	var id string
	if p := r.local(); p != nil {
		if !p.Elected() {
			return shards, ""
		}
		id, _ = p.Leader()
	}
	if id == "" {
		r.mu.Lock()
		id = r.hint
		r.mu.Unlock()
	}
	if id == "" {
		return shards, ""
	}
	spec, ok := n.nodeSpec(id)
	if !ok || spec.HTTPAddr == "" {
		return shards, ""
	}
	return shards, "http://" + spec.HTTPAddr
}
