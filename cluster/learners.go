package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/wire"
)

// Learners: permanent non-voting replicas of a raft partition (raft's nonvoters). A learner
// receives the log like a voter but never counts toward a quorum or an election; it serves
// stale reads, reads bounded in staleness (partition.BoundedStale) and strong reads after a
// read index from the leader (followerread.go): the replica of a partition in a zone that must
// not hold a vote (another datacenter), serving reads there. The catalog records each
// partition's learners (catalog.Partition.Learners), which tells a learner from a voter being
// added: raft's configuration shows both as nonvoters.

// AddLearner adds node to partition pid of raft datastore ds as a learner: the node opens a
// replica, which raft adds as a nonvoter and brings up to date in the background. It returns
// the configuration once the change is committed and the catalog records the node as a learner
// of the partition (catalog.OpAddLearner). A node that is a nonvoter already is left as it is in
// raft and recorded as a learner (so running AddLearner again records a learner whose record
// failed, or one added before the catalog recorded learners); a voter is refused (ErrRefused:
// demoting a voter is not supported). Errors: ErrUnknownNode, ErrRefused, ErrUnavailable,
// ErrNoCatalog, ErrIndeterminate (the node is a learner, its record unknown: add it again),
// ctx's error. AddVoter on a learner promotes it, and the catalog forgets it as a learner once
// it records the partition's new replicas.
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
		return markLearner(cfg, node), n.recordLearner(ctx, ds, pid, node, catalog.OpAddLearner)
	}
	if cfg, err = n.addNonvoter(ctx, ds, pid, spec); err != nil {
		return PartitionConfig{}, err
	}
	n.log.Info("learner added", "datastore", ds, "partition", pid, "node", node, "zone", n.zoneOf(node))
	return markLearner(cfg, node), n.recordLearner(ctx, ds, pid, node, catalog.OpAddLearner)
}

// markLearner returns cfg with node marked as a learner (RaftServer.Learner), as AddLearner
// answers once it recorded it.
func markLearner(cfg PartitionConfig, node string) PartitionConfig {
	cfg.Servers = slices.Clone(cfg.Servers)
	for i := range cfg.Servers {
		if cfg.Servers[i].Node == node {
			cfg.Servers[i].Learner = true
		}
	}
	return cfg
}

// recordLearner records node as a learner of partition pid of ds in the catalog (op
// catalog.OpAddLearner) or forgets it (catalog.OpRemoveLearner), unless the catalog this node
// serves says so already. A node that serves the topology file's datastores while the catalog
// has not imported them yet (a cluster's first seconds) first waits, up to commitWait, until
// its catalog lists ds. Blocks until this node serves the change; errors as
// applyCatalogCommand's (ErrNoCatalog when the catalog does not list ds in time), naming the
// node.
func (n *Node) recordLearner(ctx context.Context, ds string, pid int, node string, op catalog.Op) error {
	if _, ok := n.awaitCatalog(ctx, commitWait, func(c *catalog.Catalog) bool { return c.Datastores[ds] != nil }); !ok {
		return fmt.Errorf("cluster: %s of %s in %s/%d's catalog record (raft's change stands; run it again): %w: the catalog does not list %s yet",
			op, node, ds, pid, ErrNoCatalog, ds)
	}
	if slices.Contains(n.recordedLearners(ds, pid), node) == (op == catalog.OpAddLearner) {
		return nil
	}
	if _, err := n.applyCatalogCommand(ctx, catalog.Command{Op: op, Datastore: ds, Partition: pid, Learner: node}); err != nil {
		return fmt.Errorf("cluster: %s of %s in %s/%d's catalog record (raft's change stands; run it again): %w", op, node, ds, pid, err)
	}
	return nil
}

// recordedLearners returns the learners the catalog this node serves records for partition pid
// of ds (catalog.Partition.Learners; nil before the node learned a catalog). The caller must
// not modify them.
func (n *Node) recordedLearners(ds string, pid int) []string {
	c := n.cat.cur.Load()
	if c == nil || c.Datastores[ds] == nil {
		return nil
	}
	if p := c.Datastores[ds].Partition(pid); p != nil {
		return p.Learners
	}
	return nil
}

// carryLearners adds the learners of partition pid of raft datastore ds (the nonvoters of its
// raft configuration that the catalog records as its learners) to partition right, the new
// half of its split, so that a split keeps serving the learners' zones; it returns the nodes
// added. Called by the node that decided the split, or by the parent's leader when it
// completes a split whose deciding node failed (reconcileSplits). The new half's leader
// brings each up to date as any new replica (AddLearner). One that cannot be added is logged
// and left out of the new half's raft configuration, though the catalog records it as the new
// half's learner (the split copied the record): add it with AddLearner. A voter being added
// at the moment of the split (a nonvoter until it catches up, not a recorded learner) is not
// carried: the new half is a partition of its own, which the rebalancer places. Blocks for
// one membership change per learner.
func (n *Node) carryLearners(ctx context.Context, ds string, pid, right int) []string {
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		n.log.Warn("learners of a split partition not carried to its new half", "datastore", ds, "partition", pid, "right", right, "error", err)
		return nil
	}
	recorded := n.recordedLearners(ds, pid)
	var added []string
	for _, s := range cfg.Servers {
		if s.Suffrage != wire.SuffrageNonvoter {
			continue
		}
		if !slices.Contains(recorded, s.Node) {
			n.log.Info("a nonvoter of a split partition not carried to its new half: the catalog records no such learner (a voter being added)",
				"datastore", ds, "partition", pid, "right", right, "node", s.Node)
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
// drop its replica's data (RemoveVoter's way), then has the catalog forget it as a learner
// (catalog.OpRemoveLearner), returning the configuration after it. A node that holds no
// replica only has its data made sure gone and its record forgotten; a voter is refused
// (ErrRefused: use RemoveVoter). Errors: ErrRefused, ErrUnavailable, ErrNoCatalog,
// ErrIndeterminate (the learner is gone, its record unknown: remove it again), ctx's error.
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
	if err := n.recordLearner(ctx, ds, pid, node, catalog.OpRemoveLearner); err != nil {
		return PartitionConfig{}, err
	}
	return n.PartitionConfig(ctx, ds, pid)
}
