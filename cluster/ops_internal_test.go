package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
)

func TestCombineWriteErrors(t *testing.T) {
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
			u, i := errors.Is(err, partition.ErrUnavailable), errors.Is(err, partition.ErrIndeterminate)
			var ok bool
			switch tc.want {
			case isNil:
				ok = err == nil
			case isUnavailable:
				ok = u && !i
			case isIndeterminate:
				ok = i && !u
			case isBad:
				ok = errors.Is(err, ErrBadShard)
			}
			if !ok {
				t.Errorf("combineWriteErrors(%v): got %v (unavailable %v, indeterminate %v), want case %d", tc.errs, err, u, i, tc.want)
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
	if took > d+time.Second {
		t.Errorf("callLeader returned after %v, want within its %v deadline (+1s)", took, d)
	}
	return err, took
}

func TestCallLeaderFollowsTheLeaderNamed(t *testing.T) {
	n, r := testNode()
	s := &scripted{answers: []func(string) error{func(target string) error {
		if target != "n3" {
			return &partition.NotLeaderError{LeaderID: "n3", LeaderAddr: "127.0.0.1:5"}
		}
		return nil
	}}}
	err, _ := callWithin(t, n, r, true, s, 5*time.Second)
	if err != nil {
		t.Fatalf("callLeader: got %v, want nil", err)
	}
	// No leader known: the first replica (n1), which names n3, followed at once.
	if calls := s.calls(); len(calls) != 2 || calls[0] != "n1" || calls[1] != "n3" {
		t.Errorf("targets: got %v, want [n1 n3]", calls)
	}
	if r.hint != "n3" {
		t.Errorf("hint after a NotLeader answer naming n3: got %q, want n3", r.hint)
	}
	// The next call goes straight to the known leader.
	s2 := &scripted{answers: s.answers}
	if err, _ := callWithin(t, n, r, true, s2, 5*time.Second); err != nil || len(s2.calls()) != 1 {
		t.Errorf("second call: got %v after targets %v, want nil after one call to n3", err, s2.calls())
	}
}

func TestCallLeaderRetriesUnknownLeader(t *testing.T) {
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
	if err, _ := callWithin(t, n, r, false, s, 5*time.Second); err != nil {
		t.Fatalf("callLeader: got %v, want nil once a replica answers", err)
	}
	calls := s.calls()
	if len(calls) != 4 {
		t.Fatalf("targets: got %v, want 4 calls", calls)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] == calls[i-1] {
			t.Errorf("targets: got %v, want the replicas in turn while no leader is known", calls)
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
	if !errors.Is(err, partition.ErrUnavailable) {
		t.Errorf("callLeader with a hint cycle: got %v, want ErrUnavailable", err)
	}
	if calls := len(s.calls()); calls > 1000 {
		t.Errorf("callLeader with a hint cycle: got %d calls in 300ms, want backoff between rounds of hops", calls)
	}
}

func TestCallLeaderUnavailableUntilDeadline(t *testing.T) {
	for _, write := range []bool{true, false} {
		t.Run(fmt.Sprintf("write=%v", write), func(t *testing.T) {
			n, r := testNode()
			s := &scripted{answers: []func(string) error{answer(fmt.Errorf("%w: connection refused", partition.ErrUnavailable))}}
			err, took := callWithin(t, n, r, write, s, 200*time.Millisecond)
			if !errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate) {
				t.Errorf("got %v, want ErrUnavailable only", err)
			}
			if took < 200*time.Millisecond || len(s.calls()) < 2 {
				t.Errorf("gave up after %v and %d calls, want retries until the 200ms deadline", took, len(s.calls()))
			}
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
			if !errors.Is(err, partition.ErrIndeterminate) || errors.Is(err, partition.ErrUnavailable) {
				t.Errorf("write: indeterminate then %s: got %v, want ErrIndeterminate only", name, err)
			}
		})
	}
	t.Run("read", func(t *testing.T) {
		n, r := testNode()
		s := &scripted{answers: []func(string) error{answer(indeterminate)}}
		err, _ := callWithin(t, n, r, false, s, 200*time.Millisecond)
		if !errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate) {
			t.Errorf("read answered indeterminate: got %v, want ErrUnavailable only", err)
		}
	})
}

func TestCallLeaderDefinitiveError(t *testing.T) {
	n, r := testNode()
	bad := fmt.Errorf("%w: shard 99", ErrBadShard)
	s := &scripted{answers: []func(string) error{answer(bad)}}
	err, _ := callWithin(t, n, r, true, s, 5*time.Second)
	if !errors.Is(err, ErrBadShard) || len(s.calls()) != 1 {
		t.Errorf("got %v after %d calls, want ErrBadShard after one call", err, len(s.calls()))
	}
}

func TestRemainingMicros(t *testing.T) {
	if got := remainingMicros(context.Background(), time.Second); got != 1e6 {
		t.Errorf("no deadline: got %d, want %d", got, int64(1e6))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if got := remainingMicros(ctx, time.Second); got <= 0 || got > 100_000 {
		t.Errorf("100ms deadline, 1s cap: got %dµs, want in (0, 100000]", got)
	}
}
