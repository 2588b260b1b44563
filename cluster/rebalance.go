package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Rebalancing spreads the voters and leaderships of the raft partitions evenly over the nodes:
// planRebalance plans it without I/O, Rebalance carries the plan out one move at a time
// (MoveReplica, TransferLeadership), and Drain empties one node.

// The rebalance's plan and report are the API's types (package wire).
type (
	// Move is one replica move of a plan (wire.Move).
	Move = wire.Move
	// Transfer is one leadership transfer of a plan (wire.Transfer).
	Transfer = wire.Transfer
	// RebalanceOptions shape Rebalance (wire.RebalanceRequest). Nodes are the nodes to spread
	// replicas over (default: every node gossip sees alive, or the known nodes without
	// gossip); Exclude are nodes to move every replica and leadership off (a drain). DryRun
	// plans without changing anything.
	RebalanceOptions = wire.RebalanceRequest
	// RebalanceReport is what Rebalance planned and did: replicas and leaders per node before
	// and after, the moves and transfers (done, or planned with DryRun), and how long it took
	// (wire.RebalanceReport).
	RebalanceReport = wire.RebalanceReport
)

// placement is a partition's voters and leader, for planning.
type placement struct {
	ds     string
	pid    int
	voters []string
	leader string
	// learners are the partition's nonvoters: a voter never moves onto their nodes (AddVoter
	// there would make the learner a voter).
	learners []string
}

// planRebalance returns the moves and transfers that spread the partitions' voters evenly over
// nodes and their zones, then their leaderships, and mutates ps to the planned placement.
// Pure, for tests. In order:
//
//  1. every voter on an excluded node moves to an eligible node not holding the partition,
//     the one whose zone holds fewest of the partition's voters, then the least loaded;
//  2. a partition with more than zoneCap(voters, zones of the eligible nodes) voters in one
//     zone moves one of them to the least loaded node of a zone below that cap, until none
//     can;
//  3. while two eligible nodes' voter counts differ by more than one, a replica moves from the
//     fullest to the emptiest, of a partition the move keeps within the cap (in the same zone,
//     or into a zone below it);
//  4. every partition gets an eligible leader, in its datastore's leaderZone when a voter is
//     there, and leaderships even out among those voters.
//
// zones gives each node's zone ("" for none: one unnamed zone); leaderZone each datastore's
// preferred leader zone ("" or absent for none).
func planRebalance(ps []placement, nodes, exclude []string, zones, leaderZone map[string]string) ([]Move, []Transfer) {
	load := map[string]int{}
	for _, nd := range nodes {
		load[nd] = 0
	}
	for _, p := range ps {
		for _, v := range p.voters {
			if _, ok := load[v]; ok {
				load[v]++
			}
		}
	}
	eligible := func(nd string) bool { _, ok := load[nd]; return ok && !slices.Contains(exclude, nd) }
	var order []string
	for _, nd := range nodes {
		if eligible(nd) {
			order = append(order, nd)
		}
	}
	spread := len(distinctZones(order, zones))
	limit := func(p *placement) int { return zoneCap(len(p.voters), spread) }
	// least returns the node that should take a voter of p leaving node without ("" for a new
	// voter), among those ok accepts: fewest of p's voters in its zone, then least loaded.
	least := func(p *placement, without string, ok func(nd string, held int) bool) string {
		held := zoneCounts(p.voters, zones, without)
		best := ""
		for _, nd := range order {
			if slices.Contains(p.voters, nd) || slices.Contains(p.learners, nd) || !ok(nd, held[zones[nd]]) {
				continue
			}
			if best == "" || held[zones[nd]] < held[zones[best]] || held[zones[nd]] == held[zones[best]] && load[nd] < load[best] {
				best = nd
			}
		}
		return best
	}
	anyNode := func(string, int) bool { return true }
	var moves []Move
	move := func(p *placement, from, to string) {
		moves = append(moves, Move{Datastore: p.ds, Partition: p.pid, From: from, To: to})
		p.voters[slices.Index(p.voters, from)] = to
		if p.leader == from {
			p.leader = ""
		}
		if _, ok := load[from]; ok {
			load[from]--
		}
		load[to]++
	}
	// 1. Off excluded nodes (and nodes outside the set) first.
	for i := range ps {
		p := &ps[i]
		for _, v := range slices.Clone(p.voters) {
			if eligible(v) {
				continue
			}
			if _, inSet := load[v]; !inSet && !slices.Contains(exclude, v) {
				continue // a node outside the set that is not excluded (dead, say): leave it
			}
			if to := least(p, v, anyNode); to != "" {
				move(p, v, to)
			}
		}
	}
	// 2. Spread each partition's voters over the zones.
	for i := range ps {
		p := &ps[i]
		for guard := 0; guard < len(p.voters)*len(order)+1; guard++ {
			counts := zoneCounts(p.voters, zones, "")
			from := ""
			for _, v := range p.voters {
				if eligible(v) && counts[zones[v]] > limit(p) && (from == "" || load[v] > load[from]) {
					from = v
				}
			}
			if from == "" {
				break
			}
			to := least(p, from, func(nd string, held int) bool { return zones[nd] != zones[from] && held < limit(p) })
			if to == "" {
				break
			}
			move(p, from, to)
		}
	}
	// 3. Then even out, within the zone cap.
	keepsSpread := func(p *placement, from, to string) bool {
		if zones[from] == zones[to] {
			return true
		}
		return zoneCounts(p.voters, zones, from)[zones[to]] < limit(p)
	}
	for guard := 0; guard < 10000; guard++ {
		byLoad := slices.Clone(order)
		slices.SortStableFunc(byLoad, func(a, b string) int { return load[b] - load[a] })
		done := true
		for _, from := range byLoad {
			for j := len(byLoad) - 1; j >= 0 && done; j-- {
				to := byLoad[j]
				if load[from]-load[to] <= 1 {
					continue
				}
				for i := range ps {
					p := &ps[i]
					if slices.Contains(p.voters, from) && !slices.Contains(p.voters, to) && !slices.Contains(p.learners, to) && keepsSpread(p, from, to) {
						move(p, from, to)
						done = false
						break
					}
				}
			}
			if !done {
				break
			}
		}
		if done {
			break
		}
	}
	return moves, planLeaders(ps, eligible, zones, leaderZone)
}

// planLeaders returns the leadership transfers that give every partition of ps an eligible
// leader, in its datastore's leader zone when one of its eligible voters is there, then even
// out the leaderships per node among those candidates; it mutates ps's leaders.
func planLeaders(ps []placement, eligible func(string) bool, zones, leaderZone map[string]string) []Transfer {
	leads := map[string]int{}
	for _, p := range ps {
		if p.leader != "" {
			leads[p.leader]++
		}
	}
	var transfers []Transfer
	transfer := func(p *placement, to string) {
		transfers = append(transfers, Transfer{Datastore: p.ds, Partition: p.pid, From: p.leader, To: to})
		if p.leader != "" {
			leads[p.leader]--
		}
		p.leader = to
		leads[to]++
	}
	// candidates are p's eligible voters in its leader zone, or all of them when none is.
	candidates := func(p *placement) []string {
		var all, preferred []string
		for _, v := range p.voters {
			if eligible(v) {
				all = append(all, v)
				if lz := leaderZone[p.ds]; lz != "" && zones[v] == lz {
					preferred = append(preferred, v)
				}
			}
		}
		if len(preferred) > 0 {
			return preferred
		}
		return all
	}
	fewest := func(p *placement) string {
		best := ""
		for _, v := range candidates(p) {
			if best == "" || leads[v] < leads[best] {
				best = v
			}
		}
		return best
	}
	for i := range ps {
		p := &ps[i]
		if p.leader == "" || !slices.Contains(candidates(p), p.leader) {
			if to := fewest(p); to != "" {
				transfer(p, to)
			}
		}
	}
	for guard := 0; guard < 10000; guard++ {
		changed := false
		for i := range ps {
			p := &ps[i]
			to := fewest(p)
			if to != "" && to != p.leader && leads[p.leader]-leads[to] > 1 {
				transfer(p, to)
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	return transfers
}

// rebalanceNodes returns the default node set of a rebalance: nodes gossip sees alive, or every
// known node without gossip.
func (n *Node) rebalanceNodes() []string {
	var out []string
	for _, m := range n.Members() {
		if n.gossip == nil || m.State == "alive" {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out
}

// Rebalance spreads the voters of every raft partition (of opts.Datastore, or all) evenly over
// the nodes, then their leaderships, one move at a time (MoveReplica: add, catch up, promote,
// remove), and returns what it did. It blocks until done or ctx ends; an interrupted rebalance
// leaves every partition with at least its voters (a half-done move leaves one more), and
// running it again continues. Nodes outside opts.Nodes that are not excluded keep their
// replicas.
func (n *Node) Rebalance(ctx context.Context, opts RebalanceOptions) (RebalanceReport, error) {
	start := time.Now()
	nodes := opts.Nodes
	if len(nodes) == 0 {
		nodes = n.rebalanceNodes()
	}
	for _, ex := range opts.Exclude {
		if !slices.Contains(nodes, ex) {
			nodes = append(nodes, ex)
		}
	}
	var ps []placement
	leaderZone := map[string]string{}
	for _, d := range n.Topology().Datastores {
		if d.Mode != topology.ModeRaft || opts.Datastore != "" && d.Name != opts.Datastore {
			continue
		}
		leaderZone[d.Name] = d.LeaderZone
		for _, p := range d.Partitions {
			cfg, err := n.PartitionConfig(ctx, d.Name, p.ID)
			if err != nil {
				return RebalanceReport{}, err
			}
			pl := placement{ds: d.Name, pid: p.ID, voters: cfg.Voters(), leader: cfg.Leader}
			for _, s := range cfg.Servers {
				if s.Suffrage != wire.SuffrageVoter {
					pl.learners = append(pl.learners, s.Node)
				}
			}
			ps = append(ps, pl)
		}
	}
	rep := RebalanceReport{Nodes: nodes, DryRun: opts.DryRun}
	count := func() (map[string]int, map[string]int) {
		reps, leads := map[string]int{}, map[string]int{}
		for _, nd := range nodes {
			reps[nd], leads[nd] = 0, 0
		}
		for _, p := range ps {
			for _, v := range p.voters {
				reps[v]++
			}
			if p.leader != "" {
				leads[p.leader]++
			}
		}
		return reps, leads
	}
	rep.ReplicasBefore, rep.LeadersBefore = count()
	all := slices.Clone(nodes)
	for _, p := range ps {
		for _, v := range p.voters {
			if !slices.Contains(all, v) {
				all = append(all, v)
			}
		}
	}
	zones := n.zonesOf(all)
	rep.Moves, rep.Transfers = planRebalance(ps, nodes, opts.Exclude, zones, leaderZone)
	rep.ReplicasAfter, rep.LeadersAfter = count()
	var usable []string
	for _, nd := range nodes {
		if !slices.Contains(opts.Exclude, nd) {
			usable = append(usable, nd)
		}
	}
	rep.Warnings = zoneWarnings(ps, usable, zones, leaderZone)
	if opts.Datastore == "" {
		cv := n.catalogVoterIDs()
		if w := catalogZoneWarning(cv, usable, n.zonesOf(append(slices.Clone(usable), cv...))); w != "" {
			rep.Warnings = append(rep.Warnings, w)
		}
	}
	for _, nd := range all {
		if zones[nd] != "" {
			if rep.Zones == nil {
				rep.Zones = map[string]string{}
			}
			rep.Zones[nd] = zones[nd]
		}
	}
	if opts.DryRun {
		return rep, nil
	}
	for _, m := range rep.Moves {
		n.log.Info("rebalance: moving a replica", "datastore", m.Datastore, "partition", m.Partition, "from", m.From, "to", m.To)
		if err := n.MoveReplica(ctx, m.Datastore, m.Partition, m.From, m.To); err != nil {
			rep.DurationSeconds = time.Since(start).Seconds()
			return rep, fmt.Errorf("cluster: move %s/%d %s -> %s: %w", m.Datastore, m.Partition, m.From, m.To, err)
		}
	}
	for _, t := range rep.Transfers {
		if _, err := n.TransferLeadership(ctx, t.Datastore, t.Partition, t.To); err != nil {
			// Leadership is a preference: a failed transfer leaves a working leader.
			n.log.Warn("rebalance: leadership transfer failed", "datastore", t.Datastore, "partition", t.Partition, "to", t.To, "error", err)
		}
	}
	rep.DurationSeconds = time.Since(start).Seconds()
	return rep, nil
}

// Drain moves every replica and leadership off node (Rebalance excluding it), and when node is
// a voter of the catalog its vote to the first other node that is not (MoveCatalogVoters;
// RebalanceReport.CatalogVoteKept when there is none), after which the node holds no data and
// can be stopped (and Leave the gossip). It blocks until done.
func (n *Node) Drain(ctx context.Context, node string, dryRun bool) (RebalanceReport, error) {
	if _, ok := n.nodeSpec(node); !ok {
		return RebalanceReport{}, fmt.Errorf("%w: %q", ErrUnknownNode, node)
	}
	var nodes []string
	for _, nd := range n.rebalanceNodes() {
		if nd != node {
			nodes = append(nodes, nd)
		}
	}
	rep, err := n.Rebalance(ctx, RebalanceOptions{Nodes: nodes, Exclude: []string{node}, DryRun: dryRun})
	voters := n.catalogVoterIDs()
	if err != nil || !slices.Contains(voters, node) {
		return rep, err
	}
	rep.CatalogVoters, rep.CatalogVoteKept = voters, true
	for _, nd := range nodes {
		if !slices.Contains(voters, nd) {
			next := slices.Clone(voters)
			next[slices.Index(next, node)] = nd
			rep.CatalogVoters, rep.CatalogVoteKept = next, false
			break
		}
	}
	if dryRun || rep.CatalogVoteKept {
		return rep, nil
	}
	if _, err := n.MoveCatalogVoters(ctx, rep.CatalogVoters); err != nil {
		return rep, fmt.Errorf("cluster: move %s's catalog vote: %w", node, err)
	}
	return rep, nil
}
