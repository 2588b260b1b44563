package triggers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const shards = 16

// written is an acknowledged cell.
type written struct {
	key     cells.Key
	shard   int
	addedID int64
}

// delivery is one handler call.
type delivery struct {
	worker  string
	shard   int
	addedID int64
	at      time.Time
}

// recorder records every handler call.
type recorder struct {
	mu    sync.Mutex
	calls []delivery
	seen  map[cells.Key]int
}

func newRecorder() *recorder { return &recorder{seen: map[cells.Key]int{}} }

func (r *recorder) handler(worker string) triggers.Handler {
	return func(ctx context.Context, c cells.Cell) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, delivery{worker: worker, shard: cells.ShardOf(c.RowKey, shards), addedID: c.AddedID, at: time.Now()})
		r.seen[c.Key]++
		return nil
	}
}

// missing returns the written cells not delivered yet.
func (r *recorder) missing(ws []written) []written {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []written
	for _, w := range ws {
		if r.seen[w.key] == 0 {
			out = append(out, w)
		}
	}
	return out
}

// duplicates counts deliveries beyond the first.
func (r *recorder) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.seen {
		n += c - 1
	}
	return n
}

// checkOrder checks that each worker saw each shard's cells in increasing added_id order, except
// where the shard came back to it after another worker held it (a rebalance restarts at the
// committed offset).
func (r *recorder) checkOrder(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	type ws struct {
		worker string
		shard  int
	}
	last := map[ws]int64{}
	owner := map[int]string{}
	for _, c := range r.calls {
		k := ws{c.worker, c.shard}
		if owner[c.shard] == c.worker {
			assert.Greater(t, c.addedID, last[k], "worker %s shard %d: added_id delivered after %d, want increasing", c.worker, c.shard, last[k])
		}
		owner[c.shard] = c.worker
		last[k] = c.addedID
	}
}

func newClient(t *testing.T, endpoints ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Endpoints: endpoints, Datastore: "trips", RequestTimeout: 3 * time.Second})
	require.NoError(t, err, "client.New")
	return cl
}

// write writes n cells of column col (bodies {"i": i, "fail": fail(i)}) and returns them.
func write(t *testing.T, cl *client.Client, col string, n int, fail func(int) bool) []written {
	t.Helper()
	ctx := context.Background()
	var out []written
	for i := 0; i < n; i += 50 {
		var batch []client.CellWrite
		for j := i; j < min(i+50, n); j++ {
			body, _ := json.Marshal(map[string]any{"i": j, "fail": fail != nil && fail(j)})
			batch = append(batch, client.CellWrite{Key: cells.Key{RowKey: uuid.New(), ColumnKey: col, RefKey: 1}, Body: body})
		}
		res, err := cl.PutCells(ctx, batch)
		require.NoError(t, err, "PutCells")
		for j, r := range res {
			out = append(out, written{key: batch[j].Key, shard: cells.ShardOf(batch[j].Key.RowKey, shards), addedID: r.AddedID})
		}
	}
	return out
}

// without returns the cells of ws whose index drop does not name.
func without(ws []written, drop func(i int) bool) []written {
	var out []written
	for i, w := range ws {
		if !drop(i) {
			out = append(out, w)
		}
	}
	return out
}

// waitParked waits up to 10s for group to hold n parked cells and returns its status.
func waitParked(t *testing.T, cl *client.Client, group string, n int) wire.GroupStatus {
	t.Helper()
	var st wire.GroupStatus
	require.Eventually(t, func() bool {
		var err error
		st, err = cl.GroupStatus(context.Background(), group)
		return err == nil && len(st.Parked) == n
	}, 10*time.Second, tick, "%d parked cells in group %s", n, group)
	return st
}

// tick is how often the tests' waits check their condition.
const tick = 20 * time.Millisecond

// failureCounts holds, per test (*testing.T), the count of its workers' log lines reporting a
// lost heartbeat or lease: the failures around which duplicates are allowed. Per test, so that
// tests running in parallel do not excuse each other's duplicates.
var failureCounts sync.Map

// failures returns t's count of heartbeat and lease failures.
func failures(t *testing.T) *atomic.Int64 {
	n, _ := failureCounts.LoadOrStore(t, new(atomic.Int64))
	return n.(*atomic.Int64)
}

// testLogger logs through t (dropping lines once t's cleanups ran), counting failures(t).
func testLogger(t *testing.T) *slog.Logger {
	w := tWriter{w: clustertest.NewTestWriter(t), failures: failures(t)}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct {
	w        *clustertest.TestWriter
	failures *atomic.Int64
}

func (w tWriter) Write(p []byte) (int, error) {
	line := string(p)
	if strings.Contains(line, "heartbeat failed") || strings.Contains(line, "lease expired") || strings.Contains(line, "commit fenced") {
		w.failures.Add(1)
	}
	return w.w.Write(p)
}

// sessionTimeout is long enough for heartbeats on a loaded 2-core machine running the race
// detector, short enough for the tests that wait for a session to expire.
const sessionTimeout = 3 * time.Second

// baseConfig is a worker's configuration over cl's HTTP API (no Source when cl is nil).
func baseConfig(t *testing.T, cl *client.Client, group, worker string) triggers.Config {
	var src triggers.Source
	if cl != nil {
		src = cl.TriggerSource()
	}
	return triggers.Config{Source: src, Group: group, Worker: worker, ColumnKey: "BASE", SessionTimeout: sessionTimeout,
		PollWait: 200 * time.Millisecond, BatchSize: 20, Backoff: time.Millisecond, BackoffMax: 5 * time.Millisecond, Logger: testLogger(t)}
}

// gather sums each metric family of reg over its series.
func gather(t require.TestingT, reg *prometheus.Registry) map[string]float64 {
	fams, err := reg.Gather()
	require.NoError(t, err, "gather the metrics")
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out[f.GetName()] += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[f.GetName()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// runWorker runs a worker until the returned stop is called (or t ends); stop returns Run's
// error.
func runWorker(t *testing.T, cfg triggers.Config, h triggers.Handler) (stop func() error) {
	stop, _ = runWorkerDone(t, cfg, h)
	return stop
}

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// runWorkerDone is runWorker that also returns a channel receiving Run's error when Run
// returns on its own.
func runWorkerDone(t *testing.T, cfg triggers.Config, h triggers.Handler) (stop func() error, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a test that failed before stop leaves no worker behind
	ch := make(chan error, 1)
	var once sync.Once
	var err error
	go func() { ch <- triggers.Run(ctx, cfg, h) }()
	return func() error {
		cancel()
		once.Do(func() { err = <-ch })
		return err
	}, ch
}

// Every acknowledged BASE cell is delivered, other columns are not, per-shard order holds, and
// a worker joining later takes over shards without losing any.
func TestDeliversInOrderAcrossRebalance(t *testing.T) {
	t.Parallel()
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) { testDeliversInOrderAcrossRebalance(t, engine) })
	}
}

// testDeliversInOrderAcrossRebalance runs on one engine; in async mode the shard logs are the
// masters' tables, read by every node, with added_id assigned on the master.
func testDeliversInOrderAcrossRebalance(t *testing.T, engine clustertest.Engine) {
	c := clustertest.Start(t, clustertest.Options{Shards: shards, Engine: engine})
	cl := newClient(t, c.URLs()...)
	rec := newRecorder()
	before := write(t, cl, "BASE", 200, nil)
	other := write(t, cl, "STATUS", 50, nil)
	reg := prometheus.NewRegistry()
	cfgA := baseConfig(t, cl, "g1", "a")
	cfgA.Registerer = reg
	var acceptedMu sync.Mutex
	accepted := map[int]int64{} // shard -> highest offset a's commits had accepted (OnCommit)
	cfgA.OnCommit = func(shard int, offset int64) {
		acceptedMu.Lock()
		accepted[shard] = max(accepted[shard], offset)
		acceptedMu.Unlock()
	}
	stopA := runWorker(t, cfgA, rec.handler("a"))
	require.Eventually(t, func() bool { return len(rec.missing(before)) == 0 }, 60*time.Second, tick, "the first 200 cells delivered")
	stopB := runWorker(t, baseConfig(t, cl, "g1", "b"), rec.handler("b"))
	after := write(t, cl, "BASE", 300, nil)
	all := append(before, after...)
	require.Eventually(t, func() bool { return len(rec.missing(all)) == 0 }, 60*time.Second, tick, "every BASE cell delivered")
	// Both workers own shards once the group rebalanced.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := cl.GroupStatus(context.Background(), "g1")
		require.NoError(c, err, "GroupStatus")
		require.Len(c, st.Members, 2, "members")
		assert.Equal(c, shards/2, st.Members[0].Shards, "member %s: shards", st.Members[0].ID)
		assert.Equal(c, shards/2, st.Members[1].Shards, "member %s: shards", st.Members[1].ID)
	}, 40*time.Second, tick, "a balanced group: two members, half the shards each")
	more := write(t, cl, "BASE", 100, nil)
	all = append(all, more...)
	require.Eventually(t, func() bool { return len(rec.missing(all)) == 0 }, 60*time.Second, tick, "the last cells delivered")
	// a's metrics: its deliveries counted, and once caught up no lag on the shards it owns.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := gather(c, reg)
		assert.Equal(c, float64(shards/2), m["schemaless_triggers_owned_shards"], "owned shards")
		assert.Zero(c, m["schemaless_triggers_lag_seconds"], "lag seconds")
		assert.LessOrEqual(c, m["schemaless_triggers_lag_cells"], 0.0, "lag cells")
	}, 20*time.Second, tick, "a's gauges: half the shards owned, no lag")
	rec.mu.Lock()
	aCalls := 0
	for _, d := range rec.calls {
		if d.worker == "a" {
			aCalls++
		}
	}
	rec.mu.Unlock()
	assert.Equal(t, float64(aCalls), gather(t, reg)["schemaless_triggers_delivered_total"],
		"schemaless_triggers_delivered_total: want a's handler calls")
	assert.NoError(t, stopA(), "worker a: Run")
	assert.NoError(t, stopB(), "worker b: Run")
	rec.mu.Lock()
	for _, o := range other {
		assert.Zero(t, rec.seen[o.key], "STATUS cell %s delivered to a BASE group", o.key)
	}
	byWorker := map[string]int{}
	for _, d := range rec.calls {
		byWorker[d.worker]++
	}
	rec.mu.Unlock()
	assert.Positive(t, byWorker["b"], "cells delivered by worker b: want it to take over shards")
	rec.checkOrder(t)
	// With clean hand-overs (revoke, commit, release) nothing is delivered twice, unless a
	// heartbeat failed (the machine too loaded to answer within the session).
	d, f := rec.duplicates(), failures(t).Load()
	t.Logf("%d duplicate deliveries, %d heartbeat or lease failures", d, f)
	if f == 0 {
		assert.Zero(t, d, "duplicate deliveries with no heartbeat or lease failure")
	}
	// Offsets reached every shard's last BASE cell.
	st, err := cl.GroupStatus(context.Background(), "g1")
	require.NoError(t, err, "GroupStatus")
	lastBase := map[int]int64{}
	for _, w := range all {
		lastBase[w.shard] = max(lastBase[w.shard], w.addedID)
	}
	for _, s := range st.Shards {
		assert.GreaterOrEqual(t, s.Offset, lastBase[s.Shard], "shard %d: committed offset, want at least its last BASE cell", s.Shard)
	}
	// Every commit OnCommit reported as accepted holds: no offset is below it.
	acceptedMu.Lock()
	assert.NotEmpty(t, accepted, "worker a's accepted commits (OnCommit)")
	for _, s := range st.Shards {
		assert.GreaterOrEqual(t, s.Offset, accepted[s.Shard], "shard %d: committed offset, want at least what a's commits had accepted", s.Shard)
	}
	acceptedMu.Unlock()
	assert.Empty(t, st.Members, "members after both workers left")
}

// A worker whose process dies mid-batch (its connections cut, no leave) loses its shards after
// the session timeout; the other worker delivers every cell after the dead one's last commit:
// no cell is skipped, and duplicates are only cells the dead worker handled but had not
// committed.
func TestWorkerKilledMidBatch(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	px := newProxy(t, strings.TrimPrefix(c.URL(0), "http://"))
	rec := newRecorder()
	var handled sync.WaitGroup
	handled.Add(1)
	var once sync.Once
	block := make(chan struct{})
	aHandler := rec.handler("a")
	// a handles 100 cells, then hangs in the handler (mid-batch) until its "process" dies.
	var n int
	var nmu sync.Mutex
	killed := func(ctx context.Context, cell cells.Cell) error {
		nmu.Lock()
		n++
		k := n
		nmu.Unlock()
		if k > 100 {
			once.Do(handled.Done)
			select {
			case <-block:
			case <-ctx.Done():
			}
			return errors.New("process died")
		}
		return aHandler(ctx, cell)
	}
	cfgA := baseConfig(t, newClient(t, px.URL()), "g2", "a")
	cfgA.MaxAttempts = 1
	stopA := runWorker(t, cfgA, killed)
	cells1 := write(t, cl, "BASE", 400, nil)
	handled.Wait()
	px.Cut() // the process is gone: no heartbeat, no commit, no leave
	stopB := runWorker(t, baseConfig(t, cl, "g2", "b"), rec.handler("b"))
	start := time.Now()
	require.Eventually(t, func() bool { return len(rec.missing(cells1)) == 0 }, 60*time.Second, tick, "b delivers every cell")
	t.Logf("every cell delivered %s after the kill; %d duplicates", time.Since(start), rec.duplicates())
	close(block)
	_ = stopA()
	assert.NoError(t, stopB(), "worker b: Run")
	rec.checkOrder(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k, n := range rec.seen {
		assert.LessOrEqual(t, n, 2, "cell %s: deliveries, want at most 2 (once by each worker)", k)
	}
}

// A paused owner (its heartbeats and its handler stuck past the session) loses its shards to
// another worker under a higher lease epoch. When it wakes it cannot commit (fenced) and does
// not deliver past its lease: every cell it delivers after waking is beyond the offset the new
// owner had committed, i.e. it comes from a fresh grant, not from its old batch.
func TestPausedOwnerFenced(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	px := newProxy(t, strings.TrimPrefix(c.URL(0), "http://"))
	rec := newRecorder()
	paused := make(chan struct{})
	wake := make(chan struct{})
	var pauseOnce sync.Once
	var woke time.Time
	var wmu sync.Mutex
	aHandler := rec.handler("a")
	var count int
	cfgA := baseConfig(t, newClient(t, px.URL()), "g3", "a")
	cfgA.Concurrency = 1
	stopA := runWorker(t, cfgA, func(ctx context.Context, cell cells.Cell) error {
		wmu.Lock()
		count++
		k := count
		wmu.Unlock()
		if k == 30 {
			pauseOnce.Do(func() { close(paused) })
			<-wake // the whole process stops here: the proxy is cut meanwhile
		}
		return aHandler(ctx, cell)
	})
	ws := write(t, cl, "BASE", 300, nil)
	select {
	case <-paused:
	case <-time.After(60 * time.Second):
		close(wake)
		require.FailNow(t, "worker a did not reach its 30th cell within 60s")
	}
	px.Cut()
	stopB := runWorker(t, baseConfig(t, cl, "g3", "b"), rec.handler("b"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := cl.GroupStatus(context.Background(), "g3")
		require.NoError(c, err, "GroupStatus")
		require.Len(c, st.Members, 1, "members")
		assert.Equal(c, "b", st.Members[0].ID, "the member")
		assert.Equal(c, shards, st.Members[0].Shards, "its shards")
	}, 40*time.Second, tick, "b the only member, owning every shard")
	require.Eventually(t, func() bool { return len(rec.missing(ws)) == 0 }, 60*time.Second, tick, "b delivers every cell")
	st, err := cl.GroupStatus(context.Background(), "g3")
	require.NoError(t, err, "GroupStatus")
	committed := map[int]int64{}
	for _, s := range st.Shards {
		committed[s.Shard] = s.Offset
	}
	wmu.Lock()
	woke = time.Now()
	wmu.Unlock()
	px.Restore()
	close(wake)
	// a rejoins and, once b releases them, owns half the shards again under new epochs.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := cl.GroupStatus(context.Background(), "g3")
		require.NoError(c, err, "GroupStatus")
		require.Len(c, st.Members, 2, "members")
		assert.Equal(c, shards/2, st.Members[0].Shards, "member %s: shards", st.Members[0].ID)
	}, 40*time.Second, tick, "a rejoins: two members, half the shards each")
	more := write(t, cl, "BASE", 100, nil)
	require.Eventually(t, func() bool { return len(rec.missing(append(ws, more...))) == 0 }, 60*time.Second, tick, "the new cells delivered")
	_ = stopA()
	_ = stopB()
	st2, err := cl.GroupStatus(context.Background(), "g3")
	require.NoError(t, err, "GroupStatus")
	for _, s := range st2.Shards {
		assert.GreaterOrEqual(t, s.Offset, committed[s.Shard], "shard %d: offset went back (a stale commit was accepted)", s.Shard)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var late []delivery
	for _, d := range rec.calls {
		if d.worker == "a" && d.at.After(woke) && d.addedID <= committed[d.shard] {
			late = append(late, d)
		}
	}
	// The cell a was handling when paused completes when it wakes: that one call is allowed.
	assert.LessOrEqual(t, len(late), 1, "cells worker a delivered after waking at or below b's committed offsets, want at most the one in hand: %+v", late)
}

// Cells whose handler keeps failing are parked and the shard moves on; retry redelivers them;
// the group halts at the threshold and drop un-halts it.
func TestParkRetryHalt(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	failing := map[int]bool{}
	for len(failing) < 2 {
		failing[rng.IntN(60)] = true
	}
	rec := newRecorder()
	var healed sync.Mutex
	fixed := false
	h := func(ctx context.Context, cell cells.Cell) error {
		obj, err := cell.Body.Object()
		if err != nil {
			return err
		}
		healed.Lock()
		ok := fixed
		healed.Unlock()
		if obj["fail"] == true && !ok {
			return fmt.Errorf("cannot bill cell %v", obj["i"])
		}
		return rec.handler("a")(ctx, cell)
	}
	cfg := baseConfig(t, cl, "g4", "a")
	cfg.MaxAttempts = 3
	cfg.HaltThreshold = 4
	_, done := runWorkerDone(t, cfg, h)
	ws := write(t, cl, "BASE", 60, func(i int) bool { return failing[i] })
	good := without(ws, func(i int) bool { return failing[i] })
	require.Eventually(t, func() bool { return len(rec.missing(good)) == 0 }, 60*time.Second, tick, "the good cells delivered")
	st := waitParked(t, cl, "g4", 2)
	assert.False(t, st.Halted, "halted with 2 parked cells and threshold 4")
	for _, p := range st.Parked {
		assert.Equal(t, 3, p.Attempts, "parked cell %+v: attempts", p)
		assert.Contains(t, p.Error, "cannot bill", "parked cell %+v: want the handler's error", p)
	}
	// Fix the handler and retry: both are delivered and resolved.
	healed.Lock()
	fixed = true
	healed.Unlock()
	res, err := cl.GroupCommand(ctx, "g4", client.GroupRetry, wire.GroupCommand{All: true})
	require.NoError(t, err, "retry all")
	require.EqualValues(t, 2, res.Affected, "retry all: parked cells affected")
	require.Eventually(t, func() bool { return len(rec.missing(ws)) == 0 }, 40*time.Second, tick, "the retried cells delivered")
	require.Eventually(t, func() bool {
		st, err := cl.GroupStatus(ctx, "g4")
		return err == nil && len(st.Parked) == 0
	}, 10*time.Second, tick, "no parked cell left")
	// Break it again: 4 failing cells halt the group.
	healed.Lock()
	fixed = false
	healed.Unlock()
	write(t, cl, "BASE", 4, func(int) bool { return true })
	select {
	case err := <-done:
		assert.ErrorIs(t, err, triggers.ErrHalted, "Run after 4 parked cells")
	case <-time.After(30 * time.Second):
		require.FailNow(t, "Run did not return within 30s after the group halted")
	}
	st, err = cl.GroupStatus(ctx, "g4")
	require.NoError(t, err, "GroupStatus after 4 failures")
	require.True(t, st.Halted, "after 4 failures: want the group halted")
	require.Len(t, st.Parked, 4, "after 4 failures: parked cells")
	// A new worker of a halted group stops at once.
	assert.ErrorIs(t, triggers.Run(ctx, cfg, h), triggers.ErrHalted, "Run on a halted group")
	res, err = cl.GroupCommand(ctx, "g4", client.GroupDrop, wire.GroupCommand{All: true})
	require.NoError(t, err, "drop all")
	require.EqualValues(t, 4, res.Affected, "drop all: parked cells affected")
	require.False(t, res.Halted, "drop all: want the group no longer halted")
}

// Start positions: latest skips the cells stored before the group existed; timestamp starts
// at the first cell created at or after it.
func TestStartPositions(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	old := write(t, cl, "BASE", 50, nil)
	// Time passing is what is tested: the old cells are created before mark, the mid ones
	// after it, with a margin for the nodes' clocks read at different moments.
	time.Sleep(50 * time.Millisecond)
	mark := time.Now()
	time.Sleep(50 * time.Millisecond)
	mid := write(t, cl, "BASE", 50, nil)

	for _, tc := range []struct {
		name  string
		start string
		want  []written
		not   []written
	}{
		{"earliest", triggers.StartEarliest, append(append([]written{}, old...), mid...), nil},
		{"timestamp", triggers.StartTimestamp, mid, old},
	} {
		rec := newRecorder()
		cfg := baseConfig(t, cl, "start-"+tc.name, "a")
		cfg.Start, cfg.StartTime = tc.start, mark
		stop := runWorker(t, cfg, rec.handler("a"))
		require.Eventually(t, func() bool { return len(rec.missing(tc.want)) == 0 }, 60*time.Second, tick, "%s: the cells from the start delivered", tc.name)
		_ = stop()
		assert.Zero(t, len(tc.not)-len(rec.missing(tc.not)), "%s: cells from before the start delivered", tc.name)
	}
	// latest: a group created now sees only cells written after its shards were handed out.
	rec := newRecorder()
	cfg := baseConfig(t, cl, "start-latest", "a")
	cfg.Start = triggers.StartLatest
	stop := runWorker(t, cfg, rec.handler("a"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := cl.GroupStatus(context.Background(), "start-latest")
		require.NoError(c, err, "GroupStatus")
		require.Len(c, st.Shards, shards, "shards")
		for _, s := range st.Shards {
			assert.GreaterOrEqual(c, s.Offset, int64(0), "shard %d: offset", s.Shard)
		}
	}, 40*time.Second, tick, "the group owns every shard, each with its start offset set")
	fresh := write(t, cl, "BASE", 40, nil)
	require.Eventually(t, func() bool { return len(rec.missing(fresh)) == 0 }, 60*time.Second, tick, "cells after latest delivered")
	_ = stop()
	assert.Zero(t, len(old)+len(mid)-len(rec.missing(append(append([]written{}, old...), mid...))), "latest: old cells delivered")
}
