package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// servedHere is a partition served by the test node ("n9"): only what callLeader asks of it
// (Leader, Elected) is implemented; the operation itself is callLeader's local function.
type servedHere struct {
	Partition
	elected bool
}

func (p servedHere) Leader() (string, string) { return "n9", "" }
func (p servedHere) Elected() bool            { return p.elected }

// counted returns a local function answering err (after ctx ends when wait is set) and counting
// its calls.
func counted(calls *atomic.Int32, wait bool, err func(ctx context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		calls.Add(1)
		if wait {
			<-ctx.Done()
		}
		return err(ctx)
	}
}

func noRemote(t *testing.T) func(context.Context, topology.NodeSpec) error {
	return func(context.Context, topology.NodeSpec) error {
		assert.Fail(t, "callLeader forwarded a request for a partition served here")
		return nil
	}
}

// An async partition (its leader not elected) is served here and answers for itself: once,
// at once, whatever it says; callLeader neither retries nor forwards.
func TestCallLeaderNotElectedAnswersOnce(t *testing.T) {
	t.Parallel()
	for _, answer := range []error{nil, fmt.Errorf("%w: no master of storage cluster c0", partition.ErrUnavailable),
		fmt.Errorf("%w: master of c0: broken pipe", partition.ErrIndeterminate)} {
		t.Run(fmt.Sprint(answer), func(t *testing.T) {
			n, r := testNode()
			r.serve(servedHere{elected: false})
			var calls atomic.Int32
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := n.callLeader(ctx, r, true, counted(&calls, false, func(context.Context) error { return answer }), noRemote(t))
			assert.Equal(t, answer, err, "callLeader's error: want the partition's answer as it is")
			assert.Equal(t, int32(1), calls.Load(), "calls of the partition")
			assert.NoError(t, ctx.Err(), "callLeader waited for its deadline")
		})
	}
}

// A raft replica served here that answers unavailable is retried until the deadline (an
// election may settle meanwhile).
func TestCallLeaderElectedRetriesLocally(t *testing.T) {
	n, r := testNode()
	r.serve(servedHere{elected: true})
	var calls atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := n.callLeader(ctx, r, true, counted(&calls, false, func(context.Context) error {
		return fmt.Errorf("%w: write queue full", partition.ErrUnavailable)
	}), noRemote(t))
	assert.ErrorIs(t, err, partition.ErrUnavailable)
	assert.Greater(t, calls.Load(), int32(1), "calls of the partition: want retries until the deadline")
}

// A call that ends with its context keeps the context's error in the chain (errors.Is finds
// it), with one class only: indeterminate for a write that may have been applied, unavailable
// otherwise.
func TestCallLeaderTimeoutKeepsContextError(t *testing.T) {
	type want struct{ indeterminate bool }
	cases := []struct {
		name   string
		write  bool
		cancel bool // cancel the context instead of letting its deadline pass
		local  func(ctx context.Context) error
		remote func(string) error
		want   want
	}{
		{name: "forwarded write lost", write: true,
			remote: func(string) error {
				return fmt.Errorf("%w: forwarded to n1: connection reset", partition.ErrIndeterminate)
			},
			want: want{indeterminate: true}},
		{name: "forwarded write lost, then no leader", write: true,
			remote: func() func(string) error {
				var n atomic.Int32
				return func(string) error {
					if n.Add(1) == 1 {
						return fmt.Errorf("%w: forwarded to n1: connection reset", partition.ErrIndeterminate)
					}
					return fmt.Errorf("%w: no leader known", partition.ErrUnavailable)
				}
			}(),
			want: want{indeterminate: true}},
		{name: "forwarded read unavailable",
			remote: func(string) error { return fmt.Errorf("%w: connection refused", partition.ErrUnavailable) }},
		{name: "forwarded read lost",
			remote: func(string) error { return fmt.Errorf("%w: n1: timeout", partition.ErrIndeterminate) }},
		{name: "local write timed out", write: true,
			local: func(ctx context.Context) error { return fmt.Errorf("%w: %w", partition.ErrIndeterminate, ctx.Err()) },
			want:  want{indeterminate: true}},
		{name: "local write cancelled", write: true, cancel: true,
			local: func(ctx context.Context) error { return fmt.Errorf("%w: %w", partition.ErrIndeterminate, ctx.Err()) },
			want:  want{indeterminate: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, r := testNode()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			wantCtx := context.DeadlineExceeded
			if tc.cancel {
				wantCtx = context.Canceled
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			local, remote := noLocal, func(_ context.Context, target topology.NodeSpec) error { return tc.remote(target.ID) }
			if tc.local != nil {
				r.serve(servedHere{elected: true})
				var calls atomic.Int32
				local = counted(&calls, true, tc.local)
				remote = noRemote(t)
			}
			err := n.callLeader(ctx, r, tc.write, local, remote)
			require.Error(t, err)
			assert.ErrorIs(t, err, wantCtx, "the context's error in %q", err)
			if tc.want.indeterminate {
				assert.ErrorIs(t, err, partition.ErrIndeterminate, "class of %q", err)
				assert.NotErrorIs(t, err, partition.ErrUnavailable, "class of %q: want indeterminate only", err)
			} else {
				assert.ErrorIs(t, err, partition.ErrUnavailable, "class of %q", err)
				assert.NotErrorIs(t, err, partition.ErrIndeterminate, "class of %q: want unavailable only", err)
			}
			var nl *partition.NotLeaderError
			assert.False(t, errors.As(err, &nl), "a not-leader answer in %q", err)
		})
	}
}
