package partition

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/command"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingTransport counts the AppendEntries a replica sends: heartbeats (no entries, no
// previous entry, no commit index: raft's heartbeat goroutine) and the others, which carry
// entries or the leader's commit index (raft's replication goroutine), of which pipelined. With
// pipeline false it refuses pipelines, as the nodes' transports do (MaxRPCsInFlight 1).
type countingTransport struct {
	*raft.InmemTransport
	pipeline                       bool
	heartbeats, appends, pipelined atomic.Int64
}

func (t *countingTransport) count(req *raft.AppendEntriesRequest) {
	if len(req.Entries) == 0 && req.PrevLogEntry == 0 && req.LeaderCommitIndex == 0 {
		t.heartbeats.Add(1)
	} else {
		t.appends.Add(1)
	}
}

func (t *countingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	t.count(args)
	return t.InmemTransport.AppendEntries(id, target, args, resp)
}

func (t *countingTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if !t.pipeline {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	p, err := t.InmemTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return countingPipeline{AppendPipeline: p, t: t}, nil
}

type countingPipeline struct {
	raft.AppendPipeline
	t *countingTransport
}

func (p countingPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.t.count(args)
	p.t.pipelined.Add(1)
	return p.AppendPipeline.AppendEntries(args, resp)
}

// An idle leader stops repeating its commit index to followers that have it: the CommitTimeout
// tick sends an AppendEntries only when a follower may lack an entry or the commit index, and
// once every HeartbeatTimeout otherwise (third_party/raft/PATCHES.md). Followers still learn a
// new commit index at the next tick after writes stop, and a follower restarted while the group
// is idle learns it within about HeartbeatTimeout. Both of raft's replication loops: one
// AppendEntries at a time (the nodes' transports) and pipelined.
func TestIdleLeaderRepeatsCommitIndexOnlyEveryHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	for _, pipeline := range []bool{false, true} {
		t.Run(map[bool]string{false: "one at a time", true: "pipelined"}[pipeline], func(t *testing.T) {
			t.Parallel()
			idleLeader(t, pipeline)
		})
	}
}

func idleLeader(t *testing.T, pipeline bool) {
	const (
		heartbeat = 2 * time.Second
		commit    = 50 * time.Millisecond // the default: a tick every 50 to 100 ms
	)
	var mu sync.Mutex
	sent := map[string]*countingTransport{}
	g := newGroup(t, 3, func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.CommitTimeout = heartbeat, heartbeat, heartbeat/2, commit
		ct := &countingTransport{InmemTransport: c.Transport.(*raft.InmemTransport), pipeline: pipeline}
		c.Transport = ct
		mu.Lock()
		sent[c.NodeID] = ct
		mu.Unlock()
	})
	ctx := context.Background()
	_, err := g.put(ctx, testCell(t, 0))
	require.NoError(t, err, "first put")
	g.converge()
	l := g.leader()
	term := l.p.Raft().CurrentTerm()
	var followers []*replica
	for _, r := range g.replicas {
		if r != l {
			followers = append(followers, r)
		}
	}
	learned := func(want uint64) func() bool {
		return func() bool {
			for _, f := range followers {
				if f.p.Raft().CommitIndex() < want {
					return false
				}
			}
			return true
		}
	}
	require.Eventually(t, learned(l.p.Raft().CommitIndex()), heartbeat+time.Second, 5*time.Millisecond,
		"the followers learn the leader's commit index %d", l.p.Raft().CommitIndex())

	// Idle: without the patch, one AppendEntries per follower every 50 to 100 ms (about 100 in
	// the window); with it, one per follower per HeartbeatTimeout.
	mu.Lock()
	lt := sent[l.id]
	mu.Unlock()
	const window = 2 * heartbeat
	appends, heartbeats := lt.appends.Load(), lt.heartbeats.Load()
	time.Sleep(window)
	appends, heartbeats = lt.appends.Load()-appends, lt.heartbeats.Load()-heartbeats
	require.True(t, l.p.IsLeader() && l.p.Raft().CurrentTerm() == term, "%s leads term %d throughout the idle window", l.id, term)
	t.Logf("idle leader %s over %v: %d AppendEntries with the commit index, %d heartbeats", l.id, window, appends, heartbeats)
	limit := int64(len(followers)) * int64(window/heartbeat+1)
	assert.LessOrEqual(t, appends, limit, "AppendEntries the idle leader sent its %d followers in %v: got %d, want at most %d (one per follower per HeartbeatTimeout)",
		len(followers), window, appends, limit)
	assert.Positive(t, heartbeats, "heartbeats the idle leader sent in %v", window)

	// A write then nothing: each follower learns the new commit index at the next tick, well
	// before the once-per-HeartbeatTimeout send (a quarter of it here), every time.
	for i := 1; i <= 5; i++ {
		_, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{testCell(t, i)}})
		require.NoError(t, err, "put %d on leader %s", i, l.id)
		want := l.p.Raft().CommitIndex()
		require.Eventually(t, learned(want), heartbeat/4, 5*time.Millisecond,
			"after put %d the followers learn commit index %d within %v (HeartbeatTimeout %v)", i, want, heartbeat/4, heartbeat)
	}

	// A follower restarted while idle starts with commit index 0 and holds every entry: the
	// leader sees nothing new to send, yet the follower learns the commit index within about
	// HeartbeatTimeout.
	f := followers[0]
	fi := indexOf(g, f)
	g.stop(fi)
	g.start(fi)
	restarted := time.Now()
	want := l.p.Raft().CommitIndex()
	t.Logf("restarted follower %s: commit index %d, the leader's %d", f.id, f.p.Raft().CommitIndex(), want)
	require.Eventually(t, func() bool { return f.p.Raft().CommitIndex() >= want }, heartbeat+time.Second, 10*time.Millisecond,
		"restarted follower %s learns commit index %d within HeartbeatTimeout %v plus 1s", f.id, want, heartbeat)
	t.Logf("restarted follower %s learned commit index %d after %v", f.id, want, time.Since(restarted).Round(time.Millisecond))
	require.Equal(t, term, l.p.Raft().CurrentTerm(), "the leader's term after the restart")
	if pipeline {
		assert.Positive(t, lt.pipelined.Load(), "AppendEntries leader %s pipelined", l.id)
	} else {
		assert.Zero(t, lt.pipelined.Load(), "AppendEntries leader %s pipelined", l.id)
	}
}
