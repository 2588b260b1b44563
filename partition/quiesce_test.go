package partition

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quiescingGroup starts a 3-replica group whose leader quiesces after quiesceAfter idle, with
// every replica's AppendEntries counted.
func quiescingGroup(t *testing.T, quiesceAfter time.Duration) (*group, func(id string) *countingTransport) {
	var mu sync.Mutex
	sent := map[string]*countingTransport{}
	g := newGroup(t, 3, func(c *Config) {
		c.QuiesceAfter = quiesceAfter
		ct := &countingTransport{InmemTransport: c.Transport.(*raft.InmemTransport)}
		c.Transport = ct
		mu.Lock()
		sent[c.NodeID] = ct
		mu.Unlock()
	})
	return g, func(id string) *countingTransport {
		mu.Lock()
		defer mu.Unlock()
		return sent[id]
	}
}

// downReportingGroup starts a 3-replica group that quiesces after quiesceAfter idle, without
// the replicas whose ids down holds (Config.QuiesceDown: reported down by node liveness).
func downReportingGroup(t *testing.T, quiesceAfter time.Duration) (*group, *sync.Map) {
	down := &sync.Map{} // replica id -> true: reported down
	g := newGroup(t, 3, func(c *Config) {
		c.QuiesceAfter = quiesceAfter
		c.QuiesceDown = func(id string) bool { _, ok := down.Load(id); return ok }
	})
	return g, down
}

// allQuiesced reports whether every running replica of g is quiesced.
func allQuiesced(g *group) func() bool {
	return func() bool {
		rs := g.running()
		for _, r := range rs {
			if !r.p.Quiesced() {
				return false
			}
		}
		return len(rs) > 0
	}
}

// An idle group quiesces: its leader then sends nothing at all (no heartbeats, no commit index)
// and no replica starts an election; a write, a strong read and a restarted follower each wake
// it, and it quiesces again once idle (third_party/raft/quiesce.go).
func TestQuiescedGroupSendsNothing(t *testing.T) {
	t.Parallel()
	const quiesceAfter = 500 * time.Millisecond // HeartbeatTimeout 500ms (newGroup)
	g, sent := quiescingGroup(t, quiesceAfter)
	ctx := context.Background()
	_, err := g.put(ctx, testCell(t, 0))
	require.NoError(t, err, "first put")
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "every replica quiesces within 5s of the last write")
	l := g.leader()
	term := l.p.Raft().CurrentTerm()

	// Quiesced: not one AppendEntries in 3 s (about 90 heartbeats without quiescence).
	const window = 3 * time.Second
	lt := sent(l.id)
	before := lt.heartbeats.Load() + lt.appends.Load()
	time.Sleep(window)
	got := lt.heartbeats.Load() + lt.appends.Load() - before
	assert.Zero(t, got, "AppendEntries the quiesced leader %s sent in %v", l.id, window)
	require.True(t, l.p.IsLeader(), "%s still leads", l.id)
	assert.Equal(t, term, l.p.Raft().CurrentTerm(), "term after %v quiesced (an election happened)", window)
	assert.True(t, allQuiesced(g)(), "every replica stays quiesced")

	// A write wakes the group and commits at once; it quiesces again.
	start := time.Now()
	_, err = g.put(ctx, testCell(t, 1))
	require.NoError(t, err, "put on the quiesced group")
	t.Logf("a put on the quiesced group took %v", time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), quiesceAfter, "a put on the quiesced group commits without waiting for a timer")
	want := l.p.Raft().CommitIndex()
	require.Eventually(t, func() bool {
		for _, r := range g.running() {
			if r.p.Raft().CommitIndex() < want {
				return false
			}
		}
		return true
	}, 2*time.Second, 5*time.Millisecond, "the followers learn commit index %d after waking", want)
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "the group quiesces again after the write")

	// A strong read (VerifyLeader) wakes the leader too.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	require.NoError(t, l.p.ReadIndex(rctx), "read index on the quiesced leader")
	cancel()
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "the group quiesces again after the read")

	// A follower restarted while the group is quiesced comes back unquiesced without a leader;
	// its election attempt wakes the leader, which keeps leading, and the group quiesces again
	// with the follower caught up.
	var f *replica
	for _, r := range g.replicas {
		if r != l {
			f = r
			break
		}
	}
	fi := indexOf(g, f)
	g.stop(fi)
	g.start(fi)
	require.Eventually(t, func() bool {
		id, _ := f.p.Leader()
		return id != "" && f.p.Raft().CommitIndex() >= want
	}, 10*time.Second, 10*time.Millisecond, "the restarted follower %s learns the leader and commit index %d", f.id, want)
	require.Eventually(t, allQuiesced(g), 10*time.Second, 10*time.Millisecond, "the group quiesces again after the restart")
	_, err = g.put(ctx, testCell(t, 2))
	require.NoError(t, err, "put after the follower's restart")
}

// A quiesced follower starts no election when the leader dies: it keeps its leader until it is
// woken (in a cluster, when gossip reports the leader's node down), and then the followers elect
// a new leader that takes writes.
func TestQuiescedFollowersElectOnlyWhenWoken(t *testing.T) {
	t.Parallel()
	g, _ := quiescingGroup(t, 500*time.Millisecond)
	ctx := context.Background()
	_, err := g.put(ctx, testCell(t, 0))
	require.NoError(t, err, "first put")
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "every replica quiesces")
	old := g.leader()
	term := old.p.Raft().CurrentTerm()
	// A crash: the leader's last words (raft's shutdown replicates once more, which would wake
	// the followers) never arrive.
	old.trans.DisconnectAll()
	g.stop(indexOf(g, old))

	// Not woken: 4 election timeouts pass without an election.
	time.Sleep(2 * time.Second)
	for _, r := range g.running() {
		assert.Equal(t, term, r.p.Raft().CurrentTerm(), "term of quiesced follower %s with its leader gone and no wake", r.id)
		id, _ := r.p.Leader()
		assert.Equal(t, old.id, id, "leader known to quiesced follower %s", r.id)
	}

	// Woken: a new leader within a few election timeouts, and writes commit.
	woken := time.Now()
	for _, r := range g.running() {
		r.p.Wake()
	}
	l := g.leader()
	t.Logf("%s leads %v after the wake", l.id, time.Since(woken).Round(time.Millisecond))
	require.NotEqual(t, old.id, l.id, "the stopped replica cannot lead")
	assert.Greater(t, l.p.Raft().CurrentTerm(), term, "the new leader's term")
	_, err = g.put(ctx, testCell(t, 1))
	require.NoError(t, err, "put after the election")
}

// stopAFollower writes a cell to g, stops a follower of its leader, writes another cell without
// it, and returns the leader, the stopped follower and the follower's index in g.
func stopAFollower(t *testing.T, g *group) (l, f *replica, fi int) {
	ctx := context.Background()
	_, err := g.put(ctx, testCell(t, 0))
	require.NoError(t, err, "first put")
	l = g.leader()
	for _, r := range g.replicas {
		if r != l {
			f = r
			break
		}
	}
	fi = indexOf(g, f)
	g.stop(fi)
	_, err = g.put(ctx, testCell(t, 1))
	require.NoError(t, err, "put with a follower stopped")
	return l, f, fi
}

// A leader quiesces without a follower that node-level liveness reports down (Config.
// QuiesceDown), and then sends nothing, not even heartbeats to the dead follower; while the
// follower is stopped but not reported down, the group never quiesces (the control). When the
// follower comes back, its first RPC wakes the leader and it catches up.
func TestQuiescesWithoutDownFollower(t *testing.T) {
	t.Parallel()
	var down sync.Map // replica id -> true: reported down
	var mu sync.Mutex
	sent := map[string]*countingTransport{}
	g := newGroup(t, 3, func(c *Config) {
		c.QuiesceAfter = 500 * time.Millisecond
		c.QuiesceDown = func(id string) bool { _, ok := down.Load(id); return ok }
		ct := &countingTransport{InmemTransport: c.Transport.(*raft.InmemTransport)}
		c.Transport = ct
		mu.Lock()
		sent[c.NodeID] = ct
		mu.Unlock()
	})
	l, f, fi := stopAFollower(t, g)

	// Time passing is the point: with the follower stopped and not reported down, the leader
	// keeps heartbeating it and never quiesces.
	require.Never(t, func() bool { return l.p.Quiesced() }, 2*time.Second, 20*time.Millisecond,
		"the leader quiesced with follower %s stopped but not reported down", f.id)

	down.Store(f.id, true)
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "the group quiesces once %s is reported down", f.id)
	mu.Lock()
	lt := sent[l.id]
	mu.Unlock()
	// A heartbeat to the down follower that was on its way (or in its failure backoff) when
	// the leader quiesced may still go out: count from a heartbeat timeout later.
	time.Sleep(500 * time.Millisecond)
	before := lt.heartbeats.Load() + lt.appends.Load()
	time.Sleep(2 * time.Second)
	assert.Zero(t, lt.heartbeats.Load()+lt.appends.Load()-before, "AppendEntries the quiesced leader %s sent in 2 s, its follower %s down", l.id, f.id)
	require.True(t, l.p.IsLeader(), "%s still leads", l.id)

	// The follower comes back: its election attempt wakes the leader, which keeps leading and
	// brings it up to date.
	down.Delete(f.id)
	g.start(fi)
	want := l.p.Raft().CommitIndex()
	require.Eventually(t, func() bool {
		id, _ := f.p.Leader()
		return id == l.id && f.p.Raft().CommitIndex() >= want
	}, 10*time.Second, 10*time.Millisecond, "the follower back follows %s and has commit index %d", l.id, want)
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "the group quiesces again with the follower back")
}

// A follower that restarts while node-level liveness still reports it down (gossip lags a
// quick restart) learns the commit index. Its restart empties its commit index, while the
// leader still holds the acknowledgement of its earlier life; a quiescing heartbeat it accepted
// then would park it at commit index 0 for good, the leader sending it nothing more. The
// follower refuses a quiescing heartbeat while its commit index is behind the leader's, and the
// leader that sees the refusal wakes and sends it the commit index.
func TestRestartedFollowerReportedDownLearnsTheCommitIndex(t *testing.T) {
	t.Parallel()
	g, down := downReportingGroup(t, 300*time.Millisecond)
	l, f, fi := stopAFollower(t, g)
	// The leader's sends to the stopped follower fail and back off for a while.
	time.Sleep(2 * time.Second)
	down.Store(f.id, true)
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "the group quiesces once %s is reported down", f.id)
	want := l.p.Raft().CommitIndex()

	// Back, but still reported down for 4 s.
	g.start(fi)
	time.Sleep(4 * time.Second)
	down.Delete(f.id)
	var have atomic.Uint64 // the follower's last commit index and quiescence, for the failure
	var quiesced atomic.Bool
	if !assert.Eventually(t, func() bool {
		have.Store(f.p.Raft().CommitIndex())
		quiesced.Store(f.p.Quiesced())
		return have.Load() >= want
	}, 20*time.Second, 10*time.Millisecond, "the follower back has commit index %d", want) {
		t.Fatalf("the follower back has commit index %d, quiesced %v", have.Load(), quiesced.Load())
	}
	require.True(t, l.p.IsLeader(), "%s still leads", l.id)
}

// A leader cut off while quiesced (its node paused or partitioned away) stays a quiesced leader
// of its old term: the others, woken by liveness reporting its node down, elect a new leader,
// which quiesces without it, and nothing brings it the newer term, so it keeps claiming the
// partition at an old commit index (the control). Waking the new leader once liveness reports
// the node back (cluster's gossip watch wakes a node's quiesced leaders when another node comes
// back) sends it a heartbeat of the newer term: it steps down and learns the commit index.
func TestQuiescedLeaderCutOffLearnsTheNewerTerm(t *testing.T) {
	t.Parallel()
	g, down := downReportingGroup(t, 300*time.Millisecond)
	_, err := g.put(context.Background(), testCell(t, 0))
	require.NoError(t, err, "put")
	require.Eventually(t, allQuiesced(g), 5*time.Second, 10*time.Millisecond, "the group quiesces")
	time.Sleep(200 * time.Millisecond) // the quiescing heartbeats' answers back at the leader
	old := g.leader()
	oldTerm := old.p.Raft().CurrentTerm()
	var others []*replica
	g.mu.Lock()
	for _, r := range g.replicas {
		if r != old {
			others = append(others, r)
		}
	}
	cut := func(connect bool) {
		for _, o := range others {
			if connect {
				o.trans.Connect(raft.ServerAddress(old.id), old.trans)
				old.trans.Connect(raft.ServerAddress(o.id), o.trans)
			} else {
				o.trans.Disconnect(raft.ServerAddress(old.id))
				old.trans.Disconnect(raft.ServerAddress(o.id))
			}
		}
	}
	cut(false)
	g.mu.Unlock()
	down.Store(old.id, true)
	for _, o := range others {
		o.p.Wake() // as gossip wakes the followers of a leader it reports down
	}
	var next *replica
	require.Eventually(t, func() bool {
		for _, o := range others {
			if o.p.IsLeader() && o.p.Raft().CurrentTerm() > oldTerm && o.p.Quiesced() {
				next = o
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "a new leader of a newer term than %d, quiesced without %s", oldTerm, old.id)
	want := next.p.Raft().CommitIndex()
	require.Greater(t, want, old.p.Raft().CommitIndex(), "the new leader's commit index, beyond the cut-off leader's")

	// The new leader's sends to the cut-off replica fail, back off, and stop once it is
	// quiesced with that replica reported down (its replication returns after the backoff).
	time.Sleep(2 * time.Second)
	require.True(t, old.p.Quiesced(), "%s, cut off, still a quiesced leader", old.id)
	g.mu.Lock()
	cut(true)
	g.mu.Unlock()
	down.Delete(old.id)
	// Time passing is the point: nobody woken, nothing reaches the old leader.
	require.Never(t, func() bool { return !old.p.IsLeader() }, 1500*time.Millisecond, 20*time.Millisecond,
		"%s learned of the newer term with no replica woken", old.id)
	next.p.Wake()
	require.Eventually(t, func() bool {
		id, _ := old.p.Leader()
		return !old.p.IsLeader() && id == next.id && old.p.Raft().CommitIndex() >= want
	}, 10*time.Second, 10*time.Millisecond, "%s follows %s with commit index %d once %s is woken", old.id, next.id, want, next.id)
}
