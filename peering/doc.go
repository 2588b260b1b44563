// Package peering replicates cells between clusters, the role Uber's Herb plays for
// Schemaless: each cluster streams the cells written in it to every peer cluster, at least once
// and in order per shard, over the peers' HTTP APIs.
//
// # Model
//
// A cluster has a name (cluster.Config.ClusterName: `--cluster-name`, or cluster_name in the
// topology). An operator lists a peer in the catalog (PUT /v1/admin/replication/{peer},
// cluster.Node.SetPeer) with its endpoints, the datastores to send and its credentials; each
// side lists the other, so two clusters replicate both ways, and three or more form a full
// mesh.
//
// Every node runs a Replicator (package node starts it). For each peer and each of its
// datastores it runs one worker of the consumer group "_replication.<peer>" on that datastore
// (triggers.RunPages over the node's own logs, maintainer.Source): the group splits the shards
// among the nodes, leases move to the other nodes when a node dies, and the committed offsets
// make the stream resume where it stopped. A peer that is slow or away holds back only its
// own group.
//
// For each page of a shard's log the worker keeps the cells written in this cluster (an empty
// cells.Cell.Origin) and sends them in one put_cells request with "origin" set to this
// cluster's name (client.WithOrigin); the peer stores that origin with each cell it creates
// and so never sends it on. Cells that arrived from another cluster are skipped: their origin
// sends them to every peer itself, so a mesh has no loops. A page's offset is committed only
// after the peer answered it and every page before it. A page sent again after a crash answers
// exists for the cells already there (cells are immutable and writes idempotent).
//
// # Pages in flight, in order
//
// A shard may have up to Config.Triggers.PipelineDepth pages on their way to the peer at once
// (DefaultPipelineDepth, serve --replication-depth; triggers.Config.PipelineDepth): the next
// page of a shard is read and sent while the one before it waits its round trip between
// datacenters. Their order at the peer is kept by chaining them (order.go, wire.PutOrder): each
// page's put_cells names the shard as its stream, the added_id of its last local cell as its
// seq and the seq of the page before it as its after; the peer's node applies it only after
// that one, and refuses it (409 out_of_order, nothing written) when it does not get that one
// within a quarter of a second or that one failed. A refused or failed chained page waits here
// until the page before it was answered and is sent again at the head of the chain, without
// after. A stream's requests go to one node of the peer (client.WithOrder), which keeps the
// chain in its memory. A page that erases a row is sent only once the pages before it were
// answered (erasures are not chained). With a depth of 1 a shard's next page goes only after
// the peer answered the one before.
//
// The shards go on independently (triggers.Config.Pipeline): a page waits a round trip between
// datacenters, so the other shards are read and sent meanwhile. A request that fails (the peer
// unreachable, cut off, slow, refusing) is sent again with backoff until the peer answers, for
// as long as the worker holds the shard: the stream falls behind, its last error shows in the
// status and schemaless_replication_errors_total counts the failures, but no cell is parked
// for it.
//
// A cell whose key the peer holds with another body (the same key written in two clusters)
// is a conflict: the page is then sent cell by cell (triggers.RunPages), the conflicting cell
// is retried and then parked in the group, and the group halts at its HaltThreshold, stopping
// that stream and no other, as for triggers.
//
// Status (GET /v1/admin/replication) reads each stream's group: per shard the offset, the
// high water and the lag in cells and seconds (cluster.Node.GroupProgress), the parked cells,
// whether it halted; the rate, cells sent and last error are the answering node's own
// workers' (sampled every Config.SampleInterval).
//
// # Erasures
//
// A tombstone written in this cluster (an erased row) is sent as an erasure with this cluster
// as its origin (DELETE /v1/{ds}/cells/{row}?origin=), between the cells of its page before it
// and those after it; the peer's tombstone stores the origin, so the erasure is not sent back.
// An erasure erases the row's cells that the peer holds when it applies it, including cells
// written in the peer meanwhile.
//
// # Schema versions
//
// Every Config.SchemaInterval each stream compares its datastore's schema versions with the
// peer's, column by column, and registers at the peer, in order, the versions it lacks
// (syncSchemas); a column whose versions differ between the clusters (each registered its own)
// is reported as the stream's schema error and left alone until an operator aligns them.
// Replicated cells skip the peer's schema checks: they were checked at their origin.
package peering
