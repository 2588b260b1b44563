package jepsen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The cells model: a versioned, write-once cell map, one register per (row key, column key).
// Each register maps ref keys to bodies; a ref key, once written, never changes. The operations
// are the datastore's put_cell, get_cell and get_cell_latest on one (row key, column key).

// cellInput is what a cells operation asked.
type cellInput struct {
	F    string // "put", "get" or "latest"
	Ref  int64  // put, get
	Body string // put: the canonical JSON written
}

// cellOutput is what a cells operation answered. Unknown marks a put whose outcome is not
// known (outcome info): it may have taken effect at any time after its invocation, or never.
type cellOutput struct {
	Unknown bool
	Status  string // put: created, exists, conflict
	Found   bool   // get, latest
	Ref     int64  // latest: the ref key read
	Body    string // get, latest: the canonical JSON read
}

// cellState is one register: ref key -> body, immutable (Step copies on write).
type cellState map[int64]string

func (s cellState) latest() (int64, string, bool) {
	var best int64 = -1
	for r := range s {
		if r > best {
			best = r
		}
	}
	if best < 0 {
		return 0, "", false
	}
	return best, s[best], true
}

func (s cellState) with(ref int64, body string) cellState {
	out := make(cellState, len(s)+1)
	for r, b := range s {
		out[r] = b
	}
	out[ref] = body
	return out
}

// cellStep is the model's transition: whether output is a legal answer to input in state s,
// and the state after.
func cellStep(s cellState, in cellInput, out cellOutput) (bool, cellState) {
	switch in.F {
	case "put":
		stored, exists := s[in.Ref]
		if out.Unknown {
			// Linearized here, the put took effect; linearized after every other operation
			// (its return time is the end of the history), it never did.
			if exists {
				return true, s
			}
			return true, s.with(in.Ref, in.Body)
		}
		switch out.Status {
		case "created":
			if exists {
				return false, s
			}
			return true, s.with(in.Ref, in.Body)
		case "exists":
			// "Your body is stored": it was before, or this very call stored it in an earlier
			// attempt whose answer was lost (the client and the forwarding node both retry an
			// indeterminate write, and the retry finds the cell).
			if !exists {
				return true, s.with(in.Ref, in.Body)
			}
			return stored == in.Body, s
		case "conflict":
			return exists && stored != in.Body, s
		}
		return false, s
	case "get":
		stored, exists := s[in.Ref]
		if !out.Found {
			return !exists, s
		}
		return exists && stored == out.Body, s
	case "latest":
		ref, body, ok := s.latest()
		if !out.Found {
			return !ok, s
		}
		return ok && ref == out.Ref && body == out.Body, s
	}
	return false, s
}

// CellsModel is the porcupine model of the cells workload. Operations are partitioned by (row
// key, column key); Input is a cellInput and Output a cellOutput (see CellOperations).
var CellsModel = porcupine.Model{
	Partition: partitionByRegister,
	Init:      func() interface{} { return cellState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		return cellStep(state.(cellState), input.(cellInput), output.(cellOutput))
	},
	Equal: func(a, b interface{}) bool {
		x, y := a.(cellState), b.(cellState)
		if len(x) != len(y) {
			return false
		}
		for r, bx := range x {
			if by, ok := y[r]; !ok || by != bx {
				return false
			}
		}
		return true
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(cellInput), output.(cellOutput)
		switch in.F {
		case "put":
			res := out.Status
			if out.Unknown {
				res = "unknown"
			}
			return fmt.Sprintf("put(%d, %s) -> %s", in.Ref, in.Body, res)
		case "get":
			if !out.Found {
				return fmt.Sprintf("get(%d) -> not found", in.Ref)
			}
			return fmt.Sprintf("get(%d) -> %s", in.Ref, out.Body)
		default:
			if !out.Found {
				return "latest() -> not found"
			}
			return fmt.Sprintf("latest() -> %d: %s", out.Ref, out.Body)
		}
	},
	DescribeState: func(state interface{}) string {
		s := state.(cellState)
		refs := make([]int64, 0, len(s))
		for r := range s {
			refs = append(refs, r)
		}
		sort.Slice(refs, func(i, j int) bool { return refs[i] < refs[j] })
		parts := make([]string, len(refs))
		for i, r := range refs {
			parts[i] = fmt.Sprintf("%d: %s", r, s[r])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	},
	DescribeOperationMetadata: func(info interface{}) string {
		m := info.(opMeta)
		return fmt.Sprintf("op %d, process %d via %s, %s", m.index, m.process, m.node, m.detail)
	},
}

// partitionByRegister splits a history of operations carrying an opMeta by register, in
// register order (porcupine's P-compositionality).
func partitionByRegister(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Metadata.(opMeta).register
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], op)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

// opMeta rides along with each porcupine operation: its register (row/column) and where it
// came from, for partitioning and for the visualization.
type opMeta struct {
	register string
	index    int
	process  int
	node     string
	detail   string
}

// CellOperations turns the cells workload's operations of a history into porcupine operations:
// ok operations as they are; info puts with an unknown output and a return time of end (after
// every completed operation, so the checker may place them anywhere after their invocation,
// including "never"); fail operations and info reads (a timed-out read took no effect) are
// dropped. end must be at least the largest Complete in ops.
func CellOperations(ops []Op, end int64) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Workload != "cells" {
			continue
		}
		in := cellInput{F: o.F, Ref: o.RefKey, Body: o.Body}
		var res cellOutput
		ret := o.Complete
		switch {
		case o.Outcome == OK:
			res = cellOutput{Status: o.Status, Found: o.Found, Ref: o.ReadRef, Body: o.ReadBody}
		case o.Outcome == Info && o.F == "put":
			res = cellOutput{Unknown: true}
			ret = end
		default:
			continue
		}
		detail := string(o.Outcome)
		if o.Consistency != "" {
			detail += ", " + o.Consistency
		}
		if o.Error != "" {
			detail += ": " + o.Error
		}
		out = append(out, porcupine.Operation{
			ClientId: o.Process,
			Input:    in,
			Call:     o.Invoke,
			Output:   res,
			Return:   ret,
			Metadata: opMeta{register: o.RowKey + "/" + o.ColumnKey, index: o.Index, process: o.Process, node: o.Node, detail: detail},
		})
	}
	return out
}
