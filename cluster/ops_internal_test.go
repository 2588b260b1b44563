package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCombineWriteErrors(t *testing.T) {
	t.Parallel()
	unavailable := fmt.Errorf("%w: no leader known", partition.ErrUnavailable)
	indeterminate := fmt.Errorf("%w: context deadline exceeded", partition.ErrIndeterminate)
	bad := fmt.Errorf("%w: shard 99", ErrBadShard)
	type want int
	const (
		isNil want = iota
		isUnavailable
		isIndeterminate
		isBad
	)
	cases := []struct {
		name string
		errs []error
		want want
	}{
		{"no groups", nil, isNil},
		{"every group succeeded", []error{nil, nil}, isNil},
		{"one group, unavailable", []error{unavailable}, isUnavailable},
		{"every group unavailable", []error{unavailable, unavailable}, isUnavailable},
		{"one group, indeterminate", []error{indeterminate}, isIndeterminate},
		// Another group was applied: the request as a whole is partly stored.
		{"one succeeded, one unavailable", []error{nil, unavailable}, isIndeterminate},
		{"one unavailable, one succeeded", []error{unavailable, nil}, isIndeterminate},
		{"indeterminate then unavailable", []error{indeterminate, unavailable}, isIndeterminate},
		{"unavailable then indeterminate", []error{unavailable, indeterminate}, isIndeterminate},
		{"one succeeded, one indeterminate", []error{nil, indeterminate}, isIndeterminate},
		{"a definitive error wins", []error{unavailable, bad}, isBad},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := combineWriteErrors(tc.errs)
			switch tc.want {
			case isNil:
				assert.NoError(t, err, "combineWriteErrors(%v)", tc.errs)
			case isUnavailable:
				assert.ErrorIs(t, err, partition.ErrUnavailable, "combineWriteErrors(%v)", tc.errs)
				assert.NotErrorIs(t, err, partition.ErrIndeterminate, "combineWriteErrors(%v): want unavailable only", tc.errs)
			case isIndeterminate:
				assert.ErrorIs(t, err, partition.ErrIndeterminate, "combineWriteErrors(%v)", tc.errs)
				assert.NotErrorIs(t, err, partition.ErrUnavailable, "combineWriteErrors(%v): want indeterminate only", tc.errs)
			case isBad:
				assert.ErrorIs(t, err, ErrBadShard, "combineWriteErrors(%v)", tc.errs)
			}
		})
	}
}

// scripted stands in for the leader: each call of remote takes the next answer (the last one
// repeats) and records the node it was sent to.
type scripted struct {
	mu      sync.Mutex
	answers []func(target string) error
	targets []string
}

func (s *scripted) remote(_ context.Context, target topology.NodeSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets = append(s.targets, target.ID)
	a := s.answers[min(len(s.targets)-1, len(s.answers)-1)]
	return a(target.ID)
}

func (s *scripted) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

func answer(err error) func(string) error { return func(string) error { return err } }

// testNode is a node without replicas, enough for callLeader: every call goes to remote.
func testNode() (*Node, *route) {
	top := &topology.Topology{Nodes: []topology.NodeSpec{
		{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"},
		{ID: "n2", RaftAddr: "127.0.0.1:3", HTTPAddr: "127.0.0.1:4"},
		{ID: "n3", RaftAddr: "127.0.0.1:5", HTTPAddr: "127.0.0.1:6"},
	}}
	n := &Node{cfg: Config{NodeID: "n9", Topology: top, RetryBackoff: time.Millisecond, RetryBackoffMax: 5 * time.Millisecond}}
	r := &route{spec: &topology.PartitionSpec{ID: 0, FirstShard: 0, LastShard: 3, Replicas: []string{"n1", "n2", "n3"}},
		ds: &topology.DatastoreSpec{Name: "trips", Mode: topology.ModeRaft}, replicas: []string{"n1", "n2", "n3"}}
	return n, r
}

func noLocal(context.Context) error {
	panic("callLeader ran the local function on a node without a replica")
}

func callWithin(t *testing.T, n *Node, r *route, write bool, s *scripted, d time.Duration) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := n.callLeader(ctx, r, write, noLocal, s.remote)
	took := time.Since(start)
	assert.LessOrEqual(t, took, d+time.Second, "callLeader's time to return, want within its %v deadline (+1s)", d)
	return err, took
}

func TestCallLeaderFollowsTheLeaderNamed(t *testing.T) {
	t.Parallel()
	n, r := testNode()
	s := &scripted{answers: []func(string) error{func(target string) error {
		if target != "n3" {
			return &partition.NotLeaderError{LeaderID: "n3", LeaderAddr: "127.0.0.1:5"}
		}
		return nil
	}}}
	err, _ := callWithin(t, n, r, true, s, 5*time.Second)
	require.NoError(t, err, "callLeader")
	// No leader known: the first replica (n1), which names n3, followed at once.
	assert.Equal(t, []string{"n1", "n3"}, s.calls(), "targets")
	assert.Equal(t, "n3", r.hint, "hint after a NotLeader answer naming n3")
	// The next call goes straight to the known leader.
	s2 := &scripted{answers: s.answers}
	err, _ = callWithin(t, n, r, true, s2, 5*time.Second)
	assert.NoError(t, err, "second call")
	assert.Equal(t, []string{"n3"}, s2.calls(), "second call: targets, want one call to n3")
}

func TestCallLeaderRetriesUnknownLeader(t *testing.T) {
	t.Parallel()
	n, r := testNode()
	var mu sync.Mutex
	tries := 0
	s := &scripted{answers: []func(string) error{func(string) error {
		mu.Lock()
		defer mu.Unlock()
		tries++
		if tries < 4 {
			return &partition.NotLeaderError{} // an election is under way
		}
		return nil
	}}}
	err, _ := callWithin(t, n, r, false, s, 5*time.Second)
	require.NoError(t, err, "callLeader, want nil once a replica answers")
	calls := s.calls()
	require.Len(t, calls, 4, "targets")
	for i := 1; i < len(calls); i++ {
		if !assert.NotEqual(t, calls[i-1], calls[i], "targets %v: want the replicas in turn while no leader is known", calls) {
			break
		}
	}
}

// A leader-hint cycle (each node names another) must not spin: hops are bounded, then the
// call backs off, and it ends with ctx.
func TestCallLeaderHintCycle(t *testing.T) {
	n, r := testNode()
	next := map[string]string{"n1": "n2", "n2": "n3", "n3": "n1"}
	s := &scripted{answers: []func(string) error{func(target string) error {
		return &partition.NotLeaderError{LeaderID: next[target]}
	}}}
	err, _ := callWithin(t, n, r, false, s, 300*time.Millisecond)
	assert.ErrorIs(t, err, partition.ErrUnavailable, "callLeader with a hint cycle")
	assert.LessOrEqual(t, len(s.calls()), 1000, "callLeader with a hint cycle: calls in 300ms, want backoff between rounds of hops")
}

func TestCallLeaderUnavailableUntilDeadline(t *testing.T) {
	for _, write := range []bool{true, false} {
		t.Run(fmt.Sprintf("write=%v", write), func(t *testing.T) {
			n, r := testNode()
			s := &scripted{answers: []func(string) error{answer(fmt.Errorf("%w: connection refused", partition.ErrUnavailable))}}
			err, took := callWithin(t, n, r, write, s, 200*time.Millisecond)
			assert.ErrorIs(t, err, partition.ErrUnavailable)
			assert.NotErrorIs(t, err, partition.ErrIndeterminate, "want ErrUnavailable only")
			assert.GreaterOrEqual(t, took, 200*time.Millisecond, "time before giving up, want retries until the deadline")
			assert.GreaterOrEqual(t, len(s.calls()), 2, "calls before giving up, want retries until the deadline")
		})
	}
}

// Once an attempt of a write may have applied it, no later answer may turn the outcome into a
// plain failure; reads are never indeterminate.
func TestCallLeaderIndeterminateSticks(t *testing.T) {
	indeterminate := fmt.Errorf("%w: forwarded to n2: connection reset", partition.ErrIndeterminate)
	later := map[string]error{
		"unavailable": fmt.Errorf("%w: no leader known", partition.ErrUnavailable),
		"not leader":  &partition.NotLeaderError{},
		// What a local replica answers while its node shuts down: the write of the first
		// attempt may still commit, so the call must end indeterminate, not with ErrClosed
		// (which the API turns into 503 unavailable, "not applied").
		"closed": partition.ErrClosed,
	}
	for name, then := range later {
		t.Run(name, func(t *testing.T) {
			n, r := testNode()
			s := &scripted{answers: []func(string) error{answer(indeterminate), answer(then)}}
			err, _ := callWithin(t, n, r, true, s, 200*time.Millisecond)
			assert.ErrorIs(t, err, partition.ErrIndeterminate, "write: indeterminate then %s", name)
			assert.NotErrorIs(t, err, partition.ErrUnavailable, "write: indeterminate then %s: want ErrIndeterminate only", name)
		})
	}
	t.Run("read", func(t *testing.T) {
		n, r := testNode()
		s := &scripted{answers: []func(string) error{answer(indeterminate)}}
		err, _ := callWithin(t, n, r, false, s, 200*time.Millisecond)
		assert.ErrorIs(t, err, partition.ErrUnavailable, "read answered indeterminate")
		assert.NotErrorIs(t, err, partition.ErrIndeterminate, "read answered indeterminate: want ErrUnavailable only")
	})
}

func TestCallLeaderDefinitiveError(t *testing.T) {
	t.Parallel()
	n, r := testNode()
	bad := fmt.Errorf("%w: shard 99", ErrBadShard)
	s := &scripted{answers: []func(string) error{answer(bad)}}
	err, _ := callWithin(t, n, r, true, s, 5*time.Second)
	assert.ErrorIs(t, err, ErrBadShard)
	assert.Len(t, s.calls(), 1, "calls, want no retry of a definitive error")
}

func TestRemainingMicros(t *testing.T) {
	t.Parallel()
	assert.Equal(t, int64(1e6), remainingMicros(context.Background(), time.Second), "no deadline")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	got := remainingMicros(ctx, time.Second)
	assert.Positive(t, got, "100ms deadline, 1s cap: µs")
	assert.LessOrEqual(t, got, int64(100_000), "100ms deadline, 1s cap: µs")
}
