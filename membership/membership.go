package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Membership is this node's gossip membership: a running memberlist plus the view built from it
// (Members). Its methods are safe for concurrent use. Create it with Start, stop it with Close
// (after Leave for a graceful exit).
type Membership struct {
	cfg      Config // defaults applied
	log      *slog.Logger
	list     *memberlist.Memberlist
	listPtr  atomic.Pointer[memberlist.Memberlist] // list, for delegates called during Create
	queue    *memberlist.TransmitLimitedQueue
	meta     []byte // Meta as JSON, the node meta
	epoch    int64  // this process's start time, Unix ns (nodeState.Epoch)
	maxBcast int    // largest state message sent as a UDP broadcast; larger ones go by TCP

	// localMu serializes cfg.Replicas calls with the versioning of this node's state. It is
	// taken before mu, never after.
	localMu sync.Mutex
	seq     uint64 // guarded by localMu
	leaving bool   // guarded by localMu

	mu  sync.Mutex
	tab *table // guarded by mu

	lifeMu  sync.Mutex // orders memberlist's Leave and Shutdown (Leave after Shutdown panics)
	closed  atomic.Bool
	left    atomic.Bool
	closing chan struct{}
	wg      sync.WaitGroup
	changed chan struct{} // cap 1: an OnChange call is due
	sendNow chan struct{} // cap 1: this node's state is too big to broadcast: send it by TCP
}

// Start validates cfg, binds Meta.GossipAddr (or BindAddr) for UDP and TCP, and starts gossip.
// It returns once memberlist runs, without waiting for the join: a background goroutine joins
// through cfg.Seeds, retrying until one answers (see Config.ReconnectInterval). Errors: a
// Config violation (errors.Is ErrInvalidConfig), or memberlist's failure to bind or start,
// wrapped.
func Start(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	mc, err := cfg.memberlistConfig()
	if err != nil {
		return nil, err
	}
	meta, err := encodeMeta(cfg.Meta)
	if err != nil {
		return nil, err
	}
	m := &Membership{
		cfg:      cfg,
		log:      cfg.Logger,
		meta:     meta,
		epoch:    time.Now().UnixNano(),
		maxBcast: mc.UDPBufferSize - 300,
		tab:      newTable(cfg.Meta.ID),
		closing:  make(chan struct{}),
		changed:  make(chan struct{}, 1),
		sendNow:  make(chan struct{}, 1),
	}
	m.queue = &memberlist.TransmitLimitedQueue{
		NumNodes: func() int {
			if l := m.listPtr.Load(); l != nil {
				return l.NumMembers()
			}
			return 1
		},
		RetransmitMult: mc.RetransmitMult,
	}
	m.updateLocal(true)
	d := &delegate{m}
	mc.Delegate, mc.Events = d, d
	list, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("membership: start memberlist on %s: %w", cfg.Meta.GossipAddr, err)
	}
	m.list = list
	m.listPtr.Store(list)

	var seeds []string
	for _, s := range cfg.Seeds {
		if s != cfg.Meta.GossipAddr && !slices.Contains(seeds, s) {
			seeds = append(seeds, s)
		}
	}
	m.wg.Add(2)
	go m.joinLoop(seeds)
	go m.sendLoop()
	if cfg.OnChange != nil {
		m.wg.Add(1)
		go m.notifyLoop()
	}
	return m, nil
}

// Self returns this node as this node sees it, with the replicas it last gossiped (not a fresh
// Config.Replicas call). Its State is StateAlive until Leave ("left" after it).
func (m *Membership) Self() Member {
	mem, _ := m.Member(m.cfg.Meta.ID)
	return mem
}

// Members returns every node known, this one included, sorted by ID. Dead and left members are
// kept, with their last replicas, so that status can show them; a node restarting with the same
// ID replaces its entry. The caller owns the slice.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tab.members()
}

// Member returns the node with the given ID, and whether it is known.
func (m *Membership) Member(id string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tab.member(id)
}

// Alive reports whether the node is known and StateAlive. It is a hint: a node crashed a moment
// ago is still alive here until memberlist's suspicion times out.
func (m *Membership) Alive(id string) (alive, known bool) {
	mem, ok := m.Member(id)
	return ok && mem.State == StateAlive, ok
}

// Hosting returns the alive members (this node included) whose last gossiped replicas include
// the partition: leaders first (two leaders can show while a change propagates), then by
// applied index, highest first, then by ID. It is a routing hint, empty when nobody is known to
// host the partition.
func (m *Membership) Hosting(datastore string, partition int) []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tab.hosting(datastore, partition)
}

// Refresh tells the cluster that this node's replicas changed (hosting or leadership): it calls
// Config.Replicas, versions the result, and queues it for gossip at once rather than at the next
// push/pull. A state that fits a UDP packet (about 40 replicas) is broadcast, reaching every node
// within a few GossipIntervals; a bigger one is sent to every alive member over TCP in the
// background. It does not block on the network. Refresh after Close does nothing.
func (m *Membership) Refresh() {
	if m.closed.Load() {
		return
	}
	m.publish(m.updateLocal(true))
}

// Leave announces a graceful leave, so that the others report this node StateLeft rather than
// StateDead. It marks this node's state as leaving and sends it to every alive member over TCP,
// then runs memberlist's leave, which blocks until the leave message is broadcast or timeout
// passes (timeout <= 0: no bound). Gossip keeps running: call Close next. Errors: ErrClosed after
// Close, or memberlist's leave failure (a timeout), wrapped; a member that did not receive the
// direct send still learns of the leave through memberlist (it then may report the node dead
// until a push/pull brings the leave flag).
func (m *Membership) Leave(timeout time.Duration) error {
	if m.closed.Load() {
		return ErrClosed
	}
	start := time.Now()
	m.left.Store(true)
	m.localMu.Lock()
	m.leaving = true
	m.localMu.Unlock()
	s := m.updateLocal(true)
	sendBy := start.Add(m.cfg.TCPTimeout)
	if timeout > 0 && timeout < m.cfg.TCPTimeout {
		sendBy = start.Add(timeout)
	}
	m.sendDirect(s, sendBy)
	remaining := time.Duration(0)
	if timeout > 0 {
		if remaining = timeout - time.Since(start); remaining <= 0 {
			remaining = time.Millisecond
		}
	}
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed.Load() {
		return ErrClosed
	}
	if err := m.list.Leave(remaining); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// Close stops gossip without leaving: the others report this node StateDead once their
// suspicion times out. It waits for this package's goroutines, which can take up to TCPTimeout
// while a join attempt is in flight; OnChange is not called after Close returns. Close is
// idempotent; later calls return nil. The view (Members) stays readable, frozen.
func (m *Membership) Close() error {
	m.lifeMu.Lock()
	if m.closed.Swap(true) {
		m.lifeMu.Unlock()
		return nil
	}
	err := m.list.Shutdown()
	m.lifeMu.Unlock()
	close(m.closing)
	m.wg.Wait()
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}

// updateLocal calls Config.Replicas and installs this node's state, with a new version when
// force is set or the state differs from the last one. It returns the current state.
func (m *Membership) updateLocal(force bool) nodeState {
	m.localMu.Lock()
	defer m.localMu.Unlock()
	var reps []Replica
	if m.cfg.Replicas != nil {
		reps = slices.Clone(m.cfg.Replicas())
	}
	m.mu.Lock()
	cur, ok := m.tab.local()
	changed := false
	if force || !ok || cur.Leaving != m.leaving || !slices.Equal(cur.Replicas, reps) {
		m.seq++
		cur = nodeState{ID: m.cfg.Meta.ID, Epoch: m.epoch, Seq: m.seq, Leaving: m.leaving, Replicas: reps}
		changed = m.tab.setLocal(cur, time.Now())
	}
	m.mu.Unlock()
	if changed {
		m.notify()
	}
	return cur
}

// publish queues one node's state for gossip: a UDP broadcast when it fits, else (this node's
// own state only) a TCP send to every alive member.
func (m *Membership) publish(s nodeState) {
	msg, err := encodeStates([]nodeState{s})
	if err != nil {
		m.log.Warn("membership: cannot publish state", "node", s.ID, "err", err)
		return
	}
	if len(msg) <= m.maxBcast {
		m.queue.QueueBroadcast(&stateBroadcast{name: "state/" + s.ID, msg: msg})
		return
	}
	if s.ID == m.cfg.Meta.ID {
		select {
		case m.sendNow <- struct{}{}:
		default:
		}
	}
}

// sendDirect sends s over TCP to every other alive member, in parallel, and waits until all
// sends end or deadline passes (the sends themselves are bounded by TCPTimeout). Failures are
// logged: push/pull repairs them.
func (m *Membership) sendDirect(s nodeState, deadline time.Time) {
	msg, err := encodeStates([]nodeState{s})
	if err != nil {
		m.log.Warn("membership: cannot send state", "err", err)
		return
	}
	var targets []Meta
	m.mu.Lock()
	for _, mem := range m.tab.members() {
		if mem.ID != m.cfg.Meta.ID && mem.State == StateAlive {
			targets = append(targets, mem.Meta)
		}
	}
	m.mu.Unlock()
	done := make(chan struct{}, len(targets))
	for _, t := range targets {
		go func() {
			defer func() { done <- struct{}{} }()
			node, err := nodeFor(t)
			if err == nil {
				err = m.list.SendReliable(node, msg)
			}
			if err != nil {
				m.log.Debug("membership: direct state send failed", "to", t.ID, "addr", t.GossipAddr, "err", err)
			}
		}()
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for range targets {
		select {
		case <-done:
		case <-timer.C:
			return
		}
	}
}

// nodeFor makes the memberlist.Node that SendReliable needs from a member's announced address
// (not from memberlist's own Node, whose fields memberlist may change concurrently).
func nodeFor(meta Meta) (*memberlist.Node, error) {
	host, ps, err := net.SplitHostPort(meta.GossipAddr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, errors.New("no address")
		}
		ip = ips[0]
	}
	return &memberlist.Node{Name: meta.ID, Addr: ip, Port: uint16(port)}, nil
}

// notify schedules an OnChange call.
func (m *Membership) notify() {
	if m.cfg.OnChange == nil {
		return
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

func (m *Membership) notifyLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.closing:
			return
		case <-m.changed:
			select {
			case <-m.closing:
				return
			default:
			}
			m.cfg.OnChange()
		}
	}
}

func (m *Membership) sendLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.closing:
			return
		case <-m.sendNow:
			m.mu.Lock()
			s, _ := m.tab.local()
			m.mu.Unlock()
			m.sendDirect(s, time.Now().Add(m.cfg.TCPTimeout))
		}
	}
}

// joinLoop joins through the seeds, retrying with a backoff from ProbeInterval up to
// ReconnectInterval until one answers; then, every ReconnectInterval, it rejoins through the
// last addresses of dead members, so that gossip heals after a partition. It stops at Close or
// Leave.
func (m *Membership) joinLoop(seeds []string) {
	defer m.wg.Done()
	maxWait := m.cfg.ReconnectInterval
	if maxWait <= 0 {
		maxWait = DefaultConfig().ReconnectInterval
	}
	wait := min(m.cfg.ProbeInterval, maxWait)
	joined := len(seeds) == 0
	for {
		if m.left.Load() {
			return
		}
		if !joined {
			if n, err := m.list.Join(seeds); n > 0 {
				joined = true
				m.log.Debug("membership: joined", "seeds", seeds, "answered", n)
			} else if !m.closed.Load() {
				m.log.Warn("membership: join failed, retrying", "seeds", seeds, "retry_in", wait, "err", err)
			}
		} else {
			if m.cfg.ReconnectInterval < 0 {
				return
			}
			wait = m.cfg.ReconnectInterval
			if targets := m.deadAddrs(); len(targets) > 0 {
				if n, err := m.list.Join(targets); n > 0 {
					m.log.Debug("membership: reconnected", "targets", targets, "answered", n)
				} else {
					m.log.Debug("membership: reconnect found no dead member", "targets", targets, "err", err)
				}
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-m.closing:
			t.Stop()
			return
		case <-t.C:
		}
		if !joined {
			wait = min(2*wait, maxWait)
		}
	}
}

// deadAddrs returns the gossip addresses of dead (not left) members.
func (m *Membership) deadAddrs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, mem := range m.tab.members() {
		if mem.State == StateDead && mem.GossipAddr != "" && mem.GossipAddr != m.cfg.Meta.GossipAddr {
			out = append(out, mem.GossipAddr)
		}
	}
	return out
}
