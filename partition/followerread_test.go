package partition

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/command"
)

// getOn reads cell c's key on replica p with consistency cons: whether it was found.
func getOn(ctx context.Context, p *Raft, cons Consistency, c command.Cell) (bool, error) {
	res, err := p.Read(ctx, cons, ReadRequest{Get: &GetRead{Keys: []GetKey{{Shard: c.Shard, Key: c.Key}}}})
	if err != nil {
		return false, err
	}
	return len(res.Get) == 1 && res.Get[0].Found, nil
}

// getOnSettled is getOn asked again, for up to 10s, while it answers ErrUnavailable: a read
// expected to be served, on a group whose leader may step down under a loaded machine (a
// leader that misses its followers' answers for a lease steps down, and a follower's read
// index then waits for the next one). It fails t if no answer comes.
func getOnSettled(t *testing.T, p *Raft, cons Consistency, c command.Cell) bool {
	t.Helper()
	var found bool
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		found, err = getOn(ctx, p, cons, c)
		if !assert.NoError(ct, err) {
			require.ErrorIs(t, err, ErrUnavailable, "a read that is not served is refused as unavailable")
		}
	}, 10*time.Second, 50*time.Millisecond, "a %s read", cons)
	return found
}

// TestFollowerReads: three replicas whose LeaderReadIndex asks the group's leader, unless the
// test cuts it off.
//   - A follower serves a strong read of a cell acknowledged just before, after a read index
//     from the leader; cut off, it refuses the strong read (never answers from its own state).
//   - A read bounded at 300ms is served by the follower within the bound of its last read
//     index; once that is older than the bound and the leader cannot be asked, it is refused
//     with ErrTooStale; asked again once the leader answers, it reflects the cell written
//     meanwhile.
//   - The leader serves bounded reads itself.
func TestFollowerReads(t *testing.T) {
	t.Parallel()
	var cut atomic.Bool
	var g *group
	g = newGroup(t, 3, func(c *Config) {
		c.FollowerStrongReads = true // voters here; the cluster lets only learners do it
		c.LeaderReadIndex = func(ctx context.Context) (uint64, error) {
			if cut.Load() {
				return 0, errors.New("cut off from the leader")
			}
			l, ok := g.leading()
			if !ok {
				return 0, ErrUnavailable
			}
			return l.p.LeaderReadIndex(ctx)
		}
	})
	l := g.leader()
	var f *Raft
	for _, r := range g.replicas {
		if r != l {
			f = r.p
			break
		}
	}
	ctx := context.Background()
	c1, c2 := testCell(t, 1), testCell(t, 2)
	_, err := g.put(ctx, c1)
	require.NoError(t, err)
	assert.True(t, getOnSettled(t, f, Strong, c1), "the follower's strong read reflects the write acknowledged before it")

	cut.Store(true)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = getOn(cctx, f, Strong, c1)
	cancel()
	assert.Error(t, err, "a follower cut off from its leader refuses a strong read")

	cut.Store(false)
	bound := 300 * time.Millisecond
	assert.True(t, getOnSettled(t, f, BoundedStale(bound), c1), "a bounded read on the follower")
	cut.Store(true)
	_, err = g.put(ctx, c2)
	require.NoError(t, err)
	time.Sleep(bound + 100*time.Millisecond)
	_, err = getOn(ctx, f, BoundedStale(bound), c2)
	assert.ErrorIs(t, err, ErrTooStale, "past its bound with the leader cut off, the follower refuses")
	assert.ErrorIs(t, err, ErrUnavailable, "ErrTooStale is unavailable: another replica may serve it")

	cut.Store(false)
	assert.True(t, getOnSettled(t, f, BoundedStale(bound), c2), "asked again, the follower reflects the cell acknowledged before")
	if l, ok := g.leading(); ok {
		found, err := getOn(ctx, l.p, BoundedStale(time.Millisecond), c2)
		if !errors.Is(err, ErrUnavailable) { // not stepped down meanwhile
			require.NoError(t, err, "the leader serves any bound")
			assert.True(t, found)
		}
	}
}

// TestBoundedStaleConsistency: BoundedStale round-trips through MaxStaleness; other values are
// not bounded, and bounds outside (0, MaxStalenessLimit] are invalid.
func TestBoundedStaleConsistency(t *testing.T) {
	t.Parallel()
	d, ok := BoundedStale(2 * time.Second).MaxStaleness()
	assert.True(t, ok)
	assert.Equal(t, 2*time.Second, d)
	assert.True(t, BoundedStale(time.Second).IsStale())
	assert.True(t, BoundedStale(time.Second).Valid())
	for _, c := range []Consistency{Strong, Stale, "", "stale<=", "stale<=x", "stale<=0", "stale<=-5", Consistency("stale<=" + "7200000000000")} {
		_, ok := c.MaxStaleness()
		assert.False(t, ok, "%q is not bounded", c)
	}
	assert.False(t, Consistency("stale<=0").Valid())
	assert.False(t, Consistency("eventual").Valid())
	assert.True(t, Strong.Valid())
	assert.True(t, Stale.Valid())
}
