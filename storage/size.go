package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/schemaless-db/schemaless/cells"
)

// ShardSizes returns, for each shard of r (by shard from r.First), an estimate of the bytes the
// partition's cells and shard log of that shard take on disk. Each engine estimates from its own
// metadata, never by reading the cells:
//
//   - pebble: pebble.DB.EstimateDiskUsage over the shard's cell and log keys, from its
//     sstables; writes still in a memtable (at most a few memtables, see
//     PebbleConfig.MemTableMiB) count once flushed;
//   - MySQL: DATA_LENGTH + INDEX_LENGTH of the shard's entity table in
//     information_schema.TABLES, InnoDB's page counts (refreshed by its statistics, after
//     about 10% of a table changed);
//   - SQLite: the shard's cells (the span of its added_ids, which are dense in a shard log)
//     times the mean size of its newest sqliteSizeSample cells (keys, body, origin and
//     created_at, twice the key for the unique index, plus sqliteRowOverhead bytes), O(log n)
//     reads of the entity table.
//
// A shard whose table does not exist yet counts 0. Index entries are not counted.
// ErrShardRange when r is not inside the partition's range. It blocks on the engine's reads.
func (p *PartitionStore) ShardSizes(ctx context.Context, r cells.ShardRange) ([]int64, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if err := p.checkShard(r.First); err != nil {
		return nil, err
	}
	if err := p.checkShard(r.Last); err != nil {
		return nil, err
	}
	switch {
	case p.pb != nil:
		return p.pebbleShardSizes(ctx, r)
	case p.d.engine == EngineMySQL:
		return p.mysqlShardSizes(ctx, r)
	default:
		return p.sqliteShardSizes(ctx, r)
	}
}

func (p *PartitionStore) pebbleShardSizes(ctx context.Context, r cells.ShardRange) ([]int64, error) {
	pp := p.pb
	defer pp.rlock()()
	release, err := pp.ps.open()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]int64, 0, r.Len())
	for s := r.First; s <= r.Last; s++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var size int64
		for _, tag := range []byte{tagCell, tagLog} {
			n, err := pp.db.EstimateDiskUsage(appendShard(pp.key(tag, 2), s), appendShard(pp.key(tag, 2), s+1))
			if err != nil {
				return nil, fmt.Errorf("storage: shard sizes: %w", err)
			}
			size += int64(n)
		}
		out = append(out, size)
	}
	return out, nil
}

// mysqlShardSizes is ShardSizes on MySQL: one query of information_schema.TABLES for the
// entity tables of r's shards' databases.
func (p *PartitionStore) mysqlShardSizes(ctx context.Context, r cells.ShardRange) ([]int64, error) {
	byDB := make(map[string]int, r.Len())
	args := make([]any, 0, r.Len())
	for s := r.First; s <= r.Last; s++ {
		db := p.d.database(s)
		byDB[db] = s - r.First
		args = append(args, db)
	}
	rows, err := p.read.QueryContext(ctx, "SELECT TABLE_SCHEMA, COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0) FROM information_schema.TABLES "+
		"WHERE TABLE_NAME = 'entity' AND TABLE_SCHEMA IN (?"+strings.Repeat(", ?", len(args)-1)+")", args...)
	if err != nil {
		return nil, p.fail("shard sizes", err)
	}
	defer rows.Close()
	out := make([]int64, r.Len())
	for rows.Next() {
		var db string
		var n int64
		if err := rows.Scan(&db, &n); err != nil {
			return nil, p.fail("shard sizes", err)
		}
		if i, ok := byDB[db]; ok {
			out[i] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, p.fail("shard sizes", err)
	}
	return out, nil
}

// sqliteSizeSample is how many of a shard's newest cells SQLite's ShardSizes averages.
const sqliteSizeSample = 64

// sqliteRowOverhead is the bytes SQLite's ShardSizes adds per cell for the record headers, the
// added_id and ref_key integers and the b-tree cells of the table and of its unique index.
const sqliteRowOverhead = 40

// sqliteShardSizes is ShardSizes on SQLite: per shard, the span of its added_ids (the rowid, so
// MIN and MAX are b-tree seeks) times the mean size of its newest cells.
func (p *PartitionStore) sqliteShardSizes(ctx context.Context, r cells.ShardRange) ([]int64, error) {
	existing, err := p.sqliteTables(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]int64, r.Len())
	for s := r.First; s <= r.Last; s++ {
		t := p.d.entity(s)
		if !existing[t] {
			continue
		}
		var first, last sql.NullInt64
		var mean sql.NullFloat64
		err := p.read.QueryRowContext(ctx, "SELECT (SELECT MIN(added_id) FROM "+t+"), (SELECT MAX(added_id) FROM "+t+"), "+
			"(SELECT AVG(2 * (length(row_key) + length(column_name)) + length(body) + length(origin)) FROM (SELECT row_key, column_name, body, origin FROM "+t+
			" ORDER BY added_id DESC LIMIT "+strconv.Itoa(sqliteSizeSample)+"))").Scan(&first, &last, &mean)
		if err != nil {
			return nil, p.fail("shard sizes of "+t, err)
		}
		if first.Valid && last.Valid && mean.Valid {
			out[s-r.First] = (last.Int64 - first.Int64 + 1) * (int64(mean.Float64) + sqliteRowOverhead)
		}
	}
	return out, nil
}

// sqliteTables returns the names of the tables of the partition's SQLite file.
func (p *PartitionStore) sqliteTables(ctx context.Context) (map[string]bool, error) {
	rows, err := p.read.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'table'")
	if err != nil {
		return nil, p.fail("shard sizes: list the tables", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, p.fail("shard sizes: list the tables", err)
		}
		out[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, p.fail("shard sizes: list the tables", err)
	}
	return out, nil
}

// Flush writes the pebble memtables of the store to sstables and waits until they are written
// (ShardSizes counts them from then on). A no-op for the SQL engines.
func (s *Store) Flush() error {
	if s.pebble == nil {
		return nil
	}
	return s.pebble.db.Flush()
}
