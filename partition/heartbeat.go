package partition

import "github.com/hashicorp/raft"

// replicaTransport wraps the raft transport of a replica for two purposes.
//
// Serial heartbeats (serial set): heartbeats take the same path as every other RPC, raft's
// main goroutine, in order. hashicorp/raft's NetworkTransport hands heartbeats
// (AppendEntries with no entries) to a "fast path" handler that runs appendEntries on the
// connection's goroutine, concurrently with the main goroutine, although appendEntries "must
// only be called from the main thread". A heartbeat carrying a newer term can then step a
// deposed leader down while its main goroutine is writing an entry, which gets stored under
// the new term and diverges the logs (hashicorp/raft issue 695, pull request 701: Log Matching
// and State Machine Safety broken after a partition heals). Refusing the handler closes that
// race; the price is that a heartbeat waits behind a disk write of the same group, which the
// election timeout (1 s by default, against writes of a few milliseconds) absorbs.
//
// Counted votes (votes set): every RequestVote is counted while it is out (voteTracker,
// Raft.Votes).
type replicaTransport struct {
	raft.Transport
	serial bool
	votes  *voteTracker
}

// SetHeartbeatHandler installs raft's heartbeat fast path on the wrapped transport, or, with
// serial heartbeats, ignores it, so the transport delivers heartbeats on Consumer().
func (t replicaTransport) SetHeartbeatHandler(h func(raft.RPC)) {
	if !t.serial {
		t.Transport.SetHeartbeatHandler(h)
	}
}

// RequestVote sends a vote request through the wrapped transport, counted while it is out.
func (t replicaTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.votes != nil {
		defer t.votes.sent(args.Term)()
	}
	return t.Transport.RequestVote(id, target, args, resp)
}

// Close closes the wrapped transport when it can be closed (raft.WithClose).
func (t replicaTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// replicaTransportPreVote is replicaTransport over a transport that supports pre-vote, which
// raft detects with a type assertion (raft.WithPreVote), so the wrapper must keep it visible.
type replicaTransportPreVote struct {
	replicaTransport
	pv raft.WithPreVote
}

// RequestPreVote sends a pre-vote request through the wrapped transport (not counted: the
// elections Raft.Votes follows skip the pre-vote).
func (t replicaTransportPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.pv.RequestPreVote(id, target, args, resp)
}

// wrapTransport returns t wrapped: heartbeats serial (raft's fast path never used) when
// serial is set, vote requests counted by votes when it is not nil.
func wrapTransport(t raft.Transport, serial bool, votes *voteTracker) raft.Transport {
	w := replicaTransport{Transport: t, serial: serial, votes: votes}
	if pv, ok := t.(raft.WithPreVote); ok {
		return replicaTransportPreVote{w, pv}
	}
	return w
}

var (
	_ raft.WithClose   = replicaTransport{}
	_ raft.WithPreVote = replicaTransportPreVote{}
)
