package fsm

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// snapshotMagic starts every snapshot stream; splitBaseMagic (as long) starts the base of a
// split's new partition (WriteSplitBase), which holds a header and no record.
const (
	snapshotMagic  = "schemaless-snapshot\x00"
	splitBaseMagic = "schemaless-splitbase"
)

// ErrSplitBase: the snapshot is the base a split's new partition started from, which holds no
// data (each replica that applied the split holds the copy in its store): it cannot be
// restored. A leader never sends it: it takes a real snapshot when a replica lacking the copy
// needs one, and sends that (partition.baseSnapshots).
var ErrSplitBase = fmt.Errorf("%w: the base of a split's new partition, no data", ErrBadSnapshot)

// WriteSplitBase writes the base of a split's new partition holding shards at applied: its
// header, no record (see ErrSplitBase).
func WriteSplitBase(w io.Writer, shards cells.ShardRange, applied storage.AppliedState) error {
	if _, err := io.WriteString(w, splitBaseMagic); err != nil {
		return err
	}
	return msgpack.NewEncoder(w).Encode(&SnapshotHeader{Version: snapshotVersion, FirstShard: shards.First, LastShard: shards.Last, Applied: applied})
}

// snapshotVersion is the format version this build writes after the magic. Version 2 added
// the KV records; version 1 streams (no KV rows) are still read, so that a node upgraded from a
// build without KV rows can restore the snapshots it or its peers wrote.
// Version 3 added the index entry records, version 4 the request records (outcomes of writes
// with an idempotency key, kept for RequestWindow).
const (
	snapshotVersion    = 4
	minSnapshotVersion = 1
)

// Shard values of the records that are not cells.
const (
	// trailerShard marks the trailer: AddedID counts the cell records, RefKey the KV records.
	trailerShard = -1
	// kvShard marks a KV row: Column is its key, Body its value.
	kvShard = -2
	// indexShard marks an index entry: Column is its table, AddedID its index shard, RowKey
	// its row key, RefKey its violation, Body an encoded snapshotEntry.
	indexShard = -3
	// requestShard marks a request record: RowKey is its ID, AddedID its time in microseconds,
	// Body the record. The trailer of a version 4 stream counts them in Body (8 bytes, big
	// endian).
	requestShard = -4
)

// requestRecord decodes r, the request record number n, into a restore record.
func requestRecord(r *snapshotRecord, n int64) (storage.RestoreRecord, error) {
	id, err := uuid.FromBytes(r.RowKey)
	if err != nil {
		return storage.RestoreRecord{}, fmt.Errorf("%w: request record %d: %w", ErrBadSnapshot, n, err)
	}
	return storage.RestoreRecord{Request: &storage.RequestRecord{ID: id, CreatedAt: time.UnixMicro(r.AddedID).UTC(), Record: r.Body}}, nil
}

// trailerRequests returns the request records a trailer counts (0 before version 4), and false
// when its Body is malformed.
func trailerRequests(r *snapshotRecord, version int) (int64, bool) {
	if version < 4 {
		return 0, len(r.Body) == 0
	}
	if len(r.Body) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(r.Body)), true
}

// snapshotEntry is the Body of an index entry record: values packed as in index commands.
type snapshotEntry struct {
	_msgpack struct{} `msgpack:",as_array"`
	Values   []any
	Refs     []byte
}

// ErrBadSnapshot: a snapshot stream is truncated, of another format, or of another partition.
var ErrBadSnapshot = errors.New("fsm: bad snapshot")

// SnapshotHeader opens a snapshot stream. Applied is the store's applied state inside the read
// view, which can be below the raft snapshot's index when the last entries carried no command.
type SnapshotHeader struct {
	_msgpack   struct{} `msgpack:",as_array"`
	Version    int
	FirstShard int
	LastShard  int
	Applied    storage.AppliedState
}

// ReadSnapshotHeader reads the header of a snapshot stream, leaving r after it when r is an
// io.ByteScanner (a *bufio.Reader; other readers are read ahead). Streams of version 1 (no KV
// rows), 2 (no index entries) and 3 are accepted; anything else returns ErrBadSnapshot.
func ReadSnapshotHeader(r io.Reader) (SnapshotHeader, error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != snapshotMagic && string(magic) != splitBaseMagic {
		return SnapshotHeader{}, fmt.Errorf("%w: no magic", ErrBadSnapshot)
	}
	var h SnapshotHeader
	if err := msgpack.NewDecoder(r).Decode(&h); err != nil {
		return SnapshotHeader{}, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	if string(magic) == splitBaseMagic {
		return h, ErrSplitBase
	}
	if h.Version < minSnapshotVersion || h.Version > snapshotVersion {
		return SnapshotHeader{}, fmt.Errorf("%w: version %d", ErrBadSnapshot, h.Version)
	}
	return h, nil
}

// Snapshot opens a consistent read view of the partition's tables (raft.FSM). Called on the FSM
// goroutine, so the view is exactly the state after the last applied batch.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.Failed(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFailed, err)
	}
	tx, err := f.cfg.Store.BeginSnapshot(context.Background())
	if err != nil {
		return nil, fmt.Errorf("fsm: begin snapshot: %w", err)
	}
	return &snapshot{tx: tx, shards: f.shards, timeout: f.cfg.StoreTimeout}, nil
}

type snapshot struct {
	tx      *storage.SnapshotTx
	shards  cells.ShardRange
	timeout time.Duration
}

// Persist streams the view into sink: magic, header, one record per KV row in key order, one
// record per cell shard by shard in added_id order, and a trailer holding both counts. The KV
// rows come first because Restore must hand them to Store.Restore before the cells. It runs
// concurrently with ApplyBatch.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) write(w io.Writer) error {
	_, err := writeStream(context.Background(), w, s.tx, s.shards)
	return err
}

// writeStream writes the snapshot stream of the view tx of shards into w (the one writer of
// both Persist and Backup) and returns what it wrote. It buffers its writes; ctx bounds the
// view's reads.
func writeStream(ctx context.Context, w io.Writer, tx *storage.SnapshotTx, shards cells.ShardRange) (BackupInfo, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	info := BackupInfo{
		Header: SnapshotHeader{Version: snapshotVersion, FirstShard: shards.First, LastShard: shards.Last, Applied: tx.Applied()},
		Shards: make([]ShardInfo, 0, shards.Last-shards.First+1),
	}
	if _, err := bw.WriteString(snapshotMagic); err != nil {
		return info, err
	}
	enc := msgpack.NewEncoder(bw)
	if err := enc.Encode(&info.Header); err != nil {
		return info, err
	}
	tables := map[string][]indexes.Field{}
	err := tx.ScanKV(ctx, func(kv storage.KV) error {
		info.KVs++
		if name, ok := strings.CutPrefix(kv.Key, indexTableKeyPrefix); ok {
			var fields []indexes.Field
			if err := msgpack.Unmarshal(kv.Value, &fields); err != nil {
				return fmt.Errorf("index table %s: %w", name, err)
			}
			tables[name] = fields
		}
		return enc.Encode(&snapshotRecord{Shard: kvShard, Column: kv.Key, Body: kv.Value})
	})
	if err != nil {
		return info, fmt.Errorf("KV rows: %w", err)
	}
	for shard := shards.First; shard <= shards.Last; shard++ {
		si := ShardInfo{Shard: shard}
		err := tx.ScanShard(ctx, shard, func(c cells.Cell) error {
			si.Cells++
			si.MaxAddedID = c.AddedID
			return enc.Encode(&snapshotRecord{
				Shard: int32(shard), AddedID: c.AddedID, RowKey: c.RowKey[:], Column: c.ColumnKey,
				RefKey: c.RefKey, Body: c.Body, CreatedAtMicros: c.CreatedAt.UnixMicro(), Origin: c.Origin,
			})
		})
		if err != nil {
			return info, fmt.Errorf("shard %d: %w", shard, err)
		}
		info.Cells += si.Cells
		info.Shards = append(info.Shards, si)
	}
	names := make([]string, 0, len(tables))
	for name := range tables {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := IndexTableOf(name, tables[name])
		for shard := shards.First; shard <= shards.Last; shard++ {
			err := tx.ScanIndex(ctx, shard, t, func(e storage.IndexEntry) error {
				body, err := msgpack.Marshal(&snapshotEntry{Values: command.PackIndexValues(e.Values), Refs: e.Refs})
				if err != nil {
					return err
				}
				info.IndexEntries++
				return enc.Encode(&snapshotRecord{Shard: indexShard, AddedID: int64(shard), RowKey: e.RowKey[:], Column: name, RefKey: e.Violation, Body: body})
			})
			if err != nil {
				return info, fmt.Errorf("index %s shard %d: %w", name, shard, err)
			}
		}
	}
	err = tx.ScanRequests(ctx, func(r storage.RequestRecord) error {
		info.Requests++
		return enc.Encode(&snapshotRecord{Shard: requestShard, RowKey: r.ID[:], AddedID: r.CreatedAt.UnixMicro(), Body: r.Record})
	})
	if err != nil {
		return info, fmt.Errorf("request records: %w", err)
	}
	nreq := binary.BigEndian.AppendUint64(nil, uint64(info.Requests))
	if err := enc.Encode(&snapshotRecord{Shard: trailerShard, AddedID: info.Cells, RefKey: info.KVs, CreatedAtMicros: info.IndexEntries, Body: nreq}); err != nil {
		return info, err
	}
	if err := bw.Flush(); err != nil {
		return info, err
	}
	info.Bytes = cw.n
	return info, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// indexTablesOf returns the index tables named by a stream's KV rows (index/table/<name>).
func indexTablesOf(kv []storage.KV) (map[string][]indexes.Field, []storage.IndexTable, error) {
	tables := map[string][]indexes.Field{}
	var list []storage.IndexTable
	for _, row := range kv {
		if name, ok := strings.CutPrefix(row.Key, indexTableKeyPrefix); ok {
			var fields []indexes.Field
			if err := msgpack.Unmarshal(row.Value, &fields); err != nil {
				return nil, nil, fmt.Errorf("%w: index table %s: %w", ErrBadSnapshot, name, err)
			}
			tables[name] = fields
			list = append(list, IndexTableOf(name, fields))
		}
	}
	return tables, list, nil
}

// cellRecord decodes r, the cell record number n of a stream of shards, into a restore record.
func cellRecord(r *snapshotRecord, shards cells.ShardRange, n int64) (storage.RestoreRecord, error) {
	if !shards.Contains(int(r.Shard)) {
		return storage.RestoreRecord{}, fmt.Errorf("%w: record %d in shard %d", ErrBadSnapshot, n, r.Shard)
	}
	rk, err := uuid.FromBytes(r.RowKey)
	if err != nil {
		return storage.RestoreRecord{}, fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, n, err)
	}
	return storage.RestoreRecord{Shard: int(r.Shard), Cell: cells.Cell{
		Key:  cells.Key{RowKey: rk, ColumnKey: r.Column, RefKey: r.RefKey},
		Body: r.Body, AddedID: r.AddedID, CreatedAt: time.UnixMicro(r.CreatedAtMicros).UTC(), Origin: r.Origin,
	}}, nil
}

// indexRecord decodes r, the index entry record number n of a stream of shards whose KV rows
// name tables, into a restore record.
func indexRecord(r *snapshotRecord, tables map[string][]indexes.Field, shards cells.ShardRange, n int64) (storage.RestoreRecord, error) {
	fields, ok := tables[r.Column]
	if !ok || !shards.Contains(int(r.AddedID)) {
		return storage.RestoreRecord{}, fmt.Errorf("%w: index record %d of table %q in shard %d", ErrBadSnapshot, n, r.Column, r.AddedID)
	}
	rk, err := uuid.FromBytes(r.RowKey)
	if err != nil {
		return storage.RestoreRecord{}, fmt.Errorf("%w: index record %d: %w", ErrBadSnapshot, n, err)
	}
	var se snapshotEntry
	if err := msgpack.Unmarshal(r.Body, &se); err != nil || len(se.Values) != len(fields) {
		return storage.RestoreRecord{}, fmt.Errorf("%w: index record %d: bad body (%w)", ErrBadSnapshot, n, err)
	}
	for i, v := range se.Values {
		if se.Values[i], err = command.TypedIndexValue(fields[i].Type, v); err != nil {
			return storage.RestoreRecord{}, fmt.Errorf("%w: index record %d: %w", ErrBadSnapshot, n, err)
		}
	}
	return storage.RestoreRecord{Shard: int(r.AddedID), Index: r.Column,
		Entry: storage.IndexEntry{RowKey: rk, Values: se.Values, Refs: se.Refs, Violation: r.RefKey}}, nil
}

// Release closes the read view.
func (s *snapshot) Release() { _ = s.tx.Close() }

// Restore replaces the partition's tables (cells and KV rows) with the snapshot in rc, in one
// transaction (raft.FSM). A snapshot of another shard range, of an unknown version, or a
// truncated or malformed one, is rejected with ErrBadSnapshot and the tables are left as they
// were. The KV rows of the snapshot are held in memory until the transaction commits.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 256<<10)
	h, err := ReadSnapshotHeader(br)
	if err != nil {
		return err
	}
	// A snapshot taken after a split, a freeze or a merge holds less or more than a replica
	// that has not applied it: the first shard never moves, the last may be lower (empty when
	// frozen) or higher.
	if h.FirstShard != f.shards.First || h.LastShard < h.FirstShard-1 {
		return fmt.Errorf("%w: shards %d..%d, partition holds %d..%d", ErrBadSnapshot, h.FirstShard, h.LastShard, f.shards.First, f.shards.Last)
	}
	snapShards := cells.ShardRange{First: h.FirstShard, Last: h.LastShard}
	if snapShards.Last > f.shards.Last {
		// The store takes the records of the wider range; it goes back if the restore fails.
		f.cfg.Store.SetShards(snapShards)
		defer func(old cells.ShardRange) {
			if f.Shards() != snapShards {
				f.cfg.Store.SetShards(old)
			}
		}(f.shards)
	}
	dec := msgpack.NewDecoder(br)
	// The KV records come first; the first other record is kept for next.
	var (
		kv    []storage.KV
		first *snapshotRecord
	)
	for first == nil {
		var r snapshotRecord
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("%w: KV record %d: %w", ErrBadSnapshot, len(kv), err)
		}
		if r.Shard != kvShard {
			first = &r
			break
		}
		if h.Version < 2 {
			return fmt.Errorf("%w: KV record in a version %d stream", ErrBadSnapshot, h.Version)
		}
		kv = append(kv, storage.KV{Key: r.Column, Value: r.Body})
	}
	// The index tables of the snapshot are those its KV rows name.
	tables, tableList, err := indexTablesOf(kv)
	if err != nil {
		return err
	}
	var count, nIdx, nReq int64
	done := false
	records := func() (storage.RestoreRecord, error) {
		if done {
			return storage.RestoreRecord{}, io.EOF
		}
		var r snapshotRecord
		if first != nil {
			r, first = *first, nil
		} else if err := dec.Decode(&r); err != nil {
			return storage.RestoreRecord{}, fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, count+nIdx, err)
		}
		switch r.Shard {
		case trailerShard:
			reqs, ok := trailerRequests(&r, h.Version)
			if !ok || r.AddedID != count || r.RefKey != int64(len(kv)) || r.CreatedAtMicros != nIdx || reqs != nReq {
				return storage.RestoreRecord{}, fmt.Errorf("%w: trailer counts %d cells, %d KV rows, %d index entries and %d request records, read %d, %d, %d and %d",
					ErrBadSnapshot, r.AddedID, r.RefKey, r.CreatedAtMicros, reqs, count, len(kv), nIdx, nReq)
			}
			done = true
			return storage.RestoreRecord{}, io.EOF
		case requestShard:
			if h.Version < 4 {
				return storage.RestoreRecord{}, fmt.Errorf("%w: request record in a version %d stream", ErrBadSnapshot, h.Version)
			}
			rec, err := requestRecord(&r, nReq)
			if err != nil {
				return storage.RestoreRecord{}, err
			}
			nReq++
			return rec, nil
		case kvShard:
			return storage.RestoreRecord{}, fmt.Errorf("%w: KV record after cell %d", ErrBadSnapshot, count)
		case indexShard:
			if h.Version < 3 {
				return storage.RestoreRecord{}, fmt.Errorf("%w: index record in a version %d stream", ErrBadSnapshot, h.Version)
			}
			rec, err := indexRecord(&r, tables, snapShards, nIdx)
			if err != nil {
				return storage.RestoreRecord{}, err
			}
			nIdx++
			return rec, nil
		}
		rec, err := cellRecord(&r, snapShards, count)
		if err != nil {
			return storage.RestoreRecord{}, err
		}
		count++
		return rec, nil
	}
	if err := f.cfg.Store.Restore(context.Background(), h.Applied, records, kv, tableList); err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	if snapShards != f.shards {
		f.setShards(snapShards)
	}
	f.resetCaches()
	f.mu.Lock()
	f.failErr = nil
	f.mu.Unlock()
	f.setApplied(h.Applied)
	return nil
}
