// Package backup backs up a raft datastore to a directory of files with a manifest, verifies
// such a backup offline, and restores it into a cluster, through package client.
//
// # A backup directory
//
// A backup of datastore D holds one file per partition, named D-p<id>.snap (FileName), and
// manifest.json (ManifestName), written last: a directory with a manifest holds a complete
// backup. A file is the partition's snapshot stream, the format raft snapshots use (see
// fsm/DESIGN.md): a header naming the shard range and the raft entry (index, term) whose state
// the stream holds, then the cells shard by shard in added_id order with their added_id and
// created_at, the KV rows (consumer groups, index catalog), the index entries, and a trailer
// counting them. It is what GET /v1/admin/backup/{ds}/{partition} streams, byte for byte.
//
// # The manifest
//
// manifest.json is one JSON object (Manifest), indented:
//
//	format       1 (FormatVersion); a build reads only the format it writes
//	datastore    the datastore backed up
//	mode         "raft" (async datastores are backed up with MySQL's tools)
//	shards       the datastore's shard count
//	started_at, finished_at   RFC 3339 UTC, of the whole backup
//	partitions   one object per partition, in the datastore's partition order (Partition):
//	  id, first_shard, last_shard   the partition and its shards (inclusive)
//	  file                          the file's name in the directory
//	  bytes, sha256                 the file's size and SHA-256 (lower-case hex)
//	  snapshot_version              the stream's format version (3)
//	  applied_index, applied_term   the source cluster's raft entry the file reflects
//	  cells, kv_rows, index_entries the stream's records
//	  shard_stats                   per shard: {"shard","max_added_id","cells"}
//	  started_at, finished_at       RFC 3339 UTC, of this partition's backup
//
// # Consistency
//
// Each partition is backed up on its leader after a read index: its file holds every write
// acknowledged before that partition's backup started, as the state after one applied raft
// entry, while writes go on. Partitions are backed up one after another, so a backup is not one
// point in time across partitions; stop writers first to make it one.
//
// # Checks
//
// Backup checks each stream as it arrives (fsm.VerifySnapshot: records, order, trailer counts)
// and its length and SHA-256 against the node's trailers. Verify re-checks every file against
// the manifest with no node. Restore verifies first, then checks the target: a raft datastore
// with the same shard count and partitions (ids and shard ranges) and, without Force or
// AcceptLostCells, no cell in any shard; with either, it dry-runs every partition and refuses
// unless the total of cells lost (target cells whose key the backup lacks) is the one accepted
// (0 for Force alone). It touches nothing when a check fails. It then restores the partitions
// one after another, each accepting exactly its own count; one that fails leaves the
// partitions before it restored and the others as they were (dry-run and restore again).
package backup
