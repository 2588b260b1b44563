package partition

import "github.com/hashicorp/raft"

// serialHeartbeats wraps a raft transport so that heartbeats take the same path as every other
// RPC: raft's main goroutine, in order.
//
// hashicorp/raft's NetworkTransport hands heartbeats (AppendEntries with no entries) to a
// "fast path" handler that runs appendEntries on the connection's goroutine, concurrently with
// the main goroutine, although appendEntries "must only be called from the main thread". A
// heartbeat carrying a newer term can then step a deposed leader down while its main goroutine
// is writing an entry, which gets stored under the new term and diverges the logs
// (hashicorp/raft issue 695, pull request 701: Log Matching and State Machine Safety broken
// after a partition heals). Refusing the handler closes that race; the price is that a
// heartbeat waits behind a disk write of the same group, which the election timeout (1 s by
// default, against writes of a few milliseconds) absorbs.
type serialHeartbeats struct {
	raft.Transport
}

// SetHeartbeatHandler ignores the handler, so the transport delivers heartbeats on Consumer().
func (serialHeartbeats) SetHeartbeatHandler(func(raft.RPC)) {}

// Close closes the wrapped transport when it can be closed (raft.WithClose).
func (t serialHeartbeats) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// serialHeartbeatsPreVote is serialHeartbeats over a transport that supports pre-vote, which
// raft detects with a type assertion (raft.WithPreVote), so the wrapper must keep it visible.
type serialHeartbeatsPreVote struct {
	serialHeartbeats
	pv raft.WithPreVote
}

// RequestPreVote sends a pre-vote request through the wrapped transport.
func (t serialHeartbeatsPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.pv.RequestPreVote(id, target, args, resp)
}

// withSerialHeartbeats returns t wrapped so that raft's heartbeat fast path is never used.
func withSerialHeartbeats(t raft.Transport) raft.Transport {
	w := serialHeartbeats{t}
	if pv, ok := t.(raft.WithPreVote); ok {
		return serialHeartbeatsPreVote{w, pv}
	}
	return w
}

var (
	_ raft.WithClose   = serialHeartbeats{}
	_ raft.WithPreVote = serialHeartbeatsPreVote{}
)
