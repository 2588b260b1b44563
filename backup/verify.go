package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/schemaless-db/schemaless/fsm"
)

// Verify checks every file of m in dir against m, with no node: its size and SHA-256, and its
// stream (header, records, order, trailer counts, each shard's highest added_id and cells). It
// reads the files one after another and returns the first mismatch, naming the partition and
// the file, or nil.
func Verify(dir string, m Manifest) error {
	for _, mp := range m.Partitions {
		if err := verifyFile(dir, mp); err != nil {
			return fmt.Errorf("partition %d: %w", mp.ID, err)
		}
	}
	return nil
}

func verifyFile(dir string, mp Partition) error {
	if mp.File != filepath.Base(mp.File) {
		return fmt.Errorf("file %q: not a file name", mp.File)
	}
	f, err := os.Open(filepath.Join(dir, mp.File))
	if err != nil {
		return err
	}
	defer f.Close()
	sum := sha256.New()
	info, verr := fsm.VerifySnapshot(io.TeeReader(f, sum))
	if verr != nil {
		// Read the rest, so that the checksum names the fault when it is one.
		_, _ = io.Copy(sum, f)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != mp.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the manifest says %s: the file changed since the backup", mp.File, got, mp.SHA256)
	}
	if verr != nil {
		return fmt.Errorf("%s: %w", mp.File, verr)
	}
	var got Partition
	fillFromInfo(&got, info)
	switch {
	case got.Bytes != mp.Bytes:
		return fmt.Errorf("%s: %d bytes, the manifest says %d", mp.File, got.Bytes, mp.Bytes)
	case info.Header.FirstShard != mp.FirstShard || info.Header.LastShard != mp.LastShard:
		return fmt.Errorf("%s: shards %d..%d, the manifest says %d..%d", mp.File, info.Header.FirstShard, info.Header.LastShard, mp.FirstShard, mp.LastShard)
	case got.AppliedIndex != mp.AppliedIndex || got.AppliedTerm != mp.AppliedTerm || got.SnapshotVersion != mp.SnapshotVersion:
		return fmt.Errorf("%s: header (version %d, index %d, term %d) differs from the manifest's (%d, %d, %d)", mp.File,
			got.SnapshotVersion, got.AppliedIndex, got.AppliedTerm, mp.SnapshotVersion, mp.AppliedIndex, mp.AppliedTerm)
	case got.Cells != mp.Cells || got.KVRows != mp.KVRows || got.IndexEntries != mp.IndexEntries:
		return fmt.Errorf("%s: %d cells, %d KV rows, %d index entries; the manifest says %d, %d, %d", mp.File,
			got.Cells, got.KVRows, got.IndexEntries, mp.Cells, mp.KVRows, mp.IndexEntries)
	}
	if len(got.ShardStats) != len(mp.ShardStats) {
		return fmt.Errorf("%s: %d shards, the manifest lists %d", mp.File, len(got.ShardStats), len(mp.ShardStats))
	}
	for i := range got.ShardStats {
		if got.ShardStats[i] != mp.ShardStats[i] {
			return fmt.Errorf("%s: shard %+v, the manifest says %+v", mp.File, got.ShardStats[i], mp.ShardStats[i])
		}
	}
	return nil
}
