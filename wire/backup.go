package wire

// The shapes of the backup and restore endpoints of a raft partition (see docs/api.md, "Backup
// and restore"):
//
//	GET  /v1/admin/backup/{ds}/{partition}              the partition's snapshot stream
//	POST /v1/admin/restore/{ds}/{partition}             replace the partition with one
//	     [?dry_run=true | ?force=true | ?accept_lost_cells=N]
//
// A backup answers 200 with Content-Type application/octet-stream, the stream as its body, the
// stream's header fields as HTTP headers (known when the stream starts) and its counts and
// checksum as HTTP trailers (sent after the stream; absent if it broke).

// Headers and trailers of a backup answer. Integers are decimal; the SHA-256 is lower-case hex.
const (
	// HeaderSnapshotVersion is the stream's format version (see fsm/DESIGN.md).
	HeaderSnapshotVersion = "X-Schemaless-Snapshot-Version"
	// HeaderFirstShard and HeaderLastShard are the partition's shards, inclusive.
	HeaderFirstShard = "X-Schemaless-First-Shard"
	HeaderLastShard  = "X-Schemaless-Last-Shard"
	// HeaderAppliedIndex and HeaderAppliedTerm are the raft entry the stream reflects.
	HeaderAppliedIndex = "X-Schemaless-Applied-Index"
	HeaderAppliedTerm  = "X-Schemaless-Applied-Term"
	// TrailerCells, TrailerKVRows and TrailerIndexEntries count the stream's records.
	TrailerCells        = "X-Schemaless-Cells"
	TrailerKVRows       = "X-Schemaless-Kv-Rows"
	TrailerIndexEntries = "X-Schemaless-Index-Entries"
	// TrailerBytes and TrailerSHA256 are the stream's length and SHA-256.
	TrailerBytes  = "X-Schemaless-Bytes"
	TrailerSHA256 = "X-Schemaless-Sha256"
)

// BackupInfo is what a backup answer says of its stream besides the stream itself: the header
// fields (HeaderSnapshotVersion ... HeaderAppliedTerm) and the trailers (TrailerCells ...
// TrailerSHA256). Trailers is false when the answer ended without them; the counts are then 0.
type BackupInfo struct {
	SnapshotVersion int
	FirstShard      int
	LastShard       int
	AppliedIndex    uint64
	AppliedTerm     uint64

	Trailers     bool
	Cells        int64
	KVRows       int64
	IndexEntries int64
	Bytes        int64
	SHA256       string
}

// Query parameters of a restore. A restore compares the partition's cells with the backup's
// by key (shard, row key, column key, ref key): RestoreResult.CellsLost counts the partition's
// cells whose key the backup does not hold, which the restore would drop (cells written after
// the backup, for one).
const (
	// RestoreDryRunParam "true" stages and checks the backup and compares it with the
	// partition, changing nothing: the answer (200) is a RestoreResult with DryRun true.
	// "false" or absent: a restore.
	RestoreDryRunParam = "dry_run"
	// RestoreForceParam "true" replaces a partition that holds cells when every one of them is
	// in the backup (CellsLost 0). It never allows dropping cells: with CellsLost > 0 the
	// restore is refused (409) unless RestoreAcceptLostCellsParam names the count. "false" or
	// absent: a partition holding cells is refused (409).
	RestoreForceParam = "force"
	// RestoreAcceptLostCellsParam is a decimal count >= 0: the restore proceeds only if
	// CellsLost, counted while the partition's writes are held back just before it is
	// replaced, equals it (else 409, the message naming the count, nothing changed). It
	// allows replacing a partition that holds cells, as RestoreForceParam does.
	RestoreAcceptLostCellsParam = "accept_lost_cells"
)

// RestoreResult answers a restore or a dry run: the backup restored (or checked), as the
// partition's leader read it, and its comparison with the partition. AppliedIndex and
// AppliedTerm are the backup's (the source cluster's raft log), not the target's; Bytes is
// the stream's length; Cells counts the backup's cells. TargetCells is the number of cells
// the partition held when compared (for a restore: those it replaced); CellsLost the number
// of them whose key the backup lacks (dropped by the restore, or by a restore after this dry
// run if nothing is written meanwhile).
type RestoreResult struct {
	Datastore       string        `json:"datastore"`
	Partition       int           `json:"partition"`
	DryRun          bool          `json:"dry_run"`
	TargetCells     int64         `json:"target_cells"`
	CellsLost       int64         `json:"cells_lost"`
	SnapshotVersion int           `json:"snapshot_version"`
	FirstShard      int           `json:"first_shard"`
	LastShard       int           `json:"last_shard"`
	AppliedIndex    uint64        `json:"applied_index"`
	AppliedTerm     uint64        `json:"applied_term"`
	Cells           int64         `json:"cells"`
	KVRows          int64         `json:"kv_rows"`
	IndexEntries    int64         `json:"index_entries"`
	Bytes           int64         `json:"bytes"`
	Shards          []ShardResult `json:"shards"`
}

// ShardResult is one shard of a restored backup: its highest added_id and its cells.
type ShardResult struct {
	Shard      int   `json:"shard"`
	MaxAddedID int64 `json:"max_added_id"`
	Cells      int64 `json:"cells"`
}
