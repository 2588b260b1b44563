package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// splitCopyWait bounds how long a split waits, before its proposal, for the pre-copies of the
// parent's store on the parent's replicas (storage.PartitionStore.PrepareSplit: SQLite copies
// the parent's file, pebble its request records, ahead of the split, while writes to the
// moving shards still go to the parent); a replica whose pre-copy is not made by then copies
// the rest at the split's index.
const splitCopyWait = 5 * time.Second

// rpcPrecopyPath is the node RPC that makes this node's pre-copy of a split's parent and
// answers once it is made (precopyRPC).
const rpcPrecopyPath = "/internal/v1/precopy"

// precopyRPC asks a node for its pre-copy of partition Partition of Datastore for the split
// that makes partition Right (the catalog decided it), within TimeoutMicros.
type precopyRPC struct {
	Datastore     string
	Partition     int
	Right         int
	TimeoutMicros int64
}

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
		go func() {
			if d := time.Duration(n.precopyDelay.Load()); d > 0 {
				time.Sleep(d)
				if !p.Shards().Contains(r.spec.FirstShard) {
					return // applied meanwhile
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), splitCopyWait)
			defer cancel()
			_ = n.prepareSplitCopy(ctx, p, r.spec.ID)
		}()
	}
}

// prepareSplitCopy makes the pre-copy of p's store for its split into partition right, within
// ctx, or waits for the one under way (PrepareSplit), and logs a failure (the split then
// copies at its index).
func (n *Node) prepareSplitCopy(ctx context.Context, p raftReplica, right int) error {
	began := time.Now()
	err := p.Store().PrepareSplit(ctx, right)
	if err != nil {
		n.log.Warn("pre-copy of a split's parent", "partition", p.Store().ID().Partition, "right", right, "error", err)
		return err
	}
	n.log.Debug("pre-copy of a split's parent made", "partition", p.Store().ID().Partition, "right", right, "took", time.Since(began))
	return nil
}

// awaitSplitCopies waits until every replica of partition pid of ds (the nodes the catalog
// lists for it) has made its pre-copy of the parent for the split into partition right, at
// most splitCopyWait: this node's own at once, the others' over rpcPrecopyPath, all at the
// same time. A replica that answers with an error or not in time is logged and skipped: it
// copies the rest at the split's index. Each replica started its pre-copy when its catalog
// learned of the split (prepareSplitCopies); waiting for all of them, not only the leader's,
// keeps a follower from applying the split's entry while its pre-copy is still under way,
// which makes it wait for that pre-copy there, and the new group's election wait for it (a
// SQLite split of 500,000 cells: the followers' applications took 0.95 and 1.0 s against the
// leader's 0.21, and the moving shards' writes waited 1.2 s; BENCHMARKS.md).
func (n *Node) awaitSplitCopies(ctx context.Context, ds string, pid, right int) {
	if n.cfg.Store == nil || n.cfg.Store.Engine() == storage.EngineMySQL {
		return
	}
	r := n.routeOf(ds, pid)
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, splitCopyWait)
	defer cancel()
	began := time.Now()
	var wg sync.WaitGroup
	for _, id := range r.spec.Replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if id == n.cfg.NodeID {
				err = n.localPrecopy(ctx, ds, pid, right)
			} else if spec, ok := n.nodeSpec(id); !ok {
				err = fmt.Errorf("no address known for node %q", id)
			} else {
				err = n.forward(ctx, spec, rpcPrecopyPath, &precopyRPC{Datastore: ds, Partition: pid, Right: right,
					TimeoutMicros: remainingMicros(ctx, splitCopyWait)}, into(&struct{}{}), false, 0)
			}
			if err != nil {
				n.log.Info("a replica's pre-copy of a split's parent is not made: it copies the rest at the split",
					"datastore", ds, "partition", pid, "right", right, "node", id, "error", err)
			}
		}()
	}
	wg.Wait()
	n.log.Debug("pre-copies of a split's parent awaited", "datastore", ds, "partition", pid, "right", right, "took", time.Since(began))
}

// localPrecopy makes this node's pre-copy of partition pid of ds for the split into partition
// right (prepareSplitCopy), once the catalog here shows that split (up to the end of ctx): an
// error when pid is not served here, has no raft replica here, or its replica applied the
// split already, or when right is not a partition the catalog made by splitting pid.
func (n *Node) localPrecopy(ctx context.Context, ds string, pid, right int) error {
	wait := time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	d, ok := n.awaitPartition(ds, right, wait)
	if !ok {
		return badRPC("right", "partition %d is not a partition of %q here", right, ds)
	}
	rr, pr := d.route(right), d.route(pid)
	if rr.spec.Parent == nil || *rr.spec.Parent != pid || pr == nil {
		return badRPC("right", "partition %d of %q was not split from partition %d", right, ds, pid)
	}
	p := pr.replica()
	if p == nil {
		return fmt.Errorf("%w: no replica of %s/%d here", ErrUnavailable, ds, pid)
	}
	if !p.Shards().Contains(rr.spec.FirstShard) {
		return nil // applied already: nothing to prepare
	}
	return n.prepareSplitCopy(ctx, p, right)
}

// servePrecopy answers a precopyRPC: 200 once this node's pre-copy is made (or its replica
// applied the split already), 400 naming the field of a request that names no such split, 503
// when this node has no replica of the parent.
func (n *Node) servePrecopy(w http.ResponseWriter, r *http.Request) {
	var req precopyRPC
	if err := decodeRPC(r, &req); err != nil {
		http.Error(w, "bad pre-copy request: "+err.Error(), http.StatusBadRequest)
		return
	}
	rt, err := n.rpcRoute(req.Datastore, req.Partition)
	switch {
	case err != nil:
	case rt.ds.Mode != topology.ModeRaft:
		err = badRPC("datastore", "%q is not a raft datastore", req.Datastore)
	case req.Right < 0 || req.Right == req.Partition:
		err = badRPC("right", "%d: want another partition of %q", req.Right, req.Datastore)
	}
	if err != nil {
		refuseRPC(w, "pre-copy", err)
		return
	}
	ctx, cancel := rpcContext(r, min(req.TimeoutMicros, splitCopyWait.Microseconds()))
	defer cancel()
	if err := n.localPrecopy(ctx, req.Datastore, req.Partition, req.Right); err != nil {
		if errors.Is(err, ErrBadRPC) {
			refuseRPC(w, "pre-copy", err)
			return
		}
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, struct{}{})
}
