package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// The catalog. The cluster's datastores and their partitions live in a replicated catalog
// (package catalog), a raft group of its own whose voters are the topology file's first
// catalogVoters nodes. It starts empty; its first leader imports the topology file's datastores
// (catalog.OpImport), so a cluster started from a topology file keeps running what the file
// says. From then on the catalog is the truth: datastores are created and dropped through it
// (CreateDatastore, DropDatastore), and a change of the file's datastores is ignored.
//
// Every node follows the catalog: a voter from its own replica, another node by long-polling a
// voter (catalogFetchPath). On each new generation the node opens the datastores it does not
// serve yet (bootstrapping the raft groups of the partitions placed on it), drops those the
// catalog dropped (their replicas' data deleted), and stores the catalog in
// <DataDir>/catalog.cache, from which it starts next time, before any voter answers. A node
// never goes back to an older generation.

const (
	// catalogGroup names the catalog's raft group on the node transport; no partition's name
	// ("<datastore>/<partition>") can take it.
	catalogGroup = ":catalog"
	// catalogVoters is how many of the topology file's nodes, the first ones, vote in the
	// catalog's raft group.
	catalogVoters = 3
	// catalogFetchPath is the RPC a node long-polls for a newer catalog; catalogApplyPath
	// proposes a command to the catalog's leader.
	catalogFetchPath = "/internal/v1/catalog/fetch"
	catalogApplyPath = "/internal/v1/catalog/apply"
	// catalogPollWait bounds one long poll of a follower.
	catalogPollWait = 30 * time.Second
	// catalogCacheFile holds the last catalog a node applied (catalog.Encode).
	catalogCacheFile = "catalog.cache"
)

// catalogState is a node's part of the catalog.
type catalogState struct {
	rep  *catalogReplica                 // this node's voter of the catalog group; nil if none
	cur  atomic.Pointer[catalog.Catalog] // the catalog the node serves; nil before one is known
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	applied chan struct{} // closed and replaced whenever cur changes (waitGeneration)
}

// catalogReplica is this node's voter of the catalog's raft group.
type catalogReplica struct {
	raft  *raft.Raft
	fsm   *catalogFSM
	trans *raft.NetworkTransport
	logs  *raftboltdb.BoltStore
}

// catalogFSM is the catalog's raft state machine: a catalog.Catalog in memory, its commands
// MessagePack-encoded catalog.Commands, its snapshots catalog.Encode.
type catalogFSM struct {
	mu      sync.Mutex
	cat     *catalog.Catalog // never modified: Apply swaps in a changed clone
	changed chan struct{}    // closed and replaced on every change
}

// catalogApplied is what the FSM's Apply returns to the proposer.
type catalogApplied struct {
	res catalog.Result
	err error
}

func newCatalogFSM() *catalogFSM {
	return &catalogFSM{cat: catalog.New(), changed: make(chan struct{})}
}

// current returns the catalog and a channel closed at its next change.
func (f *catalogFSM) current() (*catalog.Catalog, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cat, f.changed
}

func (f *catalogFSM) swap(c *catalog.Catalog) {
	f.mu.Lock()
	f.cat = c
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Apply applies one command. A command that does not decode is refused like a malformed one:
// every replica refuses it alike.
func (f *catalogFSM) Apply(l *raft.Log) any {
	var cmd catalog.Command
	if err := msgpack.Unmarshal(l.Data, &cmd); err != nil {
		return catalogApplied{err: fmt.Errorf("%w: undecodable command: %v", catalog.ErrBadCommand, err)}
	}
	cur, _ := f.current()
	next := cur.Clone()
	res, err := next.Apply(cmd)
	if err != nil {
		return catalogApplied{err: err}
	}
	f.swap(next)
	return catalogApplied{res: res}
}

// Snapshot returns the catalog's encoding.
func (f *catalogFSM) Snapshot() (raft.FSMSnapshot, error) {
	cur, _ := f.current()
	b, err := catalog.Encode(cur)
	if err != nil {
		return nil, err
	}
	return catalogSnapshot(b), nil
}

// Restore replaces the catalog with a snapshot's.
func (f *catalogFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	c, err := catalog.Decode(b)
	if err != nil {
		return err
	}
	f.swap(c)
	return nil
}

type catalogSnapshot []byte

func (s catalogSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (catalogSnapshot) Release() {}

// catalogVoterIDs returns the ids of the catalog's voters: the topology file's first
// catalogVoters nodes.
func (n *Node) catalogVoterIDs() []string {
	var ids []string
	for _, s := range n.cfg.Topology.Nodes {
		if len(ids) == catalogVoters {
			break
		}
		ids = append(ids, s.ID)
	}
	return ids
}

// startingDatastores returns the datastores the node opens at start, with the catalog
// generation that created each: those of its catalog cache when it has one (the catalog it last
// applied), else the topology file's (created 0).
func (n *Node) startingDatastores() ([]*topology.DatastoreSpec, []uint64, error) {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, catalogCacheFile))
	if errors.Is(err, os.ErrNotExist) {
		var specs []*topology.DatastoreSpec
		for i := range n.cfg.Topology.Datastores {
			ds := n.cfg.Topology.Datastores[i]
			specs = append(specs, &ds)
		}
		return specs, make([]uint64, len(specs)), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: catalog cache: %w", err)
	}
	c, err := catalog.Decode(b)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: catalog cache %s: %w", filepath.Join(n.cfg.DataDir, catalogCacheFile), err)
	}
	var specs []*topology.DatastoreSpec
	var created []uint64
	for _, name := range c.Names() {
		d := c.Datastores[name]
		spec, err := specOf(d)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: catalog cache: %w", err)
		}
		specs = append(specs, spec)
		created = append(created, d.Created)
	}
	n.cat.cur.Store(c)
	n.warnTopologyIgnored(c)
	return specs, created, nil
}

// warnTopologyIgnored logs each datastore of the topology file that the catalog c does not
// hold as the file says: after the import, the file's datastores are not read.
func (n *Node) warnTopologyIgnored(c *catalog.Catalog) {
	for i := range n.cfg.Topology.Datastores {
		ds := &n.cfg.Topology.Datastores[i]
		d := c.Datastores[ds.Name]
		if d == nil {
			n.log.Warn("a datastore of the topology file is not in the cluster's catalog and is not served: create it with POST /v1/admin/datastores",
				"datastore", ds.Name, "catalog_generation", c.Generation)
			continue
		}
		if spec, err := specOf(d); err == nil && !sameLayout(spec, ds) {
			n.log.Warn("a datastore of the topology file differs from the cluster's catalog, which is served: the file's datastores are read only at a cluster's first start",
				"datastore", ds.Name, "catalog_generation", c.Generation)
		}
	}
}

// specOf returns the topology spec of catalog datastore d: its settings (the spec it was
// created with, JSON) with the catalog's name, mode, shards and partitions.
func specOf(d *catalog.Datastore) (*topology.DatastoreSpec, error) {
	var spec topology.DatastoreSpec
	if len(d.Settings) > 0 {
		if err := json.Unmarshal(d.Settings, &spec); err != nil {
			return nil, fmt.Errorf("datastore %s: settings: %w", d.Name, err)
		}
	}
	spec.Name, spec.Mode, spec.Shards = d.Name, string(d.Mode), d.Shards
	spec.PartitionCount, spec.Replicas, spec.Partitions = 0, nil, nil
	for _, p := range d.Partitions {
		ps := topology.PartitionSpec{ID: p.ID, FirstShard: p.Shards.First, LastShard: p.Shards.Last,
			Replicas: slices.Clone(p.Replicas), Cluster: p.Cluster}
		if p.Origin != p.Shards && p.Origin.Last >= p.Origin.First {
			o := p.Origin
			ps.Origin = &o
		}
		if p.Parent >= 0 {
			parent := p.Parent
			ps.Parent = &parent
		}
		spec.Partitions = append(spec.Partitions, ps)
	}
	return &spec, nil
}

// catalogSpec returns the catalog spec of a normalized topology datastore: its partitions as
// listed, the rest of the spec as its settings.
func catalogSpec(ds *topology.DatastoreSpec) (catalog.Spec, error) {
	rest := *ds
	rest.Partitions, rest.PartitionCount, rest.Replicas = nil, 0, nil
	settings, err := json.Marshal(rest)
	if err != nil {
		return catalog.Spec{}, err
	}
	s := catalog.Spec{Name: ds.Name, Mode: catalog.Mode(ds.Mode), Shards: ds.Shards, Settings: settings}
	for _, p := range ds.Partitions {
		s.Partitions = append(s.Partitions, catalog.Partition{ID: p.ID, Shards: cells.ShardRange{First: p.FirstShard, Last: p.LastShard},
			Replicas: slices.Clone(p.Replicas), Cluster: p.Cluster})
	}
	return s, nil
}

// sameLayout reports whether a and b have the same mode, shards and partitions (IDs, ranges,
// replicas or clusters) and async settings: a node serving a keeps serving it as b.
func sameLayout(a, b *topology.DatastoreSpec) bool {
	ja, _ := json.Marshal(normLayout(a))
	jb, _ := json.Marshal(normLayout(b))
	return bytes.Equal(ja, jb)
}

func normLayout(d *topology.DatastoreSpec) topology.DatastoreSpec {
	c := *d
	c.PartitionCount, c.Replicas = 0, nil
	c.Partitions = slices.Clone(d.Partitions)
	for i := range c.Partitions {
		if len(c.Partitions[i].Replicas) == 0 {
			c.Partitions[i].Replicas = nil
		}
	}
	c.StorageClusters = slices.Clone(d.StorageClusters)
	for i := range c.StorageClusters {
		if len(c.StorageClusters[i].Minions) == 0 {
			c.StorageClusters[i].Minions = nil
		}
	}
	if len(c.Partitions) == 0 {
		c.Partitions = nil
	}
	if len(c.StorageClusters) == 0 {
		c.StorageClusters = nil
	}
	return c
}

// groupName is the name of partition pid's raft group on the node transport: "<ds>/<pid>" for
// a datastore of the topology file, "<ds>/<pid>:g<created>" for one created at run time, so that
// the raft groups of a datastore dropped and created again never exchange a message.
func groupName(ds string, pid int, created uint64) string {
	if created == 0 {
		return fmt.Sprintf("%s/%d", ds, pid)
	}
	return fmt.Sprintf("%s/%d:g%d", ds, pid, created)
}

// startCatalog opens this node's voter of the catalog group (when it is one) and starts
// following the catalog.
func (n *Node) startCatalog(ctx context.Context) error {
	n.cat.stop, n.cat.done = make(chan struct{}), make(chan struct{})
	n.cat.applied = make(chan struct{})
	if slices.Contains(n.catalogVoterIDs(), n.cfg.NodeID) {
		rep, err := n.openCatalogReplica()
		if err != nil {
			close(n.cat.done)
			return err
		}
		n.cat.mu.Lock()
		n.cat.rep = rep
		n.cat.mu.Unlock()
	}
	go func() {
		defer close(n.cat.done)
		n.followCatalog()
	}()
	return nil
}

// openCatalogReplica opens this node's voter of the catalog group in <DataDir>/catalog,
// bootstrapping the group with the catalog's voters when it has no state yet.
func (n *Node) openCatalogReplica() (*catalogReplica, error) {
	dir := filepath.Join(n.cfg.DataDir, "catalog")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logs, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogslog.New(n.log, "catalog-snapshots"))
	if err != nil {
		_ = logs.Close()
		return nil, err
	}
	layer, err := n.mux.RaftLayer(catalogGroup)
	if err != nil {
		_ = logs.Close()
		return nil, err
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 2, Timeout: 10 * time.Second, MaxRPCsInFlight: 1, // see openReplica
		Logger: hclogslog.New(n.log.With("partition", catalogGroup), "raft-net"),
	})
	pc := n.cfg.Partition
	pc.NodeID = n.cfg.NodeID
	pc.EnsureDefaults()
	rc := partition.RaftConfig(pc, hclogslog.New(n.log.With("partition", catalogGroup), "raft"))
	// The catalog lives in memory: restored from the latest snapshot at start, then the log.
	rc.NoSnapshotRestoreOnStart = false
	// Slower heartbeats than a partition's: the catalog changes rarely and no write waits for
	// it, so an idle cluster pays little for it and a lost leader is replaced in seconds.
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 3*pc.HeartbeatTimeout, 3*pc.ElectionTimeout, 3*pc.LeaderLeaseTimeout
	rc.BatchApplyCh = false
	rc.SnapshotThreshold, rc.TrailingLogs = 256, 256
	fsm := newCatalogFSM()
	has, err := raft.HasExistingState(logs, logs, snaps)
	if err != nil {
		_ = trans.Close()
		_ = logs.Close()
		return nil, err
	}
	if !has {
		var servers []raft.Server
		for _, id := range n.catalogVoterIDs() {
			spec, _ := n.nodeSpec(id)
			servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(spec.RaftAddr), Suffrage: raft.Voter})
		}
		if err := raft.BootstrapCluster(rc, logs, logs, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			_ = trans.Close()
			_ = logs.Close()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, fsm, logs, logs, snaps, trans)
	if err != nil {
		_ = trans.Close()
		_ = logs.Close()
		return nil, err
	}
	return &catalogReplica{raft: r, fsm: fsm, trans: trans, logs: logs}, nil
}

// catalogLeads reports whether this node's voter leads the catalog's raft group.
func (n *Node) catalogLeads() bool {
	rep := n.catalogReplica()
	return rep != nil && rep.raft.State() == raft.Leader
}

// catalogReplica returns this node's voter of the catalog, nil when it holds none or closed it.
func (n *Node) catalogReplica() *catalogReplica {
	n.cat.mu.Lock()
	defer n.cat.mu.Unlock()
	return n.cat.rep
}

// closeCatalog stops following the catalog and closes this node's voter of it.
func (n *Node) closeCatalog() error {
	if n.cat.stop == nil {
		return nil
	}
	select {
	case <-n.cat.stop:
	default:
		close(n.cat.stop)
	}
	<-n.cat.done
	n.cat.mu.Lock()
	rep := n.cat.rep
	n.cat.rep = nil
	n.cat.mu.Unlock()
	if rep == nil {
		return nil
	}
	errs := []error{rep.raft.Shutdown().Error(), rep.trans.Close(), rep.logs.Close()}
	return errors.Join(errs...)
}

// followCatalog applies every new generation of the catalog to this node until the catalog
// stops: a voter's own replica's, or what a voter's long poll answers. A voter that leads a
// catalog at generation 0 imports the topology file's datastores.
func (n *Node) followCatalog() {
	backoff := time.Duration(0)
	next := 0
	for {
		if backoff > 0 {
			select {
			case <-n.cat.stop:
				return
			case <-time.After(backoff):
			}
		}
		if rep := n.catalogReplica(); rep != nil {
			cat, changed := rep.fsm.current()
			n.applyCatalog(cat)
			if cat.Generation == 0 && len(n.cfg.Topology.Datastores) > 0 {
				if rep.raft.State() == raft.Leader {
					n.importTopology()
				}
				backoff = 200 * time.Millisecond
				select {
				case <-n.cat.stop:
					return
				case <-changed:
				case <-time.After(backoff):
				}
				backoff = 0
				continue
			}
			select {
			case <-n.cat.stop:
				return
			case <-changed:
			}
			continue
		}
		voters := n.catalogVoterIDs()
		id := voters[next%len(voters)]
		next++
		cat, err := n.fetchCatalog(id, catalogPollWait)
		if err != nil {
			n.log.Debug("catalog poll failed", "voter", id, "error", err)
			backoff = min(max(2*backoff, 100*time.Millisecond), 2*time.Second)
			continue
		}
		backoff = 0
		next-- // keep asking the voter that answered
		n.applyCatalog(cat)
	}
}

// importTopology proposes the import of the topology file's datastores (the leader of a catalog
// at generation 0 does). A catalog that was not empty refuses it (catalog.ErrExists).
func (n *Node) importTopology() {
	cmd := catalog.Command{Op: catalog.OpImport}
	for i := range n.cfg.Topology.Datastores {
		s, err := catalogSpec(&n.cfg.Topology.Datastores[i])
		if err != nil {
			n.log.Error("catalog import", "error", err)
			return
		}
		cmd.Import = append(cmd.Import, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Not applyCatalogCommand: this goroutine applies the generation it would wait for.
	if _, err := n.sendCatalogCommand(ctx, cmd); err != nil && !errors.Is(err, catalog.ErrExists) {
		n.log.Warn("catalog import", "error", err)
		return
	}
	n.log.Info("imported the topology file's datastores into the catalog", "datastores", len(cmd.Import))
}

// catalogFetchRPC asks for the catalog once its generation is above After, waiting up to
// WaitMicros; catalogFetchAnswer carries it (catalog.Encode).
type catalogFetchRPC struct {
	After      uint64
	WaitMicros int64
}

type catalogFetchAnswer struct {
	Catalog []byte
}

// fetchCatalog long-polls voter id for a catalog above this node's generation.
func (n *Node) fetchCatalog(id string, wait time.Duration) (*catalog.Catalog, error) {
	spec, ok := n.nodeSpec(id)
	if !ok {
		return nil, fmt.Errorf("%w: node %s", ErrUnknownNode, id)
	}
	var after uint64
	if c := n.cat.cur.Load(); c != nil {
		after = c.Generation
	}
	ctx, cancel := n.untilClose(context.Background())
	defer cancel()
	var ans catalogFetchAnswer
	if err := n.forward(ctx, spec, catalogFetchPath, catalogFetchRPC{After: after, WaitMicros: wait.Microseconds()}, into(&ans), false, wait); err != nil {
		return nil, err
	}
	return catalog.Decode(ans.Catalog)
}

// serveCatalogFetch answers a follower's long poll: this voter's catalog once its generation is
// above the asked one, or its current one when the wait ends.
func (n *Node) serveCatalogFetch(w http.ResponseWriter, r *http.Request) {
	var req catalogFetchRPC
	if err := decodeRPC(r, &req); err != nil {
		writeRPCError(w, fmt.Errorf("%w: %v", ErrBadRPC, err))
		return
	}
	rep := n.catalogReplica()
	if rep == nil {
		writeRPCError(w, fmt.Errorf("%w: node %s holds no replica of the catalog", ErrUnavailable, n.cfg.NodeID))
		return
	}
	wait := min(time.Duration(max(req.WaitMicros, 0))*time.Microsecond, catalogPollWait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		cat, changed := rep.fsm.current()
		if cat.Generation > req.After {
			n.answerCatalog(w, cat)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			n.answerCatalog(w, cat)
			return
		case <-r.Context().Done():
			return
		case <-n.cat.stop:
			writeRPCError(w, ErrClosed)
			return
		}
	}
}

func (n *Node) answerCatalog(w http.ResponseWriter, c *catalog.Catalog) {
	b, err := catalog.Encode(c)
	if err != nil {
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, catalogFetchAnswer{Catalog: b})
}

// catalogApplyRPC proposes a command to the catalog's leader; catalogApplyAnswer is its
// outcome: the result, or the refusal's kind (catalogErrKinds) and message, or the leader to
// ask instead.
type catalogApplyRPC struct {
	Command catalog.Command
}

type catalogApplyAnswer struct {
	Result   catalog.Result
	ErrKind  string
	ErrMsg   string
	LeaderID string
	Leader   bool // false: this voter does not lead; LeaderID names the one it knows
}

// catalogErrKinds names the catalog's refusals on the wire.
var catalogErrKinds = map[string]error{
	"bad": catalog.ErrBadCommand, "not_found": catalog.ErrNotFound, "exists": catalog.ErrExists,
	"stale": catalog.ErrStale, "corrupt": catalog.ErrCorrupt,
}

func (n *Node) serveCatalogApply(w http.ResponseWriter, r *http.Request) {
	var req catalogApplyRPC
	if err := decodeRPC(r, &req); err != nil {
		writeRPCError(w, fmt.Errorf("%w: %v", ErrBadRPC, err))
		return
	}
	rep := n.catalogReplica()
	if rep == nil {
		writeRPCError(w, fmt.Errorf("%w: node %s holds no replica of the catalog", ErrUnavailable, n.cfg.NodeID))
		return
	}
	if rep.raft.State() != raft.Leader {
		_, id := rep.raft.LeaderWithID()
		writeRPC(w, http.StatusOK, catalogApplyAnswer{LeaderID: string(id)})
		return
	}
	res, err := n.proposeCatalog(r.Context(), rep, req.Command)
	ans := catalogApplyAnswer{Result: res, Leader: true}
	if err != nil {
		for kind, e := range catalogErrKinds {
			if errors.Is(err, e) {
				ans.ErrKind, ans.ErrMsg = kind, err.Error()
			}
		}
		if ans.ErrKind == "" {
			writeRPCError(w, err)
			return
		}
	}
	writeRPC(w, http.StatusOK, ans)
}

// proposeCatalog applies cmd through the catalog's raft group, led by rep: stamped with this
// node's clock, committed, applied. Errors: the catalog's refusals; ErrNoCatalog when rep lost
// its leadership first; ErrIndeterminate when the command may have been applied.
func (n *Node) proposeCatalog(ctx context.Context, rep *catalogReplica, cmd catalog.Command) (catalog.Result, error) {
	cmd.Now = time.Now()
	b, err := msgpack.Marshal(cmd)
	if err != nil {
		return catalog.Result{}, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	f := rep.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrEnqueueTimeout) {
			return catalog.Result{}, fmt.Errorf("%w: %v", ErrNoCatalog, err)
		}
		return catalog.Result{}, fmt.Errorf("%w: catalog command: %v", ErrIndeterminate, err)
	}
	a := f.Response().(catalogApplied)
	return a.res, a.err
}

// applyCatalogCommand applies cmd through the catalog's leader, wherever it runs, retrying
// while the catalog elects one, until ctx ends; then waits until this node applied the
// generation the command made. Errors: the catalog's refusals; ErrNoCatalog; ErrIndeterminate
// when the command was sent and its answer lost.
func (n *Node) applyCatalogCommand(ctx context.Context, cmd catalog.Command) (catalog.Result, error) {
	res, err := n.sendCatalogCommand(ctx, cmd)
	if err != nil {
		return res, err
	}
	return res, n.waitGeneration(ctx, res.Generation)
}

// sendCatalogCommand is applyCatalogCommand without the wait for this node to apply it.
func (n *Node) sendCatalogCommand(ctx context.Context, cmd catalog.Command) (catalog.Result, error) {
	voters := n.catalogVoterIDs()
	target := ""
	backoff := n.cfg.RetryBackoff
	var last error = ErrNoCatalog
	for attempt := 0; ; attempt++ {
		if target == "" {
			target = voters[attempt%len(voters)]
		}
		var res catalog.Result
		var err error
		leader := true
		if rep := n.catalogReplica(); rep != nil && target == n.cfg.NodeID {
			if rep.raft.State() == raft.Leader {
				res, err = n.proposeCatalog(ctx, rep, cmd)
			} else {
				leader = false
				_, id := rep.raft.LeaderWithID()
				target = string(id)
			}
		} else {
			spec, ok := n.nodeSpec(target)
			if !ok {
				err = fmt.Errorf("%w: node %s", ErrUnknownNode, target)
			} else {
				var ans catalogApplyAnswer
				err = n.forward(ctx, spec, catalogApplyPath, catalogApplyRPC{Command: cmd}, into(&ans), true, 0)
				if err == nil {
					switch {
					case !ans.Leader:
						leader = false
						target = ans.LeaderID
					case ans.ErrKind != "":
						kind := catalogErrKinds[ans.ErrKind]
						if kind == nil {
							kind = catalog.ErrBadCommand
						}
						err = fmt.Errorf("%w (%s)", kind, ans.ErrMsg)
					default:
						res = ans.Result
					}
				}
			}
		}
		switch {
		case err == nil && leader:
			return res, nil
		case err != nil && (errors.Is(err, ErrIndeterminate) || catalogRefusal(err)):
			return catalog.Result{}, err
		case err != nil:
			last = err
			target = ""
		}
		select {
		case <-ctx.Done():
			return catalog.Result{}, fmt.Errorf("%w: %w (last: %v)", ErrNoCatalog, ctx.Err(), last)
		case <-n.stopWatch:
			return catalog.Result{}, ErrNodeClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, n.cfg.RetryBackoffMax)
	}
}

// catalogRefusal reports whether err is one of the catalog's refusals (final: retrying gives
// the same answer).
func catalogRefusal(err error) bool {
	for _, e := range catalogErrKinds {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// waitGeneration waits until this node applied catalog generation g or ctx ends.
func (n *Node) waitGeneration(ctx context.Context, g uint64) error {
	for {
		n.cat.mu.Lock()
		ch := n.cat.applied
		n.cat.mu.Unlock()
		if c := n.cat.cur.Load(); c != nil && c.Generation >= g {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: catalog generation %d not applied here yet: %w", ErrUnavailable, g, ctx.Err())
		}
	}
}

// applyCatalog makes this node serve catalog c when it is newer than what it serves: it opens
// the datastores it lacks, reopens those whose layout changed, drops those the catalog dropped
// and closes those it never held (a topology file's datastore missing from the catalog: its
// data stays), then stores c in the cache. A datastore that fails to open is logged and tried
// again at the next generation.
func (n *Node) applyCatalog(c *catalog.Catalog) {
	prev := n.cat.cur.Load()
	if prev != nil && c.Generation <= prev.Generation {
		return
	}
	if prev == nil && c.Generation == 0 {
		return // an empty catalog waiting for its import: keep the topology file's datastores
	}
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	if n.hostClosed {
		return
	}
	ctx, cancel := n.untilClose(context.Background())
	defer cancel()
	if prev == nil {
		n.warnTopologyIgnored(c)
	}
	old := n.datastores()
	next := map[string]*datastore{}
	for _, name := range c.Names() {
		cd := c.Datastores[name]
		spec, err := specOf(cd)
		if err != nil {
			n.log.Error("catalog: a datastore cannot be served", "datastore", name, "error", err)
			continue
		}
		od := old[name]
		if od != nil && od.created == cd.Created && sameLayout(od.spec, spec) {
			next[name] = od
			continue
		}
		if od != nil && od.created == cd.Created {
			if d := n.reshapeDatastore(od, spec); d != nil {
				next[name] = d // a split or merge: the partitions that stay keep their replicas
				continue
			}
		}
		if od != nil {
			if od.created != cd.Created {
				n.log.Warn("catalog: a datastore was dropped and created again: dropping the old one's data", "datastore", name)
				n.dropDatastore(ctx, od) // dropped and created again while this node did not look
			} else {
				n.log.Warn("catalog: a datastore's layout differs from the one served: reopening it", "datastore", name)
				n.closeDatastore(od)
			}
		}
		d, err := n.openDatastore(ctx, spec, cd.Created)
		if err != nil {
			n.log.Error("catalog: opening a datastore", "datastore", name, "error", err)
			n.closeDatastore(d)
			continue
		}
		next[name] = d
		n.log.Info("catalog: serving a datastore", "datastore", name, "generation", c.Generation, "created", cd.Created)
	}
	for name, od := range old {
		if _, ok := next[name]; ok {
			continue
		}
		if c.Datastores[name] != nil {
			continue // failed to reopen: closed above
		}
		if pd := prevDatastore(prev, name); pd != nil && pd.Created == od.created {
			n.dropDatastore(ctx, od)
			n.log.Warn("catalog: dropped a datastore", "datastore", name, "generation", c.Generation)
		} else {
			n.closeDatastore(od)
		}
	}
	n.setView(next)
	n.cat.cur.Store(c)
	n.openSplitReplicasLocked(ctx)
	n.cat.mu.Lock()
	close(n.cat.applied)
	n.cat.applied = make(chan struct{})
	n.cat.mu.Unlock()
	n.refreshGossip()
	if err := n.writeCatalogCache(c); err != nil {
		n.log.Error("catalog: writing the cache", "error", err)
	}
}

func prevDatastore(c *catalog.Catalog, name string) *catalog.Datastore {
	if c == nil {
		return nil
	}
	return c.Datastores[name]
}

// writeCatalogCache stores c in <DataDir>/catalog.cache (write, fsync, rename).
func (n *Node) writeCatalogCache(c *catalog.Catalog) error {
	b, err := catalog.Encode(c)
	if err != nil {
		return err
	}
	path := filepath.Join(n.cfg.DataDir, catalogCacheFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// closeDatastore closes every partition d serves here, their stores and d's storage clusters;
// the data stays.
func (n *Node) closeDatastore(d *datastore) {
	n.closeOrDrop(context.Background(), d, false)
}

// dropDatastore closes d and deletes what this node holds of it: each replica's raft log,
// snapshots and tables, and its entries in replicas.json (an async datastore's MySQL databases
// stay: they are the operator's).
func (n *Node) dropDatastore(ctx context.Context, d *datastore) {
	n.closeOrDrop(ctx, d, true)
}

func (n *Node) closeOrDrop(ctx context.Context, d *datastore, drop bool) {
	if d == nil {
		return
	}
	n.nodeLogMu.Lock()
	nodeLog := n.nodeLog
	n.nodeLogMu.Unlock()
	for _, r := range d.partitions {
		id := storage.PartitionID{Datastore: d.spec.Name, Partition: r.spec.ID}
		var ps *storage.PartitionStore
		if p := r.replica(); p != nil {
			ps = p.Store()
		}
		var errs []error
		errs = append(errs, r.closeReplica())
		if d.spec.Mode == topology.ModeRaft && drop && (ps != nil || n.hosted.state(id.Datastore, id.Partition) != hostedUnknown || hosts(r.spec, n.cfg.NodeID)) {
			errs = append(errs, os.RemoveAll(n.replicaDir(id.Datastore, id.Partition)), partition.DropLog(nodeLog, id))
			if ps == nil {
				var err error
				if ps, err = n.cfg.Store.Partition(ctx, id, r.spec.Shards()); err != nil {
					errs = append(errs, err)
				}
			}
			if ps != nil {
				errs = append(errs, resetStore(ctx, ps))
			}
			errs = append(errs, n.hosted.set(id.Datastore, id.Partition, hostedUnknown))
		}
		if ps != nil {
			errs = append(errs, ps.Close())
		}
		if err := errors.Join(errs...); err != nil {
			n.log.Warn("closing a partition", "datastore", id.Datastore, "partition", id.Partition, "drop", drop, "error", err)
		}
	}
	for _, c := range d.clusters {
		if err := c.Close(); err != nil {
			n.log.Warn("closing a storage cluster", "datastore", d.spec.Name, "cluster", c.Name(), "error", err)
		}
	}
}
