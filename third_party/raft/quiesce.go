// Quiescence: a schemaless patch (see PATCHES.md), after CockroachDB's
// quiesced ranges. An idle raft group costs its leader a heartbeat to each
// follower every HeartbeatTimeout/10 and each follower an election timer, for
// ever; a node hosting hundreds of groups spends a core on nothing. With
// Config.QuiesceTimeout set, a leader that has had nothing to do for that long,
// whose followers all hold its last entry and its commit index and answered
// within HeartbeatTimeout, quiesces: each heartbeat goroutine sends one last
// heartbeat with AppendEntriesRequest.Quiesce set and parks, the commit-index
// ticks stop, and the leader lease check stops (a quiesced leader has no lease
// to keep: reads go through VerifyLeader, which wakes it). A follower that
// accepts a quiescing heartbeat stops its election timer.
//
// The leader wakes on any work: a new entry, a configuration change, a
// VerifyLeader, a leadership transfer, a restore, any RPC (a vote request from
// a follower that lost patience), or Wake. It then sends heartbeats at once,
// which wake its followers, and restarts its lease from that moment. A
// follower wakes on any RPC other than a quiescing heartbeat and on Wake, and
// then starts an election if it has not heard from the leader for
// HeartbeatTimeout. A follower whose commit index is behind the one a
// quiescing heartbeat carries (it restarted) refuses to quiesce, and the leader
// that sees the refusal wakes and sends it the commit index. Because a quiesced
// follower keeps its leader, it refuses votes to others until it wakes
// (hashicorp/raft's leader stickiness), so a
// quiesced group elects a new leader only once the application wakes its
// followers: call Wake on the replicas of a group whose leader's server a
// node-level liveness signal (gossip) reports down.
//
// Quiescence changes when elections happen, never what is committed or
// applied: safety does not rest on heartbeats or on the leader lease.

package raft

import (
	"sync"
	"sync/atomic"
	"time"
)

// quiesceState is a Raft's quiescence state.
type quiesceState struct {
	mu sync.Mutex
	// leaderWake is non-nil while this server is a quiesced leader; it is
	// closed when the leader wakes.
	leaderWake chan struct{}
	// follower is set while this server is a follower that accepted a
	// quiescing heartbeat and has not been woken since.
	follower atomic.Bool
	// wakeCh (capacity 1) carries Wake to a leader's main goroutine.
	wakeCh chan struct{}
}

// Wake ends this server's quiescence: a quiesced leader resumes its
// heartbeats, a quiesced follower its election timer, and starts an election
// at once if it has not heard from its leader for HeartbeatTimeout. Call it
// when the leader's server is believed down. It never blocks and does nothing
// on a server that is not quiesced. Safe for concurrent use.
func (r *Raft) Wake() {
	if r.quiesce.follower.CompareAndSwap(true, false) {
		asyncNotifyCh(r.followerNotifyCh)
	}
	if r.getState() == Leader && r.leaderQuiesceWake() != nil {
		asyncNotifyCh(r.quiesce.wakeCh)
	}
}

// Quiesced reports whether this server is a quiesced leader or follower.
// Safe for concurrent use.
func (r *Raft) Quiesced() bool {
	return r.quiesce.follower.Load() || r.leaderQuiesceWake() != nil
}

// leaderQuiesceWake returns the channel closed when this quiesced leader
// wakes, or nil when the leader is not quiesced.
func (r *Raft) leaderQuiesceWake() chan struct{} {
	r.quiesce.mu.Lock()
	defer r.quiesce.mu.Unlock()
	return r.quiesce.leaderWake
}

// quiesceLeader marks this leader quiesced. Main goroutine only.
func (r *Raft) quiesceLeader() {
	r.quiesce.mu.Lock()
	defer r.quiesce.mu.Unlock()
	if r.quiesce.leaderWake == nil {
		r.quiesce.leaderWake = make(chan struct{})
	}
}

// wakeLeader ends the leader's quiescence and reports whether it was
// quiesced. Main goroutine only.
func (r *Raft) wakeLeader() bool {
	r.quiesce.mu.Lock()
	defer r.quiesce.mu.Unlock()
	if r.quiesce.leaderWake == nil {
		return false
	}
	close(r.quiesce.leaderWake)
	r.quiesce.leaderWake = nil
	return true
}

// setFollowerQuiesced records whether the follower accepted a quiescing
// heartbeat (true) or any other request of its leader (false).
func (r *Raft) setFollowerQuiesced(q bool) {
	r.quiesce.follower.Store(q)
}

// canQuiesce reports whether the leader, last busy at lastActive, may
// quiesce: QuiesceTimeout is set and has passed, nothing is in flight, the
// configuration is committed, and every follower not reported down
// (Config.QuiesceDown) holds the last entry and has accepted the commit index
// (which is the last entry) and answered within HeartbeatTimeout, those and
// the leader being a quorum of the voters. Main goroutine only (it reads the
// leader state).
func (r *Raft) canQuiesce(lastActive time.Time) bool {
	conf := r.config()
	if conf.QuiesceTimeout <= 0 || time.Since(lastActive) < conf.QuiesceTimeout {
		return false
	}
	if r.getLeadershipTransferInProgress() || r.leaderState.inflight.Len() > 0 || len(r.leaderState.notify) > 0 {
		return false
	}
	if r.configurations.latestIndex != r.configurations.committedIndex {
		return false
	}
	last := r.getLastIndex()
	if r.getCommitIndex() != last {
		return false
	}
	caughtUp := 0 // voters up and caught up, the leader included
	if hasVote(r.configurations.latest, r.localID) {
		caughtUp++
	}
	for id, s := range r.leaderState.replState {
		if r.followerDown(id) {
			continue // believed down: not waited for (Config.QuiesceDown)
		}
		commit, _ := s.acked()
		if atomic.LoadUint64(&s.nextIndex) != last+1 || commit != last || time.Since(s.LastContact()) >= conf.HeartbeatTimeout {
			return false
		}
		if hasVote(r.configurations.latest, id) {
			caughtUp++
		}
	}
	return caughtUp >= r.quorumSize()
}

// followerDown reports whether Config.QuiesceDown reports server id down.
func (r *Raft) followerDown(id ServerID) bool {
	down := r.config().QuiesceDown
	return down != nil && down(id)
}

// leaderBusy records work of the leader's main goroutine at time now: it
// wakes a quiesced leader, whose lease then counts from now (its followers
// were not expected to answer while it was quiesced), and returns the lease
// timer to use, lease when the leader was not quiesced. Main goroutine only.
func (r *Raft) leaderBusy(lease <-chan time.Time) <-chan time.Time {
	if !r.wakeLeader() {
		return lease
	}
	for _, s := range r.leaderState.replState {
		s.setLastContact()
	}
	r.logger.Debug("leader woke from quiescence")
	return time.After(r.config().LeaderLeaseTimeout)
}
