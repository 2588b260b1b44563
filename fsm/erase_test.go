package fsm

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func eraseLog(t testing.TB, index uint64, at time.Time, shard, row int) *raft.Log {
	t.Helper()
	data, err := command.Encode(&command.Erase{CreatedAt: at, Shard: int32(shard), RowKey: rowKey(row)})
	require.NoError(t, err, "command.Encode")
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// rowCells returns the entries of rowKey's shard log in a dump (cells and tombstones), in order.
func rowCells(all []cells.Cell, row int) []cells.Cell {
	var out []cells.Cell
	for _, c := range all {
		if c.RowKey == rowKey(row) {
			out = append(out, c)
		}
	}
	return out
}

// A put, an erase and a put of the same key in one batch take effect in log order: the second
// put creates a new cell (it would be a conflict with the first if the cells were applied
// before the erase, and erased with it if the erase came last), and replicas fed the batch in
// one piece, entry by entry, or on MariaDB, end with the same rows. The erased cell's row is
// gone from the SQL table: the shard holds the tombstone and the new cell only.
func TestEraseInLogOrder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	a, b := body(t, `{"fare":10}`), body(t, `{"fare":11}`)
	logs := []*raft.Log{
		cmdLog(t, 1, at, cell(8, 1, "BASE", 1, a), cell(8, 1, "STATUS", 1, a), cell(8, 2, "BASE", 1, a)),
		eraseLog(t, 2, at.Add(time.Second), 8, 1),
		cmdLog(t, 3, at.Add(2*time.Second), cell(8, 1, "BASE", 1, b)),
		eraseLog(t, 4, at.Add(3*time.Second), 9, 3),                                             // a row never written
		eraseLog(t, 5, at.Add(4*time.Second), 3, 1),                                             // a shard of another partition
		{Index: 6, Term: 1, Type: raft.LogCommand, Data: []byte{byte(command.KindErase), 0xc1}}, // undecodable
		cmdLog(t, 7, at.Add(5*time.Second), cell(8, 2, "BASE", 2, b)),
	}
	check := func(what string, p *storage.PartitionStore, f *FSM, out []*Response) {
		t.Helper()
		require.Len(t, out, len(logs), "%s: one response per entry", what)
		require.NoError(t, out[0].Err, "%s: first put", what)
		require.NoError(t, out[1].Err, "%s: erase", what)
		require.Equal(t, &command.EraseResult{Erased: 2, AddedID: 4}, out[1].erase(), "%s: erase of row 1: its two cells, tombstone after the three cells", what)
		require.NoError(t, out[2].Err, "%s: put after the erase", what)
		require.Equal(t, []cells.Result{{Status: cells.StatusCreated, AddedID: 5, CreatedAt: at.Add(2 * time.Second)}}, out[2].writes()[0].Cells,
			"%s: a put of the erased key after the erasure creates a new cell", what)
		require.Equal(t, &command.EraseResult{}, out[3].erase(), "%s: erase of a row never written: nothing, no tombstone", what)
		assert.ErrorIs(t, out[4].Err, command.ErrShardOutOfRange, "%s: erase in another partition's shard", what)
		assert.ErrorIs(t, out[5].Err, command.ErrBadCommand, "%s: undecodable erase", what)
		require.Equal(t, cells.StatusCreated, out[6].writes()[0].Cells[0].Status, "%s: last put", what)
		assert.EqualValues(t, 6, out[6].writes()[0].Cells[0].AddedID, "%s: last put: added_id after the tombstone and the new cell", what)
		assert.Equal(t, uint64(7), f.Applied().Index, "%s: applied index", what)
		h, ok := f.HighWater(8)
		assert.True(t, ok && h == 6, "%s: high water of shard 8: got %d (known %v), want 6", what, h, ok)

		all := dump(t, p)
		r1 := rowCells(all, 1)
		require.Len(t, r1, 2, "%s: rows of row 1 in the table: the tombstone and the new cell (%v)", what, r1)
		sameCells(t, r1, []cells.Cell{cells.NewTombstone(rowKey(1), 4, at.Add(time.Second)),
			{Key: cells.Key{RowKey: rowKey(1), ColumnKey: "BASE", RefKey: 1}, Body: b, AddedID: 5, CreatedAt: at.Add(2 * time.Second)}})
		got, err := p.GetCell(context.Background(), 8, cells.Key{RowKey: rowKey(1), ColumnKey: "STATUS", RefKey: 1})
		assert.ErrorIs(t, err, storage.ErrNotFound, "%s: the erased STATUS cell: got %+v", what, got)
		assert.Len(t, rowCells(all, 2), 2, "%s: the other row is untouched", what)
	}

	pa := openStore(t)
	fa := newFSM(t, pa)
	check("one batch", pa, fa, responses(t, fa.ApplyBatch(logs)))

	pb := openStore(t)
	fb := newFSM(t, pb)
	var outB []*Response
	for _, l := range logs {
		outB = append(outB, responses(t, fb.ApplyBatch([]*raft.Log{l}))...)
	}
	check("entry by entry", pb, fb, outB)
	sameCells(t, dump(t, pb), dump(t, pa))

	pm := openMySQL(t)
	fm := newFSM(t, pm)
	check("MariaDB, in two batches", pm, fm, append(responses(t, fm.ApplyBatch(logs[:2])), responses(t, fm.ApplyBatch(logs[2:]))...))
	sameCells(t, dump(t, pm), dump(t, pa))

	// A snapshot carries the tombstones to a fresh replica, which continues the shard's log
	// after them.
	pr := openStore(t)
	frs := newFSM(t, pr)
	require.NoError(t, frs.Restore(io.NopCloser(bytes.NewReader(persist(t, fa, func() {})))), "Restore")
	sameCells(t, dump(t, pr), dump(t, pa))
	out9 := responses(t, frs.ApplyBatch([]*raft.Log{cmdLog(t, 8, at.Add(6*time.Second), cell(8, 5, "BASE", 1, a))}))
	require.EqualValues(t, 7, out9[0].writes()[0].Cells[0].AddedID, "a put after a restore: added_id after the tombstones")

	// A restarted replica reads the shard's high water from the table (the tombstone keeps it
	// from going back) and skips what it applied.
	fr := newFSM(t, pa)
	out := responses(t, fr.ApplyBatch(append(logs, eraseLog(t, 8, at.Add(6*time.Second), 8, 2), cmdLog(t, 9, at.Add(7*time.Second), cell(8, 4, "BASE", 1, a)))))
	for i := range logs {
		require.ErrorIs(t, out[i].Err, ErrAlreadyApplied, "replayed entry %d", i+1)
	}
	require.Equal(t, &command.EraseResult{Erased: 2, AddedID: 7}, out[len(logs)].erase(), "erase of row 2 after a restart")
	require.EqualValues(t, 8, out[len(logs)+1].writes()[0].Cells[0].AddedID, "put after the erase, after a restart")
}

// randomLogWithErases is randomLog with erase entries of its rows mixed in.
func randomLogWithErases(t testing.TB, rng *rand.Rand, n int) []*raft.Log {
	logs := randomLog(t, rng, n)
	base := time.Date(2002, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range logs {
		if rng.Intn(5) == 0 {
			row := rng.Intn(20)
			logs[i] = eraseLog(t, logs[i].Index, base.Add(time.Duration(i)*time.Millisecond), testShards.First+row%testShards.Len(), row)
		}
	}
	return logs
}

// Two replicas (and a MariaDB one) fed a random log of puts and erases in different batch
// splits answer the same and end with the same rows.
func TestEraseDeterminism(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	logs := randomLogWithErases(t, rng, 300)
	pa, pb, pm := openStore(t), openStore(t), openMySQL(t)
	ra := applyInBatches(t, newFSM(t, pa), logs, rng)
	rb := applyInBatches(t, newFSM(t, pb), logs, rng)
	rm := applyInBatches(t, newFSM(t, pm), logs, rng)
	require.Equal(t, ra, rb, "seed %d: SQLite replicas answered differently", seed)
	require.Equal(t, ra, rm, "seed %d: MariaDB and SQLite replicas answered differently", seed)
	erased, tombstones := 0, 0
	for _, r := range ra {
		if r.erase() != nil && r.erase().AddedID > 0 {
			erased++
		}
	}
	a := dump(t, pa)
	for _, c := range a {
		if c.Key.IsTombstone() {
			tombstones++
		}
	}
	require.NotZero(t, erased, "seed %d: no erase deleted anything", seed)
	require.Equal(t, erased, tombstones, "seed %d: one tombstone per erase that deleted cells", seed)
	sameCells(t, dump(t, pb), a)
	sameCells(t, dump(t, pm), a)
}

// An IndexErase deletes a row's entries from the table on every shard of the partition; a
// dropped table has nothing to delete and a bad table name is refused.
func TestIndexErase(t *testing.T) {
	t.Parallel()
	p := openStore(t)
	f := newFSM(t, p)
	ups := []command.IndexEntry{
		update(8, 1, "BASE", 1, "ORD", 10, uuid.Nil), update(10, 1, "STATUS", 1, "ORD", 0, uuid.New()),
		update(9, 2, "BASE", 1, "SFO", 20, uuid.Nil),
	}
	out := responses(t, f.ApplyBatch([]*raft.Log{
		indexLog(t, 1, command.Index{Op: command.IndexUpsert, Table: testTable, Fields: testFields, Entries: ups}),
		indexLog(t, 2, command.Index{Op: command.IndexErase, Table: testTable, RowKeys: []uuid.UUID{rowKey(1), rowKey(7)}}),
		indexLog(t, 3, command.Index{Op: command.IndexErase, Table: "Bad-Name", RowKeys: []uuid.UUID{rowKey(2)}}),
		indexLog(t, 4, command.Index{Op: command.IndexErase, Table: "other_v1", RowKeys: []uuid.UUID{rowKey(2)}}),
	}))
	require.NoError(t, out[0].Err, "upsert")
	require.NoError(t, out[1].Err, "erase row 1")
	require.Equal(t, &command.IndexResult{Changed: 2}, out[1].index(), "erase row 1: its entries on shards 8 and 10")
	assert.ErrorIs(t, out[2].Err, command.ErrBadCommand, "erase from a bad table name")
	require.Equal(t, &command.IndexResult{}, out[3].index(), "erase from a table the partition does not have")
	left := dumpIndex(t, p)
	require.Len(t, left, 1, "entries left: %+v", left)
	assert.Equal(t, rowKey(2), left[0].RowKey, "the entry left is row 2's")

	out = responses(t, f.ApplyBatch([]*raft.Log{
		indexLog(t, 5, command.Index{Op: command.IndexDrop, Table: testTable}),
		indexLog(t, 6, command.Index{Op: command.IndexErase, Table: testTable, RowKeys: []uuid.UUID{rowKey(2)}}),
	}))
	require.NoError(t, out[1].Err, "erase after the drop")
	require.Equal(t, &command.IndexResult{}, out[1].index(), "erase after the drop: nothing")
}
