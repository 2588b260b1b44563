package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// engineEnv is one engine's backing data for a test: open returns a new Store over the same
// data (a directory, or a MySQL prefix), closed when the test ends.
type engineEnv struct {
	name string
	open func(t testing.TB) *Store
}

func sqliteEnv(t testing.TB) *engineEnv {
	dir := t.TempDir()
	return &engineEnv{name: EngineSQLite, open: func(t testing.TB) *Store {
		t.Helper()
		s, err := OpenSQLite(context.Background(), SQLiteConfig{Dir: dir})
		require.NoError(t, err, "OpenSQLite")
		t.Cleanup(func() { s.Close() })
		return s
	}}
}

// pebbleEnv's open closes the Store it opened before, if any: pebble locks its directory, so
// one Store at a time has it open.
func pebbleEnv(t testing.TB) *engineEnv {
	dir := t.TempDir()
	var last *Store
	return &engineEnv{name: EnginePebble, open: func(t testing.TB) *Store {
		t.Helper()
		if last != nil {
			require.NoError(t, last.Close(), "close the previous pebble Store")
		}
		s, err := OpenPebble(context.Background(), PebbleConfig{Dir: dir})
		require.NoError(t, err, "OpenPebble")
		t.Cleanup(func() { s.Close() })
		last = s
		return s
	}}
}

// mysqlEnv uses a fresh prefix, whose databases are dropped after the stores are closed
// (cleanups run last registered first).
func mysqlEnv(t testing.TB) *engineEnv {
	dsn, prefix := mariadbtest.DSN(t), mariadbtest.Prefix(t)
	return &engineEnv{name: EngineMySQL, open: func(t testing.TB) *Store {
		t.Helper()
		s, err := OpenMySQL(context.Background(), MySQLConfig{DSN: dsn, Prefix: prefix})
		require.NoError(t, err, "OpenMySQL")
		t.Cleanup(func() { s.Close() })
		return s
	}}
}

// forEachEngine runs fn as a subtest per engine: the conformance suite.
func forEachEngine(t *testing.T, fn func(t *testing.T, e *engineEnv)) {
	t.Helper()
	t.Run(EngineSQLite, func(t *testing.T) { fn(t, sqliteEnv(t)) })
	t.Run(EngineMySQL, func(t *testing.T) { fn(t, mysqlEnv(t)) })
	t.Run(EnginePebble, func(t *testing.T) { fn(t, pebbleEnv(t)) })
}

// forEachSQLEngine runs fn as a subtest per SQL engine: tests of the SQL layout itself (plans,
// tables, statements).
func forEachSQLEngine(t *testing.T, fn func(t *testing.T, e *engineEnv)) {
	t.Helper()
	t.Run(EngineSQLite, func(t *testing.T) { fn(t, sqliteEnv(t)) })
	t.Run(EngineMySQL, func(t *testing.T) { fn(t, mysqlEnv(t)) })
}

// openPartition opens a partition of s and closes it when the test ends.
func openPartition(t testing.TB, s *Store, ds string, part, first, last int) *PartitionStore {
	t.Helper()
	p, err := s.Partition(context.Background(), PartitionID{Datastore: ds, Partition: part}, cells.ShardRange{First: first, Last: last})
	require.NoError(t, err, "Partition(%s/%d)", ds, part)
	t.Cleanup(func() { p.Close() })
	return p
}

// baseTime has nanoseconds and a zone, so tests see truncation to microseconds and UTC.
var baseTime = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CEST", 2*3600))

func body(t testing.TB, json string) cells.Body {
	t.Helper()
	b, err := cells.EncodeBody([]byte(json))
	require.NoError(t, err, "EncodeBody(%s)", json)
	return b
}

// errOf returns the error of a call that also returns a value, for assertions on the error
// alone: assert.ErrorIs(t, errOf(p.GetCell(ctx, 0, k)), ErrNotFound).
func errOf[T any](_ T, err error) error { return err }

// rowKey returns a fixed row key for n.
func rowKey(n int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("row-%d", n)))
}

func mkCell(t testing.TB, row int, col string, ref, added int64) cells.Cell {
	t.Helper()
	return cells.Cell{
		Key:       cells.Key{RowKey: rowKey(row), ColumnKey: col, RefKey: ref},
		Body:      body(t, fmt.Sprintf(`{"row":%d,"col":%q,"ref":%d,"added":%d}`, row, col, ref, added)),
		AddedID:   added,
		CreatedAt: baseTime.Add(time.Duration(added) * time.Millisecond),
	}
}

// stored is c as the store returns it: CreatedAt in UTC, truncated to the microsecond.
func stored(c cells.Cell) cells.Cell {
	c.CreatedAt = c.CreatedAt.UTC().Truncate(time.Microsecond)
	return c
}

// cellDiff describes how got differs from want (as stored), or "" if it does not.
func cellDiff(got, want cells.Cell) string {
	want = stored(want)
	if got.Key != want.Key {
		return fmt.Sprintf("key %s, want %s", got.Key, want.Key)
	}
	if got.AddedID != want.AddedID {
		return fmt.Sprintf("%s: added_id %d, want %d", got.Key, got.AddedID, want.AddedID)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		return fmt.Sprintf("%s: created_at %s, want %s (UTC)", got.Key, got.CreatedAt.Format(time.RFC3339Nano), want.CreatedAt.Format(time.RFC3339Nano))
	}
	if got.Origin != want.Origin {
		return fmt.Sprintf("%s: origin %q, want %q", got.Key, got.Origin, want.Origin)
	}
	same, err := cells.SameBody(got.Body, want.Body)
	if err != nil || !same {
		return fmt.Sprintf("%s: body of %d bytes differs from the %d written (err %v)", got.Key, len(got.Body), len(want.Body), err)
	}
	return ""
}

func checkCell(t testing.TB, what string, got, want cells.Cell) {
	t.Helper()
	d := cellDiff(got, want)
	assert.Empty(t, d, "%s: got %s", what, d)
}

func checkCells(t testing.TB, what string, got, want []cells.Cell) {
	t.Helper()
	if !assert.Len(t, got, len(want), "%s: got %d cells, want %d", what, len(got), len(want)) {
		return
	}
	for i := range got {
		if d := cellDiff(got[i], want[i]); !assert.Empty(t, d, "%s[%d]: got %s", what, i, d) {
			return
		}
	}
}

// write commits cs (by shard) and the applied state in one write transaction, creating the
// shards' tables first.
func write(t testing.TB, p *PartitionStore, byShard map[int][]cells.Cell, a AppliedState) {
	t.Helper()
	require.NoError(t, tryWrite(p, byShard, a))
}

// tryWrite is write for goroutines other than the test's.
func tryWrite(p *PartitionStore, byShard map[int][]cells.Cell, a AppliedState) error {
	ctx := context.Background()
	shards := make([]int, 0, len(byShard))
	for s := range byShard {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	if err := p.EnsureShards(ctx, shards); err != nil {
		return fmt.Errorf("EnsureShards(%v): %w", shards, err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		return fmt.Errorf("Begin: %w", err)
	}
	defer tx.Rollback()
	for _, s := range shards {
		if err := tx.Insert(ctx, s, byShard[s]); err != nil {
			return fmt.Errorf("Insert(shard %d, %d cells): %w", s, len(byShard[s]), err)
		}
	}
	if err := tx.SetApplied(ctx, a); err != nil {
		return fmt.Errorf("SetApplied: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("Commit: %w", err)
	}
	return nil
}

// scanAll reads a whole shard through ScanShard in pages of limit.
func scanAll(t testing.TB, p *PartitionStore, shard, limit int) []cells.Cell {
	t.Helper()
	var out []cells.Cell
	after := int64(0)
	for {
		page, err := p.ScanShard(context.Background(), shard, after, limit)
		require.NoError(t, err, "ScanShard(%d, %d, %d)", shard, after, limit)
		require.LessOrEqual(t, len(page), limit, "ScanShard(%d, %d, %d) returned %d cells, want at most %d", shard, after, limit, len(page), limit)
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		after = page[len(page)-1].AddedID
	}
}

// snapshotShard streams a shard of a snapshot into a slice.
func snapshotShard(t testing.TB, s *SnapshotTx, shard int) []cells.Cell {
	t.Helper()
	var out []cells.Cell
	require.NoError(t, s.ScanShard(context.Background(), shard, func(c cells.Cell) error {
		out = append(out, c)
		return nil
	}), "snapshot ScanShard(%d)", shard)
	return out
}

// sortByAddedID returns cs sorted by AddedID (a copy).
func sortByAddedID(cs []cells.Cell) []cells.Cell {
	out := slices.Clone(cs)
	slices.SortFunc(out, func(a, b cells.Cell) int { return int(a.AddedID - b.AddedID) })
	return out
}

// tableExists reports whether the tables of shard exist, by the engine's catalog (pebble, which
// has no tables: whether EnsureShards was called for the shard).
func tableExists(t testing.TB, p *PartitionStore, shard int) bool {
	t.Helper()
	if p.pb != nil {
		return p.created[shard]
	}
	var n int
	var err error
	if p.d.engine == EngineSQLite {
		err = p.read.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
			fmt.Sprintf("entity_%04d", shard)).Scan(&n)
	} else {
		err = p.read.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = 'entity'",
			mysqlDatabase(p.d.prefix, p.id.Datastore, shard)).Scan(&n)
	}
	require.NoError(t, err, "table of shard %d exists", shard)
	return n == 1
}
