package jepsen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// Delivery is one line of a trigger worker's delivery file (DeliveryLog): one cell whose
// handler completed. The file of one worker process (an incarnation) lists its deliveries in the
// order their handlers completed; a shard's deliveries are sequential, so per shard this is the
// delivery order.
type Delivery struct {
	// Worker is the group member id of the process.
	Worker string `json:"worker"`
	// Shard is the cell's shard (computed from its row key).
	Shard   int    `json:"shard"`
	AddedID int64  `json:"added_id"`
	RowKey  string `json:"row_key"`
	Column  string `json:"column"`
	RefKey  int64  `json:"ref_key"`
	// Body is the cell's JSON body as delivered.
	Body string `json:"body,omitempty"`
	// Lease numbers the process's ownership periods of the shard: 1 for the first time it was
	// given the shard, 2 after it lost and got it back, and so on. Within one period the
	// triggers package delivers a shard's cells in added_id order without gaps; a new period
	// starts again at the group's committed offset.
	Lease int `json:"lease"`
	// Time is when the handler finished, in nanoseconds since the Unix epoch (every process runs
	// on the harness's machine, so the times of different processes compare).
	Time int64 `json:"time"`
	// Committed marks a line that records no delivery but an offset commit the group's
	// coordinator accepted (DeliveryLog.Commit): AddedID is the offset committed in Shard,
	// Time when the acceptance reached the worker.
	Committed bool `json:"committed,omitempty"`
}

// ReadDeliveries reads every delivery file (*.jsonl) in dir, by file name without the
// extension (one name per worker incarnation). A last line without its newline was cut by a
// kill -9 before its handler returned: it is left out and counted in torn. Any other
// unreadable line is an error.
func ReadDeliveries(dir string) (logs map[string][]Delivery, torn int, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	logs = map[string][]Delivery{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		ds, cut, err := readDeliveryFile(p)
		if err != nil {
			return nil, 0, err
		}
		logs[name] = ds
		if cut {
			torn++
		}
	}
	return logs, torn, nil
}

func readDeliveryFile(path string) ([]Delivery, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	var out []Delivery
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return out, len(bytes.TrimSpace(line)) > 0, nil
		}
		if err != nil {
			return nil, false, err
		}
		var d Delivery
		if err := json.Unmarshal(line, &d); err != nil {
			return nil, false, fmt.Errorf("jepsen: delivery file %s line %d: %w", path, n, err)
		}
		out = append(out, d)
	}
}

// TriggerProblem is one cell or delivery that breaks the triggers check.
type TriggerProblem struct {
	// Incarnation is the delivery file ("" for a lost cell).
	Incarnation string `json:"incarnation,omitempty"`
	Shard       int    `json:"shard"`
	AddedID     int64  `json:"added_id,omitempty"`
	RowKey      string `json:"row_key"`
	Column      string `json:"column"`
	RefKey      int64  `json:"ref_key"`
	Detail      string `json:"detail"`
}

// TriggersResult is the verdict of CheckTriggers, with the figures the triggers workload adds
// (catch-up, process exits).
type TriggersResult struct {
	// Acknowledged, Indeterminate and Failed count the cells of the group's column written, by
	// outcome (as CheckDurability counts them); Recovered the indeterminate ones delivered.
	Acknowledged  int `json:"acknowledged"`
	Indeterminate int `json:"indeterminate"`
	Failed        int `json:"failed"`
	Recovered     int `json:"recovered"`
	// OtherWritten counts the cells of other columns written (any outcome): none may be
	// delivered.
	OtherWritten int `json:"other_written"`
	// Delivered counts delivery lines; Distinct the cells delivered; Duplicates the deliveries
	// beyond the first of each cell.
	Delivered  int `json:"delivered"`
	Distinct   int `json:"distinct"`
	Duplicates int `json:"duplicates"`
	// Incarnations counts the delivery files (worker processes started); Leases the ownership
	// periods (incarnation, shard, lease) that delivered something; LeaseChanges the times a
	// process delivered a shard again after losing it, and Rewinds those where it went back to
	// an added_id at or before its last one (redelivery from the committed offset).
	Incarnations int `json:"incarnations"`
	Leases       int `json:"leases"`
	LeaseChanges int `json:"lease_changes"`
	Rewinds      int `json:"rewinds"`
	// TornLines counts delivery files whose last line was cut by a kill -9 (left out).
	TornLines int `json:"torn_lines"`
	// Lost: acknowledged cells never delivered.
	Lost []TriggerProblem `json:"lost,omitempty"`
	// Unexpected: delivered cells of another column, never written, written only by writes that
	// certainly failed, with a body never written, or at another shard or added_id than the one
	// stored (one entry per cell).
	Unexpected []TriggerProblem `json:"unexpected,omitempty"`
	// OrderViolations: within one ownership period, an added_id at or before the previous one.
	OrderViolations []TriggerProblem `json:"order_violations,omitempty"`
	// Skipped: within one ownership period, a delivery that is not the next cell of the column
	// in the shard's log; or a period that starts past the next cell after everything delivered
	// in the shard before it (the committed offset got ahead of the deliveries).
	Skipped []TriggerProblem `json:"skipped,omitempty"`
	// Commits counts the accepted offset commits the workers recorded. LostCommits: a period
	// that starts at or below an offset whose commit was accepted before the period began (the
	// coordinator's state lost an acknowledged commit, or let the offset move back).
	Commits     int              `json:"commits"`
	LostCommits []TriggerProblem `json:"lost_commits,omitempty"`
	// Undecided says why the order check could not decide ("" when it could).
	Undecided string `json:"undecided,omitempty"`
	// CatchUpSeconds is how long the group took, after the traffic stopped and the replicas
	// converged, to reach lag 0 (CaughtUp false: not within the workload's bound).
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	CaughtUp       bool    `json:"caught_up"`
	// MaxLagCells is the highest lag sampled during the run (GroupStatus.LagCells, every
	// column's cells after the committed offsets).
	MaxLagCells int64 `json:"max_lag_cells"`
	// Problems are the workload's other findings: processes that exited when nothing killed
	// them or did not stop cleanly, replicas that differ, a catch-up that did not happen.
	Problems []string `json:"problems,omitempty"`
	// Valid is true when every list above is empty and Undecided is "".
	Valid bool `json:"valid"`
}

// triggerWrite is what the history says of one cell of the triggers workload.
type triggerWrite struct {
	acked bool
	maybe []string // bodies of ok and info writes
}

// minDeliveriesForLeaseCheck: with at least this many deliveries, more ownership periods than
// half the deliveries means the worker could not tell its periods apart (every delivery looked
// like a new lease), which would make the order check vacuous.
const minDeliveriesForLeaseCheck = 1000

// CheckTriggers checks the deliveries of a consumer group on column against the triggers
// workload's writes. ops are the history's operations (Workload "triggers", F "put" are read, one
// per cell); logs are the delivery files by incarnation (ReadDeliveries); stored is every cell of
// the datastore on one replica of each shard, in added_id order per shard (nil: the checks that
// need the log, Skipped and the stored position of a delivered cell, are left out).
//
// Lines of logs that record accepted commits (Delivery.Committed) are no deliveries; a period
// that starts at or below the highest offset of its shard whose commit was accepted earlier is
// a lost commit.
//
// Rules: every acknowledged cell of column is delivered at least once (else lost); a delivered
// cell is of column, was written by a write that did not certainly fail, with that body, and
// sits at the shard and added_id stored (else unexpected); within one ownership period of one
// process, a shard's deliveries are the shard's cells of column in added_id order with none
// skipped (else an order violation, or skipped); a new period may go back (it starts at the
// committed offset) but not beyond the next cell after everything delivered in the shard
// before it.
func CheckTriggers(ops []Op, logs map[string][]Delivery, stored []StoredCell, column string) TriggersResult {
	var res TriggersResult
	writes := map[cellKey]*triggerWrite{}
	for _, o := range ops {
		if o.Workload != "triggers" || o.F != "put" {
			continue
		}
		k := cellKey{o.RowKey, o.ColumnKey, o.RefKey}
		w := writes[k]
		if w == nil {
			w = &triggerWrite{}
			writes[k] = w
		}
		switch o.Outcome {
		case OK:
			w.acked = true
			w.maybe = append(w.maybe, o.Body)
		case Info:
			w.maybe = append(w.maybe, o.Body)
		}
	}
	for k, w := range writes {
		switch {
		case k.col != column:
			res.OtherWritten++
		case w.acked:
			res.Acknowledged++
		case len(w.maybe) > 0:
			res.Indeterminate++
		default:
			res.Failed++
		}
	}

	// The column's cells of each shard's log, and each stored cell's place.
	seq := map[int][]int64{} // shard -> added_ids of column, ascending
	where := map[cellKey]StoredCell{}
	for _, c := range stored {
		where[cellKey{c.RowKey, c.ColumnKey, c.RefKey}] = c
		if c.ColumnKey == column {
			seq[c.Shard] = append(seq[c.Shard], c.AddedID)
		}
	}
	for s := range seq {
		sort.Slice(seq[s], func(i, j int) bool { return seq[s][i] < seq[s][j] })
	}
	// next returns the first added_id of column in shard after a (-1: none).
	next := func(shard int, a int64) int64 {
		ids := seq[shard]
		i := sort.Search(len(ids), func(i int) bool { return ids[i] > a })
		if i == len(ids) {
			return -1
		}
		return ids[i]
	}
	haveLog := stored != nil

	logs, commits := splitCommits(logs)
	for _, cs := range commits {
		res.Commits += len(cs)
	}
	names := make([]string, 0, len(logs))
	for n := range logs {
		names = append(names, n)
	}
	sort.Strings(names)
	res.Incarnations = len(names)
	var starts []periodStart
	count := map[cellKey]int{}
	flagged := map[cellKey]bool{}
	for _, inc := range names {
		last := map[int]Delivery{} // shard -> previous delivery in this incarnation
		for _, d := range logs[inc] {
			res.Delivered++
			k := cellKey{d.RowKey, d.Column, d.RefKey}
			count[k]++
			if !flagged[k] {
				if why := unexpectedDelivery(d, writes[k], column, where, haveLog); why != "" {
					flagged[k] = true
					res.Unexpected = append(res.Unexpected, triggerProblem(inc, d, "%s", why))
				}
			}
			prev, seen := last[d.Shard]
			last[d.Shard] = d
			if !seen || prev.Lease != d.Lease {
				res.Leases++
				starts = append(starts, periodStart{inc, d})
				if seen {
					res.LeaseChanges++
					if d.AddedID <= prev.AddedID {
						res.Rewinds++
					}
				}
				continue
			}
			switch {
			case d.AddedID <= prev.AddedID:
				res.OrderViolations = append(res.OrderViolations,
					triggerProblem(inc, d, "added_id %d delivered after %d in the same lease (%d) of shard %d", d.AddedID, prev.AddedID, d.Lease, d.Shard))
			case haveLog && next(d.Shard, prev.AddedID) != d.AddedID:
				res.Skipped = append(res.Skipped,
					triggerProblem(inc, d, "added_id %d delivered right after %d in lease %d, skipping %d", d.AddedID, prev.AddedID, d.Lease, next(d.Shard, prev.AddedID)))
			}
		}
	}

	// A period starts at the committed offset, which never passes what was delivered: its first
	// cell is at most the next cell after the highest added_id delivered in the shard before it.
	if haveLog && len(starts) > 0 {
		type timed struct {
			t int64
			a int64
		}
		byShard := map[int][]timed{}
		for _, inc := range names {
			for _, d := range logs[inc] {
				if d.Column == column {
					byShard[d.Shard] = append(byShard[d.Shard], timed{d.Time, d.AddedID})
				}
			}
		}
		prefixMax := map[int][]int64{}
		for s, ts := range byShard {
			sort.Slice(ts, func(i, j int) bool { return ts[i].t < ts[j].t })
			pm := make([]int64, len(ts))
			m := int64(0)
			for i, x := range ts {
				m = max(m, x.a)
				pm[i] = m
			}
			prefixMax[s] = pm
		}
		for _, st := range starts {
			d := st.d
			if d.Column != column {
				continue
			}
			ts := byShard[d.Shard]
			i := sort.Search(len(ts), func(i int) bool { return ts[i].t >= d.Time }) // deliveries strictly before d
			before := int64(0)
			if i > 0 {
				before = prefixMax[d.Shard][i-1]
			}
			if want := next(d.Shard, before); want >= 0 && d.AddedID > want {
				res.Skipped = append(res.Skipped,
					triggerProblem(st.inc, d, "lease %d of shard %d starts at added_id %d, but nothing after %d was delivered before it: %d skipped", d.Lease, d.Shard, d.AddedID, before, want))
			}
		}
	}

	res.LostCommits = lostCommits(starts, commits)

	for _, n := range count {
		res.Duplicates += n - 1
	}
	for k, w := range writes {
		n := count[k]
		if k.col != column {
			continue
		}
		switch {
		case w.acked && n == 0:
			p := TriggerProblem{Shard: -1, RowKey: k.row, Column: k.col, RefKey: k.ref, Detail: "acknowledged, never delivered"}
			if c, ok := where[k]; ok {
				p.Shard, p.AddedID = c.Shard, c.AddedID
			} else if haveLog {
				p.Detail += " (and not stored)"
			}
			res.Lost = append(res.Lost, p)
		case !w.acked && len(w.maybe) > 0 && n > 0:
			res.Recovered++
		}
	}
	res.Distinct = len(count)
	if res.Delivered >= minDeliveriesForLeaseCheck && 2*res.Leases > res.Delivered {
		res.Undecided = fmt.Sprintf("%d ownership periods for %d deliveries: the worker cannot tell its leases apart, so the order check would prove nothing", res.Leases, res.Delivered)
	}
	for _, ps := range [][]TriggerProblem{res.Lost, res.Unexpected, res.OrderViolations, res.Skipped, res.LostCommits} {
		sortTriggerProblems(ps)
	}
	res.Valid = len(res.Lost) == 0 && len(res.Unexpected) == 0 && len(res.OrderViolations) == 0 && len(res.Skipped) == 0 &&
		len(res.LostCommits) == 0 && res.Undecided == ""
	return res
}

// unexpectedDelivery says what is wrong with a delivered cell ("" when nothing is).
func unexpectedDelivery(d Delivery, w *triggerWrite, column string, where map[cellKey]StoredCell, haveLog bool) string {
	switch {
	case d.Column != column:
		return fmt.Sprintf("a cell of column %s, not the group's column %s", d.Column, column)
	case w == nil:
		return "no write produced it"
	case len(w.maybe) == 0:
		return "only writes that certainly failed produced it"
	}
	if d.Body != "" && !containsJSON(w.maybe, d.Body) {
		return fmt.Sprintf("body %s was never written", d.Body)
	}
	if haveLog {
		c, ok := where[cellKey{d.RowKey, d.Column, d.RefKey}]
		switch {
		case !ok:
			return "not stored on the replica read back"
		case c.Shard != d.Shard || c.AddedID != d.AddedID:
			return fmt.Sprintf("delivered as shard %d added_id %d, stored as shard %d added_id %d", d.Shard, d.AddedID, c.Shard, c.AddedID)
		}
	}
	return ""
}

// containsJSON reports whether one of bodies is the same JSON value as body.
func containsJSON(bodies []string, body string) bool {
	var want any
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		return false
	}
	for _, b := range bodies {
		if b == body {
			return true
		}
		var got any
		if json.Unmarshal([]byte(b), &got) == nil && reflect.DeepEqual(got, want) {
			return true
		}
	}
	return false
}

func sortTriggerProblems(ps []TriggerProblem) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Shard != b.Shard {
			return a.Shard < b.Shard
		}
		if a.AddedID != b.AddedID {
			return a.AddedID < b.AddedID
		}
		if a.RowKey != b.RowKey {
			return a.RowKey < b.RowKey
		}
		return a.Incarnation < b.Incarnation
	})
}
