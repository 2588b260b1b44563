package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Replica alignment and automatic merges.
//
// A merge needs both partitions on the same nodes. MergePartitions first moves the right
// partition's replicas onto the left one's nodes (AddVoter, RemoveVoter: each new replica
// catches up before an old one leaves), and records both partitions' voters in the catalog,
// whose merge checks them (catalog.OpMerge).
//
// The automatic merge undoes the cluster's own splits once their load is gone, as CockroachDB's
// merge queue does: the leader of a partition merges its right neighbour into it when
//
//   - the neighbour was made by an automatic split (catalog.Event.Auto: a load- or size-based
//     one) at least MergeAfter ago; a split an operator asked for stays, and so do the
//     partitions a datastore was created with;
//   - both partitions have been idle (quiesced, partition.Config.QuiesceAfter: no request at
//     all) for the last MergeAfter, as this node's replicas of them see it;
//   - together they take less than half the size threshold on disk (so the merged partition is
//     far from splitting again), when size-based splitting is on.
//
// One automatic split or merge runs at a time on a node. Without gossip partitions never
// quiesce, so nothing merges automatically.

// mergeState is what the merge policy keeps of a partition this node leads: since when it and
// its right neighbour have both been quiesced here (zero: not both now).
type mergeState struct {
	right      int
	quietSince time.Time
}

// autoMergeTick checks, for every raft datastore, the partitions this node leads and starts the
// merge of one whose right neighbour meets the rules above.
func (n *Node) autoMergeTick(now time.Time, states map[*route]*mergeState, busy chan struct{}) {
	after := n.cfg.AutoSplit.MergeAfter
	if after <= 0 {
		return
	}
	cat := n.cat.cur.Load()
	live := map[*route]bool{}
	defer func() {
		for r := range states {
			if !live[r] {
				delete(states, r)
			}
		}
	}()
	for _, d := range n.datastores() {
		if d.spec.Mode != topology.ModeRaft || cat == nil {
			continue
		}
		cd := cat.Datastores[d.spec.Name]
		if cd == nil {
			continue
		}
		for i, r := range d.partitions {
			p := r.replica()
			if p == nil || !p.IsLeader() || i+1 >= len(d.partitions) {
				continue
			}
			live[r] = true
			right := d.partitions[i+1]
			rp := right.replica()
			st := states[r]
			if st == nil || st.right != right.spec.ID {
				st = &mergeState{right: right.spec.ID}
				states[r] = st
			}
			if rp == nil || !p.Quiesced() || !rp.Quiesced() || right.spec.FirstShard != r.spec.LastShard+1 {
				st.quietSince = time.Time{}
				continue
			}
			if st.quietSince.IsZero() {
				st.quietSince = now
			}
			if now.Sub(st.quietSince) < after {
				continue
			}
			split, ok := lastSplitOf(cd, right.spec.ID)
			if !ok || !split.Auto || now.Sub(split.At) < after {
				continue
			}
			if limit := n.splitSizeOf(d.spec); limit > 0 {
				size, err := n.localSize(r, right)
				if err != nil || size*2 >= limit {
					continue
				}
			}
			if n.startAutoMerge(d.spec.Name, r.spec.ID, right.spec.ID, busy, "quiet_for", now.Sub(st.quietSince).Round(time.Second), "split_at", split.At) {
				st.quietSince = time.Time{}
			}
		}
	}
}

// lastSplitOf returns the latest split of the datastore's history that made partition id.
func lastSplitOf(d *catalog.Datastore, id int) (catalog.Event, bool) {
	for i := len(d.History) - 1; i >= 0; i-- {
		if e := d.History[i]; e.Op == catalog.OpSplit && e.Right == id {
			return e, true
		}
	}
	return catalog.Event{}, false
}

// localSize returns the bytes on disk of this node's replicas of partitions a and b.
func (n *Node) localSize(a, b *route) (int64, error) {
	ctx, cancel := n.untilClose(context.Background())
	defer cancel()
	var total int64
	for _, r := range []*route{a, b} {
		p := r.replica()
		if p == nil {
			return 0, fmt.Errorf("%w: no replica of partition %d here", ErrUnavailable, r.spec.ID)
		}
		sizes, err := p.Store().ShardSizes(ctx, p.Shards())
		if err != nil {
			return 0, err
		}
		for _, sz := range sizes {
			total += sz
		}
	}
	return total, nil
}

// startAutoMerge starts the merge of partition right of ds into left unless another automatic
// split or merge runs on this node (busy), and reports whether it started.
func (n *Node) startAutoMerge(ds string, left, right int, busy chan struct{}, attrs ...any) bool {
	select {
	case busy <- struct{}{}:
	default:
		return false
	}
	n.log.Info("automatic merge", append([]any{"datastore", ds, "left", left, "right", right}, attrs...)...)
	go func() {
		defer func() { <-busy }()
		ctx, cancel := n.untilClose(context.Background())
		defer cancel()
		ctx, cancel2 := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel2()
		if _, err := n.mergePartitions(ctx, ds, left, right, true); err != nil {
			n.log.Warn("automatic merge failed", "datastore", ds, "left", left, "right", right, "error", err)
		}
	}()
	return true
}

// alignReplicas moves the replicas of partition pid of ds so that its nodes are want (it is on
// have): a move for each pair of a node to leave and a node to join, then the joins and leaves
// left over. It returns how many replicas it added or moved.
func (n *Node) alignReplicas(ctx context.Context, ds string, pid int, want, have []string) (int, error) {
	var join, leave []string
	for _, id := range want {
		if !slices.Contains(have, id) {
			join = append(join, id)
		}
	}
	for _, id := range have {
		if !slices.Contains(want, id) {
			leave = append(leave, id)
		}
	}
	moved := 0
	for len(join) > 0 && len(leave) > 0 {
		n.log.Info("merge: moving a replica onto the left partition's nodes", "datastore", ds, "partition", pid, "from", leave[0], "to", join[0])
		if err := n.MoveReplica(ctx, ds, pid, leave[0], join[0]); err != nil {
			return moved, fmt.Errorf("move partition %d's replica from %s to %s: %w", pid, leave[0], join[0], err)
		}
		join, leave, moved = join[1:], leave[1:], moved+1
	}
	for _, id := range join {
		if err := n.AddVoter(ctx, ds, pid, id); err != nil {
			return moved, fmt.Errorf("add a replica of partition %d on %s: %w", pid, id, err)
		}
		moved++
	}
	for _, id := range leave {
		if err := n.RemoveVoter(ctx, ds, pid, id); err != nil {
			return moved, fmt.Errorf("remove partition %d's replica on %s: %w", pid, id, err)
		}
		moved++
	}
	return moved, nil
}

// recordReplicas sets the catalog's replica list of partition pid of ds to the voters of its
// raft configuration, when they differ.
func (n *Node) recordReplicas(ctx context.Context, ds string, pid int) error {
	cfg, err := n.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return err
	}
	var voters []string
	for _, s := range cfg.Servers {
		if s.Suffrage == wire.SuffrageVoter {
			voters = append(voters, s.Node)
		}
	}
	slices.Sort(voters)
	r := n.routeOf(ds, pid)
	if r == nil || len(voters) == 0 {
		return nil
	}
	cur := slices.Clone(r.spec.Replicas)
	slices.Sort(cur)
	if slices.Equal(cur, voters) {
		return nil
	}
	if _, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpSetReplicas, Datastore: ds, Partition: pid, Replicas: voters}); err != nil {
		return fmt.Errorf("record partition %d's replicas %v in the catalog: %w", pid, voters, err)
	}
	n.log.Info("catalog: partition replicas recorded", "datastore", ds, "partition", pid, "replicas", voters)
	return nil
}

// recordReplicasLater queues partition pid of ds for recordReplicas on the node's recorder
// goroutine (startRecorder), which records each queued partition once however often it was
// queued meanwhile, so that a rebalance's moves do not wait for the catalog. A failure is
// logged: the raft change it follows stands either way, and the next change or a merge
// records it. It never blocks.
func (n *Node) recordReplicasLater(ds string, pid int) {
	n.recMu.Lock()
	if n.recDirty == nil {
		n.recDirty = map[recordKey]bool{}
	}
	n.recDirty[recordKey{ds, pid}] = true
	n.recMu.Unlock()
	select {
	case n.recKick <- struct{}{}:
	default:
	}
}

// recordKey names a partition queued for recordReplicasLater.
type recordKey struct {
	ds  string
	pid int
}

// recorderLoop records the partitions queued by recordReplicasLater until the node closes.
func (n *Node) recorderLoop() {
	for {
		select {
		case <-n.stopWatch:
			return
		case <-n.recKick:
		}
		n.recMu.Lock()
		dirty := n.recDirty
		n.recDirty = nil
		n.recMu.Unlock()
		for k := range dirty {
			ctx, cancel := n.untilClose(context.Background())
			ctx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
			err := n.recordReplicas(ctx, k.ds, k.pid)
			cancel2()
			cancel()
			if err != nil && !errors.Is(err, ErrAsyncDatastore) {
				n.log.Warn("catalog: recording the partition's replicas", "datastore", k.ds, "partition", k.pid, "error", err)
			}
		}
	}
}
