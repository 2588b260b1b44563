package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/partition"
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

// catalogVoterIDs returns the ids of the catalog's voters: those the catalog records
// (catalog.Catalog.Voters, once they were moved: catalogvoters.go), else the topology file's
// first catalogVoters nodes.
func (n *Node) catalogVoterIDs() []string {
	if c := n.cat.cur.Load(); c != nil && len(c.Voters) > 0 {
		return slices.Clone(c.Voters)
	}
	return n.topologyVoterIDs()
}

// votersMoved reports whether the catalog this node serves records its voters (they were moved
// off the topology file's first nodes).
func (n *Node) votersMoved() bool {
	c := n.cat.cur.Load()
	return c != nil && len(c.Voters) > 0
}

// topologyVoterIDs returns the topology file's first catalogVoters nodes: the catalog's voters
// as the cluster started.
func (n *Node) topologyVoterIDs() []string {
	var ids []string
	for _, s := range n.cfg.Topology.Nodes {
		if len(ids) == catalogVoters {
			break
		}
		ids = append(ids, s.ID)
	}
	return ids
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
	// It never quiesces (quiesce.go): one group, and its followers keep their own failure
	// detection rather than wait for gossip.
	rc.QuiesceTimeout = 0
	rc.BatchApplyCh = false
	rc.SnapshotThreshold, rc.TrailingLogs = 256, 256
	fsm := newCatalogFSM()
	has, err := raft.HasExistingState(logs, logs, snaps)
	if err != nil {
		_ = trans.Close()
		_ = logs.Close()
		return nil, err
	}
	if !has && !n.votersMoved() {
		// A cluster's first start: its voters bootstrap the group. A voter made by a move
		// (catalogvoters.go) starts empty instead, and the catalog's leader adds it.
		var servers []raft.Server
		for _, id := range n.topologyVoterIDs() {
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
	return rep.close()
}

// close shuts the replica's raft down and closes its transport and log store.
func (r *catalogReplica) close() error {
	return errors.Join(r.raft.Shutdown().Error(), r.trans.Close(), r.logs.Close())
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
			if n.reconcileCatalogReplica() {
				continue // this node's vote moved (catalogvoters.go)
			}
			if cat.Generation == 0 && len(n.cfg.Topology.Datastores) > 0 && !n.votersMoved() {
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
			case <-time.After(catalogLeaderlessCheck):
				if _, id := rep.raft.LeaderWithID(); id == "" {
					// A voter whose group has no leader asks the other nodes: one that was
					// removed from the group while it was away learns it so.
					n.pollCatalogOnce()
				}
			}
			continue
		}
		sources := n.catalogSources()
		id := sources[next%len(sources)]
		next++
		cat, err := n.fetchCatalog(id, catalogPollWait)
		if err != nil {
			n.log.Debug("catalog poll failed", "node", id, "error", err)
			backoff = min(max(2*backoff, 100*time.Millisecond), 2*time.Second)
			continue
		}
		backoff = 0
		if slices.Contains(n.catalogVoterIDs(), id) {
			next-- // keep asking the voter that answered
		} else {
			next = 0 // a node that follows: the voters first again
		}
		n.applyCatalog(cat)
		n.reconcileCatalogReplica()
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
