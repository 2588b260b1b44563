package cluster

import (
	"context"
	"io"
	"time"

	"github.com/schemaless-db/schemaless/cells"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
)

// Partition is one shard group served on this node, whatever its mode: a raft replica
// (*partition.Raft), or a partition of an async datastore (*partition.Async), which every node
// serves against its storage cluster's master. The node routes each request to the partition
// holding its shard and calls it here when this node is the one Leader names (every request,
// for an async partition); otherwise it forwards the request to that node.
//
// Methods are safe for concurrent use. Errors are the partition package's: ErrUnavailable
// (nothing done, retry), ErrIndeterminate (a command may have been applied, retry: commands
// are idempotent), *partition.NotLeaderError (a leader-only call on a raft follower: nothing
// done), ErrClosed, and the refusals each method names.
type Partition interface {
	// Put applies one write (cells naming the partition's shards, with its ID, conditions
	// and atomicity: command.Write) and returns its outcome. Leader-only. It blocks until the
	// write is applied (raft: committed and applied on the leader; async: on the primary
	// master, or buffered) or ctx ends.
	Put(ctx context.Context, w command.Write) (command.WriteResult, error)
	// Read runs one typed read against the partition's tables with consistency c: Strong is
	// leader-only (raft: after a read index; async: on the master), Stale is served here
	// (raft: this replica; async: a minion). Errors also partition.ErrBadRead and
	// command.ErrShardOutOfRange.
	Read(ctx context.Context, c Consistency, req partition.ReadRequest) (partition.ReadResult, error)
	// ApplyGroup runs one consumer-group command on the group's coordinator state, which
	// the partition holds. Leader-only. A refused command wraps consumer.ErrBadCommand.
	ApplyGroup(ctx context.Context, group string, cmd consumer.Command) (consumer.Result, error)
	// ApplyIndex runs one index command (an upsert of entries, a table drop, a catalog
	// command). Leader-only. A refused catalog command wraps indexes.ErrBadCommand,
	// ErrNotFound or ErrNotReady.
	ApplyIndex(ctx context.Context, cmd command.Index) (command.IndexResult, error)
	// ApplySchema runs one schema command (register a version of a column's schema on this
	// partition). Leader-only. Its outcome is a value (command.SchemaResult), never a refusal
	// error.
	ApplySchema(ctx context.Context, cmd command.Schema) (command.SchemaResult, error)
	// EraseRow erases every cell of row rowKey of shard (one of the partition's) and appends
	// a tombstone to the shard's log (raft: a replicated command; async: on the primary
	// master, never buffered, its buffered copies deleted). Leader-only. Idempotent: a row
	// with no cell answers Erased 0. A shard outside the partition wraps
	// command.ErrShardOutOfRange.
	EraseRowFrom(ctx context.Context, shard int, rowKey uuid.UUID, origin string) (command.EraseResult, error)
	// Backup writes a consistent snapshot stream of the partition to w; RestoreBackup
	// replaces the partition's state with one. Leader-only. An async partition refuses both
	// with partition.ErrNotRaft (ErrAsyncDatastore).
	Backup(ctx context.Context, w io.Writer) (fsm.BackupInfo, error)
	RestoreBackup(ctx context.Context, r io.Reader, opts RestoreOptions) (partition.RestoreResult, error)
	// Leader returns the node id (and raft address, when known) to send leader-only
	// requests to, without I/O: a raft replica's view of its group's leader ("" while an
	// election is under way), or this node for an async partition.
	Leader() (id, addr string)
	// Elected reports whether Leader is elected and may move at any time (raft): a
	// leader-only request that fails as unavailable or whose leader moved is then retried
	// within the request's deadline, and clients are told where the leader is. When false
	// (async) the partition's answer is final for the request, and any node serves it.
	Elected() bool
	// Status reports the partition's state without I/O: partition.Status.Raft for a raft
	// replica, Async for an async partition.
	Status() partition.Status
	// Close stops serving: calls under way fail with ErrClosed or ErrIndeterminate. The
	// store and the storage clusters are the node's.
	Close() error
}

// raftReplica is what membership and hosting need of a raft replica beyond Partition: its
// raft instance (configuration, voters, leadership transfer), whether it leads, the
// not-leader answer it gives, and its tables (dropped when the replica is removed). A
// partition that is not a raft replica (async) has none of these.
type raftReplica interface {
	Partition
	Raft() *raft.Raft
	IsLeader() bool
	NotLeader() error
	Store() *storage.PartitionStore
	// Shards is the range the replica holds now (a split shrinks it).
	Shards() cells.ShardRange
	// Quiesced and Wake: see partition.Raft and quiesce.go.
	Quiesced() bool
	Wake()
}

var (
	_ Partition   = (*partition.Raft)(nil)
	_ Partition   = (*partition.Async)(nil)
	_ raftReplica = (*partition.Raft)(nil)
)

// Errors of the partitions, as the node returns them: the same values as the partition
// package's (and fsm's for ErrBadSnapshot), so errors.Is matches either name.
var (
	// ErrUnavailable: the partition cannot serve now (no leader known, no master, a queue
	// full); nothing was done and a retry is safe.
	ErrUnavailable = partition.ErrUnavailable
	// ErrIndeterminate: a command was sent but its outcome is unknown (ctx ended, the answer
	// was lost); it may still be applied. Retrying is safe: every command is idempotent.
	ErrIndeterminate = partition.ErrIndeterminate
	// ErrClosed: the partition on this node was closed (the node is stopping).
	ErrClosed = partition.ErrClosed
	// ErrNotEmpty: Restore without force into a partition that holds cells; nothing changed.
	ErrNotEmpty = partition.ErrNotEmpty
	// ErrCellsLost: Restore into a partition holding cells absent from the backup, without
	// accepting exactly that many lost cells (a *CellsLostError carries the count); nothing
	// changed.
	ErrCellsLost = partition.ErrCellsLost
	// ErrNoBackup: Backup or Restore of a replica whose state machine keeps no tables (the
	// benchmark's raft-noop baseline).
	ErrNoBackup = partition.ErrNoBackup
	// ErrBadSnapshot: a backup stream is truncated, malformed or of another shard range.
	ErrBadSnapshot = fsm.ErrBadSnapshot
	// ErrAsyncDatastore: a raft-only operation (hosting a replica, membership changes,
	// backup, restore) on an async datastore. It is the refusal of an async partition's
	// Backup and RestoreBackup (partition.ErrNotRaft).
	ErrAsyncDatastore = partition.ErrNotRaft
)

// Consistency of a read: Strong (the default) or Stale (partition.Consistency).
type Consistency = partition.Consistency

// Read consistencies.
const (
	// Strong reads are linearizable: served by the partition leader after a read index (raft),
	// or by the storage cluster's master (async: read-your-writes).
	Strong = partition.Strong
	// Stale reads are served by any replica (raft) or a minion (async) and may miss recent
	// writes.
	Stale = partition.Stale
)

// BoundedStale returns the consistency of a stale read whose data is at most d old
// (partition.BoundedStale): a replica serves it once its store reflects every write
// acknowledged before d ago, else another replica does (the leader always can); a read no
// replica can serve within the bound fails with ErrUnavailable.
func BoundedStale(d time.Duration) Consistency { return partition.BoundedStale(d) }
