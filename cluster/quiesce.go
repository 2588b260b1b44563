package cluster

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/membership"
)

// Idle raft partitions quiesce (partition.Config.QuiesceAfter, third_party/raft/quiesce.go):
// their leader stops heartbeating and their followers stop their election timers. A quiesced
// follower therefore needs to be told when its leader is gone, and gossip is the node-level
// liveness signal that tells it: when a node's gossip state leaves "alive" (memberlist declared
// it dead, or it left), every quiesced replica here whose leader is that node is woken, and
// elects a new leader within an election timeout unless the leader speaks first. A failed
// forward to a leader wakes this node's replica of the partition too (callLeader). Without
// gossip there is no such signal, and the node's partitions never quiesce. Gossip also lets a
// leader quiesce with followers on dead nodes (nodeDown), which a node that comes back wakes
// with its first RPC; and when gossip reports such a node alive again, this node wakes the
// quiesced replicas it leads (wakeLeaders), for a replica there that sends nothing: a leader of
// an older term, paused or cut off while quiesced.

// nodeDown reports whether gossip knows node id and does not report it alive: a leader then
// quiesces without waiting for its replica there (partition.Config.QuiesceDown). Before gossip
// started, or without it, no node is down.
func (n *Node) nodeDown(id string) bool {
	m := n.live.Load()
	if m == nil {
		return false
	}
	alive, known := m.Alive(id)
	return known && !alive
}

// quiesceAfter returns how long this node's raft partitions stay idle before they quiesce:
// the configured partition.Config.QuiesceAfter with gossip, 0 (never) without. (The node's
// first replicas open before its gossip starts: the gossip address decides.)
func (n *Node) quiesceAfter() time.Duration {
	if n.self.GossipAddr == "" {
		return 0
	}
	return n.cfg.Partition.QuiesceAfter
}

// gossipWatch returns the membership.Config.OnChange of this node: once g holds the started
// membership, it wakes the replicas of dead leaders (wakeOrphans), and every quiesced replica
// this node leads when a node gossip reported down is alive again (wakeLeaders). OnChange calls
// come from one goroutine, which alone touches down.
func (n *Node) gossipWatch(g *atomic.Pointer[membership.Membership]) func() {
	down := map[string]bool{} // the nodes reported down at the last call
	return func() {
		m := g.Load()
		if m == nil {
			return
		}
		n.wakeOrphans(m)
		var back []string
		back, down = returnedNodes(down, m.Members(), n.cfg.NodeID)
		if len(back) > 0 {
			n.wakeLeaders(back)
		}
	}
}

// returnedNodes compares members (gossip's view now) with down (the nodes other than self it
// reported down before): it returns the nodes of down that are alive now, sorted, and the nodes
// other than self reported down now.
func returnedNodes(down map[string]bool, members []membership.Member, self string) (back []string, now map[string]bool) {
	now = map[string]bool{}
	for _, m := range members {
		switch {
		case m.ID == self:
		case m.State != membership.StateAlive:
			now[m.ID] = true
		case down[m.ID]:
			back = append(back, m.ID)
		}
	}
	slices.Sort(back)
	return back, now
}

// wakeLeaders wakes every quiesced replica this node leads, because the nodes back were
// reported down and are alive again. While a node was down, a leader here quiesced without its
// replica there and stopped sending to it; that replica, if it led the partition before its
// node was paused or cut off, is itself a quiesced leader of an older term that hears from
// nobody, and keeps claiming the partition behind the commit index until the next write. Woken,
// a leader here heartbeats every follower alive, so that replica learns the newer term, steps
// down and catches up (partition's TestQuiescedLeaderCutOffLearnsTheNewerTerm); a follower there
// learns the commit index. The leaders quiesce again once idle.
func (n *Node) wakeLeaders(back []string) {
	woken := 0
	for _, d := range n.datastores() {
		for _, r := range d.partitions {
			if p := r.replica(); p != nil && p.Quiesced() && p.IsLeader() {
				p.Wake()
				woken++
			}
		}
	}
	if woken > 0 {
		n.log.Info("partition: waking the quiesced replicas this node leads: gossip reports nodes back", "nodes", back, "replicas", woken)
	}
}

// wakeOrphans wakes every quiesced replica this node hosts whose leader's node m knows and
// does not report alive.
func (n *Node) wakeOrphans(m *membership.Membership) {
	for _, d := range n.datastores() {
		for _, r := range d.partitions {
			p := r.replica()
			if p == nil || !p.Quiesced() {
				continue
			}
			id, _ := p.Leader()
			if id == "" || id == n.cfg.NodeID {
				continue
			}
			if alive, known := m.Alive(id); known && !alive {
				n.log.Info("partition: waking a quiesced replica: gossip reports its leader's node down",
					"datastore", d.spec.Name, "partition", r.spec.ID, "leader", id)
				p.Wake()
			}
		}
	}
}

// wakeLocal wakes this node's replica of r when it is quiesced: a forward to the leader it
// follows failed.
func wakeLocal(r *route) {
	if p := r.replica(); p != nil && p.Quiesced() {
		p.Wake()
	}
}
