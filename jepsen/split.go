package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// Split splits a random partition of a random datastore at a random shard boundary inside
// it, through the nodes' admin API (POST /v1/admin/partitions/{ds}/{p}/split) while the
// traffic runs: the left half keeps the partition's id and the shards below the boundary, the
// right half is a new partition on the same replicas (raft mode, every store) or on the same
// storage cluster (async mode: a split in place, without a move). One fault in mergeShare
// merges two neighbouring partitions instead, when there are any (merge.go). An instant fault;
// the checks learn the partitions from the catalog (Cluster.RefreshPlacement).
const Split = "split"

// CapacityNemeses lists the nemeses that change how a datastore is partitioned. They are not
// in AllNemeses: name them (or "capacity" on the command line).
var CapacityNemeses = []string{Split}

// MaxSplitPartitions is the number of partitions at which the split nemesis stops splitting a
// datastore.
const MaxSplitPartitions = 16

// IsCapacityNemesis reports whether kind changes how datastores are partitioned
// (CapacityNemeses).
func IsCapacityNemesis(kind string) bool { return slices.Contains(CapacityNemeses, kind) }

// NoSplitWorkload is a Workload some of whose datastores must not be split: the bank's
// transfers are transactions across its accounts, which must stay in one partition (a
// transaction across partitions is refused by design). The split nemesis leaves them alone.
type NoSplitWorkload interface {
	Workload
	// NoSplitDatastores names the datastores never to split.
	NoSplitDatastores() []string
}

// errNoSplit: no raft datastore the split nemesis may split has a partition of 2 shards or
// more left (or each has MaxSplitPartitions partitions).
var errNoSplit = errors.New("jepsen: no partition left to split")

// splitState is the state of the split nemesis.
type splitState struct {
	// rng draws the split nemesis's choices, apart from the Nemesis's rng (see membership.rng).
	rng *rand.Rand
	// exclude names the datastores never to split (NoSplitWorkload).
	exclude []string
}

func newSplitState(seed uint64) *splitState {
	return &splitState{rng: rand.New(rand.NewPCG(seed^0x73706c6974, seed))}
}

// SetNoSplit names the datastores the split nemesis must leave alone (NoSplitWorkload). Call
// it before Run.
func (n *Nemesis) SetNoSplit(datastores ...string) {
	n.split.exclude = append(n.split.exclude, datastores...)
}

// splitDatastores names the datastores the split nemesis changes: the topology's raft
// datastores in raft mode, its async ones in async mode (the run's datastores are all of one
// mode).
func (n *Nemesis) splitDatastores() []string {
	if n.storage != nil {
		return asyncDatastores(n.c.Topology())
	}
	return n.raftDatastores()
}

// splitCandidates returns, by datastore, the partitions the split nemesis may split: those of 2
// shards or more, of the datastores of catalog named in names (splitDatastores) and not in
// exclude, that have fewer than maxParts partitions. Datastores without one are left out.
// catalog is not modified.
func splitCandidates(catalog []wire.DatastoreInfo, names, exclude []string, maxParts int) map[string][]wire.CatalogPartition {
	out := map[string][]wire.CatalogPartition{}
	for _, d := range catalog {
		if !slices.Contains(names, d.Name) || slices.Contains(exclude, d.Name) || len(d.Partitions) >= maxParts {
			continue
		}
		for _, p := range d.Partitions {
			if p.LastShard > p.FirstShard {
				out[d.Name] = append(out[d.Name], p)
			}
		}
	}
	return out
}

// pickSplit draws a datastore of cands (uniformly, in name order), one of its partitions
// (uniformly) and the shard to split it at (splitAt). ok is false when cands is empty.
func pickSplit(rng *rand.Rand, cands map[string][]wire.CatalogPartition) (ds string, p wire.CatalogPartition, at int, ok bool) {
	var names []string
	for name, ps := range cands {
		if len(ps) > 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", wire.CatalogPartition{}, 0, false
	}
	slices.Sort(names)
	ds = names[rng.IntN(len(names))]
	ps := slices.Clone(cands[ds])
	slices.SortFunc(ps, func(a, b wire.CatalogPartition) int { return a.FirstShard - b.FirstShard })
	p = ps[rng.IntN(len(ps))]
	return ds, p, splitAt(rng, p), true
}

// splitAt draws the first shard of the right half of a split of p, uniformly in (FirstShard,
// LastShard], so that each half keeps at least one shard. p must hold 2 shards or more.
func splitAt(rng *rand.Rand, p wire.CatalogPartition) int {
	return p.FirstShard + 1 + rng.IntN(p.LastShard-p.FirstShard)
}

// startSplit splits one partition (see Split) and returns the function recording the fault's
// end, held 1 ms: nothing is undone. The catalog is read from a live node (the least cut off
// first) and the split sent there, at most 3 attempts of 20 s each, retried only when it
// certainly did not start (package client's admin changes), within 45 s even when ctx ends
// meanwhile (the faults' end does not cut a split short: it would leave its outcome unknown).
// When the outcome is unknown (a 504 or a timeout: the cluster completes a split the catalog
// decided), the catalog is read again for up to 10 s (awaitSplit), and a split it shows is
// recorded as a fault like an answered one. A split that failed, or that the catalog does not
// show, is an error: the fault did not start (the next pick reads the catalog again).
func (n *Nemesis) startSplit(ctx context.Context) (func(), time.Duration, error) {
	cl, ids, err := n.adminClient(20*time.Second, 3)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", Split, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cat, err := cl.Datastores(rctx)
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: read the catalog: %w", Split, err)
	}
	if n.split.rng.IntN(mergeShare) == 0 {
		if end, ok, err := n.startMerge(ctx, cl, ids, cat.Datastores); ok {
			return end, time.Millisecond, err
		}
	}
	ds, p, at, ok := pickSplit(n.split.rng, splitCandidates(cat.Datastores, n.splitDatastores(), n.split.exclude, MaxSplitPartitions))
	if !ok {
		return nil, 0, fmt.Errorf("%s: %w (at most %d partitions per datastore; not split: %v)", Split, errNoSplit, MaxSplitPartitions, n.split.exclude)
	}
	start := n.h.Now()
	var via string
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 45*time.Second)
	res, err := cl.SplitPartition(sctx, ds, p.ID, at, client.AdminEndpoint(&via))
	cancel()
	note := ""
	if errors.Is(err, client.ErrIndeterminate) {
		if done, ok := n.awaitSplit(ctx, cl, ds, p.ID, at); ok {
			n.log.Info("nemesis: split answered indeterminate, and the catalog shows it done", "partition", partKey(ds, p.ID), "at_shard", at, "error", err)
			res, err = done, nil
			res.Ready, res.TookMillis = true, time.Duration(n.h.Now()-start).Milliseconds()
			note = " (answer lost: indeterminate; the catalog shows it done; the time is until then)"
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %s/%d [%d..%d] at %d via %s: %w", Split, ds, p.ID, p.FirstShard, p.LastShard, at, ids[via], err)
	}
	detail := fmt.Sprintf("%s/%d at %d -> %d [%d..%d], %d [%d..%d] in %d ms", ds, p.ID, at,
		res.Left.ID, res.Left.FirstShard, res.Left.LastShard, res.Right.ID, res.Right.FirstShard, res.Right.LastShard, res.TookMillis)
	if res.Left.Cluster != "" {
		detail += " on storage cluster " + res.Left.Cluster
	}
	if !res.Ready {
		detail += " (the right half had no leader yet)"
	}
	detail += fmt.Sprintf(", via %s, catalog generation %d%s", ids[via], res.Generation, note)
	end := n.beginAt(Fault{Kind: Split, Nodes: sorted(res.Left.Replicas), Detail: detail}, start)
	return end, time.Millisecond, nil
}

// awaitSplit reads the catalog (cl, 5 s per read) once a second for up to 10 s, even when ctx
// ends meanwhile, until it shows the split of ds/pid at shard at (splitDone), and returns it as
// a SplitResponse (Generation: the catalog's when it was seen; Ready and TookMillis unset).
func (n *Nemesis) awaitSplit(ctx context.Context, cl *client.Client, ds string, pid, at int) (wire.SplitResponse, bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		cat, err := cl.Datastores(rctx)
		cancel()
		if err == nil {
			if left, right, ok := splitDone(cat.Datastores, ds, pid, at); ok {
				return wire.SplitResponse{Generation: cat.Generation, Left: left, Right: right}, true
			}
		}
		if time.Now().Add(time.Second).After(deadline) {
			return wire.SplitResponse{}, false
		}
		time.Sleep(time.Second)
	}
}

// splitDone reports whether catalog shows partition pid of datastore ds split at shard at: pid
// ends at at-1, and a partition split from pid (its Parent) starts at at. It returns both
// halves.
func splitDone(catalog []wire.DatastoreInfo, ds string, pid, at int) (left, right wire.CatalogPartition, ok bool) {
	i := slices.IndexFunc(catalog, func(d wire.DatastoreInfo) bool { return d.Name == ds })
	if i < 0 {
		return left, right, false
	}
	var okL, okR bool
	for _, p := range catalog[i].Partitions {
		switch {
		case p.ID == pid && p.LastShard == at-1:
			left, okL = p, true
		case p.ID != pid && p.Parent == pid && p.FirstShard == at:
			right, okR = p, true
		}
	}
	return left, right, okL && okR
}
