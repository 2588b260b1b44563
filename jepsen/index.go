package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// IndexWorkload checks a secondary index (package indexes, maintained by the index maintainer
// every node runs) under faults. At setup it defines index Index on column Column of datastore
// Datastore, fields k (string, the shard field), n (int) and w (string), and waits until the
// version is ready. Its workers write cells {"k", "n", "w"}: rows of 1 to MaxCellsPerRow cells
// with increasing ref keys, k drawn from ShardValues k0..k7 with a skew towards k0, n a counter
// unique per cell (so increasing within a row), w the worker; a later cell changes its row's k
// with probability ChangeProbability (a violation of the immutable shard field). With
// probability QueryProbability a step is an index query instead. After the traffic stops and the
// replicas have converged, Check waits (up to CatchUpBound from the traffic's end) for the
// index's lag to reach 0, reads every entry under every shard value, reads the stored cells,
// and runs CheckIndex.
type IndexWorkload struct {
	// Datastore, with Shards shards in Partitions partitions, holds the cells and the index.
	Datastore          string
	Shards, Partitions int
	// Index names the index; Column is its source column.
	Index, Column string
	// ShardValues are the k values, drawn with weights ShardWeights (same length).
	ShardValues  []string
	ShardWeights []int
	// MaxBatch bounds the cells of one put_cells (each of another row); MaxCellsPerRow the
	// cells of a row.
	MaxBatch, MaxCellsPerRow int
	// ChangeProbability is the chance that a cell after the first changes its row's k.
	ChangeProbability float64
	// QueryProbability is the chance that a step is an index query (order_by -n, QueryLimit
	// entries) rather than a write.
	QueryProbability float64
	QueryLimit       int
	// PageLimit is the page size of the full read after the catch-up.
	PageLimit int
	// ReadyTimeout bounds the wait at setup for the index version to be ready; CatchUpBound
	// the time from the traffic's end to lag 0 (the wait and rule 4 of CheckIndex). LagPoll is
	// the period at which the index's lag is read, from setup to the check (strong reads of
	// its status, kept in index-lag.jsonl): the catch-up time is that of the first read after
	// the traffic's end that finds lag 0, whatever the other workloads do meanwhile.
	ReadyTimeout, CatchUpBound, LagPoll time.Duration

	n       atomic.Int64 // the last n handed out
	version int          // the version defined at setup
	cl      *client.Client
	mon     *indexLagMonitor

	mu    sync.Mutex
	state map[int]*indexWriter // by worker process
}

// indexWriter is one worker's rows in progress.
type indexWriter struct {
	id   string
	open []*indexRowInProgress
}

// indexRowInProgress is a row being written: its key, its first cell's k, the next ref key and
// the cells left to write.
type indexRowInProgress struct {
	key  uuid.UUID
	k    string
	next int64
	left int
}

// NewIndexWorkload returns the workload with its defaults: datastore "idx" of 8 shards in 2
// partitions, index "jepsen_idx" on column IDX, shard values k0 to k7 weighted 40, 20, 12, 9, 7,
// 5, 4, 3, batches of 1 to 4 cells, rows of 1 to 4 cells, 5% of later cells changing k, 5% of
// steps queries of 50 entries, pages of 1,000 for the full read, a 60 s ready timeout, a 60 s
// catch-up bound and the lag read every 250 ms.
func NewIndexWorkload() *IndexWorkload {
	return &IndexWorkload{Datastore: "idx", Shards: 8, Partitions: 2, Index: "jepsen_idx", Column: "IDX",
		ShardValues:  []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"},
		ShardWeights: []int{40, 20, 12, 9, 7, 5, 4, 3},
		MaxBatch:     4, MaxCellsPerRow: 4, ChangeProbability: 0.05, QueryProbability: 0.05, QueryLimit: 50,
		PageLimit: 1000, ReadyTimeout: time.Minute, CatchUpBound: time.Minute, LagPoll: 250 * time.Millisecond,
		state: map[int]*indexWriter{}}
}

var (
	_ SetupWorkload = (*IndexWorkload)(nil)
	_ BusyWorkload  = (*IndexWorkload)(nil)
)

// Name implements Workload.
func (w *IndexWorkload) Name() string { return "index" }

// Datastores implements Workload.
func (w *IndexWorkload) Datastores() []topology.DatastoreSpec {
	return []topology.DatastoreSpec{{Name: w.Datastore, Mode: topology.ModeRaft, Shards: w.Shards, PartitionCount: w.Partitions}}
}

// BusyDatastores implements BusyWorkload: the maintainers of every node heartbeat in their
// consumer group of the index's datastore for as long as the nodes run.
func (w *IndexWorkload) BusyDatastores() []string { return []string{w.Datastore} }

// Definition is the index's definition, in YAML.
func (w *IndexWorkload) Definition() []byte {
	return fmt.Appendf(nil, `table: %s
column_defs:
  - column_key: %s
    fields:
      - { field: k, type: string }
      - { field: n, type: int }
      - { field: w, type: string }
`, w.Index, w.Column)
}

// Setup implements SetupWorkload: it defines the index and waits, up to ReadyTimeout, until
// the version defined is ready.
func (w *IndexWorkload) Setup(ctx context.Context, env *StartEnv) error {
	var err error
	if w.cl, err = env.client(w.Datastore); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.ReadyTimeout)
	defer cancel()
	var def wire.IndexDefineResult
	for {
		if def, err = w.cl.DefineIndex(ctx, w.Definition()); err == nil {
			break
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return fmt.Errorf("jepsen: define index %s: %w", w.Index, err)
		}
	}
	w.version = def.Version
	env.Logger.Info("jepsen: index defined", "index", w.Index, "version", def.Version, "state", def.State)
	last := def.State
	for last != wire.IndexReady {
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return fmt.Errorf("jepsen: index %s version %d not ready within %s (last: %s)", w.Index, w.version, w.ReadyTimeout, last)
		}
		st, err := w.cl.Index(ctx, w.Index, client.WithConsistency(client.ConsistencyStrong))
		if err != nil {
			last = err.Error()
			continue
		}
		if vs, ok := versionStatus(st, w.version); ok {
			last = vs.State
		}
	}
	env.Logger.Info("jepsen: index ready", "index", w.Index, "version", w.version)
	w.mon = w.startLagMonitor(env.History, filepath.Join(env.Dir, "index-lag.jsonl"))
	return nil
}

// Stop implements SetupWorkload: it stops the lag monitor (and writes its samples).
func (w *IndexWorkload) Stop() {
	if w.mon != nil {
		w.mon.stop()
	}
}

// lag reads the lag of the workload's index version with a strong read: the cells not yet
// handled by its maintainers (-1 and the reason when it cannot be read).
func (w *IndexWorkload) lag(ctx context.Context) (int64, string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := w.cl.Index(rctx, w.Index, client.WithConsistency(client.ConsistencyStrong))
	vs, found := versionStatus(st, w.version)
	switch {
	case err != nil:
		return -1, err.Error()
	case !found:
		return -1, fmt.Sprintf("no version %d", w.version)
	case vs.Error != "":
		return -1, vs.Error
	}
	return vs.LagCells, ""
}

// indexLagMonitor reads an index's lag every period, on the history's clock, until stopped.
type indexLagMonitor struct {
	cancel context.CancelFunc
	done   chan struct{}
	path   string

	mu      sync.Mutex
	samples []lagSample
	written bool
}

func (w *IndexWorkload) startLagMonitor(h *History, path string) *indexLagMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &indexLagMonitor{cancel: cancel, done: make(chan struct{}), path: path}
	go func() {
		defer close(m.done)
		t := time.NewTicker(w.LagPoll)
		defer t.Stop()
		for {
			lag, why := w.lag(ctx)
			if ctx.Err() != nil {
				return
			}
			m.mu.Lock()
			m.samples = append(m.samples, lagSample{At: h.Now(), Lag: lag, Err: why})
			m.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// caughtUp returns the time of the first sample at or after end with lag 0 (ok false: none
// yet) and the highest lag sampled before end.
func (m *indexLagMonitor) caughtUp(end int64) (at int64, ok bool, maxLag int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.samples {
		if s.At < end {
			maxLag = max(maxLag, s.Lag)
			continue
		}
		if s.Lag == 0 && !ok {
			at, ok = s.At, true
		}
	}
	return at, ok, maxLag
}

// last describes the last sample.
func (m *indexLagMonitor) last() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return "no read yet"
	}
	s := m.samples[len(m.samples)-1]
	if s.Err != "" {
		return s.Err
	}
	return fmt.Sprintf("lag %d cells", s.Lag)
}

// stop ends the sampling and writes the samples (JSON lines) the first time. It is safe to
// call more than once.
func (m *indexLagMonitor) stop() {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written || m.path == "" {
		return
	}
	m.written = true
	var b []byte
	for _, s := range m.samples {
		line, _ := json.Marshal(s)
		b = append(append(b, line...), '\n')
	}
	_ = os.WriteFile(m.path, b, 0o644)
}

// versionStatus finds version in st.
func versionStatus(st wire.IndexStatus, version int) (wire.IndexVersionStatus, bool) {
	for _, vs := range st.Versions {
		if vs.Version == version {
			return vs, true
		}
	}
	return wire.IndexVersionStatus{}, false
}

// writer returns worker wk's rows in progress.
func (w *IndexWorkload) writer(wk *Worker) *indexWriter {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state[wk.Process]
	if st == nil {
		st = &indexWriter{id: fmt.Sprintf("p%d", wk.Process)}
		w.state[wk.Process] = st
	}
	return st
}

// shardValue draws a k with the weights.
func (w *IndexWorkload) shardValue(wk *Worker) string {
	total := 0
	for _, x := range w.ShardWeights {
		total += x
	}
	r := wk.Rand.IntN(total)
	for i, x := range w.ShardWeights {
		if r < x {
			return w.ShardValues[i]
		}
		r -= x
	}
	return w.ShardValues[len(w.ShardValues)-1]
}

// Step implements Workload: with probability QueryProbability a query, else one put_cells of
// 1 to MaxBatch cells, each the next cell of another of the worker's rows in progress (a new
// row when the slot is free), recorded as one operation per cell sharing the call's times and
// outcome. A row's next cell is written whatever the outcome of the previous one.
func (w *IndexWorkload) Step(ctx context.Context, wk *Worker) {
	if wk.Rand.Float64() < w.QueryProbability {
		w.query(ctx, wk)
		return
	}
	st := w.writer(wk)
	for len(st.open) < w.MaxBatch {
		st.open = append(st.open, nil)
	}
	batch := 1 + wk.Rand.IntN(w.MaxBatch)
	slots := wk.Rand.Perm(len(st.open))[:batch]
	writes := make([]client.CellWrite, batch)
	ops := make([]Op, batch)
	for i, s := range slots {
		row := st.open[s]
		if row == nil {
			var b [16]byte
			for j := range b {
				b[j] = byte(wk.Rand.Uint32())
			}
			row = &indexRowInProgress{key: uuid.NewSHA1(uuid.NameSpaceOID, b[:]), k: w.shardValue(wk), next: 1,
				left: 1 + wk.Rand.IntN(w.MaxCellsPerRow)}
			st.open[s] = row
		}
		k := row.k
		if row.next > 1 && wk.Rand.Float64() < w.ChangeProbability {
			for k == row.k {
				k = w.ShardValues[wk.Rand.IntN(len(w.ShardValues))]
			}
		}
		body := fmt.Sprintf(`{"k":%q,"n":%d,"w":%q}`, k, w.n.Add(1), st.id)
		writes[i] = client.CellWrite{Key: cells.Key{RowKey: row.key, ColumnKey: w.Column, RefKey: row.next}, Body: json.RawMessage(body)}
		ops[i] = Op{Process: wk.Process, Node: wk.Node.ID, Workload: "index", F: "put", RowKey: row.key.String(),
			ColumnKey: w.Column, RefKey: row.next, Body: body}
		row.next++
		if row.left--; row.left == 0 {
			st.open[s] = nil
		}
	}
	putAndRecord(ctx, wk, w.Datastore, writes, ops)
}

// query runs one index query as worker wk: the QueryLimit entries of a random shard value with
// the highest n, with the worker's read consistency. An error is a failed read (allowed under
// faults); an answer is recorded in the operation's Extra (IndexQueryRecord).
func (w *IndexWorkload) query(ctx context.Context, wk *Worker) {
	h := wk.History
	sv := w.ShardValues[wk.Rand.IntN(len(w.ShardValues))]
	op := h.Invoke(Op{Process: wk.Process, Node: wk.Node.ID, Workload: "index", F: "query", ColumnKey: w.Column, Consistency: wk.Consistency})
	ctx, cancel := context.WithTimeout(ctx, wk.OpTimeout)
	defer cancel()
	res, err := wk.Client.WithDatastore(w.Datastore).QueryIndex(ctx, w.Index,
		wire.IndexQuery{ShardValue: sv, OrderBy: "-n", Limit: w.QueryLimit}, client.WithConsistency(wk.Consistency))
	if err != nil {
		op.Outcome, op.Error = Fail, err.Error()
		h.Complete(op)
		return
	}
	rec := IndexQueryRecord{ShardValue: sv, Entries: make([]IndexedEntry, len(res.Entries))}
	for i, e := range res.Entries {
		rec.Entries[i] = toIndexedEntry(sv, e)
	}
	op.Outcome = OK
	op.Extra, _ = json.Marshal(rec)
	h.Complete(op)
}

// toIndexedEntry reads an answered entry's fields k, n and w.
func toIndexedEntry(sv string, e wire.IndexEntry) IndexedEntry {
	out := IndexedEntry{ShardValue: sv, RowKey: e.RowKey, Violation: e.Violation}
	var bad []string
	if k, ok := e.Fields["k"].(string); ok {
		out.K = k
	} else {
		bad = append(bad, fmt.Sprintf("k is %#v", e.Fields["k"]))
	}
	switch n := e.Fields["n"].(type) {
	case json.Number:
		v, err := n.Int64()
		if err != nil {
			bad = append(bad, fmt.Sprintf("n is %s", n))
		}
		out.N = v
	case float64:
		out.N = int64(n)
		if float64(out.N) != n {
			bad = append(bad, fmt.Sprintf("n is %v", n))
		}
	default:
		bad = append(bad, fmt.Sprintf("n is %#v", e.Fields["n"]))
	}
	if s, ok := e.Fields["w"].(string); ok {
		out.W = s
	} else {
		bad = append(bad, fmt.Sprintf("w is %#v", e.Fields["w"]))
	}
	if len(bad) > 0 {
		out.Bad = fmt.Sprint(bad)
	}
	return out
}

// readIndex reads every entry of the workload's index version under every shard value, every
// page (ordered by row key), with cl and opts.
func (w *IndexWorkload) readIndex(ctx context.Context, cl *client.Client, opts ...client.ReadOption) ([]IndexedEntry, error) {
	out := []IndexedEntry{}
	for _, sv := range w.ShardValues {
		q := wire.IndexQuery{ShardValue: sv, Limit: w.PageLimit, Version: w.version}
		for {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			res, err := cl.QueryIndex(rctx, w.Index, q, opts...)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("query shard value %s after %q: %w", sv, q.Cursor, err)
			}
			for _, e := range res.Entries {
				out = append(out, toIndexedEntry(sv, e))
			}
			if res.NextCursor == "" {
				break
			}
			q.Cursor = res.NextCursor
		}
	}
	return out, nil
}

// Check implements Workload: wait for the index to catch up (rule 4; the lag monitor's first
// read of lag 0 after the traffic's end), read it whole with strong
// reads, read the stored cells of every replica (which must agree), read the index from each
// node's own replica (stale reads, once every replica has applied what its leader committed),
// which must equal the strong read, and run CheckIndex.
func (w *IndexWorkload) Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	v := Verdict{Workload: w.Name()}
	var problems []string
	in := IndexCheckInput{Ops: ops, Bound: w.CatchUpBound}
	if w.cl == nil || w.mon == nil {
		v.Valid = "no"
		v.Violations = append(v.Violations, "the index was never set up")
		return v
	}
	// The wait ends CatchUpBound after the traffic's end, but lasts at least 10 s (a slow
	// convergence is reported on its own).
	deadline := max(env.End+int64(w.CatchUpBound), env.History.Now()+int64(10*time.Second))
	for {
		at, ok, maxLag := w.mon.caughtUp(env.End)
		in.MaxLag = maxLag
		if ok {
			in.CaughtUp, in.CatchUp = true, time.Duration(at-env.End)
			break
		}
		if env.History.Now() >= deadline || !sleepCtx(ctx, w.LagPoll) {
			in.CatchUp = time.Duration(env.History.Now() - env.End)
			problems = append(problems, "the index's lag did not reach 0 (last: "+w.mon.last()+")")
			break
		}
	}
	w.mon.stop()
	entries, err := w.readIndex(ctx, w.cl, client.WithConsistency(client.ConsistencyStrong))
	if err != nil {
		problems = append(problems, "reading the index: "+err.Error())
	} else {
		in.Entries = entries
	}
	replicas, err := env.Cluster.ReadBack(ctx, w.Datastore)
	if err != nil {
		problems = append(problems, fmt.Sprintf("reading back datastore %s: %v", w.Datastore, err))
	} else {
		shardReps := env.Cluster.ShardReplicas(w.Datastore)
		problems = append(problems, CompareReplicas(replicas, shardReps)...)
		in.Stored = []StoredCell{}
		for s := 0; s < w.Shards; s++ {
			for _, c := range replicas[firstReplicaOf(shardReps, s)] {
				if c.Shard == s && c.ColumnKey == w.Column {
					in.Stored = append(in.Stored, c)
				}
			}
		}
	}
	if in.Entries != nil {
		problems = append(problems, w.compareIndexReplicas(ctx, env.Cluster, in.Entries)...)
	}
	res := CheckIndex(in)
	res.Problems = append(res.Problems, problems...)
	res.Valid = res.Valid && len(problems) == 0
	v.Details = res
	if res.Valid {
		v.Valid = "yes"
		return v
	}
	v.Valid = "no"
	for _, list := range []struct {
		what string
		ps   []IndexProblem
	}{{"lost rows", res.Lost}, {"stale entries", res.Stale}, {"unexpected entries", res.Unexpected}, {"invented entries", res.Invented},
		{"duplicated rows", res.Duplicated}, {"misplaced entries", res.Misplaced}, {"wrong violation marks", res.Marks},
		{"entries that differ from the stored cells", res.Diverged}} {
		if len(list.ps) > 0 {
			v.Violations = append(v.Violations, fmt.Sprintf("%d %s, first: %s", len(list.ps), list.what, list.ps[0]))
		}
	}
	if res.Late != "" {
		v.Violations = append(v.Violations, res.Late)
	}
	v.Violations = append(v.Violations, res.Problems...)
	return v
}

// compareIndexReplicas reads the index from every node with stale reads (each node answers
// from its own replica of the index tables) once every replica of the datastore has applied
// what its leader had committed, and reports each node whose entries differ from want (the
// strong read, made before).
func (w *IndexWorkload) compareIndexReplicas(ctx context.Context, c *Cluster, want []IndexedEntry) []string {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := c.WaitApplied(cctx, w.Datastore)
	cancel()
	if err != nil {
		return []string{"comparing the index's replicas: " + err.Error()}
	}
	key := func(e IndexedEntry) string { return e.ShardValue + "/" + e.RowKey }
	wantBy := map[string]IndexedEntry{}
	for _, e := range want {
		wantBy[key(e)] = e
	}
	var out []string
	for _, n := range c.Nodes {
		cfg := c.ClientConfig()
		cfg.Endpoints, cfg.Datastore, cfg.RequestTimeout, cfg.MaxAttempts = []string{n.URL()}, w.Datastore, 30*time.Second, 2
		cl, err := client.New(cfg)
		if err != nil {
			return append(out, err.Error())
		}
		got, err := w.readIndex(ctx, cl, client.WithConsistency(client.ConsistencyStale))
		if err != nil {
			out = append(out, fmt.Sprintf("reading the index from %s: %v", n.ID, err))
			continue
		}
		var diffs []string
		gotBy := map[string]bool{}
		for _, e := range got {
			gotBy[key(e)] = true
			if we, ok := wantBy[key(e)]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s has %s, absent from the strong read", e.RowKey, e))
			} else if we != e {
				diffs = append(diffs, fmt.Sprintf("%s has %s, the strong read %s", e.RowKey, e, we))
			}
		}
		for _, e := range want {
			if !gotBy[key(e)] {
				diffs = append(diffs, fmt.Sprintf("%s lacks %s", e.RowKey, e))
			}
		}
		if len(diffs) > 0 {
			out = append(out, fmt.Sprintf("the index replica of %s differs from the strong read in %d entries, first: %s", n.ID, len(diffs), diffs[0]))
		}
	}
	return out
}
