package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Admin operations on raft membership. Every change goes through the partition's raft leader
// (hashicorp/raft's AddNonvoter, AddVoter, RemoveServer and LeadershipTransferToServer); gossip
// is only used to pick nodes and never changes a raft configuration by itself. A replica is
// added as a nonvoter, promoted once it has applied everything committed when it was added,
// and a replica is dropped (its data deleted) only after the configuration without it is
// committed.

const (
	rpcAdminRaftPath   = "/internal/v1/admin/raft"
	rpcAdminHostPath   = "/internal/v1/admin/host"
	rpcAdminStatusPath = "/internal/v1/admin/status"
)

// Errors of the admin operations.
var (
	// ErrUnknownNode: no address is known for a node id (not in the topology, not gossiping,
	// never seen in a raft configuration).
	ErrUnknownNode = errors.New("cluster: unknown node")
	// ErrRefused: the change would leave a partition without a voter, or names a node that
	// cannot take it.
	ErrRefused = errors.New("cluster: admin operation refused")
	// ErrStillVoter: Unhost of a replica whose node is still a member (voter or nonvoter) of
	// the configuration its partition's leader committed. Nothing was deleted; remove the
	// node first (RemoveVoter does both). The node RPC answers it with 409 Conflict.
	ErrStillVoter = errors.New("cluster: replica is still a member of its partition")
)

// The admin report types are the API's (package wire), so that a report has one definition,
// JSON tags included.
type (
	// RaftServer is one server of a partition's raft configuration (wire.RaftServer).
	RaftServer = wire.RaftServer
	// PartitionConfig is a partition's raft configuration as its leader sees it
	// (wire.PartitionConfig).
	PartitionConfig = wire.PartitionConfig
	// ReplicaLag is one replica of a partition as seen from its leader and from the replica's
	// node (wire.ReplicaLag).
	ReplicaLag = wire.ReplicaLag
	// PartitionReport is a partition's configuration and each replica's progress
	// (wire.PartitionReport).
	PartitionReport = wire.PartitionReport
)

// serverOf returns the server node of configuration c, if it has one.
func serverOf(c PartitionConfig, node string) (RaftServer, bool) {
	for _, s := range c.Servers {
		if s.Node == node {
			return s, true
		}
	}
	return RaftServer{}, false
}

// Admin raft operations (adminRaftRPC.Op).
const (
	raftOpConfig = "config"
	// raftOpCommittedConfig is "config" followed by a barrier on the leader: the answer is a
	// configuration the partition has committed (see committedConfig).
	raftOpCommittedConfig = "committed_config"
	raftOpAddNonvoter     = "add_nonvoter"
	raftOpAddVoter        = "add_voter"
	raftOpRemove          = "remove"
	raftOpTransfer        = "transfer"
)

type adminRaftRPC struct {
	Datastore     string
	Partition     int
	Op            string // raftOpConfig, raftOpCommittedConfig, raftOpAddNonvoter, raftOpAddVoter, raftOpRemove, raftOpTransfer
	Node          string
	Addr          string
	TimeoutMicros int64
}

type adminHostRPC struct {
	Datastore string
	Partition int
	Op        string // "host" or "unhost"
}

type adminStatusRPC struct{}

type adminStatusResponse struct {
	Replicas []ReplicaStatus
}

// adminRPCRoutes registers the node-to-node endpoints of the admin operations.
func (n *Node) adminRPCRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+rpcAdminRaftPath, func(w http.ResponseWriter, r *http.Request) {
		var req adminRaftRPC
		if err := decodeRPC(r, &req); err != nil {
			http.Error(w, "bad admin request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := n.validateAdminRaft(&req); err != nil {
			refuseRPC(w, "admin", err)
			return
		}
		ctx, cancel := rpcContext(r, req.TimeoutMicros)
		defer cancel()
		cfg, err := n.raftOpLocal(ctx, req)
		if err != nil {
			writeRPCError(w, err)
			return
		}
		writeRPC(w, http.StatusOK, cfg)
	})
	mux.HandleFunc("POST "+rpcAdminHostPath, func(w http.ResponseWriter, r *http.Request) {
		var req adminHostRPC
		if err := decodeRPC(r, &req); err != nil {
			http.Error(w, "bad admin request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := n.validateAdminHost(&req); err != nil {
			refuseRPC(w, "admin", err)
			return
		}
		var err error
		if req.Op == "host" {
			err = n.Host(r.Context(), req.Datastore, req.Partition)
		} else {
			err = n.Unhost(r.Context(), req.Datastore, req.Partition)
		}
		if err != nil {
			writeRPCError(w, err)
			return
		}
		writeRPC(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("POST "+rpcAdminStatusPath, func(w http.ResponseWriter, r *http.Request) {
		var req adminStatusRPC
		if err := decodeRPC(r, &req); err != nil {
			http.Error(w, "bad admin request: "+err.Error(), http.StatusBadRequest)
			return
		}
		writeRPC(w, http.StatusOK, adminStatusResponse{Replicas: n.localReplicas()})
	})
}

// localReplicas returns the status of the replicas this node hosts.
func (n *Node) localReplicas() []ReplicaStatus {
	var out []ReplicaStatus
	for _, rs := range n.Replicas() {
		if rs.Local {
			out = append(out, rs)
		}
	}
	return out
}

// raftOpLocal runs one membership operation on this node's replica, which must lead, and
// returns the configuration after it.
func (n *Node) raftOpLocal(ctx context.Context, req adminRaftRPC) (PartitionConfig, error) {
	r, err := n.raftRoute(req.Datastore, req.Partition)
	if err != nil {
		return PartitionConfig{}, err
	}
	if _, err := r.mustLocal(); err != nil {
		return PartitionConfig{}, err
	}
	p := r.replica()
	if p == nil {
		return PartitionConfig{}, fmt.Errorf("%w: %s/%d is not served by a raft replica", ErrAsyncDatastore, req.Datastore, req.Partition)
	}
	rf := p.Raft()
	if !p.IsLeader() {
		return PartitionConfig{}, p.NotLeader()
	}
	timeout := 30 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	id, addr := raft.ServerID(req.Node), raft.ServerAddress(req.Addr)
	var f raft.Future
	cf := rf.GetConfiguration()
	switch req.Op {
	case raftOpConfig:
	case raftOpCommittedConfig:
		// A barrier commits every entry before it, the configuration just read included:
		// once it returns, that configuration is committed (hashicorp/raft has one
		// configuration change in flight at most, and GetConfiguration gives the latest).
		f = rf.Barrier(timeout)
	case raftOpAddNonvoter:
		f = rf.AddNonvoter(id, addr, 0, timeout)
	case raftOpAddVoter:
		f = rf.AddVoter(id, addr, 0, timeout)
	case raftOpRemove:
		f = rf.RemoveServer(id, 0, timeout)
	case raftOpTransfer:
		switch {
		case n.dropTransfers.Load() > 0 && n.dropTransfers.Add(-1) >= 0:
			// Answered as done, and nothing done (tests: DropTransfers).
		case req.Node == "":
			f = rf.LeadershipTransfer()
		default:
			f = rf.LeadershipTransferToServer(id, addr)
		}
	default:
		return PartitionConfig{}, fmt.Errorf("%w: unknown op %q", ErrRefused, req.Op)
	}
	if f != nil {
		if err := f.Error(); err != nil {
			switch {
			case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
				return PartitionConfig{}, p.NotLeader()
			case errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout):
				return PartitionConfig{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			return PartitionConfig{}, fmt.Errorf("cluster: %s %s on %s/%d: %w", req.Op, req.Node, req.Datastore, req.Partition, err)
		}
	}
	if req.Op != raftOpCommittedConfig {
		cf = rf.GetConfiguration()
	}
	if err := cf.Error(); err != nil {
		return PartitionConfig{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	leader, _ := p.Leader()
	out := PartitionConfig{Datastore: req.Datastore, Partition: req.Partition, Leader: leader, Term: rf.CurrentTerm(),
		CommitIndex: rf.CommitIndex(), LastIndex: rf.LastIndex()}
	learners := n.recordedLearners(req.Datastore, req.Partition)
	for _, s := range cf.Configuration().Servers {
		suf := "voter"
		if s.Suffrage != raft.Voter {
			suf = "nonvoter"
		}
		out.Servers = append(out.Servers, RaftServer{Node: string(s.ID), Addr: string(s.Address), Suffrage: suf, Zone: n.zoneOf(string(s.ID)),
			Learner: suf == "nonvoter" && slices.Contains(learners, string(s.ID))})
		n.learnAddr(string(s.ID), string(s.Address))
	}
	return out, nil
}

// raftOp runs one membership operation on the partition's leader, wherever it is, following
// leader changes until ctx ends.
func (n *Node) raftOp(ctx context.Context, req adminRaftRPC) (PartitionConfig, error) {
	r, err := n.raftRoute(req.Datastore, req.Partition)
	if err != nil {
		return PartitionConfig{}, err
	}
	var out PartitionConfig
	err = n.callLeader(ctx, r, false,
		func(ctx context.Context) (err error) {
			out, err = n.raftOpLocal(ctx, req)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) error {
			req.TimeoutMicros = remainingMicros(ctx, 60*time.Second)
			return n.forward(ctx, target, rpcAdminRaftPath, &req, into(&out), false, 60*time.Second)
		})
	if err == nil {
		ids := make([]string, 0, len(out.Servers))
		for _, s := range out.Servers {
			ids = append(ids, s.Node)
		}
		r.setReplicas(ids)
		if out.Leader != "" && r.local() == nil {
			r.setHint(out.Leader)
		}
	}
	return out, err
}

// PartitionConfig returns partition pid of raft datastore ds's configuration, from its leader.
// Errors: ErrUnknownDatastore, ErrBadShard, ErrAsyncDatastore, ErrUnavailable.
func (n *Node) PartitionConfig(ctx context.Context, ds string, pid int) (PartitionConfig, error) {
	return n.raftOp(ctx, adminRaftRPC{Datastore: ds, Partition: pid, Op: raftOpConfig})
}

// unhostCheckTimeout bounds Unhost's question to the partition's leader.
const unhostCheckTimeout = 15 * time.Second

// committedConfig returns the configuration of r's raft partition that its leader has
// committed (raftOpCommittedConfig: the leader reads its configuration, then commits a barrier).
// It never trusts this node's own replica, which may still list this node after the leader
// removed it: it asks the leader that replica names, the last hint, then the partition's
// replicas as last learned, the nodes gossip says host it, the topology's replicas and every
// other node of the topology, following not-leader answers, round after round until one
// leader answers or ctx ends (ErrUnavailable).
func (n *Node) committedConfig(ctx context.Context, r *route) (PartitionConfig, error) {
	req := adminRaftRPC{Datastore: r.ds.Name, Partition: r.spec.ID, Op: raftOpCommittedConfig}
	backoff := n.cfg.RetryBackoff
	lastErr := errors.New("no node to ask")
	for {
		if p := r.replica(); p != nil && p.IsLeader() {
			cfg, err := n.raftOpLocal(ctx, req)
			if err == nil {
				return cfg, nil
			}
			lastErr = err
		}
		asked := map[string]bool{n.self.ID: true}
		queue := n.configCandidates(r)
		for len(queue) > 0 && ctx.Err() == nil {
			id := queue[0]
			queue = queue[1:]
			if asked[id] {
				continue
			}
			asked[id] = true
			spec, ok := n.nodeSpec(id)
			if !ok {
				continue
			}
			var out PartitionConfig
			req.TimeoutMicros = remainingMicros(ctx, n.cfg.ForwardTimeout)
			err := n.forward(ctx, spec, rpcAdminRaftPath, &req, into(&out), false, 0)
			if err == nil {
				return out, nil
			}
			lastErr = fmt.Errorf("%s: %w", id, err)
			var nl *partition.NotLeaderError
			if errors.As(err, &nl) {
				if nl.LeaderID != "" {
					queue = append([]string{nl.LeaderID}, queue...)
				}
				var h *notLeaderHint
				if errors.As(err, &h) {
					queue = append(queue, h.replicas...)
				}
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return PartitionConfig{}, fmt.Errorf("%w: no leader of %s/%d answered with its committed configuration: %v (%w)",
				ErrUnavailable, r.ds.Name, r.spec.ID, lastErr, ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, n.cfg.RetryBackoffMax)
	}
}

// configCandidates lists the nodes committedConfig asks, in order (duplicates included).
func (n *Node) configCandidates(r *route) []string {
	var out []string
	if p := r.local(); p != nil {
		if id, _ := p.Leader(); id != "" {
			out = append(out, id)
		}
	}
	r.mu.Lock()
	if r.hint != "" {
		out = append(out, r.hint)
	}
	out = append(out, n.candidatesLocked(r)...)
	r.mu.Unlock()
	out = append(out, r.spec.Replicas...)
	for _, ns := range n.cfg.Topology.Nodes {
		out = append(out, ns.ID)
	}
	return out
}

// checkUnhost returns nil when this node is not a member (voter or nonvoter) of the
// configuration r's partition's leader committed: ErrStillVoter when it is, ErrUnavailable when
// no leader answered within unhostCheckTimeout.
func (n *Node) checkUnhost(ctx context.Context, r *route) error {
	ctx, cancel := context.WithTimeout(ctx, unhostCheckTimeout)
	defer cancel()
	cfg, err := n.committedConfig(ctx, r)
	if err != nil {
		return fmt.Errorf("cluster: unhost %s/%d refused, its members are unknown: %w", r.ds.Name, r.spec.ID, err)
	}
	if s, ok := serverOf(cfg, n.self.ID); ok {
		return fmt.Errorf("%w: %s is a %s of %s/%d (leader %s, commit index %d): remove it first",
			ErrStillVoter, n.self.ID, s.Suffrage, r.ds.Name, r.spec.ID, cfg.Leader, cfg.CommitIndex)
	}
	return nil
}

// onNode runs a hosting change on node (this one or another, by RPC).
func (n *Node) onNode(ctx context.Context, node topology.NodeSpec, ds string, pid int, op string) error {
	if node.ID == n.self.ID {
		if op == "host" {
			return n.Host(ctx, ds, pid)
		}
		return n.Unhost(ctx, ds, pid)
	}
	var out struct{}
	return n.forward(ctx, node, rpcAdminHostPath, &adminHostRPC{Datastore: ds, Partition: pid, Op: op}, into(&out), false, 60*time.Second)
}

// replicaStatusOn returns node's status of its replica of ds/pid (found false when it hosts
// none).
func (n *Node) replicaStatusOn(ctx context.Context, node topology.NodeSpec, ds string, pid int) (st ReplicaStatus, found bool, err error) {
	var reps []ReplicaStatus
	if node.ID == n.self.ID {
		reps = n.localReplicas()
	} else {
		var resp adminStatusResponse
		if err := n.forward(ctx, node, rpcAdminStatusPath, &adminStatusRPC{}, into(&resp), false, 0); err != nil {
			return ReplicaStatus{}, false, err
		}
		reps = resp.Replicas
	}
	for _, rs := range reps {
		if rs.Datastore == ds && rs.Partition == pid {
			return rs, true, nil
		}
	}
	return ReplicaStatus{}, false, nil
}

// AddVoter adds node as a voter of partition pid of raft datastore ds: the node opens an empty
// replica, the leader adds it as a nonvoter and sends it the log (or a snapshot), and once it
// has applied everything committed when it was added, the leader promotes it to voter. It
// blocks until then or until ctx ends (the nonvoter then stays; calling AddVoter again resumes).
// Adding a voter already there does nothing. The catalog's replica list of the partition then
// follows the new configuration, soon after and in the background (recordReplicasLater). Errors: ErrUnknownNode, ErrAsyncDatastore, ErrUnavailable, ctx's error.
func (n *Node) AddVoter(ctx context.Context, ds string, pid int, node string) error {
	if err := n.addVoter(ctx, ds, pid, node); err != nil {
		return err
	}
	n.recordReplicasLater(ds, pid)
	return nil
}

func (n *Node) addVoter(ctx context.Context, ds string, pid int, node string) error {
	spec, ok := n.nodeSpec(node)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownNode, node)
	}
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return err
	}
	s, present := serverOf(cfg, node)
	if present && s.Suffrage == wire.SuffrageVoter {
		return nil
	}
	if present {
		// A nonvoter already (an interrupted add): make sure its node hosts the replica.
		if err := n.onNode(ctx, spec, ds, pid, "host"); err != nil {
			return fmt.Errorf("cluster: open a replica of %s/%d on %s: %w", ds, pid, node, err)
		}
	} else if cfg, err = n.addNonvoter(ctx, ds, pid, spec); err != nil {
		return err
	}
	target := cfg.CommitIndex
	start := time.Now()
	for {
		st, found, err := n.replicaStatusOn(ctx, spec, ds, pid)
		if err == nil && found && st.AppliedIndex >= target {
			break
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("cluster: %s did not catch up on %s/%d (applied %d of %d): %w", node, ds, pid, st.AppliedIndex, target, ctx.Err())
		case <-t.C:
		}
	}
	n.log.Info("new replica caught up", "datastore", ds, "partition", pid, "node", node, "index", target, "took", time.Since(start))
	_, err = n.raftOp(ctx, adminRaftRPC{Datastore: ds, Partition: pid, Op: raftOpAddVoter, Node: node, Addr: spec.RaftAddr})
	return err
}

// addNonvoter has node spec open a replica of partition pid of raft datastore ds and adds it to
// the partition's raft configuration as a nonvoter, returning the configuration once the
// change is committed; raft's leader then brings the replica up to date in the background.
// Errors: opening the replica's (wrapped, naming the node), raftOp's.
func (n *Node) addNonvoter(ctx context.Context, ds string, pid int, spec topology.NodeSpec) (PartitionConfig, error) {
	if err := n.onNode(ctx, spec, ds, pid, "host"); err != nil {
		return PartitionConfig{}, fmt.Errorf("cluster: open a replica of %s/%d on %s: %w", ds, pid, spec.ID, err)
	}
	return n.raftOp(ctx, adminRaftRPC{Datastore: ds, Partition: pid, Op: raftOpAddNonvoter, Node: spec.ID, Addr: spec.RaftAddr})
}

// RemoveVoter removes node from partition pid of raft datastore ds (voter or nonvoter): if it
// leads, leadership moves to another voter first; once the configuration without it is
// committed, the node drops its replica's data. Removing the last voter is refused
// (ErrRefused). Removing a node that holds no replica only makes sure its data is gone. If the
// node cannot be reached to drop its data, the removal still stands (a warning is logged and
// the node keeps an unused copy until it is re-added, which replaces it). The catalog's replica
// list follows, as after AddVoter.
func (n *Node) RemoveVoter(ctx context.Context, ds string, pid int, node string) error {
	if err := n.removeVoter(ctx, ds, pid, node); err != nil {
		return err
	}
	n.recordReplicasLater(ds, pid)
	return nil
}

func (n *Node) removeVoter(ctx context.Context, ds string, pid int, node string) error {
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return err
	}
	s, present := serverOf(cfg, node)
	if present {
		voters := cfg.Voters()
		if s.Suffrage == wire.SuffrageVoter && len(voters) == 1 {
			return fmt.Errorf("%w: %s is the last voter of %s/%d", ErrRefused, node, ds, pid)
		}
		if cfg.Leader == node {
			if _, err := n.TransferLeadership(ctx, ds, pid, ""); err != nil {
				return err
			}
		}
		if _, err := n.raftOp(ctx, adminRaftRPC{Datastore: ds, Partition: pid, Op: raftOpRemove, Node: node}); err != nil {
			return err
		}
	}
	spec, ok := n.nodeSpec(node)
	if !ok {
		if s.Addr == "" {
			return nil
		}
		spec = topology.NodeSpec{ID: node, RaftAddr: s.Addr}
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if lastErr = n.onNode(ctx, spec, ds, pid, "unhost"); lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if present {
		// The removal stands; the node (down, say) keeps an unused copy until it is re-added or
		// its data directory is wiped. A drain of a dead node goes on.
		n.log.Warn("removed replica's node could not drop its data", "datastore", ds, "partition", pid, "node", node, "error", lastErr)
	}
	return nil
}

// TransferLeadership moves partition pid of raft datastore ds's leadership to voter to (""
// picks another voter of the datastore's leader zone when one is there, else lets raft pick
// the most up-to-date voter) and returns the new leader once some node other than the old
// leader leads (to, when named). A transfer that does not take (its target lost the election
// and the old leader won again, or the leader refused it as busy) is asked for again after
// transferRetryAfter, up to transferAttempts requests in all. Errors: ErrRefused (to is not a
// voter), ErrUnavailable (also when the last request did not take either), ctx's error.
func (n *Node) TransferLeadership(ctx context.Context, ds string, pid int, to string) (string, error) {
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return "", err
	}
	old := cfg.Leader
	if to == "" {
		to = n.leaderZoneVoter(ds, cfg, old)
	}
	if to != "" && to == old {
		return old, nil
	}
	req := adminRaftRPC{Datastore: ds, Partition: pid, Op: raftOpTransfer}
	if to != "" {
		s, ok := serverOf(cfg, to)
		if !ok || s.Suffrage != wire.SuffrageVoter {
			return "", fmt.Errorf("%w: %s is not a voter of %s/%d", ErrRefused, to, ds, pid)
		}
		req.Node, req.Addr = to, s.Addr
	}
	retry := n.transferRetryAfter()
	for attempt := 1; ; attempt++ {
		if _, err := n.raftOp(ctx, req); err != nil {
			// A transfer that succeeded makes the old leader answer "not leader" afterwards.
			var nl *partition.NotLeaderError
			if !errors.As(err, &nl) && !errors.Is(err, ErrUnavailable) {
				return "", err
			}
		}
		// Ask again only when a leader answered lately and it is not the one wanted (never
		// while no leader answers: the transfer may have taken meanwhile).
		leader, again := "", time.Now().Add(retry)
		for leader == "" || time.Now().Before(again) {
			cfg, err := n.PartitionConfig(ctx, ds, pid)
			if err == nil && cfg.Leader != "" && cfg.Leader != old && (to == "" || cfg.Leader == to) {
				return cfg.Leader, nil
			}
			leader = ""
			if err == nil {
				leader = cfg.Leader
			}
			if ctx.Err() != nil {
				return "", fmt.Errorf("cluster: leadership of %s/%d did not move from %s: %w", ds, pid, old, ctx.Err())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if attempt == transferAttempts {
			return "", fmt.Errorf("%w: leadership of %s/%d did not move from %s in %d requests (%s leads)", ErrUnavailable, ds, pid, old, attempt, leader)
		}
		n.log.Info("leadership transfer did not take; asking again", "datastore", ds, "partition", pid, "from", old, "to", to, "leader", leader, "after", retry)
	}
}

// transferAttempts bounds the requests of one TransferLeadership: while raft runs a transfer
// its leader refuses writes (for up to an election timeout), so a target that cannot win
// (unreachable, say) is not asked for again and again.
const transferAttempts = 3

// transferRetryAfter is how long TransferLeadership waits for a leadership transfer to take
// before it asks again: three election timeouts of the partitions, at least 3 s. A transfer
// that takes is over within about one (raft's own wait for the old leader to step down, then
// the target's election).
func (n *Node) transferRetryAfter() time.Duration {
	return 3 * max(n.cfg.Partition.ElectionTimeout, time.Second)
}

// MoveReplica moves partition pid of raft datastore ds's replica from node from to node to:
// AddVoter(to), then RemoveVoter(from). The partition never has fewer voters than before.
func (n *Node) MoveReplica(ctx context.Context, ds string, pid int, from, to string) error {
	if from == to {
		return fmt.Errorf("%w: moving %s/%d from %s to itself", ErrRefused, ds, pid, from)
	}
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return err
	}
	if _, ok := serverOf(cfg, from); !ok {
		if s, ok := serverOf(cfg, to); ok && s.Suffrage == wire.SuffrageVoter {
			return nil // done before
		}
		return fmt.Errorf("%w: %s holds no replica of %s/%d", ErrRefused, from, ds, pid)
	}
	if err := n.AddVoter(ctx, ds, pid, to); err != nil {
		return err
	}
	return n.RemoveVoter(ctx, ds, pid, from)
}

// PartitionReports returns a report per partition of datastore ds ("" = every datastore): raft
// partitions ask their leader for the configuration and every replica's node for its applied
// index (each bounded by a few seconds; an unanswered one is reported unreachable); async
// partitions report their storage cluster only.
func (n *Node) PartitionReports(ctx context.Context, ds string) ([]PartitionReport, error) {
	var routes []*route
	v := n.view.Load()
	for _, d := range v.top.Datastores {
		if ds != "" && d.Name != ds {
			continue
		}
		routes = append(routes, v.byName[d.Name].partitions...)
	}
	if ds != "" && len(routes) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownDatastore, ds)
	}
	out := make([]PartitionReport, len(routes))
	var wg sync.WaitGroup
	for i, r := range routes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = n.partitionReport(ctx, r)
		}()
	}
	wg.Wait()
	return out, nil
}

func (n *Node) partitionReport(ctx context.Context, r *route) PartitionReport {
	rep := PartitionReport{PartitionConfig: PartitionConfig{Datastore: r.ds.Name, Partition: r.spec.ID}, Mode: r.ds.Mode,
		FirstShard: r.spec.FirstShard, LastShard: r.spec.LastShard, Cluster: r.spec.Cluster}
	if r.ds.Mode == topology.ModeAsync {
		return rep // no raft configuration: the storage cluster is the report
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cfg, err := n.PartitionConfig(cctx, r.ds.Name, r.spec.ID)
	if err != nil {
		rep.Error = err.Error()
		for _, id := range r.knownReplicas() {
			rep.Replicas = append(rep.Replicas, ReplicaLag{Node: id, Error: "configuration unknown"})
		}
		return rep
	}
	rep.PartitionConfig = cfg
	rep.Replicas = make([]ReplicaLag, len(cfg.Servers))
	var wg sync.WaitGroup
	for i, s := range cfg.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rl := ReplicaLag{Node: s.Node, Suffrage: s.Suffrage}
			spec, ok := n.nodeSpec(s.Node)
			if !ok {
				spec = topology.NodeSpec{ID: s.Node, RaftAddr: s.Addr}
			}
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			st, found, err := n.replicaStatusOn(sctx, spec, r.ds.Name, r.spec.ID)
			switch {
			case err != nil:
				rl.Error = err.Error()
			case !found:
				rl.Reachable = true
				rl.Error = "the node hosts no replica"
			default:
				rl.Reachable = true
				rl.State, rl.AppliedIndex, rl.LastIndex = st.State, st.AppliedIndex, st.LastIndex
				if cfg.LastIndex > st.AppliedIndex {
					rl.Lag = cfg.LastIndex - st.AppliedIndex
				}
			}
			rep.Replicas[i] = rl
		}()
	}
	wg.Wait()
	return rep
}
