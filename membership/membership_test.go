package membership

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --- helpers ---

// tlog is a slog writer into t.Log that goes quiet when the test ends (memberlist's goroutines
// may log after Shutdown returns, and t.Log after the end panics).
type tlog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tlog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	w := &tlog{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() }) // runs after the nodes' Close
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// freePort returns a port that was free for both TCP and UDP on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err, "listen tcp")
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return port
	}
	require.FailNow(t, "no port free for both TCP and UDP")
	return 0
}

// replicaSource is a settable Config.Replicas.
type replicaSource struct {
	mu   sync.Mutex
	reps []Replica
}

func (s *replicaSource) set(r ...Replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reps = r
}

func (s *replicaSource) get() []Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reps
}

type node struct {
	*Membership
	cfg  Config
	reps *replicaSource
}

// startNode starts a node on 127.0.0.1 with a free port, retrying on bind failures; it is closed
// at the test's end. mod may adjust the Config.
func startNode(t *testing.T, log *slog.Logger, id string, seeds []string, mod func(*Config)) node {
	t.Helper()
	reps := &replicaSource{}
	var lastErr error
	for range 5 {
		port := freePort(t)
		cfg := Config{
			Meta: Meta{
				ID:         id,
				HTTPAddr:   fmt.Sprintf("127.0.0.1:%d", port+1),
				RaftAddr:   fmt.Sprintf("127.0.0.1:%d", port+2),
				GossipAddr: fmt.Sprintf("127.0.0.1:%d", port),
				Version:    "test",
			},
			Seeds:    seeds,
			Replicas: reps.get,
			Logger:   log.With("node", id),
		}
		if mod != nil {
			mod(&cfg)
		}
		m, err := Start(cfg)
		if err != nil {
			lastErr = err
			if strings.Contains(err.Error(), "address already in use") {
				continue
			}
			require.NoError(t, err, "Start(%s)", id)
		}
		t.Cleanup(func() { m.Close() })
		return node{m, cfg, reps}
	}
	require.NoError(t, lastErr, "Start(%s): every port tried was in use", id)
	return node{}
}

// Gossip waits: how long a condition may take, and how often it is checked.
const (
	converge = 2 * time.Second  // a Refresh reaching every node
	detect   = 10 * time.Second // a join, a failure or a restart noticed
	tick     = 20 * time.Millisecond
)

// assertSees checks that m knows want.ID with the given state and meta.
func assertSees(t assert.TestingT, m *Membership, want Meta, state string) bool {
	got, ok := m.Member(want.ID)
	if !assert.True(t, ok, "%s: member %s unknown", m.cfg.Meta.ID, want.ID) {
		return false
	}
	return assert.Equal(t, state, got.State, "%s: member %s state", m.cfg.Meta.ID, want.ID) &&
		assert.Equal(t, want, got.Meta, "%s: member %s meta", m.cfg.Meta.ID, want.ID)
}

// assertReplicas checks that m holds want as the replicas of member id. Long lists are shortened
// in the message.
func assertReplicas(t assert.TestingT, m *Membership, id string, want []Replica) bool {
	got, ok := m.Member(id)
	if !assert.True(t, ok, "%s: member %s unknown", m.cfg.Meta.ID, id) {
		return false
	}
	return assert.True(t, slices.Equal(got.Replicas, want), "%s: member %s replicas %s, want %s",
		m.cfg.Meta.ID, id, short(got.Replicas), short(want))
}

// short renders v in at most 200 bytes.
func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func hostingIDs(m *Membership, ds string, p int) []string {
	var ids []string
	for _, h := range m.Hosting(ds, p) {
		ids = append(ids, h.ID)
	}
	return ids
}

// assertHosting checks that m lists want, in order, as the hosts of partition p of ds.
func assertHosting(t assert.TestingT, m *Membership, ds string, p int, want ...string) bool {
	return assert.Equal(t, want, hostingIDs(m, ds, p), "%s: Hosting(%s, %d)", m.cfg.Meta.ID, ds, p)
}

// startCluster starts n1 (no seeds), n2 (seeds n1) and n3 (seeds n1 only), and waits until each
// sees all three alive with their Meta.
func startCluster(t *testing.T, mod func(*Config)) []node {
	t.Helper()
	log := testLogger(t)
	n1 := startNode(t, log, "n1", nil, mod)
	n2 := startNode(t, log, "n2", []string{n1.cfg.Meta.GossipAddr}, mod)
	n3 := startNode(t, log, "n3", []string{n1.cfg.Meta.GossipAddr}, mod)
	nodes := []node{n1, n2, n3}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, a := range nodes {
			assert.Len(c, a.Members(), 3, "%s: members", a.cfg.Meta.ID)
			for _, b := range nodes {
				assertSees(c, a.Membership, b.cfg.Meta, StateAlive)
			}
		}
	}, detect, tick, "every node sees the three alive")
	return nodes
}

// --- cluster tests ---

func TestJoinThroughSeeds(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, nil)
	for _, n := range nodes {
		ms := n.Members()
		ids := []string{ms[0].ID, ms[1].ID, ms[2].ID}
		assert.Equal(t, []string{"n1", "n2", "n3"}, ids, "%s: Members IDs (sorted)", n.cfg.Meta.ID)
		self := n.Self()
		assert.Equal(t, n.cfg.Meta.ID, self.ID, "%s: Self() ID", n.cfg.Meta.ID)
		assert.Equal(t, StateAlive, self.State, "%s: Self() state", n.cfg.Meta.ID)
		alive, known := n.Alive("n2")
		assert.True(t, alive && known, "%s: Alive(n2) = %v, %v, want true, true", n.cfg.Meta.ID, alive, known)
		alive, known = n.Alive("nope")
		assert.False(t, alive || known, "%s: Alive(nope) = %v, %v, want false, false", n.cfg.Meta.ID, alive, known)
	}
}

func TestReplicasGossipOnRefresh(t *testing.T) {
	t.Parallel()
	var changes atomic.Int64
	// A long push/pull interval: only Refresh's broadcast (or direct send) can deliver in time.
	nodes := startCluster(t, func(c *Config) {
		c.PushPullInterval = time.Minute
		if c.Meta.ID == "n1" {
			c.OnChange = func() { changes.Add(1) }
		}
	})
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	before := changes.Load()
	r2 := []Replica{{Datastore: "users", Partition: 3, AppliedIndex: 10}, {Datastore: "users", Partition: 4, Leader: true, AppliedIndex: 20}}
	n2.reps.set(r2...)
	n2.Refresh()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range []node{n1, n3} {
			assertReplicas(c, n.Membership, "n2", r2)
		}
	}, converge, tick, "n2's replicas on n1 and n3")
	assertReplicas(t, n2.Membership, "n2", r2) // Self
	assertHosting(t, n1.Membership, "users", 4, "n2")
	assertHosting(t, n1.Membership, "users", 99)
	require.Eventually(t, func() bool { return changes.Load() > before }, converge, tick,
		"OnChange calls on n1: want more than the %d before the Refresh", before)

	// Two hosts of users/3: the leader comes first.
	n3.reps.set(Replica{Datastore: "users", Partition: 3, Leader: true, AppliedIndex: 9})
	n3.Refresh()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range nodes {
			assertHosting(c, n.Membership, "users", 3, "n3", "n2")
		}
	}, converge, tick, "hosts of users/3, the leader n3 first")

	// Leadership moves to n2.
	n3.reps.set(Replica{Datastore: "users", Partition: 3, AppliedIndex: 11})
	n3.Refresh()
	r2[0].Leader = true
	n2.reps.set(r2...)
	n2.Refresh()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertHosting(c, n1.Membership, "users", 3, "n2", "n3")
	}, converge, tick, "hosts of users/3 after the leadership moved to n2")

	// A state too big for a UDP packet goes by TCP.
	var big []Replica
	for p := range 300 {
		big = append(big, Replica{Datastore: "a-rather-long-datastore-name", Partition: p, Leader: p%3 == 0, AppliedIndex: uint64(p) << 20})
	}
	n3.reps.set(big...)
	n3.Refresh()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range []node{n1, n2} {
			assertReplicas(c, n.Membership, "n3", big)
		}
	}, converge, tick, "n3's 300 replicas (more than a UDP packet) on n1 and n2")
}

func TestCloseIsDeadLeaveIsLeft(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, nil)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n2.reps.set(Replica{Datastore: "d", Partition: 1, Leader: true})
	n3.reps.set(Replica{Datastore: "d", Partition: 1})
	n2.Refresh()
	n3.Refresh()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertHosting(c, n1.Membership, "d", 1, "n2", "n3")
	}, 3*time.Second, tick, "hosts of d/1 on n1")

	start := time.Now()
	require.NoError(t, n3.Close(), "Close")
	require.NoError(t, n3.Close(), "second Close")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range []node{n1, n2} {
			assertSees(c, n.Membership, n3.cfg.Meta, StateDead)
		}
	}, detect, tick, "n3 dead on n1 and n2")
	t.Logf("n3 dead on n1 and n2 %v after Close", time.Since(start).Round(time.Millisecond))
	assertHosting(t, n1.Membership, "d", 1, "n2")
	alive, known := n1.Alive("n3")
	assert.True(t, !alive && known, "Alive(n3) = %v, %v, want false, true", alive, known)
	assertReplicas(t, n1.Membership, "n3", []Replica{{Datastore: "d", Partition: 1}}) // a dead member keeps its last replicas

	require.NoError(t, n2.Leave(3*time.Second), "Leave")
	assert.Equal(t, StateLeft, n2.Self().State, "n2 Self().State after Leave")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertSees(c, n1.Membership, n2.cfg.Meta, StateLeft)
	}, 5*time.Second, tick, "n2 left on n1")
	assertHosting(t, n1.Membership, "d", 1)
	assert.Len(t, n1.Members(), 3, "n1's members: dead and left kept")
	require.NoError(t, n2.Close(), "Close after Leave")
	assert.ErrorIs(t, n2.Leave(time.Second), ErrClosed, "Leave after Close")
	// n2 stays left (not dead) on n1 after it stops answering.
	m, _ := n1.Member("n2")
	assert.Equal(t, StateLeft, m.State, "n2 on n1 after Close")

	// A left node restarting on the same address is alive again, without its old replicas.
	again := startNode(t, testLogger(t), "n2", []string{n1.cfg.Meta.GossipAddr}, func(c *Config) {
		c.Meta = n2.cfg.Meta
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if assertSees(c, n1.Membership, n2.cfg.Meta, StateAlive) {
			assertReplicas(c, n1.Membership, "n2", nil)
		}
	}, detect, tick, "restarted n2 alive on n1, without replicas")
	assert.Equal(t, StateAlive, again.Self().State, "restarted n2 Self().State")
}

func TestRestartSameIDNewAddress(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, nil)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n3.reps.set(Replica{Datastore: "d", Partition: 7, Leader: true, AppliedIndex: 100})
	n3.Refresh()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertHosting(c, n1.Membership, "d", 7, "n3")
	}, 3*time.Second, tick, "hosts of d/7 on n1")

	require.NoError(t, n3.Close(), "Close")
	// Restart at once (before the others notice), on another port, with an empty state.
	start := time.Now()
	again := startNode(t, testLogger(t), "n3", []string{n1.cfg.Meta.GossipAddr}, nil)
	require.NotEqual(t, n3.cfg.Meta.GossipAddr, again.cfg.Meta.GossipAddr, "restart: want another address")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range []node{n1, n2} {
			if assertSees(c, n.Membership, again.cfg.Meta, StateAlive) {
				assertReplicas(c, n.Membership, "n3", nil)
			}
		}
	}, 15*time.Second, tick, "restarted n3 alive at its new address on n1 and n2, without replicas")
	t.Logf("restarted n3 alive at its new address on n1 and n2 %v after restart", time.Since(start).Round(time.Millisecond))
	assertHosting(t, n1.Membership, "d", 7)
	again.reps.set(Replica{Datastore: "d", Partition: 7, AppliedIndex: 100})
	again.Refresh()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertHosting(c, n2.Membership, "d", 7, "n3")
	}, 3*time.Second, tick, "hosts of d/7 on n2 after the restarted n3's Refresh")
}

// --- unit tests ---

func TestTableMergeKeepsNewest(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	r := func(p int) []Replica { return []Replica{{Datastore: "d", Partition: p}} }
	tab := newTable("self")

	// A state arriving before its node is known is kept, invisible until the join.
	newer, changed := tab.merge(nodeState{ID: "a", Epoch: 5, Seq: 2, Replicas: r(2)}, t0)
	assert.True(t, newer, "merge unknown: newer")
	assert.False(t, changed, "merge unknown: changed")
	_, ok := tab.member("a")
	assert.False(t, ok, "member a visible before join")
	assert.True(t, tab.join(Meta{ID: "a", GossipAddr: "x:1"}, t0), "join a: no change reported")
	m, _ := tab.member("a")
	assert.Equal(t, r(2), m.Replicas, "a after join: replicas")
	assert.Equal(t, StateAlive, m.State, "a after join: state")

	cases := []struct {
		name      string
		s         nodeState
		wantNewer bool
		wantReps  []Replica
	}{
		{"older seq", nodeState{ID: "a", Epoch: 5, Seq: 1, Replicas: r(1)}, false, r(2)},
		{"same version", nodeState{ID: "a", Epoch: 5, Seq: 2, Replicas: r(9)}, false, r(2)},
		{"older epoch, higher seq", nodeState{ID: "a", Epoch: 4, Seq: 99, Replicas: r(4)}, false, r(2)},
		{"newer seq", nodeState{ID: "a", Epoch: 5, Seq: 3, Replicas: r(3)}, true, r(3)},
		{"newer epoch, lower seq (restart)", nodeState{ID: "a", Epoch: 6, Seq: 1, Replicas: r(6)}, true, r(6)},
		{"previous life again", nodeState{ID: "a", Epoch: 5, Seq: 50, Replicas: r(5)}, false, r(6)},
	}
	for _, c := range cases {
		newer, _ := tab.merge(c.s, t0)
		assert.Equal(t, c.wantNewer, newer, "%s: newer", c.name)
		m, _ := tab.member("a")
		assert.Equal(t, c.wantReps, m.Replicas, "%s: replicas", c.name)
	}

	// Others' word about this node is ignored.
	tab.setLocal(nodeState{ID: "self", Epoch: 1, Seq: 1, Replicas: r(1)}, t0)
	newer, _ = tab.merge(nodeState{ID: "self", Epoch: 9, Seq: 9}, t0)
	assert.False(t, newer, "merge of a remote state about self accepted")
	local, _ := tab.local()
	assert.Equal(t, uint64(1), local.Seq, "local seq")

	// Dead vs left, and a rejoin clears the leave flag of the previous life.
	t1 := t0.Add(time.Second)
	assert.True(t, tab.down("a", t1), "down a: no change reported")
	m, _ = tab.member("a")
	assert.Equal(t, StateDead, m.State, "a after down: state")
	assert.True(t, m.UpdatedAt.Equal(t1), "a after down: updated at %v, want %v", m.UpdatedAt, t1)
	assert.Equal(t, r(6), m.Replicas, "a after down: replicas")
	tab.merge(nodeState{ID: "a", Epoch: 6, Seq: 2, Leaving: true, Replicas: r(6)}, t1)
	m, _ = tab.member("a")
	assert.Equal(t, StateLeft, m.State, "a with leave flag")
	assert.True(t, tab.join(Meta{ID: "a", GossipAddr: "y:2"}, t1), "rejoin a: no change reported")
	tab.down("a", t1)
	m, _ = tab.member("a")
	assert.Equal(t, StateDead, m.State, "a after rejoin and crash: state")
	assert.Equal(t, "y:2", m.GossipAddr, "a after rejoin and crash: address")
}

func TestWireRoundTrip(t *testing.T) {
	t.Parallel()
	in := []nodeState{
		{ID: "a", Epoch: 1 << 60, Seq: 7, Leaving: true, Replicas: []Replica{{Datastore: "d", Partition: 3, Leader: true, AppliedIndex: 1 << 40}}},
		{ID: "b", Epoch: 2, Seq: 1, Replicas: []Replica{}},
	}
	buf, err := encodeStates(in)
	require.NoError(t, err, "encodeStates")
	out, err := decodeStates(buf)
	require.NoError(t, err, "decodeStates")
	// Compared as text: an empty list may come back nil.
	assert.Equal(t, fmt.Sprint(in), fmt.Sprint(out), "round trip")
	_, err = decodeStates([]byte{99, 1})
	assert.Error(t, err, "decodeStates of an unknown message type")
}

func TestTableHostingOrder(t *testing.T) {
	t.Parallel()
	tab := newTable("a")
	now := time.Unix(0, 0)
	for i, spec := range []struct {
		id  string
		rep Replica
	}{
		{"a", Replica{Datastore: "d", Partition: 1, AppliedIndex: 5}},
		{"b", Replica{Datastore: "d", Partition: 1, AppliedIndex: 9}},
		{"c", Replica{Datastore: "d", Partition: 1, Leader: true, AppliedIndex: 1}},
		{"d", Replica{Datastore: "d", Partition: 1, Leader: true, AppliedIndex: 1}},
		{"e", Replica{Datastore: "other", Partition: 1, Leader: true}},
	} {
		tab.join(Meta{ID: spec.id}, now)
		tab.put(nodeState{ID: spec.id, Epoch: 1, Seq: uint64(i + 1), Replicas: []Replica{spec.rep}}, now)
	}
	tab.down("d", now)
	var got []string
	for _, m := range tab.hosting("d", 1) {
		got = append(got, m.ID)
	}
	assert.Equal(t, []string{"c", "b", "a"}, got, "hosting: the leader, then by applied index; dead d excluded")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	longMeta := Meta{ID: "x", GossipAddr: "127.0.0.1:7946", Version: strings.Repeat("v", 600)}
	cases := []struct {
		name string
		cfg  Config
		want []string // substrings, one per expected violation
	}{
		{"empty", Config{}, []string{"Config.Meta.ID is required", "Config.Meta.GossipAddr is required"}},
		{"port 0", Config{Meta: Meta{ID: "x", GossipAddr: "127.0.0.1:0"}}, []string{"Config.Meta.GossipAddr \"127.0.0.1:0\": port"}},
		{"no port", Config{Meta: Meta{ID: "x", GossipAddr: "127.0.0.1"}}, []string{"Config.Meta.GossipAddr \"127.0.0.1\" is not host:port"}},
		{"unspecified", Config{Meta: Meta{ID: "x", GossipAddr: "0.0.0.0:7946"}}, []string{"Config.Meta.GossipAddr \"0.0.0.0:7946\" must be an address"}},
		{"bind port 0", Config{Meta: Meta{ID: "x", GossipAddr: "127.0.0.1:7946"}, BindAddr: "0.0.0.0:0"}, []string{"Config.BindAddr"}},
		{"meta too big", Config{Meta: longMeta}, []string{"Config.Meta is", "512"}},
		{"bad seed", Config{Meta: Meta{ID: "x", GossipAddr: "127.0.0.1:7946"}, Seeds: []string{"127.0.0.1:1", "nope"}}, []string{"Config.Seeds[1]"}},
		{"timings", Config{Meta: Meta{ID: "x", GossipAddr: "127.0.0.1:7946"}, ProbeInterval: time.Second, ProbeTimeout: 2 * time.Second, GossipInterval: -1, SuspicionMult: -1, DeadNodeReclaimTime: -1},
			[]string{"Config.ProbeTimeout", "Config.GossipInterval", "Config.SuspicionMult", "Config.DeadNodeReclaimTime"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := c.cfg.Validate()
			require.Error(t, err, "Validate(): want errors naming %v", c.want)
			assert.ErrorIs(t, err, ErrInvalidConfig, "Validate()")
			for _, w := range c.want {
				assert.ErrorContains(t, err, w, "Validate()")
			}
			assert.True(t, strings.HasPrefix(err.Error(), "membership: "), "Validate() = %q, want the membership: prefix", err)
			m, err2 := Start(c.cfg)
			if m != nil {
				m.Close()
			}
			assert.EqualError(t, err2, err.Error(), "Start(): want the Validate error")
		})
	}
	ok := Config{Meta: Meta{ID: "x", GossipAddr: "127.0.0.1:7946"}}
	assert.NoError(t, ok.Validate(), "valid config: Validate()")
}

func TestLogBridgeLevels(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newLogBridge(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Printf("[DEBUG] memberlist: a debug line")
	l.Printf("[INFO] memberlist: an info line")
	l.Printf("[WARN] memberlist: a warning")
	l.Printf("[ERR] memberlist: an error")
	got := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="a debug line" component=memberlist`,
		`level=DEBUG msg="an info line" component=memberlist`,
		`level=WARN msg="a warning" component=memberlist`,
		`level=WARN msg="an error" component=memberlist`,
	} {
		assert.Contains(t, got, want, "log output")
	}
}

// TestNotifyMsgRelaysNewerStates checks the epidemic relay: a received state newer than the one
// held is queued for re-broadcast, an older or equal one is not.
func TestNotifyMsgRelaysNewerStates(t *testing.T) {
	t.Parallel()
	m := &Membership{
		cfg:      Config{Meta: Meta{ID: "self"}},
		log:      testLogger(t),
		tab:      newTable("self"),
		maxBcast: 1100,
		queue:    &memberlist.TransmitLimitedQueue{NumNodes: func() int { return 3 }, RetransmitMult: 4},
	}
	d := &delegate{m}
	send := func(s nodeState) {
		buf, err := encodeStates([]nodeState{s})
		require.NoError(t, err, "encodeStates(%+v)", s)
		d.NotifyMsg(buf)
	}
	send(nodeState{ID: "a", Epoch: 1, Seq: 2})
	require.Equal(t, 1, m.queue.NumQueued(), "queued after a new state")
	send(nodeState{ID: "a", Epoch: 1, Seq: 2})
	send(nodeState{ID: "a", Epoch: 1, Seq: 1})
	send(nodeState{ID: "self", Epoch: 9, Seq: 9})
	assert.Equal(t, 1, m.queue.NumQueued(), "queued after old, equal and self states")
	send(nodeState{ID: "a", Epoch: 1, Seq: 3})
	assert.Equal(t, 1, m.queue.NumQueued(), "queued after a newer state of a: want it to replace the queued one")
	send(nodeState{ID: "b", Epoch: 1, Seq: 1})
	assert.Equal(t, 2, m.queue.NumQueued(), "queued after a state of b")
}

// metaDelegate is the memberlist delegate of a bare memberlist node: it announces meta.
type metaDelegate struct{ meta []byte }

func (d metaDelegate) NodeMeta(int) []byte                  { return d.meta }
func (metaDelegate) NotifyMsg([]byte)                       {}
func (metaDelegate) GetBroadcasts(int, int) [][]byte        { return nil }
func (metaDelegate) LocalState(bool) []byte                 { return nil }
func (metaDelegate) MergeRemoteState(buf []byte, join bool) {}

// Gossip goes uncompressed, and a node still understands one that compresses (memberlist's
// default, and what earlier versions sent): each sees the other alive.
func TestGossipUncompressedReadsCompressed(t *testing.T) {
	t.Parallel()
	n1 := startNode(t, testLogger(t), "n1", nil, nil)
	mc, err := n1.cfg.withDefaults().memberlistConfig()
	require.NoError(t, err, "memberlistConfig")
	assert.False(t, mc.EnableCompression, "memberlist's EnableCompression")

	port := freePort(t)
	old := Meta{ID: "old", GossipAddr: fmt.Sprintf("127.0.0.1:%d", port), Version: "compressing"}
	meta, err := encodeMeta(old)
	require.NoError(t, err, "encodeMeta")
	oc := memberlist.DefaultLocalConfig()
	oc.Name, oc.BindAddr, oc.BindPort, oc.AdvertisePort = old.ID, "127.0.0.1", port, port
	oc.EnableCompression = true
	oc.Delegate = metaDelegate{meta: meta}
	w := &tlog{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() }) // runs after the Shutdown
	oc.LogOutput = w
	ml, err := memberlist.Create(oc)
	require.NoError(t, err, "memberlist.Create of the compressing node")
	t.Cleanup(func() { _ = ml.Shutdown() })
	_, err = ml.Join([]string{n1.cfg.Meta.GossipAddr})
	require.NoError(t, err, "the compressing node joins n1")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertSees(c, n1.Membership, old, StateAlive)
		var names []string
		for _, m := range ml.Members() {
			names = append(names, m.Name)
		}
		assert.ElementsMatch(c, []string{"n1", "old"}, names, "the compressing node's members")
	}, detect, tick, "n1 and the compressing node see each other")
	// Probes go both ways for a while: neither suspects the other.
	time.Sleep(3 * n1.cfg.withDefaults().ProbeInterval)
	assertSees(t, n1.Membership, old, StateAlive)
	assert.Equal(t, 2, ml.NumMembers(), "members the compressing node counts alive")
}
