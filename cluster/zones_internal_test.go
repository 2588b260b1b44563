package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sixInThreeZones are nodes n1..n6, two per zone: n1 and n2 in a, n3 and n4 in b, n5 and n6
// in c.
var sixInThreeZones = map[string]string{"n1": "a", "n2": "a", "n3": "b", "n4": "b", "n5": "c", "n6": "c"}

// onZoneA returns six partitions of three voters on n1, n2 and n3: two in zone a, a majority.
func onZoneA() []placement {
	var ps []placement
	for p := range 6 {
		ps = append(ps, placement{ds: "trips", pid: p, voters: []string{"n1", "n2", "n3"}, leader: fmt.Sprintf("n%d", p%3+1)})
	}
	return ps
}

// maxInZone returns the most voters of p in one zone.
func maxInZone(p placement, zones map[string]string) int {
	most := 0
	for _, c := range zoneCounts(p.voters, zones, "") {
		most = max(most, c)
	}
	return most
}

// TestPlanRebalanceZones: six nodes in three zones, every partition starting with two voters
// in zone a. The plan leaves every partition one voter per zone, the nodes evenly loaded, and
// (with a leader zone) every leader in that zone. The planner without zones, on the same
// input, leaves some partition with a majority in zone a: what the zone rule changes.
func TestPlanRebalanceZones(t *testing.T) {
	t.Parallel()
	six := []string{"n1", "n2", "n3", "n4", "n5", "n6"}

	blind := onZoneA()
	planRebalance(blind, six, nil, nil, nil)
	assert.True(t, slices.ContainsFunc(blind, func(p placement) bool { return maxInZone(p, sixInThreeZones) > 1 }),
		"the planner without zones leaves a partition with two voters in one zone: %+v", blind)

	for _, lz := range []string{"", "b"} {
		t.Run("leader zone "+lz, func(t *testing.T) {
			ps := onZoneA()
			moves, _ := planRebalance(ps, six, nil, sixInThreeZones, map[string]string{"trips": lz})
			assert.NotEmpty(t, moves)
			load := map[string]int{}
			for _, p := range ps {
				assert.Equal(t, 1, maxInZone(p, sixInThreeZones), "partition %d: voters %v, want one per zone", p.pid, p.voters)
				for _, v := range p.voters {
					load[v]++
				}
				require.Contains(t, p.voters, p.leader, "partition %d: leader among its voters", p.pid)
				if lz != "" {
					assert.Equal(t, lz, sixInThreeZones[p.leader], "partition %d: leader %s, want one in zone %s", p.pid, p.leader, lz)
				}
			}
			assert.Equal(t, map[string]int{"n1": 3, "n2": 3, "n3": 3, "n4": 3, "n5": 3, "n6": 3}, load, "voters per node")
			assert.Empty(t, zoneWarnings(ps, six, sixInThreeZones, map[string]string{"trips": lz}))
		})
	}
}

// TestPlanRebalanceZonesDrain: draining n1 (zone a) moves its voters to n2, the other node of
// zone a, since every other zone already holds a voter of each partition; draining both
// nodes of zone a leaves majorities that the warnings name.
func TestPlanRebalanceZonesDrain(t *testing.T) {
	t.Parallel()
	six := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	ps := []placement{
		{ds: "trips", pid: 0, voters: []string{"n1", "n3", "n5"}, leader: "n1"},
		{ds: "trips", pid: 1, voters: []string{"n1", "n4", "n6"}, leader: "n4"},
	}
	moves, _ := planRebalance(ps, six, []string{"n1"}, sixInThreeZones, nil)
	require.Len(t, moves, 2)
	for _, m := range moves {
		assert.Equal(t, "n2", m.To, "%+v: the voter stays in zone a", m)
	}
	assert.Empty(t, zoneWarnings(ps, []string{"n2", "n3", "n4", "n5", "n6"}, sixInThreeZones, nil))

	ps = []placement{{ds: "trips", pid: 0, voters: []string{"n1", "n3", "n5"}, leader: "n1"}}
	planRebalance(ps, six, []string{"n1", "n2"}, sixInThreeZones, nil)
	assert.Equal(t, 2, maxInZone(ps[0], sixInThreeZones), "voters %v: zone a's is gone, one zone takes two", ps[0].voters)
	w := zoneWarnings(ps, []string{"n3", "n4", "n5", "n6"}, sixInThreeZones, nil)
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "trips/0: zone")
	assert.Contains(t, w[0], "holds 2 of 3 voters, a majority: the nodes span 2 zones (b, c)")
}

// TestZoneWarnings: no zones, no warning; a leader zone without a voter in it is named.
func TestZoneWarnings(t *testing.T) {
	t.Parallel()
	ps := []placement{{ds: "trips", pid: 3, voters: []string{"n1", "n2", "n3"}}}
	assert.Empty(t, zoneWarnings(ps, []string{"n1", "n2", "n3"}, map[string]string{}, nil), "no zones in use")
	w := zoneWarnings(ps, []string{"n1", "n2", "n3"}, sixInThreeZones, map[string]string{"trips": "c"})
	require.Len(t, w, 2, "%q", w)
	assert.Equal(t, "trips/3: zone a holds 2 of 3 voters, a majority: the nodes span 2 zones (a, b); losing that zone stops the partition", w[0])
	assert.Equal(t, "trips/3: no voter is in the leader zone c (voters in a, b)", w[1])
}

// TestPickZoned: a datastore's partitions of three replicas on six nodes in three zones take
// one node per zone each and spread over every node; without zones, partition i takes the
// i-th node and the two after it, as before zones existed.
func TestPickZoned(t *testing.T) {
	t.Parallel()
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	order := interleaveZones(nodes, sixInThreeZones)
	assert.Equal(t, []string{"n1", "n3", "n5", "n2", "n4", "n6"}, order)
	load := map[string]int{}
	for i := range 6 {
		got := pickZoned(order, sixInThreeZones, i, 3)
		require.Len(t, got, 3)
		assert.Equal(t, 1, maxInZone(placement{voters: got}, sixInThreeZones), "partition %d: %v", i, got)
		for _, nd := range got {
			load[nd]++
		}
	}
	assert.Equal(t, map[string]int{"n1": 3, "n2": 3, "n3": 3, "n4": 3, "n5": 3, "n6": 3}, load)

	none := map[string]string{}
	assert.Equal(t, []string{"n3", "n4", "n5"}, pickZoned(interleaveZones(nodes, none), none, 2, 3))
	// Two zones for three replicas: two in one, one in the other, never three in one.
	two := map[string]string{"n1": "a", "n2": "a", "n3": "a", "n4": "b"}
	got := pickZoned(interleaveZones([]string{"n1", "n2", "n3", "n4"}, two), two, 0, 3)
	assert.Equal(t, 2, maxInZone(placement{voters: got}, two), "%v", got)
}

// TestCatalogZoneWarning: the catalog's voters with two in one of three zones are warned of; one
// per zone, or nodes of a single zone, are not.
func TestCatalogZoneWarning(t *testing.T) {
	t.Parallel()
	six := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	w := catalogZoneWarning([]string{"n1", "n2", "n4"}, six, map[string]string{"n1": "a", "n2": "a", "n3": "b", "n4": "b", "n5": "c", "n6": "c"})
	assert.Contains(t, w, "the catalog's voters n1, n2, n4: zone a holds 2 of 3, a majority")
	assert.Empty(t, catalogZoneWarning([]string{"n1", "n3", "n5"}, six, sixInThreeZones))
	assert.Empty(t, catalogZoneWarning([]string{"n1", "n2", "n3"}, six, map[string]string{}), "no zones")
}
