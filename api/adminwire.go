package api

import (
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/membership"
	"github.com/schemaless-db/schemaless/wire"
)

// The admin answers in their wire shapes (package wire). The partition reports, raft
// configurations and rebalance reports are wire's types in the node too (cluster aliases
// them); the members are converted here, from gossip's replicas. A nil slice stays nil (JSON null), an empty one empty ([]), so that the JSON is
// that of the node's types field for field (adminwire_test.go checks it byte for byte).

// convert maps a slice element by element, keeping nil as nil.
func convert[S, T any](in []S, f func(S) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func wireMembers(ms []cluster.Member) []wire.Member {
	return convert(ms, func(m cluster.Member) wire.Member {
		return wire.Member{ID: m.ID, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: m.GossipAddr, Version: m.Version, Zone: m.Zone,
			State: m.State, Replicas: convert(m.Replicas, wireMemberReplica), UpdatedAt: m.UpdatedAt}
	})
}

func wireMemberReplica(r membership.Replica) wire.MemberReplica {
	return wire.MemberReplica{Datastore: r.Datastore, Partition: r.Partition, Leader: r.Leader, AppliedIndex: r.AppliedIndex}
}
