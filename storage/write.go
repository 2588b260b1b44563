package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"

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
	if p.pb != nil {
		return &WriteTx{p: p, b: p.pb.db.NewIndexedBatch(), ctx: ctx}, nil
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
// or SetApplied (other than ErrKVTooLarge, ErrIndexValue, ErrInvalidOrigin and ErrInvalidConfig,
// returned before any I/O) leaves the transaction open but its outcome undefined: roll it back.
type WriteTx struct {
	p  *PartitionStore
	tx *sql.Tx
	// b is the transaction of a pebble partition (an indexed batch: its reads see its own
	// writes), and kbuf a scratch buffer for its keys; nil for the SQL engines.
	b    *pebble.Batch
	kbuf []byte
	// ctx bounds a pebble transaction: once it is done, calls fail and Commit rolls back.
	ctx context.Context
	// high is pebblePart.high as this transaction's inserts raised it, merged into it at Commit.
	high map[int]int64
	// attached names the partition whose SQLite file is attached to the transaction's
	// connection as splitSourceSchema (BeginAbsorb), and end detaches it and releases the
	// connection once the transaction ended; nil otherwise.
	attached *PartitionID
	end      func() error
	// absorbed is the range AbsorbShards took into a SQLite partition: Commit widens the
	// partition's range to it before it releases the writer token, so that the stray sweeper
	// never takes the shards' new tables for strays (strays.go). nil otherwise.
	absorbed *cells.ShardRange
	// touched are the request IDs this pebble transaction stored or deleted, and
	// voidPrecopies says it changed request records in another way (AbsorbShards): its commit
	// hands them to the partition's pre-copies (noteRequests, precopypebble.go).
	touched       []uuid.UUID
	voidPrecopies bool
	done          bool
}

func (tx *WriteTx) check(shard int) error {
	if tx.done {
		return ErrClosed
	}
	if tx.b != nil {
		if err := tx.ctx.Err(); err != nil {
			return fmt.Errorf("storage: write transaction: %w", err)
		}
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
	if tx.b != nil {
		return tx.pebbleLookup(shard, keys)
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
		found, err := queryCells(ctx, tx.stmtOrTx(ctx, lookupSQL(tx.p.d, shard, len(chunk))), "", args...)
		if err != nil {
			return nil, tx.p.fail(fmt.Sprintf("lookup %d keys in shard %d", len(chunk), shard), err)
		}
		for _, c := range found {
			out[c.Key] = Existing{AddedID: c.AddedID, Body: c.Body, CreatedAt: c.CreatedAt, Origin: c.Origin}
		}
	}
	return out, nil
}

// Insert appends cs to shard, as multi-row INSERT statements of up to 500 cells (fewer when
// the bodies are large). Each cell is stored as given: AddedID (assigned by the caller, unique
// in the shard), Key, Body, CreatedAt (stored in UTC, truncated to the microsecond) and Origin.
// A cell whose Origin is neither "" nor a valid cluster name (cells.ValidateClusterName)
// returns ErrInvalidOrigin before anything is written, and the transaction stays usable. The
// caller guarantees that every cell belongs to shard. A key or added_id that is already stored
// returns ErrDuplicate, and then none of cs is stored and the transaction stays usable: the
// failing statement is rolled back by the engine (SQLite's ABORT conflict resolution, InnoDB's
// statement rollback), and when cs needs more than one statement they run inside a SAVEPOINT
// that is rolled back. So a writer that expects no duplicates can Insert first and Lookup only
// after ErrDuplicate. A shard whose tables do not exist returns ErrNoShardTable. Insert does
// not retain cs.
func (tx *WriteTx) Insert(ctx context.Context, shard int, cs []cells.Cell) error {
	if err := tx.check(shard); err != nil {
		return err
	}
	if err := checkOrigins(fmt.Sprintf("insert into shard %d", shard), cs); err != nil {
		return err
	}
	if tx.b != nil {
		return tx.pebbleInsert(shard, cs)
	}
	stmt := func(q string) stmtQueryer { return tx.stmtOrTx(ctx, q) }
	multi := manyStatements(tx.p.d, cs)
	if multi {
		if _, err := tx.tx.ExecContext(ctx, "SAVEPOINT cell_insert"); err != nil {
			return tx.p.fail("savepoint", err)
		}
	}
	err := insertCells(ctx, stmt, tx.p.d, shard, cs)
	if multi {
		end := "RELEASE SAVEPOINT cell_insert"
		if err != nil {
			end = "ROLLBACK TO SAVEPOINT cell_insert"
		}
		if _, serr := tx.tx.ExecContext(ctx, end); serr != nil && err == nil {
			err = tx.p.fail("release savepoint", serr)
		}
	}
	if err != nil {
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
	if tx.b != nil {
		return tx.b.Set(tx.p.pb.key(tagApplied, 0), appliedValue(a), nil)
	}
	return setApplied(ctx, tx.stmtOrTx(ctx, tx.p.d.upsertApplied), tx.p, a)
}

// setApplied runs p's upsertApplied statement q (prepared or not) with a.
func setApplied(ctx context.Context, q stmtQueryer, p *PartitionStore, a AppliedState) error {
	if a.Index > math.MaxInt64 || a.Term > math.MaxInt64 {
		return fmt.Errorf("storage: applied state %+v does not fit in int64", a)
	}
	if _, err := q.Exec(ctx, p.id.Datastore, p.id.Partition, int64(a.Index), int64(a.Term), schemaVersion); err != nil {
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
	if tx.b != nil {
		err := tx.ctx.Err()
		if err == nil {
			err = tx.b.Commit(pebble.NoSync)
		}
		if cerr := tx.b.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return tx.p.fail("commit", err)
		}
		for s, h := range tx.high {
			tx.p.pb.high[s] = h
		}
		if len(tx.touched) > 0 || tx.voidPrecopies {
			tx.p.noteRequests(tx.touched, tx.voidPrecopies)
		}
		return nil
	}
	err := tx.tx.Commit()
	if tx.end != nil {
		err = errors.Join(err, tx.end())
	}
	tx.prepareNoted()
	if err != nil {
		return tx.p.fail("commit", err)
	}
	if a := tx.absorbed; a != nil {
		cur := tx.p.Shards()
		tx.p.SetShards(cells.ShardRange{First: min(cur.First, a.First), Last: max(cur.Last, a.Last)})
	}
	return nil
}

// prepareNoted prepares the statements this transaction ran unprepared (see stmtCache), while
// the writer token is still held and the write connection is free again.
func (tx *WriteTx) prepareNoted() {
	if tx.p.owned && tx.p.d.engine == EngineSQLite && !tx.p.closed.Load() {
		tx.p.stmts.preparePending(tx.p.write)
	}
}

// Rollback discards the transaction's writes. It is a no-op returning nil after Commit or
// Rollback, or when the transaction was already rolled back because its context ended.
func (tx *WriteTx) Rollback() error {
	if tx.done {
		return nil
	}
	tx.done = true
	defer tx.p.unlockWriter()
	if tx.b != nil {
		if err := tx.b.Close(); err != nil {
			return tx.p.fail("rollback", err)
		}
		return nil
	}
	defer tx.prepareNoted()
	err := tx.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		err = nil
	}
	if tx.end != nil {
		err = errors.Join(err, tx.end())
	}
	if err != nil {
		return tx.p.fail("rollback", err)
	}
	return nil
}

// stmtCache holds prepared statements of a SQLite partition's write connection (or of its
// read pool), by SQL text. modernc.org/sqlite compiles a statement's text on every call that
// does not go through a prepared statement, and the FSM's lookups, inserts and applied-state
// updates (one per shard of a batch, of a few dozen shapes per shard: one per row count) spend
// a large share of their time there; a statement prepared once on the single write connection
// is reused by every transaction (sql.Tx.StmtContext finds it on that connection). MySQL does
// not use it: with interpolateParams a statement is one round trip, and a prepared one would
// add a round trip per connection and shape.
//
// A prepared statement holds its compiled program in SQLite's heap, outside Go's, and a
// multi-row statement's program grows with its rows. So the cache is bounded by statement
// size: short statements (at most shortStmtText bytes: one to five rows, the single-cell write
// and read paths) up to maxShortStmts of them; longer ones up to maxCachedStmtText bytes (about
// 20 rows) within maxCachedStmtBytes of text in all. Longer statements, of many rows, run unprepared; their compile time is small beside the rows
// they write. (With a cap of 512 statements of any length instead, a test writing 600
// FSM-shaped batches of 1 to 60 rows per shard into 4 partitions held 77 MiB, against 40 MiB
// with these bounds: BENCHMARKS.md, "What changed".)
type stmtCache struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool // texts to prepare when the write connection is free
	short   int             // short statements of m and pending
	bytes   int             // text bytes of the longer statements of m and pending
}

const (
	// shortStmtText is the longest text of a short statement (see stmtCache), in bytes: a cell
	// INSERT of 5 rows.
	shortStmtText = 216
	// maxShortStmts bounds the short statements of one stmtCache.
	maxShortStmts = 1024
	// maxCachedStmtText is the longest statement text stmtCache keeps prepared, in bytes: a
	// cell INSERT of 21 rows, a lookup of 40 keys.
	maxCachedStmtText = 584
	// maxCachedStmtBytes bounds the text bytes of one stmtCache's longer statements.
	maxCachedStmtBytes = 64 << 10
)

// admit reports whether q may be added to the cache, counting it if so. c.mu is held.
func (c *stmtCache) admit(q string) bool {
	switch {
	case len(q) <= shortStmtText && c.short < maxShortStmts:
		c.short++
	case len(q) > shortStmtText && len(q) <= maxCachedStmtText && c.bytes+len(q) <= maxCachedStmtBytes:
		c.bytes += len(q)
	default:
		return false
	}
	return true
}

// forget undoes admit(q), for a statement that failed to prepare. c.mu is held.
func (c *stmtCache) forget(q string) {
	if len(q) <= shortStmtText {
		c.short--
	} else {
		c.bytes -= len(q)
	}
}

// get returns the prepared statement of q, or nil when it is not prepared: q is then noted,
// if the cache admits it, and prepared by preparePending once the transaction has ended (the
// write pool's one connection is the transaction's until then, so a prepare on the pool would
// wait forever).
func (c *stmtCache) get(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st
	}
	if !c.pending[q] && c.admit(q) {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[q] = true
	}
	return nil
}

// prepareNow returns the prepared statement of q on db, preparing it now if need be (db must
// not be a pool whose connections a caller holds: the read pool, not the write one); nil when
// the cache does not admit q or the prepare failed (the caller runs q unprepared).
func (c *stmtCache) prepareNow(ctx context.Context, db *sql.DB, q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st
	}
	if !c.admit(q) {
		return nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		c.forget(q)
		return nil
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[q] = st
	return st
}

// readStmt returns the read pool's prepared statement of q on a SQLite partition, or nil (MySQL,
// or not cacheable): see stmtCache. The first call for q prepares it, which takes a connection
// from the read pool: a caller holding one (an open read transaction) must not call it, or
// readers holding every connection would wait on each other.
func (p *PartitionStore) readStmt(ctx context.Context, q string) *sql.Stmt {
	if !p.owned || p.d.engine != EngineSQLite || p.closed.Load() {
		return nil
	}
	return p.readStmts.prepareNow(ctx, p.read, q)
}

// reset closes the cached statements and forgets them and the pending ones: their pool is
// about to close (cloneSQLite).
func (c *stmtCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		_ = st.Close()
	}
	clear(c.m)
	clear(c.pending)
	c.short, c.bytes = 0, 0
}

// preparePending prepares the statements get noted on db, which must have a free connection.
// A statement that fails to prepare (a shard table dropped since) is not cached.
func (c *stmtCache) preparePending(db *sql.DB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.pending {
		st, err := db.Prepare(q)
		if err != nil {
			c.forget(q)
			continue
		}
		if c.m == nil {
			c.m = map[string]*sql.Stmt{}
		}
		c.m[q] = st
	}
	clear(c.pending)
}

// stmtOrTx returns a queryer that runs q in the transaction: its cached prepared statement on
// a SQLite partition, else the transaction itself with q as the query text.
func (tx *WriteTx) stmtOrTx(ctx context.Context, q string) stmtQueryer {
	if tx.p.owned && tx.p.d.engine == EngineSQLite {
		if st := tx.p.stmts.get(q); st != nil {
			return stmtQueryer{st: tx.tx.StmtContext(ctx, st)}
		}
	}
	return stmtQueryer{tx: tx.tx, q: q}
}

// stmtQueryer runs one statement: st, or q on tx.
type stmtQueryer struct {
	st *sql.Stmt
	tx *sql.Tx
	q  string
}

// QueryContext implements rowsQueryer; the query text argument is ignored (the statement's
// is used).
func (s stmtQueryer) QueryContext(ctx context.Context, _ string, args ...any) (*sql.Rows, error) {
	if s.st != nil {
		return s.st.QueryContext(ctx, args...)
	}
	return s.tx.QueryContext(ctx, s.q, args...)
}

// Exec runs the statement with args.
func (s stmtQueryer) Exec(ctx context.Context, args ...any) (sql.Result, error) {
	if s.st != nil {
		return s.st.ExecContext(ctx, args...)
	}
	return s.tx.ExecContext(ctx, s.q, args...)
}

// LatestRefKey returns the highest ref key stored in shard under rowKey and column (including
// cells this transaction inserted), and false when the column has no cell (or the shard has no
// table yet). One probe of the unique key.
func (tx *WriteTx) LatestRefKey(ctx context.Context, shard int, rowKey [16]byte, column string) (int64, bool, error) {
	if err := tx.check(shard); err != nil {
		return 0, false, err
	}
	if tx.b != nil {
		return tx.pebbleLatestRefKey(shard, rowKey, column)
	}
	q := "SELECT ref_key FROM " + tx.p.d.entity(shard) + " WHERE row_key = ? AND column_name = ? ORDER BY ref_key DESC LIMIT 1"
	rows, err := tx.stmtOrTx(ctx, q).QueryContext(ctx, q, rowKey[:], column)
	if isNoTable(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, tx.p.fail(fmt.Sprintf("latest ref key in shard %d", shard), err)
	}
	defer rows.Close()
	var ref int64
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, false, tx.p.fail(fmt.Sprintf("latest ref key in shard %d", shard), err)
		}
		return 0, false, nil
	}
	if err := rows.Scan(&ref); err != nil {
		return 0, false, tx.p.fail(fmt.Sprintf("latest ref key in shard %d", shard), err)
	}
	return ref, true, nil
}
