package fsm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// BackupInfo describes one snapshot stream: its header, how many records of each kind it holds,
// its cells per shard and its length. Backup returns it for the stream it wrote and
// VerifySnapshot for the stream it read; for the same stream both are equal.
type BackupInfo struct {
	// Header is the stream's header: format version, shard range, and the applied raft index
	// and term of the state it holds.
	Header SnapshotHeader
	// Cells, KVs, IndexEntries and Requests count the stream's records (the trailer's counts).
	Cells        int64
	KVs          int64
	IndexEntries int64
	Requests     int64
	// Shards has one entry per shard of the header's range, in shard order.
	Shards []ShardInfo
	// Bytes is the stream's length, magic to trailer.
	Bytes int64
}

// ShardInfo is one shard of a snapshot stream: its number of cells and its highest added_id (0
// for a shard without cells). added_ids are dense (1, 2, 3, ...), so in a stream of a live
// partition MaxAddedID equals Cells.
type ShardInfo struct {
	Shard      int
	MaxAddedID int64
	Cells      int64
}

// Backup writes a snapshot stream of the partition (the format of Snapshot/Persist, see
// DESIGN.md) to w and returns what it wrote. It opens its own read view (BeginSnapshot), which
// holds exactly the state after some applied batch: Header.Applied says which raft entry. It
// runs on the caller's goroutine, concurrently with ApplyBatch; it does not see entries applied
// after its view opened, so a caller that needs every acknowledged write in the backup first
// waits until they are applied (partition.Raft.Backup does a read index).
//
// ctx bounds the view's reads. w receives buffered writes (256 KiB); on an error the bytes
// already written are a truncated stream, which VerifySnapshot and Restore reject. The view
// holds a read connection of the store until Backup returns; on MySQL it also holds metadata
// locks that make a concurrent Restore of the same store wait. Errors: ErrFailed (the FSM has
// stopped), the store's errors, w's errors.
func (f *FSM) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	if err := f.Failed(); err != nil {
		return BackupInfo{}, fmt.Errorf("%w: %w", ErrFailed, err)
	}
	tx, err := f.cfg.Store.BeginSnapshot(ctx)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("fsm: backup: begin snapshot: %w", err)
	}
	defer tx.Close()
	info, err := writeStream(ctx, w, tx, f.Shards())
	if err != nil {
		return info, fmt.Errorf("fsm: backup: %w", err)
	}
	return info, nil
}

// VerifySnapshot reads a whole snapshot stream from r and checks it without a store: the magic
// and version, that every record decodes (row keys, index entries typed by their tables' fields
// from the KV rows), that KV rows come first, that cells come shard by shard inside the header's
// range in strictly increasing added_id order, that the trailer's counts match, and that
// nothing follows the trailer. It returns the stream's BackupInfo. A stream it accepts is one
// Restore accepts (as long as the partition's shards match the header's). Errors:
// ErrBadSnapshot (wrapped, saying where), or r's read error.
func VerifySnapshot(r io.Reader) (BackupInfo, error) {
	cr := &countReader{r: r}
	br := bufio.NewReaderSize(cr, 256<<10)
	h, err := ReadSnapshotHeader(br)
	if err != nil {
		return BackupInfo{}, readError(cr, err)
	}
	info, err := verifyRecords(h, br)
	if err != nil {
		return info, readError(cr, err)
	}
	info.Bytes = cr.n - int64(br.Buffered())
	return info, nil
}

// VerifySnapshotRecords is VerifySnapshot for a stream whose header h was already read from r
// (ReadSnapshotHeader): it reads and checks the records and the trailer, up to the end of r.
// The returned BackupInfo's Bytes counts what it read from r (the records only).
func VerifySnapshotRecords(h SnapshotHeader, r io.Reader) (BackupInfo, error) {
	cr := &countReader{r: r}
	br := bufio.NewReaderSize(cr, 256<<10)
	info, err := verifyRecords(h, br)
	if err != nil {
		return info, readError(cr, err)
	}
	info.Bytes = cr.n - int64(br.Buffered())
	return info, nil
}

// EncodeSnapshotHeader returns the start of a snapshot stream: the magic and h. A stream's
// header can be replaced by writing this, then the records that followed the old header.
func EncodeSnapshotHeader(h SnapshotHeader) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(snapshotMagic)
	if err := msgpack.NewEncoder(&b).Encode(&h); err != nil {
		return nil, fmt.Errorf("fsm: encode snapshot header: %w", err)
	}
	return b.Bytes(), nil
}

// verifyRecords checks the records after header h, read from br, up to the end of br.
func verifyRecords(h SnapshotHeader, br *bufio.Reader) (BackupInfo, error) {
	info := BackupInfo{Header: h}
	shards := cells.ShardRange{First: h.FirstShard, Last: h.LastShard}
	if h.FirstShard < 0 || h.LastShard < h.FirstShard || h.LastShard >= cells.MaxShards {
		return info, fmt.Errorf("%w: shards %d..%d", ErrBadSnapshot, h.FirstShard, h.LastShard)
	}
	info.Shards = make([]ShardInfo, 0, h.LastShard-h.FirstShard+1)
	for s := h.FirstShard; s <= h.LastShard; s++ {
		info.Shards = append(info.Shards, ShardInfo{Shard: s})
	}
	dec := msgpack.NewDecoder(br)
	var (
		kv        []storage.KV
		tables    map[string][]indexes.Field
		pastKV    bool
		lastShard = -1
	)
	for n := int64(0); ; n++ {
		var r snapshotRecord
		if err := dec.Decode(&r); err != nil {
			return info, fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, n, err)
		}
		if r.Shard != kvShard && !pastKV {
			pastKV = true
			var err error
			if tables, _, err = indexTablesOf(kv); err != nil {
				return info, err
			}
		}
		switch r.Shard {
		case kvShard:
			if pastKV {
				return info, fmt.Errorf("%w: KV record %d after cells or index entries", ErrBadSnapshot, n)
			}
			if h.Version < 2 {
				return info, fmt.Errorf("%w: KV record in a version %d stream", ErrBadSnapshot, h.Version)
			}
			kv = append(kv, storage.KV{Key: r.Column, Value: r.Body})
			info.KVs++
		case indexShard:
			if h.Version < 3 {
				return info, fmt.Errorf("%w: index record in a version %d stream", ErrBadSnapshot, h.Version)
			}
			if _, err := indexRecord(&r, tables, shards, info.IndexEntries); err != nil {
				return info, err
			}
			info.IndexEntries++
		case requestShard:
			if h.Version < 4 {
				return info, fmt.Errorf("%w: request record in a version %d stream", ErrBadSnapshot, h.Version)
			}
			if _, err := requestRecord(&r, info.Requests); err != nil {
				return info, err
			}
			info.Requests++
		case trailerShard:
			reqs, ok := trailerRequests(&r, h.Version)
			if !ok || r.AddedID != info.Cells || r.RefKey != info.KVs || r.CreatedAtMicros != info.IndexEntries || reqs != info.Requests {
				return info, fmt.Errorf("%w: trailer counts %d cells, %d KV rows, %d index entries and %d request records, read %d, %d, %d and %d",
					ErrBadSnapshot, r.AddedID, r.RefKey, r.CreatedAtMicros, reqs, info.Cells, info.KVs, info.IndexEntries, info.Requests)
			}
			if _, err := br.ReadByte(); err == nil {
				return info, fmt.Errorf("%w: data after the trailer", ErrBadSnapshot)
			} else if !errors.Is(err, io.EOF) {
				return info, err
			}
			return info, nil
		default:
			if _, err := cellRecord(&r, shards, info.Cells); err != nil {
				return info, err
			}
			s := int(r.Shard)
			si := &info.Shards[s-h.FirstShard]
			if s < lastShard || r.AddedID <= si.MaxAddedID {
				return info, fmt.Errorf("%w: record %d: shard %d added_id %d out of order", ErrBadSnapshot, n, s, r.AddedID)
			}
			lastShard = s
			si.MaxAddedID = r.AddedID
			si.Cells++
			info.Cells++
		}
	}
}

// countReader counts the bytes read through it and keeps its first error.
type countReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// readError prefers the reader's own failure (a broken connection, a body over its limit) to
// the decoding error it caused.
func readError(cr *countReader, err error) error {
	if cr.err != nil && !errors.Is(cr.err, io.EOF) {
		return fmt.Errorf("fsm: read snapshot stream after %d bytes: %w", cr.n, cr.err)
	}
	return err
}
