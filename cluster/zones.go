package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/topology"
)

// Zones: each node may name a failure domain (topology.NodeSpec.Zone, serve --zone, announced
// by gossip). Placement (a datastore's creation, a rebalance, a drain) keeps each partition's
// voters in as many distinct zones as the eligible nodes span, at most zoneCap(voters, zones)
// of them in one zone, so that with three zones or more no zone holds a majority and the loss
// of a zone leaves every partition a quorum. A datastore may prefer a zone for its leaders
// (topology.DatastoreSpec.LeaderZone). What a placement cannot meet it reports
// (zoneWarnings). The rules are CockroachDB's replica diversity and lease preferences
// (docs/operations.md, Zones), without their locality tiers.

// zoneOf returns node id's zone: this node's own, else the one it announces in gossip, else
// the one the topology file or the node's learned address gives; "" when none is known.
func (n *Node) zoneOf(id string) string {
	if id == n.self.ID {
		return n.self.Zone
	}
	if n.gossip != nil {
		if m, ok := n.gossip.Member(id); ok && m.Zone != "" {
			return m.Zone
		}
	}
	s, _ := n.nodeSpec(id)
	return s.Zone
}

// zonesOf returns the zone of each of nodes (zoneOf).
func (n *Node) zonesOf(nodes []string) map[string]string {
	out := make(map[string]string, len(nodes))
	for _, id := range nodes {
		out[id] = n.zoneOf(id)
	}
	return out
}

// leaderZoneOf returns datastore ds's preferred leader zone, "" for none or an unknown
// datastore.
func (n *Node) leaderZoneOf(ds string) string {
	if d := n.datastores()[ds]; d != nil {
		return d.spec.LeaderZone
	}
	return ""
}

// zoneCap returns the most voters of a partition of r voters that one zone may hold when the
// eligible nodes span z zones: r/z rounded up (r when z is 0).
func zoneCap(r, z int) int {
	if z < 1 {
		return r
	}
	return (r + z - 1) / z
}

// distinctZones returns the zones of nodes (zones[node], "" counting as one zone), sorted.
func distinctZones(nodes []string, zones map[string]string) []string {
	var out []string
	for _, nd := range nodes {
		if z := zones[nd]; !slices.Contains(out, z) {
			out = append(out, z)
		}
	}
	slices.Sort(out)
	return out
}

// zoneCounts returns how many of voters are in each zone, leaving out the node without ("" for
// none).
func zoneCounts(voters []string, zones map[string]string, without string) map[string]int {
	out := map[string]int{}
	for _, v := range voters {
		if v != without {
			out[zones[v]]++
		}
	}
	return out
}

// interleaveZones orders nodes zone by zone in turn (the first node of each zone, in zone
// order, then the second of each, ...), each zone's nodes in the order given: consecutive
// nodes of the result are in distinct zones for as long as the zones last.
func interleaveZones(nodes []string, zones map[string]string) []string {
	by := map[string][]string{}
	order := distinctZones(nodes, zones)
	for _, nd := range nodes {
		by[zones[nd]] = append(by[zones[nd]], nd)
	}
	out := make([]string, 0, len(nodes))
	for i := 0; len(out) < len(nodes); i++ {
		for _, z := range order {
			if i < len(by[z]) {
				out = append(out, by[z][i])
			}
		}
	}
	return out
}

// pickZoned returns count nodes of order, starting at order[start] and going round, skipping a
// node whose zone already holds zoneCap(count, zones spanned by order) of the picked ones; when
// the skips leave too few, the skipped nodes fill in, in the same order. order must hold at
// least count nodes.
func pickZoned(order []string, zones map[string]string, start, count int) []string {
	limit := zoneCap(count, len(distinctZones(order, zones)))
	var picked, skipped []string
	held := map[string]int{}
	for k := range order {
		nd := order[(start+k)%len(order)]
		if len(picked) == count {
			break
		}
		if held[zones[nd]] >= limit {
			skipped = append(skipped, nd)
			continue
		}
		picked = append(picked, nd)
		held[zones[nd]]++
	}
	for _, nd := range skipped {
		if len(picked) == count {
			break
		}
		picked = append(picked, nd)
	}
	return picked
}

// zoneWarnings returns, for each partition of ps that breaks the zone rule, why: a zone holds
// a majority of its voters (more than one) while the nodes are zoned, or no voter is in its
// datastore's preferred leader zone (leaderZone, by datastore). nodes are the nodes placement
// could use; their zones (zones) say how many zones there were to spread over. Nodes without
// any zone produce no majority warning: zones are not in use.
func zoneWarnings(ps []placement, nodes []string, zones map[string]string, leaderZone map[string]string) []string {
	avail := distinctZones(nodes, zones)
	zoned := len(avail) > 1 || len(avail) == 1 && avail[0] != ""
	var out []string
	for _, p := range ps {
		if zoned && len(p.voters) > 1 {
			counts := zoneCounts(p.voters, zones, "")
			for _, z := range distinctZones(p.voters, zones) {
				if 2*counts[z] <= len(p.voters) {
					continue
				}
				why := fmt.Sprintf("the nodes span %d zones (%s)", len(avail), zoneList(avail))
				if len(avail) >= 3 {
					why = fmt.Sprintf("no node of another zone among %s could take a voter", zoneList(avail))
				}
				out = append(out, fmt.Sprintf("%s/%d: zone %s holds %d of %d voters, a majority: %s; losing that zone stops the partition",
					p.ds, p.pid, zoneName(z), counts[z], len(p.voters), why))
			}
		}
		if lz := leaderZone[p.ds]; lz != "" && !slices.ContainsFunc(p.voters, func(v string) bool { return zones[v] == lz }) {
			out = append(out, fmt.Sprintf("%s/%d: no voter is in the leader zone %s (voters in %s)", p.ds, p.pid, lz, zoneList(distinctZones(p.voters, zones))))
		}
	}
	return out
}

// catalogZoneWarning returns why the catalog's voters break the zone rule, "" when they do not:
// a zone holds a majority of them while the nodes span zones enough to avoid it (nodes).
func catalogZoneWarning(voters, nodes []string, zones map[string]string) string {
	avail := distinctZones(nodes, zones)
	if len(avail) < 2 || len(voters) < 2 {
		return ""
	}
	counts := zoneCounts(voters, zones, "")
	for _, z := range distinctZones(voters, zones) {
		if 2*counts[z] > len(voters) && zoneCap(len(voters), len(avail)) < counts[z] {
			return fmt.Sprintf("the catalog's voters %s: zone %s holds %d of %d, a majority; losing that zone stops datastore creation, splits and merges: move them (POST /v1/admin/catalog/voters) to nodes of %d zones",
				strings.Join(voters, ", "), zoneName(z), counts[z], len(voters), min(len(voters), len(avail)))
		}
	}
	return ""
}

// zoneName is z for messages: "(none)" for the unnamed zone.
func zoneName(z string) string {
	if z == "" {
		return "(none)"
	}
	return z
}

// zoneList joins zone names for messages.
func zoneList(zs []string) string {
	names := make([]string, len(zs))
	for i, z := range zs {
		names[i] = zoneName(z)
	}
	return strings.Join(names, ", ")
}

// placementWarnings returns zoneWarnings for the partitions of raft datastore spec as placed,
// against the nodes that gossip sees alive (every known node without gossip).
func (n *Node) placementWarnings(spec *topology.DatastoreSpec) []string {
	if spec.Mode != topology.ModeRaft {
		return nil
	}
	nodes := n.rebalanceNodes()
	var ps []placement
	all := slices.Clone(nodes)
	for _, p := range spec.Partitions {
		ps = append(ps, placement{ds: spec.Name, pid: p.ID, voters: p.Replicas})
		for _, r := range p.Replicas {
			if !slices.Contains(all, r) {
				all = append(all, r)
			}
		}
	}
	return zoneWarnings(ps, nodes, n.zonesOf(all), map[string]string{spec.Name: spec.LeaderZone})
}

// leaderZoneVoter returns a voter of cfg other than except in datastore ds's leader zone,
// one that gossip does not see dead, or "" when the datastore prefers no zone or no such
// voter is there.
func (n *Node) leaderZoneVoter(ds string, cfg PartitionConfig, except string) string {
	lz := n.leaderZoneOf(ds)
	if lz == "" {
		return ""
	}
	for _, v := range cfg.Voters() {
		if v != except && n.zoneOf(v) == lz && !n.nodeDown(v) {
			return v
		}
	}
	return ""
}

// keepsLeaderZone reports whether partition pid of ds, led here, should stay led here rather
// than move to spread the work: this node is in the datastore's leader zone and no other
// voter is.
func (n *Node) keepsLeaderZone(ctx context.Context, ds string, pid int) bool {
	lz := n.leaderZoneOf(ds)
	if lz == "" || n.self.Zone != lz {
		return false
	}
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	return err == nil && n.leaderZoneVoter(ds, cfg, n.self.ID) == ""
}

// leaderZoneEvery is how often a leader outside its datastore's leader zone tries to hand its
// leadership to a voter there (leaderZoneTick).
const leaderZoneEvery = 10 * time.Second

// leaderZoneTick hands the leadership of a partition this node leads, outside its datastore's
// leader zone, to a voter of that zone that gossip does not see dead (leaderZoneVoter): after a
// failure elected a leader elsewhere, leadership returns to the zone once a voter there is back,
// as CockroachDB's lease preferences do. It tries each partition at most every leaderZoneEvery
// (last: when, by partition), one transfer at a time on this node (busy, shared with the split and merge
// policies), in the background.
func (n *Node) leaderZoneTick(now time.Time, last map[recordKey]time.Time, busy chan struct{}) {
	for _, d := range n.datastores() {
		lz := d.spec.LeaderZone
		if d.spec.Mode != topology.ModeRaft || lz == "" || n.self.Zone == lz {
			continue
		}
		for _, r := range d.partitions {
			key := recordKey{d.spec.Name, r.spec.ID}
			p, ok := r.replica().(raftReplica)
			if !ok || !p.IsLeader() || now.Sub(last[key]) < leaderZoneEvery {
				continue
			}
			last[key] = now
			select {
			case busy <- struct{}{}:
			default:
				return
			}
			ds, pid := d.spec.Name, r.spec.ID
			go func() {
				defer func() { <-busy }()
				ctx, cancel := n.untilClose(context.Background())
				defer cancel()
				ctx, cancel2 := context.WithTimeout(ctx, leaderZoneEvery)
				defer cancel2()
				cfg, err := n.PartitionConfig(ctx, ds, pid)
				if err != nil {
					return
				}
				to := n.leaderZoneVoter(ds, cfg, n.self.ID)
				if to == "" {
					return
				}
				if _, err := n.TransferLeadership(ctx, ds, pid, to); err != nil {
					n.log.Warn("leader zone: moving the leadership there", "datastore", ds, "partition", pid, "zone", lz, "to", to, "error", err)
					return
				}
				n.log.Info("leader zone: leadership moved there", "datastore", ds, "partition", pid, "zone", lz, "to", to)
			}()
			return
		}
	}
}
