package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// RequestRecord is one row of a partition's requests table: the outcome of a write request
// that carried an idempotency key, kept so that a retry of the request can be answered with
// it. Record is opaque to storage (package fsm encodes it); CreatedAt is the time of the raft
// entry that recorded it, stored in microseconds.
type RequestRecord struct {
	ID        uuid.UUID
	CreatedAt time.Time
	Record    []byte
}

// requestRowBytes estimates the bytes a request row adds to an INSERT statement.
func requestRowBytes(r *RequestRecord) int { return len(r.Record) + 64 }

// requestsInsertSQL is a multi-row insert of n request rows of the partition. With upsert, a
// row whose ID is stored is replaced (an expired record whose ID came back); without, such a
// row fails the statement.
func (p *PartitionStore) requestsInsertSQL(n int, upsert bool) string {
	q := p.scopedInsertSQL(p.d.requests, []string{"id", "created_at", "record"}, n)
	if !upsert {
		return q
	}
	if p.d.engine == EngineMySQL {
		return q + " ON DUPLICATE KEY UPDATE created_at = VALUES(created_at), record = VALUES(record)"
	}
	return q + " ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, record = excluded.record"
}

func (p *PartitionStore) requestRowArgs(args []any, r *RequestRecord) []any {
	if p.d.kvScoped {
		args = append(args, p.id.Datastore, p.id.Partition)
	}
	rec := r.Record
	if rec == nil {
		rec = []byte{}
	}
	return append(args, r.ID[:], r.CreatedAt.UnixMicro(), rec)
}

// insertRequests inserts (upsert: or replaces) rs with multi-row statements within the
// dialect's limits, through exec (the transaction's prepared statements, or a plain
// transaction). Without upsert, a stored ID fails with an error wrapping ErrDuplicate; the
// statements before the failing one stay applied.
func (p *PartitionStore) insertRequests(ctx context.Context, exec func(q string) stmtQueryer, rs []RequestRecord, upsert bool) error {
	var args []any
	for start := 0; start < len(rs); {
		end, size := start, 0
		for end < len(rs) && end-start < p.d.insertRows && (end == start || size+requestRowBytes(&rs[end]) <= p.d.insertBytes) {
			size += requestRowBytes(&rs[end])
			end++
		}
		args = args[:0]
		for i := start; i < end; i++ {
			args = p.requestRowArgs(args, &rs[i])
		}
		if _, err := exec(p.requestsInsertSQL(end-start, upsert)).Exec(ctx, args...); err != nil {
			if !upsert && isDuplicate(err) {
				return fmt.Errorf("storage: insert %d request records: %w: %w", end-start, ErrDuplicate, err)
			}
			return p.fail(fmt.Sprintf("insert %d request records", end-start), err)
		}
		start = end
	}
	return nil
}

// LookupRequests returns the stored request records among ids (including those this
// transaction put), keyed by ID; IDs with no record are absent. One statement per 200 IDs,
// through the primary key. After Commit or Rollback it returns ErrClosed.
func (tx *WriteTx) LookupRequests(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]RequestRecord, error) {
	if tx.done || tx.p.closed.Load() {
		return nil, ErrClosed
	}
	if tx.b != nil {
		return tx.pebbleLookupRequests(ids)
	}
	out := make(map[uuid.UUID]RequestRecord, len(ids))
	for start := 0; start < len(ids); start += lookupChunkKeys {
		chunk := ids[start:min(start+lookupChunkKeys, len(ids))]
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(chunk)), ", ")
		args := make([]any, 0, len(chunk))
		for i := range chunk {
			args = append(args, chunk[i][:])
		}
		where, all := tx.p.kvWhere("id IN ("+marks+")", args...)
		page, err := queryRequests(ctx, tx.tx, "SELECT id, created_at, record FROM "+tx.p.d.requests+where, all...)
		if err != nil {
			return nil, tx.p.fail(fmt.Sprintf("look up %d request records", len(chunk)), err)
		}
		for _, r := range page {
			out[r.ID] = r
		}
	}
	return out, nil
}

// PutRequests stores rs in the transaction, replacing a stored record of the same ID. It does
// not retain rs. After Commit or Rollback it returns ErrClosed.
func (tx *WriteTx) PutRequests(ctx context.Context, rs []RequestRecord) error {
	if tx.done || tx.p.closed.Load() {
		return ErrClosed
	}
	if tx.b != nil {
		return tx.pebblePutRequests(rs, true)
	}
	return tx.p.insertRequests(ctx, func(q string) stmtQueryer { return tx.stmtOrTx(ctx, q) }, rs, true)
}

// InsertRequests stores rs in the transaction, whose IDs the caller expects to be new: when an
// ID of rs is already stored (whatever its age) it returns an error wrapping ErrDuplicate, and
// then some of rs may be stored: roll the transaction back. It is PutRequests without the
// lookup an upsert makes, for a writer that inserts first and looks up only after
// ErrDuplicate. It does not retain rs. After Commit or Rollback it returns ErrClosed.
func (tx *WriteTx) InsertRequests(ctx context.Context, rs []RequestRecord) error {
	if tx.done || tx.p.closed.Load() {
		return ErrClosed
	}
	if tx.b != nil {
		return tx.pebblePutRequests(rs, false)
	}
	return tx.p.insertRequests(ctx, func(q string) stmtQueryer { return tx.stmtOrTx(ctx, q) }, rs, false)
}

// PruneRequests deletes, in the transaction, at most limit request records created before
// before (oldest first in MySQL; any of them in SQLite), through the created_at index, and
// returns how many it deleted.
func (tx *WriteTx) PruneRequests(ctx context.Context, before time.Time, limit int) (int64, error) {
	if tx.done || tx.p.closed.Load() {
		return 0, ErrClosed
	}
	if tx.b != nil {
		return tx.pebblePruneRequests(before, limit)
	}
	var (
		q    string
		args []any
	)
	if tx.p.d.engine == EngineMySQL {
		where, all := tx.p.kvWhere("created_at < ?", before.UnixMicro())
		q, args = "DELETE FROM "+tx.p.d.requests+where+" ORDER BY created_at LIMIT ?", append(all, limit)
	} else {
		q = "DELETE FROM " + tx.p.d.requests + " WHERE id IN (SELECT id FROM " + tx.p.d.requests +
			" WHERE created_at < ? LIMIT ?)"
		args = []any{before.UnixMicro(), limit}
	}
	res, err := tx.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, tx.p.fail("prune request records", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, tx.p.fail("prune request records", err)
	}
	return n, nil
}

// ScanRequests calls fn with every request record of the view, in ID order, read in pages of
// at most 2000 rows; fn owns the record and must not call the SnapshotTx. It returns fn's
// first error, wrapped.
func (s *SnapshotTx) ScanRequests(ctx context.Context, fn func(RequestRecord) error) error {
	if s.closed || s.p.closed.Load() {
		return ErrClosed
	}
	if s.snap != nil {
		return s.pebbleScanRequests(fn)
	}
	var after []byte
	for {
		var (
			where string
			args  []any
		)
		if after == nil {
			where, args = s.p.kvWhere("")
		} else {
			where, args = s.p.kvWhere("id > ?", after)
		}
		args = append(args, snapshotPageRows)
		page, err := queryRequests(ctx, s.conn, "SELECT id, created_at, record FROM "+s.p.d.requests+where+" ORDER BY id LIMIT ?", args...)
		if err != nil {
			return s.p.fail("snapshot scan request records", err)
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return fmt.Errorf("storage: snapshot scan request records: %w", err)
			}
		}
		if len(page) < snapshotPageRows {
			return nil
		}
		last := page[len(page)-1].ID
		after = last[:]
	}
}

// deleteRequests deletes every request record of the partition.
func (p *PartitionStore) deleteRequests(ctx context.Context, db queryer) error {
	where, args := p.kvWhere("")
	if _, err := db.ExecContext(ctx, "DELETE FROM "+p.d.requests+where, args...); err != nil {
		return p.fail("delete the request records", err)
	}
	return nil
}

// queryRequests runs q, which selects (id, created_at, record) rows, and returns them.
func queryRequests(ctx context.Context, db rowsQueryer, q string, args ...any) ([]RequestRecord, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RequestRecord
	for rows.Next() {
		var (
			id, rec []byte
			micros  int64
		)
		if err := rows.Scan(&id, &micros, &rec); err != nil {
			return nil, err
		}
		u, err := uuid.FromBytes(id)
		if err != nil {
			return nil, fmt.Errorf("request record id: %w", err)
		}
		out = append(out, RequestRecord{ID: u, CreatedAt: time.UnixMicro(micros).UTC(), Record: rec})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}
