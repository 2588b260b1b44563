package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
)

// Workload is one kind of traffic and its checker. The harness gives each workload its own
// datastores, runs Step in a loop on each of the workload's workers while faults come and go,
// then, once the cluster has healed, converged and the traffic stopped, calls Check with the whole
// history. New workloads implement this interface and are added to Workloads; a workload that
// runs processes of its own implements ProcessWorkload, one that prepares the cluster
// SetupWorkload, one whose datastores never go quiet BusyWorkload.
type Workload interface {
	// Name is the workload's name, used in Op.Workload and on the command line.
	Name() string
	// Datastores returns the datastores the workload uses, added to the topology.
	Datastores() []topology.DatastoreSpec
	// Step runs one operation as worker w and records it in w.History. It returns when the
	// operation completes; ctx bounds it.
	Step(ctx context.Context, w *Worker)
	// Check judges the history (every workload's operations, in invocation order) and the
	// cluster's final state.
	Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict
}

// ProcessWorkload is a Workload that runs processes of its own beside the cluster (the trigger
// workers of the triggers workload). Run calls Start once the cluster is ready, before any
// traffic; gives Processes to the nemesis (kill-worker, pause-worker); calls Settle once the
// traffic has stopped and the faults are healed, before it waits for the replicas to converge;
// and calls Stop when the run ends, checked or not.
type ProcessWorkload interface {
	Workload
	// Start starts the processes; ctx bounds the start only.
	Start(ctx context.Context, env *StartEnv) error
	// Processes are the processes the worker nemeses act on.
	Processes() Processes
	// Settle lets the processes finish their work and stops them, so that the cluster goes
	// quiet (processes that keep writing, as group heartbeats do, would keep the replicas from
	// ever reporting the same index twice). end is the traffic's end on the history's clock.
	// What it finds is reported by Check.
	Settle(ctx context.Context, end int64)
	// Stop stops every process still running. It is safe to call more than once.
	Stop()
}

// SetupWorkload is a Workload that prepares the cluster before any traffic (the index workload
// defines its index). Run calls Setup once the cluster is ready and the processes of
// ProcessWorkloads have started, before the traffic and the faults; an error ends the run.
// Setup may start monitors of its own, which Stop ends.
type SetupWorkload interface {
	Workload
	// Setup prepares the workload; ctx bounds it.
	Setup(ctx context.Context, env *StartEnv) error
	// Stop releases what Setup started (monitors); Run calls it when the run ends, checked or
	// not. It is safe to call more than once.
	Stop()
}

// BusyWorkload is a Workload whose datastores keep taking raft writes once the traffic has
// stopped, from the nodes themselves (the index maintainers' consumer-group heartbeats), so
// their partitions never go quiet. Run's wait for the replicas to converge checks their
// partitions for catch-up instead (Cluster.WaitConverged).
type BusyWorkload interface {
	Workload
	// BusyDatastores names the datastores that never go quiet.
	BusyDatastores() []string
}

// StartEnv is what ProcessWorkload.Start and SetupWorkload.Setup may use.
type StartEnv struct {
	Cluster *Cluster
	// Binary is the schemaless executable (its hidden `jepsen trigger-worker` command).
	Binary string
	// Dir is the run's output directory.
	Dir string
	// History is the run's history (its clock).
	History *History
	// RequestTimeout bounds one HTTP attempt of the processes' clients.
	RequestTimeout time.Duration
	// Seed is the run's seed, for workloads that derive keys from it.
	Seed uint64
	// Nemeses are the run's nemesis kinds; FaultsFor is how long faults go on from the start
	// of the traffic (the run's Duration less its Quiet); Chain is the run's iptables chain,
	// which a workload's own network faults suffix to name theirs.
	Nemeses   []string
	FaultsFor time.Duration
	Chain     string
	Logger    *slog.Logger
}

// client returns a client of datastore ds that tries every node of the cluster, for a setup
// and the checks that follow it: 5 s per attempt, 3 attempts.
func (env *StartEnv) client(ds string) (*client.Client, error) {
	return env.Cluster.everyNodeClient(ds, 5*time.Second)
}

// everyNodeClient returns a client of datastore ds ("" for admin calls) that tries every node
// of c in turn: timeout per attempt, 3 attempts.
func (c *Cluster) everyNodeClient(ds string, timeout time.Duration) (*client.Client, error) {
	cc := c.ClientConfig()
	for _, n := range c.Nodes {
		cc.Endpoints = append(cc.Endpoints, n.URL())
	}
	cc.Datastore, cc.RequestTimeout, cc.MaxAttempts = ds, timeout, 3
	return client.New(cc)
}

// Worker is one client process of the harness: it runs one operation at a time against its
// node (and the others when its client may fail over).
type Worker struct {
	// Process numbers the worker (Op.Process).
	Process int
	// Node is the node it talks to first.
	Node *Node
	// Client is the worker's client, datastore unset (use WithDatastore).
	Client *client.Client
	// Rand is the worker's own random source, seeded from the run's seed.
	Rand *rand.Rand
	// History records operations.
	History *History
	// OpTimeout bounds one operation.
	OpTimeout time.Duration
	// Consistency is the read consistency the run asks of its reads.
	Consistency string
	// Seed is the run's seed, for workloads that derive keys from it.
	Seed uint64
	// Async: the run's datastores are async (Config.Mode); the cells workload then draws each
	// read's consistency, strong or stale, half and half, and ignores Consistency.
	Async bool
}

// readConsistency is the consistency of the worker's next read.
func (wk *Worker) readConsistency() string {
	if !wk.Async {
		return wk.Consistency
	}
	if wk.Rand.IntN(2) == 0 {
		return client.ConsistencyStale
	}
	return client.ConsistencyStrong
}

// CheckEnv is what Check may use besides the history.
type CheckEnv struct {
	Cluster *Cluster
	// Dir is the run's output directory.
	Dir string
	// End is the end of the history on its clock (nanoseconds).
	End int64
	// Faults are the run's fault windows.
	Faults []Fault
	// CheckTimeout bounds the linearizability search.
	CheckTimeout time.Duration
	// History is the run's history (its clock reads on from End).
	History *History
	// Storage is the storage clusters of an async run (nil in raft mode); the workloads check
	// async datastores when it is set.
	Storage *Storage
}

// Verdict is a workload's result.
type Verdict struct {
	Workload string `json:"workload"`
	// Valid is "yes", "no" or "unknown" (the checker could not decide in time).
	Valid string `json:"valid"`
	// Violations lists what broke, one line each, for people.
	Violations []string `json:"violations,omitempty"`
	// Details holds the checker's own figures (a DurabilityResult, linearizability counts).
	Details any `json:"details,omitempty"`
}

// Workloads are the workloads the harness knows, by name.
var Workloads = map[string]func() Workload{
	"cells": func() Workload {
		return &CellsWorkload{Rows: 3, Columns: []string{"A", "B"}, RefStep: 250 * time.Millisecond, RefSpread: 4, Bodies: 3, KeyPeriod: 15 * time.Second}
	},
	"durability":  func() Workload { return &DurabilityWorkload{MaxBatch: 5} },
	"triggers":    func() Workload { return NewTriggersWorkload() },
	"index":       func() Workload { return NewIndexWorkload() },
	"cas":         func() Workload { return NewCasWorkload() },
	"bank":        func() Workload { return NewBankWorkload() },
	"replication": func() Workload { return NewReplicationWorkload() },
}

// AsyncWorkloads are the workloads that run in async mode.
var AsyncWorkloads = []string{"cells", "durability", "cas", "bank"}

// putAndRecord writes cells with one put_cells on datastore ds and records ops (one per cell,
// in the order of writes) as invoked before the call and completed with its outcome after: the
// call's time, its status and added_id per cell, or its error.
func putAndRecord(ctx context.Context, wk *Worker, ds string, writes []client.CellWrite, ops []Op) {
	h := wk.History
	for i := range ops {
		ops[i] = h.Invoke(ops[i])
	}
	ctx, cancel := context.WithTimeout(ctx, wk.OpTimeout)
	defer cancel()
	res, err := wk.Client.WithDatastore(ds).PutCells(ctx, writes)
	outcome := writeOutcome(err)
	now := h.Now()
	for i := range ops {
		ops[i].Complete, ops[i].Outcome = now, outcome
		if err != nil {
			ops[i].Error = err.Error()
		} else {
			ops[i].Status, ops[i].AddedID = res[i].Status, res[i].AddedID
		}
		h.Record(ops[i])
	}
}

// writeOutcome classifies a write's error: nil is ok; ErrConflict is an answer (ok); only
// ErrUnavailable means certainly not applied (fail); anything else may have been applied (info).
func writeOutcome(err error) Outcome {
	switch {
	case err == nil, errors.Is(err, client.ErrConflict):
		return OK
	case errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrIndeterminate):
		return Fail
	}
	return Info
}

// CellsWorkload puts and reads a few cells per (row key, column key) with colliding ref keys and
// bodies, and checks the history for linearizability with CellsModel. Ref keys move forward
// with time: an operation picks a ref key in a window of RefSpread ref keys that advances by
// one every RefStep, so the latest cell keeps changing while concurrent writers collide on
// the same ref keys (exists and conflict answers). Keys rotate every KeyPeriod (fresh row
// keys), which bounds each register's history and so the checker's search.
type CellsWorkload struct {
	Rows      int           // row keys per key period
	Columns   []string      // column keys
	RefStep   time.Duration // the ref key window advances by one every RefStep
	RefSpread int64         // width of the ref key window
	Bodies    int           // bodies are {"v": n} with n drawn from [0, Bodies)
	KeyPeriod time.Duration // how long a set of row keys is used
}

// ref picks a ref key for an operation at time now (nanoseconds since the run started).
func (w *CellsWorkload) ref(wk *Worker, now int64) int64 {
	base := (now % int64(w.KeyPeriod)) / int64(w.RefStep)
	return base + wk.Rand.Int64N(w.RefSpread)
}

// Name implements Workload.
func (w *CellsWorkload) Name() string { return "cells" }

// Datastores implements Workload: datastore "cells", 8 shards in 2 partitions.
func (w *CellsWorkload) Datastores() []topology.DatastoreSpec {
	return []topology.DatastoreSpec{{Name: "cells", Mode: topology.ModeRaft, Shards: 8, PartitionCount: 2}}
}

// Step implements Workload: a put (half the time), a get or a latest.
func (w *CellsWorkload) Step(ctx context.Context, wk *Worker) {
	h := wk.History
	period := h.Now() / int64(w.KeyPeriod)
	row := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "jepsen-cells-%d-%d-%d", wk.Seed, period, wk.Rand.IntN(w.Rows)))
	col := w.Columns[wk.Rand.IntN(len(w.Columns))]
	cl := wk.Client.WithDatastore("cells")
	op := Op{Process: wk.Process, Node: wk.Node.ID, Workload: "cells", RowKey: row.String(), ColumnKey: col}
	ctx, cancel := context.WithTimeout(ctx, wk.OpTimeout)
	defer cancel()
	switch r := wk.Rand.Float64(); {
	case r < 0.5:
		op.F = "put"
		op.RefKey = w.ref(wk, h.Now())
		op.Body = fmt.Sprintf(`{"v":%d}`, wk.Rand.IntN(w.Bodies))
		op = h.Invoke(op)
		res, err := cl.PutCell(ctx, row, col, op.RefKey, json.RawMessage(op.Body))
		op.Outcome = writeOutcome(err)
		if op.Outcome == OK {
			op.Status, op.AddedID = res.Status, res.AddedID
		} else {
			op.Error = err.Error()
		}
	case r < 0.75:
		op.F = "get"
		op.RefKey = max(w.ref(wk, h.Now())-1, 0)
		op.Consistency = wk.readConsistency()
		if op.Consistency == client.ConsistencyStale && wk.Async {
			// Async mode measures staleness: reach up to 5 s back (20 ref keys).
			op.RefKey = max(op.RefKey-wk.Rand.Int64N(20), 0)
		}
		op = h.Invoke(op)
		c, err := cl.GetCell(ctx, cells.Key{RowKey: row, ColumnKey: col, RefKey: op.RefKey}, client.WithConsistency(op.Consistency))
		readOutcome(&op, c.RefKey, c.Body, c.AddedID, err)
	default:
		op.F = "latest"
		op.Consistency = wk.readConsistency()
		op = h.Invoke(op)
		c, err := cl.GetCellLatest(ctx, row, col, client.WithConsistency(op.Consistency))
		readOutcome(&op, c.RefKey, c.Body, c.AddedID, err)
	}
	h.Complete(op)
}

// readOutcome fills a read's result: found, not found (both ok), or info (no answer).
func readOutcome(op *Op, ref int64, body json.RawMessage, addedID int64, err error) {
	switch {
	case err == nil:
		op.Outcome, op.Found, op.ReadRef, op.ReadBody, op.AddedID = OK, true, ref, string(body), addedID
	case errors.Is(err, client.ErrNotFound):
		op.Outcome = OK
	default:
		op.Outcome, op.Error = Info, err.Error()
	}
}

// Check implements Workload: porcupine's linearizability check of the cells operations, and the
// replicas of datastore "cells" compared shard by shard. In async mode (env.Storage set):
// CheckAsyncCells instead (read-your-writes, final state, staleness) and the storage members
// compared.
func (w *CellsWorkload) Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	if env.Storage != nil {
		return w.checkAsync(ctx, env, ops)
	}
	v := Verdict{Workload: "cells"}
	lin := CheckLinearizable(ops, env)
	v.Valid = lin.Result
	if lin.Result == "no" {
		v.Violations = append(v.Violations, "the cells history is not linearizable: see "+lin.Visualization)
	}
	diverged := compareDatastore(ctx, env, "cells")
	if len(diverged) > 0 {
		v.Violations = append(v.Violations, diverged...)
		v.Valid = "no"
	}
	v.Details = map[string]any{"linearizability": lin, "replicas_identical": len(diverged) == 0}
	return v
}

// DurabilityWorkload writes many unique cells (put_cells of 1 to MaxBatch cells) and, after the
// run, reads every cell back from every replica (see CheckDurability).
type DurabilityWorkload struct {
	MaxBatch int
}

// Name implements Workload.
func (w *DurabilityWorkload) Name() string { return "durability" }

// Datastores implements Workload: datastore "durability", 16 shards in 2 partitions.
func (w *DurabilityWorkload) Datastores() []topology.DatastoreSpec {
	return []topology.DatastoreSpec{{Name: "durability", Mode: topology.ModeRaft, Shards: 16, PartitionCount: 2}}
}

// Step implements Workload: one put_cells of new cells, recorded as one operation per cell
// sharing the call's times and outcome.
func (w *DurabilityWorkload) Step(ctx context.Context, wk *Worker) {
	n := 1 + wk.Rand.IntN(w.MaxBatch)
	writes := make([]client.CellWrite, n)
	ops := make([]Op, n)
	for i := range writes {
		var b [16]byte
		for j := range b {
			b[j] = byte(wk.Rand.Uint32())
		}
		row := uuid.NewSHA1(uuid.NameSpaceOID, b[:])
		body := fmt.Sprintf(`{"p":%d,"v":%d}`, wk.Process, wk.Rand.Int64N(1<<40))
		writes[i] = client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "D", RefKey: 1}, Body: json.RawMessage(body)}
		ops[i] = Op{Process: wk.Process, Node: wk.Node.ID, Workload: "durability", F: "put", RowKey: row.String(), ColumnKey: "D", RefKey: 1, Body: body}
	}
	putAndRecord(ctx, wk, "durability", writes, ops)
}

// Check implements Workload: CheckDurability over every replica's copy of datastore
// "durability". In async mode (env.Storage set): over the strong read and every storage member
// holding each shard (AsyncDurabilityResult).
func (w *DurabilityWorkload) Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	if env.Storage != nil {
		return w.checkAsync(ctx, env, ops)
	}
	v := Verdict{Workload: "durability", Valid: "yes"}
	replicas, err := env.Cluster.ReadBack(ctx, "durability")
	if err != nil {
		v.Valid = "no"
		v.Violations = append(v.Violations, "reading back datastore durability: "+err.Error())
		return v
	}
	res := CheckDurability(ops, replicas, env.Cluster.ShardReplicas("durability"))
	v.Details = res
	if !res.Valid {
		v.Valid = "no"
		for _, list := range []struct {
			what string
			ps   []CellProblem
		}{{"lost", res.Lost}, {"unexpected", res.Unexpected}, {"corrupted", res.Corrupted}, {"duplicated", res.Duplicated}} {
			if len(list.ps) > 0 {
				v.Violations = append(v.Violations, fmt.Sprintf("%d %s cells, first: %s on %s: %s", len(list.ps), list.what,
					list.ps[0].RowKey, list.ps[0].Node, list.ps[0].Detail))
			}
		}
		v.Violations = append(v.Violations, res.Diverged...)
	}
	return v
}
