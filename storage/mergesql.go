package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
)

// Merges on the SQL engines (AbsorbShards). In MySQL a shard's tables are the shard's own
// (splitsql.go), so the left partition takes the right one's shards where they are: only the
// request records, kept per partition in the meta tables, are joined into its own. SQLite keeps
// a file per partition: the right one's shards (their cells with their added_ids, their index
// tables and entries) are copied into the left one's file, in its transaction (SQLite's DDL is
// transactional), and the request records joined as in MySQL: inside SQLite when the
// transaction has the right one's file attached (BeginAbsorb, absorbAttached), else through Go
// (copySQLiteShards, joinRequests). A retired partition's data goes with
// Store.RemovePartition.

// absorbCopyRows is how many cells or index entries absorbSQL buffers before it inserts them.
const absorbCopyRows = 2000

// absorbSQL is AbsorbShards on the SQL engines; its arguments were checked there.
func (tx *WriteTx) absorbSQL(ctx context.Context, src *SnapshotTx, r cells.ShardRange, tables []IndexTable, join func(held, incoming []byte) ([]byte, error)) error {
	p := tx.p
	if src.p.id.Datastore != p.id.Datastore || src.p.id.Partition == p.id.Partition || src.p.d.engine != p.d.engine {
		return fmt.Errorf("%w: AbsorbShards from %s/%d into %s/%d", ErrInvalidConfig, src.p.id.Datastore, src.p.id.Partition, p.id.Datastore, p.id.Partition)
	}
	if p.d.engine == EngineMySQL && src.p.store != p.store {
		return fmt.Errorf("%w: AbsorbShards takes shards of a partition of the same MySQL store", ErrInvalidConfig)
	}
	if p.d.engine == EngineSQLite {
		tx.absorbed = &r
	}
	if p.d.engine == EngineSQLite && tx.attached != nil && *tx.attached == src.p.id {
		return tx.absorbAttached(ctx, r, join)
	}
	if p.d.engine == EngineSQLite {
		if err := tx.copySQLiteShards(ctx, src, r, tables); err != nil {
			return err
		}
	}
	join2 := tx.joinRequests
	if p.d.engine == EngineMySQL {
		join2 = tx.joinRequestsMySQL
	}
	if err := join2(ctx, src, join); err != nil {
		return err
	}
	p.forgetShards(r)
	return nil
}

// copySQLiteShards creates, in the transaction, the tables of shards r and the index tables
// among tables that src's file holds on them, and copies their cells and entries from src.
func (tx *WriteTx) copySQLiteShards(ctx context.Context, src *SnapshotTx, r cells.ShardRange, tables []IndexTable) error {
	p := tx.p
	exec := func(q string) stmtQueryer { return stmtQueryer{tx: tx.tx, q: q} }
	if p.d.engine == EngineSQLite {
		// Stray tables a split left of these shards (strays.go) go first: shardDDL would keep
		// them, with their old cells.
		if err := p.dropShardTables(ctx, tx.tx, r.Contains); err != nil {
			return fmt.Errorf("storage: absorb shards: %w", err)
		}
	}
	for s := r.First; s <= r.Last; s++ {
		for _, stmt := range p.d.shardDDL(s) {
			if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
				return p.fail(fmt.Sprintf("absorb shards: create the tables of shard %d", s), err)
			}
		}
		buf := make([]cells.Cell, 0, absorbCopyRows)
		flush := func() error {
			if len(buf) == 0 {
				return nil
			}
			err := insertCells(ctx, exec, p.d, s, buf)
			buf = buf[:0]
			return err
		}
		err := src.scanShardSQL(ctx, s, func(c cells.Cell) error {
			if buf = append(buf, c); len(buf) < absorbCopyRows {
				return nil
			}
			return flush()
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return fmt.Errorf("storage: absorb shards: cells of shard %d: %w", s, err)
		}
	}
	for i := range tables {
		t := &tables[i]
		if err := t.Validate(); err != nil {
			return fmt.Errorf("storage: absorb shards: %w", err)
		}
		for s := r.First; s <= r.Last; s++ {
			var n int
			if err := src.conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", p.d.indexTable(t.Name, s)).Scan(&n); err != nil {
				return p.fail("absorb shards: list the index tables", err)
			}
			if n == 0 {
				continue
			}
			for _, stmt := range p.d.indexDDL(t, s) {
				if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
					return p.fail(fmt.Sprintf("absorb shards: create index table %s of shard %d", t.Name, s), err)
				}
			}
			buf := make([]IndexEntry, 0, absorbCopyRows)
			flush := func() error {
				if len(buf) == 0 {
					return nil
				}
				err := insertIndex(ctx, exec, p.d, t, s, buf, false)
				buf = buf[:0]
				return err
			}
			err := src.scanIndexSQL(ctx, s, t, func(e IndexEntry) error {
				if buf = append(buf, e); len(buf) < absorbCopyRows {
					return nil
				}
				return flush()
			})
			if err == nil {
				err = flush()
			}
			if err != nil {
				return fmt.Errorf("storage: absorb shards: index %s of shard %d: %w", t.Name, s, err)
			}
		}
	}
	return nil
}

// joinRequests adds, in the transaction, every request record of the view src to the
// partition's: a record of an ID the partition holds too is replaced by join(held, incoming),
// stored with the earlier created_at (a nil join keeps the incoming one), unless the two are
// alike (a split's copy of one record). Records are looked up and written lookupChunkKeys at
// a time.
func (tx *WriteTx) joinRequests(ctx context.Context, src *SnapshotTx, join func(held, incoming []byte) ([]byte, error)) error {
	batch := make([]RequestRecord, 0, lookupChunkKeys)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		ids := make([]uuid.UUID, len(batch))
		for i := range batch {
			ids[i] = batch[i].ID
		}
		held, err := tx.LookupRequests(ctx, ids)
		if err != nil {
			return err
		}
		out := make([]RequestRecord, 0, len(batch))
		for _, in := range batch {
			h, ok := held[in.ID]
			switch {
			case ok && bytes.Equal(h.Record, in.Record):
				continue
			case ok && join != nil:
				rec, err := join(h.Record, in.Record)
				if err != nil {
					return fmt.Errorf("join request records: %w", err)
				}
				at := h.CreatedAt
				if in.CreatedAt.Before(at) {
					at = in.CreatedAt
				}
				in = RequestRecord{ID: in.ID, CreatedAt: at, Record: rec}
			}
			out = append(out, in)
		}
		batch = batch[:0]
		return tx.PutRequests(ctx, out)
	}
	err := src.ScanRequests(ctx, func(r RequestRecord) error {
		if batch = append(batch, r); len(batch) < lookupChunkKeys {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("storage: absorb shards: request records: %w", err)
	}
	return nil
}

// joinRequestsMySQL is joinRequests on MySQL, where both partitions' request records are rows of
// one table on the server (src's partition, frozen by the merge, writes none meanwhile, so the
// table holds what the view does): the records of IDs both hold with different bytes are read
// and joined here (joinDiffering), then one INSERT ... SELECT copies on the server the records
// of IDs the partition lacks, and the joined ones are written. Records alike in both (a
// split's copies of one record, nearly all of them) are neither read nor written.
func (tx *WriteTx) joinRequestsMySQL(ctx context.Context, src *SnapshotTx, join func(held, incoming []byte) ([]byte, error)) error {
	p, t := tx.p, tx.p.d.requests
	ds, left, right := p.id.Datastore, p.id.Partition, src.p.id.Partition
	joined, err := tx.joinDiffering(ctx, join, "SELECT r.id, r.created_at, r.record, l.created_at, l.record FROM "+t+" r JOIN "+t+
		" l ON l.datastore = r.datastore AND l.`partition` = ? AND l.id = r.id WHERE r.datastore = ? AND r.`partition` = ? AND r.record <> l.record",
		left, ds, right)
	if err != nil {
		return err
	}
	if _, err := tx.tx.ExecContext(ctx, "INSERT INTO "+t+" (datastore, `partition`, id, created_at, record) SELECT r.datastore, ?, r.id, r.created_at, r.record FROM "+t+
		" r WHERE r.datastore = ? AND r.`partition` = ? AND NOT EXISTS (SELECT 1 FROM "+t+" l WHERE l.datastore = r.datastore AND l.`partition` = ? AND l.id = r.id)",
		left, ds, right, left); err != nil {
		return p.fail("absorb shards: copy the request records the partition lacks", err)
	}
	return tx.PutRequests(ctx, joined)
}

// absorbAttached is AbsorbShards on SQLite in a transaction of BeginAbsorb, whose connection
// has the right partition's file attached (splitSourceSchema): the tables of shards r are
// copied inside SQLite (copyAttachedShards), and the request records joined as on MySQL: those
// both partitions hold with different bytes read and joined here, the others the partition
// lacks copied with one INSERT OR IGNORE ... SELECT.
func (tx *WriteTx) absorbAttached(ctx context.Context, r cells.ShardRange, join func(held, incoming []byte) ([]byte, error)) error {
	p, src := tx.p, splitSourceSchema
	if err := p.dropShardTables(ctx, tx.tx, r.Contains); err != nil {
		return fmt.Errorf("storage: absorb shards: %w", err)
	}
	if err := p.copyAttachedShards(ctx, tx.tx, r); err != nil {
		return fmt.Errorf("storage: absorb shards: %w", err)
	}
	joined, err := tx.joinDiffering(ctx, join, "SELECT r.id, r.created_at, r.record, l.created_at, l.record FROM "+src+
		".requests r JOIN main.requests l ON l.id = r.id WHERE r.record <> l.record")
	if err != nil {
		return err
	}
	if _, err := tx.tx.ExecContext(ctx, "INSERT OR IGNORE INTO main.requests SELECT * FROM "+src+".requests"); err != nil {
		return p.fail("absorb shards: copy the request records the partition lacks", err)
	}
	if err := tx.PutRequests(ctx, joined); err != nil {
		return err
	}
	p.forgetShards(r)
	return nil
}

// joinDiffering runs q in the transaction, whose rows are request records both partitions of a
// merge hold with different bytes (id, incoming created_at and record, held created_at and
// record), and returns each as the record to store: join(held, incoming) with the earlier
// created_at, or the incoming one when join is nil.
func (tx *WriteTx) joinDiffering(ctx context.Context, join func(held, incoming []byte) ([]byte, error), q string, args ...any) ([]RequestRecord, error) {
	p := tx.p
	rows, err := tx.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, p.fail("absorb shards: read the request records both partitions hold", err)
	}
	defer rows.Close()
	var joined []RequestRecord
	for rows.Next() {
		var id, in, held []byte
		var inAt, heldAt int64
		if err := rows.Scan(&id, &inAt, &in, &heldAt, &held); err != nil {
			return nil, p.fail("absorb shards: read the request records both partitions hold", err)
		}
		u, err := uuid.FromBytes(id)
		if err != nil {
			return nil, fmt.Errorf("storage: absorb shards: request record id: %w", err)
		}
		rec := RequestRecord{ID: u, CreatedAt: time.UnixMicro(inAt).UTC(), Record: in}
		if join != nil {
			if rec.Record, err = join(held, in); err != nil {
				return nil, fmt.Errorf("storage: absorb shards: join request records: %w", err)
			}
			rec.CreatedAt = time.UnixMicro(min(inAt, heldAt)).UTC()
		}
		joined = append(joined, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, p.fail("absorb shards: read the request records both partitions hold", err)
	}
	return joined, rows.Close()
}

// RemovePartition deletes what partition id, retired (the right one of a merge, whose shards
// another partition took) and not open, holds on this node alone: its state (KV rows, request
// records, applied state) and, where they are its own, its shards. Pebble deletes its own part
// of the database (what its directory entry names, as a Restore of nothing would); SQLite
// deletes its file; MySQL deletes its rows of the meta tables and leaves the shards' databases
// (per shard, now the other partition's). A partition that holds nothing here is no error. It
// blocks on I/O until ctx is done.
func (s *Store) RemovePartition(ctx context.Context, id PartitionID) error {
	if err := validatePartition(id, cells.ShardRange{First: 0, Last: 0}); err != nil {
		return err
	}
	if s.engine == EngineSQLite {
		s.mu.Lock()
		_, open := s.parts[id]
		s.mu.Unlock()
		if open {
			return fmt.Errorf("%w: %s/%d", ErrPartitionOpen, id.Datastore, id.Partition)
		}
		if err := s.closeKept(id); err != nil {
			return fmt.Errorf("storage: remove partition %s/%d: %w", id.Datastore, id.Partition, err)
		}
		path := sqlitePath(s.sqliteDir, id)
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("storage: remove partition %s/%d: %w", id.Datastore, id.Partition, err)
			}
		}
		return nil
	}
	all := cells.ShardRange{First: 0, Last: maxShard}
	ps, err := s.Partition(ctx, id, all)
	if err != nil {
		return err
	}
	if s.pebble == nil {
		ps.SetShards(cells.ShardRange{First: 0, Last: -1}) // MySQL: no shard is its own
	}
	err = ps.Restore(ctx, AppliedState{}, func() (RestoreRecord, error) { return RestoreRecord{}, io.EOF }, nil, nil)
	if cerr := ps.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage: remove partition %s/%d: %w", id.Datastore, id.Partition, err)
	}
	return nil
}
