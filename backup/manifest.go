package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/internal/atomicfile"
	"github.com/schemaless-db/schemaless/topology"
)

// FormatVersion is the version of manifest.json this package writes and reads.
const FormatVersion = 1

// ManifestName is the name of the manifest in a backup directory. It is written last, so a
// directory with a manifest holds a complete backup.
const ManifestName = "manifest.json"

// Errors of the package. Others describe the fault in words (a file that does not match its
// manifest, a target of another layout) and wrap the underlying error where there is one.
var (
	// ErrDirNotEmpty: Backup's directory holds files; a backup goes into an empty or new one.
	ErrDirNotEmpty = errors.New("backup: the directory is not empty")
	// ErrTargetNotEmpty: Restore without Force found cells in the target datastore (see
	// NotEmptyError); nothing was restored.
	ErrTargetNotEmpty = errors.New("backup: the target datastore holds cells")
	// ErrCellsLost: Restore found cells in the target that the backup lacks, and the caller
	// did not accept exactly that many (see CellsLostError); nothing was restored.
	ErrCellsLost = errors.New("backup: the restore would drop cells absent from the backup")
)

// CellsLostError is the error of a Restore whose dry runs found a total of cells lost other
// than the one accepted (RestoreOptions.AcceptLostCells; 0 with Force alone). It unwraps to
// ErrCellsLost.
type CellsLostError struct {
	// Datastore is the target datastore.
	Datastore string
	// Report is the dry runs' report: per partition and in total, the cells lost.
	Report Report
	// Accepted is RestoreOptions.AcceptLostCells (nil: not given).
	Accepted *int64
}

// Error says how many cells would be lost, and where.
func (e *CellsLostError) Error() string {
	var where []string
	for _, p := range e.Report.Partitions {
		if p.CellsLost > 0 {
			where = append(where, fmt.Sprintf("%d in partition %d", p.CellsLost, p.ID))
		}
	}
	accepted := "none accepted"
	if e.Accepted != nil {
		accepted = fmt.Sprintf("%d accepted", *e.Accepted)
	}
	return fmt.Sprintf("backup: the restore would drop %d cells of %s absent from the backup (%s), %s; nothing restored",
		e.Report.CellsLost, e.Datastore, strings.Join(where, ", "), accepted)
}

// Unwrap returns ErrCellsLost.
func (e *CellsLostError) Unwrap() error { return ErrCellsLost }

// NotEmptyError is the error of a Restore without Force into a datastore some partitions of
// which hold cells. It unwraps to ErrTargetNotEmpty.
type NotEmptyError struct {
	// Datastore is the target datastore.
	Datastore string
	// Partitions are the ids of the partitions holding cells, in order.
	Partitions []int
}

// Error says which partitions hold cells.
func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("backup: partitions %v of %s hold cells; nothing restored", e.Partitions, e.Datastore)
}

// Unwrap returns ErrTargetNotEmpty.
func (e *NotEmptyError) Unwrap() error { return ErrTargetNotEmpty }

// Manifest is a backup directory's manifest.json (see the package documentation).
type Manifest struct {
	Format     int         `json:"format"`
	Datastore  string      `json:"datastore"`
	Mode       string      `json:"mode"`
	Shards     int         `json:"shards"`
	StartedAt  time.Time   `json:"started_at"`
	FinishedAt time.Time   `json:"finished_at"`
	Partitions []Partition `json:"partitions"`
}

// Partition is one partition in the manifest: its file and what the file holds. AppliedIndex
// and AppliedTerm are the raft entry of the source cluster the backup reflects.
type Partition struct {
	ID              int          `json:"id"`
	FirstShard      int          `json:"first_shard"`
	LastShard       int          `json:"last_shard"`
	File            string       `json:"file"`
	Bytes           int64        `json:"bytes"`
	SHA256          string       `json:"sha256"`
	SnapshotVersion int          `json:"snapshot_version"`
	AppliedIndex    uint64       `json:"applied_index"`
	AppliedTerm     uint64       `json:"applied_term"`
	Cells           int64        `json:"cells"`
	KVRows          int64        `json:"kv_rows"`
	IndexEntries    int64        `json:"index_entries"`
	ShardStats      []ShardStats `json:"shard_stats"`
	StartedAt       time.Time    `json:"started_at"`
	FinishedAt      time.Time    `json:"finished_at"`
}

// ShardStats is one shard of a partition's file: its highest added_id and its cells.
type ShardStats struct {
	Shard      int   `json:"shard"`
	MaxAddedID int64 `json:"max_added_id"`
	Cells      int64 `json:"cells"`
}

// FileName is the file name of partition id of datastore ds in a backup directory.
func FileName(ds string, id int) string { return fmt.Sprintf("%s-p%d.snap", ds, id) }

// fillFromInfo sets mp's stream fields from what a verification of its stream found.
func fillFromInfo(mp *Partition, info fsm.BackupInfo) {
	mp.Bytes = info.Bytes
	mp.SnapshotVersion = info.Header.Version
	mp.AppliedIndex, mp.AppliedTerm = info.Header.Applied.Index, info.Header.Applied.Term
	mp.Cells, mp.KVRows, mp.IndexEntries = info.Cells, info.KVs, info.IndexEntries
	mp.ShardStats = make([]ShardStats, len(info.Shards))
	for i, s := range info.Shards {
		mp.ShardStats[i] = ShardStats{Shard: s.Shard, MaxAddedID: s.MaxAddedID, Cells: s.Cells}
	}
}

// ReadManifest reads dir's manifest and checks that this package wrote it: its format, mode
// raft and at least one partition. It does not look at the files (see Verify).
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	path := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("%s: no readable backup manifest: %w", dir, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	if m.Format != FormatVersion {
		return m, fmt.Errorf("%s: format %d, this build reads format %d", path, m.Format, FormatVersion)
	}
	if m.Mode != topology.ModeRaft || len(m.Partitions) == 0 {
		return m, fmt.Errorf("%s: a backup of %q with %d partitions is not one this build wrote", path, m.Mode, len(m.Partitions))
	}
	return m, nil
}

// writeManifest writes m into dir as ManifestName, durably (see writeFileSync).
func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ManifestName), append(b, '\n'))
}
