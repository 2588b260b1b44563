package storage

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

// The buffer table keeps one row per datastore and cell key: a retry finds its own row, another
// body is reported, rows are scanned per shard range in id order, and deleted by id.
func TestBufferedCells(t *testing.T) {
	t.Parallel()
	s := mysqlEnv(t).open(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 23, 10, 0, 0, 123456000, time.UTC)
	mk := func(row, part int, json string) BufferedCell {
		c := mkCell(t, row, "BASE", 1, 0)
		c.Body = body(t, json)
		c.CreatedAt = at
		return BufferedCell{Datastore: "trips", Partition: part, Shard: row % 4, Cell: c}
	}
	for i, tc := range []struct {
		b              BufferedCell
		inserted, same bool
	}{
		{mk(1, 0, `{"a":1}`), true, true},
		{mk(1, 0, `{"a":1}`), false, true},  // a retry
		{mk(1, 0, `{"a":2}`), false, false}, // another body: a conflict
		{mk(2, 0, `{"b":1}`), true, true},
		{mk(3, 1, `{"c":1}`), true, true}, // another primary partition
	} {
		ins, same, err := s.PutBuffered(ctx, tc.b)
		require.NoError(t, err, "put %d", i)
		require.Equal(t, [2]bool{tc.inserted, tc.same}, [2]bool{ins, same}, "put %d: inserted, same", i)
	}
	other := mk(1, 0, `{"a":1}`)
	other.Datastore = "rides" // the same key in another datastore is another row
	ins, _, err := s.PutBuffered(ctx, other)
	require.NoError(t, err, "same key in another datastore")
	require.True(t, ins, "same key in another datastore: want inserted")
	// Rows are scanned by shard: shards 0..2 hold the first two keys, shard 3 the third
	// (buffered for partition 1).
	rows, err := s.ScanBuffered(ctx, "trips", cells.ShardRange{First: 0, Last: 2}, 0, 10)
	require.NoError(t, err, "scan shards 0..2")
	require.Len(t, rows, 2, "scan shards 0..2")
	third, err := s.ScanBuffered(ctx, "trips", cells.ShardRange{First: 3, Last: 3}, 0, 10)
	require.NoError(t, err, "scan shard 3")
	require.True(t, len(third) == 1 && third[0].Partition == 1 && third[0].Shard == 3, "scan shard 3: %+v, want the row buffered for partition 1", third)
	require.True(t, rows[0].ID < rows[1].ID && rows[0].Cell.Key == mk(1, 0, "{}").Cell.Key && rows[0].Cell.CreatedAt.Equal(at) &&
		rows[0].Shard == 1 && rows[0].Partition == 0 && !rows[0].BufferedAt.IsZero(),
		"scanned rows: %+v, want the first write's row first, in shard 1 of partition 0, with a buffered time", rows)
	j, _ := rows[0].Cell.Body.JSON()
	require.Equal(t, `{"a":1}`, string(j), "scanned body: want the first write's")
	page, err := s.ScanBuffered(ctx, "trips", cells.ShardRange{First: 0, Last: 2}, rows[0].ID, 10)
	require.NoError(t, err, "scan after the first id")
	require.Len(t, page, 1, "scan after the first id")
	require.Equal(t, rows[1].ID, page[0].ID, "scan after the first id")
	depth, oldest, err := s.BufferStats(ctx, "trips")
	require.NoError(t, err, "stats")
	require.EqualValues(t, 3, depth, "stats: depth")
	require.False(t, oldest.IsZero(), "stats: want an oldest time")
	n, err := s.DeleteBuffered(ctx, []int64{rows[0].ID, rows[0].ID + 1_000_000})
	require.NoError(t, err, "delete of one row and one missing id: deleted %d, %v; want 1", n, err)
	require.EqualValues(t, 1, n, "delete of one row and one missing id: deleted %d, %v; want 1", n, err)
	rest, _ := s.ScanBuffered(ctx, "trips", cells.ShardRange{First: 0, Last: 2}, 0, 10)
	require.Len(t, rest, 1, "after delete: %+v", rest)
	require.Equal(t, rows[1].ID, rest[0].ID, "after delete: want the second row left")
	// A deleted (reaped) key can be buffered again.
	ins, same, err := s.PutBuffered(ctx, mk(1, 0, `{"a":1}`))
	require.NoError(t, err, "after reaping")
	require.True(t, ins && same, "after reaping: inserted %v same %v, want both", ins, same)
}

// PutBufferedBatch stores many cells in one statement and reports per cell whether its body is
// the stored one, including conflicts with rows buffered before and within the batch.
func TestBufferedBatch(t *testing.T) {
	t.Parallel()
	s := mysqlEnv(t).open(t)
	ctx := context.Background()
	mk := func(row int, json string) BufferedCell {
		c := mkCell(t, row, "BASE", 1, 0)
		c.Body = body(t, json)
		return BufferedCell{Datastore: "trips", Partition: 0, Shard: row % 4, Cell: c}
	}
	_, _, err := s.PutBuffered(ctx, mk(1, `{"v":1}`))
	require.NoError(t, err)
	var batch []BufferedCell
	for i := 0; i < 450; i++ { // three chunks
		batch = append(batch, mk(i, `{"v":1}`))
	}
	batch[2] = mk(1, `{"v":2}`)   // conflicts with the earlier row
	batch[3] = mk(300, `{"v":9}`) // conflicts with batch[300], inserted first
	same, err := s.PutBufferedBatch(ctx, batch)
	require.NoError(t, err)
	for i, ok := range same {
		want := i != 2 && i != 300
		require.Equal(t, want, ok, "cell %d: same %v, want %v", i, ok, want)
	}
	rows, err := s.ScanBuffered(ctx, "trips", cells.ShardRange{First: 0, Last: 3}, 0, 1000)
	require.NoError(t, err, "buffered rows")
	require.Len(t, rows, 448, "buffered rows: want 448 distinct keys (rows 2 and 3 were replaced)")
}

// A named lock excludes a second holder until released; a wait times out with ErrLockTimeout.
func TestNamedLock(t *testing.T) {
	t.Parallel()
	e := mysqlEnv(t)
	a, b := e.open(t), e.open(t)
	ctx := context.Background()
	name := mariadbtest.Prefix(t) + "_lock"
	unlock, err := a.Lock(ctx, name, time.Second)
	require.NoError(t, err)
	start := time.Now()
	_, err = b.Lock(ctx, name, 200*time.Millisecond)
	require.ErrorIs(t, err, ErrLockTimeout, "second holder")
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "second holder: want ErrLockTimeout after the wait")
	unlock()
	unlock2, err := b.Lock(ctx, name, time.Second)
	require.NoError(t, err, "after release")
	unlock2()
	sq := sqliteEnv(t).open(t)
	require.ErrorIs(t, errOf(sq.Lock(ctx, name, time.Second)), ErrNoBuffer, "SQLite lock")
	_, _, err = sq.PutBuffered(ctx, BufferedCell{})
	require.ErrorIs(t, err, ErrNoBuffer, "SQLite buffer")
}

// A read-only store creates nothing, reads a partition whose tables do not exist yet as empty,
// and has no buffer.
func TestReadOnlyStore(t *testing.T) {
	t.Parallel()
	dsn, prefix := mariadbtest.DSN(t), mariadbtest.Prefix(t)
	ctx := context.Background()
	s, err := OpenMySQL(ctx, MySQLConfig{DSN: dsn, Prefix: prefix, ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	p := openPartition(t, s, "trips", 0, 0, 3)
	got := scanAll(t, p, 0, 10)
	require.Empty(t, got, "empty read-only partition: %d cells", len(got))
	kvs, err := p.ScanKV(ctx, "consumer/")
	require.NoError(t, err, "KV rows of a read-only store without meta tables: %v, %v; want none", kvs, err)
	require.Empty(t, kvs, "KV rows of a read-only store without meta tables: %v, %v; want none", kvs, err)
	_, _, err = s.PutBuffered(ctx, BufferedCell{})
	require.ErrorIs(t, err, ErrNoBuffer, "read-only buffer")
	// Nothing was created on the server.
	w, err := OpenMySQL(ctx, MySQLConfig{DSN: dsn, Prefix: prefix})
	require.NoError(t, err)
	defer w.Close()
	var n int
	require.NoError(t, w.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name LIKE ?", prefix+"\\_%").Scan(&n))
	require.Equal(t, 1, n, "databases of the prefix after the read-only store and one writable store: want only the writable store's meta")
}
