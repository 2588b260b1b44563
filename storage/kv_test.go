package storage

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// kvDiff describes how got differs from want, or "" if it does not. Empty and nil values are
// the same.
func kvDiff(got, want []KV) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows %q, want %d rows %q", len(got), kvKeys(got), len(want), kvKeys(want))
	}
	for i := range got {
		if got[i].Key != want[i].Key {
			return fmt.Sprintf("keys %q, want %q", kvKeys(got), kvKeys(want))
		}
		if !bytes.Equal(got[i].Value, want[i].Value) {
			return fmt.Sprintf("row %q: value %q, want %q", got[i].Key, trim(got[i].Value), trim(want[i].Value))
		}
	}
	return ""
}

func trim(v []byte) []byte {
	if len(v) > 40 {
		return v[:40]
	}
	return v
}

func kvKeys(kvs []KV) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Key
	}
	return out
}

// checkScanKV checks ScanKV(prefix) against want.
func checkScanKV(t testing.TB, what string, p *PartitionStore, prefix string, want []KV) {
	t.Helper()
	got, err := p.ScanKV(context.Background(), prefix)
	require.NoError(t, err, "%s: ScanKV(%q)", what, prefix)
	d := kvDiff(got, want)
	assert.Empty(t, d, "%s: ScanKV(%q): got %s", what, prefix, d)
}

// putKV commits puts (a nil value deletes the key) in one write transaction.
func putKV(t testing.TB, p *PartitionStore, puts []KV) {
	t.Helper()
	require.NoError(t, tryPutKV(p, puts))
}

// tryPutKV is putKV for goroutines other than the test's.
func tryPutKV(p *PartitionStore, puts []KV) error {
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	if err != nil {
		return fmt.Errorf("Begin: %w", err)
	}
	defer tx.Rollback()
	for _, kv := range puts {
		if kv.Value == nil {
			err = tx.DeleteKV(ctx, kv.Key)
		} else {
			err = tx.PutKV(ctx, kv.Key, kv.Value)
		}
		if err != nil {
			return fmt.Errorf("put/delete KV %q: %w", kv.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("Commit: %w", err)
	}
	return nil
}

// txValue reads the value of key as the write transaction sees it.
func txValue(tx *WriteTx, key string) ([]byte, error) {
	if tx.b != nil {
		v, ok, err := getCopy(tx.b, tx.p.pb.kvKey(key))
		if err == nil && !ok {
			err = sql.ErrNoRows
		}
		return v, err
	}
	where, args := tx.p.kvWhere("k = ?", []byte(key))
	var v []byte
	err := tx.tx.QueryRowContext(context.Background(), "SELECT v FROM "+tx.p.d.kv+where, args...).Scan(&v)
	return v, err
}

// snapshotKV reads every KV row of a snapshot.
func snapshotKV(t testing.TB, s *SnapshotTx) []KV {
	t.Helper()
	var out []KV
	require.NoError(t, s.ScanKV(context.Background(), func(kv KV) error {
		out = append(out, kv)
		return nil
	}), "snapshot ScanKV")
	return out
}

// kvRows are keys whose bytewise order differs from a collation's: case, a trailing space
// and NUL (which a PAD SPACE collation would fold), 0xff bytes, and a prefix of others.
func kvRows() []KV {
	return []KV{
		{"A", []byte("upper")},
		{"a", []byte("lower")},
		{"a\x00", []byte("nul")},
		{"a ", []byte("space")},
		{"a/1", []byte("one")},
		{"a/2", []byte{}},
		{"a\xff", []byte{0, 1, 2, 0xff}},
		{"a\xff\xff", []byte("ff ff")},
		{"b", []byte("b")},
		{"\xff", []byte("last")},
	}
}

// withPrefix returns the rows of kvs whose key starts with prefix.
func withPrefix(kvs []KV, prefix string) []KV {
	var out []KV
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// PutKV and DeleteKV change the KV rows when their transaction commits; ScanKV reads a
// prefix in bytewise key order.
func TestKVPutDeleteScan(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 1)
		checkScanKV(t, "new partition", p, "", nil)

		rows := kvRows()
		// Put in reverse order: the order read must come from the keys.
		rev := slices.Clone(rows)
		slices.Reverse(rev)
		putKV(t, p, rev)
		for _, prefix := range []string{"", "a", "a/", "a\xff", "\xff", "A", "b", "c", "a/3"} {
			checkScanKV(t, "after the puts", p, prefix, withPrefix(rows, prefix))
		}

		// Uncommitted writes are invisible; rollback discards them; the transaction sees them
		// (a second put of a key replaces its value).
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		for _, step := range []error{
			tx.PutKV(ctx, "a/1", []byte("changed")),
			tx.PutKV(ctx, "a/1", []byte("changed twice")),
			tx.PutKV(ctx, "new", []byte("new")),
			tx.DeleteKV(ctx, "b"),
			tx.DeleteKV(ctx, "missing"),
		} {
			require.NoError(t, step)
		}
		if v, err := txValue(tx, "a/1"); assert.NoError(t, err, "value of a/1 inside the transaction that put it twice: got %q, %v; want %q", v, err, "changed twice") {
			assert.Equal(t, "changed twice", string(v), "value of a/1 inside the transaction that put it twice: got %q, %v; want %q", v, err, "changed twice")
		}
		checkScanKV(t, "during the transaction", p, "", rows)
		require.NoError(t, tx.Rollback())
		checkScanKV(t, "after Rollback", p, "", rows)

		// Commit shows them.
		putKV(t, p, []KV{{"a/1", []byte("changed")}, {"new", []byte("new")}, {"b", nil}, {"missing", nil}})
		want := slices.Clone(rows)
		want[4].Value = []byte("changed")
		want = slices.DeleteFunc(want, func(kv KV) bool { return kv.Key == "b" })
		want = slices.Insert(want, len(want)-1, KV{"new", []byte("new")}) // before "\xff"
		checkScanKV(t, "after Commit", p, "", want)

		// A put with a nil value stores an empty value, not a deletion or a NULL.
		tx, err = p.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutKV(ctx, "nil", nil), "PutKV with a nil value")
		require.NoError(t, tx.Commit())
		checkScanKV(t, "after putting a nil value", p, "nil", []KV{{"nil", []byte{}}})

		// The rows survive reopening.
		p.Close()
		p = openPartition(t, e.open(t), "trips", 0, 0, 1)
		checkScanKV(t, "after reopening", p, "a/", withPrefix(want, "a/"))
	})
}

// Keys and values out of bounds are refused with ErrKVTooLarge, leaving the transaction
// usable; the bounds themselves are accepted. After Commit the methods return ErrClosed.
func TestKVLimits(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		long := strings.Repeat("k", MaxKVKeyBytes+1)
		for _, tc := range []struct {
			name string
			err  error
		}{
			{"PutKV of an empty key", tx.PutKV(ctx, "", []byte("v"))},
			{"PutKV of a key over MaxKVKeyBytes", tx.PutKV(ctx, long, []byte("v"))},
			{"PutKV of a value over MaxKVValueBytes", tx.PutKV(ctx, "big", make([]byte, MaxKVValueBytes+1))},
			{"DeleteKV of an empty key", tx.DeleteKV(ctx, "")},
			{"DeleteKV of a key over MaxKVKeyBytes", tx.DeleteKV(ctx, long)},
		} {
			assert.ErrorIs(t, tc.err, ErrKVTooLarge, "%s", tc.name)
		}
		maxKey := strings.Repeat("\xfe", MaxKVKeyBytes)
		require.NoError(t, tx.PutKV(ctx, maxKey, []byte("max key")), "PutKV of a %d-byte key", MaxKVKeyBytes)
		// A value of MaxKVValueBytes (as large as MariaDB's default max_allowed_packet), with
		// bytes an interpolated statement must escape, round trips.
		big := bytes.Repeat([]byte{0, 1, 2, 0xff, '\'', '\\'}, MaxKVValueBytes/6+1)[:MaxKVValueBytes]
		require.NoError(t, tx.PutKV(ctx, "big", big), "PutKV of a %d-byte value", len(big))
		require.NoError(t, tx.Commit())
		bounds := []KV{{"big", big}, {maxKey, []byte("max key")}}
		checkScanKV(t, "after the limits", p, "", bounds)
		snap, err := p.BeginSnapshot(ctx)
		require.NoError(t, err)
		d := kvDiff(snapshotKV(t, snap), bounds)
		assert.Empty(t, d, "snapshot ScanKV of the bounds: got %s", d)
		snap.Close()
		require.NoError(t, p.Restore(ctx, AppliedState{Index: 1, Term: 1}, stream(nil), bounds, nil), "Restore of the bounds")
		checkScanKV(t, "after restoring the bounds", p, "", bounds)
		assert.ErrorIs(t, tx.PutKV(ctx, "k", nil), ErrClosed, "PutKV after Commit")
		assert.ErrorIs(t, tx.DeleteKV(ctx, "k"), ErrClosed, "DeleteKV after Commit")
		p.Close()
		assert.ErrorIs(t, errOf(p.ScanKV(ctx, "")), ErrClosed, "ScanKV after Close")
	})
}

// ScanKV of a prefix reads a range of the primary key, in its order: no scan, no sort.
func TestScanKVUsesPrimaryKey(t *testing.T) {
	t.Parallel()
	forEachSQLEngine(t, func(t *testing.T, e *engineEnv) {
		s := e.open(t)
		p := openPartition(t, s, "trips", 0, 0, 0)
		for part := range 3 {
			var rows []KV
			for i := range 300 {
				rows = append(rows, KV{fmt.Sprintf("g%d/%03d", i%10, i), []byte("v")})
			}
			putKV(t, openPartition(t, s, "trips", part+1, 0, 0), rows)
			putKV(t, p, rows)
		}
		if e.name == EngineMySQL {
			require.NoError(t, errOf(p.write.Exec("ANALYZE TABLE "+p.d.kv)))
		}
		q, args := p.scanKVSQL("g3/")
		plan := explainRows(t, p.read, e.name, q, args...)
		require.NotEmpty(t, plan, "empty plan")
		for _, r := range plan {
			if e.name == EngineSQLite {
				d := r["detail"]
				assert.True(t, strings.HasPrefix(d, "SEARCH kv USING INDEX"), "ScanKV(g3/): got plan step %q, want SEARCH kv USING INDEX (the primary key)", d)
			} else {
				assert.True(t, r["key"] == "PRIMARY" && r["type"] == "range" && !strings.Contains(r["extra"], "filesort"),
					"ScanKV(g3/): got plan %v, want a range of PRIMARY without filesort", r)
			}
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("ScanKV(g3/): plan %v", plan)
		}
	})
}

// Partitions and datastores have their own KV rows (in MySQL they share one table).
func TestKVPartitionsIsolated(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		s := e.open(t)
		a0 := openPartition(t, s, "alpha", 0, 0, 1)
		a1 := openPartition(t, s, "alpha", 1, 2, 3)
		b0 := openPartition(t, s, "beta", 0, 0, 1)
		for i, p := range []*PartitionStore{a0, a1, b0} {
			putKV(t, p, []KV{{"k", []byte{byte(i)}}, {fmt.Sprintf("only%d", i), []byte("x")}})
		}
		putKV(t, a1, []KV{{"k", nil}})
		checkScanKV(t, "alpha/0", a0, "", []KV{{"k", []byte{0}}, {"only0", []byte("x")}})
		checkScanKV(t, "alpha/1", a1, "", []KV{{"only1", []byte("x")}})
		checkScanKV(t, "beta/0", b0, "", []KV{{"k", []byte{2}}, {"only2", []byte("x")}})
	})
}

// A snapshot sees the KV rows as of its start, in key order, across pages, while the writer
// changes them; its ScanKV stops at the callback's error.
func TestSnapshotKV(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		var old []KV
		for i := range snapshotPageRows + 300 {
			old = append(old, KV{fmt.Sprintf("key/%05d", i), []byte(fmt.Sprintf("v%d", i))})
		}
		putKV(t, p, old)
		snap, err := p.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer snap.Close()

		putKV(t, p, []KV{{"key/00000", nil}, {"key/00001", []byte("changed")}, {"key/99999", []byte("new")}, {"a", []byte("new")}})
		d := kvDiff(snapshotKV(t, snap), old)
		assert.Empty(t, d, "snapshot ScanKV after the writer changed the rows: got %s", d)
		now, err := p.ScanKV(ctx, "")
		require.NoError(t, err)
		if assert.Len(t, now, len(old)+1, "ScanKV after the writer: rows") {
			assert.True(t, now[0].Key == "a" && string(now[1].Value) == "changed",
				"ScanKV after the writer: got rows starting %q, want a, key/00001=changed", kvKeys(now[:2]))
		}

		stop := errors.New("stop here")
		n := 0
		err = snap.ScanKV(ctx, func(KV) error {
			n++
			if n == 3 {
				return stop
			}
			return nil
		})
		assert.ErrorIs(t, err, stop, "snapshot ScanKV with a callback failing at the 3rd row: want the callback's error")
		assert.Equal(t, 3, n, "snapshot ScanKV with a callback failing at the 3rd row: calls")
		require.NoError(t, snap.Close())
		assert.ErrorIs(t, snap.ScanKV(ctx, func(KV) error { return nil }), ErrClosed, "snapshot ScanKV after Close")
	})
}

// Restore replaces the partition's KV rows, and only its own; a failed Restore leaves them.
func TestRestoreKV(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		p := openPartition(t, s, "trips", 0, 0, 1)
		other := openPartition(t, s, "trips", 1, 2, 3)
		putKV(t, p, []KV{{"old/1", []byte("1")}, {"old/2", []byte("2")}, {"same", []byte("old")}})
		putKV(t, other, []KV{{"old/1", []byte("other")}})
		write(t, p, map[int][]cells.Cell{0: {mkCell(t, 1, "base", 1, 1)}}, AppliedState{Index: 3, Term: 1})

		restored := []KV{{"same", []byte("new")}, {"new/1", []byte{}}, {"\xff", []byte("ff")}}
		c := mkCell(t, 2, "base", 1, 7)
		require.NoError(t, p.Restore(ctx, AppliedState{Index: 9, Term: 2}, stream([]restoreItem{{shard: 1, c: c}}), restored, nil), "Restore")
		want := []KV{{"new/1", []byte{}}, {"same", []byte("new")}, {"\xff", []byte("ff")}}
		checkScanKV(t, "after Restore", p, "", want)
		checkScanKV(t, "the other partition after Restore", other, "", []KV{{"old/1", []byte("other")}})
		checkCells(t, "shard 1 after Restore", scanAll(t, p, 1, 10), []cells.Cell{c})

		boom := errors.New("stream broke")
		for _, tc := range []struct {
			name  string
			items []restoreItem
			kv    []KV
			want  error
		}{
			{"next fails", []restoreItem{{err: boom}}, []KV{{"x", nil}}, boom},
			{"a KV key is given twice", nil, []KV{{"x", []byte("1")}, {"y", nil}, {"x", []byte("2")}}, ErrDuplicate},
			{"a KV key is empty", nil, []KV{{"x", nil}, {"", []byte("1")}}, ErrKVTooLarge},
			{"a KV value is too large", nil, []KV{{"x", make([]byte, MaxKVValueBytes+1)}}, ErrKVTooLarge},
		} {
			assert.ErrorIs(t, p.Restore(ctx, AppliedState{Index: 99, Term: 9}, stream(tc.items), tc.kv, nil), tc.want, "Restore when %s", tc.name)
			checkScanKV(t, "after a Restore where "+tc.name, p, "", want)
			if a, err := p.Applied(ctx); assert.NoError(t, err, "after a Restore where %s: Applied = %+v, %v; want {9 2}", tc.name, a, err) {
				assert.Equal(t, AppliedState{Index: 9, Term: 2}, a, "after a Restore where %s: Applied = %+v, %v; want {9 2}", tc.name, a, err)
			}
		}

		// Many rows, beyond one INSERT, and a nil kv empties the table.
		var many []KV
		for i := range 1200 {
			many = append(many, KV{fmt.Sprintf("m/%04d", i), bytes.Repeat([]byte{byte(i)}, i)})
		}
		require.NoError(t, p.Restore(ctx, AppliedState{Index: 10, Term: 2}, stream(nil), many, nil), "Restore of %d KV rows", len(many))
		checkScanKV(t, "after restoring many rows", p, "", many)
		require.NoError(t, p.Restore(ctx, AppliedState{Index: 11, Term: 2}, stream(nil), nil, nil))
		checkScanKV(t, "after restoring no rows", p, "", nil)
		checkScanKV(t, "the other partition at the end", other, "", []KV{{"old/1", []byte("other")}})
	})
}

// logCells makes n cells of shard with added_id 1..n; the columns cycle through cols.
func logCells(t testing.TB, n int, cols ...string) []cells.Cell {
	out := make([]cells.Cell, n)
	for i := range out {
		out[i] = mkCell(t, i, cols[i%len(cols)], 1, int64(i+1))
	}
	return out
}

// ReadLog reads a shard's log in added_id order, in pages, filtered by column, and says where
// to read on.
func TestReadLog(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 2)
		// Shard 0: 10 cells, columns base, status, base, status, ...; the last two are base
		// and status, so a filter on a column that is not last ends on the other's cells.
		cs := logCells(t, 10, "base", "status")
		write(t, p, map[int][]cells.Cell{0: cs}, AppliedState{Index: 1, Term: 1})
		bases := []cells.Cell{cs[0], cs[2], cs[4], cs[6], cs[8]}

		type call struct {
			after  int64
			column string
			limit  int
			want   []cells.Cell
			next   int64
		}
		for _, tc := range []call{
			{0, "", 100, cs, 10},
			{0, "", 10, cs, 10},
			{0, "", 4, cs[:4], 4},
			{4, "", 4, cs[4:8], 8},
			{8, "", 4, cs[8:], 10},
			{10, "", 4, nil, 10},
			{25, "", 4, nil, 25},
			{-5, "", 1, cs[:1], 1},
			{0, "base", 100, bases, 10},
			{0, "base", 2, bases[:2], 3},
			{3, "base", 2, bases[2:4], 7},
			{7, "base", 2, bases[4:], 10},
			{9, "base", 2, nil, 10},
			{0, "BASE", 5, nil, 10},
			{0, "nothing", 5, nil, 10},
		} {
			got, next, high, err := p.ReadLog(ctx, 0, tc.after, tc.column, tc.limit)
			what := fmt.Sprintf("ReadLog(after %d, column %q, limit %d)", tc.after, tc.column, tc.limit)
			require.NoError(t, err, "%s", what)
			checkCells(t, what, got, tc.want)
			assert.Equal(t, [2]int64{tc.next, 10}, [2]int64{next, high}, "%s: next, high", what)
		}

		// Following next reads every cell of the column exactly once, whatever the page size.
		for _, limit := range []int{1, 2, 3, 7} {
			var got []cells.Cell
			after := int64(0)
			for range 20 {
				page, next, _, err := p.ReadLog(ctx, 0, after, "status", limit)
				require.NoError(t, err)
				got = append(got, page...)
				if next == after {
					break
				}
				after = next
			}
			checkCells(t, fmt.Sprintf("status cells in pages of %d", limit), got, []cells.Cell{cs[1], cs[3], cs[5], cs[7], cs[9]})
		}

		// A shard with no tables, and one with tables but no cell, are empty.
		require.NoError(t, p.EnsureShards(ctx, []int{1}))
		for _, shard := range []int{1, 2} {
			got, next, high, err := p.ReadLog(ctx, shard, 3, "", 5)
			if assert.NoError(t, err, "ReadLog(shard %d with no cell, after 3)", shard) {
				assert.Empty(t, got, "ReadLog(shard %d with no cell, after 3)", shard)
				assert.Equal(t, [2]int64{3, 0}, [2]int64{next, high}, "ReadLog(shard %d with no cell, after 3): next, high", shard)
			}
		}
		_, _, _, err := p.ReadLog(ctx, 3, 0, "", 5)
		assert.ErrorIs(t, err, ErrShardRange, "ReadLog of shard 3 of [0, 2]")
		for _, limit := range []int{0, -1} {
			_, _, _, err := p.ReadLog(ctx, 0, 0, "", limit)
			assert.Error(t, err, "ReadLog with limit %d: want an error", limit)
		}
	})
}

// A filtered ReadLog never skips a cell committed while it reads: a consumer following next
// sees every cell of its column, in order, while the writer commits one cell at a time,
// mostly of another column.
func TestReadLogConcurrentWriter(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		require.NoError(t, p.EnsureShards(ctx, []int{0}))
		const commits = 400
		all := logCells(t, commits, "wanted", "other", "other")
		var wanted []cells.Cell
		for _, c := range all {
			if c.ColumnKey == "wanted" {
				wanted = append(wanted, c)
			}
		}
		var (
			wg       sync.WaitGroup
			writeErr error
			done     = make(chan struct{})
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			for i, c := range all {
				if err := tryWrite(p, map[int][]cells.Cell{0: {c}}, AppliedState{Index: uint64(i + 1), Term: 1}); err != nil {
					writeErr = err
					return
				}
			}
		}()
		var (
			got   []cells.Cell
			after int64
			reads int
		)
		for finished := false; !finished; {
			select {
			case <-done:
				finished = true // one more pass reads what is left
			default:
			}
			for {
				page, next, high, err := p.ReadLog(ctx, 0, after, "wanted", 1000)
				require.NoError(t, err)
				reads++
				require.False(t, next < after || next > high && next != after,
					"ReadLog(after %d): got next %d, high %d; want next in [after, max(after, high)]", after, next, high)
				if n := len(page); n > 0 {
					require.LessOrEqual(t, page[n-1].AddedID, high, "ReadLog(after %d): the last cell's added_id, want at most high", after)
				}
				got = append(got, page...)
				if next == after {
					break
				}
				after = next
			}
		}
		wg.Wait()
		require.NoError(t, writeErr)
		t.Logf("%d reads while %d cells were committed", reads, commits)
		checkCells(t, "cells of the column read while the writer committed", got, wanted)
	})
}

// LocationAt finds where the log reaches a time.
func TestLocationAt(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 2)
		// added_id i is created at baseTime + i ms, except that cell 6 went back in time
		// (another leader's clock): it is as old as cell 2.
		cs := logCells(t, 8, "base")
		cs[5].CreatedAt = cs[1].CreatedAt
		write(t, p, map[int][]cells.Cell{0: cs}, AppliedState{Index: 1, Term: 1})
		at := func(ms int) time.Time { return baseTime.Add(time.Duration(ms) * time.Millisecond) }
		for _, tc := range []struct {
			what string
			t    time.Time
			want int64
		}{
			{"long before the first cell", at(-1000), 0},
			{"the first cell's time", at(1), 0},
			{"between cells 1 and 2", at(1).Add(500 * time.Microsecond), 1},
			{"cell 3's time", at(3), 2},
			{"cell 3's time in another zone", at(3).UTC(), 2},
			{"cell 5's time (cell 6 is older, after it)", at(5), 4},
			{"cell 8's time", at(8), 7},
			{"after the last cell", at(9), 8},
		} {
			got, err := p.LocationAt(ctx, 0, tc.t)
			require.NoError(t, err, "LocationAt(%s)", tc.what)
			assert.Equal(t, tc.want, got, "LocationAt(%s): got %d, want %d", tc.what, got, tc.want)
		}
		// Reading after the location starts at the first cell at or after the time.
		loc, err := p.LocationAt(ctx, 0, at(4))
		require.NoError(t, err)
		page, _, _, err := p.ReadLog(ctx, 0, loc, "", 1)
		require.NoError(t, err)
		checkCells(t, "ReadLog after LocationAt(cell 4's time)", page, cs[3:4])

		require.NoError(t, p.EnsureShards(ctx, []int{1}))
		for _, shard := range []int{1, 2} {
			if got, err := p.LocationAt(ctx, shard, at(0)); assert.NoError(t, err, "LocationAt in shard %d with no cell: got %d, %v; want 0, nil", shard, got, err) {
				assert.EqualValues(t, 0, got, "LocationAt in shard %d with no cell: got %d, %v; want 0, nil", shard, got, err)
			}
		}
		assert.ErrorIs(t, errOf(p.LocationAt(ctx, 3, at(0))), ErrShardRange, "LocationAt in shard 3 of [0, 2]")
	})
}
