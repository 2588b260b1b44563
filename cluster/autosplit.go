package cluster

import (
	"context"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/topology"
)

// Load-based splitting. Each node watches the partitions it leads: every second it reads each
// replica's per-shard request counts (partition.Raft.ShardLoad: cells written, keys and rows
// read), and when a partition has served more than the threshold's requests per second over
// the whole window, it splits it at the shard boundary that best halves that window's load
// (CockroachDB and TiKV split by load the same way: 2,500 and 3,000 requests/s by default).
// It never splits below one shard per partition, waits Cooldown after a split of the same
// partition (its halves start counting afresh), and leaves alone a partition whose load sits on
// one shard: splitting it would not divide the load (the "narrow hot range" that splits
// again and again). The new partition's leader then moves to another of its voters, so the two
// halves are led by two nodes; admin rebalance evens out the rest.
//
// Size-based splitting runs in the same loop: every SizeEvery, a leader reads its partitions'
// per-shard sizes on disk (storage.PartitionStore.ShardSizes, each engine's estimate) and
// splits one above the size threshold at the shard that best halves its size, under the same
// rules (CockroachDB splits ranges at 512 MiB, TiKV regions at 96 to 256 MiB).

// AutoSplitConfig sets load-based splitting (Config.AutoSplit).
type AutoSplitConfig struct {
	// Load is the requests per second (cells written plus keys and rows read, on the leader)
	// above which a partition splits, for datastores that do not set their own
	// (topology.DatastoreSpec.SplitLoad). 0: off.
	Load float64
	// Window is how long the load must stay above Load, measured over the whole window.
	// Default 10s.
	Window time.Duration
	// Cooldown is the least time between two load-based splits of one partition. Default 30s.
	Cooldown time.Duration
	// Size is the bytes on disk (cells and shard logs) above which a partition splits, for
	// datastores that do not set their own (topology.DatastoreSpec.SplitSize). 0: off.
	Size int64
	// SizeEvery is how often a leader reads its partitions' sizes. Default 10s.
	SizeEvery time.Duration
	// MergeAfter turns automatic merges on (automerge.go): a partition made by an automatic
	// split at least MergeAfter ago merges back into its left neighbour once both have been
	// idle (quiesced) for MergeAfter, and take less than half of Size together. 0: off.
	MergeAfter time.Duration
}

func (c *AutoSplitConfig) ensureDefaults() {
	if c.Window <= 0 {
		c.Window = 10 * time.Second
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 30 * time.Second
	}
	if c.SizeEvery <= 0 {
		c.SizeEvery = 10 * time.Second
	}
}

// loadSample is a partition's cumulative per-shard counts at one time.
type loadSample struct {
	at     time.Time
	first  int
	counts []int64
}

// loadState is what the policy keeps of one partition this node leads.
type loadState struct {
	samples   []loadSample
	lastSplit time.Time
	lastSize  time.Time // when its size was last read
}

// splitLoadOf returns the load threshold of datastore ds: its own, or the node's.
func (n *Node) splitLoadOf(ds *topology.DatastoreSpec) float64 {
	switch {
	case ds.SplitLoad < 0:
		return 0
	case ds.SplitLoad > 0:
		return ds.SplitLoad
	}
	return n.cfg.AutoSplit.Load
}

// splitSizeOf returns the size threshold of datastore ds in bytes: its own, or the node's.
func (n *Node) splitSizeOf(ds *topology.DatastoreSpec) int64 {
	switch {
	case ds.SplitSize < 0:
		return 0
	case ds.SplitSize > 0:
		return ds.SplitSize
	}
	return n.cfg.AutoSplit.Size
}

// autoSplitLoop runs the load- and size-based split policy, the merge policy (automerge.go)
// and the leader zones' (zones.go) every second until the node closes.
func (n *Node) autoSplitLoop() {
	states := map[*route]*loadState{}
	merges := map[*route]*mergeState{}
	zoned := map[recordKey]time.Time{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	busy := make(chan struct{}, 1) // one load-based split at a time on this node
	for {
		select {
		case <-n.stopWatch:
			return
		case now := <-t.C:
			n.autoSplitTick(now, states, busy)
			n.autoMergeTick(now, merges, busy)
			n.leaderZoneTick(now, zoned, busy)
		}
	}
}

// autoSplitTick samples the load of every partition this node leads and starts a split of one
// that stayed above its threshold for the window.
func (n *Node) autoSplitTick(now time.Time, states map[*route]*loadState, busy chan struct{}) {
	cfg := n.cfg.AutoSplit
	live := map[*route]bool{}
	for _, d := range n.datastores() {
		if d.spec.Mode != topology.ModeRaft {
			continue
		}
		threshold, sizeLimit := n.splitLoadOf(d.spec), n.splitSizeOf(d.spec)
		if threshold <= 0 && sizeLimit <= 0 {
			continue
		}
		for _, r := range d.partitions {
			p := r.replica()
			if p == nil || !p.IsLeader() {
				continue
			}
			lp, ok := p.(interface {
				ShardLoad() (int, []int64)
			})
			if !ok {
				continue
			}
			live[r] = true
			st := states[r]
			if st == nil {
				st = &loadState{}
				states[r] = st
			}
			first, counts := lp.ShardLoad()
			st.samples = append(st.samples, loadSample{at: now, first: first, counts: counts})
			for len(st.samples) > 1 && now.Sub(st.samples[1].at) >= cfg.Window {
				st.samples = st.samples[1:]
			}
			if now.Sub(st.lastSplit) < cfg.Cooldown {
				continue
			}
			if sizeLimit > 0 && now.Sub(st.lastSize) >= cfg.SizeEvery {
				st.lastSize = now
				if at, size, ok := n.sizeSplitPoint(r, sizeLimit); ok {
					if n.startAutoSplit(d.spec.Name, r.spec.ID, at, busy, "size-based split", "bytes", size, "threshold", sizeLimit) {
						st.lastSplit, st.samples = now, nil
					}
					continue
				}
			}
			old := st.samples[0]
			span := now.Sub(old.at)
			if threshold <= 0 || span < cfg.Window*9/10 {
				continue
			}
			rng := r.spec.Shards()
			deltas := make([]int64, rng.Len())
			var total int64
			for s := rng.First; s <= rng.Last; s++ {
				i := s - first
				if i < 0 || i >= len(counts) || i >= len(old.counts) {
					continue
				}
				deltas[s-rng.First] = counts[i] - old.counts[i]
				total += deltas[s-rng.First]
			}
			rate := float64(total) / span.Seconds()
			if rate < threshold {
				continue
			}
			at, ok := bestSplit(rng, deltas)
			if !ok {
				if now.Sub(st.lastSplit) >= cfg.Cooldown {
					n.log.Info("load-based split: the load sits on one shard; not splitting", "datastore", d.spec.Name, "partition", r.spec.ID, "rate", rate)
					st.lastSplit = now // say it once per cooldown
				}
				continue
			}
			if n.startAutoSplit(d.spec.Name, r.spec.ID, at, busy, "load-based split", "rate", int(rate), "threshold", threshold) {
				st.lastSplit, st.samples = now, nil
			}
		}
	}
	for r := range states {
		if !live[r] {
			delete(states, r)
		}
	}
}

// autoLeaderMoveTimeout bounds the move of an automatic split's new leader (startAutoSplit):
// a move that has not taken by then is left to the rebalancer.
const autoLeaderMoveTimeout = 15 * time.Second

// startAutoSplit starts a split of partition pid of ds at shard at, by the policy named what
// (logged with attrs), unless another automatic split runs on this node (busy holds one token);
// it reports whether it started. The split runs on its own goroutine, and then the new
// partition's leader moves to another voter.
func (n *Node) startAutoSplit(ds string, pid, at int, busy chan struct{}, what string, attrs ...any) bool {
	select {
	case busy <- struct{}{}:
	default:
		return false
	}
	n.log.Info(what, append([]any{"datastore", ds, "partition", pid, "at_shard", at}, attrs...)...)
	go func() {
		defer func() { <-busy }()
		ctx, cancel := n.untilClose(context.Background())
		defer cancel()
		ctx, cancel2 := context.WithTimeout(ctx, time.Minute)
		defer cancel2()
		res, err := n.splitPartition(ctx, ds, pid, at, true)
		if err != nil {
			n.log.Warn(what+" failed", "datastore", ds, "partition", pid, "at_shard", at, "error", err)
			return
		}
		// The halves' leaders are both here: the right half's goes to another voter (raft's
		// choice: the most up to date), so that the work is divided between two nodes at
		// once; admin rebalance evens out the rest. The move holds this node's one automatic
		// split or merge for at most autoLeaderMoveTimeout.
		if n.keepsLeaderZone(ctx, ds, res.Right.ID) {
			return
		}
		mctx, cancel3 := context.WithTimeout(ctx, autoLeaderMoveTimeout)
		defer cancel3()
		if to, err := n.TransferLeadership(mctx, ds, res.Right.ID, ""); err != nil {
			n.log.Warn(what+": moving the new partition's leader", "datastore", ds, "partition", res.Right.ID, "error", err)
		} else {
			n.log.Info(what+": the new partition's leader moved", "datastore", ds, "partition", res.Right.ID, "to", to)
		}
	}()
	return true
}

// sizeSplitPoint reads the per-shard sizes of partition r, which this node leads, and returns
// the shard that best halves them and their total, when the total is above limit bytes and
// the size divides (bestSplit's rules); ok is false otherwise, or when the store cannot tell.
func (n *Node) sizeSplitPoint(r *route, limit int64) (at int, total int64, ok bool) {
	p := r.replica()
	if p == nil || !n.cfg.Store.SupportsSplit() {
		return 0, 0, false
	}
	rng := p.Shards()
	if rng.Len() < 2 || rng != r.spec.Shards() {
		return 0, 0, false // one shard, or a split or merge under way
	}
	ctx, cancel := n.untilClose(context.Background())
	defer cancel()
	sizes, err := p.Store().ShardSizes(ctx, rng)
	if err != nil {
		n.log.Debug("size-based split: reading the shards' sizes", "datastore", r.ds.Name, "partition", r.spec.ID, "error", err)
		return 0, 0, false
	}
	for _, sz := range sizes {
		total += sz
	}
	if total <= limit {
		return 0, total, false
	}
	at, ok = bestSplit(rng, sizes)
	if !ok {
		n.log.Debug("size-based split: the size sits on one shard; not splitting", "datastore", r.ds.Name, "partition", r.spec.ID, "bytes", total)
	}
	return at, total, ok
}

// bestSplit returns the shard at which to split range r whose shards served deltas (by shard
// from r.First) so that the two halves' loads are closest, and false when no split divides the
// load: a range of one shard, or one whose busiest shard served at least 90% of it.
func bestSplit(r cells.ShardRange, deltas []int64) (int, bool) {
	if r.Len() < 2 {
		return 0, false
	}
	var total, busiest int64
	for _, d := range deltas {
		total += d
		busiest = max(busiest, d)
	}
	if total <= 0 || busiest*10 >= total*9 {
		return 0, false
	}
	best, bestDiff := 0, int64(-1)
	var prefix int64
	for i := 0; i < len(deltas)-1; i++ {
		prefix += deltas[i]
		diff := prefix*2 - total
		if diff < 0 {
			diff = -diff
		}
		if bestDiff < 0 || diff < bestDiff {
			best, bestDiff = r.First+i+1, diff
		}
	}
	return best, true
}

// loadSplitPoint returns the shard that best halves the load partition r served since its
// replica here opened, when this node leads it and the load divides; else the middle of r.
func loadSplitPoint(r *route) int {
	rng := r.spec.Shards()
	mid := rng.First + rng.Len()/2
	p := r.replica()
	if p == nil {
		return mid
	}
	lp, ok := p.(interface {
		ShardLoad() (int, []int64)
	})
	if !ok {
		return mid
	}
	first, counts := lp.ShardLoad()
	deltas := make([]int64, rng.Len())
	for s := rng.First; s <= rng.Last; s++ {
		if i := s - first; i >= 0 && i < len(counts) {
			deltas[s-rng.First] = counts[i]
		}
	}
	if at, ok := bestSplit(rng, deltas); ok {
		return at
	}
	return mid
}
