package wire

import "sort"

// NodeLoad is a node with the number of raft replicas it holds and of partitions it leads.
type NodeLoad struct {
	Member
	ReplicaCount, LeaderCount int
}

// NodeLoads merges the members a node knows (NodesResponse.Nodes) with the partitions' raft
// configurations (PartitionsResponse.Partitions), as `schemaless admin nodes` shows them, sorted
// by id. With haveReports and no report carrying an Error, the counts come from the
// configurations (a replica is a server of one; a leader, its Leader) and a node found only
// there is added with State "-"; fromRaft is true. Otherwise (the reports could not be read, or
// a configuration is unknown) they come from what each member last gossiped (Member.Replicas)
// and fromRaft is false. ms is not modified.
func NodeLoads(ms []Member, reports []PartitionReport, haveReports bool) (loads []NodeLoad, fromRaft bool) {
	replicas, leaders := map[string]int{}, map[string]int{}
	fromRaft = haveReports
	for _, p := range reports {
		if p.Error != "" {
			fromRaft = false
		}
		for _, s := range p.Servers {
			replicas[s.Node]++
		}
		if p.Leader != "" {
			leaders[p.Leader]++
		}
	}
	known := map[string]bool{}
	for _, m := range ms {
		known[m.ID] = true
		loads = append(loads, NodeLoad{Member: m})
	}
	if fromRaft {
		for id := range replicas {
			if !known[id] {
				loads = append(loads, NodeLoad{Member: Member{ID: id, State: "-"}})
			}
		}
	}
	for i := range loads {
		l := &loads[i]
		if fromRaft {
			l.ReplicaCount, l.LeaderCount = replicas[l.ID], leaders[l.ID]
			continue
		}
		for _, r := range l.Replicas {
			l.ReplicaCount++
			if r.Leader {
				l.LeaderCount++
			}
		}
	}
	sort.SliceStable(loads, func(i, j int) bool { return loads[i].ID < loads[j].ID })
	return loads, fromRaft
}
