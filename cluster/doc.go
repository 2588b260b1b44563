// Package cluster runs one node: it reads the static topology (nodes, datastores, partitions and
// their replicas), hosts the node's partition replicas, and routes every request to the right
// partition, forwarding it to the partition's leader on another node when needed.
//
// # Partitions
//
// A node serves each partition through the Partition interface, whatever the datastore's mode:
// the raft replicas it hosts (*partition.Raft), and every partition of an async datastore
// (*partition.Async, which every node serves against the storage cluster's master). Writes,
// typed reads with a consistency, consumer-group and index commands, backup and restore all go
// through it; membership changes and hosting also use the raft replica's own surface (its raft
// configuration, leadership transfer).
//
// # Routing
//
// A cell's shard is cells.ShardOf(row key, shard count); a shard belongs to the partition whose
// range holds it. Writes and strong reads go to the node the partition's Leader names: served
// here if this node serves the partition and is that node (always, for an async partition),
// else forwarded over the node-to-node RPC of package transport to the leader this node knows
// (from its own replica, or from the last answer it got), retried with backoff while raft
// leaders move, until the request's context ends. An async partition's answer is final: there
// is no leader to wait for. Stale reads are served by the partition this node serves when it
// serves one, else forwarded to any replica.
//
// # Readiness
//
// Ready reports whether every partition the node serves knows its leader (the raft replicas it
// hosts): what routing to another node could improve. DatastoreReady reports one datastore,
// including whether every storage cluster of an async datastore has a master; a storage cluster
// without a master makes its datastore unready, not the node.
//
// # Backup and restore
//
// Backup and Restore run on a raft partition's leader; a node that does not lead relays the
// stream over a streaming node-to-node RPC, following leader hints only until the first byte
// moved. An async partition refuses them (ErrAsyncDatastore).
//
// # Errors
//
// The node returns the partition package's errors under their own names here (ErrUnavailable,
// ErrIndeterminate, ErrClosed, ...: the same values; *partition.NotLeaderError never escapes: it
// is retried) and ErrUnknownDatastore. An error is of one class: a write that may have been
// applied is ErrIndeterminate and not also ErrUnavailable. Forwarding preserves them: a
// forwarded write whose answer is lost after it was sent is indeterminate, never failed. A
// request that ran out of time keeps its context's error in the chain.
package cluster
