package partition

import "sync"

// voteTracker counts the vote requests this replica sends as a candidate: the newest term it
// asked for votes in, and how many of that term's RequestVote RPCs are still on their way
// (sent, neither answered nor failed). It lets the first election of a split's new group be
// started again only once the one before cannot win any more (Raft.Votes), instead of on a
// timer that cut short elections a busy disk made slow: each vote costs the candidate and the
// voter a synced write of the term, and on three loaded nodes a vote's answer came after more
// than 60 ms (BENCHMARKS.md).
type voteTracker struct {
	mu      sync.Mutex
	term    uint64
	pending int
}

// sent records a RequestVote of term leaving, and returns the function that records its end.
func (v *voteTracker) sent(term uint64) func() {
	v.mu.Lock()
	if term > v.term {
		v.term, v.pending = term, 0
	}
	counted := term == v.term
	if counted {
		v.pending++
	}
	v.mu.Unlock()
	return func() {
		if !counted {
			return
		}
		v.mu.Lock()
		if v.term == term && v.pending > 0 {
			v.pending--
		}
		v.mu.Unlock()
	}
}

// state returns the newest term votes were asked for in (0: never) and how many of its vote
// requests are on their way.
func (v *voteTracker) state() (term uint64, pending int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.term, v.pending
}

// Votes returns the newest raft term in which this replica asked the other voters for their
// votes (0: never since it opened) and how many of those requests are still on their way:
// once the term is past the one before a Campaign and none is pending, that election has
// every answer it will get (won, or lost for want of open or willing voters). Safe from any
// goroutine; never blocks.
func (p *Raft) Votes() (term uint64, pending int) { return p.votes.state() }
