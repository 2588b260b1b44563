package storage

import (
	"errors"
	"time"

	"github.com/schemaless-db/schemaless/cells"
)

// Errors returned by the store. Test them with errors.Is: most are wrapped with context, and
// ErrDuplicate and ErrNoShardTable also wrap the driver's error.
var (
	// ErrNotFound: no cell has the requested key (or, for latest reads, the row key and column).
	// Returned unwrapped.
	ErrNotFound = errors.New("storage: not found")
	// ErrClosed: the store, the partition or the transaction was closed.
	ErrClosed = errors.New("storage: closed")
	// ErrDuplicate: Insert or Restore met a cell key or an added_id that is already stored (or
	// Restore an index entry whose row key it already restored). The write path checks keys
	// with Lookup and assigns added_id itself, so this is a bug in the caller; the statement
	// failed and the transaction should be rolled back.
	ErrDuplicate = errors.New("storage: duplicate cell key or added_id")
	// ErrShardRange: a shard outside the partition's cells.ShardRange.
	ErrShardRange = errors.New("storage: shard outside the partition's range")
	// ErrNoShardTable: Insert into a shard whose tables EnsureShards has not created.
	ErrNoShardTable = errors.New("storage: shard tables not created (call EnsureShards)")
	// ErrTxOpen: a writer call (Begin, EnsureShards, EnsureIndex, DropIndex, IndexNames or
	// Restore) was made while the partition's write transaction (or another writer call) is
	// open. The partition has one writer; this is a bug in the caller.
	ErrTxOpen = errors.New("storage: a write transaction is open")
	// ErrPartitionOpen: Store.Partition was called for a partition that is already open.
	ErrPartitionOpen = errors.New("storage: partition already open")
	// ErrInvalidConfig: a configuration or a name (prefix, datastore, shard range, index
	// table) is invalid, or an index table exists with other columns than those given.
	ErrInvalidConfig = errors.New("storage: invalid config")
	// ErrKVTooLarge: a KV key that is empty or longer than MaxKVKeyBytes, or a value longer
	// than MaxKVValueBytes, given to PutKV, DeleteKV or Restore. Nothing was written; the
	// transaction stays usable.
	ErrKVTooLarge = errors.New("storage: KV key or value out of bounds")
	// ErrNoIndexTable: LookupIndex or UpsertIndex on a shard where the index's table does not
	// exist (EnsureIndex creates it). Wraps the driver's error.
	ErrNoIndexTable = errors.New("storage: index table not created (call EnsureIndex)")
	// ErrIndexValue: an index entry given to UpsertIndex or Restore holds a value that does
	// not fit its column (a Go type other than the kind's, a string over MaxIndexStringBytes,
	// a float that is not finite, a wrong number of values). Nothing of that call was written.
	ErrIndexValue = errors.New("storage: index value does not fit its column")
	// ErrInvalidOrigin: a cell given to Insert, Restore or PutBuffered(Batch) has an Origin that
	// is neither "" nor a valid cluster name (cells.ValidateClusterName; the error wraps its
	// *cells.FieldError too). Nothing of that call was written; a write transaction stays
	// usable.
	ErrInvalidOrigin = errors.New("storage: invalid cell origin")
	// ErrInvalidQuery: an IndexQuery that cannot run (column out of range, unknown operator,
	// wrong number of values, a value of the wrong type, limit out of range).
	ErrInvalidQuery = errors.New("storage: invalid index query")
)

// AppliedState is the position of the raft log a partition's tables reflect: every command
// entry with an index at or below Index has been applied. Zero means nothing applied.
type AppliedState struct {
	Index uint64
	Term  uint64
}

// Existing is what a write transaction knows about a cell already stored under a key: the
// fields of the stored cells.Cell other than its key.
type Existing struct {
	AddedID   int64
	Body      cells.Body
	CreatedAt time.Time
	// Origin is the stored cell's cells.Cell.Origin ("" for a cell written in this cluster).
	Origin string
}

// PartitionID names one partition of one datastore. Datastore must match
// [a-z][a-z0-9_]{0,31} (see ValidateDatastoreName) and Partition must not be negative: both
// become part of database and file names.
type PartitionID struct {
	Datastore string
	Partition int
}

// SQLiteConfig configures the embedded engine. Zero fields take their defaults; Validate
// reports invalid ones.
type SQLiteConfig struct {
	// Dir is the directory holding one database file per partition. Created if missing.
	Dir string
	// Synchronous is SQLite's PRAGMA synchronous, case-insensitive: "NORMAL" (default; durable
	// across process crashes, the raft log covers power loss), "FULL" or "EXTRA".
	Synchronous string
	// ReadConns is the number of read connections per partition file (default 4). Each open
	// snapshot holds one of them until it is closed.
	ReadConns int
	// CacheKiB is the page cache of a partition's write connection in KiB (PRAGMA
	// cache_size=-CacheKiB; default 2000, SQLite's own; at least 64), and ReadCacheKiB that of
	// each read connection (default 512; at least 64). Page caches are allocated as pages are
	// read, outside Go's heap, and kept until the connection closes; modernc.org/libc's
	// allocator rounds a page and its header (about 4.4 KiB for SQLite's 4 KiB pages) up to an
	// 8 KiB slot, so a cache costs up to about twice its size. A node's page caches grow to
	// about 2 × partitions × (CacheKiB + ReadConns × ReadCacheKiB). Read connections serve
	// point reads, whose pages the kernel's page cache also holds, so they get less.
	CacheKiB, ReadCacheKiB int
	// WALCheckpointPages is the write connection's PRAGMA wal_autocheckpoint (default 4096; at
	// least 100): once a commit leaves the WAL file holding this many pages, SQLite copies them
	// into the database file, with an fsync of each file. More pages mean fewer checkpoints,
	// fewer fsyncs, and a page that many commits rewrote (a shard table's last leaf) copied
	// once; they cost disk (the WAL file of a partition that takes writes grows to about this
	// many 4 KiB pages and keeps that size) and the time of a checkpoint. SQLite's own default
	// is 1000.
	WALCheckpointPages int
}

// MySQLConfig configures the MySQL engine. Zero fields take their defaults; Validate reports
// invalid ones.
type MySQLConfig struct {
	// DSN is a go-sql-driver/mysql DSN of the server, e.g. "root@tcp(127.0.0.1:3306)/". Its
	// database part, if any, is ignored: the store names its own databases.
	DSN string
	// Prefix starts the name of every database this node creates (at most 16 characters of
	// [a-z0-9_]). Nodes sharing one server must use different prefixes.
	Prefix string
	// MaxOpenConns bounds the connection pool shared by all partitions (default 32, at least
	// 2). Each open snapshot holds one connection until it is closed.
	MaxOpenConns int
	// ReadOnly opens a store that only reads (an async datastore's minion): OpenMySQL creates
	// neither the meta database nor the buffer table, and a partition whose meta row or
	// tables have not been replicated yet reads as empty. Writer calls must not be used.
	ReadOnly bool
}
