package api

import (
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/membership"
	"github.com/schemaless-db/schemaless/wire"
)

// The admin answers in their wire shapes (package wire), converted from the node's types at
// the edge. A nil slice stays nil (JSON null), an empty one empty ([]), so that the JSON is
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
		return wire.Member{ID: m.ID, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: m.GossipAddr, Version: m.Version,
			State: m.State, Replicas: convert(m.Replicas, wireMemberReplica), UpdatedAt: m.UpdatedAt}
	})
}

func wireMemberReplica(r membership.Replica) wire.MemberReplica {
	return wire.MemberReplica{Datastore: r.Datastore, Partition: r.Partition, Leader: r.Leader, AppliedIndex: r.AppliedIndex}
}

func wirePartitionConfig(c cluster.PartitionConfig) wire.PartitionConfig {
	return wire.PartitionConfig{Datastore: c.Datastore, Partition: c.Partition, Leader: c.Leader, Term: c.Term,
		CommitIndex: c.CommitIndex, LastIndex: c.LastIndex, Servers: convert(c.Servers, func(s cluster.RaftServer) wire.RaftServer {
			return wire.RaftServer{Node: s.Node, Addr: s.Addr, Suffrage: s.Suffrage}
		})}
}

func wirePartitionReports(rs []cluster.PartitionReport) []wire.PartitionReport {
	return convert(rs, func(r cluster.PartitionReport) wire.PartitionReport {
		return wire.PartitionReport{PartitionConfig: wirePartitionConfig(r.PartitionConfig), Mode: r.Mode, FirstShard: r.FirstShard,
			LastShard: r.LastShard, Cluster: r.Cluster, Error: r.Error, Replicas: convert(r.Replicas, func(l cluster.ReplicaLag) wire.ReplicaLag {
				return wire.ReplicaLag{Node: l.Node, Suffrage: l.Suffrage, State: l.State, AppliedIndex: l.AppliedIndex,
					LastIndex: l.LastIndex, Lag: l.Lag, Reachable: l.Reachable, Error: l.Error}
			})}
	})
}

func wireRebalanceReport(r cluster.RebalanceReport) wire.RebalanceReport {
	return wire.RebalanceReport{Nodes: r.Nodes, ReplicasBefore: r.ReplicasBefore, ReplicasAfter: r.ReplicasAfter,
		LeadersBefore: r.LeadersBefore, LeadersAfter: r.LeadersAfter, DurationSeconds: r.DurationSeconds, DryRun: r.DryRun,
		Moves: convert(r.Moves, func(m cluster.Move) wire.Move {
			return wire.Move{Datastore: m.Datastore, Partition: m.Partition, From: m.From, To: m.To}
		}),
		Transfers: convert(r.Transfers, func(t cluster.Transfer) wire.Transfer {
			return wire.Transfer{Datastore: t.Datastore, Partition: t.Partition, From: t.From, To: t.To}
		})}
}
