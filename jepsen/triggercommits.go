package jepsen

import (
	"fmt"
	"sort"
)

// The lost-commit check of CheckTriggers. A worker records each offset commit the group's
// coordinator accepted (triggers.Config.OnCommit, DeliveryLog.Commit) with the time the
// acceptance reached it. The coordinator fences commits by the lease epoch, so an accepted
// commit of offset X in a shard was applied while the committing lease was the shard's
// current one, and every later lease of the shard (a new epoch, granted after) starts after
// X: "offsets never move backward" (docs/design.md). A period that starts at an added_id at or
// below X after the acceptance was seen therefore means the coordinator's state lost the
// commit, as a command applied to a partition's stale copy of the group would (a node routing
// by an older catalog after a split or merge).

// periodStart is the first delivery of one ownership period (incarnation, shard, lease).
type periodStart struct {
	inc string
	d   Delivery
}

// triggerProblem is the TriggerProblem of delivery d of incarnation inc.
func triggerProblem(inc string, d Delivery, detail string, args ...any) TriggerProblem {
	return TriggerProblem{Incarnation: inc, Shard: d.Shard, AddedID: d.AddedID, RowKey: d.RowKey, Column: d.Column,
		RefKey: d.RefKey, Detail: fmt.Sprintf(detail, args...)}
}

// splitCommits returns logs without their commit lines (Delivery.Committed), and those lines
// by shard in time order, each with Worker set to the incarnation that recorded it.
func splitCommits(logs map[string][]Delivery) (map[string][]Delivery, map[int][]Delivery) {
	out := make(map[string][]Delivery, len(logs))
	commits := map[int][]Delivery{}
	for inc, ds := range logs {
		kept := make([]Delivery, 0, len(ds))
		for _, d := range ds {
			if d.Committed {
				d.Worker = inc
				commits[d.Shard] = append(commits[d.Shard], d)
				continue
			}
			kept = append(kept, d)
		}
		out[inc] = kept
	}
	for _, cs := range commits {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Time < cs[j].Time })
	}
	return out, commits
}

// lostCommits returns a problem for each period start that begins at or below the highest
// offset of its shard whose commit was accepted strictly before the start's time.
func lostCommits(starts []periodStart, commits map[int][]Delivery) []TriggerProblem {
	// best[s][i]: the index in commits[s] of the highest offset among its first i+1 commits.
	best := make(map[int][]int, len(commits))
	for s, cs := range commits {
		b := make([]int, len(cs))
		for i := range cs {
			if b[i] = i; i > 0 && cs[b[i-1]].AddedID >= cs[i].AddedID {
				b[i] = b[i-1]
			}
		}
		best[s] = b
	}
	var out []TriggerProblem
	for _, st := range starts {
		cs := commits[st.d.Shard]
		n := sort.Search(len(cs), func(i int) bool { return cs[i].Time >= st.d.Time }) // accepted before the start
		if n == 0 {
			continue
		}
		c := cs[best[st.d.Shard][n-1]]
		if st.d.AddedID <= c.AddedID {
			out = append(out, triggerProblem(st.inc, st.d, "lease %d of shard %d starts at added_id %d, at or below offset %d, whose commit %s had accepted %.3f s before",
				st.d.Lease, st.d.Shard, st.d.AddedID, c.AddedID, c.Worker, float64(st.d.Time-c.Time)/1e9))
		}
	}
	return out
}
