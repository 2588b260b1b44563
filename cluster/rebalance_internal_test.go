package cluster

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// TestPlanRebalance checks the planner on the growth and drain shapes: the plan evens replicas
// and leaders out, never puts two replicas of a partition on one node, and empties excluded
// nodes.
func TestPlanRebalance(t *testing.T) {
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
			moves, _ := planRebalance(tc.ps, tc.nodes, tc.exclude)
			if len(moves) != tc.moves {
				t.Errorf("got %d moves %v, want %d", len(moves), moves, tc.moves)
			}
			got, leads := map[string]int{}, map[string]int{}
			for _, p := range tc.ps {
				if len(slices.Compact(slices.Sorted(slices.Values(p.voters)))) != len(p.voters) {
					t.Errorf("partition %d has two replicas on one node: %v", p.pid, p.voters)
				}
				for _, v := range p.voters {
					got[v]++
				}
				if p.leader == "" || !slices.Contains(p.voters, p.leader) {
					t.Errorf("partition %d: leader %q not among its voters %v", p.pid, p.leader, p.voters)
				}
				leads[p.leader]++
			}
			if !maps.Equal(got, tc.perNode) {
				t.Errorf("replicas per node: got %v, want %v", got, tc.perNode)
			}
			for nd, l := range leads {
				if l > tc.maxLeads {
					t.Errorf("%s leads %d partitions, want at most %d (%v)", nd, l, tc.maxLeads, leads)
				}
			}
			if tc.emptyNode != "" && (got[tc.emptyNode] != 0 || leads[tc.emptyNode] != 0) {
				t.Errorf("%s still holds %d replicas and %d leaders", tc.emptyNode, got[tc.emptyNode], leads[tc.emptyNode])
			}
		})
	}
}
