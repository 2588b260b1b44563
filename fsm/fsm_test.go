package fsm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/storage"
)

var testShards = storage.ShardRange{First: 8, Last: 11}

// openSQLite returns a fresh SQLite partition store for shards 8..11 of datastore "trips".
func openSQLite(t *testing.T) *storage.PartitionStore {
	t.Helper()
	st, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return openPartition(t, st)
}

func openPartition(t *testing.T, st *storage.Store) *storage.PartitionStore {
	t.Helper()
	p, err := st.Partition(context.Background(), storage.PartitionID{Datastore: "trips", Partition: 2}, testShards)
	if err != nil {
		t.Fatalf("Partition: %v", err)
	}
	return p
}

func newFSM(t *testing.T, s Store) *FSM {
	t.Helper()
	f, err := New(context.Background(), Config{Store: s, StoreBackoff: time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func body(t testing.TB, s string) cells.Body {
	t.Helper()
	b, err := cells.EncodeBody([]byte(s))
	if err != nil {
		t.Fatalf("EncodeBody(%s): %v", s, err)
	}
	return b
}

func rowKey(i int) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(i))) }

func cmdLog(t testing.TB, index uint64, at time.Time, cs ...CommandCell) *raft.Log {
	t.Helper()
	data, err := EncodeCommand(Command{CreatedAt: at, Cells: cs})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func cell(shard, row int, col string, ref int64, b cells.Body) CommandCell {
	return CommandCell{Shard: shard, Key: cells.Key{RowKey: rowKey(row), ColumnKey: col, RefKey: ref}, Body: b}
}

func responses(t *testing.T, out []interface{}) []*Response {
	t.Helper()
	rs := make([]*Response, len(out))
	for i, o := range out {
		r, ok := o.(*Response)
		if !ok {
			t.Fatalf("response %d is %T, want *Response", i, o)
		}
		rs[i] = r
	}
	return rs
}

func TestOutcomes(t *testing.T) {
	f := newFSM(t, openSQLite(t))
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
	for i, r := range out {
		if r.Err != nil {
			t.Fatalf("entry %d: %v", i, r.Err)
		}
		for j, c := range r.Cells {
			if c.Status != want[i][j] {
				t.Errorf("entry %d cell %d: status %v, want %v", i, j, c.Status, want[i][j])
			}
		}
	}
	// added_id is per shard, in log order; exists/conflict report the stored cell.
	ids := []int64{out[0].Cells[0].AddedID, out[0].Cells[1].AddedID, out[0].Cells[2].AddedID, out[0].Cells[3].AddedID, out[1].Cells[1].AddedID, out[1].Cells[2].AddedID}
	if want := []int64{1, 1, 1, 1, 2, 3}; !reflect.DeepEqual(ids, want) {
		t.Errorf("added_ids %v, want %v", ids, want)
	}
	if got := out[1].Cells[0].CreatedAt; !got.Equal(at) {
		t.Errorf("conflict reports created_at %v, want the stored cell's %v", got, at)
	}
	if got := out[1].Cells[1].CreatedAt; !got.Equal(at.Add(time.Second)) {
		t.Errorf("created_at %v, want the command's %v", got, at.Add(time.Second))
	}
	if got := f.Applied(); got.Index != 2 {
		t.Errorf("applied %v, want index 2", got)
	}
}

func TestBadCommandsAreValues(t *testing.T) {
	f := newFSM(t, openSQLite(t))
	out := responses(t, f.ApplyBatch([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte{99, 1, 2}},
		cmdLog(t, 2, time.Now(), cell(3, 1, "BASE", 1, body(t, `{}`))),
		cmdLog(t, 3, time.Now(), cell(10, 1, "BASE", 1, body(t, `{}`))),
		{Index: 4, Term: 1, Type: raft.LogConfiguration},
	}))
	if !errors.Is(out[0].Err, ErrBadCommand) {
		t.Errorf("undecodable entry: %v, want ErrBadCommand", out[0].Err)
	}
	if !errors.Is(out[1].Err, ErrShardOutOfRange) {
		t.Errorf("shard 3 outside 8..11: %v, want ErrShardOutOfRange", out[1].Err)
	}
	if out[2].Err != nil || len(out[2].Cells) != 1 || out[2].Cells[0].Status != cells.StatusCreated {
		t.Errorf("valid entry after bad ones: %+v", out[2])
	}
	if out[3].Err != nil || f.Applied().Index != 4 {
		t.Errorf("configuration entry: %+v, applied %v; want applied 4", out[3], f.Applied())
	}
}

// randomLog builds n command entries over a few keys, so keys collide within entries, within
// batches and across batches, with bodies that sometimes match and sometimes do not.
func randomLog(t testing.TB, rng *rand.Rand, n int) []*raft.Log {
	bodies := []cells.Body{body(t, `{"v":1}`), body(t, `{"v":2}`), body(t, `{"v":[1,{"x":"y"}]}`)}
	logs := make([]*raft.Log, n)
	base := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range logs {
		var cs []CommandCell
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
		if err != nil {
			t.Fatalf("ScanShard(%d): %v", s, err)
		}
		all = append(all, cs...)
	}
	return all
}

func sameCells(t *testing.T, got, want []cells.Cell) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d cells, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.AddedID != w.AddedID || !g.CreatedAt.Equal(w.CreatedAt) || !bytes.Equal(mustPacked(t, g.Body), mustPacked(t, w.Body)) {
			t.Fatalf("cell %d: got %v added_id %d at %v, want %v added_id %d at %v", i, g.Key, g.AddedID, g.CreatedAt, w.Key, w.AddedID, w.CreatedAt)
		}
	}
}

func mustPacked(t *testing.T, b cells.Body) []byte {
	t.Helper()
	p, err := b.Packed()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Two replicas fed the same log, in different batch splits, end with identical rows and
// identical results.
func TestDeterminism(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	logs := randomLog(t, rng, 300)
	pa, pb := openSQLite(t), openSQLite(t)
	ra := applyInBatches(t, newFSM(t, pa), logs, rng)
	rb := applyInBatches(t, newFSM(t, pb), logs, rng)
	if !reflect.DeepEqual(ra, rb) {
		t.Fatalf("seed %d: replicas answered differently", seed)
	}
	a, b := dump(t, pa), dump(t, pb)
	if len(a) == 0 {
		t.Fatal("no cells applied")
	}
	sameCells(t, a, b)
	// added_id is dense per shard: 1, 2, 3, ...
	stored := map[cells.Key]bool{}
	for _, c := range a {
		if stored[c.Key] {
			t.Fatalf("seed %d: key %v stored twice", seed, c.Key)
		}
		stored[c.Key] = true
	}
	prev := map[int]int64{}
	for s := testShards.First; s <= testShards.Last; s++ {
		cs, _ := pa.ScanShard(context.Background(), s, 0, 1<<30)
		for _, c := range cs {
			if c.AddedID != prev[s]+1 {
				t.Fatalf("seed %d: shard %d added_id %d after %d, want dense", seed, s, c.AddedID, prev[s])
			}
			prev[s] = c.AddedID
		}
	}
}

// A restarted replica skips what its store already applied.
func TestRestartSkipsApplied(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	logs := randomLog(t, rng, 60)
	p := openSQLite(t)
	f := newFSM(t, p)
	applyInBatches(t, f, logs[:40], rng)
	before := dump(t, p)

	f2 := newFSM(t, p) // the replica restarts over the same store
	if got := f2.Applied().Index; got != 40 {
		t.Fatalf("restarted FSM applied %d, want 40", got)
	}
	out := applyInBatches(t, f2, logs, rng) // raft replays from the start of its log
	for i, r := range out[:40] {
		if !errors.Is(r.Err, ErrAlreadyApplied) {
			t.Fatalf("replayed entry %d: %v, want ErrAlreadyApplied", i+1, r.Err)
		}
	}
	after := map[cells.Key]cells.Cell{}
	for _, c := range dump(t, p) {
		after[c.Key] = c
	}
	for _, c := range before {
		if a, ok := after[c.Key]; !ok || a.AddedID != c.AddedID || !a.CreatedAt.Equal(c.CreatedAt) {
			t.Fatalf("cell %v changed by the replay: got %+v, want %+v", c.Key, a, c)
		}
	}

	// The same log applied in one go on a fresh replica gives the same table.
	ref := openSQLite(t)
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
	rng := rand.New(rand.NewSource(11))
	logs := randomLog(t, rng, 80)
	src := openSQLite(t)
	f := newFSM(t, src)
	applyInBatches(t, f, logs[:50], rng)
	atSnapshot := dump(t, src)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	applyInBatches(t, f, logs[50:], rng) // writes go on while the snapshot is persisted
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if len(dump(t, src)) == len(atSnapshot) {
		t.Fatal("the later entries added no cell; the test cannot tell the views apart")
	}

	dst := openSQLite(t)
	g := newFSM(t, dst)
	applyInBatches(t, g, randomLog(t, rand.New(rand.NewSource(99)), 10), rng) // data to be replaced
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	sameCells(t, dump(t, dst), atSnapshot)
	if got := g.Applied().Index; got != 50 {
		t.Errorf("applied after restore %d, want 50", got)
	}
	// The restored replica continues the log exactly like the source.
	applyInBatches(t, g, logs[50:], rng)
	sameCells(t, dump(t, dst), dump(t, src))

	// A truncated snapshot is rejected and leaves the tables as they were.
	before := dump(t, dst)
	cut := sink.Bytes()[:sink.Len()-20]
	if err := g.Restore(io.NopCloser(bytes.NewReader(cut))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("Restore(truncated) = %v, want ErrBadSnapshot", err)
	}
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
	p := openSQLite(t)
	fs := &failingStore{Store: p}
	var fatal atomic.Value
	f, err := New(context.Background(), Config{Store: fs, StoreAttempts: 3, StoreBackoff: time.Millisecond, Logger: testLogger(t),
		OnFatal: func(err error) { fatal.Store(err) }})
	if err != nil {
		t.Fatal(err)
	}
	b := body(t, `{"a":1}`)

	fs.failures.Store(2) // transient: the third attempt succeeds
	out := responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, 1, time.Now(), cell(8, 1, "BASE", 1, b))}))
	if out[0].Err != nil || out[0].Cells[0].Status != cells.StatusCreated {
		t.Fatalf("after 2 transient failures: %+v, want created", out[0])
	}

	fs.failures.Store(100) // the store stays down
	out = responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, 2, time.Now(), cell(8, 2, "BASE", 1, b))}))
	if !errors.Is(out[0].Err, ErrFailed) {
		t.Fatalf("store down: %v, want ErrFailed", out[0].Err)
	}
	if fatal.Load() == nil || f.Failed() == nil {
		t.Fatal("OnFatal not called / Failed() nil after the store stayed down")
	}
	if got := f.Applied().Index; got != 1 {
		t.Fatalf("applied %d after a failed batch, want 1 (never advance past what is stored)", got)
	}
	fs.failures.Store(0)
	out = responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, 3, time.Now(), cell(8, 3, "BASE", 1, b))}))
	if !errors.Is(out[0].Err, ErrFailed) {
		t.Fatalf("after failure the FSM applied again: %+v, want ErrFailed until restart", out[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := f.WaitApplied(ctx, 3); !errors.Is(err, ErrFailed) {
		t.Fatalf("WaitApplied on a failed FSM = %v, want ErrFailed", err)
	}
	// A restart over the same store resumes from what was stored.
	if got := newFSM(t, p).Applied().Index; got != 1 {
		t.Fatalf("restarted applied %d, want 1", got)
	}
}

func TestWaitApplied(t *testing.T) {
	f := newFSM(t, openSQLite(t))
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(context.Background(), 2) }()
	f.ApplyBatch([]*raft.Log{cmdLog(t, 1, time.Now(), cell(8, 1, "BASE", 1, body(t, `{}`)))})
	select {
	case err := <-done:
		t.Fatalf("WaitApplied(2) returned %v at applied 1", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.ApplyBatch([]*raft.Log{cmdLog(t, 2, time.Now(), cell(8, 2, "BASE", 1, body(t, `{}`)))})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitApplied(2) did not return at applied 2")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.WaitApplied(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitApplied with a cancelled ctx = %v", err)
	}
}

func TestCommandRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	c := Command{CreatedAt: at, Cells: []CommandCell{cell(9, 5, "BASE", 7, body(t, `{"a":[1,2]}`)), cell(10, 6, "S", 0, body(t, `{}`))}}
	data, err := EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(at) || len(got.Cells) != 2 || got.Cells[0].Key != c.Cells[0].Key || got.Cells[1].Shard != 10 ||
		!bytes.Equal(got.Cells[0].Body, c.Cells[0].Body) {
		t.Fatalf("round trip: got %+v, want %+v", got, c)
	}
	if _, err := DecodeCommand(data[:len(data)-3]); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("truncated command: %v, want ErrBadCommand", err)
	}
}
