// Package fsm is the raft state machine of a raft-mode partition: it applies committed batches of
// cell appends to the partition's store (pebble, SQLite or MySQL, package storage) in one
// transaction per batch, with deterministic added_id and created_at, and streams and restores
// snapshots of the store.
//
// # Contract with hashicorp/raft
//
// *FSM implements raft.BatchingFSM. raft calls ApplyBatch, Snapshot and Restore from its single
// FSM goroutine, never concurrently with each other; FSMSnapshot.Persist runs on another goroutine
// concurrently with later ApplyBatch calls, reading the consistent view that Snapshot opened.
//
// # Erasure
//
// An erase entry (command.Erase) deletes a row's cells and appends a tombstone to the
// row's shard log, in a transaction of its own: a batch is split at its erase entries so that
// every entry takes effect in log order (see DESIGN.md, "Erase commands").
//
// # Outcomes and failures
//
// The commands an entry holds, their outcomes and their encoding are package command's. A cell's
// outcome (a cells.Result: created, exists, conflict) is a value in the Response of its log
// entry, the same on every replica; ResultOf and Unwrap are the one way to read a Response. A command that cannot be decoded is answered with an error value, also
// the same on every replica. A storage failure is not an outcome: the FSM retries the batch, and
// if the store keeps failing it stops applying (Failed reports it), calls Config.OnFatal and
// never advances its applied index again, so the replica never diverges; a restart replays the
// log from the stored applied index.
//
// # Restart
//
// The SQL store is durable, so a restarting replica does not restore a snapshot: the partition
// sets raft's NoSnapshotRestoreOnStart and ApplyBatch skips entries at or below the applied index
// stored with the cells. See partition for the case where the store is behind the latest snapshot.
//
// ApplyShared runs the same apply on a store that several processes write (async mode's MySQL
// master): the caller holds a cross-process lock, and the FSM reloads what it caches whenever
// the stored applied index shows another writer's batch.
//
// # Backups
//
// Backup writes the snapshot stream of a read view it opens itself, on the caller's goroutine,
// and returns a BackupInfo (header, counts, per-shard highest added_id). VerifySnapshot checks
// a stream without a store (the backup command and the restore path use it), and
// EncodeSnapshotHeader lets the partition rewrite a backup's header before raft restores it.
//
// # Schemas
//
// A schema command (command.Schema) registers a version of a column's JSON Schema in the
// partition's KV table; from the next entry on, every write is checked against its columns'
// latest schemas at apply time (validateWrite) and refused whole with a schemas.CellViolation
// when a cell does not conform. See DESIGN.md ("Schema commands").
//
// See DESIGN.md for the snapshot format and the added_id rules.
package fsm
