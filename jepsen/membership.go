package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Membership nemesis kinds: raft configuration changes made through the nodes' admin API
// (/v1/admin/partitions/...) while the traffic runs. They act on raft partitions only.
const (
	// RemoveAddVoter removes a voter of a random raft partition (its leader half the time:
	// leadership moves first) and, when the fault ends, adds it back: the node opens an empty
	// replica, catches up by log or snapshot as a nonvoter, and is promoted. Healed means the
	// partition has its original voters again.
	RemoveAddVoter = "remove-add-voter"
	// MoveReplica moves a random voter of a random raft partition (its leader a third of the
	// time) to a live node that hosts no replica of it: add, catch up, promote, remove. Nothing
	// is undone: the placement stays moved. When every partition has a replica on every node
	// there is nowhere to move to, and the fault is a remove-add-voter instead.
	MoveReplica = "move-replica"
	// TransferLeader transfers a random raft partition's leadership, half the time to a random
	// other voter, half the time to the voter raft picks.
	TransferLeader = "transfer-leader"
)

// MembershipNemeses lists the membership nemeses. They are not in AllNemeses: name them (or
// "membership" on the command line).
var MembershipNemeses = []string{RemoveAddVoter, MoveReplica, TransferLeader}

// IsMembershipNemesis reports whether kind changes raft configurations (MembershipNemeses).
func IsMembershipNemesis(kind string) bool { return slices.Contains(MembershipNemeses, kind) }

// Admin operations of the membership nemeses, as AdminOp.Op.
const (
	OpRemoveVoter    = "remove-voter"
	OpAddVoter       = "add-voter"
	OpMove           = "move"
	OpTransferLeader = "transfer-leader"
)

// AdminOp is one admin call of a membership nemesis, logged to nemesis.jsonl as an "admin"
// event whether it succeeded or not.
type AdminOp struct {
	// Op is OpRemoveVoter, OpAddVoter, OpMove or OpTransferLeader.
	Op        string `json:"op"`
	Datastore string `json:"datastore"`
	Partition int    `json:"partition"`
	// Node is the voter removed or added, or the node leadership was asked to move to (""
	// lets raft pick). From and To are a move's nodes.
	Node string `json:"node,omitempty"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Reason is why the call was made: "fault" (starting one), "heal" (ending one) or
	// "repair" (bringing a partition back to the voters it must have after an earlier call
	// failed or was cut short).
	Reason string `json:"reason"`
	// Via is the node the call was sent to (the last one tried).
	Via string `json:"via,omitempty"`
	OK  bool   `json:"ok"`
	// Error is the last attempt's error when OK is false.
	Error string `json:"error,omitempty"`
	// Seconds is the call's duration, retries included.
	Seconds float64 `json:"seconds"`
	// Voters and Leader are the partition's configuration after the call, as the answer gave
	// it (empty on failure).
	Voters []string `json:"voters,omitempty"`
	Leader string   `json:"leader,omitempty"`
}

// membership is the state of the membership nemeses.
type membership struct {
	// rng draws the membership nemeses' choices. Separate from the Nemesis's rng, so that the
	// schedule of kinds and times stays the seed's whatever the cluster answers.
	rng *rand.Rand
	hc  *http.Client

	mu sync.Mutex
	// want is, by "ds/p", the voters each partition a membership nemesis touched must end
	// with (sorted): its voters before a remove-add-voter, after a move.
	want map[string][]string
	ops  []AdminOp
}

// newMembership returns the membership nemeses' state; hc sends their admin calls (it must
// trust the cluster's CA on a secure cluster: Cluster.HTTPClient).
func newMembership(seed uint64, hc *http.Client) *membership {
	return &membership{rng: rand.New(rand.NewPCG(seed^0x6d656d62, seed)), hc: hc, want: map[string][]string{}}
}

// AdminOps returns the admin calls the membership nemeses made so far, in order.
func (n *Nemesis) AdminOps() []AdminOp {
	n.mem.mu.Lock()
	defer n.mem.mu.Unlock()
	return slices.Clone(n.mem.ops)
}

// errNoCandidate: no raft partition fits the fault right now.
var errNoCandidate = errors.New("jepsen: no raft partition fits")

// cutLinks counts the links of the node at ip that are cut, in either direction.
func (n *Net) cutLinks(ip string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	count := len(n.cut[ip])
	for dst, srcs := range n.cut {
		if dst != ip && slices.Contains(srcs, ip) {
			count++
		}
	}
	return count
}

// liveNodes returns the running, unpaused nodes, those with the fewest cut links first (ties
// in random order).
func (n *Nemesis) liveNodes() []*Node {
	var live []*Node
	for _, node := range n.c.Nodes {
		if node.Running() && !node.Paused() {
			live = append(live, node)
		}
	}
	n.mem.rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	if n.net != nil {
		cuts := map[string]int{}
		for _, node := range live {
			cuts[node.ID] = n.net.cutLinks(node.IP)
		}
		sort.SliceStable(live, func(i, j int) bool { return cuts[live[i].ID] < cuts[live[j].ID] })
	}
	return live
}

// isLive reports whether node id is running and not paused.
func (n *Nemesis) isLive(id string) bool {
	node := n.c.Node(id)
	return node != nil && node.Running() && !node.Paused()
}

// adminClient returns a client of the live nodes (the least cut off first) that makes at most
// attempts attempts, each bounded by timeout, a backoff of up to 250ms, 500ms, ... apart, and
// the map from their URLs to their ids. Its changes are retried as package client retries
// AdminIdempotent changes (see change); its reads as reads.
func (n *Nemesis) adminClient(timeout time.Duration, attempts int) (*client.Client, map[string]string, error) {
	live := n.liveNodes()
	if len(live) == 0 {
		return nil, nil, errors.New("no live node to ask")
	}
	cfg := n.c.ClientConfig()
	ids := map[string]string{}
	for _, node := range live {
		cfg.Endpoints = append(cfg.Endpoints, node.URL())
		ids[node.URL()] = node.ID
	}
	cfg.HTTPClient = n.mem.hc
	cfg.MaxAttempts, cfg.RequestTimeout, cfg.AdminTimeout = attempts, timeout, timeout
	cfg.BackoffBase, cfg.BackoffMax = 250*time.Millisecond, 500*time.Millisecond
	cl, err := client.New(cfg)
	return cl, ids, err
}

func partKey(ds string, pid int) string { return fmt.Sprintf("%s/%d", ds, pid) }

// reports returns the raft partitions of datastore ds as a live node reports them (GET
// /v1/admin/partitions?datastore=ds).
func (n *Nemesis) reports(ctx context.Context, ds string) ([]wire.PartitionReport, error) {
	cl, _, err := n.adminClient(5*time.Second, 3)
	if err != nil {
		return nil, fmt.Errorf("jepsen: partitions of %s: %w", ds, err)
	}
	reps, err := cl.Partitions(ctx, ds)
	if err != nil {
		return nil, fmt.Errorf("jepsen: partitions of %s: %w", ds, err)
	}
	return reps, nil
}

// raftDatastores returns the names of the topology's raft datastores.
func (n *Nemesis) raftDatastores() []string {
	var out []string
	for _, d := range n.c.Topology().Datastores {
		if d.Mode == topology.ModeRaft {
			out = append(out, d.Name)
		}
	}
	return out
}

// settled reports whether r has exactly the voters the membership nemeses want it to have
// (any voters when it was never touched) and no nonvoter.
func (n *Nemesis) settled(r wire.PartitionReport) bool {
	if r.Error != "" || len(r.Servers) == 0 {
		return false
	}
	voters := sorted(r.Voters())
	if len(voters) != len(r.Servers) {
		return false
	}
	n.mem.mu.Lock()
	want, ok := n.mem.want[partKey(r.Datastore, r.Partition)]
	n.mem.mu.Unlock()
	return !ok || slices.Equal(want, voters)
}

// pickPartition returns a random settled raft partition that fits (datastores tried in random
// order, each from a live node's report), or errNoCandidate.
func (n *Nemesis) pickPartition(ctx context.Context, fits func(wire.PartitionReport) bool) (wire.PartitionReport, error) {
	dss := n.raftDatastores()
	n.mem.rng.Shuffle(len(dss), func(i, j int) { dss[i], dss[j] = dss[j], dss[i] })
	var errs []error
	for _, ds := range dss {
		reps, err := n.reports(ctx, ds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var ok []wire.PartitionReport
		for _, r := range reps {
			if n.settled(r) && fits(r) {
				ok = append(ok, r)
			}
		}
		if len(ok) > 0 {
			return ok[n.mem.rng.IntN(len(ok))], nil
		}
	}
	if len(errs) == len(dss) && len(errs) > 0 {
		return wire.PartitionReport{}, errors.Join(errs...)
	}
	return wire.PartitionReport{}, errNoCandidate
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// setWant records the voters partition key must end with.
func (n *Nemesis) setWant(key string, voters []string) {
	n.mem.mu.Lock()
	n.mem.want[key] = sorted(voters)
	n.mem.mu.Unlock()
}

// change makes one membership admin call, records it (AdminOp, an "admin" event) and returns
// the partition's configuration after it. The call goes to a live node (the least cut off
// first), and on a failure that is not a 4xx answer to the next one, at most 3 times, each
// bounded by 20s (30s when a replica catches up first). A change that timed out may still be
// applied: it is sent again all the same (client.AdminIdempotent), since the membership calls
// are idempotent (a voter already there, a node already gone, a move already done succeed; a
// repeated transfer to raft's pick moves leadership once more, which the nemesis does anyway).
func (n *Nemesis) change(ctx context.Context, op AdminOp, call func(context.Context, *client.Client, ...client.AdminOption) (wire.PartitionConfig, error)) (wire.PartitionConfig, error) {
	var cfg wire.PartitionConfig
	began := time.Now()
	timeout, attempts := 20*time.Second, 3
	if op.Op == OpAddVoter || op.Op == OpMove {
		timeout = 30 * time.Second // the new replica catches up first
	}
	var err error
	if op.Op == OpAddVoter && !n.isLive(op.Node) {
		err = fmt.Errorf("%s is down or paused: left to the next repair", op.Node)
	} else if op.Op == OpMove && !n.isLive(op.To) {
		err = fmt.Errorf("%s is down or paused", op.To)
	} else {
		var cl *client.Client
		var ids map[string]string
		if cl, ids, err = n.adminClient(timeout, attempts); err == nil {
			var via string
			cfg, err = call(ctx, cl, client.AdminIdempotent(), client.AdminEndpoint(&via))
			op.Via = ids[via]
		}
	}
	op.Seconds = time.Since(began).Seconds()
	op.OK = err == nil
	if err != nil {
		op.Error = err.Error()
	} else {
		op.Voters, op.Leader = sorted(cfg.Voters()), cfg.Leader
	}
	n.mem.mu.Lock()
	n.mem.ops = append(n.mem.ops, op)
	n.mem.mu.Unlock()
	rec := struct {
		Time  string `json:"time"`
		At    int64  `json:"at"`
		Event string `json:"event"`
		AdminOp
	}{time.Now().UTC().Format(time.RFC3339Nano), n.h.Now(), "admin", op}
	b, _ := json.Marshal(rec)
	n.mu.Lock()
	if n.w != nil {
		_, _ = n.w.Write(append(b, '\n'))
	}
	n.mu.Unlock()
	attrs := []any{"op", op.Op, "partition", partKey(op.Datastore, op.Partition), "node", op.Node, "from", op.From, "to", op.To,
		"reason", op.Reason, "via", op.Via, "ok", op.OK, "seconds", op.Seconds, "voters", op.Voters, "leader", op.Leader}
	if err != nil {
		// Another fault in force (a node down, a cut, no leader) makes admin calls fail: the
		// nemesis goes on, and the repair or the final heal restores what must be restored.
		n.log.Warn("nemesis admin call failed", append(attrs, "error", err)...)
		return cfg, err
	}
	n.log.Info("nemesis admin", attrs...)
	return cfg, nil
}

func (n *Nemesis) removeVoter(ctx context.Context, ds string, pid int, node, reason string) (wire.PartitionConfig, error) {
	return n.change(ctx, AdminOp{Op: OpRemoveVoter, Datastore: ds, Partition: pid, Node: node, Reason: reason},
		func(ctx context.Context, cl *client.Client, opts ...client.AdminOption) (wire.PartitionConfig, error) {
			return cl.RemoveVoter(ctx, ds, pid, node, opts...)
		})
}

func (n *Nemesis) addVoter(ctx context.Context, ds string, pid int, node, reason string) (wire.PartitionConfig, error) {
	return n.change(ctx, AdminOp{Op: OpAddVoter, Datastore: ds, Partition: pid, Node: node, Reason: reason},
		func(ctx context.Context, cl *client.Client, opts ...client.AdminOption) (wire.PartitionConfig, error) {
			return cl.AddVoter(ctx, ds, pid, node, opts...)
		})
}

// startMembershipFault starts one membership fault and returns the function that ends it and
// how long to hold it (0: the fault's drawn duration). It first repairs (one pass) the
// partitions an earlier membership fault left off their voters.
func (n *Nemesis) startMembershipFault(ctx context.Context, kind string) (func(), time.Duration, error) {
	n.repairMembership(ctx)
	switch kind {
	case TransferLeader:
		return n.transferLeader(ctx)
	case MoveReplica:
		return n.moveReplica(ctx)
	default:
		return n.removeAddVoter(ctx, "")
	}
}

// removeAddVoter removes a voter now and adds it back when the fault ends.
func (n *Nemesis) removeAddVoter(ctx context.Context, note string) (func(), time.Duration, error) {
	rep, err := n.pickPartition(ctx, func(r wire.PartitionReport) bool { return len(r.Voters()) >= 2 })
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", RemoveAddVoter, err)
	}
	ds, pid, key := rep.Datastore, rep.Partition, partKey(rep.Datastore, rep.Partition)
	voters := sorted(rep.Voters())
	node := voters[n.mem.rng.IntN(len(voters))]
	if rep.Leader != "" && n.mem.rng.IntN(2) == 0 {
		node = rep.Leader
	}
	role := "a follower"
	if node == rep.Leader {
		role = "the leader"
	}
	n.setWant(key, voters)
	start := n.h.Now()
	after, err := n.removeVoter(ctx, ds, pid, node, "fault")
	if err != nil {
		return nil, 0, fmt.Errorf("%s: remove %s from %s: %w", RemoveAddVoter, node, key, err)
	}
	end := n.beginAt(Fault{Kind: RemoveAddVoter, Nodes: []string{node},
		Detail: fmt.Sprintf("%s: voter %s (%s) removed, voters %v -> %v; heal: add it back%s", key, node, role, voters, sorted(after.Voters()), note)}, start)
	return func() {
		actx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if _, err := n.addVoter(actx, ds, pid, node, "heal"); err != nil {
			n.log.Warn("nemesis: voter not added back; the next repair or the heal will", "partition", key, "node", node, "error", err)
		}
		end()
	}, 0, nil
}

// movable reports whether some raft partition has fewer replicas than the cluster has nodes
// (so a replica can move). A move keeps the count, so the topology tells.
func (n *Nemesis) movable() bool {
	for _, d := range n.c.Topology().Datastores {
		if d.Mode != topology.ModeRaft {
			continue
		}
		for _, p := range d.Partitions {
			if len(p.Replicas) < len(n.c.Nodes) {
				return true
			}
		}
	}
	return false
}

// moveReplica moves a voter to a live node outside the partition; nothing to undo.
func (n *Nemesis) moveReplica(ctx context.Context) (func(), time.Duration, error) {
	if !n.movable() {
		return n.removeAddVoter(ctx, " (move-replica: every partition has a replica on every node, nowhere to move)")
	}
	var live []string // least cut off first
	for _, node := range n.liveNodes() {
		live = append(live, node.ID)
	}
	outside := func(r wire.PartitionReport) []string {
		var out []string
		for _, id := range live {
			if !slices.ContainsFunc(r.Servers, func(s wire.RaftServer) bool { return s.Node == id }) {
				out = append(out, id)
			}
		}
		return out
	}
	rep, err := n.pickPartition(ctx, func(r wire.PartitionReport) bool { return len(r.Voters()) >= 1 && len(outside(r)) > 0 })
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", MoveReplica, err)
	}
	ds, pid, key := rep.Datastore, rep.Partition, partKey(rep.Datastore, rep.Partition)
	voters := sorted(rep.Voters())
	from := voters[n.mem.rng.IntN(len(voters))]
	if rep.Leader != "" && n.mem.rng.IntN(3) == 0 {
		from = rep.Leader
	}
	role := "a follower"
	if from == rep.Leader {
		role = "the leader"
	}
	cands := outside(rep)
	// Prefer the least cut-off candidates (live is in that order): draw among the first half.
	to := cands[n.mem.rng.IntN((len(cands)+1)/2)]
	want := append(slices.DeleteFunc(slices.Clone(voters), func(v string) bool { return v == from }), to)
	n.setWant(key, want)
	start := n.h.Now()
	after, err := n.change(ctx, AdminOp{Op: OpMove, Datastore: ds, Partition: pid, From: from, To: to, Reason: "fault"},
		func(ctx context.Context, cl *client.Client, opts ...client.AdminOption) (wire.PartitionConfig, error) {
			return cl.MoveReplica(ctx, ds, pid, from, to, opts...)
		})
	if err != nil {
		return nil, 0, fmt.Errorf("%s: move %s from %s to %s: %w", MoveReplica, key, from, to, err)
	}
	end := n.beginAt(Fault{Kind: MoveReplica, Nodes: []string{from, to},
		Detail: fmt.Sprintf("%s: voter %s (%s) moved to %s, voters %v -> %v; stays moved", key, from, role, to, voters, sorted(after.Voters()))}, start)
	return end, time.Millisecond, nil
}

// transferLeader moves a partition's leadership; nothing to undo.
func (n *Nemesis) transferLeader(ctx context.Context) (func(), time.Duration, error) {
	rep, err := n.pickPartition(ctx, func(r wire.PartitionReport) bool { return r.Leader != "" && len(r.Voters()) >= 2 })
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", TransferLeader, err)
	}
	ds, pid, key := rep.Datastore, rep.Partition, partKey(rep.Datastore, rep.Partition)
	to, asked := "", "raft's pick"
	if n.mem.rng.IntN(2) == 0 {
		others := slices.DeleteFunc(sorted(rep.Voters()), func(v string) bool { return v == rep.Leader })
		to = others[n.mem.rng.IntN(len(others))]
		asked = to
	}
	start := n.h.Now()
	after, err := n.change(ctx, AdminOp{Op: OpTransferLeader, Datastore: ds, Partition: pid, Node: to, Reason: "fault"},
		func(ctx context.Context, cl *client.Client, opts ...client.AdminOption) (wire.PartitionConfig, error) {
			return cl.TransferLeader(ctx, ds, pid, to, opts...)
		})
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %s to %s: %w", TransferLeader, key, asked, err)
	}
	end := n.beginAt(Fault{Kind: TransferLeader, Nodes: []string{rep.Leader, after.Leader},
		Detail: fmt.Sprintf("%s: leadership moved from %s to %s (asked: %s)", key, rep.Leader, after.Leader, asked)}, start)
	return end, time.Millisecond, nil
}

// repairMembership makes one pass over the partitions the membership nemeses touched and
// brings each one whose voters are not those it must have back to them: it adds the missing
// voters (resuming an interrupted add), then removes every other server (a nonvoter left by an
// interrupted add, the source of an interrupted move). It returns the partitions still off.
func (n *Nemesis) repairMembership(ctx context.Context) []string {
	n.mem.mu.Lock()
	want := maps.Clone(n.mem.want)
	n.mem.mu.Unlock()
	byDS := map[string][]wire.PartitionReport{}
	var off []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		cut := strings.LastIndexByte(key, '/')
		ds := key[:cut]
		pid, _ := strconv.Atoi(key[cut+1:])
		reps, ok := byDS[ds]
		if !ok {
			var err error
			if reps, err = n.reports(ctx, ds); err != nil {
				off = append(off, key+": "+err.Error())
				continue
			}
			byDS[ds] = reps
		}
		i := slices.IndexFunc(reps, func(r wire.PartitionReport) bool { return r.Partition == pid })
		if i < 0 || reps[i].Error != "" || len(reps[i].Servers) == 0 {
			off = append(off, key+": configuration unknown")
			continue
		}
		r := reps[i]
		if n.settled(r) {
			continue
		}
		voters := r.Voters()
		ok = true
		for _, w := range want[key] {
			if !slices.Contains(voters, w) {
				if _, err := n.addVoter(ctx, ds, pid, w, "repair"); err != nil {
					ok = false
				}
			}
		}
		if ok {
			for _, s := range r.Servers {
				if !slices.Contains(want[key], s.Node) {
					if _, err := n.removeVoter(ctx, ds, pid, s.Node, "repair"); err != nil {
						ok = false
					}
				}
			}
		}
		if !ok {
			off = append(off, key+": repair failed")
		} else {
			delete(byDS, ds) // read again for the next partition of ds
		}
	}
	return off
}

// healMembership repairs (repairMembership) until every partition the membership nemeses
// touched has the voters it must have, or 2 minutes pass. It returns a description for the
// heal event ("" when no membership nemesis ran).
func (n *Nemesis) healMembership(ctx context.Context) string {
	n.mem.mu.Lock()
	touched := len(n.mem.want)
	n.mem.mu.Unlock()
	if touched == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		off := n.repairMembership(ctx)
		if len(off) == 0 {
			return fmt.Sprintf(", every partition changed by a membership nemesis (%d) at the voters it must have", touched)
		}
		select {
		case <-ctx.Done():
			n.log.Warn("nemesis: partitions not back to their voters", "off", off)
			return fmt.Sprintf(", PARTITIONS NOT BACK TO THEIR VOTERS: %s", strings.Join(off, "; "))
		case <-time.After(time.Second):
		}
	}
}
