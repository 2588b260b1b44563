package storage

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// Erasing a row deletes its cells from the shard's entity table for good (the rows, not a
// flag); the caller then appends a tombstone (cells.NewTombstone) with Insert, in the same
// transaction, so that the shard's log records the erasure. The row's index entries are deleted
// by the index maintainer, which sees the tombstone (DeleteIndexEntries), and in async mode the
// row's buffered copies by DeleteBufferedRow.

// maxEraseIndexKeys bounds the row keys of one DELETE of index entries.
const maxEraseIndexKeys = 500

// EraseRow deletes every cell of rowKey from shard, in the transaction, and returns how many it
// deleted. The tombstones of earlier erasures of the row (column cells.TombstoneColumn) are
// kept: they are the shard log's record of those erasures. A shard whose tables do not exist
// holds nothing (0). One statement, through the unique key's row_key prefix. Errors as
// WriteTx's other methods (ErrClosed, ErrShardRange, the engine's).
func (tx *WriteTx) EraseRow(ctx context.Context, shard int, rowKey uuid.UUID) (int, error) {
	if err := tx.check(shard); err != nil {
		return 0, err
	}
	if tx.b != nil {
		return tx.pebbleEraseRow(shard, rowKey)
	}
	res, err := tx.tx.ExecContext(ctx, "DELETE FROM "+tx.p.d.entity(shard)+" WHERE row_key = ? AND column_name <> ?",
		rowKey[:], cells.TombstoneColumn)
	if isNoTable(err) {
		return 0, nil
	}
	if err != nil {
		return 0, tx.p.fail(fmt.Sprintf("erase row %s in shard %d", rowKey, shard), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, tx.p.fail(fmt.Sprintf("erase row %s in shard %d: rows affected", rowKey, shard), err)
	}
	return int(n), nil
}

// DeleteIndexEntries deletes the entries of rowKeys from the table of index name on every shard
// of the partition where that table exists, in the transaction, and returns how many it
// deleted. An index with no table on the partition deletes nothing (0). The shards holding the
// table are read from the engine's catalog inside the transaction (as IndexNames does), then
// one DELETE per shard and up to 500 row keys runs through the table's primary key. An invalid
// name returns ErrInvalidConfig before any I/O. Errors otherwise as WriteTx's other methods.
func (tx *WriteTx) DeleteIndexEntries(ctx context.Context, name string, rowKeys []uuid.UUID) (int, error) {
	if tx.done {
		return 0, ErrClosed
	}
	if !validIndexName(name) {
		return 0, fmt.Errorf("%w: index table name %q must match [a-z][a-z0-9_]{0,%d}", ErrInvalidConfig, name, maxIndexNameLen-1)
	}
	if len(rowKeys) == 0 {
		return 0, nil
	}
	if tx.b != nil {
		return tx.pebbleDeleteIndexEntries(name, rowKeys)
	}
	tables, err := tx.p.indexTables(ctx, tx.tx)
	if err != nil {
		return 0, tx.p.fail("list index tables", err)
	}
	deleted := 0
	for _, shard := range tables[name] {
		for start := 0; start < len(rowKeys); start += maxEraseIndexKeys {
			chunk := rowKeys[start:min(start+maxEraseIndexKeys, len(rowKeys))]
			args := make([]any, len(chunk))
			for i, rk := range chunk {
				args[i] = rk[:]
			}
			res, err := tx.tx.ExecContext(ctx, "DELETE FROM "+tx.p.d.indexTable(name, shard)+
				" WHERE row_key IN (?"+strings.Repeat(", ?", len(chunk)-1)+")", args...)
			if isNoTable(err) {
				break
			}
			if err != nil {
				return 0, tx.p.fail(fmt.Sprintf("delete %d entries of index %s in shard %d", len(chunk), name, shard), err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return 0, tx.p.fail(fmt.Sprintf("delete entries of index %s in shard %d: rows affected", name, shard), err)
			}
			deleted += int(n)
		}
	}
	return deleted, nil
}

// DeleteBufferedRow deletes every buffered cell of rowKey in datastore from the buffer table
// (async mode: an erased row's buffered copies, so that the reaper cannot replay them) and
// returns how many it deleted. One statement, through the table's unique key. Errors:
// ErrNoBuffer, or the server's.
func (s *Store) DeleteBufferedRow(ctx context.Context, datastore string, rowKey uuid.UUID) (int64, error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM "+tbl+" WHERE datastore = ? AND row_key = ?", datastore, rowKey[:])
	if err != nil {
		return 0, fmt.Errorf("storage: delete buffered cells of row %s: %w", rowKey, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// StillBuffered reports which of the buffer rows ids are still in the buffer table (the reaper
// checks, under the partition's lock, that the rows it is about to replay were neither reaped
// nor erased meanwhile). One statement. Errors: ErrNoBuffer, or the server's.
func (s *Store) StillBuffered(ctx context.Context, ids []int64) (map[int64]bool, error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return nil, err
	}
	out := make(map[int64]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id FROM "+tbl+" WHERE id IN (?"+strings.Repeat(", ?", len(ids)-1)+")", args...)
	if err != nil {
		return nil, fmt.Errorf("storage: read buffer ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("storage: read buffer ids: %w", err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: read buffer ids: %w", err)
	}
	return out, nil
}
