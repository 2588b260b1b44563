package storage

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
)

// Splits on the SQL engines. In MySQL each shard's tables (cells, index tables) are in a
// database named by the node's prefix, the datastore and the shard
// ("<prefix>_<datastore>_<shard>"), not by the partition: two partitions of a datastore on one
// node that hold different shards already keep their cells apart, and a split has nothing to
// move. What a partition owns alone is in the meta tables, keyed by (datastore, partition): its
// KV rows, its request records and its applied state. ShareShards copies those to the right
// half (shareMySQL); ReleaseShards, on the parent, only forgets its caches of the shards
// handed over. SQLite keeps a file per partition: a split copies the right half's shards into
// its file (shareSQLite, sharesqlite.go) and ReleaseShards drops them from the parent's
// (dropSQLiteShards).

// shareMySQL is ShareShards on MySQL (its arguments checked there): in one transaction of p
// (the right half, just opened), its KV rows become kv, its request records a copy of src's
// partition's, and its applied state applied. The request records are copied from the table as
// it is, not from the view src: the parent's only writer is its state machine, which is
// applying the split and waits for this call, so the table holds what the view does. It holds
// the writer token.
func (p *PartitionStore) shareMySQL(ctx context.Context, src *SnapshotTx, kv []KV, applied AppliedState) error {
	if src.p.id.Datastore != p.id.Datastore || src.p.id.Partition == p.id.Partition {
		return fmt.Errorf("%w: ShareShards from %s/%d into %s/%d", ErrInvalidConfig, src.p.id.Datastore, src.p.id.Partition, p.id.Datastore, p.id.Partition)
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	tx, err := p.write.BeginTx(ctx, nil)
	if err != nil {
		return p.fail("share shards: begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := p.copyState(ctx, tx, src.p.id.Partition, p.id.Partition, kv, applied); err != nil {
		return err
	}
	return p.commitShare(tx)
}

// commitShare commits ShareShards' transaction on a SQL engine and forgets what p cached of its
// tables (the shards it got are new to it).
func (p *PartitionStore) commitShare(tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		return p.fail("share shards: commit", err)
	}
	clear(p.indexes)
	clear(p.created)
	return nil
}

// copyState writes, in tx, the per-partition state of partition to of p's datastore on this
// MySQL server: its KV rows become kvs (replaceKV), its request records a copy of partition
// from's (as tx sees them), its applied state applied; what to held before is replaced.
func (p *PartitionStore) copyState(ctx context.Context, tx *sql.Tx, from, to int, kvs []KV, applied AppliedState) error {
	dst := &PartitionStore{id: PartitionID{Datastore: p.id.Datastore, Partition: to}, d: p.d}
	if err := dst.replaceKV(ctx, tx, kvs); err != nil {
		return err
	}
	if err := dst.deleteRequests(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+p.d.requests+" (datastore, `partition`, id, created_at, record) SELECT datastore, ?, id, created_at, record FROM "+
		p.d.requests+" WHERE datastore = ? AND `partition` = ?", to, p.id.Datastore, from); err != nil {
		return p.fail(fmt.Sprintf("copy the request records of partition %d into partition %d", from, to), err)
	}
	return setApplied(ctx, stmtQueryer{tx: tx, q: p.d.upsertApplied}, dst, applied)
}

// dropSQLiteShards is DropShards on SQLite: the entity table and every index table of each
// shard of r are dropped in the transaction.
func (tx *WriteTx) dropSQLiteShards(ctx context.Context, r cells.ShardRange) error {
	p := tx.p
	byName, err := p.indexTables(ctx, tx.tx)
	if err != nil {
		return p.fail("drop shards: list the index tables", err)
	}
	var tables []string
	for name, shards := range byName {
		for _, s := range shards {
			if r.Contains(s) {
				tables = append(tables, p.d.indexTable(name, s))
			}
		}
	}
	for s := r.First; s <= r.Last; s++ {
		tables = append(tables, p.d.entity(s))
	}
	for _, t := range tables {
		if _, err := tx.tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return p.fail("drop shards: drop "+t, err)
		}
	}
	p.forgetShards(r)
	return nil
}
