package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// kindsTable has a column of every kind; column 0, the shard field, is an int.
func kindsTable(name string) IndexTable {
	return IndexTable{Name: name, Columns: []IndexColumn{
		{"city", IndexInt},
		{"driver", IndexUUID},
		{"Name", IndexString},
		{"n", IndexInt},
		{"fare", IndexFloat},
		{"done", IndexBool},
		{"at", IndexDatetime},
	}}
}

// Value pools: few values per kind, so that ties occur, with the extremes of each type and
// strings whose bytewise order differs from a collation's (case, trailing space and tab, NUL,
// non-ASCII).
var (
	poolUUID = []uuid.UUID{
		{},
		uuid.MustParse("00000000-0000-0000-0000-000000000001"),
		uuid.MustParse("7fffffff-ffff-ffff-ffff-ffffffffffff"),
		uuid.MustParse("80000000-0000-0000-0000-000000000000"),
		uuid.Max,
	}
	poolString = []string{"", "a", "a ", "a\t", "A", "b", "\x00", "é", "ab", strings.Repeat("z", MaxIndexStringBytes)}
	poolInt    = []int64{math.MinInt64, -2, -1, 0, 1, 2, 3, math.MaxInt64}
	poolFloat  = []float64{-math.MaxFloat64, -1.5, -1e-300, 0, math.SmallestNonzeroFloat64, 0.1, 1.5, 2, 1e300}
	poolTime   = []int64{math.MinInt64, -1, 0, 1, 1700000000000000, time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC).UnixMicro()}
)

// randValue draws a value of kind k from its pool, or nil with probability nullP.
func randValue(r *rand.Rand, k IndexKind, nullP float64) any {
	if r.Float64() < nullP {
		return nil
	}
	switch k {
	case IndexUUID:
		return poolUUID[r.IntN(len(poolUUID))]
	case IndexString:
		return poolString[r.IntN(len(poolString))]
	case IndexInt:
		return poolInt[r.IntN(len(poolInt))]
	case IndexFloat:
		return poolFloat[r.IntN(len(poolFloat))]
	case IndexBool:
		return r.IntN(2) == 1
	}
	return poolTime[r.IntN(len(poolTime))]
}

// randEntry is an entry of t for rk with random values; column 0 takes one of shardValues
// (or NULL, rarely).
func randEntry(r *rand.Rand, t *IndexTable, rk uuid.UUID, shardValues []int64) IndexEntry {
	e := IndexEntry{RowKey: rk, Values: make([]any, len(t.Columns))}
	for i, c := range t.Columns {
		e.Values[i] = randValue(r, c.Kind, 0.15)
	}
	if len(shardValues) > 0 && r.Float64() < 0.95 {
		e.Values[0] = shardValues[r.IntN(len(shardValues))]
	}
	e.Refs = make([]byte, r.IntN(20))
	for i := range e.Refs {
		e.Refs[i] = byte(r.IntN(256))
	}
	if r.IntN(4) == 0 {
		e.Violation = r.Int64N(1000) + 1
	}
	return e
}

// entryDiff describes how got differs from want, or "" if it does not. Values compare by Go
// type and value; empty and nil Refs are the same.
func entryDiff(got, want IndexEntry) string {
	if got.RowKey != want.RowKey {
		return fmt.Sprintf("row key %s, want %s", got.RowKey, want.RowKey)
	}
	if len(got.Values) != len(want.Values) {
		return fmt.Sprintf("row %s: %d values, want %d", got.RowKey, len(got.Values), len(want.Values))
	}
	for i := range got.Values {
		if got.Values[i] != want.Values[i] {
			return fmt.Sprintf("row %s: value %d is %#v (%T), want %#v (%T)", got.RowKey, i, got.Values[i], got.Values[i], want.Values[i], want.Values[i])
		}
	}
	if !bytes.Equal(got.Refs, want.Refs) {
		return fmt.Sprintf("row %s: refs %x, want %x", got.RowKey, got.Refs, want.Refs)
	}
	if got.Violation != want.Violation {
		return fmt.Sprintf("row %s: violation %d, want %d", got.RowKey, got.Violation, want.Violation)
	}
	return ""
}

func checkEntries(t testing.TB, what string, got, want []IndexEntry) {
	t.Helper()
	if !assert.Len(t, got, len(want), "%s: got %d entries, want %d", what, len(got), len(want)) {
		return
	}
	for i := range got {
		if d := entryDiff(got[i], want[i]); !assert.Empty(t, d, "%s[%d]: got %s", what, i, d) {
			return
		}
	}
}

// upsertIndex commits entries into t on shard in one write transaction.
func upsertIndex(t testing.TB, p *PartitionStore, shard int, tbl IndexTable, entries []IndexEntry) {
	t.Helper()
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback()
	require.NoError(t, tx.UpsertIndex(ctx, shard, tbl, entries), "UpsertIndex(%s, shard %d, %d entries)", tbl.Name, shard, len(entries))
	require.NoError(t, tx.Commit())
}

// scanIndex reads a whole index table of a snapshot.
func scanIndex(t testing.TB, s *SnapshotTx, shard int, tbl IndexTable) []IndexEntry {
	t.Helper()
	var out []IndexEntry
	require.NoError(t, s.ScanIndex(context.Background(), shard, tbl, func(e IndexEntry) error {
		out = append(out, e)
		return nil
	}), "ScanIndex(%d, %s)", shard, tbl.Name)
	return out
}

// byRowKey returns the entries of m sorted by row key.
func byRowKey(m map[uuid.UUID]IndexEntry) []IndexEntry {
	out := make([]IndexEntry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b IndexEntry) int { return bytes.Compare(a.RowKey[:], b.RowKey[:]) })
	return out
}

// indexNames calls IndexNames or fails the test.
func indexNames(t testing.TB, p *PartitionStore) []string {
	t.Helper()
	names, err := p.IndexNames(context.Background())
	require.NoError(t, err, "IndexNames")
	return names
}

func TestIndexTableValidate(t *testing.T) {
	t.Parallel()
	good := kindsTable("trips_v1")
	require.NoError(t, good.Validate(), "valid table")
	long := IndexTable{Name: "x", Columns: make([]IndexColumn, MaxIndexColumns+1)}
	for i := range long.Columns {
		long.Columns[i] = IndexColumn{fmt.Sprintf("c%d", i), IndexInt}
	}
	assert.NoError(t, (IndexTable{Name: strings.Repeat("a", 48), Columns: long.Columns[:MaxIndexColumns]}).Validate(), "table of 48-byte name and %d columns", MaxIndexColumns)
	for _, tc := range []struct {
		name string
		t    IndexTable
		want string
	}{
		{"empty name", IndexTable{Columns: good.Columns}, "name"},
		{"upper-case name", IndexTable{Name: "Trips", Columns: good.Columns}, "Trips"},
		{"name of 49 bytes", IndexTable{Name: strings.Repeat("a", 49), Columns: good.Columns}, "must match"},
		{"name starting with a digit", IndexTable{Name: "1x", Columns: good.Columns}, "1x"},
		{"no column", IndexTable{Name: "x"}, "0 columns"},
		{"too many columns", long, "33 columns"},
		{"bad column name", IndexTable{Name: "x", Columns: []IndexColumn{{"a-b", IndexInt}}}, "a-b"},
		{"column name starting with a digit", IndexTable{Name: "x", Columns: []IndexColumn{{"1a", IndexInt}}}, "1a"},
		{"column name of 63 bytes", IndexTable{Name: "x", Columns: []IndexColumn{{strings.Repeat("a", 63), IndexInt}}}, "column 0"},
		{"zero kind", IndexTable{Name: "x", Columns: []IndexColumn{{"a", 0}}}, "kind"},
		{"kind out of range", IndexTable{Name: "x", Columns: []IndexColumn{{"a", IndexDatetime + 1}}}, "kind"},
		{"names differing in case", IndexTable{Name: "x", Columns: []IndexColumn{{"a", IndexInt}, {"A", IndexString}}}, "repeats"},
	} {
		err := tc.t.Validate()
		assert.ErrorIs(t, err, ErrInvalidConfig, "%s: Validate()", tc.name)
		assert.ErrorContains(t, err, tc.want, "%s: Validate(): want ErrInvalidConfig mentioning %q", tc.name, tc.want)
	}
}

// indexTableExists reports whether the table of index name exists on shard, by the catalog.
func indexTableExists(t testing.TB, p *PartitionStore, name string, shard int) bool {
	t.Helper()
	var n int
	var err error
	if p.pb != nil {
		ok, err := exists(p.pb.db, p.pb.indexDefKey(name, shard))
		require.NoError(t, err, "index table %s of shard %d exists", name, shard)
		return ok
	}
	if p.d.engine == EngineSQLite {
		err = p.read.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", sqliteIndexTable(name, shard)).Scan(&n)
	} else {
		err = p.read.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
			mysqlDatabase(p.d.prefix, p.id.Datastore, shard), "index_"+name).Scan(&n)
	}
	require.NoError(t, err, "index table %s of shard %d exists", name, shard)
	return n == 1
}

// EnsureIndex creates tables once, refuses another definition of a name, and DropIndex drops
// one index's tables only; the entity tables are not involved.
func TestIndexDDL(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		p := openPartition(t, s, "trips", 0, 0, 3)
		a, b := kindsTable("by_city_v1"), IndexTable{Name: "by_driver_v2", Columns: []IndexColumn{{"driver", IndexUUID}, {"fare", IndexFloat}}}
		names := indexNames(t, p)
		assert.Empty(t, names, "IndexNames of a new partition = %q, want none", names)
		for range 2 {
			require.NoError(t, p.EnsureIndex(ctx, a, []int{0, 1, 1}), "EnsureIndex(%s, [0 1 1])", a.Name)
		}
		require.NoError(t, p.EnsureIndex(ctx, b, []int{1, 2}), "EnsureIndex(%s)", b.Name)
		for sh := 0; sh <= 3; sh++ {
			assert.Equal(t, sh <= 1, indexTableExists(t, p, a.Name, sh), "table of %s on shard %d exists", a.Name, sh)
			assert.False(t, tableExists(t, p, sh), "entity table of shard %d exists after EnsureIndex only, want none", sh)
		}
		assert.Equal(t, []string{a.Name, b.Name}, indexNames(t, p), "IndexNames")
		assert.ErrorIs(t, p.EnsureIndex(ctx, a, []int{4}), ErrShardRange, "EnsureIndex of shard 4 of [0, 3]")
		assert.ErrorIs(t, p.EnsureIndex(ctx, IndexTable{Name: "Bad"}, []int{0}), ErrInvalidConfig, "EnsureIndex of an invalid table")
		// Entity tables still work as before, beside the index tables.
		write(t, p, map[int][]cells.Cell{1: {mkCell(t, 1, "base", 1, 1)}}, AppliedState{Index: 1, Term: 1})
		upsertIndex(t, p, 1, b, []IndexEntry{{RowKey: rowKey(1), Values: []any{rowKey(2), 2.5}, Refs: []byte("r")}})

		// Another definition under a known name is refused, from the cache and, after a
		// reopen, from the catalog: a kind sharing its SQL type, a renamed column, a column
		// more, on a shard that has the table or on one that does not.
		kind := kindsTable(a.Name)
		kind.Columns[3].Kind = IndexDatetime // INTEGER / BIGINT like IndexInt
		renamed := kindsTable(a.Name)
		renamed.Columns[2].Name = "name"
		more := kindsTable(a.Name)
		more.Columns = append(more.Columns, IndexColumn{"extra", IndexBool})
		check := func(p *PartitionStore, when string) {
			t.Helper()
			for _, tc := range []struct {
				name   string
				t      IndexTable
				shards []int
			}{{"another kind", kind, []int{0}}, {"a renamed column", renamed, []int{1}}, {"one more column", more, []int{3}}} {
				err := p.EnsureIndex(ctx, tc.t, tc.shards)
				if assert.ErrorIs(t, err, ErrInvalidConfig, "%s: EnsureIndex with %s on shards %v", when, tc.name, tc.shards) && testing.Verbose() {
					t.Logf("%s: %s: %v", when, tc.name, err)
				}
				assert.False(t, indexTableExists(t, p, a.Name, 3), "%s: EnsureIndex with %s created a table on shard 3", when, tc.name)
			}
		}
		check(p, "cached")
		p.Close()
		p = openPartition(t, s, "trips", 0, 0, 3)
		check(p, "after a reopen")
		// The right definition is accepted after a reopen, and extends to a new shard.
		require.NoError(t, p.EnsureIndex(ctx, a, []int{0, 3}), "EnsureIndex(%s) after a reopen", a.Name)
		assert.True(t, indexTableExists(t, p, a.Name, 3), "table of %s on shard 3 missing after EnsureIndex", a.Name)

		// Writer calls refuse to run beside a write transaction.
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		assert.ErrorIs(t, p.EnsureIndex(ctx, a, []int{2}), ErrTxOpen, "EnsureIndex during a transaction")
		assert.ErrorIs(t, p.DropIndex(ctx, a.Name), ErrTxOpen, "DropIndex during a transaction")
		assert.ErrorIs(t, errOf(p.IndexNames(ctx)), ErrTxOpen, "IndexNames during a transaction")
		tx.Rollback()

		// DropIndex removes one index's tables on every shard, and nothing else.
		require.NoError(t, p.DropIndex(ctx, a.Name), "DropIndex(%s)", a.Name)
		for sh := 0; sh <= 3; sh++ {
			assert.False(t, indexTableExists(t, p, a.Name, sh), "table of %s on shard %d exists after DropIndex", a.Name, sh)
		}
		assert.Equal(t, []string{b.Name}, indexNames(t, p), "IndexNames after DropIndex(%s)", a.Name)
		assert.NoError(t, p.DropIndex(ctx, a.Name), "DropIndex of a dropped index")
		assert.ErrorIs(t, p.DropIndex(ctx, "Bad-name"), ErrInvalidConfig, "DropIndex of an invalid name")
		if n, v, err := p.IndexStats(ctx, b); assert.NoError(t, err, "IndexStats(%s) after dropping another index", b.Name) {
			assert.Equal(t, [2]int64{1, 0}, [2]int64{n, v}, "IndexStats(%s) after dropping another index: entries, violations", b.Name)
		}
		if c, err := p.GetCell(ctx, 1, rowKeyCell(1)); assert.NoError(t, err, "GetCell after DropIndex: %v", err) {
			assert.Equal(t, rowKey(1), c.RowKey, "GetCell after DropIndex: %v", err)
		}
		// The dropped index is forgotten: it may come back with another definition, empty.
		require.NoError(t, p.EnsureIndex(ctx, more, []int{0, 1}), "EnsureIndex with a new definition after DropIndex")
		if n, _, err := p.IndexStats(ctx, more); assert.NoError(t, err, "IndexStats of the recreated index") {
			assert.Zero(t, n, "IndexStats of the recreated index: want 0 entries")
		}
		// Drop and recreate the entity tables' neighbour while the writer keeps writing cells.
		write(t, p, map[int][]cells.Cell{1: {mkCell(t, 2, "base", 1, 2)}, 2: {mkCell(t, 3, "base", 1, 3)}}, AppliedState{Index: 2, Term: 1})
		got := scanAll(t, p, 1, 10)
		assert.Len(t, got, 2, "shard 1 holds %d cells, want 2", len(got))
	})
}

// rowKeyCell is the key of mkCell(row, "base", 1, ...).
func rowKeyCell(row int) cells.Key {
	return cells.Key{RowKey: rowKey(row), ColumnKey: "base", RefKey: 1}
}

// Entries of every kind, NULLs included, round trip through UpsertIndex, LookupIndex,
// QueryIndex and IndexStats; an upsert replaces every column; values of the wrong type are
// refused before anything is written.
func TestIndexUpsertLookup(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 1)
		tbl := kindsTable("kinds_v1")
		require.NoError(t, p.EnsureIndex(ctx, tbl, []int{0}))
		nulls := make([]any, len(tbl.Columns))
		nulls[0] = int64(7)
		first := []IndexEntry{
			{RowKey: rowKey(1), Values: []any{int64(7), poolUUID[1], "a ", int64(-5), 0.1, true, int64(1700000000123456)}, Refs: []byte{1, 2, 3}},
			{RowKey: rowKey(2), Values: []any{int64(7), uuid.Max, strings.Repeat("é", MaxIndexStringBytes/2), int64(math.MaxInt64), -math.MaxFloat64, false, int64(math.MinInt64)}, Violation: 42},
			{RowKey: rowKey(3), Values: nulls},
			{RowKey: rowKey(4), Values: []any{nil, uuid.UUID{}, "", int64(0), 0.0, false, int64(0)}, Refs: []byte{}},
			{RowKey: rowKey(5), Values: []any{int64(7), nil, "\x00A\t", nil, math.SmallestNonzeroFloat64, nil, int64(-1)}, Violation: -1},
		}
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.UpsertIndex(ctx, 0, tbl, first), "UpsertIndex")
		keys := []uuid.UUID{rowKey(1), rowKey(2), rowKey(3), rowKey(4), rowKey(5), rowKey(99), rowKey(1)}
		got, err := tx.LookupIndex(ctx, 0, tbl, keys)
		require.NoError(t, err, "LookupIndex in the transaction")
		want := map[uuid.UUID]IndexEntry{}
		for _, e := range first {
			want[e.RowKey] = e
		}
		checkEntries(t, "LookupIndex in the writing transaction", byRowKey(got), byRowKey(want))
		require.NoError(t, tx.Commit())

		// Replace rows: values to NULL and back, refs and violation changed, one row given
		// twice in a call (the last wins), plus a new row.
		second := []IndexEntry{
			{RowKey: rowKey(1), Values: nulls, Refs: []byte("x")},
			{RowKey: rowKey(3), Values: []any{int64(7), poolUUID[2], "b", int64(1), 1.5, true, int64(5)}, Violation: 3},
			{RowKey: rowKey(6), Values: []any{int64(7), poolUUID[3], "é", int64(2), 2.0, true, int64(6)}},
			{RowKey: rowKey(3), Values: []any{int64(7), poolUUID[4], "c", int64(9), -1.5, false, int64(8)}, Violation: 4, Refs: []byte("last")},
		}
		upsertIndex(t, p, 0, tbl, second)
		for _, e := range second {
			want[e.RowKey] = e
		}
		tx, err = p.Begin(ctx)
		require.NoError(t, err)
		got, err = tx.LookupIndex(ctx, 0, tbl, append(keys, rowKey(6)))
		require.NoError(t, err)
		checkEntries(t, "LookupIndex after the replacing upsert", byRowKey(got), byRowKey(want))

		// A bad value anywhere in a call writes nothing of it.
		valid := IndexEntry{RowKey: rowKey(50), Values: []any{int64(7), nil, nil, nil, nil, nil, nil}}
		for _, tc := range []struct {
			name string
			vals []any
		}{
			{"int for int64", []any{7, nil, nil, nil, nil, nil, nil}},
			{"string for uuid", []any{int64(7), rowKey(1).String(), nil, nil, nil, nil, nil}},
			{"bytes for string", []any{int64(7), nil, []byte("a"), nil, nil, nil, nil}},
			{"long string", []any{int64(7), nil, strings.Repeat("x", MaxIndexStringBytes+1), nil, nil, nil, nil}},
			{"float32 for float64", []any{int64(7), nil, nil, nil, float32(1), nil, nil}},
			{"NaN", []any{int64(7), nil, nil, nil, math.NaN(), nil, nil}},
			{"+Inf", []any{int64(7), nil, nil, nil, math.Inf(1), nil, nil}},
			{"int64 for bool", []any{int64(7), nil, nil, nil, nil, int64(1), nil}},
			{"time for datetime", []any{int64(7), nil, nil, nil, nil, nil, time.Now()}},
			{"too few values", []any{int64(7)}},
			{"too many values", []any{int64(7), nil, nil, nil, nil, nil, nil, nil}},
		} {
			err := tx.UpsertIndex(ctx, 0, tbl, []IndexEntry{valid, {RowKey: rowKey(51), Values: tc.vals}})
			assert.ErrorIs(t, err, ErrIndexValue, "UpsertIndex with %s", tc.name)
		}
		if got, err := tx.LookupIndex(ctx, 0, tbl, []uuid.UUID{rowKey(50), rowKey(51)}); assert.NoError(t, err, "after refused upserts: LookupIndex found %d entries, %v; want none", len(got), err) {
			assert.Empty(t, got, "after refused upserts: LookupIndex found %d entries, %v; want none", len(got), err)
		}
		assert.ErrorIs(t, errOf(tx.LookupIndex(ctx, 1, tbl, keys)), ErrNoIndexTable, "LookupIndex on a shard without the table")
		assert.ErrorIs(t, tx.UpsertIndex(ctx, 1, tbl, []IndexEntry{valid}), ErrNoIndexTable, "UpsertIndex on a shard without the table")
		assert.ErrorIs(t, tx.UpsertIndex(ctx, 2, tbl, nil), ErrShardRange, "UpsertIndex on shard 2 of [0, 1]")
		tx.Rollback()
		assert.ErrorIs(t, errOf(tx.LookupIndex(ctx, 0, tbl, keys)), ErrClosed, "LookupIndex after Rollback")

		// Committed data through the read pool.
		all, err := p.QueryIndex(ctx, 0, tbl, IndexQuery{ShardValue: int64(7), OrderBy: -1, Limit: 100})
		require.NoError(t, err)
		var wantAll []IndexEntry
		var violations int64
		for _, e := range byRowKey(want) {
			if e.Values[0] == int64(7) {
				wantAll = append(wantAll, e)
			}
			if e.Violation != 0 {
				violations++
			}
		}
		checkEntries(t, "QueryIndex by row key", all, wantAll)
		if n, v, err := p.IndexStats(ctx, tbl); assert.NoError(t, err, "IndexStats") {
			assert.Equal(t, [2]int64{int64(len(want)), violations}, [2]int64{n, v}, "IndexStats: entries, violations")
		}
		if got, err := p.QueryIndex(ctx, 1, tbl, IndexQuery{ShardValue: int64(7), OrderBy: -1, Limit: 100}); assert.NoError(t, err, "QueryIndex on a shard without the table = %d entries, %v; want none, nil", len(got), err) {
			assert.Nil(t, got, "QueryIndex on a shard without the table = %d entries, %v; want none, nil", len(got), err)
		}

		// Many entries: several statements per call and per lookup.
		var many []IndexEntry
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 1300 {
			many = append(many, randEntry(r, &tbl, rowKey(1000+i), []int64{1, 2}))
		}
		upsertIndex(t, p, 0, tbl, many)
		tx, err = p.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		keys = keys[:0]
		wantMany := map[uuid.UUID]IndexEntry{}
		for _, e := range many {
			keys = append(keys, e.RowKey)
			wantMany[e.RowKey] = e
		}
		got, err = tx.LookupIndex(ctx, 0, tbl, keys)
		require.NoError(t, err)
		checkEntries(t, "LookupIndex of 1300 entries", byRowKey(got), byRowKey(wantMany))
	})
}

// restoreRecords yields records as Restore's next function.
func restoreRecords(rs []RestoreRecord, errAt int, err error) func() (RestoreRecord, error) {
	i := 0
	return func() (RestoreRecord, error) {
		if i == errAt {
			return RestoreRecord{}, err
		}
		if i == len(rs) {
			return RestoreRecord{}, io.EOF
		}
		i++
		return rs[i-1], nil
	}
}

// A snapshot's index tables (ScanIndex) restore into another partition, whose old index tables
// are dropped; the snapshot does not see later writes.
func TestIndexSnapshotRestore(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		s := e.open(t)
		src := openPartition(t, s, "source", 0, 0, 3)
		a := kindsTable("a_v1")
		b := IndexTable{Name: "b_v3", Columns: []IndexColumn{{"s", IndexString}, {"x", IndexFloat}}}
		require.NoError(t, src.EnsureIndex(ctx, a, []int{0, 1, 2}))
		require.NoError(t, src.EnsureIndex(ctx, b, []int{1, 3}))
		// Shard 1 of a spans more than one snapshot page.
		want := map[string]map[int][]IndexEntry{a.Name: {}, b.Name: {}}
		fill := func(tbl IndexTable, shard, n int) {
			m := map[uuid.UUID]IndexEntry{}
			for i := range n {
				rk := rowKey(shard*100000 + i)
				m[rk] = randEntry(r, &tbl, rk, nil)
				m[rk].Values[0] = randValue(r, tbl.Columns[0].Kind, 0.1)
			}
			upsertIndex(t, src, shard, tbl, byRowKey(m))
			want[tbl.Name][shard] = byRowKey(m)
		}
		fill(a, 0, 30)
		fill(a, 1, snapshotPageRows+300)
		fill(b, 1, 20)
		fill(b, 3, 40)
		cellsOf := map[int][]cells.Cell{1: shardCells(t, 1, 0, 25), 3: shardCells(t, 3, 0, 5)}
		write(t, src, cellsOf, AppliedState{Index: 7, Term: 2})

		snap, err := src.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer snap.Close()
		// Later writes, to an existing table and to a table created after the view: unseen.
		upsertIndex(t, src, 0, a, []IndexEntry{randEntry(r, &a, rowKey(424242), []int64{1})})
		require.NoError(t, src.EnsureIndex(ctx, b, []int{2}))
		upsertIndex(t, src, 2, b, []IndexEntry{{RowKey: rowKey(1), Values: []any{"late", 1.0}}})

		var recs []RestoreRecord
		for sh := 0; sh <= 3; sh++ {
			for _, tbl := range []IndexTable{a, b} {
				got := scanIndex(t, snap, sh, tbl)
				checkEntries(t, fmt.Sprintf("snapshot of %s shard %d", tbl.Name, sh), got, want[tbl.Name][sh])
				for _, en := range got {
					recs = append(recs, RestoreRecord{Shard: sh, Index: tbl.Name, Entry: en})
				}
			}
		}
		// Interleave the cells with the entries.
		for sh, cs := range cellsOf {
			for _, c := range cs {
				at := r.IntN(len(recs) + 1)
				recs = slices.Insert(recs, at, RestoreRecord{Shard: sh, Cell: c})
			}
		}
		stop := errors.New("stop")
		n := 0
		err = snap.ScanIndex(ctx, 1, a, func(IndexEntry) error { n++; return stop })
		assert.ErrorIs(t, err, stop, "ScanIndex with a failing callback: want the callback's error")
		assert.Equal(t, 1, n, "ScanIndex with a failing callback: calls")
		assert.ErrorIs(t, snap.ScanIndex(ctx, 4, a, func(IndexEntry) error { return nil }), ErrShardRange, "ScanIndex of shard 4")
		applied := snap.Applied()
		snap.Close()
		assert.ErrorIs(t, snap.ScanIndex(ctx, 1, a, func(IndexEntry) error { return nil }), ErrClosed, "ScanIndex after Close")

		// The target has index tables of its own: one not in the snapshot, and one of the same
		// name as the snapshot's with other columns and entries.
		dst := openPartition(t, s, "target", 0, 0, 3)
		old := IndexTable{Name: "old_v1", Columns: []IndexColumn{{"k", IndexInt}}}
		oldA := IndexTable{Name: a.Name, Columns: []IndexColumn{{"k", IndexInt}}}
		for _, tbl := range []IndexTable{old, oldA} {
			require.NoError(t, dst.EnsureIndex(ctx, tbl, []int{0, 2}))
			upsertIndex(t, dst, 2, tbl, []IndexEntry{{RowKey: rowKey(5), Values: []any{int64(5)}}})
		}
		write(t, dst, map[int][]cells.Cell{0: shardCells(t, 0, 0, 3)}, AppliedState{Index: 3, Term: 1})

		// Failed restores: an entry of an index not given, a value that does not fit, a row
		// key twice, an error from next.
		bad := func(i int, f func(r *RestoreRecord)) []RestoreRecord {
			rs := slices.Clone(recs[:i])
			rec := recs[i]
			rec.Entry.Values = slices.Clone(rec.Entry.Values)
			f(&rec)
			return append(rs, rec)
		}
		firstEntry := slices.IndexFunc(recs, func(r RestoreRecord) bool { return r.Index == a.Name && r.Entry.Values[0] != nil })
		for _, tc := range []struct {
			name string
			next func() (RestoreRecord, error)
			want error
		}{
			{"unknown index", restoreRecords(bad(firstEntry, func(r *RestoreRecord) { r.Index = "nope" }), -1, nil), ErrInvalidConfig},
			{"bad value", restoreRecords(bad(firstEntry, func(r *RestoreRecord) { r.Entry.Values[0] = "str" }), -1, nil), ErrIndexValue},
			{"row key twice", restoreRecords(append(slices.Clone(recs), recs[firstEntry]), -1, nil), ErrDuplicate},
			{"next fails", restoreRecords(recs, len(recs)/2, stop), stop},
		} {
			assert.ErrorIs(t, dst.Restore(ctx, AppliedState{Index: 99, Term: 9}, tc.next, nil, []IndexTable{a, b}), tc.want, "Restore with %s", tc.name)
			if a, err := dst.Applied(ctx); assert.NoError(t, err, "after a Restore with %s: Applied = %+v, %v; want {3 1}", tc.name, a, err) {
				assert.Equal(t, AppliedState{Index: 3, Term: 1}, a, "after a Restore with %s: Applied = %+v, %v; want {3 1}", tc.name, a, err)
			}
		}
		assert.ErrorIs(t, dst.Restore(ctx, applied, restoreRecords(recs, -1, nil), nil, []IndexTable{a, a}), ErrInvalidConfig, "Restore with a table given twice")

		require.NoError(t, dst.Restore(ctx, applied, restoreRecords(recs, -1, nil), nil, []IndexTable{b, a}), "Restore")
		assert.Equal(t, []string{a.Name, b.Name}, indexNames(t, dst), "IndexNames after Restore")
		for sh := 0; sh <= 3; sh++ {
			assert.False(t, indexTableExists(t, dst, old.Name, sh), "old index table on shard %d kept by Restore", sh)
			for _, tbl := range []IndexTable{a, b} {
				assert.True(t, indexTableExists(t, dst, tbl.Name, sh), "Restore did not create %s on shard %d", tbl.Name, sh)
			}
			checkCells(t, fmt.Sprintf("restored cells of shard %d", sh), scanAll(t, dst, sh, 100), cellsOf[sh])
		}
		snap2, err := dst.BeginSnapshot(ctx)
		require.NoError(t, err)
		defer snap2.Close()
		for _, tbl := range []IndexTable{a, b} {
			var n, v int64
			for sh := 0; sh <= 3; sh++ {
				checkEntries(t, fmt.Sprintf("restored %s shard %d", tbl.Name, sh), scanIndex(t, snap2, sh, tbl), want[tbl.Name][sh])
				for _, en := range want[tbl.Name][sh] {
					n++
					if en.Violation != 0 {
						v++
					}
				}
			}
			if gn, gv, err := dst.IndexStats(ctx, tbl); assert.NoError(t, err, "IndexStats(%s) after Restore", tbl.Name) {
				assert.Equal(t, [2]int64{n, v}, [2]int64{gn, gv}, "IndexStats(%s) after Restore: entries, violations", tbl.Name)
			}
		}
		if a, err := dst.Applied(ctx); assert.NoError(t, err, "Applied after Restore = %+v, %v; want %+v", a, err, applied) {
			assert.Equal(t, applied, a, "Applied after Restore = %+v, %v; want %+v", a, err, applied)
		}
		snap2.Close()
		// The restored tables are known: writes go on without EnsureIndex, and a Restore with
		// no index drops them all.
		upsertIndex(t, dst, 3, a, []IndexEntry{randEntry(r, &a, rowKey(77), []int64{1})})
		require.NoError(t, dst.Restore(ctx, applied, restoreRecords(nil, -1, nil), nil, nil))
		names := indexNames(t, dst)
		assert.Empty(t, names, "IndexNames after a Restore without indexes = %q, want none", names)
		tx, err := dst.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		assert.NoError(t, tx.UpsertIndex(ctx, 0, a, nil), "UpsertIndex of nothing")
		assert.ErrorIs(t, errOf(tx.LookupIndex(ctx, 0, a, []uuid.UUID{rowKey(1)})), ErrNoIndexTable, "LookupIndex of a table dropped by Restore")
	})
}
