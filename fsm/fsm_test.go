package fsm

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("seed", 0, "seed of the randomized fsm tests (0: from the clock)")

// testSeed returns the seed of a randomized test, -seed or else the clock's, and logs it so
// that a failing run can be repeated.
func testSeed(t *testing.T) int64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}

var testShards = cells.ShardRange{First: 8, Last: 11}

// openStore returns a fresh partition store of the default embedded engine (pebble) for
// shards 8..11 of datastore "trips".
func openStore(t *testing.T) *storage.PartitionStore {
	t.Helper()
	st, err := storage.OpenPebble(context.Background(), storage.PebbleConfig{Dir: t.TempDir(), Logger: testLogger(t)})
	require.NoError(t, err, "OpenPebble")
	t.Cleanup(func() { st.Close() })
	return openPartition(t, st)
}

// openSQLite returns a fresh SQLite partition store for shards 8..11 of datastore "trips".
func openSQLite(t *testing.T) *storage.PartitionStore {
	t.Helper()
	st, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: t.TempDir()})
	require.NoError(t, err, "OpenSQLite")
	t.Cleanup(func() { st.Close() })
	return openPartition(t, st)
}

func openPartition(t *testing.T, st *storage.Store) *storage.PartitionStore {
	t.Helper()
	p, err := st.Partition(context.Background(), storage.PartitionID{Datastore: "trips", Partition: 2}, testShards)
	require.NoError(t, err, "Partition")
	return p
}

func newFSM(t *testing.T, s Store) *FSM {
	t.Helper()
	f, err := New(context.Background(), Config{Store: s, StoreBackoff: time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err, "New")
	return f
}

func body(t testing.TB, s string) cells.Body {
	t.Helper()
	b, err := cells.EncodeBody([]byte(s))
	require.NoError(t, err, "EncodeBody(%s)", s)
	return b
}

// Outcome accessors of a Response for tests: nil when it holds another outcome.
func (r *Response) writes() []command.WriteResult {
	w, _ := r.Result.([]command.WriteResult)
	return w
}

func (r *Response) erase() *command.EraseResult { return resultPtr[command.EraseResult](r) }

func (r *Response) index() *command.IndexResult { return resultPtr[command.IndexResult](r) }

func (r *Response) group() *consumer.Result { return resultPtr[consumer.Result](r) }

func resultPtr[T any](r *Response) *T {
	if v, ok := r.Result.(T); ok {
		return &v
	}
	return nil
}

func rowKey(i int) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(i))) }

func cmdLog(t testing.TB, index uint64, at time.Time, cs ...command.Cell) *raft.Log {
	t.Helper()
	data, err := command.Encode(&command.Append{CreatedAt: at, Writes: []command.Write{{Cells: cs}}})
	require.NoError(t, err, "command.Encode")
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func cell(shard, row int, col string, ref int64, b cells.Body) command.Cell {
	return command.Cell{Shard: shard, Key: cells.Key{RowKey: rowKey(row), ColumnKey: col, RefKey: ref}, Body: b}
}

func responses(t *testing.T, out []interface{}) []*Response {
	t.Helper()
	rs := make([]*Response, len(out))
	for i, o := range out {
		r, ok := o.(*Response)
		require.True(t, ok, "response %d is %T, want *Response", i, o)
		rs[i] = r
	}
	return rs
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	f := newFSM(t, openStore(t))
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456000, time.UTC)
	a, b := body(t, `{"fare":10}`), body(t, `{"fare":11}`)
	out := responses(t, f.ApplyBatch([]*raft.Log{
		cmdLog(t, 1, at, cell(8, 1, "BASE", 1, a), cell(8, 1, "BASE", 1, a), cell(8, 1, "BASE", 1, b), cell(9, 2, "BASE", 1, a)),
		cmdLog(t, 2, at.Add(time.Second), cell(8, 1, "BASE", 1, b), cell(8, 1, "BASE", 2, b), cell(8, 1, "base", 1, b)),
	}))
	want := [][]cells.Status{
		{cells.StatusCreated, cells.StatusExists, cells.StatusConflict, cells.StatusCreated},
		{cells.StatusConflict, cells.StatusCreated, cells.StatusCreated},
	}
	require.Len(t, out, len(want), "one response per entry")
	for i, r := range out {
		require.NoError(t, r.Err, "entry %d", i)
		require.Len(t, r.writes()[0].Cells, len(want[i]), "entry %d: one result per cell", i)
		for j, c := range r.writes()[0].Cells {
			assert.Equal(t, want[i][j], c.Status, "entry %d cell %d: status", i, j)
		}
	}
	// added_id is per shard, in log order; exists/conflict report the stored cell.
	ids := []int64{out[0].writes()[0].Cells[0].AddedID, out[0].writes()[0].Cells[1].AddedID, out[0].writes()[0].Cells[2].AddedID, out[0].writes()[0].Cells[3].AddedID, out[1].writes()[0].Cells[1].AddedID, out[1].writes()[0].Cells[2].AddedID}
	assert.Equal(t, []int64{1, 1, 1, 1, 2, 3}, ids, "added_ids")
	assert.WithinDuration(t, at, out[1].writes()[0].Cells[0].CreatedAt, 0, "conflict reports the stored cell's created_at")
	assert.WithinDuration(t, at.Add(time.Second), out[1].writes()[0].Cells[1].CreatedAt, 0, "created_at: the command's")
	assert.Equal(t, uint64(2), f.Applied().Index, "applied index")
	// A later batch meets the stored cells (the INSERT finds them; the shard's new cells then
	// take the next added_ids, with no gap left by the ones that were stored before).
	out = responses(t, f.ApplyBatch([]*raft.Log{
		cmdLog(t, 3, at.Add(2*time.Second), cell(8, 3, "BASE", 1, a), cell(8, 1, "BASE", 2, b), cell(8, 1, "BASE", 1, b), cell(9, 4, "BASE", 1, a)),
	}))
	require.Len(t, out, 1, "one response")
	require.NoError(t, out[0].Err, "third batch")
	got := make([]cells.Result, len(out[0].writes()[0].Cells))
	for i, c := range out[0].writes()[0].Cells {
		got[i] = cells.Result{Status: c.Status, AddedID: c.AddedID}
	}
	assert.Equal(t, []cells.Result{{Status: cells.StatusCreated, AddedID: 4}, {Status: cells.StatusExists, AddedID: 2},
		{Status: cells.StatusConflict, AddedID: 1}, {Status: cells.StatusCreated, AddedID: 2}}, got, "third batch: status and added_id")
}

func TestBadCommandsAreValues(t *testing.T) {
	t.Parallel()
	f := newFSM(t, openStore(t))
	out := responses(t, f.ApplyBatch([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte{99, 1, 2}},
		cmdLog(t, 2, time.Now(), cell(3, 1, "BASE", 1, body(t, `{}`))),
		cmdLog(t, 3, time.Now(), cell(10, 1, "BASE", 1, body(t, `{}`))),
		{Index: 4, Term: 1, Type: raft.LogConfiguration},
	}))
	require.Len(t, out, 4, "one response per entry")
	assert.ErrorIs(t, out[0].Err, command.ErrBadCommand, "undecodable entry")
	assert.ErrorIs(t, out[1].Err, command.ErrShardOutOfRange, "shard 3 outside 8..11")
	if assert.NoError(t, out[2].Err, "valid entry after bad ones") && assert.Len(t, out[2].writes()[0].Cells, 1, "valid entry after bad ones") {
		assert.Equal(t, cells.StatusCreated, out[2].writes()[0].Cells[0].Status, "valid entry after bad ones: %+v", out[2])
	}
	assert.NoError(t, out[3].Err, "configuration entry: %+v", out[3])
	assert.Equal(t, uint64(4), f.Applied().Index, "applied after the configuration entry")
}

// randomLog builds n command entries over a few keys, so keys collide within entries, within
// batches and across batches, with bodies that sometimes match and sometimes do not.
func randomLog(t testing.TB, rng *rand.Rand, n int) []*raft.Log {
	bodies := []cells.Body{body(t, `{"v":1}`), body(t, `{"v":2}`), body(t, `{"v":[1,{"x":"y"}]}`)}
	logs := make([]*raft.Log, n)
	base := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range logs {
		var cs []command.Cell
		for j := rng.Intn(6); j >= 0; j-- {
			row := rng.Intn(20)
			shard := testShards.First + row%testShards.Len()
			cs = append(cs, cell(shard, row, []string{"BASE", "STATUS"}[rng.Intn(2)], int64(rng.Intn(3)), bodies[rng.Intn(len(bodies))]))
		}
		logs[i] = cmdLog(t, uint64(i+1), base.Add(time.Duration(i)*time.Millisecond), cs...)
	}
	return logs
}

// applyInBatches feeds logs to f in random batch sizes and returns the responses.
func applyInBatches(t *testing.T, f *FSM, logs []*raft.Log, rng *rand.Rand) []*Response {
	var out []*Response
	for i := 0; i < len(logs); {
		n := 1 + rng.Intn(10)
		if i+n > len(logs) {
			n = len(logs) - i
		}
		out = append(out, responses(t, f.ApplyBatch(logs[i:i+n]))...)
		i += n
	}
	return out
}

// dump returns every cell of the partition, shard by shard in added_id order.
func dump(t *testing.T, p *storage.PartitionStore) []cells.Cell {
	t.Helper()
	var all []cells.Cell
	for s := testShards.First; s <= testShards.Last; s++ {
		cs, err := p.ScanShard(context.Background(), s, 0, 1<<30)
		require.NoError(t, err, "ScanShard(%d)", s)
		all = append(all, cs...)
	}
	return all
}

// sameCells requires got and want to hold the same cells in the same order: keys, added_ids,
// created_at, packed bodies and origins.
func sameCells(t *testing.T, got, want []cells.Cell) {
	t.Helper()
	require.Len(t, got, len(want), "cells")
	for i := range got {
		g, w := got[i], want[i]
		require.True(t, g.Key == w.Key && g.AddedID == w.AddedID && g.CreatedAt.Equal(w.CreatedAt) && bytes.Equal(mustPacked(t, g.Body), mustPacked(t, w.Body)) && g.Origin == w.Origin,
			"cell %d: got %v added_id %d at %v origin %q, want %v added_id %d at %v origin %q", i, g.Key, g.AddedID, g.CreatedAt, g.Origin, w.Key, w.AddedID, w.CreatedAt, w.Origin)
	}
}

func mustPacked(t *testing.T, b cells.Body) []byte {
	t.Helper()
	p, err := b.Packed()
	require.NoError(t, err, "Packed")
	return p
}

// Two replicas fed the same log, in different batch splits, end with identical rows and
// identical results.
func TestDeterminism(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	logs := randomLog(t, rng, 300)
	pa, pb := openSQLite(t), openStore(t)
	ra := applyInBatches(t, newFSM(t, pa), logs, rng)
	rb := applyInBatches(t, newFSM(t, pb), logs, rng)
	require.Equal(t, ra, rb, "seed %d: replicas answered differently", seed)
	a, b := dump(t, pa), dump(t, pb)
	require.NotEmpty(t, a, "seed %d: no cells applied", seed)
	sameCells(t, a, b)
	// added_id is dense per shard: 1, 2, 3, ...
	stored := map[cells.Key]bool{}
	for _, c := range a {
		require.False(t, stored[c.Key], "seed %d: key %v stored twice", seed, c.Key)
		stored[c.Key] = true
	}
	prev := map[int]int64{}
	for s := testShards.First; s <= testShards.Last; s++ {
		cs, err := pa.ScanShard(context.Background(), s, 0, 1<<30)
		require.NoError(t, err, "ScanShard(%d)", s)
		for _, c := range cs {
			require.Equal(t, prev[s]+1, c.AddedID, "seed %d: shard %d added_id after %d, want dense", seed, s, prev[s])
			prev[s] = c.AddedID
		}
	}
}

// A restarted replica skips what its store already applied.
func TestRestartSkipsApplied(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(7))
	logs := randomLog(t, rng, 60)
	p := openStore(t)
	f := newFSM(t, p)
	applyInBatches(t, f, logs[:40], rng)
	before := dump(t, p)

	f2 := newFSM(t, p) // the replica restarts over the same store
	require.Equal(t, uint64(40), f2.Applied().Index, "applied index of the restarted FSM")
	out := applyInBatches(t, f2, logs, rng) // raft replays from the start of its log
	for i, r := range out[:40] {
		require.ErrorIs(t, r.Err, ErrAlreadyApplied, "replayed entry %d", i+1)
	}
	after := map[cells.Key]cells.Cell{}
	for _, c := range dump(t, p) {
		after[c.Key] = c
	}
	for _, c := range before {
		a, ok := after[c.Key]
		require.True(t, ok && a.AddedID == c.AddedID && a.CreatedAt.Equal(c.CreatedAt), "cell %v changed by the replay: got %+v, want %+v", c.Key, a, c)
	}

	// The same log applied in one go on a fresh replica gives the same table.
	ref := openStore(t)
	applyInBatches(t, newFSM(t, ref), logs, rng)
	sameCells(t, dump(t, p), dump(t, ref))
}

// testLogger writes through t.Log, so logs show only when a test fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(11))
	logs := randomLog(t, rng, 80)
	src := openStore(t)
	f := newFSM(t, src)
	applyInBatches(t, f, logs[:50], rng)
	atSnapshot := dump(t, src)

	snap, err := f.Snapshot()
	require.NoError(t, err, "Snapshot")
	applyInBatches(t, f, logs[50:], rng) // writes go on while the snapshot is persisted
	var sink memSink
	require.NoError(t, snap.Persist(&sink), "Persist")
	snap.Release()
	require.NotEqual(t, len(atSnapshot), len(dump(t, src)), "the later entries added no cell; the test cannot tell the views apart")

	dst := openStore(t)
	g := newFSM(t, dst)
	applyInBatches(t, g, randomLog(t, rand.New(rand.NewSource(99)), 10), rng) // data to be replaced
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))), "Restore")
	sameCells(t, dump(t, dst), atSnapshot)
	assert.Equal(t, uint64(50), g.Applied().Index, "applied after restore")
	// The restored replica continues the log exactly like the source.
	applyInBatches(t, g, logs[50:], rng)
	sameCells(t, dump(t, dst), dump(t, src))

	// A truncated snapshot is rejected and leaves the tables as they were.
	before := dump(t, dst)
	cut := sink.Bytes()[:sink.Len()-20]
	require.ErrorIs(t, g.Restore(io.NopCloser(bytes.NewReader(cut))), ErrBadSnapshot, "Restore(truncated)")
	sameCells(t, dump(t, dst), before)
}

// failingStore fails Begin while failures > 0 (fault injection by wrapping the interface).
type failingStore struct {
	Store
	failures atomic.Int32
}

func (s *failingStore) Begin(ctx context.Context) (*storage.WriteTx, error) {
	if s.failures.Add(-1) >= 0 {
		return nil, errors.New("injected: connection refused")
	}
	return s.Store.Begin(ctx)
}

func TestStoreFailures(t *testing.T) {
	t.Parallel()
	p := openStore(t)
	fs := &failingStore{Store: p}
	var fatal atomic.Value
	f, err := New(context.Background(), Config{Store: fs, StoreAttempts: 3, StoreBackoff: time.Millisecond, Logger: testLogger(t),
		OnFatal: func(err error) { fatal.Store(err) }})
	require.NoError(t, err, "New")
	b := body(t, `{"a":1}`)

	fs.failures.Store(2) // transient: the third attempt succeeds
	out := responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, 1, time.Now(), cell(8, 1, "BASE", 1, b))}))
	require.NoError(t, out[0].Err, "after 2 transient failures")
	require.Equal(t, cells.StatusCreated, out[0].writes()[0].Cells[0].Status, "after 2 transient failures: %+v", out[0])

	fs.failures.Store(100) // the store stays down
	out = responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, 2, time.Now(), cell(8, 2, "BASE", 1, b))}))
	require.ErrorIs(t, out[0].Err, ErrFailed, "store down")
	require.NotNil(t, fatal.Load(), "OnFatal not called after the store stayed down")
	require.Error(t, f.Failed(), "Failed() after the store stayed down")
	require.Equal(t, uint64(1), f.Applied().Index, "applied after a failed batch (never advance past what is stored)")
	fs.failures.Store(0)
	out = responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, 3, time.Now(), cell(8, 3, "BASE", 1, b))}))
	require.ErrorIs(t, out[0].Err, ErrFailed, "after failure the FSM applied again: %+v, want ErrFailed until restart", out[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.ErrorIs(t, f.WaitApplied(ctx, 3), ErrFailed, "WaitApplied on a failed FSM")
	// A restart over the same store resumes from what was stored.
	require.Equal(t, uint64(1), newFSM(t, p).Applied().Index, "applied after a restart")
}

func TestWaitApplied(t *testing.T) {
	t.Parallel()
	f := newFSM(t, openStore(t))
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(context.Background(), 2) }()
	f.ApplyBatch([]*raft.Log{cmdLog(t, 1, time.Now(), cell(8, 1, "BASE", 1, body(t, `{}`)))})
	require.Never(t, func() bool { return len(done) > 0 }, 50*time.Millisecond, 5*time.Millisecond, "WaitApplied(2) returned at applied 1")
	f.ApplyBatch([]*raft.Log{cmdLog(t, 2, time.Now(), cell(8, 2, "BASE", 1, body(t, `{}`)))})
	select {
	case err := <-done:
		require.NoError(t, err, "WaitApplied(2) at applied 2")
	case <-time.After(5 * time.Second):
		require.FailNow(t, "WaitApplied(2) did not return at applied 2")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, f.WaitApplied(ctx, 10), context.Canceled, "WaitApplied with a cancelled ctx")
}
