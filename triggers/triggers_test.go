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
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/triggers"
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
		if owner[c.shard] == c.worker && c.addedID <= last[k] {
			t.Errorf("worker %s shard %d: delivered added_id %d after %d, want increasing", c.worker, c.shard, c.addedID, last[k])
		}
		owner[c.shard] = c.worker
		last[k] = c.addedID
	}
}

func newClient(t *testing.T, endpoints ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Endpoints: endpoints, Datastore: "trips", RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Fatalf("PutCells: %v", err)
		}
		for j, r := range res {
			out = append(out, written{key: batch[j].Key, shard: cells.ShardOf(batch[j].Key.RowKey, shards), addedID: r.AddedID})
		}
	}
	return out
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failures counts the workers' log lines reporting a lost heartbeat or lease: the failures
// around which duplicates are allowed.
var failures atomic.Int64

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	if strings.Contains(line, "heartbeat failed") || strings.Contains(line, "lease expired") || strings.Contains(line, "commit fenced") {
		failures.Add(1)
	}
	w.t.Log(line)
	return len(p), nil
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
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
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

// runWorker runs a worker until the returned stop is called; stop returns Run's error.
func runWorker(cfg triggers.Config, h triggers.Handler) (stop func() error) {
	stop, _ = runWorkerDone(cfg, h)
	return stop
}

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// runWorkerDone is runWorker that also returns a channel receiving Run's error when Run
// returns on its own.
func runWorkerDone(cfg triggers.Config, h triggers.Handler) (stop func() error, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
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
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Async} {
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
	stopA := runWorker(cfgA, rec.handler("a"))
	waitFor(t, "the first 200 cells", 60*time.Second, func() bool { return len(rec.missing(before)) == 0 })
	stopB := runWorker(baseConfig(t, cl, "g1", "b"), rec.handler("b"))
	after := write(t, cl, "BASE", 300, nil)
	all := append(before, after...)
	waitFor(t, "every BASE cell", 60*time.Second, func() bool { return len(rec.missing(all)) == 0 })
	// Both workers own shards once the group rebalanced.
	waitFor(t, "a balanced group", 40*time.Second, func() bool {
		st, err := cl.GroupStatus(context.Background(), "g1")
		return err == nil && len(st.Members) == 2 && st.Members[0].Shards == shards/2 && st.Members[1].Shards == shards/2
	})
	more := write(t, cl, "BASE", 100, nil)
	all = append(all, more...)
	waitFor(t, "the last cells", 60*time.Second, func() bool { return len(rec.missing(all)) == 0 })
	// a's metrics: its deliveries counted, and once caught up no lag on the shards it owns.
	waitFor(t, "a's lag gauges at 0", 20*time.Second, func() bool {
		m := gather(t, reg)
		return m["schemaless_triggers_owned_shards"] == shards/2 && m["schemaless_triggers_lag_seconds"] == 0 && m["schemaless_triggers_lag_cells"] <= 0
	})
	rec.mu.Lock()
	aCalls := 0
	for _, d := range rec.calls {
		if d.worker == "a" {
			aCalls++
		}
	}
	rec.mu.Unlock()
	if got := gather(t, reg)["schemaless_triggers_delivered_total"]; got != float64(aCalls) {
		t.Errorf("schemaless_triggers_delivered_total: got %v, want %d (a's handler calls)", got, aCalls)
	}
	if err := stopA(); err != nil {
		t.Errorf("worker a: Run returned %v, want nil", err)
	}
	if err := stopB(); err != nil {
		t.Errorf("worker b: Run returned %v, want nil", err)
	}
	rec.mu.Lock()
	for _, o := range other {
		if rec.seen[o.key] > 0 {
			t.Errorf("STATUS cell %s delivered to a BASE group", o.key)
		}
	}
	byWorker := map[string]int{}
	for _, d := range rec.calls {
		byWorker[d.worker]++
	}
	rec.mu.Unlock()
	if byWorker["b"] == 0 {
		t.Errorf("worker b delivered nothing; want it to take over shards")
	}
	rec.checkOrder(t)
	// With clean hand-overs (revoke, commit, release) nothing is delivered twice, unless a
	// heartbeat failed (the machine too loaded to answer within the session).
	if d, f := rec.duplicates(), failures.Load(); d != 0 && f == 0 {
		t.Errorf("got %d duplicate deliveries with no failure, want 0", d)
	} else {
		t.Logf("%d duplicate deliveries, %d heartbeat or lease failures", d, f)
	}
	// Offsets reached every shard's last BASE cell.
	st, err := cl.GroupStatus(context.Background(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	lastBase := map[int]int64{}
	for _, w := range all {
		lastBase[w.shard] = max(lastBase[w.shard], w.addedID)
	}
	for _, s := range st.Shards {
		if s.Offset < lastBase[s.Shard] {
			t.Errorf("shard %d: committed offset %d, want at least %d", s.Shard, s.Offset, lastBase[s.Shard])
		}
	}
	if len(st.Members) != 0 {
		t.Errorf("after both workers left: got %d members, want 0", len(st.Members))
	}
}

// A worker whose process dies mid-batch (its connections cut, no leave) loses its shards after
// the session timeout; the other worker delivers every cell after the dead one's last commit:
// no cell is skipped, and duplicates are only cells the dead worker handled but had not
// committed.
func TestWorkerKilledMidBatch(t *testing.T) {
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
	stopA := runWorker(cfgA, killed)
	cells1 := write(t, cl, "BASE", 400, nil)
	handled.Wait()
	px.Cut() // the process is gone: no heartbeat, no commit, no leave
	stopB := runWorker(baseConfig(t, cl, "g2", "b"), rec.handler("b"))
	start := time.Now()
	waitFor(t, "b to deliver every cell", 60*time.Second, func() bool { return len(rec.missing(cells1)) == 0 })
	t.Logf("every cell delivered %s after the kill; %d duplicates", time.Since(start), rec.duplicates())
	close(block)
	_ = stopA()
	if err := stopB(); err != nil {
		t.Errorf("worker b: %v", err)
	}
	rec.checkOrder(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k, n := range rec.seen {
		if n > 2 {
			t.Errorf("cell %s delivered %d times, want at most 2 (once by each worker)", k, n)
		}
	}
}

// A paused owner (its heartbeats and its handler stuck past the session) loses its shards to
// another worker under a higher lease epoch. When it wakes it cannot commit (fenced) and does
// not deliver past its lease: every cell it delivers after waking is beyond the offset the new
// owner had committed, i.e. it comes from a fresh grant, not from its old batch.
func TestPausedOwnerFenced(t *testing.T) {
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
	stopA := runWorker(cfgA, func(ctx context.Context, cell cells.Cell) error {
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
	<-paused
	px.Cut()
	stopB := runWorker(baseConfig(t, cl, "g3", "b"), rec.handler("b"))
	waitFor(t, "b to take every shard", 40*time.Second, func() bool {
		st, err := cl.GroupStatus(context.Background(), "g3")
		return err == nil && len(st.Members) == 1 && st.Members[0].ID == "b" && st.Members[0].Shards == shards
	})
	waitFor(t, "b to deliver every cell", 60*time.Second, func() bool { return len(rec.missing(ws)) == 0 })
	st, err := cl.GroupStatus(context.Background(), "g3")
	if err != nil {
		t.Fatal(err)
	}
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
	waitFor(t, "a to rejoin", 40*time.Second, func() bool {
		st, err := cl.GroupStatus(context.Background(), "g3")
		return err == nil && len(st.Members) == 2 && st.Members[0].Shards == shards/2
	})
	more := write(t, cl, "BASE", 100, nil)
	waitFor(t, "the new cells", 60*time.Second, func() bool { return len(rec.missing(append(ws, more...))) == 0 })
	_ = stopA()
	_ = stopB()
	st2, err := cl.GroupStatus(context.Background(), "g3")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st2.Shards {
		if s.Offset < committed[s.Shard] {
			t.Errorf("shard %d: offset went back from %d to %d (a stale commit was accepted)", s.Shard, committed[s.Shard], s.Offset)
		}
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
	if len(late) > 1 {
		t.Errorf("worker a delivered %d cells after waking at or below b's committed offsets, want at most the one in hand: %+v", len(late), late)
	}
}

// Cells whose handler keeps failing are parked and the shard moves on; retry redelivers them;
// the group halts at the threshold and drop un-halts it.
func TestParkRetryHalt(t *testing.T) {
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
	_, done := runWorkerDone(cfg, h)
	ws := write(t, cl, "BASE", 60, func(i int) bool { return failing[i] })
	var good []written
	for i, w := range ws {
		if !failing[i] {
			good = append(good, w)
		}
	}
	waitFor(t, "the good cells", 60*time.Second, func() bool { return len(rec.missing(good)) == 0 })
	var st wire.GroupStatus
	waitFor(t, "2 parked cells", 10*time.Second, func() bool {
		var err error
		st, err = cl.GroupStatus(ctx, "g4")
		return err == nil && len(st.Parked) == 2
	})
	if st.Halted {
		t.Errorf("halted with 2 parked cells and threshold 4")
	}
	for _, p := range st.Parked {
		if p.Attempts != 3 || !strings.Contains(p.Error, "cannot bill") {
			t.Errorf("parked cell %+v: want 3 attempts and the handler's error", p)
		}
	}
	// Fix the handler and retry: both are delivered and resolved.
	healed.Lock()
	fixed = true
	healed.Unlock()
	res, err := cl.GroupCommand(ctx, "g4", client.GroupRetry, wire.GroupCommand{All: true})
	if err != nil || res.Affected != 2 {
		t.Fatalf("retry all: got %+v, %v, want 2 affected", res, err)
	}
	waitFor(t, "the retried cells", 40*time.Second, func() bool { return len(rec.missing(ws)) == 0 })
	waitFor(t, "no parked cell", 10*time.Second, func() bool {
		st, err := cl.GroupStatus(ctx, "g4")
		return err == nil && len(st.Parked) == 0
	})
	// Break it again: 4 failing cells halt the group.
	healed.Lock()
	fixed = false
	healed.Unlock()
	write(t, cl, "BASE", 4, func(int) bool { return true })
	select {
	case err := <-done:
		if !errors.Is(err, triggers.ErrHalted) {
			t.Errorf("Run after 4 parked cells: got %v, want ErrHalted", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the group halted")
	}
	st, err = cl.GroupStatus(ctx, "g4")
	if err != nil || !st.Halted || len(st.Parked) != 4 {
		t.Fatalf("after 4 failures: got halted %v with %d parked (%v), want halted with 4", st.Halted, len(st.Parked), err)
	}
	// A new worker of a halted group stops at once.
	if err := triggers.Run(ctx, cfg, h); !errors.Is(err, triggers.ErrHalted) {
		t.Errorf("Run on a halted group: got %v, want ErrHalted", err)
	}
	res, err = cl.GroupCommand(ctx, "g4", client.GroupDrop, wire.GroupCommand{All: true})
	if err != nil || res.Affected != 4 || res.Halted {
		t.Fatalf("drop all: got %+v, %v, want 4 affected and not halted", res, err)
	}
}

// Start positions: latest skips the cells stored before the group existed; timestamp starts
// at the first cell created at or after it.
func TestStartPositions(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	old := write(t, cl, "BASE", 50, nil)
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
		stop := runWorker(cfg, rec.handler("a"))
		waitFor(t, tc.name+" cells", 60*time.Second, func() bool { return len(rec.missing(tc.want)) == 0 })
		_ = stop()
		if n := len(tc.not) - len(rec.missing(tc.not)); n != 0 {
			t.Errorf("%s: %d cells from before the start delivered, want 0", tc.name, n)
		}
	}
	// latest: a group created now sees only cells written after its shards were handed out.
	rec := newRecorder()
	cfg := baseConfig(t, cl, "start-latest", "a")
	cfg.Start = triggers.StartLatest
	stop := runWorker(cfg, rec.handler("a"))
	waitFor(t, "the group to own every shard", 40*time.Second, func() bool {
		st, err := cl.GroupStatus(context.Background(), "start-latest")
		if err != nil || len(st.Shards) != shards {
			return false
		}
		for _, s := range st.Shards {
			if s.Offset < 0 {
				return false
			}
		}
		return true
	})
	fresh := write(t, cl, "BASE", 40, nil)
	waitFor(t, "cells after latest", 60*time.Second, func() bool { return len(rec.missing(fresh)) == 0 })
	_ = stop()
	if n := len(old) + len(mid) - len(rec.missing(append(append([]written{}, old...), mid...))); n != 0 {
		t.Errorf("latest: %d old cells delivered, want 0", n)
	}
}
