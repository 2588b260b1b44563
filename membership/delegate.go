package membership

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate receives memberlist's callbacks. memberlist calls the EventDelegate methods while
// holding its node lock, and the Delegate methods from its UDP and TCP goroutines: none of them
// calls back into memberlist, and each takes Membership.mu only briefly (mu is never held while
// calling memberlist, so the lock order is memberlist's, then mu).
type delegate struct{ m *Membership }

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
)

// NodeMeta returns Meta as JSON (Start checked it fits MetaMaxSize).
func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.m.meta) > limit {
		return nil
	}
	return d.m.meta
}

// NotifyMsg receives a user message: a broadcast or a direct send of replica states. A state
// newer than the one held is kept and re-broadcast (epidemic gossip: memberlist does not relay
// user broadcasts by itself).
func (d *delegate) NotifyMsg(buf []byte) {
	states, err := decodeStates(buf)
	if err != nil {
		d.m.log.Debug("membership: dropped message", "err", err)
		return
	}
	now := time.Now()
	var fresh []nodeState
	anyChange := false
	d.m.mu.Lock()
	for _, s := range states {
		newer, changed := d.m.tab.merge(s, now)
		if newer {
			fresh = append(fresh, s)
		}
		anyChange = anyChange || changed
	}
	d.m.mu.Unlock()
	for _, s := range fresh {
		d.m.publish(s)
	}
	if anyChange {
		d.m.notify()
	}
}

// GetBroadcasts hands memberlist the queued state broadcasts.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.m.queue.GetBroadcasts(overhead, limit)
}

// LocalState returns every replica state this node holds (its own refreshed through
// Config.Replicas), for a push/pull or a join.
func (d *delegate) LocalState(join bool) []byte {
	d.m.updateLocal(false)
	d.m.mu.Lock()
	states := d.m.tab.states()
	d.m.mu.Unlock()
	buf, err := encodeStates(states)
	if err != nil {
		d.m.log.Warn("membership: cannot encode local state", "err", err)
		return nil
	}
	return buf
}

// MergeRemoteState keeps the remote's states that are newer than the ones held.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	states, err := decodeStates(buf)
	if err != nil {
		d.m.log.Debug("membership: dropped remote state", "err", err)
		return
	}
	now := time.Now()
	anyChange := false
	d.m.mu.Lock()
	for _, s := range states {
		_, changed := d.m.tab.merge(s, now)
		anyChange = anyChange || changed
	}
	d.m.mu.Unlock()
	if anyChange {
		d.m.notify()
	}
}

// NotifyJoin records a node memberlist reports alive: a new node, or one back from dead or left
// (a restart, maybe at another address).
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.alive(n) }

// NotifyUpdate records a node's new meta.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.alive(n) }

// NotifyLeave records a node memberlist declared dead or left; the leave flag of its replica
// state tells which (memberlist does not say).
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	d.m.mu.Lock()
	changed := d.m.tab.down(n.Name, time.Now())
	d.m.mu.Unlock()
	if changed {
		d.m.notify()
	}
}

func (d *delegate) alive(n *memberlist.Node) {
	meta, err := decodeMeta(n.Meta)
	if err != nil || meta.ID != n.Name {
		d.m.log.Warn("membership: member announces unreadable meta", "node", n.Name, "addr", n.Address(), "err", err, "meta_id", meta.ID)
		if meta.GossipAddr == "" {
			meta.GossipAddr = n.Address()
		}
		meta.ID = n.Name
	}
	d.m.mu.Lock()
	changed := d.m.tab.join(meta, time.Now())
	d.m.mu.Unlock()
	if changed {
		d.m.notify()
	}
}

// stateBroadcast is one node's state queued for gossip. A newer state of the same node replaces
// a queued one (memberlist matches NamedBroadcasts by name).
type stateBroadcast struct {
	name string
	msg  []byte
}

var _ memberlist.NamedBroadcast = (*stateBroadcast)(nil)

func (b *stateBroadcast) Name() string    { return b.name }
func (b *stateBroadcast) Message() []byte { return b.msg }
func (b *stateBroadcast) Finished()       {}
func (b *stateBroadcast) Invalidates(o memberlist.Broadcast) bool {
	nb, ok := o.(memberlist.NamedBroadcast)
	return ok && nb.Name() == b.name
}
