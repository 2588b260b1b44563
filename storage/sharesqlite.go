package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/schemaless-db/schemaless/cells"
)

// A split on SQLite, which keeps a file per partition, copies the right half's shards into the
// new partition's file. shareSQLite does it inside SQLite: the parent's file is attached to the
// new partition's write connection and each table is copied with INSERT INTO ... SELECT * into
// an empty table of the same definition, which SQLite performs as a copy of the b-tree's
// records without decoding them (its "transfer optimization", sqlite3 insert.c
// xferOptimization). The parent then lets them go (ReleaseShards) and drops its copy after the
// split (strays.go).

// splitSourceSchema is the schema name under which shareSQLite attaches the parent's file.
const splitSourceSchema = "split_src"

// shareSQLite is ShareShards on SQLite (its arguments checked there). When p has applied
// nothing yet (a split's first apply), it clones the parent's file (cloneSQLite); else, or
// when the parent's writer is busy, in one transaction of p
// (the right half, just opened), every table of shards r in src's file (the entity tables, the
// index tables and their b-tree indexes) is created in p's file with its definition and
// filled with the source's rows, the request records are copied whole, the KV rows become kv
// and the applied state applied; what p's file held before is replaced. The tables are read
// from src's file as it is, not through the view src: the parent's only writer is its state
// machine, which is applying the split and waits for this call, so the file holds what the
// view does. It holds the writer token and blocks on I/O.
func (p *PartitionStore) shareSQLite(ctx context.Context, src *SnapshotTx, r cells.ShardRange, kv []KV, applied AppliedState) (err error) {
	if src.p.store != p.store || src.p.d.engine != EngineSQLite || src.p.id.Datastore != p.id.Datastore || src.p.id.Partition == p.id.Partition {
		return fmt.Errorf("%w: ShareShards from %s/%d into %s/%d", ErrInvalidConfig, src.p.id.Datastore, src.p.id.Partition, p.id.Datastore, p.id.Partition)
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	if a, err := p.Applied(ctx); err != nil {
		return err
	} else if a.Index == 0 {
		if err := p.cloneSQLite(ctx, src, r, kv, applied); !errors.Is(err, errCloneBusy) {
			return err
		}
	}
	if p.unborn.Load() { // PartitionForSplit's store, not cloned: create its file for the copy
		if err := errors.Join(p.closePools(), p.reopenPools(ctx)); err != nil {
			return p.fail("share shards: create the partition's file", err)
		}
	}
	conn, detach, err := p.attach(ctx, src.p.id)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, detach()) }()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return p.fail("share shards: begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := p.copySQLiteTables(ctx, tx, r); err != nil {
		return err
	}
	return p.commitSQLiteShare(ctx, tx, kv, applied)
}

// commitSQLiteShare ends a SQLite ShareShards transaction, a clone's or a copy's: p's KV rows
// become kv, its applied state applied, and tx commits (commitShare).
func (p *PartitionStore) commitSQLiteShare(ctx context.Context, tx *sql.Tx, kv []KV, applied AppliedState) error {
	if err := p.replaceKV(ctx, tx, kv); err != nil {
		return err
	}
	if err := setApplied(ctx, stmtQueryer{tx: tx, q: p.d.upsertApplied}, p, applied); err != nil {
		return err
	}
	return p.commitShare(tx)
}

// attach returns a connection of p's write pool with the file of partition src (of the same
// Store) attached as splitSourceSchema, and the function that detaches it and releases the
// connection (a connection that fails to detach is discarded, not returned to the pool). The
// caller holds the writer token; the write pool's one connection is the caller's until
// detach.
func (p *PartitionStore) attach(ctx context.Context, src PartitionID) (*sql.Conn, func() error, error) {
	conn, err := p.write.Conn(ctx)
	if err != nil {
		return nil, nil, p.fail("attach: connection", err)
	}
	if _, err := conn.ExecContext(ctx, "ATTACH DATABASE ? AS "+splitSourceSchema, sqlitePath(p.store.sqliteDir, src)); err != nil {
		return nil, nil, errors.Join(p.fail(fmt.Sprintf("attach the file of partition %d", src.Partition), err), conn.Close())
	}
	detach := func() error {
		var err error
		if _, derr := conn.ExecContext(context.Background(), "DETACH DATABASE "+splitSourceSchema); derr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = p.fail(fmt.Sprintf("detach the file of partition %d", src.Partition), derr)
		}
		return errors.Join(err, conn.Close())
	}
	return conn, detach, nil
}

// BeginAbsorb begins a write transaction of the partition for AbsorbShards from src, a
// snapshot of another partition of the same Store: on SQLite the transaction's connection has
// src's file attached, so that AbsorbShards copies the shards' tables and joins the request
// records inside SQLite (absorbAttached); the file is detached when the transaction ends. src's
// partition must not be written meanwhile (a merge's frozen right partition): the attached file
// is read as it is. On the other engines it is Begin. Errors as Begin's.
func (p *PartitionStore) BeginAbsorb(ctx context.Context, src *SnapshotTx) (*WriteTx, error) {
	if p.d.engine != EngineSQLite || src.p.store != p.store || src.p.d.engine != EngineSQLite || src.p.id == p.id {
		return p.Begin(ctx)
	}
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if err := p.lockWriter(); err != nil {
		return nil, err
	}
	conn, detach, err := p.attach(ctx, src.p.id)
	if err != nil {
		p.unlockWriter()
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		err = errors.Join(p.fail("begin", err), detach())
		p.unlockWriter()
		return nil, err
	}
	id := src.p.id
	return &WriteTx{p: p, tx: tx, attached: &id, end: detach}, nil
}

// copySQLiteTables, in tx (on a connection with the parent attached as splitSourceSchema),
// drops the shard tables p's file holds, empties its request records, then copies the
// parent's shards r (copyAttachedShards) and its request records.
func (p *PartitionStore) copySQLiteTables(ctx context.Context, tx *sql.Tx, r cells.ShardRange) error {
	if err := p.dropShardTables(ctx, tx, func(int) bool { return true }); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM main.requests"); err != nil {
		return p.fail("share shards: empty the request records", err)
	}
	if err := p.copyAttachedShards(ctx, tx, r); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO main.requests SELECT * FROM "+splitSourceSchema+".requests"); err != nil {
		return p.fail("share shards: copy the request records", err)
	}
	return nil
}

// dropShardTables drops, in tx, the tables of p's file of every shard drop reports (entity and
// index tables, with their indexes).
func (p *PartitionStore) dropShardTables(ctx context.Context, tx *sql.Tx, drop func(shard int) bool) error {
	held, err := sqliteSchema(ctx, tx, "main")
	if err != nil {
		return p.fail("list the partition's tables", err)
	}
	for _, o := range held {
		if s, ok := sqliteShardOf(o.table); ok && drop(s) && o.kind == "table" {
			if _, err := tx.ExecContext(ctx, "DROP TABLE "+o.name); err != nil {
				return p.fail("drop "+o.name, err)
			}
		}
	}
	return nil
}

// copyAttachedShards creates in p's file, in tx, each table of shards r that the attached file
// (splitSourceSchema) holds, with its indexes, from the statement that created it there, and
// copies its rows (into an empty table of the same definition: SQLite's transfer
// optimization). The tables must not exist in p's file.
func (p *PartitionStore) copyAttachedShards(ctx context.Context, tx *sql.Tx, r cells.ShardRange) error {
	objs, err := sqliteSchema(ctx, tx, splitSourceSchema)
	if err != nil {
		return p.fail("list the attached file's tables", err)
	}
	var tables []string
	for _, o := range objs { // tables first: sqliteSchema sorts them before indexes
		s, ok := sqliteShardOf(o.table)
		if !ok || !r.Contains(s) {
			continue
		}
		if _, err := tx.ExecContext(ctx, o.sql); err != nil {
			return p.fail("create "+o.name, err)
		}
		if o.kind == "table" {
			tables = append(tables, o.name)
		}
	}
	for _, t := range tables {
		if _, err := tx.ExecContext(ctx, "INSERT INTO main."+t+" SELECT * FROM "+splitSourceSchema+"."+t); err != nil {
			return p.fail("copy "+t, err)
		}
	}
	return nil
}

// sqliteObject is a table or index of a SQLite file's schema: its kind ("table" or "index"),
// its name, the table it belongs to, and the statement that created it.
type sqliteObject struct {
	kind, name, table, sql string
}

// sqliteSchema lists the tables and the explicitly created indexes (those with a statement:
// not the automatic ones of UNIQUE and PRIMARY KEY constraints) of schema in the connection of
// q, tables first.
func sqliteSchema(ctx context.Context, q queryer, schema string) ([]sqliteObject, error) {
	rows, err := q.QueryContext(ctx, "SELECT type, name, tbl_name, sql FROM "+schema+".sqlite_schema WHERE type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type = 'index', name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqliteObject
	for rows.Next() {
		var o sqliteObject
		if err := rows.Scan(&o.kind, &o.name, &o.table, &o.sql); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// sqliteShardOf returns the shard of a SQLite shard table, an entity table (entity_<4 digits>)
// or an index table (index_<name>_<4 digits>), and false for any other table.
func sqliteShardOf(table string) (int, bool) {
	if rest, ok := strings.CutPrefix(table, "entity_"); ok && len(rest) == 4 {
		return shardDigits(rest)
	}
	rest, ok := strings.CutPrefix(table, "index_")
	if !ok || len(rest) < 6 || rest[len(rest)-5] != '_' || !validIndexName(rest[:len(rest)-5]) {
		return 0, false
	}
	return shardDigits(rest[len(rest)-4:])
}
