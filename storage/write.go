package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/schemaless-db/schemaless/cells"
)

// Begin starts the partition's write transaction. ctx bounds the whole transaction, as in
// database/sql: if it is done before Commit, the transaction is rolled back and later calls
// fail. Only one write transaction (or EnsureShards, or Restore) may be open at a time: Begin
// returns ErrTxOpen rather than wait. The caller must end the transaction with Commit or
// Rollback (a deferred Rollback after Commit is a no-op). Begin blocks until the transaction is
// open (SQLite: BEGIN IMMEDIATE takes the file's write lock) or ctx is done. With a fence set
// (SetFence), Begin first reads the partition's placement row with a shared lock held until
// the transaction ends, and returns an error wrapping ErrMoved, with no transaction, when the
// row names another storage cluster.
func (p *PartitionStore) Begin(ctx context.Context) (*WriteTx, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if err := p.lockWriter(); err != nil {
		return nil, err
	}
	tx, err := p.write.BeginTx(ctx, nil)
	if err != nil {
		p.unlockWriter()
		return nil, p.fail("begin", err)
	}
	if err := p.checkFenceTx(ctx, tx); err != nil {
		_ = tx.Rollback()
		p.unlockWriter()
		return nil, err
	}
	return &WriteTx{p: p, tx: tx}, nil
}

// WriteTx is the write transaction of one partition, opened by Begin. It sees its own writes.
// Its methods must be called from one goroutine (the writer's); they return ErrClosed after
// Commit or Rollback. An error from Lookup, Insert, PutKV, DeleteKV, LookupIndex, UpsertIndex
// or SetApplied (other than ErrKVTooLarge, ErrIndexValue and ErrInvalidConfig, returned before
// any I/O) leaves the transaction open but its outcome undefined: roll it back.
type WriteTx struct {
	p    *PartitionStore
	tx   *sql.Tx
	done bool
}

func (tx *WriteTx) check(shard int) error {
	if tx.done {
		return ErrClosed
	}
	return tx.p.checkShard(shard)
}

// Lookup returns the cells stored in shard under any of keys (including cells this
// transaction inserted), keyed by their key; keys with no cell are absent. The map is the
// caller's; Existing.Body is a copy. Duplicate keys are allowed. A shard whose tables do not
// exist yet holds nothing. One statement reads up to 200 keys through the unique key
// (row_key, column_name, ref_key); longer lists take one statement per 200 keys.
func (tx *WriteTx) Lookup(ctx context.Context, shard int, keys []cells.Key) (map[cells.Key]Existing, error) {
	if err := tx.check(shard); err != nil {
		return nil, err
	}
	out := make(map[cells.Key]Existing, len(keys))
	args := make([]any, 0, 3*min(len(keys), lookupChunkKeys))
	for start := 0; start < len(keys); start += lookupChunkKeys {
		chunk := keys[start:min(start+lookupChunkKeys, len(keys))]
		args = args[:0]
		for i := range chunk {
			k := &chunk[i]
			args = append(args, k.RowKey[:], k.ColumnKey, k.RefKey)
		}
		found, err := queryCells(ctx, tx.tx, lookupSQL(tx.p.d, shard, len(chunk)), args...)
		if err != nil {
			return nil, tx.p.fail(fmt.Sprintf("lookup %d keys in shard %d", len(chunk), shard), err)
		}
		for _, c := range found {
			out[c.Key] = Existing{AddedID: c.AddedID, Body: c.Body, CreatedAt: c.CreatedAt}
		}
	}
	return out, nil
}

// Insert appends cs to shard, as multi-row INSERT statements of up to 500 cells (fewer when
// the bodies are large). Each cell is stored as given: AddedID (assigned by the caller, unique
// in the shard), Key, Body and CreatedAt (stored in UTC, truncated to the microsecond). The
// caller guarantees that every cell belongs to shard. A key or added_id that is already stored
// returns ErrDuplicate (the caller should have checked with Lookup); a shard whose tables do
// not exist returns ErrNoShardTable. Insert does not retain cs.
func (tx *WriteTx) Insert(ctx context.Context, shard int, cs []cells.Cell) error {
	if err := tx.check(shard); err != nil {
		return err
	}
	if err := insertCells(ctx, tx.tx, tx.p.d, shard, cs); err != nil {
		if tx.p.closed.Load() {
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return err
	}
	return nil
}

// SetApplied records a as the partition's applied state when the transaction commits. Index and
// Term must fit in an int64.
func (tx *WriteTx) SetApplied(ctx context.Context, a AppliedState) error {
	if tx.done {
		return ErrClosed
	}
	if tx.p.closed.Load() {
		return ErrClosed
	}
	return setApplied(ctx, tx.tx, tx.p, a)
}

func setApplied(ctx context.Context, tx *sql.Tx, p *PartitionStore, a AppliedState) error {
	if a.Index > math.MaxInt64 || a.Term > math.MaxInt64 {
		return fmt.Errorf("storage: applied state %+v does not fit in int64", a)
	}
	if _, err := tx.ExecContext(ctx, p.d.upsertApplied, p.id.Datastore, p.id.Partition,
		int64(a.Index), int64(a.Term), schemaVersion); err != nil {
		return p.fail("set applied state", err)
	}
	return nil
}

// Commit makes the transaction's writes durable (MySQL: per innodb_flush_log_at_trx_commit;
// SQLite: per SQLiteConfig.Synchronous) and visible to readers, atomically. It ends the
// transaction whatever it returns, freeing the writer. An error means nothing was committed,
// except when the connection broke during the COMMIT itself, where the outcome is unknown
// (Applied tells). Commit after Commit or Rollback returns ErrClosed.
func (tx *WriteTx) Commit() error {
	if tx.done {
		return ErrClosed
	}
	tx.done = true
	defer tx.p.unlockWriter()
	if err := tx.tx.Commit(); err != nil {
		return tx.p.fail("commit", err)
	}
	return nil
}

// Rollback discards the transaction's writes. It is a no-op returning nil after Commit or
// Rollback, or when the transaction was already rolled back because its context ended.
func (tx *WriteTx) Rollback() error {
	if tx.done {
		return nil
	}
	tx.done = true
	defer tx.p.unlockWriter()
	if err := tx.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return tx.p.fail("rollback", err)
	}
	return nil
}
