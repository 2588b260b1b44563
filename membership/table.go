package membership

import (
	"slices"
	"sort"
	"time"
)

// Member states, the values of Member.State.
const (
	// StateAlive is a node memberlist counts as a member: it answers probes, or it is suspected
	// but its suspicion has not yet timed out (see the package doc, "Suspicion").
	StateAlive = "alive"
	// StateSuspect is never reported by this version: memberlist v0.5.4 does not expose its
	// suspicion to the application. The constant exists so that status code can name every state.
	StateSuspect = "suspect"
	// StateDead is a node memberlist declared failed (its suspicion timed out) without the node
	// having announced a leave.
	StateDead = "dead"
	// StateLeft is a node that announced a graceful leave (Membership.Leave) and then stopped
	// answering, or a dead node whose leave announcement reached this node.
	StateLeft = "left"
)

// Meta is what a node announces about itself. It travels in memberlist's node meta, so its JSON
// form must fit in 512 bytes (Start checks).
type Meta struct {
	ID         string `json:"id"`
	HTTPAddr   string `json:"http_addr"`
	RaftAddr   string `json:"raft_addr"`
	GossipAddr string `json:"gossip_addr"`
	Version    string `json:"version"`
	// Zone is the node's failure domain (topology.NodeSpec.Zone), "" for none.
	Zone string `json:"zone,omitempty"`
}

// Replica is one partition replica a node hosts, as that node last gossiped it.
type Replica struct {
	Datastore    string `json:"datastore"`
	Partition    int    `json:"partition"`
	Leader       bool   `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
}

// Member is a node as gossip sees it. A Member is a copy: the caller owns its Replicas slice.
type Member struct {
	Meta
	State     string    `json:"state"`      // StateAlive, StateDead or StateLeft (see StateSuspect)
	Replicas  []Replica `json:"replicas"`   // as last gossiped by that node
	UpdatedAt time.Time `json:"updated_at"` // when this node last learned of a change of that member
}

// nodeState is one node's replica state as that node announced it. (Epoch, Seq) orders the
// states of one node: Epoch is the announcing process's start time in Unix nanoseconds (so a
// restarted process outranks its previous life), Seq counts its changes within the process.
type nodeState struct {
	ID       string
	Epoch    int64
	Seq      uint64
	Leaving  bool // the node announced a graceful leave
	Replicas []Replica
}

// newerThan reports whether s supersedes o, both states of the same node.
func (s nodeState) newerThan(o nodeState) bool {
	if s.Epoch != o.Epoch {
		return s.Epoch > o.Epoch
	}
	return s.Seq > o.Seq
}

// entry is what the table knows of one node.
type entry struct {
	meta      Meta
	known     bool // memberlist reported the node (NotifyJoin) at least once
	down      bool // memberlist's last word was NotifyLeave (dead or left)
	hasState  bool // a replica state arrived
	state     nodeState
	updatedAt time.Time
}

// table is the membership view: memberlist's liveness events and the nodes' replica states,
// merged. It is pure (no I/O, no locking, the caller passes the time) so the merge rules can be
// tested alone; Membership guards it with its mutex. Every mutator reports whether a member's
// visible state, meta or replicas changed.
type table struct {
	self    string
	entries map[string]*entry
}

func newTable(self string) *table {
	return &table{self: self, entries: make(map[string]*entry)}
}

func (t *table) get(id string) *entry {
	e, ok := t.entries[id]
	if !ok {
		e = &entry{}
		t.entries[id] = e
	}
	return e
}

// join records that memberlist reports the node alive with meta (NotifyJoin, or NotifyUpdate
// which also implies alive). A node that comes back from dead or left loses its leave flag:
// the flag belonged to its previous life.
func (t *table) join(meta Meta, now time.Time) bool {
	e := t.get(meta.ID)
	changed := !e.known || e.down || e.meta != meta
	if e.down {
		e.state.Leaving = false
	}
	e.meta, e.known, e.down = meta, true, false
	if changed {
		e.updatedAt = now
	}
	return changed
}

// down records that memberlist reports the node dead or left (NotifyLeave).
func (t *table) down(id string, now time.Time) bool {
	e, ok := t.entries[id]
	if !ok || !e.known || e.down {
		return false
	}
	e.down = true
	e.updatedAt = now
	return true
}

// merge keeps s if it is newer than the node's current state. States of unknown nodes are kept
// (they become visible when the node joins). States about this node from others are ignored:
// this node is the authority on its own state (setLocal).
func (t *table) merge(s nodeState, now time.Time) (newer, changed bool) {
	if s.ID == "" || s.ID == t.self {
		return false, false
	}
	return t.put(s, now)
}

// setLocal installs this node's own state; the caller orders its versions.
func (t *table) setLocal(s nodeState, now time.Time) bool {
	_, changed := t.put(s, now)
	return changed
}

func (t *table) put(s nodeState, now time.Time) (newer, changed bool) {
	e := t.get(s.ID)
	if e.hasState && !s.newerThan(e.state) {
		return false, false
	}
	old, had := e.state, e.hasState
	s.Replicas = slices.Clone(s.Replicas)
	e.state, e.hasState = s, true
	changed = e.known && (!had || old.Leaving != s.Leaving || !slices.Equal(old.Replicas, s.Replicas))
	if changed {
		e.updatedAt = now
	}
	return true, changed
}

// states returns a copy of every replica state held, for push/pull.
func (t *table) states() []nodeState {
	out := make([]nodeState, 0, len(t.entries))
	for _, e := range t.entries {
		if e.hasState {
			out = append(out, e.state)
		}
	}
	return out
}

func (t *table) local() (nodeState, bool) {
	e, ok := t.entries[t.self]
	if !ok || !e.hasState {
		return nodeState{}, false
	}
	return e.state, true
}

func (t *table) member(id string) (Member, bool) {
	e, ok := t.entries[id]
	if !ok || !e.known {
		return Member{}, false
	}
	m := Member{Meta: e.meta, State: StateAlive, UpdatedAt: e.updatedAt}
	if e.down {
		m.State = StateDead
		if e.state.Leaving {
			m.State = StateLeft
		}
	}
	if e.hasState {
		m.Replicas = slices.Clone(e.state.Replicas)
	}
	return m, true
}

func (t *table) members() []Member {
	out := make([]Member, 0, len(t.entries))
	for id := range t.entries {
		if m, ok := t.member(id); ok {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// hosting returns the alive members whose replicas include the partition: leaders first, then
// by applied index (highest first), then by ID.
func (t *table) hosting(datastore string, partition int) []Member {
	type hit struct {
		m Member
		r Replica
	}
	var hits []hit
	for _, m := range t.members() {
		if m.State != StateAlive {
			continue
		}
		for _, r := range m.Replicas {
			if r.Datastore == datastore && r.Partition == partition {
				hits = append(hits, hit{m, r})
				break
			}
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i].r, hits[j].r
		if a.Leader != b.Leader {
			return a.Leader
		}
		return a.AppliedIndex > b.AppliedIndex
	})
	out := make([]Member, len(hits))
	for i, h := range hits {
		out[i] = h.m
	}
	return out
}
