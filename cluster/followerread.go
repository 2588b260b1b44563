package cluster

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
)

// Follower reads: a learner serves a strong read after learning a read index from its
// partition's leader (partition.Config.FollowerStrongReads is off: voters send strong reads to
// the leader, as they always did), and every replica a read with a bound on its staleness while its last read
// index is recent enough (partition.FollowerReadIndex, partition.BoundedReady). The leader's
// read index travels over rpcReadIndexPath.

// rpcReadIndexPath is the node RPC answering the leader's read index of a partition.
const rpcReadIndexPath = "/internal/v1/readindex"

// readIndexRPC asks the leader of a partition for its read index (partition.LeaderReadIndex),
// within TimeoutMicros.
type readIndexRPC struct {
	Datastore     string
	Partition     int
	TimeoutMicros int64
}

// readIndexAnswer is the read index.
type readIndexAnswer struct {
	Index uint64
}

// serveReadIndex answers a readIndexRPC: the read index of this node's replica when it leads,
// else *partition.NotLeaderError with the leader it knows.
func (n *Node) serveReadIndex(w http.ResponseWriter, r *http.Request) {
	var req readIndexRPC
	if err := decodeRPC(r, &req); err != nil {
		http.Error(w, "bad read index request: "+err.Error(), http.StatusBadRequest)
		return
	}
	rt, err := n.rpcRoute(req.Datastore, req.Partition)
	if err == nil && rt.ds.Mode != topology.ModeRaft {
		err = badRPC("datastore", "%q is not a raft datastore", req.Datastore)
	}
	if err != nil {
		refuseRPC(w, "read index", err)
		return
	}
	ctx, cancel := rpcContext(r, req.TimeoutMicros)
	defer cancel()
	p, ok := rt.local().(*partition.Raft)
	if !ok {
		writeRPCError(w, &partition.NotLeaderError{})
		return
	}
	index, err := p.LeaderReadIndex(ctx)
	if err != nil {
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, readIndexAnswer{Index: index})
}

// leaderReadIndex returns partition pid of ds's partition.Config.LeaderReadIndex: the read
// index of its leader, wherever it runs, followed as other calls to the leader are
// (callLeader), until ctx ends.
func (n *Node) leaderReadIndex(ds string, pid int) func(ctx context.Context) (uint64, error) {
	return func(ctx context.Context) (uint64, error) {
		r := n.routeOf(ds, pid)
		if r == nil {
			return 0, fmt.Errorf("%w: %s/%d is not served here", ErrUnavailable, ds, pid)
		}
		var index uint64
		err := n.callLeader(ctx, r, false,
			func(ctx context.Context) error {
				local, err := r.mustLocal()
				if err != nil {
					return err
				}
				p, ok := local.(*partition.Raft)
				if !ok {
					return fmt.Errorf("%w: %s/%d is not a raft partition", ErrUnavailable, ds, pid)
				}
				index, err = p.LeaderReadIndex(ctx)
				return err
			},
			func(ctx context.Context, target topology.NodeSpec) error {
				var ans readIndexAnswer
				err := n.forward(ctx, target, rpcReadIndexPath, &readIndexRPC{Datastore: ds, Partition: pid,
					TimeoutMicros: remainingMicros(ctx, n.cfg.ForwardTimeout)}, into(&ans), false, 0)
				index = ans.Index
				return err
			})
		return index, err
	}
}

// followerRead serves a strong read on this node's replica of r when it is a learner (a
// follower read index), within at most the forward timeout (5 s at most); ok is false when
// the replica is a voter, is absent, knows no leader, could not serve it, or the read is a long
// poll (the caller then sends the read to the leader).
func (n *Node) followerRead(ctx context.Context, r *route, req readRequest) (resp partition.ReadResult, ok bool) {
	if req.Read.Log != nil && req.Read.Log.Wait > 0 {
		return resp, false // a long poll waits on the leader, as before (the bound below would cut it)
	}
	p, isRaft := r.local().(*partition.Raft)
	if !isRaft || p.IsLeader() || !p.IsLearner() {
		return resp, false // a voter sends strong reads to the leader
	}
	if leader, _ := p.Leader(); leader == "" {
		return resp, false // an election: the leader path waits for it
	}
	ctx, cancel := context.WithTimeout(ctx, min(n.cfg.ForwardTimeout, 5*time.Second))
	defer cancel()
	resp, err := p.Read(ctx, partition.Strong, req.Read)
	return resp, err == nil
}
