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
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writesLog returns a raft entry holding writes.
func writesLog(t testing.TB, index uint64, at time.Time, ws ...command.Write) *raft.Log {
	t.Helper()
	data, err := command.Encode(&command.Append{CreatedAt: at, Writes: ws})
	require.NoError(t, err, "command.Encode")
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func cond(shard, row int, col string, latest int64) command.Condition {
	return command.Condition{Shard: shard, RowKey: rowKey(row), ColumnKey: col, LatestRefKey: latest}
}

func condNone(shard, row int, col string) command.Condition {
	return command.Condition{Shard: shard, RowKey: rowKey(row), ColumnKey: col, None: true}
}

func applyOne(t *testing.T, f *FSM, l *raft.Log) []command.WriteResult {
	t.Helper()
	r := responses(t, f.ApplyBatch([]*raft.Log{l}))[0]
	require.NoError(t, r.Err, "entry %d", l.Index)
	return r.writes()
}

func TestConditionalWrites(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	f := newFSM(t, st)
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	v1, v2, v3 := body(t, `{"s":"booked"}`), body(t, `{"s":"boarded"}`), body(t, `{"s":"landed"}`)

	// if none: created; a second if-none fails and names the latest ref key.
	r := applyOne(t, f, writesLog(t, 1, at, command.Write{Conditions: []command.Condition{condNone(8, 1, "STATUS")}, Cells: []command.Cell{cell(8, 1, "STATUS", 1, v1)}}))
	require.True(t, r[0].Applied(), "first if-none write: %+v", r[0])
	assert.Equal(t, cells.StatusCreated, r[0].Cells[0].Status)
	r = applyOne(t, f, writesLog(t, 2, at, command.Write{Conditions: []command.Condition{condNone(8, 1, "STATUS")}, Cells: []command.Cell{cell(8, 1, "STATUS", 2, v2)}}))
	assert.Equal(t, []command.ConditionFailure{{Index: 0, LatestRefKey: 1, Found: true}}, r[0].Failed, "second if-none write")

	// if latest = 1: created; if latest = 1 again (stale): failed, latest 2, nothing written.
	r = applyOne(t, f, writesLog(t, 3, at, command.Write{Conditions: []command.Condition{cond(8, 1, "STATUS", 1)}, Cells: []command.Cell{cell(8, 1, "STATUS", 2, v2)}}))
	require.True(t, r[0].Applied(), "if-latest-1 write: %+v", r[0])
	r = applyOne(t, f, writesLog(t, 4, at, command.Write{Conditions: []command.Condition{cond(8, 1, "STATUS", 1)}, Cells: []command.Cell{cell(8, 1, "STATUS", 3, v3)}}))
	assert.Equal(t, []command.ConditionFailure{{Index: 0, LatestRefKey: 2, Found: true}}, r[0].Failed, "stale if-latest write")
	_, err := st.GetCell(context.Background(), 8, cells.Key{RowKey: rowKey(1), ColumnKey: "STATUS", RefKey: 3})
	assert.Error(t, err, "the refused write stored nothing")

	// One batch: a blind write of ref 3, then a condition on latest 2 (fails: it sees the blind
	// write), then one on latest 3 (holds), then two competing writers on latest 4: one wins.
	out := responses(t, f.ApplyBatch([]*raft.Log{
		writesLog(t, 5, at, command.Write{Cells: []command.Cell{cell(8, 1, "STATUS", 3, v3)}}),
		writesLog(t, 6, at,
			command.Write{Conditions: []command.Condition{cond(8, 1, "STATUS", 2)}, Cells: []command.Cell{cell(8, 1, "STATUS", 4, v1)}},
			command.Write{Conditions: []command.Condition{cond(8, 1, "STATUS", 3)}, Cells: []command.Cell{cell(8, 1, "STATUS", 4, v2)}}),
		writesLog(t, 7, at,
			command.Write{Conditions: []command.Condition{cond(8, 1, "STATUS", 4)}, Cells: []command.Cell{cell(8, 1, "STATUS", 5, v1)}},
			command.Write{Conditions: []command.Condition{cond(8, 1, "STATUS", 4)}, Cells: []command.Cell{cell(8, 1, "STATUS", 5, v3)}}),
	}))
	assert.True(t, out[0].writes()[0].Applied(), "blind write")
	assert.Equal(t, []command.ConditionFailure{{Index: 0, LatestRefKey: 3, Found: true}}, out[1].writes()[0].Failed, "condition after the blind write in the same batch")
	assert.True(t, out[1].writes()[1].Applied(), "condition on the blind write's ref key: %+v", out[1].writes()[1])
	assert.True(t, out[2].writes()[0].Applied(), "first competing writer")
	assert.Equal(t, []command.ConditionFailure{{Index: 0, LatestRefKey: 5, Found: true}}, out[2].writes()[1].Failed, "second competing writer")
	c, err := st.GetLatest(context.Background(), 8, rowKey(1), "STATUS")
	require.NoError(t, err)
	got, _ := c.Body.JSON()
	assert.Equal(t, int64(5), c.RefKey, "latest ref key")
	assert.JSONEq(t, `{"s":"booked"}`, string(got), "latest body: the first competing writer's")
}

func TestAtomicWrites(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	f := newFSM(t, st)
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a, b := body(t, `{"balance":10}`), body(t, `{"balance":20}`)
	r := applyOne(t, f, writesLog(t, 1, at, command.Write{Cells: []command.Cell{cell(8, 1, "BALANCE", 1, a)}}))
	require.True(t, r[0].Applied())

	// An atomic write of two cells, one of which conflicts: nothing written.
	r = applyOne(t, f, writesLog(t, 2, at, command.Write{Atomic: true, Cells: []command.Cell{cell(9, 2, "BALANCE", 1, a), cell(8, 1, "BALANCE", 1, b)}}))
	assert.True(t, r[0].Conflict, "atomic write with a conflicting cell: %+v", r[0])
	assert.Equal(t, cells.StatusConflict, r[0].Cells[1].Status, "the conflicting cell is named")
	assert.Equal(t, cells.Status(0), r[0].Cells[0].Status, "the other cell has no outcome")
	_, err := st.GetCell(context.Background(), 9, cells.Key{RowKey: rowKey(2), ColumnKey: "BALANCE", RefKey: 1})
	assert.Error(t, err, "nothing of the conflicting atomic write is stored")

	// One key twice in an atomic write, with two bodies: a conflict, nothing written.
	r = applyOne(t, f, writesLog(t, 3, at, command.Write{Atomic: true, Cells: []command.Cell{cell(10, 3, "BALANCE", 1, a), cell(10, 3, "BALANCE", 1, b)}}))
	assert.True(t, r[0].Conflict, "atomic write of one key with two bodies: %+v", r[0])
	_, err = st.GetCell(context.Background(), 10, cells.Key{RowKey: rowKey(3), ColumnKey: "BALANCE", RefKey: 1})
	assert.Error(t, err, "nothing of it is stored")

	// The same cells, not atomic: one created, one conflict.
	r = applyOne(t, f, writesLog(t, 4, at, command.Write{Cells: []command.Cell{cell(9, 2, "BALANCE", 1, a), cell(8, 1, "BALANCE", 1, b)}}))
	assert.Equal(t, cells.StatusCreated, r[0].Cells[0].Status)
	assert.Equal(t, cells.StatusConflict, r[0].Cells[1].Status)

	// Two conditions, one fails: nothing written, both indexes reported only for the failed one.
	r = applyOne(t, f, writesLog(t, 5, at, command.Write{
		Conditions: []command.Condition{cond(8, 1, "BALANCE", 1), cond(9, 2, "BALANCE", 7)},
		Cells:      []command.Cell{cell(8, 1, "BALANCE", 2, b), cell(9, 2, "BALANCE", 2, b)}}))
	assert.Equal(t, []command.ConditionFailure{{Index: 1, LatestRefKey: 1, Found: true}}, r[0].Failed)
	_, err = st.GetCell(context.Background(), 8, cells.Key{RowKey: rowKey(1), ColumnKey: "BALANCE", RefKey: 2})
	assert.Error(t, err, "nothing of the failed transaction is stored")
}

func TestIdempotentRetries(t *testing.T) {
	t.Parallel()
	// A datastore name of its own, so that the retry counter counts this test's batches only.
	db, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: t.TempDir()})
	require.NoError(t, err, "OpenSQLite")
	t.Cleanup(func() { db.Close() })
	st, err := db.Partition(context.Background(), storage.PartitionID{Datastore: "retries", Partition: 1}, testShards)
	require.NoError(t, err, "Partition")
	retries := func() float64 { return testutil.ToFloat64(requestRetries.WithLabelValues("retries", "1")) }
	f := newFSM(t, st)
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := body(t, `{"fare":10}`)
	id := uuid.New()
	w := command.Write{ID: id, Cells: []command.Cell{cell(8, 1, "BASE", 1, a), cell(9, 2, "BASE", 1, a)}}
	first := applyOne(t, f, writesLog(t, 1, at, w))[0]
	require.Equal(t, cells.StatusCreated, first.Cells[0].Status)
	require.False(t, first.Replayed)
	assert.Zero(t, retries(), "a new ID is inserted without a lookup")

	// A retry in a later entry answers the first outcome: created, same added_ids. The first
	// attempt, which takes the ID for new, meets its record and the batch is applied again with
	// a lookup.
	again := applyOne(t, f, writesLog(t, 2, at.Add(time.Minute), w))[0]
	assert.True(t, again.Replayed, "retry: %+v", again)
	assert.Equal(t, first.Cells, again.Cells, "retry answers the recorded outcome")
	assert.Equal(t, 1.0, retries(), "the retry's batch was applied again with a lookup")

	// The same retry twice in one batch, beside a write reusing the ID for other cells.
	other := command.Write{ID: id, Cells: []command.Cell{cell(8, 3, "BASE", 1, a)}}
	out := responses(t, f.ApplyBatch([]*raft.Log{writesLog(t, 3, at.Add(2*time.Minute), w, other, w)}))
	assert.Equal(t, first.Cells, out[0].writes()[0].Cells, "retry in a batch")
	assert.True(t, out[0].writes()[1].KeyReused, "an ID reused for another write is refused: %+v", out[0].writes()[1])
	assert.Equal(t, first.Cells, out[0].writes()[2].Cells, "second retry in the batch")
	_, err = st.GetCell(context.Background(), 8, cells.Key{RowKey: rowKey(3), ColumnKey: "BASE", RefKey: 1})
	assert.Error(t, err, "the refused write stored nothing")

	// A refused conditional write is recorded too: its retry answers the same refusal even
	// after the condition would hold.
	cid := uuid.New()
	cw := command.Write{ID: cid, Conditions: []command.Condition{cond(8, 4, "STATUS", 1)}, Cells: []command.Cell{cell(8, 4, "STATUS", 2, a)}}
	r := applyOne(t, f, writesLog(t, 4, at.Add(3*time.Minute), cw))[0]
	require.Len(t, r.Failed, 1)
	require.True(t, applyOne(t, f, writesLog(t, 5, at.Add(3*time.Minute), command.Write{Cells: []command.Cell{cell(8, 4, "STATUS", 1, a)}}))[0].Applied())
	r = applyOne(t, f, writesLog(t, 6, at.Add(4*time.Minute), cw))[0]
	assert.True(t, r.Replayed && len(r.Failed) == 1, "retry of a refused write: %+v", r)

	// After the window the record is ignored: the retry is applied again (exists).
	late := applyOne(t, f, writesLog(t, 7, at.Add(command.RequestWindow+time.Minute), w))[0]
	assert.False(t, late.Replayed, "retry after the window: %+v", late)
	assert.Equal(t, cells.StatusExists, late.Cells[0].Status, "retry after the window")

	// Request records travel in snapshots: a restored replica answers the retry alike.
	snap, err := f.Snapshot()
	require.NoError(t, err)
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	snap.Release()
	g := newFSM(t, openStore(t))
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))), "Restore")
	want := applyOne(t, f, writesLog(t, 8, at.Add(command.RequestWindow+2*time.Minute), w))[0]
	got := applyOne(t, g, writesLog(t, 8, at.Add(command.RequestWindow+2*time.Minute), w))[0]
	assert.True(t, want.Replayed, "retry within the window of the late record")
	assert.Equal(t, want, got, "restored replica answers the retry as the source")
}

// randomWritesLog returns n entries of random writes: blind, atomic and conditional, some with
// IDs that repeat (retries, and reuses for other cells).
func randomWritesLog(t testing.TB, rng *rand.Rand, n int) []*raft.Log {
	bodies := []cells.Body{body(t, `{"v":1}`), body(t, `{"v":2}`)}
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	var previous []command.Write
	logs := make([]*raft.Log, n)
	base := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range logs {
		var ws []command.Write
		for k := rng.Intn(4); k >= 0; k-- {
			if len(previous) > 0 && rng.Intn(5) == 0 {
				ws = append(ws, previous[rng.Intn(len(previous))]) // a retry
				continue
			}
			var w command.Write
			for j := rng.Intn(3); j >= 0; j-- {
				row := rng.Intn(6)
				shard := testShards.First + row%testShards.Len()
				w.Cells = append(w.Cells, cell(shard, row, "S", int64(rng.Intn(4)), bodies[rng.Intn(2)]))
			}
			switch rng.Intn(4) {
			case 0:
				w.Atomic = true
			case 1:
				row := rng.Intn(6)
				shard := testShards.First + row%testShards.Len()
				if rng.Intn(3) == 0 {
					w.Conditions = []command.Condition{condNone(shard, row, "S")}
				} else {
					w.Conditions = []command.Condition{cond(shard, row, "S", int64(rng.Intn(4)))}
				}
			}
			if rng.Intn(2) == 0 {
				w.ID = ids[rng.Intn(len(ids))]
			}
			previous = append(previous, w)
			ws = append(ws, w)
		}
		logs[i] = writesLog(t, uint64(i+1), base.Add(time.Duration(i)*time.Second), ws...)
	}
	return logs
}

// Replicas fed the same writes in different batch splits answer alike and store alike.
func TestWritesDeterminism(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	logs := randomWritesLog(t, rng, 300)
	pa, pb := openStore(t), openStore(t)
	ra := applyInBatches(t, newFSM(t, pa), logs, rng)
	rb := applyInBatches(t, newFSM(t, pb), logs, rng)
	require.Equal(t, ra, rb, "seed %d: replicas answered differently", seed)
	sameCells(t, dump(t, pa), dump(t, pb))
	var failed, replayed, reused int
	for _, r := range ra {
		for _, w := range r.writes() {
			failed += len(w.Failed)
			if w.Replayed {
				replayed++
			}
			if w.KeyReused {
				reused++
			}
		}
	}
	t.Logf("seed %d: %d failed conditions, %d replayed, %d reused IDs", seed, failed, replayed, reused)
	assert.Positive(t, failed*replayed*reused, "seed %d: the log exercises conditions, retries and reuses", seed)
}

// countRequests returns how many request records the store holds, expired ones included.
func countRequests(t *testing.T, st *storage.PartitionStore) int {
	t.Helper()
	snap, err := st.BeginSnapshot(context.Background())
	require.NoError(t, err)
	defer func() { require.NoError(t, snap.Close()) }()
	n := 0
	require.NoError(t, snap.ScanRequests(context.Background(), func(storage.RequestRecord) error { n++; return nil }))
	return n
}

// TestPruneKeepsUpWithWrites checks that pruning deletes expired request records faster than
// writes store new ones: a prune may delete twice the records stored since the previous one, so
// a partition taking more than pruneLimit writes a second does not grow its requests table
// without bound.
func TestPruneKeepsUpWithWrites(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	f := newFSM(t, st)
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	b := body(t, `{"n":1}`)
	writes := func(from, n int) []command.Write {
		ws := make([]command.Write, n)
		for i := range ws {
			ws[i] = command.Write{ID: uuid.New(), Cells: []command.Cell{cell(8+i%4, from+i, "C", 1, b)}}
		}
		return ws
	}
	const old = 3 * pruneLimit
	applyOne(t, f, writesLog(t, 1, at, writes(0, old)...))
	require.Equal(t, old, countRequests(t, st))

	// One second past the window of the first batch, 1.5 pruneLimit writes: the prune of their
	// batch deletes every expired record, not pruneLimit of them.
	later := at.Add(command.RequestWindow + time.Second)
	applyOne(t, f, writesLog(t, 2, later, writes(old, pruneLimit*3/2)...))
	assert.Equal(t, pruneLimit*3/2, countRequests(t, st), "expired records left behind")
}
