// Package topology reads, validates and normalizes the static description of a cluster (a YAML
// file shared by every node): its nodes, and its datastores with their mode, shard count and
// partitions (raft replicas, or async storage clusters).
package topology
