package storage

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
)

// What copying a partition between two stores needs beyond Restore (async mode's partition
// move): cells keep their added_id, created_at and origin through WriteTx.Insert, and the calls
// below replace the KV rows and index entries of a copy, drop an old copy, and bound the buffer
// rows to wait for.

// ReplaceKV deletes every KV row of the partition and inserts kvs, in the transaction (readers
// see the old rows until it commits). A row out of bounds returns ErrKVTooLarge before anything
// is written; a key given twice ErrDuplicate. kvs is not retained. Like the other WriteTx
// methods it belongs to the writer goroutine; an error other than ErrKVTooLarge leaves the
// transaction's outcome undefined: roll it back.
func (tx *WriteTx) ReplaceKV(ctx context.Context, kvs []KV) error {
	if tx.done || tx.p.closed.Load() {
		return ErrClosed
	}
	for i := range kvs {
		if err := checkKV(kvs[i].Key, kvs[i].Value); err != nil {
			return fmt.Errorf("storage: replace KV rows: row %d: %w", i, err)
		}
	}
	if tx.b != nil {
		return tx.pebbleReplaceKV(kvs)
	}
	return tx.p.replaceKV(ctx, tx.tx, kvs)
}

// ClearIndex deletes every entry of t's table on shard in the transaction. A table that does
// not exist returns ErrNoIndexTable; an invalid t ErrInvalidConfig, a shard outside the range
// ErrShardRange. Other errors leave the transaction's outcome undefined: roll it back.
func (tx *WriteTx) ClearIndex(ctx context.Context, shard int, t IndexTable) error {
	if err := tx.check(shard); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	if tx.b != nil {
		return tx.pebbleClearIndex(shard, &t)
	}
	if _, err := tx.tx.ExecContext(ctx, "DELETE FROM "+tx.p.d.indexTable(t.Name, shard)); err != nil {
		if isNoTable(err) {
			return fmt.Errorf("storage: clear index %s of shard %d: %w: %w", t.Name, shard, ErrNoIndexTable, err)
		}
		return tx.p.fail(fmt.Sprintf("clear index %s of shard %d", t.Name, shard), err)
	}
	return nil
}

// DropCopy deletes the partition's data from this MySQL server: the database of every shard of
// its range (cells and index tables; DROP DATABASE IF EXISTS) and its KV rows. The meta row
// (applied state) and the placement row stay, so that a fence (SetFence) keeps refusing writes
// to the dropped copy. It is a writer call (ErrTxOpen while a write transaction is open); the
// partition store should be closed afterwards. SQLite returns ErrInvalidConfig. An error may
// leave some shards dropped; calling it again finishes. Blocks on I/O until ctx ends.
func (p *PartitionStore) DropCopy(ctx context.Context) error {
	if p.d.engine != EngineMySQL {
		return fmt.Errorf("%w: DropCopy is for MySQL stores", ErrInvalidConfig)
	}
	if p.closed.Load() {
		return ErrClosed
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	for s := p.Shards().First; s <= p.Shards().Last; s++ {
		if _, err := p.write.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+p.d.database(s)+"`"); err != nil {
			return p.fail(fmt.Sprintf("drop the database of shard %d", s), err)
		}
		delete(p.created, s)
	}
	clear(p.indexes)
	where, args := p.kvWhere("")
	if _, err := p.write.ExecContext(ctx, "DELETE FROM "+p.d.kv+where, args...); err != nil {
		return p.fail("delete the KV rows", err)
	}
	return p.deleteRequests(ctx, p.write)
}

// BufferHighID returns the highest id of the buffer rows of datastore's shards in range shards
// (0 when there are none; chosen by shard as ScanBuffered does): rows buffered later have
// higher ids. One statement. Errors: ErrNoBuffer, or the server's.
func (s *Store) BufferHighID(ctx context.Context, datastore string, shards cells.ShardRange) (int64, error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return 0, err
	}
	var id sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX(id) FROM "+tbl+" WHERE datastore = ? AND shard BETWEEN ? AND ?", datastore, shards.First, shards.Last).Scan(&id); err != nil {
		return 0, fmt.Errorf("storage: buffer high id: %w", err)
	}
	return id.Int64, nil
}

// CloneStateTo writes, in the transaction, the per-partition state of partition right of the
// same datastore on this MySQL server: its KV rows become kvs, its request records a copy of
// this partition's (as of the transaction), and its applied state applied; whatever right held
// there before is replaced. The shards' databases (cells, index tables) are per shard, not per
// partition, and are not touched. It is how an async partition splits in place
// (partition.SplitAsync): the right half takes over shards whose data stays where it is, and
// only the state kept per partition is copied, atomically with the left half's change in the
// same transaction. kvs is not retained; a row out of bounds returns ErrKVTooLarge before
// anything is written. MySQL only: other engines return ErrInvalidConfig. Errors leave the
// transaction's outcome undefined: roll it back.
func (tx *WriteTx) CloneStateTo(ctx context.Context, right int, kvs []KV, applied AppliedState) error {
	if tx.done || tx.p.closed.Load() {
		return ErrClosed
	}
	p := tx.p
	if p.d.engine != EngineMySQL || tx.tx == nil {
		return fmt.Errorf("%w: CloneStateTo is for MySQL stores", ErrInvalidConfig)
	}
	if right < 0 || right == p.id.Partition {
		return fmt.Errorf("%w: CloneStateTo partition %d from partition %d", ErrInvalidConfig, right, p.id.Partition)
	}
	for i := range kvs {
		if err := checkKV(kvs[i].Key, kvs[i].Value); err != nil {
			return fmt.Errorf("storage: clone KV rows: row %d: %w", i, err)
		}
	}
	return p.copyState(ctx, tx.tx, p.id.Partition, right, kvs, applied)
}
