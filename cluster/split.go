package cluster

import (
	"context"
	"errors"
	"fmt"
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

// Splitting a raft partition. The catalog decides first (catalog.OpSplit: the left half keeps
// the partition's ID and the shards below the split point, the right half gets a new ID on the
// same replicas), so every node routes the right half's shards to the new partition from then
// on. Then the parent's leader proposes the split in the parent's raft log (command.Split):
// every replica applies it at the same index, copying the right half's state into the new
// partition's store and dropping it from the parent's (package fsm). A replica that applied it
// opens the new partition's raft group from that copy (partition.WriteSplitBase); one that did
// not (it learns of the split from a snapshot of the parent) opens it empty and gets a
// snapshot from the new group's leader.
//
// Between the two steps, a request for a moved shard that reaches the parent before the split
// entry is applied there is applied by the parent (and copied to the right half with the
// rest); after, the parent refuses it as out of range (command.ErrShardOutOfRange), nothing
// applied, and the node that sent it waits for the catalog's next generation and sends it to
// the partition that holds the shard now. A leader that finds its partition's range wider than
// the catalog's (the split entry was never proposed: the node deciding it failed in between)
// proposes it (reconcileSplits), so a decided split always completes.

// shardOutOfRangeKind marks, in errorKindHeader, a refusal for a shard outside the receiving
// partition: the sender re-routes it.
const shardOutOfRangeKind = "shard-out-of-range"

// rerouteAttempts bounds how often a request refused as out of range is sent again;
// rerouteBackoff is the longest wait between two sends.
const (
	rerouteAttempts = 10
	rerouteBackoff  = time.Second
)

// catalogGeneration returns the generation of the catalog this node serves (0: none yet).
func (n *Node) catalogGeneration() uint64 {
	if c := n.cat.cur.Load(); c != nil {
		return c.Generation
	}
	return 0
}

// waitCatalogAfter waits until this node serves a catalog generation above g, at most wait or
// until ctx ends, and reports whether it does.
func (n *Node) waitCatalogAfter(ctx context.Context, g uint64, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		n.cat.mu.Lock()
		ch := n.cat.applied
		n.cat.mu.Unlock()
		if n.catalogGeneration() > g {
			return true
		}
		if ch == nil {
			return false
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// rerouted runs op, which routes by this node's catalog, and runs it again when a partition
// refused it as out of range (a split or merge moved a shard: the refusal applied nothing),
// after awaitReroute, up to rerouteAttempts times.
func rerouted[T any](ctx context.Context, n *Node, op func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		g := n.catalogGeneration()
		res, err := op()
		if err == nil || !errors.Is(err, command.ErrShardOutOfRange) || attempt == rerouteAttempts {
			return res, err
		}
		if !n.awaitReroute(ctx, g, attempt) {
			return res, err
		}
	}
}

// awaitReroute waits before the attempt-th resend of a request refused as out of range under
// catalog generation g: until this node serves a newer catalog (a split: the shard has another
// partition now), or for a moment that doubles with each attempt up to rerouteBackoff (a merge:
// the catalog gave the shard to the left partition, which refuses it until it has applied the
// merge). It reports false when ctx ended.
func (n *Node) awaitReroute(ctx context.Context, g uint64, attempt int) bool {
	wait := min(rerouteBackoff, 10*time.Millisecond<<min(attempt, 10))
	n.waitCatalogAfter(ctx, g, wait)
	return ctx.Err() == nil
}

// awaitPartition returns datastore ds once it has partition pid here, waiting up to wait for
// the catalog's changes to bring it; false at once when the catalog retired pid
// (retiredPartition), which no change brings back.
func (n *Node) awaitPartition(ds string, pid int, wait time.Duration) (*datastore, bool) {
	deadline := time.Now().Add(wait)
	for {
		if d, ok := n.datastores()[ds]; ok && slices.ContainsFunc(d.partitions, func(r *route) bool { return r.spec.ID == pid }) {
			return d, true
		}
		if n.retiredPartition(ds, pid) {
			return nil, false
		}
		left := time.Until(deadline)
		if left <= 0 || !n.waitCatalogAfter(context.Background(), n.catalogGeneration(), left) {
			return nil, false
		}
	}
}

// splitOp proposes a split on the parent's leader.
var splitOp = &leaderOp[*command.Split, command.SplitResult]{
	name: "split",
	path: "/internal/v1/split",
	validate: func(rt *route, s *command.Split) error {
		if rt.ds.Mode != topology.ModeRaft {
			return badRPC("datastore", "%s is not a raft datastore", rt.ds.Name)
		}
		if s.Right < 0 || s.AtShard < 0 || len(s.Voters) > catalog.MaxReplicas {
			return badRPC("command", "split at shard %d into partition %d", s.AtShard, s.Right)
		}
		return nil
	},
	apply: func(ctx context.Context, p Partition, s *command.Split) (command.SplitResult, error) {
		sp, ok := p.(interface {
			Split(context.Context, command.Split) (command.SplitResult, error)
		})
		if !ok {
			return command.SplitResult{}, fmt.Errorf("%w: only a raft partition splits", ErrAsyncDatastore)
		}
		// The leader's pre-copy of the parent (SQLite: its file; pebble: its request
		// records), started when this node's catalog learned of the split or else now: the
		// split's entry then copies only what was written since. The other replicas started
		// theirs from their catalogs.
		if rp, ok := p.(raftReplica); ok && rp.Shards().Contains(int(s.AtShard)) {
			pctx, cancel := context.WithTimeout(ctx, splitCopyWait)
			_ = rp.Store().PrepareSplit(pctx, int(s.Right)) // on failure, the split copies it all
			cancel()
		}
		return sp.Split(ctx, *s)
	},
}

// SplitPartition splits partition pid of raft datastore ds at shard atShard (0: the boundary
// that best halves the load the partition served since its replica here opened, when this node
// leads it, else the middle of its range): the catalog gives the shards from atShard on to a new partition on the same
// replicas, the parent's replicas copy them into it at one index of the parent's raft log, and
// the call returns once this node has applied both and, when it hosts the new partition, that
// partition has a leader (wire.SplitResponse.Ready), within ctx and at most 10s for the last.
// Every acknowledged write stays readable, and no added_id changes.
//
// Errors: ErrUnknownDatastore; ErrBadShard (no such partition); ErrAsyncDatastore; *FieldError
// ("at_shard": not above the partition's first shard and at most its last, or a partition of
// one shard); ErrRefused (the store of this node cannot split, or the partition changed while
// the split was decided: try again); ErrNoCatalog; ErrIndeterminate; ctx's error.
func (n *Node) SplitPartition(ctx context.Context, ds string, pid int, req wire.SplitRequest) (wire.SplitResponse, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return wire.SplitResponse{}, err
	}
	if d.spec.Mode == topology.ModeAsync {
		return n.splitAsync(ctx, d, pid, req)
	}
	if req.To != "" || req.DropOld {
		return wire.SplitResponse{}, &FieldError{Field: "to", Msg: fmt.Sprintf("%s is a raft datastore: a split's halves stay on the parent's replicas (move them with POST /v1/admin/partitions/%s/{partition}/replicas)", ds, ds)}
	}
	return n.splitPartition(ctx, ds, pid, req.AtShard, false)
}

// splitPartition is SplitPartition; auto marks a split of the cluster's policy in the catalog
// (catalog.Event.Auto), which makes its right half a candidate for automatic merges.
func (n *Node) splitPartition(ctx context.Context, ds string, pid int, atShard int, auto bool) (wire.SplitResponse, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return wire.SplitResponse{}, err
	}
	if d.spec.Mode != topology.ModeRaft {
		return wire.SplitResponse{}, fmt.Errorf("%w: %s is async (SplitPartition splits it in place)", ErrAsyncDatastore, ds)
	}
	r := d.route(pid)
	if r == nil {
		return wire.SplitResponse{}, fmt.Errorf("%w: no partition %d in %q", ErrBadShard, pid, ds)
	}
	if !n.cfg.Store.SupportsSplit() {
		return wire.SplitResponse{}, fmt.Errorf("%w: this node's store (%s) cannot split", ErrRefused, n.cfg.Store.Engine())
	}
	rng := r.spec.Shards()
	if rng.Len() < 2 {
		return wire.SplitResponse{}, &FieldError{Field: "at_shard", Msg: fmt.Sprintf("partition %d holds one shard (%d): it cannot split", pid, rng.First)}
	}
	if atShard == 0 {
		atShard = loadSplitPoint(r) // the boundary that best halves its load here, else the middle
	}
	if atShard <= rng.First || atShard > rng.Last {
		return wire.SplitResponse{}, &FieldError{Field: "at_shard", Msg: fmt.Sprintf("%d: want %d to %d (each half keeps a shard; partition %d holds %d..%d)",
			atShard, rng.First+1, rng.Last, pid, rng.First, rng.Last)}
	}
	began := time.Now()
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpSplit, Datastore: ds, Partition: pid, AtShard: atShard,
		ExpectGeneration: max(n.catalogGeneration(), 1), Auto: auto})
	switch {
	case errors.Is(err, catalog.ErrStale), errors.Is(err, catalog.ErrNotFound):
		return wire.SplitResponse{}, fmt.Errorf("%w: %w", ErrRefused, err)
	case errors.Is(err, catalog.ErrBadCommand):
		return wire.SplitResponse{}, &FieldError{Field: "at_shard", Msg: err.Error()}
	case err != nil:
		return wire.SplitResponse{}, err
	}
	left, right := res.Partitions[0], res.Partitions[1]
	n.log.Info("split decided", "datastore", ds, "partition", pid, "at_shard", atShard, "right", right.ID, "generation", res.Generation)
	if err := n.proposeSplit(ctx, ds, pid, atShard, right.ID, res.Generation); err != nil {
		return wire.SplitResponse{}, err
	}
	out := wire.SplitResponse{Generation: res.Generation, Left: catalogPartition(left), Right: catalogPartition(right)}
	out.Ready = n.waitSplitReady(ctx, ds, right.ID)
	out.TookMillis = time.Since(began).Milliseconds()
	if out.Ready {
		out.Learners = n.carryLearners(ctx, ds, pid, right.ID) // after TookMillis: the halves take writes already
	}
	n.log.Info("split done", "datastore", ds, "partition", pid, "right", right.ID, "ready", out.Ready, "took", time.Since(began), "learners", out.Learners)
	return out, nil
}

// waitSplitReady waits until partition right of ds, the new half of a split this node's
// replica of the parent applied, has a leader that this node's replica knows, and reports
// whether it has: true when this node does not host it (nothing to wait for), false when ctx
// ends or 10 s pass first. Polls every leaderPoll.
func (n *Node) waitSplitReady(ctx context.Context, ds string, right int) bool {
	return pollUntil(ctx, 10*time.Second, func() bool {
		rr := n.routeOf(ds, right)
		return rr == nil || !slices.Contains(rr.spec.Replicas, n.cfg.NodeID) || localLeaderKnown(rr)
	})
}

// proposeSplit has the leader of partition pid of ds apply the split the catalog decided at
// generation gen, once the parent's replicas made their pre-copies for it (awaitSplitCopies,
// at most splitCopyWait). A refusal as out of range means the parent applied it already (or a
// later one): done.
func (n *Node) proposeSplit(ctx context.Context, ds string, pid, atShard, right int, gen uint64) error {
	r := n.routeOf(ds, pid)
	if r == nil {
		return fmt.Errorf("%w: no partition %d in %q", ErrBadShard, pid, ds)
	}
	n.awaitSplitCopies(ctx, ds, pid, right)
	_, err := callLeaderOp(ctx, n, splitOp, ds, r, &command.Split{AtShard: int32(atShard), Right: int32(right), Generation: gen})
	if err != nil && errors.Is(err, command.ErrShardOutOfRange) {
		return nil
	}
	return err
}

// catalogPartition is p as the admin API shows it.
func catalogPartition(p catalog.Partition) wire.CatalogPartition {
	return wire.CatalogPartition{ID: p.ID, FirstShard: p.Shards.First, LastShard: p.Shards.Last, Replicas: slices.Clone(p.Replicas),
		Learners: slices.Clone(p.Learners), Cluster: p.Cluster, Generation: p.Generation, Parent: p.Parent}
}

// route returns partition pid of d, or nil.
func (d *datastore) route(pid int) *route {
	for _, r := range d.partitions {
		if r.spec.ID == pid {
			return r
		}
	}
	return nil
}

// routeOf returns partition pid of datastore ds as this node routes it now, or nil.
func (n *Node) routeOf(ds string, pid int) *route {
	d, ok := n.datastores()[ds]
	if !ok {
		return nil
	}
	return d.route(pid)
}

// reshapeDatastore returns datastore od with the partitions of spec (a split or merge changed
// them; an async datastore: reshapeAsync): a partition of both keeps its route's replica, hint and replicas under its new
// range; a partition that is gone is closed; a new one gets a route, its replica opened by
// openSplitReplicasLocked. It returns nil when spec cannot be served this way (another mode or
// shard count). The caller holds hostMu.
func (n *Node) reshapeDatastore(od *datastore, spec *topology.DatastoreSpec) *datastore {
	if od.spec.Mode != spec.Mode || od.spec.Shards != spec.Shards {
		return nil
	}
	if spec.Mode == topology.ModeAsync {
		return n.reshapeAsync(od, spec)
	}
	if spec.Mode != topology.ModeRaft {
		return nil
	}
	d := &datastore{spec: spec, created: od.created}
	old := map[int]*route{}
	for _, r := range od.partitions {
		old[r.spec.ID] = r
	}
	for j := range spec.Partitions {
		ps := &spec.Partitions[j]
		r := &route{spec: ps, ds: spec, created: od.created}
		if or := old[ps.ID]; or != nil {
			delete(old, ps.ID)
			r.part.Store(or.part.Load())
			r.settled.Store(or.settled.Load())
			or.mu.Lock()
			r.trans, r.hint, r.next, r.replicas = or.trans, or.hint, or.next, slices.Clone(or.replicas)
			or.mu.Unlock()
			if !slices.Equal(or.spec.Replicas, ps.Replicas) && len(ps.Replicas) > 0 {
				// The catalog recorded the partition's voters after a membership change: the
				// nodes to try for it now, where no local replica or gossip says better.
				r.replicas = slices.Clone(ps.Replicas)
			}
		} else {
			r.replicas = slices.Clone(ps.Replicas)
		}
		d.partitions = append(d.partitions, r)
	}
	for _, or := range old {
		// Gone by a merge: its replica closes, its store too (the merge reads it from there,
		// and the node deletes it once merged: retireMergedLocked).
		var errs []error
		if p := or.replica(); p != nil {
			ps := p.Store()
			errs = append(errs, or.closeReplica(), ps.Close())
		}
		if err := errors.Join(errs...); err != nil {
			n.log.Warn("closing a partition gone from the catalog", "datastore", spec.Name, "partition", or.spec.ID, "error", err)
		}
	}
	return d
}

// lastSplitKick returns when kickSplits last ran, zero when it never did.
func (n *Node) lastSplitKick() time.Time {
	if at := n.splitKickedAt.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// kickSplits asks the split loop to open the new partitions of splits (fsm.Config.OnSplit: it
// does not block).
func (n *Node) kickSplits() {
	n.splitKickedAt.Store(time.Now().UnixNano())
	select {
	case n.splitKick <- struct{}{}:
	default:
	}
}

// splitLoop opens the replicas of new partitions whenever a split is applied here, and deletes
// the data of merged partitions (retireMergedLocked), until the node closes.
func (n *Node) splitLoop() {
	for {
		var retry <-chan time.Time
		n.retiring.Lock()
		if len(n.retiring.ids) > 0 {
			retry = time.After(2 * time.Second) // a merged partition waits for the catalog here
		}
		n.retiring.Unlock()
		select {
		case <-n.stopWatch:
			return
		case <-n.splitKick:
		case <-retry:
		}
		kicked := n.lastSplitKick()
		n.hostMu.Lock()
		if !n.hostClosed {
			ctx, cancel := n.untilClose(context.Background())
			n.openSplitReplicasLocked(ctx, kicked)
			n.retireMergedLocked(ctx)
			cancel()
		}
		n.hostMu.Unlock()
	}
}

// openSplitReplicasLocked opens this node's replica of every partition made by a split that it
// should host and does not serve yet, once it can: when its parent's replica here has applied
// the split (its range no longer holds the new partition's shards: the copy is in this node's
// store, or a snapshot of the parent told it of the split), or when this node hosts no replica
// of the parent. kicked is when a split applied here last asked for it (kickSplits; zero:
// none did): the log line of each replica opened gives the time since then, when set, and the
// steps' times. The caller holds hostMu.
func (n *Node) openSplitReplicasLocked(ctx context.Context, kicked time.Time) {
	locked := time.Now()
	for _, d := range n.datastores() {
		if d.spec.Mode != topology.ModeRaft {
			continue
		}
		for _, r := range d.partitions {
			if r.spec.Parent == nil || r.local() != nil {
				continue
			}
			state := n.hosted.state(d.spec.Name, r.spec.ID)
			if state == hostedRemoved {
				continue
			}
			// A node hosting the parent hosts the new partition (the split's voters are the
			// parent's, which the catalog's replica list may not show after membership
			// changes); another node when the catalog places it there.
			parentHere, parentLeader := false, false
			if pr := d.route(*r.spec.Parent); pr != nil {
				if p := pr.replica(); p != nil {
					if !n.splitAppliedHere(ctx, d.spec.Name, p, r) {
						continue
					}
					parentHere, parentLeader = true, p.IsLeader()
				}
			}
			if state == hostedUnknown && !hosts(r.spec, n.cfg.NodeID) && (!parentHere || !n.splitVoterHere(ctx, d.spec.Name, r)) {
				continue
			}
			began := time.Now()
			var t openTimes
			if err := n.openReplicaTimed(ctx, d.spec, r, nil, &t); err != nil {
				n.log.Error("opening the replica of a split's new partition", "datastore", d.spec.Name, "partition", r.spec.ID, "error", err)
				continue
			}
			opened := time.Now()
			// The first election starts before the replica is recorded as hosted (a synced
			// file write): the moved shards' writes wait for it. A node that stops before the
			// record opens the replica again from the parent's split (above).
			if c, ok := r.replica().(campaigner); ok && parentLeader {
				go n.campaign(c, r.spec.ID)
			}
			if err := n.hosted.set(d.spec.Name, r.spec.ID, hostedMember); err != nil {
				n.log.Error("recording a hosted replica", "datastore", d.spec.Name, "partition", r.spec.ID, "error", err)
			}
			attrs := []any{"datastore", d.spec.Name, "partition", r.spec.ID, "parent", *r.spec.Parent}
			if !kicked.IsZero() {
				attrs = append(attrs, "since_applied_ms", ms(opened.Sub(kicked)), "wait_ms", ms(locked.Sub(kicked)))
			}
			attrs = append(attrs, "check_ms", ms(began.Sub(locked)), "store_ms", ms(t.store), "base_ms", ms(t.base),
				"raft_ms", ms(t.raft), "record_ms", ms(time.Since(opened)))
			n.log.Info("opened the replica of a split's new partition", attrs...)
		}
	}
}

// campaigner is a replica that can start an election at once (partition.Raft.Campaign) and
// tell how its elections' vote requests stand (partition.Raft.Votes).
type campaigner interface {
	Campaign() error
	Leader() (string, string)
	Votes() (term uint64, pending int)
}

// campaignRetry is the least time between two first elections of a split's new partition,
// campaignStale how long one election may wait for vote requests still on their way before
// another starts, and campaignFor how long the tries go on. An election that finds no other
// voter open fails at once; the next one, once a second voter has opened its replica, is the
// one that wins, so it starts again as soon as the one before has all its answers. It is not
// cut short while a vote is on its way: on three loaded nodes a vote's answer came after more
// than 60 ms (each vote a synced write of the term on the candidate and the voter), and
// retries every 20 to 80 ms whatever the votes' state cut such elections short twice before
// one was let win, 144 ms after the first (BENCHMARKS.md). Each try is one RequestVote per voter and a term written.
const (
	campaignRetry = 10 * time.Millisecond
	campaignStale = 500 * time.Millisecond
	campaignFor   = 3 * time.Second
)

// campaign starts the first election of partition pid's new group on this node (the parent's
// leader's) at once, and again whenever that election ended without a leader (every vote
// request answered or failed: campaignDone), until the group has a leader, for at most
// campaignFor: the other voters open their replicas when they apply the split, which may be
// after the first election asked them for their votes; without this the group would wait for
// an election timeout (a second or more) before it took requests. A replica that leads by
// then ignores the call (partition.Raft.Campaign).
func (n *Node) campaign(c campaigner, pid int) {
	deadline := time.Now().Add(campaignFor)
	for {
		before, _ := c.Votes()
		began := time.Now()
		if err := c.Campaign(); err != nil {
			n.log.Debug("first election of a split's new partition", "partition", pid, "error", err)
		}
		if pollUntil(context.Background(), campaignStale, func() bool { return campaignDone(c, before, began) }) {
			if id, _ := c.Leader(); id != "" {
				return
			}
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

// campaignDone reports whether the election that a Campaign started at began, when c's newest
// vote term was before, is over: c knows a leader, or at least campaignRetry has passed and
// c asked for votes in a later term and has every answer.
func campaignDone(c campaigner, before uint64, began time.Time) bool {
	if id, _ := c.Leader(); id != "" {
		return true
	}
	term, pending := c.Votes()
	return term > before && pending == 0 && time.Since(began) >= campaignRetry
}

// splitVoterHere reports whether this node was a voter of the split that made partition r (its
// store here holds the split's copy, whose origin names the voters): a replica of the parent
// that joined it after the split, and replayed the split entry from the log while catching up,
// holds a copy too but is no member of the new partition's group (a rebalance adds it like any
// other replica). A negative answer is remembered. The caller holds hostMu.
func (n *Node) splitVoterHere(ctx context.Context, ds string, r *route) bool {
	id := storage.PartitionID{Datastore: ds, Partition: r.spec.ID}
	if n.notSplitVoter[id] {
		return false
	}
	origin, ok := n.splitOriginHere(ctx, ds, r)
	if !ok {
		return false // no copy yet: the parent here applies the split later, or never did
	}
	if slices.ContainsFunc(origin.Voters, func(v command.Voter) bool { return v.ID == n.cfg.NodeID }) {
		return true
	}
	if n.notSplitVoter == nil {
		n.notSplitVoter = map[storage.PartitionID]bool{}
	}
	n.notSplitVoter[id] = true
	n.log.Info("not opening a split's new partition: this node joined its parent after the split", "datastore", ds, "partition", r.spec.ID)
	return false
}

// splitAppliedHere reports whether p, this node's replica of the parent of r (a split's new
// partition), has applied the split that made r: its store records r (fsm.SplitApplied,
// written by the split's entry and carried by the parent's snapshots, so a replica that learned
// of the split from a snapshot counts too), or, for a split applied by a build before those
// records, the parent no longer holds r's shards and r's split origin is in the store here.
// The parent's range alone does not tell: after a merge gave the parent back a split's shards
// and a new split took them again, a replica that had applied neither the merge nor the new
// split held the same range as after both, and the new partition's replica opened there empty,
// without the split's base; a group whose replicas lack the base elects no leader that can
// commit, since the base cannot be sent.
func (n *Node) splitAppliedHere(ctx context.Context, ds string, p raftReplica, r *route) bool {
	if ok, err := fsm.SplitApplied(ctx, p.Store(), r.spec.ID); err != nil || ok {
		return ok
	}
	if overlaps(p.Shards(), r.spec.Shards()) {
		return false
	}
	_, ok := n.splitOriginHere(ctx, ds, r)
	return ok
}

// splitOriginHere reads the split origin (fsm.SplitOrigin) that this node's store holds for
// partition r, the new partition of a split: present once the parent's replica here applied
// the split (it is written with the right half's state). ok is false when it is absent or
// cannot be read. The store is released, not closed: on SQLite its open pools are kept for the
// replica that opens next (storage.PartitionStore.Release), where a close would checkpoint the
// split's copy on the replica's path.
func (n *Node) splitOriginHere(ctx context.Context, ds string, r *route) (fsm.SplitOrigin, bool) {
	ps, err := n.cfg.Store.Partition(ctx, storage.PartitionID{Datastore: ds, Partition: r.spec.ID}, r.spec.OriginShards())
	if err != nil {
		return fsm.SplitOrigin{}, false
	}
	origin, ok, err := fsm.ReadSplitOrigin(ctx, ps)
	if cerr := ps.Release(); err == nil {
		err = cerr
	}
	return origin, err == nil && ok
}

// splitPending reports whether the newest catalog among its voters' (one of them leads it)
// still has partition pid of ds split into it and right, while the replica here, whose range
// was have, has not applied that split: reconcileSplits proposes the split only then. This
// node's own catalog may lag behind the replica: a merge that gave the parent right's shards
// back is in the catalog before it is in the parent's log, and a replica that applied it while
// this node's catalog still showed the split would split the parent again, and the shards
// merged back would go to a partition the catalog has retired. Blocks for one catalog fetch
// per voter (at most a few seconds); false when no voter answers.
func (n *Node) splitPending(ds string, pid, right int, have cells.ShardRange) bool {
	newest := n.votersCatalog()
	if newest == nil || newest.Datastores[ds] == nil {
		return false
	}
	d := newest.Datastores[ds]
	parent, next := d.Partition(pid), d.Partition(right)
	pending := parent != nil && next != nil && next.Parent == pid && next.Shards.First == parent.Shards.Last+1 &&
		have.Last > parent.Shards.Last && have.Last >= next.Shards.First
	if !pending {
		n.log.Info("not completing a split: the catalog's voters no longer list it", "datastore", ds, "partition", pid, "right", right,
			"generation", newest.Generation, "range", fmt.Sprintf("%d..%d", have.First, have.Last))
	}
	return pending
}

// votersCatalog returns the newest of the catalogs that the catalog's voters serve (one of
// them leads it, so it holds every decided change), or nil when none answers. Blocks for one
// catalog fetch per voter (at most a few seconds).
func (n *Node) votersCatalog() *catalog.Catalog {
	var newest *catalog.Catalog
	for _, id := range n.catalogVoterIDs() {
		c, err := n.fetchCatalog(id, 0)
		if err == nil && (newest == nil || c.Generation > newest.Generation) {
			newest = c
		}
	}
	return newest
}

func overlaps(a, b cells.ShardRange) bool { return a.First <= b.Last && b.First <= a.Last }

// splitStore returns the fsm.Config.SplitStore of the replicas of raft datastore ds: the store
// of the split's new partition, opened for the copy (on SQLite without creating its file,
// which the copy puts in place: storage.Store.PartitionForSplit) and released after, which on
// SQLite syncs the copy before the parent's commit and keeps it open for the new partition's
// replica (storage.PartitionStore.Release); or, when this node serves that partition already
// (the split is applied again after a crash), its replica's store.
func (n *Node) splitStore(ds string) func(ctx context.Context, right int, shards cells.ShardRange) (fsm.Store, func() error, error) {
	return func(ctx context.Context, right int, shards cells.ShardRange) (fsm.Store, func() error, error) {
		ps, err := n.cfg.Store.PartitionForSplit(ctx, storage.PartitionID{Datastore: ds, Partition: right}, shards)
		if errors.Is(err, storage.ErrPartitionOpen) {
			if r := n.routeOf(ds, right); r != nil {
				if p := r.replica(); p != nil {
					return p.Store(), func() error { return nil }, nil
				}
			}
		}
		if err != nil {
			return nil, nil, err
		}
		return ps, ps.Release, nil
	}
}

// reconcileSplits has each partition this node leads apply a split the catalog decided and its
// raft log does not hold yet (the node that decided it failed before proposing it): a leader
// whose range is wider than the catalog's, with the catalog's partition right after it made by
// a split of it, proposes that split. Called from watchReplicas.
func (n *Node) reconcileSplits() {
	for _, d := range n.datastores() {
		if d.spec.Mode != topology.ModeRaft {
			continue
		}
		for _, r := range d.partitions {
			p := r.replica()
			if p == nil || !p.IsLeader() || p.Shards().Last <= r.spec.LastShard {
				continue
			}
			next := d.routeOf(r.spec.LastShard + 1)
			if next == nil || next.spec.Parent == nil || *next.spec.Parent != r.spec.ID || !r.splitting.CompareAndSwap(false, true) {
				continue
			}
			gen, have := n.catalogGeneration(), p.Shards()
			go func() {
				defer r.splitting.Store(false)
				ctx, cancel := n.untilClose(context.Background())
				defer cancel()
				ctx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
				defer cancel2()
				if !n.splitPending(d.spec.Name, r.spec.ID, next.spec.ID, have) {
					return
				}
				if err := n.proposeSplit(ctx, d.spec.Name, r.spec.ID, next.spec.FirstShard, next.spec.ID, gen); err != nil {
					n.log.Warn("completing a split the catalog decided", "datastore", d.spec.Name, "partition", r.spec.ID, "right", next.spec.ID, "error", err)
					return
				}
				// The learners of the parent, as a split completed by the node that decided it.
				if n.waitSplitReady(ctx, d.spec.Name, next.spec.ID) {
					learners := n.carryLearners(ctx, d.spec.Name, r.spec.ID, next.spec.ID)
					n.log.Info("completed a split the catalog decided", "datastore", d.spec.Name, "partition", r.spec.ID, "right", next.spec.ID, "learners", learners)
				}
			}()
		}
	}
}

// ms is d in milliseconds with a tenth's precision, for log lines.
func ms(d time.Duration) float64 { return float64(d.Round(100*time.Microsecond)) / 1e6 }
