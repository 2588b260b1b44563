package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Outcome is how an operation ended, in Jepsen's terms.
type Outcome string

// Outcomes of an operation.
const (
	// OK: the operation completed and its result is known.
	OK Outcome = "ok"
	// Fail: the operation certainly did not take effect (a write the server refused or that never
	// reached a leader; a read that got no answer).
	Fail Outcome = "fail"
	// Info: the outcome is unknown. A write may or may not have taken effect, now or later (a
	// timeout, an indeterminate answer, a lost connection).
	Info Outcome = "info"
)

// Op is one operation of a history: a client call from its invocation to its completion. Times
// are nanoseconds since the run started, read from a monotonic clock, so they order correctly
// whatever the wall clock does. Fields that do not apply to an operation are zero.
type Op struct {
	// Index is the operation's position in the history, in invocation order.
	Index int `json:"index"`
	// Process is the worker that ran the operation (one worker runs one operation at a time).
	Process int `json:"process"`
	// Node is the node the worker sends to first.
	Node string `json:"node"`
	// Workload names the workload that produced the operation ("cells", "durability").
	Workload string `json:"workload"`
	// F is the operation: "put", "get" (get_cell), "latest" (get_cell_latest).
	F string `json:"f"`
	// RowKey, ColumnKey and RefKey name the cell written or read (RefKey unused by "latest").
	RowKey    string `json:"row_key"`
	ColumnKey string `json:"column_key"`
	RefKey    int64  `json:"ref_key"`
	// Body is the JSON body written by a put.
	Body string `json:"body,omitempty"`
	// Consistency is the read consistency of a read ("strong" or "stale").
	Consistency string `json:"consistency,omitempty"`

	// Invoke and Complete are the call's start and end, in nanoseconds since the run started.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	// Outcome is ok, fail or info.
	Outcome Outcome `json:"outcome"`
	// Status is a put's answer: "created", "exists" or "conflict".
	Status string `json:"status,omitempty"`
	// Found says whether a read found a cell; ReadRef and ReadBody are that cell's ref key and
	// JSON body, AddedID its added_id (puts report the added_id of the stored cell too).
	Found    bool   `json:"found,omitempty"`
	ReadRef  int64  `json:"read_ref,omitempty"`
	ReadBody string `json:"read_body,omitempty"`
	AddedID  int64  `json:"added_id,omitempty"`
	// Error is the error of a fail or info operation.
	Error string `json:"error,omitempty"`
	// Extra holds what a later workload needs beyond these fields.
	Extra json.RawMessage `json:"extra,omitempty"`
}

// Latency is the operation's duration.
func (o Op) Latency() time.Duration { return time.Duration(o.Complete - o.Invoke) }

// History records operations as they complete. It is safe for concurrent use. Each completed
// operation is also written as one JSON line to the writer given to NewHistory, in completion
// order; Ops returns them in invocation order.
type History struct {
	start time.Time
	mu    sync.Mutex
	next  int
	ops   []Op
	w     *bufio.Writer
	err   error
}

// NewHistory starts a history whose clock reads zero now. w receives the JSON lines (nil: none).
func NewHistory(w io.Writer) *History {
	h := &History{start: time.Now()}
	if w != nil {
		h.w = bufio.NewWriter(w)
	}
	return h
}

// Now is the time since the history started, in nanoseconds (monotonic).
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Start returns the wall-clock time at which the history's clock read zero.
func (h *History) Start() time.Time { return h.start }

// Invoke stamps op with the current time and an index, and returns it for the caller to fill
// in and pass to Complete.
func (h *History) Invoke(op Op) Op {
	h.mu.Lock()
	op.Index = h.next
	h.next++
	h.mu.Unlock()
	op.Invoke = h.Now()
	return op
}

// Complete stamps op's completion time and records it.
func (h *History) Complete(op Op) {
	op.Complete = h.Now()
	h.Record(op)
}

// Record records a finished operation as it is.
func (h *History) Record(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
	if h.w != nil && h.err == nil {
		b, err := json.Marshal(op)
		if err == nil {
			b = append(b, '\n')
			_, err = h.w.Write(b)
		}
		h.err = err
	}
}

// Ops returns a copy of the recorded operations in invocation order.
func (h *History) Ops() []Op {
	h.mu.Lock()
	out := append([]Op(nil), h.ops...)
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Invoke < out[j].Invoke })
	return out
}

// Flush writes buffered JSON lines and returns the first write error.
func (h *History) Flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil && h.err == nil {
		h.err = h.w.Flush()
	}
	return h.err
}

// ReadHistory reads a history file written by History (one JSON object per line), in file
// order.
func ReadHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	dec := json.NewDecoder(f)
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return nil, fmt.Errorf("jepsen: read history %s: operation %d: %w", path, len(ops), err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// Fault is one fault window of a run, as the nemesis log records it: what was done to which
// nodes, from Start to End (nanoseconds on the history's clock; End is 0 while it lasts).
type Fault struct {
	// Kind names the nemesis: "kill", "pause", "partition-one", ...
	Kind string `json:"kind"`
	// Nodes are the nodes the fault was applied to (killed, paused, or isolated).
	Nodes []string `json:"nodes"`
	// Detail describes the fault for people, e.g. the partition's components.
	Detail string `json:"detail"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
}

// writeJSON writes v, indented, to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
