package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPlanRebalance checks the planner on the growth and drain shapes: the plan evens replicas
// and leaders out, never puts two replicas of a partition on one node, and empties excluded
// nodes.
func TestPlanRebalance(t *testing.T) {
	t.Parallel()
	grown := func() []placement {
		var ps []placement
		for p := range 6 {
			ps = append(ps, placement{ds: "trips", pid: p, voters: []string{"n1", "n2", "n3"}, leader: fmt.Sprintf("n%d", p%3+1)})
		}
		return ps
	}
	six := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	cases := []struct {
		name      string
		ps        []placement
		nodes     []string
		exclude   []string
		moves     int
		perNode   map[string]int
		maxLeads  int
		emptyNode string
	}{
		{"3 to 6 nodes", grown(), six, nil, 9, map[string]int{"n1": 3, "n2": 3, "n3": 3, "n4": 3, "n5": 3, "n6": 3}, 1, ""},
		{"balanced", grown(), []string{"n1", "n2", "n3"}, nil, 0, map[string]int{"n1": 6, "n2": 6, "n3": 6}, 2, ""},
		{"drain n3 onto n4", grown(), []string{"n1", "n2", "n3", "n4"}, []string{"n3"}, 6, map[string]int{"n1": 6, "n2": 6, "n4": 6}, 3, "n3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			moves, _ := planRebalance(tc.ps, tc.nodes, tc.exclude, nil, nil)
			assert.Len(t, moves, tc.moves, "moves")
			got, leads := map[string]int{}, map[string]int{}
			for _, p := range tc.ps {
				assert.Len(t, slices.Compact(slices.Sorted(slices.Values(p.voters))), len(p.voters), "partition %d: distinct nodes of its voters %v, want no two replicas on one node", p.pid, p.voters)
				for _, v := range p.voters {
					got[v]++
				}
				assert.NotEmpty(t, p.leader, "partition %d: leader", p.pid)
				assert.Contains(t, p.voters, p.leader, "partition %d: leader among its voters", p.pid)
				leads[p.leader]++
			}
			assert.Equal(t, tc.perNode, got, "replicas per node")
			for nd, l := range leads {
				assert.LessOrEqual(t, l, tc.maxLeads, "%s: partitions led (%v)", nd, leads)
			}
			if tc.emptyNode != "" {
				assert.Zero(t, got[tc.emptyNode], "%s: replicas it still holds", tc.emptyNode)
				assert.Zero(t, leads[tc.emptyNode], "%s: partitions it still leads", tc.emptyNode)
			}
		})
	}
}
