package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
)

// CasWorkload checks conditional writes (put_cell with if_latest_ref_key) as compare-and-set
// registers. A register is one (row key, Column) whose cells are written only by conditional
// writes of the next ref key: ref key 1 with IfNoCell, then cur+1 with IfLatestRefKey(cur), each
// with a body {"v": n} that no other write has (n random). A step reads a random register
// (get_cell_latest, strong) and then, unless it stops there (ReadProbability), writes it
// conditionally on the ref key it read. Check runs porcupine with CasModel: the history must be
// linearizable. Registers rotate every KeyPeriod (Registers new row keys), which bounds each
// register's history and so the search.
type CasWorkload struct {
	// Datastore, with Shards shards in Partitions partitions, holds the registers in column
	// Column.
	Datastore          string
	Shards, Partitions int
	Column             string
	// Registers is the number of registers of a key period; KeyPeriod how long they are used.
	Registers int
	KeyPeriod time.Duration
	// ReadProbability is the chance that a step is only a read.
	ReadProbability float64
	// BoundedProbability is the chance that a step's read is a stale read bounded by
	// MaxStaleness ("bounded-read", checked by CheckBoundedReads, not porcupine); the step then
	// writes nothing.
	BoundedProbability float64
	MaxStaleness       time.Duration
}

// NewCasWorkload returns the workload with its defaults: datastore "cas" of 8 shards in 2
// partitions, column REG, 3 registers every 10 s, a fifth of the steps reads only, a tenth a
// read bounded at 1 s.
func NewCasWorkload() *CasWorkload {
	return &CasWorkload{Datastore: "cas", Shards: 8, Partitions: 2, Column: "REG", Registers: 3,
		KeyPeriod: 10 * time.Second, ReadProbability: 0.2, BoundedProbability: 0.1, MaxStaleness: time.Second}
}

// Name implements Workload.
func (w *CasWorkload) Name() string { return "cas" }

// Datastores implements Workload.
func (w *CasWorkload) Datastores() []topology.DatastoreSpec {
	return []topology.DatastoreSpec{{Name: w.Datastore, Mode: topology.ModeRaft, Shards: w.Shards, PartitionCount: w.Partitions}}
}

// casExtra is Op.Extra of a cas answered 412: the latest ref key the answer reported (nil: no
// cell).
type casExtra struct {
	LatestRefKey *int64 `json:"latest_ref_key"`
}

// Step implements Workload: a strong read of a register ("read"), then, unless the step is a
// read only, a conditional write ("cas") of the next ref key after the one read. Op.RefKey of a
// cas is the ref key written, the one expected is RefKey-1 (0: no cell).
func (w *CasWorkload) Step(ctx context.Context, wk *Worker) {
	h := wk.History
	period := h.Now() / int64(w.KeyPeriod)
	row := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "jepsen-cas-%d-%d-%d", wk.Seed, period, wk.Rand.IntN(w.Registers)))
	cl := wk.Client.WithDatastore(w.Datastore)
	base := Op{Process: wk.Process, Node: wk.Node.ID, Workload: "cas", RowKey: row.String(), ColumnKey: w.Column}

	// read reads the register's latest cell as operation f with consistency consistency.
	read := func(f, consistency string, opt client.ReadOption) Op {
		op := base
		op.F, op.Consistency = f, consistency
		op = h.Invoke(op)
		rctx, cancel := context.WithTimeout(ctx, wk.OpTimeout)
		c, err := cl.GetCellLatest(rctx, row, w.Column, opt)
		cancel()
		readOutcome(&op, c.RefKey, c.Body, c.AddedID, err)
		h.Complete(op)
		return op
	}
	if w.MaxStaleness > 0 && wk.Rand.Float64() < w.BoundedProbability {
		read("bounded-read", "stale<="+w.MaxStaleness.String(), client.WithMaxStaleness(w.MaxStaleness))
		return
	}
	op := read("read", client.ConsistencyStrong, client.WithConsistency(client.ConsistencyStrong))
	if op.Outcome != OK || wk.Rand.Float64() < w.ReadProbability {
		return
	}

	cur := op.ReadRef // 0 when not found
	op = base
	op.F, op.RefKey = "cas", cur+1
	op.Body = fmt.Sprintf(`{"v":%d}`, wk.Rand.Int64N(1<<50))
	cond := client.IfNoCell()
	if cur > 0 {
		cond = client.IfLatestRefKey(cur)
	}
	op = h.Invoke(op)
	wctx, cancel := context.WithTimeout(ctx, wk.OpTimeout)
	res, err := cl.PutCell(wctx, row, w.Column, op.RefKey, json.RawMessage(op.Body), cond)
	cancel()
	casOutcome(&op, res.Status, res.AddedID, err)
	h.Complete(op)
}

// casOutcome fills a conditional write's result: answered (ok) with its status, "created",
// "exists" or "buffered", or "precondition_failed" (412, with the latest ref key reported in
// Extra when the answer had it) or "conflict" (409); certainly not applied (fail, the client's
// ErrUnavailable); or unknown (info).
func casOutcome(op *Op, status string, addedID int64, err error) {
	var pe *client.PreconditionError
	switch {
	case err == nil:
		op.Outcome, op.Status, op.AddedID = OK, status, addedID
		return
	case errors.As(err, &pe) && len(pe.Failures) == 1:
		op.Outcome, op.Status = OK, "precondition_failed"
		op.Extra, _ = json.Marshal(casExtra{LatestRefKey: pe.Failures[0].LatestRefKey})
	case errors.Is(err, client.ErrPreconditionFailed):
		op.Outcome, op.Status = OK, "precondition_failed"
	case errors.Is(err, client.ErrConflict):
		op.Outcome, op.Status = OK, "conflict"
	default:
		op.Outcome = writeOutcome(err)
	}
	op.Error = err.Error()
}

// The cas model: a register holds the latest ref key of its column (0: no cell) and that cell's
// body.
type casState struct {
	Ref  int64
	Body string
}

// casInput is what a cas workload operation asked: a read, or a cas expecting ref key Expect
// (0: no cell) and writing ref key Expect+1 with Body.
type casInput struct {
	F      string
	Expect int64
	Body   string
}

// casOutput is what it answered. Unknown marks a cas whose outcome is not known (info). Latest
// is the ref key a 412 reported (0: no cell) when LatestKnown.
type casOutput struct {
	Unknown     bool
	Status      string // cas: created, exists, buffered, precondition_failed, conflict
	Found       bool   // read
	Ref         int64  // read
	Body        string // read
	LatestKnown bool
	Latest      int64
}

// casStep is the model's transition: whether out is a legal answer to in on register s, and
// the register after.
func casStep(s casState, in casInput, out casOutput) (bool, casState) {
	next := casState{Ref: in.Expect + 1, Body: in.Body}
	switch {
	case in.F == "read" && !out.Found:
		return s.Ref == 0, s
	case in.F == "read":
		return s.Ref == out.Ref && s.Body == out.Body, s
	case out.Unknown:
		// Linearized here it took effect if the condition held; linearized after every other
		// operation (its return time is the end of the history) it never did.
		if s.Ref == in.Expect {
			return true, next
		}
		return true, s
	}
	switch out.Status {
	case "created", "buffered":
		return s.Ref == in.Expect, next
	case "exists":
		// The cell with this body is stored: by this call, or by an earlier attempt of it whose
		// answer was lost.
		if s == next {
			return true, s
		}
		return s.Ref == in.Expect, next
	case "precondition_failed":
		return s.Ref != in.Expect && (!out.LatestKnown || s.Ref == out.Latest), s
	case "conflict":
		// The ref key written holds another body.
		return s.Ref > in.Expect && s != next, s
	}
	return false, s
}

// CasModel is the porcupine model of the cas workload: a compare-and-set register per (row key,
// column key). Input is a casInput and Output a casOutput (see CasOperations).
var CasModel = porcupine.Model{
	Partition: partitionByRegister,
	Init:      func() interface{} { return casState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		return casStep(state.(casState), input.(casInput), output.(casOutput))
	},
	Equal: func(a, b interface{}) bool { return a.(casState) == b.(casState) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(casInput), output.(casOutput)
		switch {
		case in.F == "read" && !out.Found:
			return "read() -> no cell"
		case in.F == "read":
			return fmt.Sprintf("read() -> %d: %s", out.Ref, out.Body)
		case out.Unknown:
			return fmt.Sprintf("cas(%d -> %d, %s) -> unknown", in.Expect, in.Expect+1, in.Body)
		case out.Status == "precondition_failed" && out.LatestKnown:
			return fmt.Sprintf("cas(%d -> %d, %s) -> 412, latest %d", in.Expect, in.Expect+1, in.Body, out.Latest)
		}
		return fmt.Sprintf("cas(%d -> %d, %s) -> %s", in.Expect, in.Expect+1, in.Body, out.Status)
	},
	DescribeState: func(state interface{}) string {
		s := state.(casState)
		if s.Ref == 0 {
			return "no cell"
		}
		return fmt.Sprintf("%d: %s", s.Ref, s.Body)
	},
	DescribeOperationMetadata: func(info interface{}) string {
		m := info.(opMeta)
		return fmt.Sprintf("op %d, process %d via %s, %s", m.index, m.process, m.node, m.detail)
	},
}

// CasOperations turns the cas workload's operations of ops into porcupine operations: answered
// operations as they are; info cas with an unknown output and a return time of end (after every
// completed operation: the checker may place them anywhere after their invocation, including
// never); fail cas (certainly not applied) and info reads dropped. end must be after every
// Complete of ops.
func CasOperations(ops []Op, end int64) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Workload != "cas" || o.F == "bounded-read" {
			continue
		}
		in := casInput{F: o.F, Expect: o.RefKey - 1, Body: o.Body}
		ret := o.Complete
		var res casOutput
		switch {
		case o.Outcome == OK:
			res = casOutput{Status: o.Status, Found: o.Found, Ref: o.ReadRef, Body: o.ReadBody}
			var x casExtra
			if o.Status == "precondition_failed" && len(o.Extra) > 0 && json.Unmarshal(o.Extra, &x) == nil {
				res.LatestKnown = true
				if x.LatestRefKey != nil {
					res.Latest = *x.LatestRefKey
				}
			}
		case o.Outcome == Info && o.F == "cas":
			res, ret = casOutput{Unknown: true}, end
		default:
			continue
		}
		detail := string(o.Outcome)
		if o.Error != "" {
			detail += ": " + o.Error
		}
		out = append(out, porcupine.Operation{ClientId: o.Process, Input: in, Call: o.Invoke, Output: res, Return: ret,
			Metadata: opMeta{register: o.RowKey + "/" + o.ColumnKey, index: o.Index, process: o.Process, node: o.Node, detail: detail}})
	}
	return out
}

// CasResult is the cas workload's verdict.
type CasResult struct {
	// Linearizability is porcupine's verdict on the registers (in async mode, those outside
	// every failover window).
	Linearizability LinResult `json:"linearizability"`
	// Excused (async mode) is the verdict on the registers with an operation in a failover
	// window, reported and allowed: a promoted minion may lack what the old master acknowledged
	// (see the guarantees table). Nil when no register was excused.
	Excused *LinResult `json:"excused,omitempty"`
	// Reads counts the answered reads; Written, Refused (412), Conflicts (409), Unavailable
	// (certainly not applied) and Unknown (indeterminate) the conditional writes.
	Reads       int `json:"reads"`
	Written     int `json:"written"`
	Refused     int `json:"refused"`
	Conflicts   int `json:"conflicts"`
	Unavailable int `json:"unavailable"`
	Unknown     int `json:"unknown"`
	// Bounded is the verdict on the reads bounded in staleness (raft mode; nil otherwise).
	Bounded *BoundedResult `json:"bounded,omitempty"`
}

// CheckCas counts the cas operations of ops and checks them with CasModel within
// env.CheckTimeout. The registers with an operation that overlaps one of windows (failovers in
// async mode) are checked apart, into Excused. The visualizations go to env.Dir (cas.html,
// cas-excused.html) when it is set.
func CheckCas(ops []Op, env *CheckEnv, windows []Window) CasResult {
	var res CasResult
	excused := map[string]bool{}
	for _, o := range ops {
		if o.Workload != "cas" {
			continue
		}
		switch {
		case o.F == "read" && o.Outcome == OK:
			res.Reads++
		case o.F != "cas":
		case o.Outcome == Fail:
			res.Unavailable++
		case o.Outcome == Info:
			res.Unknown++
		case o.Status == "precondition_failed":
			res.Refused++
		case o.Status == "conflict":
			res.Conflicts++
		default:
			res.Written++
		}
		if overlapping(windows, o.Invoke, o.Complete) != "" {
			excused[o.RowKey+"/"+o.ColumnKey] = true
		}
	}
	end := historyEnd(ops, env.End)
	var kept, apart []porcupine.Operation
	for _, p := range CasOperations(ops, end) {
		if excused[p.Metadata.(opMeta).register] {
			apart = append(apart, p)
		} else {
			kept = append(kept, p)
		}
	}
	res.Linearizability = checkModel(CasModel, kept, env, end, "cas.html")
	if len(apart) > 0 {
		lin := checkModel(CasModel, apart, env, end, "cas-excused.html")
		res.Excused = &lin
	}
	return res
}

// Check implements Workload: CheckCas (in async mode with the failovers' windows excused), and
// the replicas of the datastore compared.
func (w *CasWorkload) Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	var windows []Window
	if env.Storage != nil {
		windows = failoverWindows(env.Storage.Failovers())
	}
	res := CheckCas(ops, env, windows)
	if env.Storage == nil && w.MaxStaleness > 0 {
		b := CheckBoundedReads(ops, w.MaxStaleness)
		res.Bounded = &b
	}
	v := Verdict{Workload: "cas", Valid: res.Linearizability.Result, Details: res}
	if res.Linearizability.Result == "no" {
		v.Violations = append(v.Violations, "the cas history is not linearizable: see "+res.Linearizability.Visualization)
	}
	if b := res.Bounded; b != nil && len(b.Stale)+len(b.Invented) > 0 {
		v.Valid = "no"
		v.Violations = append(v.Violations, b.Stale...)
		v.Violations = append(v.Violations, b.Invented...)
	}
	if diverged := compareDatastore(ctx, env, w.Datastore); len(diverged) > 0 {
		v.Valid = "no"
		v.Violations = append(v.Violations, diverged...)
	}
	return v
}

// compareDatastore reads datastore name from every replica and compares them shard by shard
// (CompareReplicas): in raft mode every node hosting a partition (Cluster.ReadBack), in async
// mode the strong read and the storage members holding each shard. It returns the differences
// and read errors, one line each.
func compareDatastore(ctx context.Context, env *CheckEnv, name string) []string {
	var (
		replicas map[string][]StoredCell
		holders  map[int][]string
		err      error
	)
	if env.Storage != nil {
		replicas, holders, err = readAsync(ctx, env, name)
	} else {
		replicas, err = env.Cluster.ReadBack(ctx, name)
		holders = env.Cluster.ShardReplicas(name)
	}
	if err != nil {
		return []string{fmt.Sprintf("reading back datastore %s: %v", name, err)}
	}
	return CompareReplicas(replicas, holders)
}
