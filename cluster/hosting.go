package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/internal/atomicfile"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// Which partitions a node hosts is decided by raft, not by the topology: the topology's replica
// lists only bootstrap a new cluster. A node records, in <DataDir>/replicas.json, every replica
// it was told to host or to drop by an admin operation, so that a restart opens what it hosts
// now rather than what the topology said at the start.

// hostedState is a partition's entry in replicas.json.
type hostedState string

const (
	hostedUnknown hostedState = ""        // never changed at runtime: the topology decides
	hostedMember  hostedState = "member"  // hosts a replica (bootstrapped or added)
	hostedRemoved hostedState = "removed" // its replica was removed and its data dropped
)

// hostedFile is replicas.json: states by "<datastore>/<partition>".
type hostedFile struct {
	path string
	mu   sync.Mutex
	m    map[string]hostedState
}

func loadHosted(dataDir string) (*hostedFile, error) {
	h := &hostedFile{path: filepath.Join(dataDir, "replicas.json"), m: map[string]hostedState{}}
	b, err := os.ReadFile(h.path)
	if errors.Is(err, os.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := json.Unmarshal(b, &h.m); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", h.path, err)
	}
	return h, nil
}

func hostedKey(ds string, pid int) string { return fmt.Sprintf("%s/%d", ds, pid) }

func (h *hostedFile) state(ds string, pid int) hostedState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[hostedKey(ds, pid)]
}

// set records a state durably (write to a temporary file, fsync, rename).
func (h *hostedFile) set(ds string, pid int, s hostedState) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := hostedKey(ds, pid)
	if h.m[k] == s {
		return nil
	}
	if s == hostedUnknown {
		delete(h.m, k)
	} else {
		h.m[k] = s
	}
	b, err := json.MarshalIndent(h.m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := atomicfile.Write(h.path, b); err != nil {
		return fmt.Errorf("cluster: write %s: %w", h.path, err)
	}
	return nil
}

// local returns the partition this node serves, or nil when it hosts no replica of it.
func (r *route) local() Partition {
	if p := r.part.Load(); p != nil {
		return *p
	}
	return nil
}

// serve makes p the partition this node serves.
func (r *route) serve(p Partition) { r.part.Store(&p) }

// replica returns this node's raft replica of the partition, or nil when it serves none (it
// hosts no replica, or the partition is async).
func (r *route) replica() raftReplica {
	rp, _ := r.local().(raftReplica)
	return rp
}

// mustLocal returns the partition this node serves, or a not-leader error naming the leader
// and replicas this node last heard of, which a forwarding node follows.
func (r *route) mustLocal() (Partition, error) {
	if p := r.local(); p != nil {
		return p, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return nil, &notLeaderHint{NotLeaderError: &partition.NotLeaderError{LeaderID: r.hint}, replicas: slices.Clone(r.replicas)}
}

// notLeaderHint is a not-leader answer carrying the partition's replicas as the answering node
// knows them. errors.As finds the *partition.NotLeaderError inside.
type notLeaderHint struct {
	*partition.NotLeaderError
	replicas []string
}

func (e *notLeaderHint) Unwrap() error { return e.NotLeaderError }

// setReplicas records the partition's replica ids as learned from raft or from another node.
func (r *route) setReplicas(ids []string) {
	if len(ids) == 0 {
		return
	}
	ids = slices.Clone(ids)
	sort.Strings(ids)
	r.mu.Lock()
	r.replicas = ids
	r.mu.Unlock()
}

// knownReplicas returns the partition's replica ids as last learned.
func (r *route) knownReplicas() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.replicas)
}

// candidatesLocked returns the nodes to try, in order, for a partition this node does not host:
// the ones gossip says host it and are alive (leaders first), then the replicas last learned
// that gossip does not call dead. r.mu is held.
func (n *Node) candidatesLocked(r *route) []string {
	var out []string
	if n.gossip != nil {
		for _, m := range n.gossip.Hosting(r.ds.Name, r.spec.ID) {
			out = append(out, m.ID)
		}
	}
	for _, id := range r.replicas {
		if slices.Contains(out, id) {
			continue
		}
		if n.gossip != nil {
			if alive, known := n.gossip.Alive(id); known && !alive {
				continue
			}
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		out = slices.Clone(r.replicas) // every one is believed dead: try them anyway
	}
	return out
}

// bootstrapPeers returns the raft configuration a new cluster starts partition ps with: the
// topology's replicas.
func (n *Node) bootstrapPeers(ps *topology.PartitionSpec) []raft.Server {
	var peers []raft.Server
	for _, rid := range ps.Replicas {
		spec, _ := n.nodeSpec(rid)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(rid), Address: raft.ServerAddress(spec.RaftAddr)})
	}
	return peers
}

// replicaDir is where the replica of ds/pid keeps its raft log and snapshots.
func (n *Node) replicaDir(ds string, pid int) string {
	return filepath.Join(n.cfg.DataDir, "raft", fmt.Sprintf("%s-p%d", ds, pid))
}

// openReplica opens this node's replica of r, bootstrapping the raft group with peers when it
// has no raft state yet (nil peers: it waits to be added by the leader).
func (n *Node) openReplica(ctx context.Context, ds *topology.DatastoreSpec, r *route, peers []raft.Server) error {
	return n.openReplicaTimed(ctx, ds, r, peers, nil)
}

// openTimes holds how long the steps of opening a replica took (openReplicaTimed), for the
// log line of a split's new partition: its store, the split's base in its raft directory, and
// its raft group.
type openTimes struct {
	store, base, raft time.Duration
}

// openReplicaTimed is openReplica; when t is not nil it records there how long its steps took.
func (n *Node) openReplicaTimed(ctx context.Context, ds *topology.DatastoreSpec, r *route, peers []raft.Server, t *openTimes) error {
	if t == nil {
		t = &openTimes{}
	}
	step := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d, step = now.Sub(step), now
	}
	id := storage.PartitionID{Datastore: ds.Name, Partition: r.spec.ID}
	name := fmt.Sprintf("%s/%d", ds.Name, r.spec.ID)
	group := groupName(ds.Name, r.spec.ID, r.created)
	// The store opens with the range the partition was created with: its state machine
	// narrows it to the range it holds now (a split's, from its own state).
	origin := r.spec.OriginShards()
	ps, err := n.cfg.Store.Partition(ctx, id, origin)
	if err != nil {
		return fmt.Errorf("cluster: partition %s: %w", name, err)
	}
	lap(&t.store)
	layer, err := n.mux.RaftLayer(group)
	if err != nil {
		_ = ps.Close()
		return fmt.Errorf("cluster: partition %s: %w", name, err)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 4,
		Timeout: 10 * time.Second,
		// 1: no pipelined replication. hashicorp/raft's pipeline (the default, 2 RPCs in
		// flight) can deadlock: after a follower answers Success=false, pipelineDecode exits
		// while pipelineReplicate parks one more send on the pipeline's unbuffered channel,
		// and decodeResponses parks on the done channel nobody reads. The follower then gets
		// heartbeats but no entries, and raft's Shutdown waits forever (seen here as an
		// Unhost and a node Close that never returned; the same analysis is in
		// grafana/pyroscope pull request 5518). Synchronous AppendEntries of up to
		// MaxAppendEntries entries each cost little (hashicorp/raft pull request 541).
		MaxRPCsInFlight: 1,
		Logger:          hclogslog.New(n.log.With("partition", name), "raft-net"),
	})
	dir := n.replicaDir(ds.Name, r.spec.ID)
	if err := n.checkSplitPrep(ctx, id, dir, ps); err != nil {
		_ = trans.Close()
		_ = ps.Close()
		return fmt.Errorf("cluster: partition %s: %w", name, err)
	}
	if !partition.HasLog(dir) && len(peers) == 0 {
		// A partition made by a split starts from the split's copy in its store, when this
		// replica applied the split; any other replica joining an existing group starts empty:
		// whatever its store holds (from an earlier membership) would make its state machine
		// skip the entries the leader sends.
		base := false
		if r.spec.Parent != nil {
			if base, err = partition.WriteSplitBase(ctx, dir, ps, trans, n.log.With("partition", name)); err != nil {
				_ = trans.Close()
				_ = ps.Close()
				return fmt.Errorf("cluster: partition %s: the split's base: %w", name, err)
			}
		}
		if !base {
			if err := resetStore(ctx, ps); err != nil {
				_ = trans.Close()
				_ = ps.Close()
				return fmt.Errorf("cluster: partition %s: %w", name, err)
			}
		}
	}
	lap(&t.base)
	pc := n.cfg.Partition
	pc.ID = id
	pc.Shards = origin
	pc.QuiesceAfter = n.quiesceAfter()
	pc.QuiesceDown = n.nodeDown
	if ds.Mode == topology.ModeRaft {
		pc.LeaderReadIndex = n.leaderReadIndex(ds.Name, r.spec.ID)
		pc.SplitStore = n.splitStore(ds.Name)
		pc.OnSplitStart = func(e fsm.SplitEvent) { n.prepareSplitReplica(ds.Name, e) }
		pc.OnSplit = func(fsm.SplitEvent) { n.kickSplits() }
		pc.MergeSource = n.mergeSource(ds.Name)
		pc.OnMerge = func(e fsm.MergeEvent) { n.retireMerged(ds.Name, e.Right) }
	}
	pc.NodeID = n.cfg.NodeID
	pc.Dir = dir
	pc.Peers = peers
	pc.Transport = trans
	pc.Store = ps
	pc.Logger = n.log
	pc.OnFatal = n.cfg.OnFatal
	if pc.NodeLog == nil && (pc.LogStore == partition.LogStoreNode || partition.InNodeLog(dir)) {
		if pc.NodeLog, err = n.sharedLog(); err != nil {
			_ = trans.Close()
			return fmt.Errorf("cluster: partition %s: %w", name, err)
		}
	}
	p, err := partition.Open(ctx, pc)
	if err != nil {
		_ = trans.Close()
		return fmt.Errorf("cluster: %w", err)
	}
	lap(&t.raft)
	r.mu.Lock()
	r.trans = trans
	r.mu.Unlock()
	r.serve(p)
	n.refreshGossip()
	return nil
}

// sharedLog returns the node's shared raft log store ("<DataDir>/raftlog"), opening it on first
// use; Close closes it after the replicas.
func (n *Node) sharedLog() (*raftlog.Store, error) {
	n.nodeLogMu.Lock()
	defer n.nodeLogMu.Unlock()
	if n.nodeLog == nil {
		o := raftlog.DefaultOptions()
		o.Logger = n.log
		s, err := raftlog.Open(filepath.Join(n.cfg.DataDir, "raftlog"), o)
		if err != nil {
			return nil, err
		}
		n.nodeLog = s
	}
	return n.nodeLog, nil
}

// resetStore empties a partition's tables (cells, KV rows, index tables) and its applied state.
func resetStore(ctx context.Context, ps *storage.PartitionStore) error {
	return ps.Restore(ctx, storage.AppliedState{}, func() (storage.RestoreRecord, error) { return storage.RestoreRecord{}, io.EOF }, nil, nil)
}

// closeReplica stops the partition this node serves of r, if any (its data stays). Idempotent.
func (r *route) closeReplica() error {
	p := r.part.Swap(nil)
	r.mu.Lock()
	trans := r.trans
	r.trans = nil
	r.mu.Unlock()
	var errs []error
	if p != nil {
		errs = append(errs, (*p).Close())
	}
	if trans != nil {
		errs = append(errs, trans.Close())
	}
	return errors.Join(errs...)
}

// Host makes this node host a replica of partition pid of ds that waits to be added to the raft
// group by its leader (AddVoter does both). It does nothing if the node already hosts one.
// Raft mode only. Errors: ErrUnknownDatastore, ErrBadShard, ErrAsyncDatastore, ErrNodeClosed, or opening the
// replica failed.
func (n *Node) Host(ctx context.Context, ds string, pid int) error {
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	if n.hostClosed {
		return ErrNodeClosed
	}
	ctx, cancel := n.untilClose(ctx)
	defer cancel()
	r, err := n.raftRoute(ds, pid)
	if err != nil {
		return err
	}
	if r.local() != nil {
		return nil
	}
	if err := n.hosted.set(ds, pid, hostedMember); err != nil {
		return err
	}
	if err := n.openReplica(ctx, r.ds, r, nil); err != nil {
		return err
	}
	n.log.Info("hosting a new replica", "datastore", ds, "partition", pid)
	return nil
}

// Unhost stops this node's replica of partition pid of ds and deletes its data (raft log,
// snapshots and tables), once the raft group no longer counts this node (RemoveVoter does
// both). It first asks the partition's leader for the configuration it committed (never this
// node's own replica, which may still list itself after its removal) and refuses with
// ErrStillVoter, deleting nothing, when this node is a voter or nonvoter of it; when no leader
// answers within 15s it refuses with ErrUnavailable (retrying is safe). Raft mode only.
// Idempotent. Other errors: ErrUnknownDatastore, ErrBadShard, ErrAsyncDatastore,
// ErrNodeClosed. It holds the node's hosting lock while it asks: a Host waits.
func (n *Node) Unhost(ctx context.Context, ds string, pid int) error {
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	if n.hostClosed {
		return ErrNodeClosed
	}
	ctx, cancel := n.untilClose(ctx)
	defer cancel()
	r, err := n.raftRoute(ds, pid)
	if err != nil {
		return err
	}
	if err := n.checkUnhost(ctx, r); err != nil {
		return err
	}
	if err := n.hosted.set(ds, pid, hostedRemoved); err != nil {
		return err
	}
	p := r.replica()
	var ps *storage.PartitionStore
	if p != nil {
		ps = p.Store()
	}
	if err := r.closeReplica(); err != nil {
		n.log.Warn("closing a removed replica", "datastore", ds, "partition", pid, "error", err)
	}
	if err := n.deleteReplicaData(ctx, storage.PartitionID{Datastore: ds, Partition: pid}, ps); err != nil {
		return err
	}
	n.refreshGossip()
	n.log.Info("dropped a removed replica", "datastore", ds, "partition", pid)
	return nil
}

// deleteReplicaData deletes what this node holds of a replica that is closed: its raft log
// and snapshots, and its tables and applied state, through ps, its store (closed after), or,
// when ps is nil (a merged partition, or one not open here), storage.Store.RemovePartition,
// which leaves MySQL's shard databases to the partitions that hold their shards.
func (n *Node) deleteReplicaData(ctx context.Context, id storage.PartitionID, ps *storage.PartitionStore) error {
	n.nodeLogMu.Lock()
	nodeLog := n.nodeLog
	n.nodeLogMu.Unlock()
	if ps == nil { // a merged partition: its shards are the left one's now
		// The log first, refused while its group is open, then the store, refused while
		// open: a replica still open here keeps all of its data, and the call is repeated.
		if err := partition.DropLog(nodeLog, id); err != nil {
			return fmt.Errorf("cluster: drop the replica's raft log: %w", err)
		}
		if err := n.cfg.Store.RemovePartition(ctx, id); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		if err := os.RemoveAll(n.replicaDir(id.Datastore, id.Partition)); err != nil {
			return fmt.Errorf("cluster: remove replica data: %w", err)
		}
		return nil
	}
	if err := os.RemoveAll(n.replicaDir(id.Datastore, id.Partition)); err != nil {
		return fmt.Errorf("cluster: remove replica data: %w", err)
	}
	if err := partition.DropLog(nodeLog, id); err != nil {
		return fmt.Errorf("cluster: drop the replica's raft log: %w", err)
	}
	if err := resetStore(ctx, ps); err != nil {
		_ = ps.Close()
		return fmt.Errorf("cluster: drop the replica's tables: %w", err)
	}
	if err := ps.Close(); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// ErrNodeClosed: Host or Unhost on a node that is closing or closed.
var ErrNodeClosed = fmt.Errorf("%w: node closed", ErrUnavailable)

// raftRoute returns the route of partition pid of raft datastore ds. An async datastore has no
// replicas to host or reconfigure (its topology names storage clusters): ErrAsyncDatastore.
func (n *Node) raftRoute(ds string, pid int) (*route, error) {
	r, err := n.localRoute(ds, pid)
	if err != nil {
		return nil, err
	}
	if r.ds.Mode == topology.ModeAsync {
		return nil, fmt.Errorf("%w: %s is async", ErrAsyncDatastore, ds)
	}
	return r, nil
}

// watchReplicas keeps every route's replica list and the node directory up to date with the
// local replicas' raft configurations, and gossips leadership changes. It runs until stop.
func (n *Node) watchReplicas(stop <-chan struct{}) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	leading := map[*route]bool{}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		changed := false
		n.reconcileSplits()
		n.reconcileMerges()
		for _, d := range n.datastores() {
			for _, r := range d.partitions {
				p := r.replica()
				if p == nil {
					if leading[r] {
						delete(leading, r)
						changed = true
					}
					continue
				}
				if f := p.Raft().GetConfiguration(); f.Error() == nil {
					servers := f.Configuration().Servers
					ids := make([]string, 0, len(servers))
					for _, s := range servers {
						ids = append(ids, string(s.ID))
						n.learnAddr(string(s.ID), string(s.Address))
					}
					r.setReplicas(ids)
				}
				if l := p.IsLeader(); l != leading[r] {
					leading[r] = l
					changed = true
				}
			}
		}
		if changed {
			n.refreshGossip()
		}
	}
}

// HandOffLeadership transfers the leadership of every partition this node leads to another
// voter (hashicorp/raft's LeadershipTransfer, which picks the most up-to-date one) and waits
// until each transfer is done or ctx ends. A node about to stop calls it so that clients see a
// leader change of a few milliseconds instead of an election timeout. Best effort: a partition
// whose transfer fails keeps its leader until the node stops.
func (n *Node) HandOffLeadership(ctx context.Context) {
	var wg sync.WaitGroup
	for _, d := range n.datastores() {
		for _, r := range d.partitions {
			p := r.replica()
			if p == nil || !p.IsLeader() {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				done := make(chan error, 1)
				go func() { done <- p.Raft().LeadershipTransfer().Error() }()
				select {
				case err := <-done:
					if err != nil {
						n.log.Warn("leadership hand-off failed", "datastore", d.spec.Name, "partition", r.spec.ID, "error", err)
					}
				case <-ctx.Done():
				}
			}()
		}
	}
	wg.Wait()
}
