package cluster

import (
	"context"
	"time"

	"github.com/schemaless-db/schemaless/storage"
)

// splitCopyWait bounds how long a split's proposal waits on the parent's leader for the
// leader's pre-copy of the parent (storage.PartitionStore.PrepareSplit: SQLite copies the
// parent's file, pebble its request records, ahead of the split, while writes to the moving
// shards still go to the parent); a split whose pre-copy is not made by then copies the rest
// at its index.
const splitCopyWait = 5 * time.Second

// prepareSplitCopies starts, for each partition of d that a split made, that od (the datastore
// as it was before this catalog change) lacks, and whose parent's replica here has not applied
// the split yet, the pre-copy of the parent's store for it (PrepareSplit), in the background:
// the catalog has just decided the split, which the parent's log applies soon. A no-op on
// MySQL, whose splits copy no row.
func (n *Node) prepareSplitCopies(od *datastore, d *datastore) {
	if n.cfg.Store == nil || n.cfg.Store.Engine() == storage.EngineMySQL {
		return
	}
	for _, r := range d.partitions {
		if r.spec.Parent == nil || od.route(r.spec.ID) != nil {
			continue
		}
		pr := od.route(*r.spec.Parent)
		if pr == nil {
			continue
		}
		p := pr.replica()
		if p == nil || !p.Shards().Contains(r.spec.FirstShard) {
			continue
		}
		go n.prepareSplitCopy(p, r.spec.ID)
	}
}

// prepareSplitCopy makes the pre-copy of p's store for its split into partition right, at most
// splitCopyWait, and logs a failure (the split then clones at its index).
func (n *Node) prepareSplitCopy(p raftReplica, right int) {
	ctx, cancel := context.WithTimeout(context.Background(), splitCopyWait)
	defer cancel()
	began := time.Now()
	err := p.Store().PrepareSplit(ctx, right)
	if err != nil {
		n.log.Warn("pre-copy of a split's parent", "partition", p.Store().ID().Partition, "right", right, "error", err)
		return
	}
	n.log.Debug("pre-copy of a split's parent made", "partition", p.Store().ID().Partition, "right", right, "took", time.Since(began))
}
