package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// partitionContent is everything a partition holds, read through the public API.
type partitionContent struct {
	applied  AppliedState
	cells    map[int][]cells.Cell
	kv       []KV
	index    map[int][]IndexEntry
	names    []string
	requests []RequestRecord
}

func readContent(t *testing.T, p *PartitionStore, tbl IndexTable) partitionContent {
	t.Helper()
	ctx := context.Background()
	snap, err := p.BeginSnapshot(ctx)
	require.NoError(t, err, "BeginSnapshot")
	defer snap.Close()
	c := partitionContent{applied: snap.Applied(), cells: map[int][]cells.Cell{}, index: map[int][]IndexEntry{}}
	for s := p.Shards().First; s <= p.Shards().Last; s++ {
		c.cells[s] = snapshotShard(t, snap, s)
		require.NoError(t, snap.ScanIndex(ctx, s, tbl, func(e IndexEntry) error {
			c.index[s] = append(c.index[s], e)
			return nil
		}), "ScanIndex(%d)", s)
	}
	require.NoError(t, snap.ScanKV(ctx, func(kv KV) error { c.kv = append(c.kv, kv); return nil }), "ScanKV")
	require.NoError(t, snap.ScanRequests(ctx, func(r RequestRecord) error { c.requests = append(c.requests, r); return nil }), "ScanRequests")
	c.names = indexNames(t, p)
	return c
}

// fill writes cells in two shards, KV rows, an index table with entries and request records.
func fill(t *testing.T, p *PartitionStore, tbl IndexTable) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, p.EnsureIndex(ctx, tbl, []int{0, 1, 2, 3}))
	write(t, p, map[int][]cells.Cell{
		0: {mkCell(t, 1, "BASE", 1, 1), mkCell(t, 1, "BASE", 2, 2), mkCell(t, 2, "STATUS", 7, 3)},
		2: {mkCell(t, 3, "BASE", 1, 1)},
	}, AppliedState{Index: 7, Term: 2})
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback()
	require.NoError(t, tx.PutKV(ctx, "group/a", []byte("offsets")))
	require.NoError(t, tx.PutKV(ctx, "schema/x", []byte{0, 1, 2}))
	require.NoError(t, tx.UpsertIndex(ctx, 1, tbl, []IndexEntry{
		{RowKey: rowKey(1), Values: []any{"LAX", int64(12)}, Refs: []byte("r1")},
		{RowKey: rowKey(2), Values: []any{"SFO", nil}, Refs: []byte("r2"), Violation: 4},
	}))
	require.NoError(t, tx.PutRequests(ctx, []RequestRecord{{ID: rowKey(9), CreatedAt: baseTime, Record: []byte("created")}}))
	require.NoError(t, tx.SetApplied(ctx, AppliedState{Index: 9, Term: 2}))
	require.NoError(t, tx.Commit())
}

var migrateTable = IndexTable{Name: "by_origin_v1", Columns: []IndexColumn{{"origin", IndexString}, {"delay", IndexInt}}}

// A partition of an SQLite store is copied whole into a pebble store the first time the pebble
// store opens it, and its file is moved aside; the next opens use pebble's copy.
func TestMigrateFromSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sqliteDir := filepath.Join(dir, "sqlite")
	src, err := OpenSQLite(ctx, SQLiteConfig{Dir: sqliteDir})
	require.NoError(t, err)
	p := openPartition(t, src, "trips", 1, 0, 3)
	fill(t, p, migrateTable)
	want := readContent(t, p, migrateTable)
	require.NoError(t, src.Close())

	open := func() *Store {
		s, err := OpenPebble(ctx, PebbleConfig{Dir: filepath.Join(dir, "pebble"), MigrateSQLiteDir: sqliteDir})
		require.NoError(t, err, "OpenPebble")
		return s
	}
	dst := open()
	q, err := dst.Partition(ctx, PartitionID{Datastore: "trips", Partition: 1}, cells.ShardRange{First: 0, Last: 3})
	require.NoError(t, err, "Partition: the migration")
	got := readContent(t, q, migrateTable)
	assert.Equal(t, want, got, "the pebble partition holds what the SQLite file held")
	_, err = os.Stat(sqlitePath(sqliteDir, PartitionID{Datastore: "trips", Partition: 1}))
	assert.ErrorIs(t, err, os.ErrNotExist, "the SQLite file is moved away")
	_, err = os.Stat(filepath.Join(sqliteDir+".migrated", "trips-p1.db"))
	assert.NoError(t, err, "the SQLite file is in sqlite.migrated")

	// Writes go on, and a reopened store holds them without migrating again.
	write(t, q, map[int][]cells.Cell{3: {mkCell(t, 4, "BASE", 1, 1)}}, AppliedState{Index: 10, Term: 2})
	require.NoError(t, dst.Close())
	dst = open()
	defer dst.Close()
	q, err = dst.Partition(ctx, PartitionID{Datastore: "trips", Partition: 1}, cells.ShardRange{First: 0, Last: 3})
	require.NoError(t, err)
	got = readContent(t, q, migrateTable)
	assert.Equal(t, AppliedState{Index: 10, Term: 2}, got.applied, "applied state after reopening")
	assert.Len(t, got.cells[3], 1, "shard 3 after reopening")
	assert.Equal(t, want.cells[0], got.cells[0], "shard 0 after reopening")
	assert.Equal(t, want.index, got.index, "index entries after reopening")
}

// Readers see the old content of a partition until Restore switches to the new one, never a
// mix; a Restore that fails leaves the old content and nothing of the new.
func TestPebbleRestoreSwitches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pebbleEnv(t).open(t)
	p := openPartition(t, s, "trips", 0, 0, 1)
	old := mkCell(t, 1, "BASE", 1, 1)
	write(t, p, map[int][]cells.Cell{0: {old}}, AppliedState{Index: 3, Term: 1})
	newer := mkCell(t, 2, "BASE", 1, 1)
	records := func(fail error) func() (RestoreRecord, error) {
		n := 0
		return func() (RestoreRecord, error) {
			n++
			// While the restore runs, readers see the old content only.
			_, err := p.GetCell(ctx, 0, old.Key)
			assert.NoError(t, err, "the old cell during the restore")
			assert.ErrorIs(t, errOf(p.GetCell(ctx, 0, newer.Key)), ErrNotFound, "the new cell during the restore")
			a, err := p.Applied(ctx)
			require.NoError(t, err)
			assert.Equal(t, AppliedState{Index: 3, Term: 1}, a, "applied state during the restore")
			switch n {
			case 1:
				return RestoreRecord{Shard: 0, Cell: newer}, nil
			case 2:
				if fail != nil {
					return RestoreRecord{}, fail
				}
			}
			return RestoreRecord{}, io.EOF
		}
	}
	boom := errors.New("boom")
	require.ErrorIs(t, p.Restore(ctx, AppliedState{Index: 9, Term: 2}, records(boom), nil, nil), boom)
	_, err := p.GetCell(ctx, 0, old.Key)
	assert.NoError(t, err, "the old cell after a failed restore")
	assert.ErrorIs(t, errOf(p.GetCell(ctx, 0, newer.Key)), ErrNotFound, "the new cell after a failed restore")

	require.NoError(t, p.Restore(ctx, AppliedState{Index: 9, Term: 2}, records(nil), nil, nil))
	assert.ErrorIs(t, errOf(p.GetCell(ctx, 0, old.Key)), ErrNotFound, "the old cell after the restore")
	_, err = p.GetCell(ctx, 0, newer.Key)
	assert.NoError(t, err, "the new cell after the restore")

	// Nothing is left of the replaced generation, nor of the failed one.
	gens := map[uint64]bool{}
	it, err := s.pebble.db.NewIter(&pebble.IterOptions{LowerBound: []byte{dataTag}, UpperBound: []byte{dataTag + 1}})
	require.NoError(t, err)
	for it.First(); it.Valid(); it.Next() {
		gens[binary.BigEndian.Uint64(it.Key()[1:dataPrefixLen])] = true
	}
	require.NoError(t, it.Close())
	assert.Len(t, gens, 1, "generations holding data after two restores: %v, want the current one only", gens)
}

// Data under a generation no partition names (a restore cut short by a crash) is deleted when
// the store opens.
func TestPebbleGarbageCollected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := pebbleEnv(t)
	s := env.open(t)
	p := openPartition(t, s, "trips", 0, 0, 0)
	c := mkCell(t, 1, "BASE", 1, 1)
	write(t, p, map[int][]cells.Cell{0: {c}}, AppliedState{Index: 1, Term: 1})
	orphan := append(dataPrefix(1<<40), tagKV, 'x')
	require.NoError(t, s.pebble.db.Set(orphan, []byte("left by a crash"), pebble.Sync))
	p.Close()
	s = env.open(t)
	_, ok, err := getCopy(s.pebble.db, orphan)
	require.NoError(t, err)
	assert.False(t, ok, "an orphaned generation's key survived reopening")
	p = openPartition(t, s, "trips", 0, 0, 0)
	got, err := p.GetCell(ctx, 0, c.Key)
	require.NoError(t, err, "the partition's own cell after reopening")
	checkCell(t, "after reopening", got, c)
}

// The order-preserving encodings sort as the values do.
func TestOrderedEncodings(t *testing.T) {
	t.Parallel()
	strs := []string{"", "\x00", "\x00\x00", "\x00a", "a", "a\x00", "a\x00b", "ab", "b", "\xff"}
	for i := 1; i < len(strs); i++ {
		a, b := appendEsc(nil, strs[i-1]), appendEsc(nil, strs[i])
		assert.Negative(t, bytes.Compare(a, b), "esc(%q) < esc(%q)", strs[i-1], strs[i])
		got, rest, err := readEsc(append(b, 7))
		require.NoError(t, err)
		assert.Equal(t, strs[i], got, "readEsc")
		assert.Equal(t, []byte{7}, rest, "readEsc rest")
	}
	floats := []any{nil, -1e300, -2.5, -1e-300, 0.0, 1e-300, 3.0, 1e300}
	ints := []any{nil, int64(-1 << 63), int64(-1), int64(0), int64(1), int64(1<<63 - 1)}
	uuids := []any{nil, uuid.UUID{}, uuid.UUID{0: 1}, uuid.UUID{15: 0xff, 0: 0xff}}
	for _, c := range []struct {
		kind IndexKind
		vals []any
	}{{IndexFloat, floats}, {IndexInt, ints}, {IndexUUID, uuids}, {IndexBool, []any{nil, false, true}}} {
		for i := 1; i < len(c.vals); i++ {
			a, b := appendOrd(nil, c.kind, c.vals[i-1]), appendOrd(nil, c.kind, c.vals[i])
			assert.Negative(t, bytes.Compare(a, b), "%s: ord(%v) < ord(%v)", c.kind, c.vals[i-1], c.vals[i])
		}
	}
	assert.Equal(t, appendOrd(nil, IndexFloat, 0.0), appendOrd(nil, IndexFloat, math.Copysign(0, -1)), "-0 and 0 encode alike")
}
