package cluster

import (
	"context"
	"time"

	"github.com/schemaless-db/schemaless/catalog"
)

// DecideSplit has the catalog decide a split of partition pid of raft datastore ds at atShard
// and stops there, as a node that fails right after the decision leaves it: the split is not
// proposed to the partition's raft log, so the partition's leader completes it
// (reconcileSplits). Returns the new partition's id. For tests.
func (n *Node) DecideSplit(ctx context.Context, ds string, pid, atShard int) (int, error) {
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpSplit, Datastore: ds, Partition: pid, AtShard: atShard,
		ExpectGeneration: max(n.catalogGeneration(), 1)})
	if err != nil {
		return 0, err
	}
	return res.Partitions[1].ID, nil
}

// AddNonvoter opens a replica of partition pid of raft datastore ds on node and adds it to the
// partition's raft configuration as a nonvoter, and stops there, as an AddVoter that has not
// yet promoted it leaves it: a nonvoter the catalog does not record as a learner. For tests.
func (n *Node) AddNonvoter(ctx context.Context, ds string, pid int, node string) error {
	spec, ok := n.nodeSpec(node)
	if !ok {
		return ErrUnknownNode
	}
	_, err := n.addNonvoter(ctx, ds, pid, spec)
	return err
}

// HoldCatalog makes the node keep serving the catalog it serves now (hold true), whatever
// newer one it learns, as a node whose catalog lags behind the cluster's; hold false lets it
// follow again from the next catalog it learns. For tests.
func (n *Node) HoldCatalog(hold bool) { n.catalogHeld.Store(hold) }

// HoldRetirement keeps the node from deleting the data of merged partitions (hold true), as a
// node that has not got to it yet; hold false lets it delete them at its next round. For tests.
func (n *Node) HoldRetirement(hold bool) { n.retireHeld.Store(hold) }

// DropTransfers makes the node answer the next k leadership transfers it is asked to run, as a
// partition's leader, as done while it does nothing: as transfers that do not take (raft's
// transfer ends when the old leader steps down; if its target then loses the election, the old
// leader may win the next one). For tests.
func (n *Node) DropTransfers(k int) { n.dropTransfers.Store(int32(k)) }

// DelayPrecopies delays by d the pre-copies of a split's parent that this node starts when its
// catalog learns of a split (0: none), as a replica whose copy starts late. For tests.
func (n *Node) DelayPrecopies(d time.Duration) { n.precopyDelay.Store(int64(d)) }

// SplitPrecopiesUsed returns how many splits this node's store started from a pre-copy
// (storage.Store.SplitPrecopiesUsed). For tests.
func (n *Node) SplitPrecopiesUsed() int64 { return n.cfg.Store.SplitPrecopiesUsed() }
