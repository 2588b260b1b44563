package cluster

import (
	"context"
	"fmt"

	"github.com/schemaless-db/schemaless/wire"
)

// Learners: permanent non-voting replicas of a raft partition (raft's nonvoters). A learner
// receives the log like a voter but never counts toward a quorum or an election; it serves
// stale reads, reads bounded in staleness (partition.BoundedStale) and strong reads after a
// read index from the leader (followerread.go): the replica of a partition in a zone that must
// not hold a vote (another datacenter), serving reads there.

// AddLearner adds node to partition pid of raft datastore ds as a learner: the node opens a
// replica, which raft adds as a nonvoter and brings up to date in the background. It returns
// the configuration once the change is committed. A node that is a learner already is left as
// it is; a voter is refused (ErrRefused: demoting a voter is not supported). Errors:
// ErrUnknownNode, ErrRefused, ErrUnavailable, ctx's error. AddVoter on a learner promotes it.
func (n *Node) AddLearner(ctx context.Context, ds string, pid int, node string) (PartitionConfig, error) {
	spec, ok := n.nodeSpec(node)
	if !ok {
		return PartitionConfig{}, fmt.Errorf("%w: %q", ErrUnknownNode, node)
	}
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return PartitionConfig{}, err
	}
	if s, present := serverOf(cfg, node); present {
		if s.Suffrage == wire.SuffrageVoter {
			return PartitionConfig{}, fmt.Errorf("%w: %s is a voter of %s/%d, not made a learner", ErrRefused, node, ds, pid)
		}
		return cfg, nil
	}
	if err := n.onNode(ctx, spec, ds, pid, "host"); err != nil {
		return PartitionConfig{}, fmt.Errorf("cluster: open a replica of %s/%d on %s: %w", ds, pid, node, err)
	}
	cfg, err = n.raftOp(ctx, adminRaftRPC{Datastore: ds, Partition: pid, Op: raftOpAddNonvoter, Node: node, Addr: spec.RaftAddr})
	if err != nil {
		return PartitionConfig{}, err
	}
	n.log.Info("learner added", "datastore", ds, "partition", pid, "node", node, "zone", n.zoneOf(node))
	return cfg, nil
}

// carryLearners adds the learners of partition pid of raft datastore ds (its raft
// configuration's nonvoters) to partition right, the new half of its split, so that a split
// keeps serving the learners' zones; it returns the nodes added. Called by the node that
// decided the split, or by the parent's leader when it completes a split whose deciding node
// failed (reconcileSplits). The new half's leader brings each up to date as any new replica
// (AddLearner). One that cannot be added is logged and left out (add it with AddLearner). A voter
// being added at the moment of the split (a nonvoter until it catches up) is carried as a
// learner too: remove it with RemoveLearner. Blocks for one membership change per learner.
func (n *Node) carryLearners(ctx context.Context, ds string, pid, right int) []string {
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		n.log.Warn("learners of a split partition not carried to its new half", "datastore", ds, "partition", pid, "right", right, "error", err)
		return nil
	}
	var added []string
	for _, s := range cfg.Servers {
		if s.Suffrage != wire.SuffrageNonvoter {
			continue
		}
		if _, err := n.AddLearner(ctx, ds, right, s.Node); err != nil {
			n.log.Warn("a learner of a split partition not carried to its new half", "datastore", ds, "partition", pid, "right", right, "node", s.Node, "error", err)
			continue
		}
		added = append(added, s.Node)
	}
	return added
}

// RemoveLearner removes learner node from partition pid of raft datastore ds and has the node
// drop its replica's data (RemoveVoter's way), returning the configuration after it. A node
// that holds no replica only has its data made sure gone; a voter is refused (ErrRefused: use
// RemoveVoter). Errors: ErrRefused, ErrUnavailable, ctx's error.
func (n *Node) RemoveLearner(ctx context.Context, ds string, pid int, node string) (PartitionConfig, error) {
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return PartitionConfig{}, err
	}
	if s, present := serverOf(cfg, node); present && s.Suffrage == wire.SuffrageVoter {
		return PartitionConfig{}, fmt.Errorf("%w: %s is a voter of %s/%d: remove it as a voter", ErrRefused, node, ds, pid)
	}
	if err := n.removeVoter(ctx, ds, pid, node); err != nil {
		return PartitionConfig{}, err
	}
	return n.PartitionConfig(ctx, ds, pid)
}
