// Package partition runs one partition of a datastore (a contiguous range of shards) as a
// replicated unit. In raft mode a partition is a hashicorp/raft group whose FSM (package fsm)
// applies cell appends into each replica's SQL store.
//
// # Writes
//
// Put groups concurrent requests into raft entries (group commit: while MaxInflight entries are
// being replicated, new requests queue and leave together in the next entry), raft groups entries
// into one log write and one AppendEntries, and the FSM applies each committed batch in one SQL
// transaction. Put answers when the entry is committed on a quorum and applied on the leader.
//
// # Reads
//
// ReadIndex makes the next local read linearizable (Raft dissertation §6.4): the leader takes its
// commit index, checks that an entry of its own term is committed (a new leader's commit index
// may be stale until then), confirms it is still leader with a round of heartbeats to a quorum
// (raft.VerifyLeader), and waits until its FSM has applied every command up to that index. Stale
// reads skip all of it and read the local replica. Read takes a typed ReadRequest (one kind of
// read per request: cells, a row, shard logs, consumer groups, the index catalog, an index
// query), does the consistency part and runs the read against the partition's tables; the same
// request, forwarded between nodes as it is, serves both modes.
//
// # Restart
//
// raft runs with NoSnapshotRestoreOnStart: the SQL store is durable and the FSM skips entries at
// or below its stored applied index. If the store is behind the latest snapshot (it lost commits,
// or was replaced), Open first replays the missing entries from the raft log, or, when the log no
// longer holds them, restores the snapshot into the store.
//
// # Async mode
//
// Async is a partition of an async datastore: its cells live on a MySQL StorageCluster (a
// master and minions replicating by MariaDB's own GTID replication), which every node serves
// directly. A StorageCluster probes its members (package replication) to find the master (the
// one writable member replicating from nobody) and the minions, and keeps a circuit breaker
// (sony/gobreaker) per member. Async.Put writes each cell into the buffer table of other
// clusters' masters first (the Schemaless paper's buffered writes), then applies the cells on the
// primary master with the raft mode's state machine (fsm.FSM.ApplyShared, one transaction per
// batch, under a MySQL named lock per partition); a cell the master did not take is answered
// cells.StatusBuffered. Its reaper deletes buffer rows once their cell is on a minion and replays
// into the master those missing there. Reads run on the master (strong) or a minion (stale).
// Every node serves every async partition: its Leader is the node itself, and it is not
// Elected, so the node answers with the partition's outcome at once rather than waiting for a
// leader to move.
// docs/design.md (Async mode) gives the reasoning and the limits.
//
// # Backup and restore
//
// Backup streams a consistent snapshot of the partition from the leader after a read index.
// RestoreBackup checks and stages a backup, compares the partition's cells with it by key (the
// cells a restore would drop: RestoreResult.CellsLost; a dry run stops there), and, with write
// batches held back so the count is exact, refuses unless the caller accepted that count, then
// hands it to raft's Restore, which makes it the partition's state on every replica (followers
// install it as a snapshot); see its documentation for the raft index it chooses and what
// happens to the leadership meanwhile.
//
// See DESIGN.md for the error semantics of Put and the reasoning behind each step.
package partition
