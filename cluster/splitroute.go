package cluster

import (
	"github.com/schemaless-db/schemaless/topology"
)

// Writes during a split. The catalog gives a split's shards to the new partition before the
// parent's replicas apply the split, and the new partition's group elects its first leader
// only after they have: routed by the catalog alone, a write for a moving shard would wait
// from the catalog's decision to that election. Instead, until the new partition is known to
// take writes (route.settled), a node sends such a write to the parent, whose state machine
// decides: before the split entry it applies the write, which the split then copies to the new
// partition with the rest; after, it refuses the whole share as out of range, applying
// nothing, and the node sends it to the new partition at once, marking that partition
// settled. So a write to a moving shard waits only from the split's application on the
// parent's leader to the new group's first leader (docs/operations.md, "Splitting a
// partition"). The receiving node checks such a write against the catalog as the parent's or
// one of its split children's (checkWriteShard).

// splitFallback returns the route to send a write for shard, a shard of partition r, to: r's
// parent while r is a split's new partition not yet known here to take writes (see above), else
// r. fellBack reports the parent. A route whose local replica knows a leader becomes settled;
// so does one whose parent is gone from the catalog (merged away). When this node hosts a
// replica of the parent that no longer holds shard (it applied the split), r is returned.
func (n *Node) splitFallback(d *datastore, r *route, shard int) (to *route, fellBack bool) {
	if r == nil || r.spec.Parent == nil || r.settled.Load() {
		return r, false
	}
	if leaderKnownHere(r) {
		r.settled.Store(true)
		return r, false
	}
	pr := d.route(*r.spec.Parent)
	if pr == nil {
		r.settled.Store(true)
		return r, false
	}
	if p := pr.replica(); p != nil && !p.Shards().Contains(shard) {
		return r, false
	}
	return pr, true
}

// leaderKnownHere reports whether this node knows a leader of r: its local replica's, or, with
// none here, a leader named by an earlier answer (the route's hint).
func leaderKnownHere(r *route) bool {
	if r.local() != nil {
		return localLeaderKnown(r)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hint != ""
}

// settleSplitChildren marks settled every split child of partition parent in d that holds a
// shard of shards: the parent refused a share holding them as out of range, so it applied the
// split, and their writes go to them from now on.
func settleSplitChildren(d *datastore, parent int, shards []int) {
	for _, s := range shards {
		if r := d.routeOf(s); r != nil && r.spec.Parent != nil && *r.spec.Parent == parent {
			r.settled.Store(true)
		}
	}
}

// checkWriteShard is checkInPartition for the shards of a write sent to partition p: it also
// accepts a shard of a split child of p (a partition whose catalog parent is p), which a node
// sends to p until the child takes writes (splitFallback); p's state machine refuses it as out
// of range once it has applied the split.
func checkWriteShard(ds *topology.DatastoreSpec, p *topology.PartitionSpec, field string, shard int) error {
	err := checkInPartition(p, field, shard)
	if err == nil {
		return nil
	}
	for i := range ds.Partitions {
		q := &ds.Partitions[i]
		if q.Parent != nil && *q.Parent == p.ID && q.Shards().Contains(shard) {
			return nil
		}
	}
	return err
}
