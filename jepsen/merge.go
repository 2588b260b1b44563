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

// The split nemesis also merges: one fault in mergeShare, when a datastore it may change has two
// neighbouring partitions on the same replicas, merges them (POST
// /v1/admin/partitions/{ds}/merge) while the traffic runs, so that a run's partitions both grow
// and shrink in number.

// Merge is the kind of the split nemesis's merge faults (in a run's summary and plots, beside
// Split): not a nemesis of its own.
const Merge = "merge"

// mergeShare is the share of the split nemesis's faults that merge (when a merge is possible).
const mergeShare = 3

// mergeCandidates returns, by datastore, the pairs of neighbouring partitions on the same
// replicas (raft) or the same storage cluster (async: a merge without a move) that the split
// nemesis may merge (the datastores of catalog named in names and not in exclude), each pair
// as [left, right].
func mergeCandidates(catalog []wire.DatastoreInfo, names, exclude []string) map[string][][2]wire.CatalogPartition {
	out := map[string][][2]wire.CatalogPartition{}
	for _, d := range catalog {
		if !slices.Contains(names, d.Name) || slices.Contains(exclude, d.Name) {
			continue
		}
		ps := slices.Clone(d.Partitions)
		slices.SortFunc(ps, func(a, b wire.CatalogPartition) int { return a.FirstShard - b.FirstShard })
		for i := 1; i < len(ps); i++ {
			l, r := ps[i-1], ps[i]
			if r.FirstShard == l.LastShard+1 && sameNodes(l.Replicas, r.Replicas) && l.Cluster == r.Cluster {
				out[d.Name] = append(out[d.Name], [2]wire.CatalogPartition{l, r})
			}
		}
	}
	return out
}

func sameNodes(a, b []string) bool {
	return slices.Equal(sorted(a), sorted(b))
}

// pickMerge draws a datastore of cands (uniformly, in name order) and one of its pairs. ok is
// false when cands is empty.
func pickMerge(rng *rand.Rand, cands map[string][][2]wire.CatalogPartition) (ds string, pair [2]wire.CatalogPartition, ok bool) {
	var names []string
	for name, ps := range cands {
		if len(ps) > 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", pair, false
	}
	slices.Sort(names)
	ds = names[rng.IntN(len(names))]
	return ds, cands[ds][rng.IntN(len(cands[ds]))], true
}

// startMerge merges one pair of neighbouring partitions (see mergeCandidates) drawn from cat,
// through cl, as startSplit splits: one attempt of up to 45 s even when ctx ends meanwhile, and,
// when the answer is lost, the catalog read again for up to 10 s to learn whether it happened.
// It returns the fault's end (held 1 ms), or ok false when no pair can merge.
func (n *Nemesis) startMerge(ctx context.Context, cl *client.Client, ids map[string]string, cat []wire.DatastoreInfo) (end func(), ok bool, err error) {
	ds, pair, ok := pickMerge(n.split.rng, mergeCandidates(cat, n.splitDatastores(), n.split.exclude))
	if !ok {
		return nil, false, nil
	}
	left, right := pair[0], pair[1]
	start := n.h.Now()
	var via string
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 45*time.Second)
	res, err := cl.MergePartitions(mctx, ds, left.ID, right.ID, client.AdminEndpoint(&via))
	cancel()
	note := ""
	if errors.Is(err, client.ErrIndeterminate) {
		if merged, done := n.awaitMerge(ctx, cl, ds, left.ID, right.ID, right.LastShard); done {
			res, err = wire.MergeResponse{Merged: merged, TookMillis: time.Duration(n.h.Now() - start).Milliseconds()}, nil
			note = " (answer lost: indeterminate; the catalog shows it done; the time is until then)"
		}
	}
	if err != nil {
		return nil, true, fmt.Errorf("%s: merge %s/%d [%d..%d] with %d [%d..%d] via %s: %w", Split, ds, left.ID, left.FirstShard, left.LastShard,
			right.ID, right.FirstShard, right.LastShard, ids[via], err)
	}
	detail := fmt.Sprintf("merge %s/%d [%d..%d] + %d [%d..%d] -> %d [%d..%d] in %d ms (writes to the right one paused %d ms), via %s, catalog generation %d%s",
		ds, left.ID, left.FirstShard, left.LastShard, right.ID, right.FirstShard, right.LastShard, res.Merged.ID, res.Merged.FirstShard, res.Merged.LastShard,
		res.TookMillis, res.PauseMillis, ids[via], res.Generation, note)
	return n.beginAt(Fault{Kind: Merge, Nodes: sorted(left.Replicas), Detail: detail}, start), true, nil
}

// awaitMerge reads the catalog once a second for up to 10 s until partition left of ds ends at
// last and partition right is gone, and returns the merged partition.
func (n *Nemesis) awaitMerge(ctx context.Context, cl *client.Client, ds string, left, right, last int) (wire.CatalogPartition, bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		cat, err := cl.Datastores(rctx)
		cancel()
		if err == nil {
			for _, d := range cat.Datastores {
				if d.Name != ds {
					continue
				}
				var merged wire.CatalogPartition
				found, gone := false, true
				for _, p := range d.Partitions {
					found = found || p.ID == left && p.LastShard == last
					gone = gone && p.ID != right
					if p.ID == left {
						merged = p
					}
				}
				if found && gone {
					return merged, true
				}
			}
		}
		if time.Now().Add(time.Second).After(deadline) {
			return wire.CatalogPartition{}, false
		}
		time.Sleep(time.Second)
	}
}
