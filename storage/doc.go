// Package storage keeps the cells of a node's partition replicas in SQL: the per-shard layout of
// the Schemaless paper (an entity table per shard with added_id, unique (row_key, column_name,
// ref_key)) plus a meta table holding each partition's applied raft index and a KV table of
// each partition's small mutable state.
//
// Three engines sit behind the one API of *Store: MySQL (go-sql-driver/mysql; MariaDB 10.11 in
// tests), the production engine of the Schemaless layout; embedded SQLite (modernc.org/sqlite,
// no cgo); and embedded pebble (cockroachdb/pebble, a log-structured merge tree), the default
// of raft mode on a node without MySQL (see "The pebble engine"). One concrete type serves all
// three: an unexported dialect holds the differences of the SQL engines (table names, DDL, the
// meta upsert, how a snapshot starts, statement size limits), and every method starts with the
// pebble engine's branch. The same conformance suite runs on all three.
//
// # Layout
//
// MySQL: each shard is a database named "<prefix>_<datastore>_<shard, 4 digits>" holding the
// table "entity"; the meta table is "<prefix>_meta.partitions" (datastore, partition,
// applied_index, applied_term, schema_version) and the KV table "<prefix>_meta.kv" (datastore,
// partition, k VARBINARY(255), v LONGBLOB; primary key (datastore, partition, k)) holds the KV
// rows of every partition. Both are created by OpenMySQL. The prefix is per node, so several
// nodes can share one server in development and tests. Statements qualify every table with
// its database, so one connection pool serves every shard. SQLite: each partition is one file
// "<dir>/<datastore>-p<partition>.db" holding a table "entity_<shard, 4 digits>" per shard, a
// table "meta" of the same shape as MySQL's and a table "kv" (k BLOB primary key, v BLOB), the
// last two created when the partition is opened.
//
// The KV table holds small mutable state replicated with the partition (consumer groups):
// keys of 1 to MaxKVKeyBytes bytes compared bytewise (VARBINARY, SQLite BLOB), values of at
// most MaxKVValueBytes. WriteTx.PutKV and DeleteKV change it inside the write transaction,
// ScanKV reads a key prefix, snapshots include it and Restore replaces it.
//
// The entity table: added_id BIGINT primary key, assigned by the caller (never AUTO_INCREMENT);
// row_key BINARY(16) (SQLite BLOB); column_name VARCHAR(64) with a binary collation (MySQL
// ascii_bin, SQLite BINARY), so column keys that differ only in case are different cells;
// ref_key BIGINT; body MEDIUMBLOB (SQLite BLOB), the stored form of cells.Body; created_at
// DATETIME(6) in UTC (SQLite: INTEGER microseconds since the Unix epoch); origin, the cluster
// the cell was first written in (cells.Cell.Origin), VARCHAR(32) ascii_bin NOT NULL (SQLite
// TEXT NOT NULL) with the empty string as default, "" for a cell written in this cluster. Times
// are stored truncated to the microsecond and read back in UTC. Insert stores Origin as given
// and refuses one that is not "" or a cluster name (ErrInvalidOrigin); every read returning
// cells returns it, and every copy of cells (snapshots and Restore, splits and merges, a
// partition's move, async mode's buffer) keeps it.
//
// Tables created before the origin column get it when the store opens them: SQLite adds it to
// a partition file's entity tables that lack it when the partition is opened, in one
// transaction; OpenMySQL (unless ReadOnly) to the prefix's entity tables and buffer table that
// lack it. ALTER TABLE ... ADD COLUMN rewrites no row on either engine (the old rows read the
// default, ""), and appends the column last, where new tables have it too. A store whose tables
// all have it pays one catalog query.
//
// A shard's tables are created on first use, by EnsureShards (or Restore), never inside a
// write transaction because MySQL DDL commits implicitly. Reads of a shard whose tables do not
// exist behave as reads of an empty shard.
//
// # Index tables
//
// Secondary indexes live in per-shard index tables with real typed columns, one table per
// index version (IndexTable, named "<index>_v<version>" by callers): SQLite
// "index_<name>_<shard, 4 digits>" in the partition's file, MySQL "index_<name>" in the
// shard's database. A table holds one row per row key: row_key (BLOB / BINARY(16)) primary
// key, a nullable column "f_<Name>" per IndexColumn of the SQL type of its IndexKind (uuid
// BLOB / BINARY(16), string TEXT / VARBINARY(255), int and datetime INTEGER / BIGINT, float
// REAL / DOUBLE, bool INTEGER / TINYINT), refs (BLOB / MEDIUMBLOB, opaque to storage) and
// violation_ref BIGINT NOT NULL DEFAULT 0. Columns[0] is the shard field: B-trees on (f_0,
// row_key) and (f_0, f_i, row_key) for every other column serve every QueryIndex, which fixes
// f_0 and orders by one column then row_key, without a sort. Values compare as SQL does on
// both engines alike: strings and uuids bytewise, NULL matching no condition and sorting
// first ascending. EnsureIndex creates tables (writer call, outside transactions, remembered
// like the entity tables) and checks that an existing table has the columns asked for;
// DropIndex drops an index's tables; IndexNames lists them. The writer reads and writes
// entries in its transaction (LookupIndex, UpsertIndex of whole rows), QueryIndex and
// IndexStats read committed data on the read pool, SnapshotTx.ScanIndex reads a snapshot, and
// Restore replaces the index tables with those of a snapshot.
//
// # Write path
//
// The partition's FSM is its only writer. Per batch it calls EnsureShards for the shards the
// batch touches, then Begin, and per shard Lookup (one statement per up to 200 keys, through
// the unique key) and Insert (multi-row INSERTs of up to 500 cells, fewer for large bodies),
// (and PutKV/DeleteKV for KV rows), then SetApplied and Commit: the cells, the KV rows and the
// applied index commit atomically. A write transaction sees its own writes.
//
// An erasure of a row (the FSM's erase command) deletes the row's cells with WriteTx.EraseRow and
// inserts its tombstone (cells.NewTombstone, column cells.TombstoneColumn) with Insert, in one
// transaction; the maintainer's erase deletes the row's index entries with
// WriteTx.DeleteIndexEntries, and async mode its buffered copies with Store.DeleteBufferedRow.
// GetRow leaves tombstones out; ReadLog and ScanShard return them (a column filter keeps them).
//
// # Reads and snapshots
//
// GetCell, GetLatest, GetRow, ScanShard, ScanKV, Applied and MaxAddedID may run on any
// goroutine, concurrently with the writer; each is one statement that sees the latest committed
// data. ReadLog and LocationAt, the reads of trigger consumers, take two statements: the
// shard's highest added_id first, then the cells up to it, so a cell committed in between is
// left for the next read, never skipped.
// BeginSnapshot opens a consistent read-only view of every table of the partition
// (MySQL: START TRANSACTION WITH CONSISTENT SNAPSHOT on its own connection; SQLite: a read
// transaction on a reader connection, pinned to its WAL snapshot by a first read). The writer
// keeps committing while it is open; the view does not change. SnapshotTx.ScanShard streams a
// shard in added_id order, SnapshotTx.ScanKV the KV rows in key order and SnapshotTx.ScanIndex
// an index table in row key order, in bounded pages. Restore replaces the partition's content
// with a stream of cells and index entries and a list of KV rows, in one transaction.
//
// # Connections
//
// MySQL: one pool per Store (MySQLConfig.MaxOpenConns), with interpolateParams (one round trip
// a statement), parseTime, loc=UTC and session time_zone '+00:00' forced. SQLite: per
// partition, a writer pool of exactly one connection (WAL mode, BEGIN IMMEDIATE, synchronous
// from SQLiteConfig, temp_store MEMORY) and a pool of SQLiteConfig.ReadConns query-only
// reader connections; busy_timeout is 10 s on both.
//
// # Concurrency
//
// Store and PartitionStore are safe for concurrent use, with one rule: EnsureShards,
// EnsureIndex, DropIndex, IndexNames, Begin, the WriteTx methods and Restore belong to the
// partition's single writer. They never wait for
// each other: a call made while a write transaction is open returns ErrTxOpen (in SQLite a
// second writer would otherwise deadlock on the one writer connection). A SnapshotTx is used
// by one goroutine at a time. Reads see committed data only.
//
// # Async mode
//
// A MySQL store also holds the buffer table of async mode, "<prefix>_meta.buffer" (created by
// OpenMySQL): cells written on behalf of another storage cluster, one row per datastore and cell
// key, with the cell's origin (PutBuffered, ScanBuffered, DeleteBuffered, BufferStats). Lock takes
// a MySQL named lock on a connection of its own, which async mode holds around each write
// transaction on a master. MySQLConfig.ReadOnly opens a store on a minion: no DDL, and missing meta
// or shard tables read as empty.
//
// # The pebble engine
//
// OpenPebble opens one pebble database per node holding every partition the node hosts. A
// partition's keys start with a data prefix of its own, "p" and a generation (8 bytes), which its
// directory entry ("d", datastore, 0x00, partition) names. Under it, the entity table's two B-trees
// become two key ranges: the shard's log ("l", shard, added_id -> the whole cell: row key, ref key,
// created_at, column, origin, body; a cell with no origin is encoded without it, as before origins
// existed, and a flag on the column's length marks one that has it: see appendLogValue), read by
// ReadLog, ScanShard and snapshots in added_id order, and the unique key ("c", shard, row key,
// column, ref key -> added_id), read by point reads, Lookup and GetRow. KV rows are "k" + key;
// request records "r" + ID, with "t" + created_at + ID ordering them for PruneRequests; the applied
// state "a"; an index table's existence "x" + name + shard (holding its columns' definition), its
// entries "i" + name + shard + 0 + row key, and for each order a query can take (by row key, by
// column c) a copy of the entry under its shard field's and column's values in an order-preserving
// encoding (NULL first, strings escaped, numbers with the sign bit flipped), so QueryIndex reads
// one ordered key range under the shard field and checks the conditions on each entry (as SQL's
// plans do, see QueryIndex's caveat). Integers in keys are big-endian with the sign bit flipped,
// strings escaped (0x00 becomes 0x00 0xff, 0x00 0x01 ends one), so keys sort as the SQL engines
// order rows.
//
// A write transaction is an indexed batch (its reads see its writes), committed without an fsync
// of pebble's write-ahead log: the raft log, synced, covers a crash, and a replica whose last
// commits were lost replays them from it (their outcomes are deterministic). Bloom filters in
// every table answer the unique-key probe of a new cell without reading its blocks. Reads run
// on pebble iterators, each a consistent view; BeginSnapshot takes a pebble snapshot (no
// connection held, nothing blocks compactions for long). Restore writes the new content under
// a new generation, in batches of 4 MiB, then switches the directory entry to it and deletes the
// old generation with one range deletion, in one synced batch: readers see the old content
// (index tables included) until the switch, and a failed or interrupted Restore leaves it; the
// orphaned generation is deleted then, or when the store next opens.
//
// A split copies no cell: ShareShards gives the right half a generation of its own for its
// state (KV rows, request records, applied state) and leaves its shards' keys (cells, logs,
// index tables) under the parent's generation, which the two then share; the directory entry
// of each names both generations and the shard range it owns in the shared one
// (pebble_dir.go). A merge of partitions that share their shards' generation moves no cell
// either (AbsorbShards). What a partition leaves when it is restored or retired is its own
// part: its state, the keys of the shards it owned, and a generation whole once no entry names
// it. EnsureShards creates
// nothing (keys need no table), so Insert never returns ErrNoShardTable. Buffers, placement,
// fences, locks and DropCopy are MySQL's (async mode) and are not available. The applied state
// holds a layout version: 2 since log entries may hold an origin; a partition of version 1
// reads as it is and becomes version 2 at its next write, which a build of version 1 refuses.
//
// On MySQL a split copies no cell either: each shard's tables are in a database of the
// shard's own, whatever partition holds it, so ShareShards writes only the right half's KV
// rows, request records and applied state in the meta tables, and ReleaseShards forgets the
// parent's caches (splitsql.go; async mode's split in place, WriteTx.CloneStateTo, does the
// same on a master). On SQLite, a file per partition, ShareShards into a partition that has
// applied nothing (a split's first apply) makes its file a byte copy of the parent's file and
// log (clonesqlite.go: the right half's store, opened by Store.PartitionForSplit, has no file
// until then, and PartitionStore.Release then syncs the copy and keeps it open for the
// partition's next opening, keep.go); into one that applied something it copies the right half's shards
// inside SQLite (the parent's file attached, each table copied whole with INSERT INTO ...
// SELECT: sharesqlite.go). ReleaseShards forgets the parent's caches of the shards. The tables
// each file then holds of shards outside its partition's range are strays, which a goroutine
// drops one at a time, between the state machine's transactions, once SetShards gives the
// partition its new range (strays.go). A merge (AbsorbShards) moves no cell on MySQL either: the left partition
// joins the right one's request records into its own. On SQLite it copies the right one's
// shards into the left one's file, in the left one's transaction (mergesql.go): inside SQLite
// when the transaction was begun with the right one's file attached (BeginAbsorb, what the
// state machine does), else through Go; the right one's file is then deleted
// (Store.RemovePartition).
//
// Migration: with PebbleConfig.MigrateSQLiteDir, the first time Partition opens a partition
// this database has never held and whose SQLite file is in that directory, it copies the file's
// content from a snapshot of it (cells with their added_ids, created_at and origins, KV rows,
// index tables and entries, request records, the applied state) with Restore, then moves the
// file into MigrateSQLiteDir + ".migrated".
//
// # Caveats
//
//   - Restore ensures the tables of every shard of the partition's range (in MySQL one database
//     each) and empties them with DELETE inside its transaction, so restoring a large partition
//     on MySQL builds a large undo log, and readers see the old content until it commits.
//   - An open snapshot holds a connection (in SQLite one of ReadConns, in MySQL one of
//     MaxOpenConns) until Close. In SQLite it also keeps the WAL from being checkpointed past
//     its view, so the WAL grows while it is open; in MySQL it holds back InnoDB purge.
//   - MySQL's read view covers the tables that existed when the snapshot started; a shard
//     table created later (error 1412, "table definition has changed") reads as empty in it,
//     which is what it held at that moment.
//   - Durability follows the engine: SQLite with synchronous NORMAL may lose the last commits
//     on power loss (not on a process crash); raft's log covers them. MySQL follows
//     innodb_flush_log_at_trx_commit.
//   - Two prefixes where one is the other followed by "_" (say "a" and "a_b") can name the same
//     databases; give nodes sharing a server prefixes without that relation.
//   - The SQLite file of a partition must be opened by one Store at a time: nothing stops a
//     second Store (or process) from opening it and writing as if it were the only writer.
//   - Insert does not check that a cell belongs to the shard it is inserted into, nor that
//     added_id values are increasing: the caller assigns both.
//   - Table and database names hold shard numbers of 4 digits: shards range over [0, 9999].
//   - There is no index on created_at or on column_name alone: LocationAt scans a shard in
//     added_id order up to the first cell at or after its time, and a ReadLog filtered by
//     column scans the added_id range past the other columns' cells.
//   - PartitionStore.ScanKV holds its whole result in memory, and Restore takes the KV rows as
//     a slice: the KV table is meant for small state, not for bulk data.
//   - Restore drops and recreates the index tables before its transaction: until it commits,
//     readers see them empty, and a failed Restore may leave them empty or missing while the
//     cells and the applied state are unchanged. Restore again before relying on them.
//   - In MySQL, DROP TABLE (DropIndex, Restore) waits for the metadata lock of every open
//     snapshot that has read the table, so close snapshots promptly; a snapshot that had not
//     read an index table before it was dropped reads it as empty.
//   - An index table's definition is checked against the catalog the first time a
//     PartitionStore meets it: SQLite compares the CREATE TABLE text it keeps (which records
//     each column's kind in a comment), MySQL the columns' types and comments. A table created
//     by a build that writes another text or comment for the same columns is refused: such a
//     change needs new index names.
//   - A read-only MySQL store (MySQLConfig.ReadOnly, an async minion) adds no origin column: it
//     reads the tables its master, once opened by a build with origins, has migrated and
//     replicated. Until then its reads of those tables fail (unknown column origin).
//   - QueryIndex serves its order from the B-tree of its OrderBy column; conditions on other
//     columns filter the rows it walks, so a selective condition on a column other than the
//     order may read many rows per page.
package storage
