package wire_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schemaless-db/schemaless/wire"
)

func TestNodeLoads(t *testing.T) {
	t.Parallel()
	ms := []wire.Member{
		{ID: "n2", State: "alive", Replicas: []wire.MemberReplica{{Partition: 0, Leader: true}}},
		{ID: "n1", State: "alive", Replicas: []wire.MemberReplica{{Partition: 0}, {Partition: 1, Leader: true}}},
	}
	cfg := func(p int, leader string, nodes ...string) wire.PartitionReport {
		r := wire.PartitionReport{PartitionConfig: wire.PartitionConfig{Datastore: "trips", Partition: p, Leader: leader}}
		for _, n := range nodes {
			r.Servers = append(r.Servers, wire.RaftServer{Node: n, Suffrage: wire.SuffrageVoter})
		}
		return r
	}
	reports := []wire.PartitionReport{cfg(0, "n1", "n1", "n2", "n3"), cfg(1, "n3", "n1", "n3")}
	counts := func(ls []wire.NodeLoad) map[string][2]int {
		out := map[string][2]int{}
		for _, l := range ls {
			out[l.ID] = [2]int{l.ReplicaCount, l.LeaderCount}
		}
		return out
	}

	ls, fromRaft := wire.NodeLoads(ms, reports, true)
	assert.True(t, fromRaft)
	assert.Equal(t, map[string][2]int{"n1": {2, 1}, "n2": {1, 0}, "n3": {2, 1}}, counts(ls), "from the configurations")
	if assert.Len(t, ls, 3) {
		assert.Equal(t, []string{"n1", "n2", "n3"}, []string{ls[0].ID, ls[1].ID, ls[2].ID}, "sorted by id")
		assert.Equal(t, "-", ls[2].State, "n3 is only in a configuration")
		assert.Equal(t, "alive", ls[0].State, "members keep their state")
	}

	unknown := append(reports, wire.PartitionReport{PartitionConfig: wire.PartitionConfig{Partition: 2}, Error: "no leader"})
	for name, tc := range map[string]struct {
		reports []wire.PartitionReport
		have    bool
	}{"a configuration unknown": {unknown, true}, "no reports": {nil, false}} {
		ls, fromRaft := wire.NodeLoads(ms, tc.reports, tc.have)
		assert.False(t, fromRaft, name)
		assert.Equal(t, map[string][2]int{"n1": {2, 1}, "n2": {1, 1}}, counts(ls), "%s: from gossip, members only", name)
	}
	assert.Equal(t, "n2", ms[0].ID, "the members are not reordered")
}
