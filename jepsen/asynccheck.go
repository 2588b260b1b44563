package jepsen

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
)

// The checks of async mode. Strong reads there read the master's latest state: they promise
// read-your-writes while the master lives, not linearizability (a failover can lose what the
// old master acknowledged until the reaper replays it from the buffers), so the cells history
// is checked for read-your-writes per worker (CheckReadYourWrites) instead of by porcupine, its
// final state by CheckAsyncCells, and the staleness of stale reads is measured.

// StrongReplica names the strong read of a whole datastore among the "replicas" the async
// checks compare (the others are the storage members, "c0m0", ...).
const StrongReplica = "strong"

// Window is a span of the history's clock, [Start, End] in nanoseconds, in which strong reads
// may miss acknowledged writes: a failover, from the kill to the promotion plus the reaper's
// replay delay (FailoverRecord.Window).
type Window struct {
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Why   string `json:"why"`
}

// ReadViolation is a read that did not see what it had to, or saw what no write wrote.
type ReadViolation struct {
	Index     int    `json:"index"`
	Process   int    `json:"process"`
	F         string `json:"f"`
	RowKey    string `json:"row_key"`
	ColumnKey string `json:"column_key"`
	RefKey    int64  `json:"ref_key"`
	Invoke    int64  `json:"invoke"`
	Complete  int64  `json:"complete"`
	Detail    string `json:"detail"`
	// Window names the failover window the read overlaps ("" when none).
	Window string `json:"window,omitempty"`
}

// String describes the violation on one line for the report: the operation, its process, key
// and time since the run's start, what was wrong, and the failover window it overlaps if any.
func (v ReadViolation) String() string {
	s := fmt.Sprintf("op %d (process %d, %s %s/%s/%d at %.3fs): %s", v.Index, v.Process, v.F, v.RowKey, v.ColumnKey, v.RefKey,
		float64(v.Invoke)/1e9, v.Detail)
	if v.Window != "" {
		s += " (in the window of " + v.Window + ")"
	}
	return s
}

// RYWResult is the read-your-writes check of the cells workload's strong reads.
type RYWResult struct {
	// Checked counts the strong reads that had to see an earlier acknowledged write of their own
	// worker.
	Checked int `json:"checked"`
	// Violations are such reads that missed it outside every failover window; Expected those
	// inside one (allowed, reported).
	Violations []ReadViolation `json:"violations,omitempty"`
	Expected   []ReadViolation `json:"expected,omitempty"`
}

// overlapping returns the first window that [from, to] overlaps, or "".
func overlapping(windows []Window, from, to int64) string {
	for _, w := range windows {
		if from <= w.End && to >= w.Start {
			return w.Why
		}
	}
	return ""
}

// CheckReadYourWrites checks that every strong read of the cells workload (get and latest,
// outcome ok) sees the writes its own worker made before it and that were acknowledged as
// stored (created or exists; a buffered write is durable but not yet visible, so it is not
// required). A get of a ref key the worker stored must find the body it stored; a latest must
// find a ref key at least the highest one the worker stored in that register, with the worker's
// body if it is that one. A worker runs one operation at a time, so "before" is its own order.
// A read that misses is a violation, or expected when it overlaps one of windows.
func CheckReadYourWrites(ops []Op, windows []Window) RYWResult {
	var res RYWResult
	byProc := map[int][]Op{}
	for _, o := range ops {
		if o.Workload == "cells" {
			byProc[o.Process] = append(byProc[o.Process], o)
		}
	}
	procs := make([]int, 0, len(byProc))
	for p := range byProc {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	for _, p := range procs {
		list := byProc[p]
		sort.Slice(list, func(i, j int) bool { return list[i].Invoke < list[j].Invoke })
		acked := map[string]map[int64]string{} // register -> ref -> body
		for _, o := range list {
			reg := o.RowKey + "/" + o.ColumnKey
			if o.F == "put" {
				if o.Outcome == OK && (o.Status == "created" || o.Status == "exists") {
					if acked[reg] == nil {
						acked[reg] = map[int64]string{}
					}
					acked[reg][o.RefKey] = o.Body
				}
				continue
			}
			if o.Outcome != OK || o.Consistency != client.ConsistencyStrong || len(acked[reg]) == 0 {
				continue
			}
			v := ReadViolation{Index: o.Index, Process: o.Process, F: o.F, RowKey: o.RowKey, ColumnKey: o.ColumnKey, RefKey: o.RefKey,
				Invoke: o.Invoke, Complete: o.Complete}
			switch o.F {
			case "get":
				body, ok := acked[reg][o.RefKey]
				if !ok {
					continue
				}
				res.Checked++
				switch {
				case !o.Found:
					v.Detail = fmt.Sprintf("not found; the worker stored %s there", body)
				case o.ReadBody != body:
					v.Detail = fmt.Sprintf("read %s; the worker stored %s there", o.ReadBody, body)
				default:
					continue
				}
			case "latest":
				var top int64 = -1
				for r := range acked[reg] {
					top = max(top, r)
				}
				res.Checked++
				switch {
				case !o.Found:
					v.Detail = fmt.Sprintf("not found; the worker stored ref key %d", top)
				case o.ReadRef < top:
					v.Detail = fmt.Sprintf("latest ref key %d; the worker stored ref key %d", o.ReadRef, top)
				case o.ReadRef == top && o.ReadBody != acked[reg][top]:
					v.Detail = fmt.Sprintf("read %s at ref key %d; the worker stored %s", o.ReadBody, top, acked[reg][top])
				default:
					continue
				}
				v.RefKey = o.ReadRef
			default:
				continue
			}
			if v.Window = overlapping(windows, o.Invoke, o.Complete); v.Window != "" {
				res.Expected = append(res.Expected, v)
			} else {
				res.Violations = append(res.Violations, v)
			}
		}
	}
	return res
}

// Staleness measures the stale gets of the cells workload: of those of a cell acknowledged
// (created or exists) before the read was invoked, how many did not find it, and how old the
// cell was then (the read's invocation minus the first acknowledgement's completion).
type Staleness struct {
	// Reads counts the stale gets answered; Eligible those of a cell acknowledged before; Missed
	// those of them that found nothing.
	Reads    int `json:"reads"`
	Eligible int `json:"eligible"`
	Missed   int `json:"missed"`
	// MissedFraction is Missed/Eligible.
	MissedFraction float64 `json:"missed_fraction"`
	// AgeP50Ms, AgeP99Ms and AgeMaxMs are percentiles (nearest rank) of the ages of the cells
	// missed, in milliseconds.
	AgeP50Ms float64 `json:"age_p50_ms"`
	AgeP99Ms float64 `json:"age_p99_ms"`
	AgeMaxMs float64 `json:"age_max_ms"`
}

// AsyncCellsResult is the verdict of the cells workload in async mode.
type AsyncCellsResult struct {
	// Keys counts the cells (row, column, ref key) written; Acknowledged those with a created or
	// exists answer; Buffered the puts answered buffered.
	Keys         int `json:"keys"`
	Acknowledged int `json:"acknowledged"`
	Buffered     int `json:"buffered"`
	// Lost: a cell acknowledged (created, exists or buffered) that the final strong read does
	// not find, or a buffered body replaced by a body written only after it.
	Lost []CellProblem `json:"lost,omitempty"`
	// Corrupted: a stored body that no put which may have succeeded wrote, or another body than
	// the acknowledged one. Unexpected: a stored cell that no put which may have succeeded wrote.
	Corrupted  []CellProblem `json:"corrupted,omitempty"`
	Unexpected []CellProblem `json:"unexpected,omitempty"`
	// Conflicting: two bodies both acknowledged as stored (created or exists) for one cell.
	Conflicting []CellProblem `json:"conflicting,omitempty"`
	// BufferedConflicts: a buffered put whose cell ended with another body that was written
	// before the buffered put completed: the reaper drops a buffered cell whose key its primary
	// cluster holds with another body (a documented limitation). Reported, allowed.
	BufferedConflicts []CellProblem `json:"buffered_conflicts,omitempty"`
	// Phantom: a read (strong or stale) that returned a body no put which may have succeeded
	// wrote to that cell, or another body than the acknowledged one.
	Phantom []ReadViolation `json:"phantom,omitempty"`
	RYW     RYWResult       `json:"read_your_writes"`
	Stale   Staleness       `json:"staleness"`
	// Diverged: members of a cluster (or the strong read) whose shards differ.
	Diverged []string `json:"diverged,omitempty"`
	// Valid is true when every list above is empty but BufferedConflicts and RYW.Expected.
	Valid bool `json:"valid"`
}

// cellWrites are the puts of one cell.
type cellWrites struct {
	acked    map[string]bool // bodies answered created or exists
	firstAck int64           // earliest completion of such an answer, -1 none
	maybe    map[string]bool // bodies of puts that may have succeeded (ok but conflict, info)
	buffered []Op
	invokeOf map[string]int64 // body -> earliest invocation of a put that may have written it
}

func collectCellWrites(ops []Op) (map[cellKey]*cellWrites, []cellKey) {
	writes := map[cellKey]*cellWrites{}
	var order []cellKey
	for _, o := range ops {
		if o.Workload != "cells" || o.F != "put" {
			continue
		}
		k := cellKey{o.RowKey, o.ColumnKey, o.RefKey}
		w := writes[k]
		if w == nil {
			w = &cellWrites{acked: map[string]bool{}, firstAck: -1, maybe: map[string]bool{}, invokeOf: map[string]int64{}}
			writes[k] = w
			order = append(order, k)
		}
		if o.Outcome == Fail || (o.Outcome == OK && o.Status == "conflict") {
			continue
		}
		w.maybe[o.Body] = true
		if t, ok := w.invokeOf[o.Body]; !ok || o.Invoke < t {
			w.invokeOf[o.Body] = o.Invoke
		}
		if o.Outcome != OK {
			continue
		}
		switch o.Status {
		case "created", "exists":
			w.acked[o.Body] = true
			if w.firstAck < 0 || o.Complete < w.firstAck {
				w.firstAck = o.Complete
			}
		case "buffered":
			w.buffered = append(w.buffered, o)
		}
	}
	return writes, order
}

// CheckAsyncCells checks the cells workload of an async run: its final state (stored, every
// cell of datastore cells as a strong read returns it after the buffers drained), the
// read-your-writes of its strong reads outside windows (CheckReadYourWrites), that no read
// returned a body never written, and the staleness of its stale gets.
//
// Final-state rules, per cell: a cell acknowledged created, exists or buffered is stored (else
// lost); with the acknowledged body (else corrupted; two acknowledged bodies are conflicting); a
// stored body was written by a put that may have succeeded (else corrupted, or unexpected when
// no such put exists). A buffered body replaced by another is a buffered conflict (allowed) when
// that other body's first put was invoked before the buffered put completed (the reaper drops a
// buffered cell its primary holds with another body, and that body had to be stored before
// the buffered one was: the buffer refuses a second body), else lost.
func CheckAsyncCells(ops []Op, stored []StoredCell, windows []Window) AsyncCellsResult {
	var res AsyncCellsResult
	writes, order := collectCellWrites(ops)
	final := map[cellKey]StoredCell{}
	for _, c := range stored {
		final[cellKey{c.RowKey, c.ColumnKey, c.RefKey}] = c
	}
	res.Keys = len(order)
	for _, k := range order {
		w := writes[k]
		if len(w.acked) > 0 {
			res.Acknowledged++
		}
		res.Buffered += len(w.buffered)
		s, ok := final[k]
		p := CellProblem{Node: StrongReplica, Shard: s.Shard, RowKey: k.row, ColumnKey: k.col, RefKey: k.ref}
		if len(w.acked) > 1 {
			q := p
			q.Detail = fmt.Sprintf("bodies %v all acknowledged as stored", slices.Sorted(mapKeys(w.acked)))
			res.Conflicting = append(res.Conflicting, q)
		}
		if !ok {
			if len(w.acked) > 0 || len(w.buffered) > 0 {
				p.Detail = fmt.Sprintf("acknowledged (%d stored answers, %d buffered), not stored", len(w.acked), len(w.buffered))
				res.Lost = append(res.Lost, p)
			}
			continue
		}
		switch {
		case len(w.maybe) == 0:
			p.Detail = "no put that may have succeeded wrote it"
			res.Unexpected = append(res.Unexpected, p)
			continue
		case !w.maybe[s.Body]:
			p.Detail = fmt.Sprintf("body %s was never written by a put that may have succeeded", s.Body)
			res.Corrupted = append(res.Corrupted, p)
			continue
		case len(w.acked) > 0 && !w.acked[s.Body]:
			p.Detail = fmt.Sprintf("body %s, acknowledged %v", s.Body, slices.Sorted(mapKeys(w.acked)))
			res.Corrupted = append(res.Corrupted, p)
			continue
		}
		for _, b := range w.buffered {
			if b.Body == s.Body {
				continue
			}
			q := p
			if w.invokeOf[s.Body] < b.Complete {
				q.Detail = fmt.Sprintf("buffered %s (op %d), stored %s, written from %.3fs", b.Body, b.Index, s.Body, float64(w.invokeOf[s.Body])/1e9)
				res.BufferedConflicts = append(res.BufferedConflicts, q)
			} else {
				q.Detail = fmt.Sprintf("buffered %s (op %d, completed %.3fs), stored %s, first written %.3fs, after it", b.Body, b.Index,
					float64(b.Complete)/1e9, s.Body, float64(w.invokeOf[s.Body])/1e9)
				res.Lost = append(res.Lost, q)
			}
		}
	}

	// Reads: phantoms and staleness.
	var ages []float64
	for _, o := range ops {
		if o.Workload != "cells" || (o.F != "get" && o.F != "latest") || o.Outcome != OK {
			continue
		}
		ref := o.RefKey
		if o.F == "latest" {
			ref = o.ReadRef
		}
		w := writes[cellKey{o.RowKey, o.ColumnKey, ref}]
		if o.Found && (w == nil || !w.maybe[o.ReadBody] || (len(w.acked) > 0 && !w.acked[o.ReadBody])) {
			v := ReadViolation{Index: o.Index, Process: o.Process, F: o.F, RowKey: o.RowKey, ColumnKey: o.ColumnKey, RefKey: ref,
				Invoke: o.Invoke, Complete: o.Complete, Detail: fmt.Sprintf("%s read of %s, which no put that may have succeeded wrote (or not the acknowledged body)", o.Consistency, o.ReadBody)}
			res.Phantom = append(res.Phantom, v)
		}
		if o.F != "get" || o.Consistency != client.ConsistencyStale {
			continue
		}
		res.Stale.Reads++
		if w == nil || w.firstAck < 0 || w.firstAck >= o.Invoke {
			continue
		}
		res.Stale.Eligible++
		if !o.Found {
			res.Stale.Missed++
			ages = append(ages, float64(o.Invoke-w.firstAck)/1e6)
		}
	}
	if res.Stale.Eligible > 0 {
		res.Stale.MissedFraction = float64(res.Stale.Missed) / float64(res.Stale.Eligible)
	}
	if len(ages) > 0 {
		sort.Float64s(ages)
		rank := func(q float64) float64 { return ages[int(q*float64(len(ages)-1)+0.5)] }
		res.Stale.AgeP50Ms, res.Stale.AgeP99Ms, res.Stale.AgeMaxMs = rank(0.5), rank(0.99), ages[len(ages)-1]
	}
	res.RYW = CheckReadYourWrites(ops, windows)
	sortProblems(res.Lost)
	sortProblems(res.Corrupted)
	sortProblems(res.Unexpected)
	sortProblems(res.Conflicting)
	sortProblems(res.BufferedConflicts)
	res.Valid = res.ok()
	return res
}

func (r AsyncCellsResult) ok() bool {
	return len(r.Lost) == 0 && len(r.Corrupted) == 0 && len(r.Unexpected) == 0 && len(r.Conflicting) == 0 &&
		len(r.Phantom) == 0 && len(r.RYW.Violations) == 0 && len(r.Diverged) == 0
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// AsyncDurabilityResult is the durability workload's verdict in async mode: CheckDurability
// over the strong read of the whole datastore (StrongReplica) and the direct reads of every
// member holding each shard, with the buffered answers counted.
type AsyncDurabilityResult struct {
	DurabilityResult
	// Buffered counts the cells answered buffered (acknowledged: they count in Acknowledged).
	Buffered int `json:"buffered"`
	// LostKeys counts the distinct cells lost (Lost has one entry per replica missing one).
	LostKeys int `json:"lost_keys"`
	// Renumbered: acknowledged cells stored under another added_id than acknowledged, whose
	// cluster failed over after the write was invoked: the old master assigned the added_id, the
	// new master never got the cell, and the reaper replayed it from the buffer under a new one
	// (async mode assigns added_id on the master). Taken out of Duplicated; reported, allowed.
	// Per replica, like Duplicated; RenumberedKeys counts the distinct cells.
	Renumbered     []CellProblem `json:"renumbered,omitempty"`
	RenumberedKeys int           `json:"renumbered_keys"`
	// Members names the replicas read: the strong read and the storage members.
	Members []string `json:"members"`
}

// failoverWindows returns the RYW windows of the run's failovers.
func failoverWindows(fs []FailoverRecord) []Window {
	out := make([]Window, len(fs))
	for i, f := range fs {
		out[i] = f.Window()
	}
	return out
}

// readAsync reads async datastore name with strong reads through the API (StrongReplica) and
// directly from the members holding each shard, for CheckDurability and CompareReplicas.
func readAsync(ctx context.Context, env *CheckEnv, name string) (map[string][]StoredCell, map[int][]string, error) {
	ds, ok := env.Cluster.Topology().Datastore(name)
	if !ok {
		return nil, nil, fmt.Errorf("jepsen: no datastore %q", name)
	}
	strong, err := env.Cluster.ReadStrong(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	replicas, holders, err := env.Storage.ReadMembers(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	replicas[StrongReplica] = strong
	for s := 0; s < ds.Shards; s++ {
		holders[s] = append([]string{StrongReplica}, holders[s]...)
	}
	return replicas, holders, nil
}

// checkAsync is CellsWorkload.Check in async mode.
func (w *CellsWorkload) checkAsync(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	v := Verdict{Workload: "cells", Valid: "yes"}
	replicas, holders, err := readAsync(ctx, env, "cells")
	if err != nil {
		v.Valid = "no"
		v.Violations = append(v.Violations, "reading back datastore cells: "+err.Error())
		return v
	}
	res := CheckAsyncCells(ops, replicas[StrongReplica], failoverWindows(env.Storage.Failovers()))
	res.Diverged = CompareReplicas(replicas, holders)
	res.Valid = res.ok()
	v.Details = res
	if res.Valid {
		return v
	}
	v.Valid = "no"
	for _, list := range []struct {
		what string
		ps   []CellProblem
	}{{"lost", res.Lost}, {"corrupted", res.Corrupted}, {"unexpected", res.Unexpected}, {"conflicting", res.Conflicting}} {
		if len(list.ps) > 0 {
			v.Violations = append(v.Violations, fmt.Sprintf("%d %s cells, first: %s/%s/%d: %s", len(list.ps), list.what,
				list.ps[0].RowKey, list.ps[0].ColumnKey, list.ps[0].RefKey, list.ps[0].Detail))
		}
	}
	if n := len(res.RYW.Violations); n > 0 {
		v.Violations = append(v.Violations, fmt.Sprintf("%d strong reads missed their own worker's acknowledged write outside failover windows, first: %s",
			n, res.RYW.Violations[0]))
	}
	if n := len(res.Phantom); n > 0 {
		v.Violations = append(v.Violations, fmt.Sprintf("%d reads returned a body never written, first: %s", n, res.Phantom[0]))
	}
	v.Violations = append(v.Violations, res.Diverged...)
	return v
}

// checkAsync is DurabilityWorkload.Check in async mode.
func (w *DurabilityWorkload) checkAsync(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	v := Verdict{Workload: "durability", Valid: "yes"}
	replicas, holders, err := readAsync(ctx, env, "durability")
	if err != nil {
		v.Valid = "no"
		v.Violations = append(v.Violations, "reading back datastore durability: "+err.Error())
		return v
	}
	res := AsyncDurabilityResult{DurabilityResult: CheckDurability(ops, replicas, holders)}
	ds, _ := env.Cluster.Topology().Datastore("durability")
	res.splitRenumbered(ops, ds, env.Storage.Failovers())
	for name := range replicas {
		res.Members = append(res.Members, name)
	}
	sort.Strings(res.Members)
	for _, o := range ops {
		if o.Workload == "durability" && o.F == "put" && o.Outcome == OK && o.Status == "buffered" {
			res.Buffered++
		}
	}
	lost := map[cellKey]bool{}
	for _, p := range res.Lost {
		lost[cellKey{p.RowKey, p.ColumnKey, p.RefKey}] = true
	}
	res.LostKeys = len(lost)
	v.Details = res
	if !res.Valid {
		v.Valid = "no"
		if res.LostKeys > 0 {
			v.Violations = append(v.Violations, fmt.Sprintf("%d acknowledged cells lost (%d replica copies), first: %s on %s: %s",
				res.LostKeys, len(res.Lost), res.Lost[0].RowKey, res.Lost[0].Node, res.Lost[0].Detail))
		}
		for _, list := range []struct {
			what string
			ps   []CellProblem
		}{{"unexpected", res.Unexpected}, {"corrupted", res.Corrupted}, {"duplicated", res.Duplicated}} {
			if len(list.ps) > 0 {
				v.Violations = append(v.Violations, fmt.Sprintf("%d %s cells, first: %s on %s: %s", len(list.ps), list.what,
					list.ps[0].RowKey, list.ps[0].Node, list.ps[0].Detail))
			}
		}
		v.Violations = append(v.Violations, res.Diverged...)
	}
	return v
}

// ReadStrong reads every cell of datastore ds with strong reads (an async datastore's master),
// asking the nodes in turn until one answers each page. The cells' Node is StrongReplica.
func (c *Cluster) ReadStrong(ctx context.Context, ds string) ([]StoredCell, error) {
	d, ok := c.Topology().Datastore(ds)
	if !ok {
		return nil, fmt.Errorf("jepsen: no datastore %q", ds)
	}
	cfg := c.ClientConfig()
	for _, n := range c.Nodes {
		cfg.Endpoints = append(cfg.Endpoints, n.URL())
	}
	cfg.Datastore = ds
	cfg.RequestTimeout = 10 * time.Second
	cl, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	out := []StoredCell{}
	for s := 0; s < d.Shards; s++ {
		var after int64
		for {
			page, err := cl.ShardCells(ctx, s, after, 1000, client.WithConsistency(client.ConsistencyStrong))
			if err != nil {
				return nil, fmt.Errorf("jepsen: strong read of shard %d of %s: %w", s, ds, err)
			}
			for _, cell := range page.Cells {
				out = append(out, StoredCell{Node: StrongReplica, Shard: s, RowKey: cell.RowKey, ColumnKey: cell.ColumnKey,
					RefKey: cell.RefKey, Body: string(cell.Body), AddedID: cell.AddedID})
			}
			if len(page.Cells) == 0 {
				break
			}
			after = page.NextLocation
		}
	}
	return out, nil
}

// asyncDatastores names the async datastores of a topology.
func asyncDatastores(t *topology.Topology) []string {
	var out []string
	for _, d := range t.Datastores {
		if d.Mode == topology.ModeAsync {
			out = append(out, d.Name)
		}
	}
	return out
}

// splitRenumbered moves out of Duplicated the acknowledged cells stored under another added_id
// whose cluster (the one holding the shard of ds) failed over after the acknowledged write was
// invoked.
func (r *AsyncDurabilityResult) splitRenumbered(ops []Op, ds *topology.DatastoreSpec, failovers []FailoverRecord) {
	// The old master may have acknowledged any write invoked before it was killed (its answer
	// can arrive after the kill), so the earliest invocation of an acknowledged write counts.
	acked := map[cellKey]int64{}
	for _, o := range ops {
		if o.Workload != "durability" || o.F != "put" || o.Outcome != OK {
			continue
		}
		k := cellKey{o.RowKey, o.ColumnKey, o.RefKey}
		if t, ok := acked[k]; !ok || o.Invoke < t {
			acked[k] = o.Invoke
		}
	}
	failedOverAfter := func(shard int, t int64) bool {
		if ds == nil {
			return false
		}
		p := ds.PartitionOf(shard)
		if p == nil {
			return false
		}
		for _, f := range failovers {
			if fmt.Sprintf("c%d", f.Cluster) == p.Cluster && f.Error == "" && f.Killed > t {
				return true
			}
		}
		return false
	}
	keys := map[cellKey]bool{}
	var kept []CellProblem
	for _, p := range r.Duplicated {
		k := cellKey{p.RowKey, p.ColumnKey, p.RefKey}
		t, ok := acked[k]
		if ok && strings.HasPrefix(p.Detail, "stored with added_id") && failedOverAfter(p.Shard, t) {
			r.Renumbered = append(r.Renumbered, p)
			keys[k] = true
			continue
		}
		kept = append(kept, p)
	}
	r.Duplicated, r.RenumberedKeys = kept, len(keys)
	r.Valid = len(r.Lost) == 0 && len(r.Unexpected) == 0 && len(r.Corrupted) == 0 && len(r.Duplicated) == 0 && len(r.Diverged) == 0
}
