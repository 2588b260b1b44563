package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Splitting and moving the partitions of an async datastore: a split in place
// (partition.SplitAsync: no cell moves, the right half is a new partition on the same storage
// cluster), then, to give a shard range to another storage cluster, a move of the right half
// (partition.MoveAsync: copy, catch-up, fenced switch). Both run in the node that took the
// request, with the topology's credentials of the storage clusters.

// commitWait bounds how long a split whose catalog command failed indeterminately waits for
// the catalog to show whether it was recorded, before undoing it on the master.
const commitWait = 10 * time.Second

// splitAsync is SplitPartition for an async datastore: a split in place, then, with req.To,
// a move of the right half to that storage cluster.
func (n *Node) splitAsync(ctx context.Context, d *datastore, pid int, req wire.SplitRequest) (wire.SplitResponse, error) {
	ds := d.spec.Name
	r := d.route(pid)
	if r == nil {
		return wire.SplitResponse{}, fmt.Errorf("%w: no partition %d in %q", ErrBadShard, pid, ds)
	}
	rng := r.spec.Shards()
	if rng.Len() < 2 {
		return wire.SplitResponse{}, &FieldError{Field: "at_shard", Msg: fmt.Sprintf("partition %d holds one shard (%d): it cannot split", pid, rng.First)}
	}
	at := req.AtShard
	if at == 0 {
		at = rng.First + rng.Len()/2 // async partitions keep no load counters: the middle
	}
	if at <= rng.First || at > rng.Last {
		return wire.SplitResponse{}, &FieldError{Field: "at_shard", Msg: fmt.Sprintf("%d: want %d to %d (each half keeps a shard; partition %d holds %d..%d)",
			at, rng.First+1, rng.Last, pid, rng.First, rng.Last)}
	}
	if req.To != "" {
		if _, ok := d.spec.StorageCluster(req.To); !ok {
			return wire.SplitResponse{}, &FieldError{Field: "to", Msg: fmt.Sprintf("%q is not a storage cluster of %s", req.To, ds)}
		}
	} else if req.DropOld {
		return wire.SplitResponse{}, &FieldError{Field: "drop_old", Msg: "drop_old needs to: the storage cluster the right half moves to"}
	}
	// The right half's id is the catalog's next: its state is written under that id before
	// the catalog records the split (which refuses it if the catalog moved on meanwhile).
	cat, ok := n.awaitCatalog(ctx, commitWait, func(c *catalog.Catalog) bool { return c.Datastores[ds] != nil })
	if !ok {
		return wire.SplitResponse{}, fmt.Errorf("%w: the catalog does not list %s yet", ErrNoCatalog, ds)
	}
	gen, right := cat.Generation, cat.Datastores[ds].NextID
	began := time.Now()
	var recorded catalog.Result
	commit := func(ctx context.Context, cluster string) (err error) {
		recorded, err = n.recordAsyncChange(ctx, catalog.Command{Op: catalog.OpSplit, Datastore: ds, Partition: pid, AtShard: at,
			Right: right, Cluster: cluster, ExpectGeneration: max(gen, 1)}, func(d *catalog.Datastore) []catalog.Partition {
			l, r := d.Partition(pid), d.Partition(right)
			if l == nil || r == nil || r.Parent != pid {
				return nil
			}
			return []catalog.Partition{*l, *r}
		})
		return err
	}
	sres, err := partition.SplitAsync(ctx, partition.AsyncSplit{Datastore: d.spec, Partition: pid, AtShard: at, Right: right,
		Commit: commit, Cluster: partition.ClusterConfig{ProbeInterval: n.cfg.Async.ProbeInterval, Logger: n.log}, Logger: n.log})
	if err != nil {
		if errors.Is(err, partition.ErrAsyncSplitMoving) {
			return wire.SplitResponse{}, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return wire.SplitResponse{}, err
	}
	n.log.Info("async split done", "datastore", ds, "partition", pid, "at_shard", at, "right", right, "cluster", sres.Cluster,
		"generation", recorded.Generation, "lock_held", sres.LockHeld.Round(time.Millisecond))
	out := wire.SplitResponse{Generation: recorded.Generation, Left: catalogPartition(recorded.Partitions[0]),
		Right: catalogPartition(recorded.Partitions[1]), Ready: true, PauseMillis: sres.LockHeld.Milliseconds()}
	if err := n.waitGeneration(ctx, recorded.Generation); err != nil {
		return out, fmt.Errorf("%w: the split is recorded at generation %d, but this node has not applied it: %w", ErrIndeterminate, recorded.Generation, err)
	}
	if req.To != "" && req.To != sres.Cluster {
		mv, err := n.MoveToCluster(ctx, ds, right, wire.ClusterMoveRequest{To: req.To, DropOld: req.DropOld})
		if err != nil {
			mv.Error = err.Error()
		}
		out.Move = &mv
	}
	out.TookMillis = time.Since(began).Milliseconds()
	return out, nil
}

// recordAsyncChange sends cmd, an async split or merge prepared on the master, to the catalog
// and returns what the catalog recorded. A definitive refusal is ErrRefused. After another
// failure the command may have been applied: it waits up to commitWait for this node's
// catalog to show it, made returning the partitions the change left in the datastore (nil
// while it is not there), and returns the last one's generation with them, or the failure.
func (n *Node) recordAsyncChange(ctx context.Context, cmd catalog.Command, made func(d *catalog.Datastore) []catalog.Partition) (catalog.Result, error) {
	res, err := n.sendCatalogCommand(ctx, cmd)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, catalog.ErrStale), errors.Is(err, catalog.ErrNotFound), errors.Is(err, catalog.ErrBadCommand):
		return res, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	var ps []catalog.Partition
	_, ok := n.awaitCatalog(context.WithoutCancel(ctx), commitWait, func(c *catalog.Catalog) bool {
		if d := c.Datastores[cmd.Datastore]; d != nil {
			ps = made(d)
		}
		return len(ps) > 0
	})
	if !ok {
		return res, err
	}
	return catalog.Result{Generation: ps[len(ps)-1].Generation, Partitions: ps}, nil
}

// awaitCatalog waits up to wait, or until ctx ends, for the catalog this node serves to
// satisfy ok, and returns it.
func (n *Node) awaitCatalog(ctx context.Context, wait time.Duration, ok func(*catalog.Catalog) bool) (*catalog.Catalog, bool) {
	deadline := time.Now().Add(wait)
	for {
		if c := n.cat.cur.Load(); c != nil && ok(c) {
			return c, true
		}
		left := time.Until(deadline)
		if left <= 0 || !n.waitCatalogAfter(ctx, n.catalogGeneration(), left) {
			return nil, false
		}
	}
}

// MoveToCluster moves partition pid of async datastore ds to storage cluster req.To, online
// (partition.MoveAsync: copy, catch-up from the shard logs, a switch under the partition's
// lock fenced by placement records, drain; with req.DropOld the old copy is then dropped). It
// runs in this node with the topology's credentials and blocks until done or ctx ends; every
// node follows the new placement within a probe interval. The answer describes the move;
// ClusterMoveResponse.Error is left empty (the error is returned).
//
// Errors: ErrUnknownDatastore; ErrBadShard (no such partition); a *FieldError for "datastore"
// (a raft datastore) or "to" (not a storage cluster of ds); ErrRefused (another move of the
// partition runs); partition.ErrMoveAborted (rolled back: run it again); storage and ctx
// errors.
func (n *Node) MoveToCluster(ctx context.Context, ds string, pid int, req wire.ClusterMoveRequest) (wire.ClusterMoveResponse, error) {
	out := wire.ClusterMoveResponse{Partition: pid, To: req.To}
	d, err := n.datastore(ds)
	if err != nil {
		return out, err
	}
	if d.spec.Mode != topology.ModeAsync {
		return out, &FieldError{Field: "datastore", Msg: fmt.Sprintf("%s is a raft datastore: its replicas move with POST /v1/admin/partitions/%s/%d/replicas", ds, ds, pid)}
	}
	if d.route(pid) == nil {
		return out, fmt.Errorf("%w: no partition %d in %q", ErrBadShard, pid, ds)
	}
	if _, ok := d.spec.StorageCluster(req.To); !ok {
		return out, &FieldError{Field: "to", Msg: fmt.Sprintf("%q is not a storage cluster of %s", req.To, ds)}
	}
	res, err := partition.MoveAsync(ctx, partition.AsyncMove{Datastore: d.spec, Partition: pid, To: req.To,
		Cluster: partition.ClusterConfig{ProbeInterval: n.cfg.Async.ProbeInterval, Logger: n.log},
		Move:    partition.MoveConfig{DropOld: req.DropOld, Logger: n.log}})
	out.From, out.Epoch, out.AlreadyThere, out.Resumed = res.From, res.Epoch, res.AlreadyThere, res.Resumed
	out.CopiedCells, out.FinalCells = res.CopiedCells, res.FinalCells
	out.LockHeldMillis, out.Drained, out.Dropped = res.LockHeld.Milliseconds(), res.Drained, res.Dropped
	out.TookMillis = res.Took.Milliseconds()
	if errors.Is(err, partition.ErrMoveRunning) {
		err = fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return out, err
}

// reshapeAsync returns async datastore od with the partitions of spec (a split in place
// changed them), or nil when anything but the partitions changed: a partition of both keeps
// its partition.Async (told its new range: Async.SetShards), so the writes under way through
// it are not failed; a new one gets an Async of its own; one that is gone (merged into its left
// neighbour) is closed. The caller holds hostMu.
func (n *Node) reshapeAsync(od *datastore, spec *topology.DatastoreSpec) *datastore {
	a, b := normLayout(od.spec), normLayout(spec)
	a.Partitions, b.Partitions = nil, nil
	if !sameLayout(&a, &b) {
		return nil
	}
	d := &datastore{spec: spec, created: od.created, clusters: od.clusters}
	old := map[int]*route{}
	for _, r := range od.partitions {
		old[r.spec.ID] = r
	}
	for j := range spec.Partitions {
		ps := &spec.Partitions[j]
		or := old[ps.ID]
		if or == nil {
			if err := n.openAsyncPartition(d, ps); err != nil {
				n.log.Error("catalog: opening a partition made by a split", "datastore", spec.Name, "partition", ps.ID, "error", err)
			}
			continue
		}
		delete(old, ps.ID)
		r := &route{spec: ps, ds: spec, created: od.created}
		r.part.Store(or.part.Load())
		if as, ok := r.local().(*partition.Async); ok {
			as.SetShards(ps.Shards())
		}
		d.partitions = append(d.partitions, r)
	}
	for _, or := range old {
		if err := or.closeReplica(); err != nil {
			n.log.Warn("closing a partition gone from the catalog", "datastore", spec.Name, "partition", or.spec.ID, "error", err)
		}
	}
	return d
}
