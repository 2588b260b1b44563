// Package cluster runs one node: it reads the static topology (nodes, datastores, partitions and
// their replicas), hosts the node's partition replicas, and routes every request to the right
// partition, forwarding it to the partition's leader on another node when needed.
//
// # Routing
//
// A cell's shard is cells.ShardOf(row key, shard count); a shard belongs to the partition whose
// range holds it. Writes and strong reads go to the partition leader: served here if this node
// leads, else forwarded over the node-to-node RPC of package transport to the leader this node
// knows (from its own replica, or from the last answer it got), retried with backoff while
// leaders move, until the request's context ends. Stale reads are served by a local replica when
// the node hosts one, else forwarded to any replica.
//
// # Backup and restore
//
// Backup and Restore run on a raft partition's leader; a node that does not lead relays the
// stream over a streaming node-to-node RPC, following leader hints only until the first byte
// moved. Async datastores are refused (ErrAsyncDatastore).
//
// # Errors
//
// The node returns the partition package's errors (ErrUnavailable, ErrIndeterminate,
// *NotLeaderError never escapes: it is retried) and ErrUnknownDatastore. Forwarding preserves
// them: a forwarded write whose answer is lost after it was sent is indeterminate, never failed.
package cluster
