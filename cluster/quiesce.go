package cluster

import (
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
// with its first RPC.

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

// gossipWatch returns the membership.Config.OnChange of this node: it wakes the replicas of
// dead leaders once g holds the started membership.
func (n *Node) gossipWatch(g *atomic.Pointer[membership.Membership]) func() {
	return func() {
		if m := g.Load(); m != nil {
			n.wakeOrphans(m)
		}
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
