// Package maintainer keeps a datastore's secondary indexes up to date: the built-in consumer of
// the per-shard logs that every node runs.
//
// Run polls the datastore's index catalog (package indexes) and, for every index version that
// is building or ready, runs a worker of the consumer group indexes.GroupName
// ("_index.<index>_v<version>") with triggers.RunBatch. The group's offsets make maintenance
// crash-safe: a worker that dies mid-batch leaves its shards to another node, which handles the
// uncommitted cells again.
// Starting a new version's group from the first cell of every shard is the backfill, so an
// index added to a running datastore is built online, and a new version builds beside the old
// one while queries keep using the alias.
//
// The maintainer runs in the node's process (package node starts it) and talks to its cluster
// node directly, through Backend (*cluster.Node): catalog reads and changes, cell reads, index
// upserts. Its workers' log reads and group commands go through a triggers.Source; the default
// is Source, which calls the same node in-process (no HTTP between a worker and its node; the
// cluster routes and forwards as it does for the API). Config.Source can give another, such as
// a client.TriggerSource over the HTTP API.
//
// For each page of a shard's log the handler:
//
//  1. keeps the cells of the index's source columns;
//  2. reads the first cell appended (lowest added_id) of the shard field's column for every row
//     key of the page, in one read of this node's replica (row keys it has no such cell for
//     are read again from the partition's leader): its shard field value places the entry on
//     the index shard ShardOf(value) for good;
//  3. for rows whose shard-field cell is in the page, also reads the latest cell of each other
//     source column, so that values written before the shard field are not lost;
//  4. queues the entries for the next upsert round: one round (one raft command per index
//     partition, command.IndexUpsert) carries the pages of every shard that arrived meanwhile, and
//     the partition's FSM merges them by ref key per source column (indexes.Merge): replays and
//     reordering change nothing. The page's offset moves once its round is applied.
//
// A tombstone in the page (an erased row; see package fsm) ends the page's part before it: those
// cells' upserts are applied first, then the row's entries are deleted from the version's table
// on every partition (command.IndexErase; counted in schemaless_index_entries_erased_total), then
// the rest of the page is handled, so entries follow the log's order. A row written again after
// its erasure gets a new entry from its new cells. Step 2 reads from a replica whose shard log
// reaches the page's end (else from the leader), so that a first cell an erasure deleted is
// never used.
//
// A cell whose shard field differs from the entry's is a violation of the immutable shard
// field: the entry stays where it is, records the cell's added_id (the highest such), and the maintainer counts it
// (schemaless_index_shard_field_violations_total) and logs it. Values that do not convert to
// their field's type are stored as NULL and counted (schemaless_index_type_mismatches_total).
//
// When a building version's group has handled every shard's log up to its high-water mark,
// the maintainer marks it ready in the catalog; the first ready version of an index becomes its
// alias. Versions being dropped have their maintainers stopped, their tables dropped on every
// partition, and are then marked dropped.
package maintainer
