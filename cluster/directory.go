package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/membership"
	"github.com/schemaless-db/schemaless/topology"
)

// Version is the node software's version, gossiped to the other nodes.
var Version = "dev"

// directory holds the addresses of nodes that are not in the topology, learned from raft
// configurations and from other nodes' answers.
type directory struct {
	mu      sync.RWMutex
	learned map[string]topology.NodeSpec
}

// nodeSpec returns the addresses of node id: this node's own, the topology's, gossip's, or
// those learned from raft (raft address only).
func (n *Node) nodeSpec(id string) (topology.NodeSpec, bool) {
	if id == n.self.ID {
		return n.self, true
	}
	if s, ok := n.cfg.Topology.Node(id); ok {
		return s, true
	}
	if n.gossip != nil {
		if m, ok := n.gossip.Member(id); ok && m.RaftAddr != "" {
			return topology.NodeSpec{ID: id, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, GossipAddr: m.GossipAddr, Zone: m.Zone}, true
		}
	}
	n.dir.mu.RLock()
	defer n.dir.mu.RUnlock()
	s, ok := n.dir.learned[id]
	return s, ok
}

// learnAddr records the raft address of node id (from a raft configuration or an answer).
func (n *Node) learnAddr(id, raftAddr string) {
	if id == "" || raftAddr == "" {
		return
	}
	if _, ok := n.cfg.Topology.Node(id); ok || id == n.self.ID {
		return
	}
	n.dir.mu.Lock()
	defer n.dir.mu.Unlock()
	if n.dir.learned == nil {
		n.dir.learned = map[string]topology.NodeSpec{}
	}
	s := n.dir.learned[id]
	if s.RaftAddr != raftAddr {
		s.ID, s.RaftAddr = id, raftAddr
		n.dir.learned[id] = s
	}
}

// startGossip joins the cluster's gossip (hashicorp/memberlist) when the node has a gossip
// address: it announces this node's addresses and the replicas it hosts and leads.
func (n *Node) startGossip() error {
	if n.self.GossipAddr == "" {
		return nil
	}
	seeds := n.cfg.Join
	if len(seeds) == 0 {
		for _, s := range n.cfg.Topology.Nodes {
			if s.GossipAddr != "" && s.ID != n.self.ID {
				seeds = append(seeds, s.GossipAddr)
			}
		}
	}
	mc := membership.DefaultConfig()
	mc.Meta = membership.Meta{ID: n.self.ID, HTTPAddr: n.self.HTTPAddr, RaftAddr: n.self.RaftAddr, GossipAddr: n.self.GossipAddr, Version: Version, Zone: n.self.Zone}
	mc.BindAddr = n.cfg.GossipBindAddr
	mc.Seeds = seeds
	mc.Replicas = n.gossipReplicas
	mc.Logger = n.log
	mc.Keys = n.cfg.GossipKeys
	var started atomic.Pointer[membership.Membership]
	mc.OnChange = n.gossipWatch(&started)
	g, err := membership.Start(mc)
	if err != nil {
		return err
	}
	n.gossip = g
	started.Store(g)
	n.live.Store(g)
	return nil
}

// gossipReplicas returns the replicas this node hosts, for gossip.
func (n *Node) gossipReplicas() []membership.Replica {
	var out []membership.Replica
	for _, d := range n.datastores() {
		for _, r := range d.partitions {
			p := r.replica()
			if p == nil {
				continue
			}
			st := p.Status().Raft
			out = append(out, membership.Replica{Datastore: d.spec.Name, Partition: r.spec.ID, Leader: p.IsLeader(), AppliedIndex: st.AppliedIndex})
		}
	}
	return out
}

// refreshGossip gossips this node's replicas now (hosting or leadership changed).
func (n *Node) refreshGossip() {
	if n.gossip != nil {
		n.gossip.Refresh()
	}
}

// Member is a node as this node knows it: its addresses, its state in gossip ("alive",
// "dead", "left"; "unknown" without gossip) and the replicas it last announced.
type Member struct {
	ID         string               `json:"id"`
	HTTPAddr   string               `json:"http_addr"`
	RaftAddr   string               `json:"raft_addr"`
	GossipAddr string               `json:"gossip_addr,omitempty"`
	Version    string               `json:"version,omitempty"`
	Zone       string               `json:"zone,omitempty"`
	State      string               `json:"state"`
	Replicas   []membership.Replica `json:"replicas"`
	UpdatedAt  time.Time            `json:"updated_at"`
}

// Members returns every node known: gossip's members, then topology nodes gossip has not
// seen (state "unknown"), sorted as gossip sorts them (by id). Without gossip, the topology's
// nodes, this node's replicas on itself and "unknown" elsewhere.
func (n *Node) Members() []Member {
	var out []Member
	seen := map[string]bool{}
	if n.gossip != nil {
		for _, m := range n.gossip.Members() {
			seen[m.ID] = true
			out = append(out, Member{ID: m.ID, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: m.GossipAddr, Version: m.Version, Zone: m.Zone,
				State: m.State, Replicas: m.Replicas, UpdatedAt: m.UpdatedAt})
		}
	}
	add := func(s topology.NodeSpec) {
		if seen[s.ID] {
			return
		}
		seen[s.ID] = true
		m := Member{ID: s.ID, HTTPAddr: s.HTTPAddr, RaftAddr: s.RaftAddr, GossipAddr: s.GossipAddr, Zone: s.Zone, State: "unknown"}
		if s.ID == n.self.ID {
			m.State, m.Version, m.Replicas = membership.StateAlive, Version, n.gossipReplicas()
		}
		out = append(out, m)
	}
	add(n.self)
	for _, s := range n.cfg.Topology.Nodes {
		add(s)
	}
	n.dir.mu.RLock()
	for _, s := range n.dir.learned {
		add(s)
	}
	n.dir.mu.RUnlock()
	return out
}

// Leave announces this node's departure to the gossip (the others see it "left") and stops
// gossiping. Call it after draining the node, before stopping it. No-op without gossip.
func (n *Node) Leave(timeout time.Duration) error {
	if n.gossip == nil {
		return nil
	}
	return n.gossip.Leave(timeout)
}
