package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

// The buffer table keeps one row per datastore and cell key: a retry finds its own row, another
// body is reported, rows are scanned per primary partition in id order, and deleted by id.
func TestBufferedCells(t *testing.T) {
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
		if err != nil || ins != tc.inserted || same != tc.same {
			t.Fatalf("put %d: got inserted %v same %v err %v, want %v %v", i, ins, same, err, tc.inserted, tc.same)
		}
	}
	other := mk(1, 0, `{"a":1}`)
	other.Datastore = "rides" // the same key in another datastore is another row
	if ins, _, err := s.PutBuffered(ctx, other); err != nil || !ins {
		t.Fatalf("same key in another datastore: inserted %v, %v", ins, err)
	}
	rows, err := s.ScanBuffered(ctx, "trips", 0, 0, 10)
	if err != nil || len(rows) != 2 {
		t.Fatalf("scan partition 0: got %d rows, %v; want 2", len(rows), err)
	}
	if rows[0].ID >= rows[1].ID || rows[0].Cell.Key != mk(1, 0, "{}").Cell.Key || !rows[0].Cell.CreatedAt.Equal(at) ||
		rows[0].Shard != 1 || rows[0].Partition != 0 || rows[0].BufferedAt.IsZero() {
		t.Fatalf("scanned rows: %+v", rows)
	}
	if j, _ := rows[0].Cell.Body.JSON(); string(j) != `{"a":1}` {
		t.Fatalf("scanned body %s, want the first write's", j)
	}
	if page, err := s.ScanBuffered(ctx, "trips", 0, rows[0].ID, 10); err != nil || len(page) != 1 || page[0].ID != rows[1].ID {
		t.Fatalf("scan after the first id: %+v, %v", page, err)
	}
	depth, oldest, err := s.BufferStats(ctx, "trips")
	if err != nil || depth != 3 || oldest.IsZero() {
		t.Fatalf("stats: depth %d oldest %v err %v, want 3 and a time", depth, oldest, err)
	}
	if n, err := s.DeleteBuffered(ctx, []int64{rows[0].ID, rows[0].ID + 1_000_000}); err != nil || n != 1 {
		t.Fatalf("delete of one row and one missing id: deleted %d, %v; want 1", n, err)
	}
	if rest, _ := s.ScanBuffered(ctx, "trips", 0, 0, 10); len(rest) != 1 || rest[0].ID != rows[1].ID {
		t.Fatalf("after delete: %+v", rest)
	}
	// A deleted (reaped) key can be buffered again.
	if ins, same, err := s.PutBuffered(ctx, mk(1, 0, `{"a":1}`)); err != nil || !ins || !same {
		t.Fatalf("after reaping: inserted %v same %v %v", ins, same, err)
	}
}

// PutBufferedBatch stores many cells in one statement and reports per cell whether its body is
// the stored one, including conflicts with rows buffered before and within the batch.
func TestBufferedBatch(t *testing.T) {
	s := mysqlEnv(t).open(t)
	ctx := context.Background()
	mk := func(row int, json string) BufferedCell {
		c := mkCell(t, row, "BASE", 1, 0)
		c.Body = body(t, json)
		return BufferedCell{Datastore: "trips", Partition: 0, Shard: row % 4, Cell: c}
	}
	if _, _, err := s.PutBuffered(ctx, mk(1, `{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	var batch []BufferedCell
	for i := 0; i < 450; i++ { // three chunks
		batch = append(batch, mk(i, `{"v":1}`))
	}
	batch[2] = mk(1, `{"v":2}`)   // conflicts with the earlier row
	batch[3] = mk(300, `{"v":9}`) // conflicts with batch[300], inserted first
	same, err := s.PutBufferedBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range same {
		want := i != 2 && i != 300
		if ok != want {
			t.Fatalf("cell %d: same %v, want %v", i, ok, want)
		}
	}
	rows, err := s.ScanBuffered(ctx, "trips", 0, 0, 1000)
	if err != nil || len(rows) != 448 {
		t.Fatalf("buffered rows: %d, %v; want 448 distinct keys (rows 2 and 3 were replaced)", len(rows), err)
	}
}

// A named lock excludes a second holder until released; a wait times out with ErrLockTimeout.
func TestNamedLock(t *testing.T) {
	e := mysqlEnv(t)
	a, b := e.open(t), e.open(t)
	ctx := context.Background()
	name := mariadbtest.Prefix(t) + "_lock"
	unlock, err := a.Lock(ctx, name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.Lock(ctx, name, 200*time.Millisecond); !errors.Is(err, ErrLockTimeout) || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("second holder: got %v after %s, want ErrLockTimeout after the wait", err, time.Since(start))
	}
	unlock()
	unlock2, err := b.Lock(ctx, name, time.Second)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	unlock2()
	sq := sqliteEnv(t).open(t)
	if _, err := sq.Lock(ctx, name, time.Second); !errors.Is(err, ErrNoBuffer) {
		t.Fatalf("SQLite lock: got %v, want ErrNoBuffer", err)
	}
	if _, _, err := sq.PutBuffered(ctx, BufferedCell{}); !errors.Is(err, ErrNoBuffer) {
		t.Fatalf("SQLite buffer: got %v, want ErrNoBuffer", err)
	}
}

// A read-only store creates nothing, reads a partition whose tables do not exist yet as empty,
// and has no buffer.
func TestReadOnlyStore(t *testing.T) {
	dsn, prefix := mariadbtest.DSN(t), mariadbtest.Prefix(t)
	ctx := context.Background()
	s, err := OpenMySQL(ctx, MySQLConfig{DSN: dsn, Prefix: prefix, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := openPartition(t, s, "trips", 0, 0, 3)
	if got := scanAll(t, p, 0, 10); len(got) != 0 {
		t.Fatalf("empty read-only partition: %d cells", len(got))
	}
	if kvs, err := p.ScanKV(ctx, "consumer/"); err != nil || len(kvs) != 0 {
		t.Fatalf("KV rows of a read-only store without meta tables: %v, %v; want none", kvs, err)
	}
	if _, _, err := s.PutBuffered(ctx, BufferedCell{}); !errors.Is(err, ErrNoBuffer) {
		t.Fatalf("read-only buffer: got %v, want ErrNoBuffer", err)
	}
	// Nothing was created on the server.
	w, err := OpenMySQL(ctx, MySQLConfig{DSN: dsn, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var n int
	if err := w.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name LIKE ?", prefix+"\\_%").Scan(&n); err != nil || n != 1 {
		t.Fatalf("databases of the prefix after the read-only store and one writable store: %d, %v; want only the writable store's meta", n, err)
	}
}
