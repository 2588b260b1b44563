package partition

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCampaignAgainElects: a replica's Campaign whose vote requests cannot reach the other
// voters (a split's new group, whose other replicas open when they apply the split) leaves it
// a candidate; a Campaign once they are reachable elects it at once, not after the election
// timeout (20 s here). It fails without the raft patch "A TimeoutNow restarts an election"
// (third_party/raft/PATCHES.md): the candidate then ignores the second TimeoutNow.
func TestCampaignAgainElects(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 20*time.Second, 20*time.Second, 500*time.Millisecond
	})
	r1 := g.replicas[0]
	self := raft.ServerAddress(r1.id)
	r1.trans.Connect(self, r1.trans) // Campaign sends its TimeoutNow to itself through the transport
	for _, o := range g.replicas[1:] {
		r1.trans.Disconnect(raft.ServerAddress(o.id))
		o.trans.Disconnect(self)
	}
	require.NoError(t, r1.p.Campaign(), "first campaign")
	time.Sleep(300 * time.Millisecond)
	_, ok := g.leading()
	require.False(t, ok, "no leader while the voters are unreachable")
	term, pending := r1.p.Votes()
	assert.GreaterOrEqual(t, term, uint64(1), "the campaign asked for votes")
	assert.Zero(t, pending, "both vote requests failed: none is on its way")

	for _, o := range g.replicas[1:] {
		r1.trans.Connect(raft.ServerAddress(o.id), o.trans)
		o.trans.Connect(self, r1.trans)
	}
	began := time.Now()
	require.NoError(t, r1.p.Campaign(), "second campaign")
	require.Eventually(t, r1.p.IsLeader, 3*time.Second, 10*time.Millisecond, "the second campaign elects r1 well before the 20 s election timeout")
	assert.Less(t, time.Since(began), 3*time.Second)
	won, _ := r1.p.Votes()
	assert.Greater(t, won, term, "the second campaign asked for votes in a later term")
	t.Logf("elected %v after the second campaign", time.Since(began))
}

// TestALeaderKeepsItsTerm: Campaign on the replica that leads leaves it leading in the same
// term, and so does the TimeoutNow Campaign sends while its replica is a candidate when it
// arrives once that replica has won (timeoutNowToSelf, sent to the leader whatever its state).
// The second case fails without the raft patch "A leader ignores a TimeoutNow"
// (third_party/raft/PATCHES.md): the leader stepped down and elected itself again in the next
// term.
func TestALeaderKeepsItsTerm(t *testing.T) {
	t.Parallel()
	for name, kick := range map[string]func(p *Raft) error{
		"Campaign":   (*Raft).Campaign,
		"TimeoutNow": (*Raft).timeoutNowToSelf,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := newGroup(t, 3, nil)
			r := g.leader()
			r.trans.Connect(raft.ServerAddress(r.id), r.trans)
			term := r.p.raft.CurrentTerm()
			require.NoError(t, kick(r.p))
			time.Sleep(300 * time.Millisecond)
			assert.True(t, r.p.IsLeader(), "the leader leads after the %s", name)
			assert.Equal(t, term, r.p.raft.CurrentTerm(), "the term after the leader's %s", name)
		})
	}
}
