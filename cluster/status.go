package cluster

import "github.com/schemaless-db/schemaless/partition"

// ReplicaStatus is this node's view of one partition: raft fields are set only when the node
// hosts a replica (Local).
type ReplicaStatus struct {
	Datastore    string
	Partition    int
	Local        bool
	Leader       string // node id of the leader, as known here ("" when unknown)
	State        string // raft state of the local replica: Leader, Follower, Candidate, Shutdown
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64 // the FSM's applied index (what the SQL store reflects)
	LastIndex    uint64
	// Quiesced: the local replica is quiesced (an idle group that sends no heartbeats).
	Quiesced bool
	// Async is the partition's state in async mode (nil in raft mode).
	Async *partition.AsyncStatus
}

// Replicas returns the status of every partition of every datastore, in topology order.
func (n *Node) Replicas() []ReplicaStatus {
	var out []ReplicaStatus
	v := n.view.Load()
	for _, ds := range v.top.Datastores {
		for _, r := range v.byName[ds.Name].partitions {
			st := ReplicaStatus{Datastore: ds.Name, Partition: r.spec.ID}
			var ps partition.Status
			if p := r.local(); p != nil {
				ps = p.Status()
			}
			st.Async = ps.Async
			if rs := ps.Raft; rs != nil {
				st.Local = true
				st.Leader, st.State, st.Term = rs.Leader, rs.State, rs.Term
				st.CommitIndex, st.AppliedIndex, st.LastIndex = rs.CommitIndex, rs.AppliedIndex, rs.LastIndex
				st.Quiesced = rs.Quiesced
			} else {
				r.mu.Lock()
				st.Leader = r.hint
				r.mu.Unlock()
			}
			out = append(out, st)
		}
	}
	return out
}
