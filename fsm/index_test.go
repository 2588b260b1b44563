package fsm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testFields: shard field "city" from BASE, "fare" from BASE, "status" from STATUS.
var testFields = []indexes.Field{
	{Name: "city", Type: indexes.TypeString, Column: "BASE"},
	{Name: "fare", Type: indexes.TypeInt, Column: "BASE"},
	{Name: "driver", Type: indexes.TypeUUID, Column: "STATUS"},
}

const testTable = "by_city_v1"

func indexLog(t testing.TB, index uint64, c command.Index) *raft.Log {
	t.Helper()
	data, err := command.Encode(&c)
	require.NoError(t, err, "command.Encode")
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// update is one source cell turned into an index entry update.
func update(shard int, row int, col string, ref int64, city string, fare int64, driver uuid.UUID) command.IndexEntry {
	e := command.IndexEntry{Shard: int32(shard), RowKey: rowKey(row), Values: []any{city, nil, nil}, Refs: map[string]int64{col: ref}}
	if col == "BASE" {
		e.Values[1] = fare
	} else {
		e.Values[2] = driver
	}
	return e
}

// dumpIndex returns every entry of the test table on the partition, shard by shard.
func dumpIndex(t *testing.T, p *storage.PartitionStore) []storage.IndexEntry {
	t.Helper()
	snap, err := p.BeginSnapshot(context.Background())
	require.NoError(t, err, "BeginSnapshot")
	defer snap.Close()
	var out []storage.IndexEntry
	tbl := IndexTableOf(testTable, testFields)
	for s := p.Shards().First; s <= p.Shards().Last; s++ {
		err := snap.ScanIndex(context.Background(), s, tbl, func(e storage.IndexEntry) error {
			out = append(out, e)
			return nil
		})
		require.NoError(t, err, "ScanIndex(%d)", s)
	}
	return out
}

// Updates applied in any order and any number of times leave the same entries as applied once
// in ref-key order: the FSM merges per source column by ref key. The shard field never moves.
func TestIndexUpsertsCommute(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var ups []command.IndexEntry
	for row := 0; row < 20; row++ {
		shard := 8 + rng.IntN(4)
		city := fmt.Sprintf("city-%d", rng.IntN(3))
		for ref := int64(1); ref <= int64(1+rng.IntN(4)); ref++ {
			ups = append(ups, update(shard, row, "BASE", ref, city, rng.Int64N(100), uuid.Nil))
		}
		for ref := int64(1); ref <= int64(rng.IntN(3)); ref++ {
			ups = append(ups, update(shard, row, "STATUS", ref, city, 0, uuid.New()))
		}
	}
	apply := func(order []command.IndexEntry, batch int) []storage.IndexEntry {
		p := openStore(t)
		f := newFSM(t, p)
		var logs []*raft.Log
		for i := 0; i < len(order); i += batch {
			chunk := order[i:min(i+batch, len(order))]
			logs = append(logs, indexLog(t, uint64(len(logs)+1), command.Index{Op: command.IndexUpsert, Table: testTable, Fields: testFields, Entries: chunk}))
		}
		for i := 0; i < len(logs); i += 3 {
			for _, r := range responses(t, f.ApplyBatch(logs[i:min(i+3, len(logs))])) {
				require.NoError(t, r.Err, "seed %d: upsert", seed)
				require.NotNil(t, r.index(), "seed %d: upsert: %+v, want an index result", seed, r)
			}
		}
		return dumpIndex(t, p)
	}
	want := apply(ups, 1) // per row and column, ref keys ascending
	require.Len(t, want, 20, "seed %d: entries, one per row", seed)
	for round := 0; round < 3; round++ {
		shuffled := append([]command.IndexEntry(nil), ups...)
		shuffled = append(shuffled, ups[:len(ups)/2]...) // replays
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := apply(shuffled, 1+rng.IntN(7))
		require.Equal(t, want, got, "seed %d round %d: entries after a shuffled replay", seed, round)
	}
	// The entries hold the newest values: check one row against the updates.
	for _, e := range want {
		var bestBase, bestStatus command.IndexEntry
		for _, u := range ups {
			if u.RowKey != e.RowKey {
				continue
			}
			if r, ok := u.Refs["BASE"]; ok && (bestBase.Refs == nil || r > bestBase.Refs["BASE"]) {
				bestBase = u
			}
			if r, ok := u.Refs["STATUS"]; ok && (bestStatus.Refs == nil || r > bestStatus.Refs["STATUS"]) {
				bestStatus = u
			}
		}
		assert.Equal(t, bestBase.Values[1], e.Values[1], "seed %d row %s: fare, from the newest BASE", seed, e.RowKey)
		if bestStatus.Refs != nil {
			assert.Equal(t, bestStatus.Values[2], e.Values[2], "seed %d row %s: driver, from the newest STATUS", seed, e.RowKey)
		}
	}
}

// A drop removes the tables, survives a restart (later upserts are ignored), and a snapshot
// carries the index entries to a fresh replica.
func TestIndexDropAndSnapshot(t *testing.T) {
	t.Parallel()
	p := openStore(t)
	f := newFSM(t, p)
	ups := []command.IndexEntry{update(8, 1, "BASE", 1, "ORD", 10, uuid.Nil), update(10, 2, "BASE", 1, "SFO", 20, uuid.Nil)}
	responses(t, f.ApplyBatch([]*raft.Log{indexLog(t, 1, command.Index{Op: command.IndexUpsert, Table: testTable, Fields: testFields, Entries: ups})}))
	before := dumpIndex(t, p)
	require.Len(t, before, 2, "entries after two upserts")

	// Snapshot into a fresh partition: same entries.
	data := persist(t, f, func() {})
	q := openStore(t)
	g := newFSM(t, q)
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(data))), "Restore")
	require.Equal(t, before, dumpIndex(t, q), "restored entries")

	// Drop, then upsert again: ignored, no table comes back.
	out := responses(t, f.ApplyBatch([]*raft.Log{
		indexLog(t, 2, command.Index{Op: command.IndexDrop, Table: testTable}),
		indexLog(t, 3, command.Index{Op: command.IndexUpsert, Table: testTable, Fields: testFields, Entries: ups}),
	}))
	require.NoError(t, out[0].Err, "drop")
	require.NoError(t, out[1].Err, "upsert after drop")
	require.NotNil(t, out[1].index(), "upsert after drop: %+v", out[1])
	require.Zero(t, out[1].index().Changed, "upsert after drop: entries changed")
	names, err := p.IndexNames(context.Background())
	require.NoError(t, err, "IndexNames after drop")
	require.Empty(t, names, "index tables after drop")
	f2 := newFSM(t, p) // restart: the tombstone is in SQL
	responses(t, f2.ApplyBatch([]*raft.Log{indexLog(t, 4, command.Index{Op: command.IndexUpsert, Table: testTable, Fields: testFields, Entries: ups})}))
	names, err = p.IndexNames(context.Background())
	require.NoError(t, err, "IndexNames after a restart")
	require.Empty(t, names, "a restarted FSM recreated dropped tables")
}

// Catalog commands go through the FSM: results are values, refusals are errors and change
// nothing, and the catalog is read back from SQL.
func TestIndexCatalogCommands(t *testing.T) {
	t.Parallel()
	p := openStore(t)
	f := newFSM(t, p)
	def, err := indexes.ParseDefinition([]byte("table: by_city\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: city, type: string}\n"))
	require.NoError(t, err, "ParseDefinition")
	at := time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)
	cat := func(i uint64, c indexes.Command) *raft.Log {
		c.Now = at
		return indexLog(t, i, command.Index{Op: command.IndexCatalog, Catalog: c})
	}
	out := responses(t, f.ApplyBatch([]*raft.Log{
		cat(1, indexes.Command{Op: indexes.OpDefine, Name: "by_city", Definition: def}),
		cat(2, indexes.Command{Op: indexes.OpAlias, Name: "by_city", Version: 1}),
		cat(3, indexes.Command{Op: indexes.OpReady, Name: "by_city", Version: 1}),
	}))
	require.NoError(t, out[0].Err, "define")
	require.NotNil(t, out[0].index(), "define: %+v", out[0])
	require.True(t, out[0].index().Catalog.Version == 1 && out[0].index().Catalog.Created, "define: got %+v, want version 1 created", out[0].index().Catalog)
	require.True(t, errors.Is(out[1].Err, indexes.ErrNotReady) || errors.Is(out[1].Err, indexes.ErrBadCommand),
		"alias to a building version: got %+v, want a refusal (ErrNotReady or command.ErrBadCommand)", out[1])
	require.NoError(t, out[2].Err, "ready: %+v", out[2])
	c, err := LoadCatalog(context.Background(), p)
	require.NoError(t, err, "LoadCatalog")
	v, err := c.Resolve("by_city", 0)
	require.NoError(t, err, "resolve after ready")
	require.True(t, v.Version == 1 && v.State == indexes.StateReady, "resolve after ready: got %+v, want version 1 ready", v)
}
