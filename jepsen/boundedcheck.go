package jepsen

import (
	"fmt"
	"time"
)

// Bounded stale reads (?consistency=stale&max_staleness=D) in the cas workload: a step may read
// its register with a bound instead of strongly ("bounded-read"). Such a read is not
// linearizable and stays out of porcupine's check; CheckBoundedReads checks what the bound
// promises instead: the read reflects every write acknowledged before D ago.

// BoundedResult is the verdict on the bounded reads of a history.
type BoundedResult struct {
	// Bound is the reads' max_staleness.
	Bound time.Duration `json:"bound"`
	// Reads counts the bounded reads answered; Refused those answered 503 (no replica within
	// the bound), which the bound allows.
	Reads   int `json:"reads"`
	Refused int `json:"refused"`
	// Stale lists the reads that missed a write acknowledged more than Bound before they were
	// sent; Invented those that returned a value no write wrote. Empty when valid.
	Stale    []string `json:"stale,omitempty"`
	Invented []string `json:"invented,omitempty"`
}

// CheckBoundedReads checks the answered "bounded-read" operations of the cas workload in ops
// against the register's conditional writes: each must return a ref key at least that of every
// write (answered created, buffered or exists) that completed more than bound before the read
// was invoked, and a (ref key, body) that some write invoked before the read completed wrote
// (answered or unknown; a register without a cell reads as ref key 0). The harness's clock
// times both: a write it saw acknowledged was acknowledged by then.
func CheckBoundedReads(ops []Op, bound time.Duration) BoundedResult {
	res := BoundedResult{Bound: bound}
	type write struct {
		ref            int64
		body           string
		invoke, acked  int64
		applied, known bool
	}
	writes := map[string][]write{}
	for _, o := range ops {
		if o.Workload != "cas" || o.F != "cas" || o.Outcome == Fail {
			continue
		}
		w := write{ref: o.RefKey, body: o.Body, invoke: o.Invoke, acked: o.Complete}
		switch {
		case o.Outcome == OK && (o.Status == "created" || o.Status == "buffered" || o.Status == "exists"):
			w.applied, w.known = true, true
		case o.Outcome == OK:
			continue // refused (412, 409): wrote nothing
		}
		writes[o.RowKey+"/"+o.ColumnKey] = append(writes[o.RowKey+"/"+o.ColumnKey], w)
	}
	for _, o := range ops {
		if o.Workload != "cas" || o.F != "bounded-read" {
			continue
		}
		if o.Outcome != OK {
			res.Refused++
			continue
		}
		res.Reads++
		reg := o.RowKey + "/" + o.ColumnKey
		got := int64(0)
		if o.Found {
			got = o.ReadRef
		}
		var must int64
		written := !o.Found
		for _, w := range writes[reg] {
			if w.known && w.applied && w.acked < o.Invoke-int64(bound) && w.ref > must {
				must = w.ref
			}
			if o.Found && w.ref == o.ReadRef && w.body == o.ReadBody && w.invoke < o.Complete {
				written = true
			}
		}
		what := fmt.Sprintf("op %d via %s: register %s read ref key %d", o.Index, o.Node, reg, got)
		if got < must {
			res.Stale = append(res.Stale, fmt.Sprintf("%s, but ref key %d was acknowledged more than %s before the read", what, must, bound))
		}
		if !written {
			res.Invented = append(res.Invented, fmt.Sprintf("%s with body %s, which no write wrote", what, o.ReadBody))
		}
	}
	return res
}
