package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
)

// A split's new replica starts, on each node that applied the split, from a base snapshot and
// a raft log holding the base's entry. Both follow from the split entry alone (its index, the
// right half's shards, the voters), so a node writes them while its replica of the parent still
// copies the right half's shards into the new store (fsm.Config.OnSplitStart), and the replica
// opens from them once the copy is in (openReplicaTimed waits for a preparation under way).
// Their syncs were on the path of the moved shards' writes, which wait for the new group's
// first leader, after the copy: a replica opened 50 to 80 ms after its copy at the median on
// loaded nodes, 23 to 36 ms with the preparation (BENCHMARKS.md).

// prepareSplitReplica starts preparing this node's replica of the right half of a split of a
// partition of datastore ds (partition.PrepareSplitReplica), when this node is one of the
// split's voters. It does not block (the state machine calls it); a failure is logged, and the
// replica's opening writes what is missing.
func (n *Node) prepareSplitReplica(ds string, e fsm.SplitEvent) {
	if !slices.ContainsFunc(e.Voters, func(v command.Voter) bool { return v.ID == n.cfg.NodeID }) {
		return
	}
	id := storage.PartitionID{Datastore: ds, Partition: e.Right}
	done := make(chan struct{})
	n.splitPrep.Lock()
	if _, busy := n.splitPrep.m[id]; busy {
		n.splitPrep.Unlock()
		return
	}
	if n.splitPrep.m == nil {
		n.splitPrep.m = map[storage.PartitionID]chan struct{}{}
	}
	n.splitPrep.m[id] = done
	n.splitPrep.Unlock()
	go func() {
		defer func() {
			n.splitPrep.Lock()
			delete(n.splitPrep.m, id)
			n.splitPrep.Unlock()
			close(done)
		}()
		began := time.Now()
		kind := n.cfg.Partition.LogStore
		nodeLog := n.cfg.Partition.NodeLog
		if nodeLog == nil && kind == partition.LogStoreNode {
			var err error
			if nodeLog, err = n.sharedLog(); err != nil {
				n.log.Warn("preparing a split's new replica", "datastore", ds, "partition", e.Right, "error", err)
				return
			}
		}
		base := partition.SplitBase{Index: e.Applied.Index, Shards: e.Shards, Voters: e.Voters, Self: n.cfg.NodeID}
		err := partition.PrepareSplitReplica(n.replicaDir(ds, e.Right), kind, nodeLog, partition.LogName(id), base, n.log.With("partition", fmt.Sprintf("%s/%d", ds, e.Right)))
		if err != nil {
			n.log.Warn("preparing a split's new replica", "datastore", ds, "partition", e.Right, "error", err)
			return
		}
		n.log.Debug("prepared a split's new replica", "datastore", ds, "partition", e.Right, "base", e.Applied.Index, "took_ms", ms(time.Since(began)))
	}()
}

// checkSplitPrep readies replica directory dir of replica id, whose store is ps, to open: it
// waits until no preparation of it is under way (the opening must not write its base beside
// it), or until ctx ends (its error); then, when a preparation left a base that ps lacks the
// copy of (partition.SplitPrepared), it removes the directory and the replica's log in the
// node's shared log, so that the replica opens as one that did not apply the split.
func (n *Node) checkSplitPrep(ctx context.Context, id storage.PartitionID, dir string, ps *storage.PartitionStore) error {
	n.splitPrep.Lock()
	done := n.splitPrep.m[id]
	n.splitPrep.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	stale, err := partition.SplitPrepared(ctx, dir, ps)
	if err != nil || !stale {
		return err
	}
	n.log.Info("discarding a split's prepared replica: the store lacks the split's copy", "datastore", id.Datastore, "partition", id.Partition)
	n.nodeLogMu.Lock()
	nodeLog := n.nodeLog
	n.nodeLogMu.Unlock()
	return errors.Join(os.RemoveAll(dir), partition.DropLog(nodeLog, id))
}
