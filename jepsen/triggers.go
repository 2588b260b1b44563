package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
)

// TriggersWorkload checks consumer-group delivery (package triggers) under faults: every
// acknowledged cell of a column is delivered at least once, in added_id order per shard, and
// nothing else is delivered. Its client workers write new cells (put_cells of 1 to MaxBatch
// cells, each of Column or, with probability OtherProbability, of OtherColumn); Workers trigger
// worker processes (`schemaless jepsen trigger-worker`, see RunTriggerWorker) consume Column as
// members of Group and record every delivery in a file of their own, which the worker nemeses
// kill and pause. After the run it waits for the group's lag to reach 0, stops the workers and
// checks their files (CheckTriggers).
type TriggersWorkload struct {
	// Datastore, with Shards shards in Partitions partitions, holds the cells and the group.
	Datastore          string
	Shards, Partitions int
	// Group consumes Column; OtherColumn is written too and must never be delivered.
	Group, Column, OtherColumn string
	// Workers is the number of trigger worker processes.
	Workers int
	// MaxBatch bounds the cells of one put_cells; OtherProbability is the share of cells of
	// OtherColumn.
	MaxBatch         int
	OtherProbability float64
	// SessionTimeout is the workers' group session (and the worker nemeses' timescale).
	SessionTimeout time.Duration
	// CatchUpTimeout bounds the wait, once the run's traffic stopped, for the group's lag to
	// reach 0; LagPoll is the period at which the lag is sampled during the run.
	CatchUpTimeout, LagPoll time.Duration

	procs *TriggerProcs
	dir   string
	h     *History
	cl    *client.Client // every node, strong reads
	mon   *lagMonitor
	// What Settle found.
	settled, caughtUp bool
	catchUp           time.Duration
	maxLag            int64
	problems          []string
}

// NewTriggersWorkload returns the workload with its defaults: datastore "trig" of 8 shards in 2
// partitions, group "jepsen" on column EV, 20% of the cells in column OT, 3 workers with a 3 s
// session, batches of 1 to 4 cells, a 60 s catch-up bound.
func NewTriggersWorkload() *TriggersWorkload {
	return &TriggersWorkload{Datastore: "trig", Shards: 8, Partitions: 2, Group: "jepsen", Column: "EV", OtherColumn: "OT",
		Workers: 3, MaxBatch: 4, OtherProbability: 0.2, SessionTimeout: 3 * time.Second,
		CatchUpTimeout: time.Minute, LagPoll: 250 * time.Millisecond}
}

var _ ProcessWorkload = (*TriggersWorkload)(nil)

// Name implements Workload.
func (w *TriggersWorkload) Name() string { return "triggers" }

// Datastores implements Workload.
func (w *TriggersWorkload) Datastores() []topology.DatastoreSpec {
	return []topology.DatastoreSpec{{Name: w.Datastore, Mode: topology.ModeRaft, Shards: w.Shards, PartitionCount: w.Partitions}}
}

// Start implements ProcessWorkload: it starts the trigger workers (files under
// <run>/triggers/) and a monitor sampling the group's lag.
func (w *TriggersWorkload) Start(ctx context.Context, env *StartEnv) error {
	var eps []string
	for _, n := range env.Cluster.Nodes {
		eps = append(eps, n.URL())
	}
	w.dir, w.h = filepath.Join(env.Dir, "triggers"), env.History
	procs, err := StartTriggerProcs(TriggerProcsConfig{Binary: env.Binary, Dir: w.dir, Count: w.Workers, Endpoints: eps,
		Datastore: w.Datastore, Group: w.Group, Column: w.Column, Shards: w.Shards,
		SessionTimeout: w.SessionTimeout, RequestTimeout: env.RequestTimeout,
		CAFile: env.Cluster.CAFile(), TokenFile: env.Cluster.TokenFile(), Logger: env.Logger})
	if err != nil {
		return err
	}
	w.procs = procs
	cc := env.Cluster.ClientConfig()
	cc.Endpoints, cc.Datastore, cc.RequestTimeout, cc.MaxAttempts = eps, w.Datastore, 2*time.Second, 2
	if w.cl, err = client.New(cc); err != nil {
		return err
	}
	w.mon = startLagMonitor(w.cl, w.Group, w.h, w.LagPoll, filepath.Join(env.Dir, "triggers-lag.jsonl"))
	return nil
}

// Processes implements ProcessWorkload.
func (w *TriggersWorkload) Processes() Processes { return w.procs }

// Stop implements ProcessWorkload.
func (w *TriggersWorkload) Stop() {
	if w.mon != nil {
		w.mon.stop()
	}
	if w.procs != nil {
		w.procs.Stop()
	}
}

// Step implements Workload: one put_cells of new cells, recorded as one operation per cell
// sharing the call's times and outcome (as DurabilityWorkload does).
func (w *TriggersWorkload) Step(ctx context.Context, wk *Worker) {
	n := 1 + wk.Rand.IntN(w.MaxBatch)
	writes := make([]client.CellWrite, n)
	ops := make([]Op, n)
	for i := range writes {
		var b [16]byte
		for j := range b {
			b[j] = byte(wk.Rand.Uint32())
		}
		row := uuid.NewSHA1(uuid.NameSpaceOID, b[:])
		col := w.Column
		if wk.Rand.Float64() < w.OtherProbability {
			col = w.OtherColumn
		}
		body := fmt.Sprintf(`{"p":%d,"v":%d}`, wk.Process, wk.Rand.Int64N(1<<40))
		writes[i] = client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: col, RefKey: 1}, Body: json.RawMessage(body)}
		ops[i] = Op{Process: wk.Process, Node: wk.Node.ID, Workload: "triggers", F: "put", RowKey: row.String(), ColumnKey: col, RefKey: 1, Body: body}
	}
	putAndRecord(ctx, wk, w.Datastore, writes, ops)
}

// Settle implements ProcessWorkload: it waits, up to CatchUpTimeout, for the group to catch up
// (every shard's committed offset at its high-water mark, both read from the leaders), then
// stops the workers, which commit and leave.
func (w *TriggersWorkload) Settle(ctx context.Context, end int64) {
	if w.settled {
		return
	}
	w.settled = true
	ctx, cancel := context.WithTimeout(ctx, w.CatchUpTimeout)
	defer cancel()
	last := "no answer"
	for {
		lag, err := w.leaderLag(ctx)
		if err == nil && lag == 0 {
			w.caughtUp, w.catchUp = true, time.Duration(max(w.h.Now()-end, 0))
			break
		}
		last = fmt.Sprint(lag, " cells")
		if err != nil {
			last = err.Error()
		}
		if !sleepCtx(ctx, w.LagPoll) {
			w.problems = append(w.problems, fmt.Sprintf("the group did not catch up within %s of the traffic's end (last: %s)", w.CatchUpTimeout, last))
			break
		}
	}
	w.maxLag = w.mon.stop()
	w.procs.Stop()
	w.problems = append(w.problems, w.procs.Problems()...)
}

// leaderLag is the group's lag in cells, from its committed offsets and each shard's
// high-water mark, both read with strong consistency (a lagging replica could claim a lag of 0
// while its leader holds more cells).
func (w *TriggersWorkload) leaderLag(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := w.cl.GroupStatus(rctx, w.Group, client.WithConsistency(client.ConsistencyStrong))
	if err != nil {
		return -1, err
	}
	if st.Halted {
		return -1, fmt.Errorf("group %s halted", w.Group)
	}
	offsets := map[int]int64{}
	for _, sh := range st.Shards {
		offsets[sh.Shard] = max(sh.Offset, 0)
	}
	var lag int64
	for s := 0; s < w.Shards; s++ {
		page, err := w.cl.ReadLog(rctx, client.LogRequest{Shard: s, Location: offsets[s], Limit: 1}, client.WithConsistency(client.ConsistencyStrong))
		if err != nil {
			return -1, err
		}
		lag += max(page.HighWater-offsets[s], 0)
	}
	return lag, nil
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Check implements Workload: read the delivery files (the workers were stopped by Settle) and
// every replica of the datastore, and run CheckTriggers; Settle's findings (catch-up, process
// exits) are part of the verdict.
func (w *TriggersWorkload) Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	v := Verdict{Workload: w.Name()}
	w.Settle(ctx, env.End) // when Run did not (it always does)
	problems := append([]string(nil), w.problems...)
	logs, torn, err := ReadDeliveries(w.dir)
	if err != nil {
		v.Valid = "no"
		v.Violations = append(v.Violations, "reading the delivery files: "+err.Error())
		return v
	}
	var stored []StoredCell
	replicas, err := env.Cluster.ReadBack(ctx, w.Datastore)
	if err != nil {
		problems = append(problems, fmt.Sprintf("reading back datastore %s: %v", w.Datastore, err))
	} else {
		shardReps := env.Cluster.ShardReplicas(w.Datastore)
		problems = append(problems, CompareReplicas(replicas, shardReps)...)
		stored = []StoredCell{}
		for s := 0; s < w.Shards; s++ {
			for _, c := range replicas[firstReplicaOf(shardReps, s)] {
				if c.Shard == s {
					stored = append(stored, c)
				}
			}
		}
	}
	res := CheckTriggers(ops, logs, stored, w.Column)
	res.TornLines = torn
	res.CatchUpSeconds, res.CaughtUp, res.MaxLagCells = w.catchUp.Seconds(), w.caughtUp, w.maxLag
	res.Problems = problems
	res.Valid = res.Valid && len(problems) == 0
	v.Details = res
	switch {
	case res.Valid:
		v.Valid = "yes"
	case res.Undecided != "" && len(problems) == 0 && len(res.Lost)+len(res.Unexpected)+len(res.OrderViolations)+len(res.Skipped)+len(res.LostCommits) == 0:
		v.Valid = "unknown"
		v.Violations = append(v.Violations, res.Undecided)
	default:
		v.Valid = "no"
		for _, list := range []struct {
			what string
			ps   []TriggerProblem
		}{{"lost cells", res.Lost}, {"unexpected deliveries", res.Unexpected}, {"order violations", res.OrderViolations}, {"skipped cells", res.Skipped}, {"lost commits", res.LostCommits}} {
			if len(list.ps) > 0 {
				p := list.ps[0]
				v.Violations = append(v.Violations, fmt.Sprintf("%d %s, first: %s/%s/%d shard %d added_id %d %s: %s", len(list.ps), list.what,
					p.RowKey, p.Column, p.RefKey, p.Shard, p.AddedID, p.Incarnation, p.Detail))
			}
		}
		if res.Undecided != "" {
			v.Violations = append(v.Violations, res.Undecided)
		}
		v.Violations = append(v.Violations, problems...)
	}
	return v
}

// firstReplicaOf is the node whose copy of shard the check reads ("" if none).
func firstReplicaOf(shardReps map[int][]string, shard int) string {
	if reps := shardReps[shard]; len(reps) > 0 {
		return reps[0]
	}
	return ""
}

// lagMonitor samples a group's lag (GroupStatus.LagCells) on the history's clock until stopped,
// and then writes the samples to a file (JSON lines).
type lagMonitor struct {
	cancel context.CancelFunc
	done   chan struct{}
	path   string

	mu      sync.Mutex
	samples []lagSample
	maxLag  int64
}

type lagSample struct {
	At  int64  `json:"at"`  // history clock, ns
	Lag int64  `json:"lag"` // -1: the status read failed
	Err string `json:"error,omitempty"`
}

func startLagMonitor(cl *client.Client, group string, h *History, every time.Duration, path string) *lagMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &lagMonitor{cancel: cancel, done: make(chan struct{}), path: path}
	go func() {
		defer close(m.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			rctx, rcancel := context.WithTimeout(ctx, 2*every+2*time.Second)
			st, err := cl.GroupStatus(rctx, group)
			rcancel()
			s := lagSample{At: h.Now(), Lag: st.LagCells}
			if err != nil {
				s.Lag, s.Err = -1, err.Error()
			} else if st.Halted {
				s.Lag, s.Err = -1, "the group halted"
			}
			m.mu.Lock()
			m.samples = append(m.samples, s)
			m.maxLag = max(m.maxLag, s.Lag)
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

// stop ends the sampling, writes the samples (the first call) and returns the highest lag
// sampled. It is safe to call more than once.
func (m *lagMonitor) stop() int64 {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.samples != nil && m.path != "" {
		var b []byte
		for _, s := range m.samples {
			line, _ := json.Marshal(s)
			b = append(append(b, line...), '\n')
		}
		_ = os.WriteFile(m.path, b, 0o644)
		m.samples = nil
	}
	return m.maxLag
}
