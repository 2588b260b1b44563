package partition

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/command"
)

// Followers apply a write about when the leader does: the leader sends them each new commit
// index at once (raft.Config.CommitNotify, third_party/raft/PATCHES.md) instead of at the next
// entries or CommitTimeout tick. With a CommitTimeout of 3 s, a lone write reaches every
// follower's state machine within 500 ms; without CommitNotify (upstream's behaviour, the
// case that shows the check failing without the patch) it waits for the tick, 3 to 6 s.
func TestFollowersLearnCommitIndexAtOnce(t *testing.T) {
	t.Parallel()
	const commitTimeout = 3 * time.Second
	for _, notify := range []bool{true, false} {
		lazy := !notify
		t.Run(map[bool]string{false: "notified", true: "lazy"}[lazy], func(t *testing.T) {
			t.Parallel()
			g := newGroup(t, 3, func(c *Config) {
				c.CommitTimeout, c.CommitNotify = commitTimeout, notify
			})
			ctx := context.Background()
			_, err := g.put(ctx, testCell(t, 0))
			require.NoError(t, err, "first put")
			g.converge()
			l := g.leader()
			writes := 5
			if lazy {
				writes = 1 // each waits for a tick
			}
			for i := 1; i <= writes; i++ {
				_, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{testCell(t, i)}})
				require.NoError(t, err, "put %d on leader %s", i, l.id)
				want, acked := l.p.Raft().AppliedIndex(), time.Now()
				require.Eventually(t, func() bool {
					for _, r := range g.replicas {
						if r.p.Raft().AppliedIndex() < want {
							return false
						}
					}
					return true
				}, 2*commitTimeout+time.Second, time.Millisecond, "every follower applies index %d of put %d", want, i)
				took := time.Since(acked)
				t.Logf("lazy=%v put %d: every follower applied index %d %v after the leader", lazy, i, want, took.Round(time.Millisecond))
				if lazy {
					assert.GreaterOrEqual(t, took, commitTimeout/2,
						"without CommitNotify the followers learn index %d only at the commit tick (CommitTimeout %v)", want, commitTimeout)
				} else {
					assert.Less(t, took, 500*time.Millisecond,
						"the followers learn commit index %d at once, not at the tick (CommitTimeout %v)", want, commitTimeout)
				}
			}
		})
	}
}
