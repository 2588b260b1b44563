package fsm

import (
	"bufio"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/vmihailenco/msgpack/v5"
)

// ScanSnapshotCellKeys reads the records of a snapshot stream whose header was already read
// (what VerifySnapshotRecords reads: r starts at the first record) up to its trailer, and calls
// fn with the shard and key of every cell record, in stream order (shard by shard, added_id
// increasing within a shard). Other records (KV rows, index entries, request records) are
// skipped. It is meant for a stream that VerifySnapshotRecords accepted; it checks only what
// it decodes. It holds one record in memory at a time. Errors: ErrBadSnapshot (wrapped,
// saying where), r's read errors, fn's (returned as they are, ending the scan).
func ScanSnapshotCellKeys(r io.Reader, fn func(shard int, key cells.Key) error) error {
	dec := msgpack.NewDecoder(bufio.NewReaderSize(r, 256<<10))
	for n := int64(0); ; n++ {
		var rec snapshotRecord
		if err := dec.Decode(&rec); err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, n, err)
		}
		switch {
		case rec.Shard == trailerShard:
			return nil
		case rec.Shard < 0:
			continue
		}
		rk, err := uuid.FromBytes(rec.RowKey)
		if err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, n, err)
		}
		if err := fn(int(rec.Shard), cells.Key{RowKey: rk, ColumnKey: rec.Column, RefKey: rec.RefKey}); err != nil {
			return err
		}
	}
}
