package jepsen

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// A synthetic triggers run on one shard: cells of column EV at added_ids 1, 2, 4, 5 and a cell
// of column OT at 3. Cell "d" (5) was written with an indeterminate outcome; cell "f" only by a
// write that certainly failed (never stored); cell "x" of EV never written by anyone.
func trigOps() []Op {
	put := func(row, col, body string, outcome Outcome) Op {
		return Op{Workload: "triggers", F: "put", RowKey: row, ColumnKey: col, RefKey: 1, Body: body, Outcome: outcome}
	}
	return []Op{
		put("a", "EV", `{"v":1}`, OK),
		put("b", "EV", `{"v":2}`, OK),
		put("o", "OT", `{"v":3}`, OK),
		put("c", "EV", `{"v":4}`, OK),
		put("d", "EV", `{"v":5}`, Info),
		put("f", "EV", `{"v":6}`, Fail),
		{Workload: "durability", F: "put", RowKey: "x", ColumnKey: "EV", RefKey: 1, Body: `{"v":7}`, Outcome: OK},
	}
}

func trigStored() []StoredCell {
	return []StoredCell{
		{Shard: 0, RowKey: "a", ColumnKey: "EV", RefKey: 1, Body: `{"v":1}`, AddedID: 1},
		{Shard: 0, RowKey: "b", ColumnKey: "EV", RefKey: 1, Body: `{"v":2}`, AddedID: 2},
		{Shard: 0, RowKey: "o", ColumnKey: "OT", RefKey: 1, Body: `{"v":3}`, AddedID: 3},
		{Shard: 0, RowKey: "c", ColumnKey: "EV", RefKey: 1, Body: `{"v":4}`, AddedID: 4},
		{Shard: 0, RowKey: "d", ColumnKey: "EV", RefKey: 1, Body: `{"v":5}`, AddedID: 5},
		{Shard: 0, RowKey: "x", ColumnKey: "EV", RefKey: 1, Body: `{"v":7}`, AddedID: 6},
	}
}

// dl is a delivery of a cell of trigStored at time t (any unit: only the order matters).
func dl(lease int, t int64, row string) Delivery {
	for _, c := range trigStored() {
		if c.RowKey == row {
			return Delivery{Shard: c.Shard, AddedID: c.AddedID, RowKey: row, Column: c.ColumnKey, RefKey: 1, Body: c.Body, Lease: lease, Time: t}
		}
	}
	if row == "f" {
		return Delivery{Shard: 0, AddedID: 9, RowKey: "f", Column: "EV", RefKey: 1, Body: `{"v":6}`, Lease: lease, Time: t}
	}
	panic("no cell " + row)
}

// cleanLogs deliver every stored EV cell: w1 delivers a and b, is paused, w2 takes the shard
// over from the committed offset (after a) and delivers b again, c and d; w1 gets the shard
// back in a new lease and delivers b again (a rewind), then w2's last cell... and so on.
func cleanLogs() map[string][]Delivery {
	return map[string][]Delivery{
		"w1.1": {dl(1, 10, "a"), dl(1, 20, "b"), dl(2, 60, "c"), dl(2, 70, "d")},
		"w2.1": {dl(1, 30, "b"), dl(1, 40, "c"), dl(1, 50, "d")},
		// A second lease of the same process with nobody in between: a heartbeat failed past
		// the lease's local deadline, the worker dropped the shard and got it back at the
		// committed offset (after a).
		"w3.1": {dl(1, 80, "a"), dl(1, 81, "b"), dl(2, 90, "b"), dl(2, 91, "c")},
	}
}

// cm is a commit of offset in shard 0 accepted at time t (DeliveryLog.Commit's line).
func cm(t, offset int64) Delivery {
	return Delivery{Shard: 0, AddedID: offset, Committed: true, Time: t}
}

func TestCheckTriggersClean(t *testing.T) {
	t.Parallel()
	logs := cleanLogs()
	logs["w3.1"] = nil // delivered nothing
	// w1's commit of a (offset 1) was accepted before w2 took the shard over at b, w2's of a
	// before w1 got it back at b: every lease starts after the offsets accepted before it.
	logs["w1.1"] = []Delivery{dl(1, 10, "a"), cm(15, 1), dl(1, 20, "b"), dl(2, 60, "b"), dl(2, 70, "c")}
	logs["w2.1"] = append(logs["w2.1"], cm(55, 1))
	res := CheckTriggers(trigOps(), logs, trigStored(), "EV")
	require.True(t, res.Valid, "a clean run: got invalid %+v", res)
	want := TriggersResult{Acknowledged: 3, Indeterminate: 1, Failed: 1, Recovered: 1, OtherWritten: 1, Delivered: 7,
		Distinct: 4, Duplicates: 3, Incarnations: 3, Leases: 3, LeaseChanges: 1, Rewinds: 1, Commits: 2, Valid: true}
	assert.Equal(t, want, res, "a clean run's result")
}

// A decrease within one incarnation across a lease change is allowed even when no other worker
// delivered the shard in between (a worker that dropped its shards after failed heartbeats and
// got them back at the committed offset): the rule "only across a rebalance" would flag it.
func TestCheckTriggersRewindWithoutRebalance(t *testing.T) {
	t.Parallel()
	logs := map[string][]Delivery{"w3.1": {dl(1, 80, "a"), dl(1, 81, "b"), dl(2, 90, "b"), dl(2, 91, "c"), dl(2, 92, "d")}}
	res := CheckTriggers(trigOps(), logs, trigStored(), "EV")
	assert.True(t, res.Valid, "valid (%+v)", res)
	assert.Equal(t, 1, res.Rewinds, "rewinds (%+v)", res)
	assert.Equal(t, 1, res.Duplicates, "duplicates (%+v)", res)
}

func TestCheckTriggersCatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		logs   map[string][]Delivery
		stored []StoredCell
		check  func(TriggersResult) (int, string)
	}{
		{"an acknowledged cell never delivered", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "b")}, // c never
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Lost), "lost" }},
		{"an acknowledged cell never delivered, no log read back", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "c")},
		}, nil, func(r TriggersResult) (int, string) { return len(r.Lost), "lost" }},
		{"out of order within a lease", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "c"), dl(1, 30, "b")},
		}, nil, func(r TriggersResult) (int, string) { return len(r.OrderViolations), "order violations" }},
		{"the same cell twice within a lease", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "b"), dl(1, 25, "b"), dl(1, 30, "c")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.OrderViolations), "order violations" }},
		// Another worker delivered the shard between the two deliveries, which the rule "a
		// decrease only across a rebalance" would accept; within one lease it is a violation.
		{"a decrease within one lease, with another worker's delivery in between", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "c"), dl(1, 40, "b")},
			"w2.1": {dl(1, 30, "b"), dl(1, 31, "c")},
		}, nil, func(r TriggersResult) (int, string) { return len(r.OrderViolations), "order violations" }},
		{"a cell of the other column", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "b"), dl(1, 25, "o"), dl(1, 30, "c")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Unexpected), "unexpected" }},
		{"a cell nobody wrote in this workload", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "b"), dl(1, 30, "c"), dl(1, 40, "d"), dl(1, 50, "x")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Unexpected), "unexpected" }},
		{"a cell only a failed write produced", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "b"), dl(1, 30, "c"), dl(2, 40, "f")},
		}, nil, func(r TriggersResult) (int, string) { return len(r.Unexpected), "unexpected" }},
		{"a body never written", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), func() Delivery { d := dl(1, 20, "b"); d.Body = `{"v":99}`; return d }(), dl(1, 30, "c")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Unexpected), "unexpected" }},
		{"delivered at another added_id than stored", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), func() Delivery { d := dl(1, 20, "b"); d.AddedID = 3; return d }(), dl(1, 30, "c")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Unexpected), "unexpected" }},
		{"a cell skipped within a lease (delivered later by another worker)", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "c")},
			"w2.1": {dl(1, 30, "b"), dl(1, 40, "c")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Skipped), "skipped" }},
		{"a lease that starts past everything delivered", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a")},
			"w2.1": {dl(1, 30, "c"), dl(1, 40, "d")},
			"w3.1": {dl(1, 50, "b")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Skipped), "skipped" }},
		// The commit of b (offset 2) was accepted before w2's lease began, which starts at b
		// again: the coordinator lost the commit.
		{"a lease that starts at an offset committed before it", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "b"), cm(25, 2)},
			"w2.1": {dl(1, 30, "b"), dl(1, 40, "c"), dl(1, 50, "d")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.LostCommits), "lost commits" }},
		{"a lease that starts below an offset committed before it, no log read back", map[string][]Delivery{
			"w1.1": {dl(1, 10, "a"), dl(1, 20, "b"), dl(1, 22, "c"), cm(25, 4)},
			"w2.1": {dl(1, 30, "b"), dl(1, 40, "c"), dl(1, 50, "d")},
		}, nil, func(r TriggersResult) (int, string) { return len(r.LostCommits), "lost commits" }},
		{"the first lease ever starts past the first cell", map[string][]Delivery{
			"w1.1": {dl(1, 10, "b"), dl(1, 20, "c")},
			"w2.1": {dl(1, 30, "a")},
		}, trigStored(), func(r TriggersResult) (int, string) { return len(r.Skipped), "skipped" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := CheckTriggers(trigOps(), tc.logs, tc.stored, "EV")
			n, what := tc.check(res)
			assert.NotZero(t, n, "%s (%+v)", what, res)
			assert.False(t, res.Valid, "valid (%+v)", res)
		})
	}
}

// Every delivery in a new ownership period: the worker cannot tell periods apart, and the check
// must say it cannot decide rather than pass.
func TestCheckTriggersLeaseTrackingBroken(t *testing.T) {
	t.Parallel()
	var ops []Op
	var stored []StoredCell
	var ds []Delivery
	for i := 1; i <= minDeliveriesForLeaseCheck; i++ {
		row := fmt.Sprintf("r%d", i)
		ops = append(ops, Op{Workload: "triggers", F: "put", RowKey: row, ColumnKey: "EV", RefKey: 1, Body: `{}`, Outcome: OK})
		stored = append(stored, StoredCell{RowKey: row, ColumnKey: "EV", RefKey: 1, Body: `{}`, AddedID: int64(i)})
		ds = append(ds, Delivery{RowKey: row, Column: "EV", RefKey: 1, AddedID: int64(i), Body: `{}`, Lease: i, Time: int64(i)})
	}
	res := CheckTriggers(ops, map[string][]Delivery{"w1.1": ds}, stored, "EV")
	require.False(t, res.Valid, "a new lease per delivery: valid")
	require.NotEmpty(t, res.Undecided, "a new lease per delivery: want the check undecided")
	for i := range ds {
		ds[i].Lease = 1
	}
	res = CheckTriggers(ops, map[string][]Delivery{"w1.1": ds}, stored, "EV")
	assert.True(t, res.Valid, "one lease: got invalid %+v", res)
}

func TestReadDeliveries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("w1.1.jsonl", `{"worker":"w1-1","shard":2,"added_id":7,"row_key":"a","column":"EV","ref_key":1,"lease":1,"time":5}`+"\n"+
		`{"worker":"w1-1","shard":2,"added_id":9,"row_key":"b","column":"EV","ref_key":1,"lease":1,"time":6}`+"\n"+`{"worker":"w1-1","sh`)
	write("w2.1.jsonl", "")
	write("w1.log", "not a delivery file")
	logs, torn, err := ReadDeliveries(dir)
	require.NoError(t, err)
	require.Len(t, logs, 2, "files read (%v)", logs)
	require.Contains(t, logs, "w2.1", "files read")
	require.Empty(t, logs["w2.1"], "deliveries of w2.1")
	require.Len(t, logs["w1.1"], 2, "deliveries of w1.1")
	require.Equal(t, 1, torn, "torn last lines")
	d := logs["w1.1"][1]
	assert.Equal(t, [4]any{int64(9), "b", 2, 1}, [4]any{d.AddedID, d.RowKey, d.Shard, d.Lease}, "added_id, row, shard and lease of w1.1's second delivery")
	write("w3.1.jsonl", "{\"worker\":\ngarbage\n")
	_, _, err = ReadDeliveries(dir)
	assert.Error(t, err, "a bad line before the last")
}

// DeliveryLog writes one line per cell with the cell's shard, and starts a new lease number
// when the handler's context changes (a new ownership period).
func TestDeliveryLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "w1.1.jsonl")
	l, err := OpenDeliveryLog(path, "w1-1", 8)
	require.NoError(t, err)
	row := uuid.MustParse("0b3e3c4e-6f6a-4f5e-9d55-0f4bb1a1d2c3")
	body, err := cells.EncodeBody([]byte(`{"v":1}`))
	require.NoError(t, err)
	cell := func(id int64) cells.Cell {
		return cells.Cell{Key: cells.Key{RowKey: row, ColumnKey: "EV", RefKey: 1}, Body: body, AddedID: id}
	}
	lease1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	lease2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	for _, step := range []struct {
		ctx context.Context
		id  int64
	}{{lease1, 1}, {lease1, 2}, {lease2, 2}, {lease2, 3}} {
		if step.ctx == lease2 {
			cancel1()
		}
		require.NoError(t, l.Handle(step.ctx, cell(step.id)), "Handle of added_id %d", step.id)
	}
	require.NoError(t, l.Close())
	ds, cut, err := readDeliveryFile(path)
	require.NoError(t, err, "read back")
	require.False(t, cut, "read back: last line cut")
	want := []struct {
		id    int64
		lease int
	}{{1, 1}, {2, 1}, {2, 2}, {3, 2}}
	require.Len(t, ds, len(want), "lines")
	for i, d := range ds {
		assert.Equal(t, Delivery{Worker: "w1-1", Shard: cells.ShardOf(row, 8), AddedID: want[i].id, RowKey: row.String(), Column: "EV",
			RefKey: 1, Body: `{"v":1}`, Lease: want[i].lease, Time: d.Time}, d, "line %d", i)
		assert.NotZero(t, d.Time, "line %d: time", i)
	}
}

// fakeProcs records what the worker nemeses do.
type fakeProcs struct {
	mu                               sync.Mutex
	kills, restarts, pauses, resumes int
	heals                            int
	paused                           bool
}

func (f *fakeProcs) Kill(rng *rand.Rand) (string, string, func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kills++
	return "w1", "killed", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.restarts++
		return nil
	}, nil
}

func (f *fakeProcs) Pause(rng *rand.Rand) (string, string, func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauses++
	f.paused = true
	return "w2", "paused", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.resumes++
		f.paused = false
		return nil
	}, nil
}

func (f *fakeProcs) Heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heals++
	return nil
}

func (f *fakeProcs) Timescale() time.Duration { return 20 * time.Millisecond }

// The worker nemeses kill and pause processes, end every fault they start (restart, resume),
// hold pauses for [1/2, 5/2) timescales, and heal at the end; without processes they are
// dropped.
func TestWorkerNemesis(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := NemesisConfig{Kinds: []string{KillWorker, PauseWorker}, Interval: 5 * time.Millisecond, FaultDuration: 5 * time.Millisecond}
	fp := &fakeProcs{}
	var log strings.Builder
	n := NewNemesis(cfg, &Cluster{}, nil, NewHistory(nil), seed, &log, quiet)
	n.SetProcesses(fp)
	// The nemesis runs on the wall clock: 1.5s of it, time for dozens of faults.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	n.Run(ctx)
	cancel()
	require.NotZero(t, fp.kills, "kills")
	require.NotZero(t, fp.pauses, "pauses")
	require.Equal(t, fp.kills, fp.restarts, "restarts: want every kill ended")
	require.Equal(t, fp.pauses, fp.resumes, "resumes: want every pause ended")
	require.False(t, fp.paused, "a worker left paused")
	require.Equal(t, 1, fp.heals, "heals")
	faults := n.Faults()
	for i, f := range faults {
		require.Contains(t, []string{KillWorker, PauseWorker}, f.Kind, "fault %+v: want a worker fault", f)
		require.NotZero(t, f.End, "fault %+v: want it ended", f)
		held := time.Duration(f.End - f.Start)
		if f.Kind == PauseWorker && i < len(faults)-1 { // the last one is cut short by the end
			require.GreaterOrEqual(t, held, 10*time.Millisecond, "a pause held, want at least half the timescale")
		}
	}
	require.Contains(t, log.String(), `"event":"heal"`, "no heal in the nemesis log")

	// Without processes the worker kinds are dropped: no fault at all.
	n = NewNemesis(cfg, &Cluster{}, nil, NewHistory(nil), seed, nil, quiet)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	n.Run(ctx)
	cancel()
	assert.Empty(t, n.Faults(), "no processes: faults")
}
