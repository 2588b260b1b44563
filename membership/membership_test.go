package membership

import (
	"bytes"
	"errors"
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
		if err != nil {
			t.Fatalf("listen tcp: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return port
	}
	t.Fatal("no port free for both TCP and UDP")
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
			t.Fatalf("Start(%s): %v", id, err)
		}
		t.Cleanup(func() { m.Close() })
		return node{m, cfg, reps}
	}
	t.Fatalf("Start(%s): %v", id, lastErr)
	return node{}
}

// eventually polls cond every 20ms until it returns nil, failing with its last error after
// timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sees checks that m knows id with the given state and meta.
func sees(m *Membership, want Meta, state string) error {
	got, ok := m.Member(want.ID)
	if !ok {
		return fmt.Errorf("%s: member %s unknown", m.cfg.Meta.ID, want.ID)
	}
	if got.State != state {
		return fmt.Errorf("%s: member %s state %q, want %q", m.cfg.Meta.ID, want.ID, got.State, state)
	}
	if got.Meta != want {
		return fmt.Errorf("%s: member %s meta %+v, want %+v", m.cfg.Meta.ID, want.ID, got.Meta, want)
	}
	return nil
}

func hasReplicas(m *Membership, id string, want []Replica) error {
	got, ok := m.Member(id)
	if !ok {
		return fmt.Errorf("%s: member %s unknown", m.cfg.Meta.ID, id)
	}
	if !slices.Equal(got.Replicas, want) {
		return fmt.Errorf("%s: member %s replicas %v, want %v", m.cfg.Meta.ID, id, got.Replicas, want)
	}
	return nil
}

func hostingIDs(m *Membership, ds string, p int) []string {
	var ids []string
	for _, h := range m.Hosting(ds, p) {
		ids = append(ids, h.ID)
	}
	return ids
}

func wantHosting(m *Membership, ds string, p int, want ...string) error {
	if got := hostingIDs(m, ds, p); !slices.Equal(got, want) {
		return fmt.Errorf("%s: Hosting(%s, %d) = %v, want %v", m.cfg.Meta.ID, ds, p, got, want)
	}
	return nil
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
	eventually(t, 10*time.Second, func() error {
		for _, a := range nodes {
			if got := len(a.Members()); got != 3 {
				return fmt.Errorf("%s: %d members, want 3", a.cfg.Meta.ID, got)
			}
			for _, b := range nodes {
				if err := sees(a.Membership, b.cfg.Meta, StateAlive); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return nodes
}

// --- cluster tests ---

func TestJoinThroughSeeds(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, nil)
	for _, n := range nodes {
		ms := n.Members()
		ids := []string{ms[0].ID, ms[1].ID, ms[2].ID}
		if !slices.Equal(ids, []string{"n1", "n2", "n3"}) {
			t.Errorf("%s: Members IDs %v, want [n1 n2 n3] (sorted)", n.cfg.Meta.ID, ids)
		}
		if self := n.Self(); self.ID != n.cfg.Meta.ID || self.State != StateAlive {
			t.Errorf("%s: Self() = %s %s, want itself alive", n.cfg.Meta.ID, self.ID, self.State)
		}
		if alive, known := n.Alive("n2"); !alive || !known {
			t.Errorf("%s: Alive(n2) = %v, %v, want true, true", n.cfg.Meta.ID, alive, known)
		}
		if alive, known := n.Alive("nope"); alive || known {
			t.Errorf("%s: Alive(nope) = %v, %v, want false, false", n.cfg.Meta.ID, alive, known)
		}
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
	eventually(t, 2*time.Second, func() error {
		for _, n := range []node{n1, n3} {
			if err := hasReplicas(n.Membership, "n2", r2); err != nil {
				return err
			}
		}
		return nil
	})
	if err := hasReplicas(n2.Membership, "n2", r2); err != nil {
		t.Errorf("Self: %v", err)
	}
	if err := wantHosting(n1.Membership, "users", 4, "n2"); err != nil {
		t.Error(err)
	}
	if err := wantHosting(n1.Membership, "users", 99); err != nil {
		t.Error(err)
	}
	eventually(t, 2*time.Second, func() error {
		if got := changes.Load(); got <= before {
			return fmt.Errorf("OnChange calls %d, want more than %d", got, before)
		}
		return nil
	})

	// Two hosts of users/3: the leader comes first.
	n3.reps.set(Replica{Datastore: "users", Partition: 3, Leader: true, AppliedIndex: 9})
	n3.Refresh()
	eventually(t, 2*time.Second, func() error {
		for _, n := range nodes {
			if err := wantHosting(n.Membership, "users", 3, "n3", "n2"); err != nil {
				return err
			}
		}
		return nil
	})

	// Leadership moves to n2.
	n3.reps.set(Replica{Datastore: "users", Partition: 3, AppliedIndex: 11})
	n3.Refresh()
	r2[0].Leader = true
	n2.reps.set(r2...)
	n2.Refresh()
	eventually(t, 2*time.Second, func() error {
		return wantHosting(n1.Membership, "users", 3, "n2", "n3")
	})

	// A state too big for a UDP packet goes by TCP.
	var big []Replica
	for p := range 300 {
		big = append(big, Replica{Datastore: "a-rather-long-datastore-name", Partition: p, Leader: p%3 == 0, AppliedIndex: uint64(p) << 20})
	}
	n3.reps.set(big...)
	n3.Refresh()
	eventually(t, 2*time.Second, func() error {
		for _, n := range []node{n1, n2} {
			if err := hasReplicas(n.Membership, "n3", big); err != nil {
				return fmt.Errorf("%.200s", err)
			}
		}
		return nil
	})
}

func TestCloseIsDeadLeaveIsLeft(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, nil)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n2.reps.set(Replica{Datastore: "d", Partition: 1, Leader: true})
	n3.reps.set(Replica{Datastore: "d", Partition: 1})
	n2.Refresh()
	n3.Refresh()
	eventually(t, 3*time.Second, func() error { return wantHosting(n1.Membership, "d", 1, "n2", "n3") })

	start := time.Now()
	if err := n3.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := n3.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	eventually(t, 10*time.Second, func() error {
		for _, n := range []node{n1, n2} {
			if err := sees(n.Membership, n3.cfg.Meta, StateDead); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("n3 dead on n1 and n2 %v after Close", time.Since(start).Round(time.Millisecond))
	if err := wantHosting(n1.Membership, "d", 1, "n2"); err != nil {
		t.Error(err)
	}
	if alive, known := n1.Alive("n3"); alive || !known {
		t.Errorf("Alive(n3) = %v, %v, want false, true", alive, known)
	}
	if err := hasReplicas(n1.Membership, "n3", []Replica{{Datastore: "d", Partition: 1}}); err != nil {
		t.Errorf("dead member keeps its last replicas: %v", err)
	}

	if err := n2.Leave(3 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if got := n2.Self().State; got != StateLeft {
		t.Errorf("n2 Self().State after Leave = %q, want %q", got, StateLeft)
	}
	eventually(t, 5*time.Second, func() error { return sees(n1.Membership, n2.cfg.Meta, StateLeft) })
	if err := wantHosting(n1.Membership, "d", 1); err != nil {
		t.Error(err)
	}
	if got := len(n1.Members()); got != 3 {
		t.Errorf("n1 has %d members, want 3 (dead and left kept)", got)
	}
	if err := n2.Close(); err != nil {
		t.Fatalf("Close after Leave: %v", err)
	}
	if err := n2.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Close = %v, want ErrClosed", err)
	}
	// n2 stays left (not dead) on n1 after it stops answering.
	if m, _ := n1.Member("n2"); m.State != StateLeft {
		t.Errorf("n2 on n1 after Close = %q, want %q", m.State, StateLeft)
	}

	// A left node restarting on the same address is alive again, without its old replicas.
	again := startNode(t, testLogger(t), "n2", []string{n1.cfg.Meta.GossipAddr}, func(c *Config) {
		c.Meta = n2.cfg.Meta
	})
	eventually(t, 10*time.Second, func() error {
		if err := sees(n1.Membership, n2.cfg.Meta, StateAlive); err != nil {
			return err
		}
		return hasReplicas(n1.Membership, "n2", nil)
	})
	if got := again.Self().State; got != StateAlive {
		t.Errorf("restarted n2 Self().State = %q, want %q", got, StateAlive)
	}
}

func TestRestartSameIDNewAddress(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, nil)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n3.reps.set(Replica{Datastore: "d", Partition: 7, Leader: true, AppliedIndex: 100})
	n3.Refresh()
	eventually(t, 3*time.Second, func() error { return wantHosting(n1.Membership, "d", 7, "n3") })

	if err := n3.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Restart at once (before the others notice), on another port, with an empty state.
	start := time.Now()
	again := startNode(t, testLogger(t), "n3", []string{n1.cfg.Meta.GossipAddr}, nil)
	if again.cfg.Meta.GossipAddr == n3.cfg.Meta.GossipAddr {
		t.Fatalf("restart got the same address %s", again.cfg.Meta.GossipAddr)
	}
	eventually(t, 15*time.Second, func() error {
		for _, n := range []node{n1, n2} {
			if err := sees(n.Membership, again.cfg.Meta, StateAlive); err != nil {
				return err
			}
			if err := hasReplicas(n.Membership, "n3", nil); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("restarted n3 alive at its new address on n1 and n2 %v after restart", time.Since(start).Round(time.Millisecond))
	if err := wantHosting(n1.Membership, "d", 7); err != nil {
		t.Error(err)
	}
	again.reps.set(Replica{Datastore: "d", Partition: 7, AppliedIndex: 100})
	again.Refresh()
	eventually(t, 3*time.Second, func() error { return wantHosting(n2.Membership, "d", 7, "n3") })
}

// --- unit tests ---

func TestTableMergeKeepsNewest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := func(p int) []Replica { return []Replica{{Datastore: "d", Partition: p}} }
	tab := newTable("self")

	// A state arriving before its node is known is kept, invisible until the join.
	if newer, changed := tab.merge(nodeState{ID: "a", Epoch: 5, Seq: 2, Replicas: r(2)}, t0); !newer || changed {
		t.Errorf("merge unknown: newer %v changed %v, want true false", newer, changed)
	}
	if _, ok := tab.member("a"); ok {
		t.Error("member a visible before join")
	}
	if !tab.join(Meta{ID: "a", GossipAddr: "x:1"}, t0) {
		t.Error("join a: no change reported")
	}
	if m, _ := tab.member("a"); !slices.Equal(m.Replicas, r(2)) || m.State != StateAlive {
		t.Errorf("a after join: %v %v, want alive %v", m.State, m.Replicas, r(2))
	}

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
		if newer != c.wantNewer {
			t.Errorf("%s: newer = %v, want %v", c.name, newer, c.wantNewer)
		}
		if m, _ := tab.member("a"); !slices.Equal(m.Replicas, c.wantReps) {
			t.Errorf("%s: replicas %v, want %v", c.name, m.Replicas, c.wantReps)
		}
	}

	// Others' word about this node is ignored.
	tab.setLocal(nodeState{ID: "self", Epoch: 1, Seq: 1, Replicas: r(1)}, t0)
	if newer, _ := tab.merge(nodeState{ID: "self", Epoch: 9, Seq: 9}, t0); newer {
		t.Error("merge of a remote state about self accepted")
	}
	if s, _ := tab.local(); s.Seq != 1 {
		t.Errorf("local seq %d, want 1", s.Seq)
	}

	// Dead vs left, and a rejoin clears the leave flag of the previous life.
	t1 := t0.Add(time.Second)
	if !tab.down("a", t1) {
		t.Error("down a: no change")
	}
	if m, _ := tab.member("a"); m.State != StateDead || !m.UpdatedAt.Equal(t1) || !slices.Equal(m.Replicas, r(6)) {
		t.Errorf("a after down: %s at %v with %v, want dead at %v with %v", m.State, m.UpdatedAt, m.Replicas, t1, r(6))
	}
	tab.merge(nodeState{ID: "a", Epoch: 6, Seq: 2, Leaving: true, Replicas: r(6)}, t1)
	if m, _ := tab.member("a"); m.State != StateLeft {
		t.Errorf("a with leave flag: %s, want left", m.State)
	}
	if !tab.join(Meta{ID: "a", GossipAddr: "y:2"}, t1) {
		t.Error("rejoin a: no change")
	}
	tab.down("a", t1)
	if m, _ := tab.member("a"); m.State != StateDead || m.GossipAddr != "y:2" {
		t.Errorf("a after rejoin and crash: %s at %s, want dead at y:2", m.State, m.GossipAddr)
	}
}

func TestWireRoundTrip(t *testing.T) {
	in := []nodeState{
		{ID: "a", Epoch: 1 << 60, Seq: 7, Leaving: true, Replicas: []Replica{{Datastore: "d", Partition: 3, Leader: true, AppliedIndex: 1 << 40}}},
		{ID: "b", Epoch: 2, Seq: 1, Replicas: []Replica{}},
	}
	buf, err := encodeStates(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeStates(buf)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Errorf("round trip: got %v, want %v", out, in)
	}
	if _, err := decodeStates([]byte{99, 1}); err == nil {
		t.Error("unknown message type decoded")
	}
}

func TestTableHostingOrder(t *testing.T) {
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
	if want := []string{"c", "b", "a"}; !slices.Equal(got, want) {
		t.Errorf("hosting = %v, want %v (leader, then applied index; dead d excluded)", got, want)
	}
}

func TestConfigValidation(t *testing.T) {
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
			err := c.cfg.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want errors naming %v", c.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("errors.Is(%v, ErrInvalidConfig) = false", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "membership: ") {
				t.Errorf("Validate() = %q, want the membership: prefix", err)
			}
			if m, err2 := Start(c.cfg); err2 == nil || err2.Error() != err.Error() {
				if m != nil {
					m.Close()
				}
				t.Errorf("Start() error = %v, want the Validate error", err2)
			}
		})
	}
	ok := Config{Meta: Meta{ID: "x", GossipAddr: "127.0.0.1:7946"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config: Validate() = %v", err)
	}
}

func TestLogBridgeLevels(t *testing.T) {
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
		if !strings.Contains(got, want) {
			t.Errorf("log output %q lacks %q", got, want)
		}
	}
}

// TestNotifyMsgRelaysNewerStates checks the epidemic relay: a received state newer than the one
// held is queued for re-broadcast, an older or equal one is not.
func TestNotifyMsgRelaysNewerStates(t *testing.T) {
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
		if err != nil {
			t.Fatal(err)
		}
		d.NotifyMsg(buf)
	}
	send(nodeState{ID: "a", Epoch: 1, Seq: 2})
	if got := m.queue.NumQueued(); got != 1 {
		t.Fatalf("queued after a new state: %d, want 1", got)
	}
	send(nodeState{ID: "a", Epoch: 1, Seq: 2})
	send(nodeState{ID: "a", Epoch: 1, Seq: 1})
	send(nodeState{ID: "self", Epoch: 9, Seq: 9})
	if got := m.queue.NumQueued(); got != 1 {
		t.Errorf("queued after old, equal and self states: %d, want 1", got)
	}
	send(nodeState{ID: "a", Epoch: 1, Seq: 3})
	if got := m.queue.NumQueued(); got != 1 {
		t.Errorf("queued after a newer state of a: %d, want 1 (replaces the queued one)", got)
	}
	send(nodeState{ID: "b", Epoch: 1, Seq: 1})
	if got := m.queue.NumQueued(); got != 2 {
		t.Errorf("queued after a state of b: %d, want 2", got)
	}
}
