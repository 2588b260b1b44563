package partition

// Status is what a partition served on a node reports of itself, without I/O: Raft for a raft
// replica, Async for a partition of an async datastore; the other is nil.
type Status struct {
	Raft  *RaftStatus
	Async *AsyncStatus
}

// RaftStatus is a raft replica's state.
type RaftStatus struct {
	// Leader is the node id of the group's leader as the replica knows it ("" when unknown).
	Leader string
	// State is the replica's raft state: Leader, Follower, Candidate or Shutdown.
	State string
	// Term, CommitIndex and LastIndex are the replica's current term, commit index and last
	// log index; AppliedIndex is the last entry its store reflects (raft's own no-op entries
	// are not applied, so it can stay below CommitIndex).
	Term, CommitIndex, AppliedIndex, LastIndex uint64
	// Quiesced is set while the replica is quiesced (Config.QuiesceAfter): an idle group that
	// sends no heartbeats.
	Quiesced bool
}

// Status returns the replica's raft state.
func (p *Raft) Status() Status {
	leader, _ := p.Leader()
	return Status{Raft: &RaftStatus{Leader: leader, State: p.raft.State().String(), Term: p.raft.CurrentTerm(),
		CommitIndex: p.raft.CommitIndex(), AppliedIndex: p.fsm.Applied().Index, LastIndex: p.raft.LastIndex(), Quiesced: p.raft.Quiesced()}}
}

// Elected reports true: a raft group elects its leader, which may move at any time (see
// Leader).
func (p *Raft) Elected() bool { return true }
