package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/wire"
)

// mergeAsync is MergePartitions for an async datastore (left and right checked adjacent): a
// merge in place on their storage cluster (partition.MergeAsync: no cell moves), after a move
// of right onto left's cluster when they are apart (MoveToCluster).
func (n *Node) mergeAsync(ctx context.Context, d *datastore, left, right int, auto bool) (wire.MergeResponse, error) {
	ds := d.spec.Name
	cat, ok := n.awaitCatalog(ctx, commitWait, func(c *catalog.Catalog) bool { return c.Datastores[ds] != nil })
	if !ok {
		return wire.MergeResponse{}, fmt.Errorf("%w: the catalog does not list %s yet", ErrNoCatalog, ds)
	}
	gen := max(cat.Generation, 1)
	began := time.Now()
	var (
		out      wire.MergeResponse
		recorded catalog.Result
	)
	moveRight := func(ctx context.Context, to string) error {
		mv, err := n.MoveToCluster(ctx, ds, right, wire.ClusterMoveRequest{To: to})
		if err != nil {
			mv.Error = err.Error()
		}
		out.Move = &mv
		return err
	}
	commit := func(ctx context.Context, cluster string) (err error) {
		recorded, err = n.recordAsyncChange(ctx, catalog.Command{Op: catalog.OpMerge, Datastore: ds, Partition: left, Right: right,
			Cluster: cluster, ExpectGeneration: gen, Auto: auto}, func(d *catalog.Datastore) []catalog.Partition {
			if l := d.Partition(left); l != nil && d.Partition(right) == nil && d.Merged(left, right) {
				return []catalog.Partition{*l}
			}
			return nil
		})
		return err
	}
	mres, err := partition.MergeAsync(ctx, partition.AsyncMerge{Datastore: d.spec, Left: left, Right: right, MoveRight: moveRight,
		Commit: commit, Cluster: partition.ClusterConfig{ProbeInterval: n.cfg.Async.ProbeInterval, Logger: n.log}, Logger: n.log})
	if err != nil {
		if errors.Is(err, partition.ErrAsyncSplitMoving) || errors.Is(err, partition.ErrAsyncMergeApart) {
			err = fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return out, err
	}
	n.log.Info("async merge done", "datastore", ds, "left", left, "right", right, "cluster", mres.Cluster,
		"generation", recorded.Generation, "lock_held", mres.LockHeld.Round(time.Millisecond))
	out.Generation, out.Merged = recorded.Generation, catalogPartition(recorded.Partitions[0])
	out.PauseMillis, out.TookMillis = mres.LockHeld.Milliseconds(), time.Since(began).Milliseconds()
	if err := n.waitGeneration(ctx, recorded.Generation); err != nil {
		return out, fmt.Errorf("%w: the merge is recorded at generation %d, but this node has not applied it: %w", ErrIndeterminate, recorded.Generation, err)
	}
	return out, nil
}
