package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// ErrNoBuffer: the store has no buffer table (SQLite, or a read-only MySQL store).
var ErrNoBuffer = errors.New("storage: buffered writes need a writable MySQL store")

// BufferedCell is one row of the buffer table of async mode: a cell written to this master on
// behalf of another storage cluster (its primary), kept until the reaper sees the cell on a
// minion of the primary cluster. ID is the row's AUTO_INCREMENT id, in buffering order.
type BufferedCell struct {
	ID        int64
	Datastore string
	// Partition is the primary partition (the storage cluster that should hold the cell).
	Partition int
	Shard     int
	// Cell is the cell as written: AddedID is unused (0); CreatedAt is the time the write was
	// taken; Origin is stored with it (and must be "" or a valid cluster name).
	Cell cells.Cell
	// BufferedAt is when the row was written (the writer's clock).
	BufferedAt time.Time
}

// bufferDDL creates "<meta>.buffer": one row per buffered cell, unique per datastore and cell
// key, so a retried write finds its own row and a second body for the same key is refused. origin
// is last, where migrateMySQLOrigin adds it to a table created without it.
func bufferDDL(meta string) string {
	return "CREATE TABLE IF NOT EXISTS " + meta + ".`buffer` (\n" +
		"\tid BIGINT NOT NULL AUTO_INCREMENT,\n" +
		"\tdatastore VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\t`partition` INT NOT NULL,\n" +
		"\tshard INT NOT NULL,\n" +
		"\trow_key BINARY(16) NOT NULL,\n" +
		"\tcolumn_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\tref_key BIGINT NOT NULL,\n" +
		"\tbody MEDIUMBLOB NOT NULL,\n" +
		"\tcreated_at DATETIME(6) NOT NULL,\n" +
		"\tbuffered_at DATETIME(6) NOT NULL,\n" +
		"\t" + mysqlOriginColumn + ",\n" +
		"\tPRIMARY KEY (id),\n" +
		"\tUNIQUE KEY cell_key (datastore, row_key, column_name, ref_key)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
}

func (s *Store) bufferTable() (string, error) {
	if s.db == nil || s.meta == "" {
		return "", ErrNoBuffer
	}
	return s.meta + ".`buffer`", nil
}

// PutBuffered stores b in the buffer table (b.ID and b.BufferedAt are set by the call; the
// body and the origin are stored as given). If the datastore's buffer already holds a cell with
// that key, the stored row is left alone and PutBuffered reports whether its body is the same (a
// retried write: same true) or another (a conflicting write: same false); origins are not
// compared. One or two statements; blocks on I/O until ctx ends. Errors: ErrNoBuffer,
// ErrInvalidOrigin (nothing written), or the server's.
func (s *Store) PutBuffered(ctx context.Context, b BufferedCell) (inserted, same bool, err error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return false, false, err
	}
	if err := checkOrigin(&b.Cell); err != nil {
		return false, false, fmt.Errorf("storage: buffer cell %s: %w", b.Cell.Key, err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	res, err := s.db.ExecContext(ctx, "INSERT IGNORE INTO "+tbl+
		" (datastore, `partition`, shard, row_key, column_name, ref_key, body, created_at, buffered_at, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		b.Datastore, b.Partition, b.Shard, b.Cell.RowKey[:], b.Cell.ColumnKey, b.Cell.RefKey, []byte(b.Cell.Body),
		b.Cell.CreatedAt.UTC().Truncate(time.Microsecond), now, b.Cell.Origin)
	if err != nil {
		return false, false, fmt.Errorf("storage: buffer cell: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return true, true, nil
	}
	var body []byte
	err = s.db.QueryRowContext(ctx, "SELECT body FROM "+tbl+" WHERE datastore = ? AND row_key = ? AND column_name = ? AND ref_key = ?",
		b.Datastore, b.Cell.RowKey[:], b.Cell.ColumnKey, b.Cell.RefKey).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		// Reaped between the two statements: the cell reached the primary cluster.
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("storage: read buffered cell: %w", err)
	}
	same, err = cells.SameBody(cells.Body(body), b.Cell.Body)
	if err != nil {
		return false, false, fmt.Errorf("storage: compare buffered body: %w", err)
	}
	return false, same, nil
}

// PutBufferedBatch stores every cell of bs in the buffer table (as PutBuffered does for one),
// with one multi-row INSERT IGNORE and one lookup per chunk of bufferChunk cells, and reports
// per cell whether the stored body is the one given (false: the datastore's buffer holds the
// key with another body, a conflict). Every cell with same[i] true is in the buffer when it
// returns nil. Blocks on I/O until ctx ends. Errors: ErrNoBuffer, ErrInvalidOrigin (checked
// for every cell first: nothing written), or the server's (some chunks may be stored).
func (s *Store) PutBufferedBatch(ctx context.Context, bs []BufferedCell) (same []bool, err error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return nil, err
	}
	for i := range bs {
		if err := checkOrigin(&bs[i].Cell); err != nil {
			return nil, fmt.Errorf("storage: buffer cells: cell %d (%s): %w", i, bs[i].Cell.Key, err)
		}
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	same = make([]bool, len(bs))
	for lo := 0; lo < len(bs); {
		hi, size := lo, 0
		for hi < len(bs) && hi-lo < bufferChunkCells && (hi == lo || size+len(bs[hi].Cell.Body) <= bufferChunkBytes) {
			size += len(bs[hi].Cell.Body)
			hi++
		}
		chunk := bs[lo:hi]
		var q strings.Builder
		q.WriteString("INSERT IGNORE INTO " + tbl + " (datastore, `partition`, shard, row_key, column_name, ref_key, body, created_at, buffered_at, origin) VALUES ")
		args := make([]any, 0, 10*len(chunk))
		for i, b := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, b.Datastore, b.Partition, b.Shard, b.Cell.RowKey[:], b.Cell.ColumnKey, b.Cell.RefKey, []byte(b.Cell.Body),
				b.Cell.CreatedAt.UTC().Truncate(time.Microsecond), now, b.Cell.Origin)
		}
		if _, err := s.db.ExecContext(ctx, q.String(), args...); err != nil {
			return nil, fmt.Errorf("storage: buffer cells: %w", err)
		}
		q.Reset()
		q.WriteString("SELECT datastore, row_key, column_name, ref_key, body FROM " + tbl + " WHERE ")
		args = args[:0]
		for i, b := range chunk {
			if i > 0 {
				q.WriteString(" OR ")
			}
			q.WriteString("(datastore = ? AND row_key = ? AND column_name = ? AND ref_key = ?)")
			args = append(args, b.Datastore, b.Cell.RowKey[:], b.Cell.ColumnKey, b.Cell.RefKey)
		}
		rows, err := s.db.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("storage: read buffered cells: %w", err)
		}
		type bkey struct {
			ds  string
			key cells.Key
		}
		stored := map[bkey][]byte{}
		for rows.Next() {
			var (
				k      bkey
				rowKey []byte
				body   []byte
			)
			if err := rows.Scan(&k.ds, &rowKey, &k.key.ColumnKey, &k.key.RefKey, &body); err != nil {
				rows.Close()
				return nil, fmt.Errorf("storage: read buffered cells: %w", err)
			}
			copy(k.key.RowKey[:], rowKey)
			stored[k] = body
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("storage: read buffered cells: %w", err)
		}
		for i, b := range chunk {
			body, ok := stored[bkey{b.Datastore, b.Cell.Key}]
			if !ok {
				same[lo+i] = true // reaped between the two statements: it reached its primary cluster
				continue
			}
			eq, err := cells.SameBody(cells.Body(body), b.Cell.Body)
			if err != nil {
				return nil, fmt.Errorf("storage: compare buffered body: %w", err)
			}
			same[lo+i] = eq
		}
		lo = hi
	}
	return same, nil
}

// A PutBufferedBatch statement holds at most bufferChunkCells cells and, beyond its first cell,
// bufferChunkBytes of bodies (an escaped body may double; MySQL's default max_allowed_packet is
// 16 MiB and more).
const (
	bufferChunkCells = 200
	bufferChunkBytes = 4 << 20
)

// ScanBuffered returns up to limit buffered cells of datastore's shards in range shards with an id
// above afterID, in id order (one statement), each with the origin it was buffered with. Rows are
// chosen by shard, not by the partition they were buffered for: after an async partition split in
// place (partition.SplitAsync), the rows buffered for the parent in the shards of the right half
// are the right half's to reap. Errors: ErrNoBuffer, or the server's.
func (s *Store) ScanBuffered(ctx context.Context, datastore string, shards cells.ShardRange, afterID int64, limit int) ([]BufferedCell, error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, `partition`, shard, row_key, column_name, ref_key, body, created_at, buffered_at, origin FROM "+tbl+
		" WHERE datastore = ? AND shard BETWEEN ? AND ? AND id > ? ORDER BY id LIMIT ?", datastore, shards.First, shards.Last, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: scan buffer: %w", err)
	}
	defer rows.Close()
	var out []BufferedCell
	for rows.Next() {
		var (
			b      = BufferedCell{Datastore: datastore}
			rowKey []byte
			body   []byte
		)
		if err := rows.Scan(&b.ID, &b.Partition, &b.Shard, &rowKey, &b.Cell.ColumnKey, &b.Cell.RefKey, &body,
			createdAtScanner(&b.Cell.CreatedAt), createdAtScanner(&b.BufferedAt), &b.Cell.Origin); err != nil {
			return nil, fmt.Errorf("storage: scan buffer: %w", err)
		}
		u, err := uuid.FromBytes(rowKey)
		if err != nil {
			return nil, fmt.Errorf("storage: buffered row key of %d bytes: %w", len(rowKey), err)
		}
		b.Cell.RowKey = u
		b.Cell.Body = cells.Body(body)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: scan buffer: %w", err)
	}
	return out, nil
}

// DeleteBuffered deletes the buffer rows with the given ids (one statement; ids already gone
// are ignored) and returns how many it deleted. Errors: ErrNoBuffer, or the server's.
func (s *Store) DeleteBuffered(ctx context.Context, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tbl, err := s.bufferTable()
	if err != nil {
		return 0, err
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	q := "DELETE FROM " + tbl + " WHERE id IN (?" + strings.Repeat(", ?", len(ids)-1) + ")"
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("storage: delete buffered cells: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// BufferStats returns how many cells of datastore the buffer table holds and when the oldest
// was buffered (zero time when empty). One statement. Errors: ErrNoBuffer, or the server's.
func (s *Store) BufferStats(ctx context.Context, datastore string) (depth int64, oldest time.Time, err error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return 0, time.Time{}, err
	}
	var min sql.NullTime
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*), MIN(buffered_at) FROM "+tbl+" WHERE datastore = ?", datastore).Scan(&depth, &min); err != nil {
		return 0, time.Time{}, fmt.Errorf("storage: buffer stats: %w", err)
	}
	if min.Valid {
		oldest = min.Time.UTC()
	}
	return depth, oldest, nil
}

// Lock takes the MySQL named lock name (GET_LOCK) on a connection of its own and returns the
// function that releases it. It waits up to wait for a holder to release it; a timeout
// returns ErrLockTimeout. The server releases the lock if the connection dies, so it orders
// well-behaved writers but is no fence: correctness must not depend on it alone. Async mode
// takes one per partition around each write transaction, so that writers on several nodes
// take turns on a master. Errors: ErrNoBuffer for SQLite and read-only stores.
func (s *Store) Lock(ctx context.Context, name string, wait time.Duration) (unlock func(), err error) {
	if s.db == nil || s.meta == "" {
		return nil, ErrNoBuffer
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("storage: lock %s: %w", name, err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, wait.Seconds()).Scan(&got); err != nil {
		conn.Raw(func(any) error { return driverBad })
		conn.Close()
		return nil, fmt.Errorf("storage: lock %s: %w", name, err)
	}
	if !got.Valid || got.Int64 != 1 {
		conn.Close()
		return nil, fmt.Errorf("%w: %s after %s", ErrLockTimeout, name, wait)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", name); err != nil {
			// The lock goes with the connection: make sure the pool does not keep it.
			conn.Raw(func(any) error { return driverBad })
		}
		conn.Close()
	}, nil
}

// ErrLockTimeout: Lock waited its whole wait for the named lock.
var ErrLockTimeout = errors.New("storage: named lock wait timed out")

// driverBad makes database/sql discard a connection whose session state is unknown.
var driverBad = driver.ErrBadConn

// DeleteBufferedAt deletes the buffer rows of datastore whose key is one of keys and whose
// created_at is at (to the microsecond): the copies one write buffered, and not a copy of the
// same key that an earlier write buffered at another time. It returns how many it deleted.
// One statement per 200 keys. Errors: ErrNoBuffer, or the server's.
func (s *Store) DeleteBufferedAt(ctx context.Context, datastore string, keys []cells.Key, at time.Time) (int64, error) {
	tbl, err := s.bufferTable()
	if err != nil {
		return 0, err
	}
	var total int64
	for lo := 0; lo < len(keys); lo += lookupChunkKeys {
		chunk := keys[lo:min(lo+lookupChunkKeys, len(keys))]
		var q strings.Builder
		q.WriteString("DELETE FROM " + tbl + " WHERE datastore = ? AND created_at = ? AND (")
		args := []any{datastore, at.UTC().Truncate(time.Microsecond)}
		for i, k := range chunk {
			if i > 0 {
				q.WriteString(" OR ")
			}
			q.WriteString("(row_key = ? AND column_name = ? AND ref_key = ?)")
			args = append(args, k.RowKey[:], k.ColumnKey, k.RefKey)
		}
		q.WriteString(")")
		res, err := s.db.ExecContext(ctx, q.String(), args...)
		if err != nil {
			return total, fmt.Errorf("storage: delete buffered copies: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}
