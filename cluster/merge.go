package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Merging two adjacent raft partitions on the same replicas (the left one keeps its ID and
// takes both ranges; the right one's ID is retired). It runs in four steps:
//
//  1. The right partition's leader proposes command.Freeze: from its index on the right
//     partition refuses every request as out of range (nothing applied), so its state stops.
//  2. The node running the merge waits until every replica of the right partition has applied
//     the freeze (their status), so that each node holds the frozen state.
//  3. The catalog decides the merge (catalog.OpMerge, expecting both partitions unchanged since
//     the freeze was decided). Nodes route the right one's shards to the left one, and close
//     their replicas of the right one (their stores stay).
//  4. The left partition's leader proposes command.Merge: each replica copies the frozen state
//     from its own node's store of the right partition, and widens its range, at one index of
//     the left one's log. Once applied, the node deletes the right partition's data.
//
// Between steps 1 and 4, requests for the right partition's shards are refused as out of range
// and re-routed (awaitReroute) until the left partition holds them: that is the merge's pause.
// A refusal of the catalog's decision (the partitions changed) thaws the right partition
// (command.Freeze with Thaw). A leader of the right partition that finds it frozen while the
// catalog still lists it completes the merge (reconcileMerges), and a leader of a left partition
// whose range is narrower than the catalog's proposes the merge its log lacks, so a started merge
// ends merged or thawed.

// mergeReplicaWait bounds step 2; mergeAbandoned is how long a frozen partition still in the
// catalog waits before its leader completes the merge.
const (
	mergeReplicaWait = 15 * time.Second
	mergeAbandoned   = time.Minute
)

// freezeOp proposes a freeze (or a thaw) on the right partition's leader.
var freezeOp = &leaderOp[*command.Freeze, command.FreezeResult]{
	name: "freeze",
	path: "/internal/v1/freeze",
	validate: func(rt *route, f *command.Freeze) error {
		if rt.ds.Mode != topology.ModeRaft {
			return badRPC("datastore", "%s is not a raft datastore", rt.ds.Name)
		}
		if f.Into < 0 {
			return badRPC("command", "freeze into partition %d", f.Into)
		}
		return nil
	},
	apply: func(ctx context.Context, p Partition, f *command.Freeze) (command.FreezeResult, error) {
		fp, ok := p.(interface {
			Freeze(context.Context, command.Freeze) (command.FreezeResult, error)
		})
		if !ok {
			return command.FreezeResult{}, fmt.Errorf("%w: only a raft partition merges", ErrAsyncDatastore)
		}
		return fp.Freeze(ctx, *f)
	},
}

// mergeOp proposes a merge on the left partition's leader.
var mergeOp = &leaderOp[*command.Merge, command.MergeResult]{
	name: "merge",
	path: "/internal/v1/merge",
	validate: func(rt *route, m *command.Merge) error {
		if rt.ds.Mode != topology.ModeRaft {
			return badRPC("datastore", "%s is not a raft datastore", rt.ds.Name)
		}
		if m.Right < 0 || m.First < 0 || m.Last < m.First || int(m.Last) >= rt.ds.Shards || int(m.Shards) != rt.ds.Shards {
			return badRPC("command", "merge of partition %d, shards %d..%d of %d", m.Right, m.First, m.Last, m.Shards)
		}
		return nil
	},
	apply: func(ctx context.Context, p Partition, m *command.Merge) (command.MergeResult, error) {
		mp, ok := p.(interface {
			Merge(context.Context, command.Merge) (command.MergeResult, error)
		})
		if !ok {
			return command.MergeResult{}, fmt.Errorf("%w: only a raft partition merges", ErrAsyncDatastore)
		}
		return mp.Merge(ctx, *m)
	},
}

// MergePartitions merges partition right of datastore ds into partition left, its left
// neighbour. In raft mode their replicas are first aligned (see the steps above), and it
// returns once this node has applied the catalog's merge and the left partition's leader has
// applied the merge entry. In async mode right first moves onto left's storage cluster when
// they are apart, then the two merge in place there (mergeAsync, partition.MergeAsync). Every
// acknowledged write stays readable, with its added_id; writes to the right partition's
// shards wait meanwhile (wire.MergeResponse.PauseMillis).
//
// Errors: ErrUnknownDatastore; ErrBadShard (no such partition); *FieldError ("right": the
// same partition, not right after left, not on the same replicas); ErrRefused (a partition
// changed, or an async move of either runs, meanwhile: nothing merged);
// ErrUnavailable (a replica did not apply the freeze in time: thawed, nothing merged);
// ErrNoCatalog; ErrIndeterminate and ctx's error (the merge may have been decided: the cluster
// then completes it).
func (n *Node) MergePartitions(ctx context.Context, ds string, left, right int) (wire.MergeResponse, error) {
	return n.mergePartitions(ctx, ds, left, right, false)
}

// mergePartitions is MergePartitions; auto marks a merge of the cluster's policy in the
// catalog (catalog.Event.Auto).
func (n *Node) mergePartitions(ctx context.Context, ds string, left, right int, auto bool) (wire.MergeResponse, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return wire.MergeResponse{}, err
	}
	lr, rr := d.route(left), d.route(right)
	switch {
	case lr == nil:
		return wire.MergeResponse{}, fmt.Errorf("%w: no partition %d in %q", ErrBadShard, left, ds)
	case rr == nil:
		return wire.MergeResponse{}, fmt.Errorf("%w: no partition %d in %q", ErrBadShard, right, ds)
	case left == right:
		return wire.MergeResponse{}, &FieldError{Field: "right", Msg: fmt.Sprintf("partition %d cannot merge with itself", right)}
	case rr.spec.FirstShard != lr.spec.LastShard+1:
		return wire.MergeResponse{}, &FieldError{Field: "right", Msg: fmt.Sprintf("partition %d (shards %d..%d) is not right after partition %d (shards %d..%d)",
			right, rr.spec.FirstShard, rr.spec.LastShard, left, lr.spec.FirstShard, lr.spec.LastShard)}
	}
	if d.spec.Mode == topology.ModeAsync {
		return n.mergeAsync(ctx, d, left, right, auto)
	}
	lc, err := n.PartitionConfig(ctx, ds, left)
	if err != nil {
		return wire.MergeResponse{}, err
	}
	rc, err := n.PartitionConfig(ctx, ds, right)
	if err != nil {
		return wire.MergeResponse{}, err
	}
	began := time.Now()
	moved := 0
	if !slices.Equal(configNodes(lc), configNodes(rc)) {
		// The right partition's replicas move onto the left one's nodes first (automerge.go).
		if moved, err = n.alignReplicas(ctx, ds, right, configNodes(lc), configNodes(rc)); err != nil {
			return wire.MergeResponse{}, fmt.Errorf("moving partition %d's replicas onto partition %d's nodes %v: %w", right, left, configNodes(lc), err)
		}
		if lc, err = n.PartitionConfig(ctx, ds, left); err != nil {
			return wire.MergeResponse{}, err
		}
		if rc, err = n.PartitionConfig(ctx, ds, right); err != nil {
			return wire.MergeResponse{}, err
		}
		if !slices.Equal(configNodes(lc), configNodes(rc)) {
			return wire.MergeResponse{}, fmt.Errorf("%w: partitions %d and %d are still not on the same replicas (%v, %v): their replicas changed meanwhile",
				ErrRefused, left, right, configNodes(lc), configNodes(rc))
		}
	}
	// The catalog checks the replicas it lists: both lists follow the raft configurations.
	for _, pid := range []int{left, right} {
		if err := n.recordReplicas(ctx, ds, pid); err != nil {
			return wire.MergeResponse{}, err
		}
	}
	gen := max(n.catalogGeneration(), 1)
	fr, err := callLeaderOp(ctx, n, freezeOp, ds, rr, &command.Freeze{Into: int32(left), Generation: gen})
	if err != nil {
		return wire.MergeResponse{}, fmt.Errorf("freeze partition %d: %w", right, err)
	}
	if fr.Already {
		// Another merge froze it: that merge's node (or reconcileMerges) completes or thaws it.
		return wire.MergeResponse{}, fmt.Errorf("%w: partition %d is frozen by a merge in progress (into partition %d's left neighbour or merged already)", ErrRefused, right, left)
	}
	froze := time.Now()
	n.log.Info("merge: partition frozen", "datastore", ds, "left", left, "right", right, "index", fr.Index)
	res, err := n.finishMerge(ctx, ds, left, right, fr, gen, configNodes(rc), auto)
	if err != nil {
		return wire.MergeResponse{}, err
	}
	pause, took := time.Since(froze), time.Since(began)
	n.log.Info("merge done", "datastore", ds, "left", left, "right", right, "generation", res.Generation, "took", took, "pause", pause)
	return wire.MergeResponse{Generation: res.Generation, Merged: catalogPartition(res.Partitions[0]), TookMillis: took.Milliseconds(),
		PauseMillis: pause.Milliseconds(), ReplicasMoved: moved}, nil
}

// finishMerge runs steps 2 to 4 of a merge whose right partition froze (fr) for left at catalog
// generation gen: it waits for replicas (node ids) to apply the freeze, has the catalog decide
// the merge, and has the left partition's leader apply it. A definitive refusal by the catalog,
// or a replica that never applies the freeze, thaws the right partition (ErrRefused or
// ErrUnavailable); another failure of the catalog leaves the merge to reconcileMerges.
func (n *Node) finishMerge(ctx context.Context, ds string, left, right int, fr command.FreezeResult, gen uint64, replicas []string, auto bool) (catalog.Result, error) {
	if err := n.awaitFreeze(ctx, ds, right, fr.Index, replicas); err != nil {
		return catalog.Result{}, errors.Join(fmt.Errorf("%w: %w", ErrUnavailable, err), n.thaw(ds, left, right))
	}
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpMerge, Datastore: ds, Partition: left, Right: right, ExpectGeneration: gen, Auto: auto})
	switch {
	case err == nil:
	case errors.Is(err, catalog.ErrNotFound):
		// The datastore or a partition is gone (the same merge again is answered as done,
		// catalog.OpMerge): nothing to thaw.
		return catalog.Result{}, fmt.Errorf("%w: %w", ErrRefused, err)
	case errors.Is(err, catalog.ErrStale), errors.Is(err, catalog.ErrBadCommand):
		// A partition changed since the freeze was decided: this merge can never be decided.
		return catalog.Result{}, errors.Join(fmt.Errorf("%w: %w", ErrRefused, err), n.thaw(ds, left, right))
	default:
		return catalog.Result{}, err
	}
	if err := n.proposeMerge(ctx, ds, left, right, fr.Index, fr.Shards, res.Generation); err != nil {
		return catalog.Result{}, err
	}
	return res, nil
}

// awaitFreeze waits until each of replicas (node ids) has applied index of partition pid of ds,
// at most mergeReplicaWait.
func (n *Node) awaitFreeze(ctx context.Context, ds string, pid int, index uint64, replicas []string) error {
	ctx, cancel := context.WithTimeout(ctx, mergeReplicaWait)
	defer cancel()
	for _, id := range replicas {
		spec, ok := n.nodeSpec(id)
		if !ok {
			return fmt.Errorf("replica %s of partition %d: %w", id, pid, ErrUnknownNode)
		}
		for {
			st, found, err := n.replicaStatusOn(ctx, spec, ds, pid)
			if err == nil && found && st.AppliedIndex >= index {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("replica %s of partition %d did not apply the freeze at index %d (found %v, applied %d, error %v)", id, pid, index, found, st.AppliedIndex, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// thaw undoes the freeze of partition right for left (nothing merged).
func (n *Node) thaw(ds string, left, right int) error {
	r := n.routeOf(ds, right)
	if r == nil {
		return nil
	}
	ctx, cancel := n.untilClose(context.Background())
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	_, err := callLeaderOp(ctx, n, freezeOp, ds, r, &command.Freeze{Into: int32(left), Thaw: true})
	if err != nil {
		n.log.Warn("merge: thawing the right partition", "datastore", ds, "left", left, "right", right, "error", err)
		return fmt.Errorf("thaw partition %d: %w", right, err)
	}
	n.log.Info("merge: partition thawed", "datastore", ds, "left", left, "right", right)
	return nil
}

// proposeMerge has the leader of partition left apply the merge of right (frozen at index
// frozenAt with shards) that the catalog decided at generation gen. A refusal as out of range
// means the left partition applied it already: done.
func (n *Node) proposeMerge(ctx context.Context, ds string, left, right int, frozenAt uint64, shards cells.ShardRange, gen uint64) error {
	d, err := n.datastore(ds)
	if err != nil {
		return err
	}
	r := d.route(left)
	if r == nil {
		return fmt.Errorf("%w: no partition %d in %q", ErrBadShard, left, ds)
	}
	_, err = callLeaderOp(ctx, n, mergeOp, ds, r, &command.Merge{Right: int32(right), First: int32(shards.First), Last: int32(shards.Last),
		FrozenAt: frozenAt, Shards: int32(d.spec.Shards), Generation: gen})
	if err != nil && errors.Is(err, command.ErrShardOutOfRange) {
		return nil
	}
	return err
}

// configNodes returns the node ids of a raft configuration, sorted.
func configNodes(c PartitionConfig) []string {
	ids := make([]string, 0, len(c.Servers))
	for _, s := range c.Servers {
		ids = append(ids, s.Node)
	}
	slices.Sort(ids)
	return ids
}

// mergeSource returns the fsm.Config.MergeSource of the replicas of raft datastore ds: this
// node's store of the frozen right partition, opened for the copy and closed after, or the
// store of its replica when the node still serves it (the catalog's merge not applied here yet).
func (n *Node) mergeSource(ds string) func(ctx context.Context, right int) (fsm.Store, func() error, error) {
	return func(ctx context.Context, right int) (fsm.Store, func() error, error) {
		for {
			if r := n.routeOf(ds, right); r != nil {
				if p := r.replica(); p != nil {
					return p.Store(), func() error { return nil }, nil
				}
			}
			// The range is the store's to check against; the frozen state's own range is
			// read from it by the merge.
			ps, err := n.cfg.Store.Partition(ctx, storage.PartitionID{Datastore: ds, Partition: right}, cells.ShardRange{First: 0, Last: cells.MaxShards - 1})
			if err == nil {
				return ps, ps.Close, nil
			}
			if !errors.Is(err, storage.ErrPartitionOpen) {
				return nil, nil, err
			}
			// Its replica is closing (the catalog's merge applied here meanwhile).
			select {
			case <-ctx.Done():
				return nil, nil, err
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// retireMerged records that this node's replica of the left partition applied the merge of
// partition right of ds (fsm.Config.OnMerge: it does not block): the split loop deletes the
// right partition's data here once this node's catalog no longer lists it.
func (n *Node) retireMerged(ds string, right int) {
	n.retiring.Lock()
	if n.retiring.ids == nil {
		n.retiring.ids = map[storage.PartitionID]bool{}
	}
	n.retiring.ids[storage.PartitionID{Datastore: ds, Partition: right}] = true
	n.retiring.Unlock()
	n.kickSplits()
}

// retireMergedLocked deletes the data of the merged partitions retireMerged recorded whose
// replica this node's catalog no longer lists (their replica closed): raft log, snapshots,
// tables. The caller holds hostMu.
func (n *Node) retireMergedLocked(ctx context.Context) {
	if n.retireHeld.Load() {
		return
	}
	n.retiring.Lock()
	var ids []storage.PartitionID
	for id := range n.retiring.ids {
		ids = append(ids, id)
	}
	n.retiring.Unlock()
	for _, id := range ids {
		if n.routeOf(id.Datastore, id.Partition) != nil {
			continue // the catalog's merge is not applied here yet
		}
		// Marked before the deletion, so that no reconcileMerge opens it meanwhile.
		n.retiring.Lock()
		reading := n.retiring.reading[id] > 0
		if !reading {
			if n.retiring.deleting == nil {
				n.retiring.deleting = map[storage.PartitionID]bool{}
			}
			n.retiring.deleting[id] = true
		}
		n.retiring.Unlock()
		if reading {
			continue // reconcileMerge reads its frozen state: deleted at the next round
		}
		err := n.deleteReplicaData(ctx, id, nil)
		n.retiring.Lock()
		delete(n.retiring.deleting, id)
		if err == nil {
			delete(n.retiring.ids, id)
		}
		n.retiring.Unlock()
		if err != nil {
			n.log.Warn("deleting a merged partition's data", "datastore", id.Datastore, "partition", id.Partition, "error", err)
			continue
		}
		n.log.Info("deleted a merged partition's data", "datastore", id.Datastore, "partition", id.Partition)
	}
}

// reconcileMerges completes the merges that a node running them left half done (called from
// watchReplicas, like reconcileSplits):
//   - a leader of a left partition whose range ends below the catalog's (the catalog decided a
//     merge its log lacks) proposes it, from the frozen state of the right partition in this
//     node's store, found through the catalog's history;
//   - a leader of a frozen partition that the catalog still lists, frozen for mergeAbandoned
//     as seen here, runs the rest of the merge (finishMerge: merged, or thawed when the
//     catalog refuses it).
func (n *Node) reconcileMerges() {
	c := n.cat.cur.Load()
	if c == nil {
		return
	}
	for _, d := range n.datastores() {
		if d.spec.Mode != topology.ModeRaft {
			continue
		}
		cd := c.Datastores[d.spec.Name]
		for _, r := range d.partitions {
			p := r.replica()
			if p == nil || !p.IsLeader() {
				r.frozenSince.Store(0)
				continue
			}
			have := p.Shards()
			switch {
			case have.Len() == 0:
				n.completeAbandonedMerge(d, r)
			case have.Last < r.spec.LastShard && cd != nil:
				r.frozenSince.Store(0)
				var rights []int // latest first
				for i := len(cd.History) - 1; i >= 0; i-- {
					if e := cd.History[i]; e.Op == catalog.OpMerge && e.Left == r.spec.ID {
						rights = append(rights, e.Right)
					}
				}
				n.reconcileMerge(d.spec.Name, r, rights, have)
			default:
				r.frozenSince.Store(0)
			}
		}
	}
}

// reconcileMerge proposes the merge into r, which this node leads and which holds have, of
// the first of rights (partitions the catalog merged into r) whose store here is frozen for r
// with the shards right after have. It runs on its own goroutine, one per partition at a time.
func (n *Node) reconcileMerge(ds string, r *route, rights []int, have cells.ShardRange) {
	if len(rights) == 0 || !r.splitting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.splitting.Store(false)
		ctx, cancel := n.untilClose(context.Background())
		defer cancel()
		ctx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
		defer cancel2()
		for _, right := range rights {
			id := storage.PartitionID{Datastore: ds, Partition: right}
			if !n.beginReadingRetired(id) {
				continue // merged and deleted here: opening its store would create it again
			}
			st, release, err := n.mergeSource(ds)(ctx, right)
			if err != nil {
				n.endReadingRetired(id)
				continue
			}
			fr, frozen, err := fsm.ReadFreeze(ctx, st)
			_ = release()
			n.endReadingRetired(id)
			if err != nil || !frozen || fr.Into != r.spec.ID || fr.First != have.Last+1 {
				continue
			}
			if !n.mergePending(ds, r.spec.ID, right, fr.Shards()) {
				return
			}
			n.log.Info("completing a merge the catalog decided", "datastore", ds, "left", r.spec.ID, "right", right, "frozen_at", fr.Index)
			if err := n.proposeMerge(ctx, ds, r.spec.ID, right, fr.Index, fr.Shards(), n.catalogGeneration()); err != nil {
				n.log.Warn("completing a merge the catalog decided", "datastore", ds, "left", r.spec.ID, "right", right, "error", err)
			}
			return
		}
	}()
}

// mergePending reports whether the newest catalog among its voters' (votersCatalog) still has
// the shards of frozen, the right partition right's range when it froze for its merge into
// pid, in partition pid, and no partition right: reconcileMerge proposes the merge only then.
// This node's own catalog may lag behind pid's replica here: after the merge was applied, a
// split of pid at the same shard is in pid's log before this node's catalog shows it, and a
// leader whose catalog shows only the merge would find right's store still frozen for it (until
// this node deletes it) and merge it again, handing pid the shards of the split's new
// partition. False when no voter answers.
func (n *Node) mergePending(ds string, pid, right int, frozen cells.ShardRange) bool {
	newest := n.votersCatalog()
	if newest == nil || newest.Datastores[ds] == nil {
		return false
	}
	d := newest.Datastores[ds]
	left := d.Partition(pid)
	pending := left != nil && d.Partition(right) == nil && left.Shards.First <= frozen.First && left.Shards.Last >= frozen.Last
	if !pending {
		n.log.Info("not completing a merge: the catalog's voters no longer list it", "datastore", ds, "left", pid, "right", right,
			"generation", newest.Generation, "shards", fmt.Sprintf("%d..%d", frozen.First, frozen.Last))
	}
	return pending
}

// beginReadingRetired reports whether reconcileMerge may open the store of partition id, the
// right partition of a merge the catalog recorded, and keeps retireMergedLocked from deleting
// its data until endReadingRetired. It may not while that data is being deleted here, nor
// once it is (the replica directory, deleted last, is gone) or when this node never held a
// replica of it: opening a partition's store creates it (a SQLite file, tables), which then
// nothing would delete. Under load a reconcileMerge begun while the merge was still on its
// way here opened the store after the node had deleted it, and the merged partition's SQLite
// file stayed.
func (n *Node) beginReadingRetired(id storage.PartitionID) bool {
	n.retiring.Lock()
	defer n.retiring.Unlock()
	if n.retiring.deleting[id] {
		return false
	}
	if _, err := os.Stat(n.replicaDir(id.Datastore, id.Partition)); err != nil {
		return false
	}
	if n.retiring.reading == nil {
		n.retiring.reading = map[storage.PartitionID]int{}
	}
	n.retiring.reading[id]++
	return true
}

// endReadingRetired ends what beginReadingRetired began.
func (n *Node) endReadingRetired(id storage.PartitionID) {
	n.retiring.Lock()
	defer n.retiring.Unlock()
	if n.retiring.reading[id]--; n.retiring.reading[id] <= 0 {
		delete(n.retiring.reading, id)
	}
}

// completeAbandonedMerge runs the rest of the merge of r, a frozen partition this node leads
// that the catalog still lists, once it has been seen frozen here for mergeAbandoned.
func (n *Node) completeAbandonedMerge(d *datastore, r *route) {
	now := time.Now().UnixNano()
	since := r.frozenSince.Load()
	if since == 0 {
		r.frozenSince.Store(now)
		return
	}
	if time.Duration(now-since) < mergeAbandoned || !r.splitting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.splitting.Store(false)
		defer r.frozenSince.Store(0)
		ctx, cancel := n.untilClose(context.Background())
		defer cancel()
		ctx, cancel2 := context.WithTimeout(ctx, time.Minute)
		defer cancel2()
		p := r.replica()
		if p == nil {
			return
		}
		fr, frozen, err := fsm.ReadFreeze(ctx, p.Store())
		if err != nil || !frozen {
			return
		}
		rc, err := n.PartitionConfig(ctx, d.spec.Name, r.spec.ID)
		if err != nil {
			return
		}
		n.log.Warn("completing an abandoned merge", "datastore", d.spec.Name, "left", fr.Into, "right", r.spec.ID, "frozen_at", fr.Index)
		_, err = n.finishMerge(ctx, d.spec.Name, fr.Into, r.spec.ID, command.FreezeResult{Index: fr.Index, Shards: fr.Shards()}, fr.Generation, configNodes(rc), false)
		if err != nil {
			n.log.Warn("completing an abandoned merge", "datastore", d.spec.Name, "left", fr.Into, "right", r.spec.ID, "error", err)
		}
	}()
}
