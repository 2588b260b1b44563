// Package catalog is the model of a cluster's replicated catalog: its datastores and their
// partitions (shard ranges, replicas or storage clusters, generations), changed only by
// commands (create, drop, split, merge, set replicas) that a pure, deterministic state machine
// applies, so that a raft group can replicate it and every node can cache it.
//
// # Generations
//
// Every accepted command raises the catalog's generation by one, and a partition records the
// generation at which it took its current shard range. A router that sends a request with the
// generation of its view lets the partition's replica refuse a request routed by an older view
// of a range that has changed (a split moved the shard away), so the router re-routes instead of
// applying a write to the wrong group. Command.ExpectGeneration makes the same check for the
// catalog's own commands: a split or merge decided on an older view is refused (ErrStale).
//
// # Splits and merges
//
// A split divides a partition at a shard: the left half keeps the partition's ID, the right half
// gets a new one, on the same replicas (CockroachDB's range split: the new group starts on the
// same nodes and is moved later by rebalancing). A merge joins a partition with its right
// neighbour when both are on the same replicas; the right one's ID is never used again. Shards
// never move between datastores and never change number: only their grouping changes.
//
// The catalog decides the grouping only. Moving the cells, logs, offsets, index entries and
// request records of the shards that change partition is the job of the partitions' state
// machines, which apply the split or merge at one index of their raft logs.
package catalog
