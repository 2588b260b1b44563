package jepsen

import (
	"fmt"
	"sort"
)

// StoredCell is a cell as read back from one replica after the run.
type StoredCell struct {
	Node      string `json:"node"`
	Shard     int    `json:"shard"`
	RowKey    string `json:"row_key"`
	ColumnKey string `json:"column_key"`
	RefKey    int64  `json:"ref_key"`
	Body      string `json:"body"`
	AddedID   int64  `json:"added_id"`
	// Origin is the cluster the cell was written in, "" for this one (replication between
	// clusters).
	Origin string `json:"origin,omitempty"`
}

// CellProblem is one cell that breaks the durability check on one replica.
type CellProblem struct {
	Node      string `json:"node"`
	Shard     int    `json:"shard"`
	RowKey    string `json:"row_key"`
	ColumnKey string `json:"column_key"`
	RefKey    int64  `json:"ref_key"`
	// Detail says what is wrong, e.g. the body found and the body written.
	Detail string `json:"detail"`
}

// DurabilityResult is the verdict of CheckDurability. Counts of writes are per cell; counts of
// problems are per cell and replica.
type DurabilityResult struct {
	// Acknowledged, Indeterminate and Failed count the cells written, by outcome.
	Acknowledged  int `json:"acknowledged"`
	Indeterminate int `json:"indeterminate"`
	Failed        int `json:"failed"`
	// Recovered counts indeterminate cells found stored (they took effect after all).
	Recovered int `json:"recovered"`
	// Lost: acknowledged cells missing from a replica of their shard.
	Lost []CellProblem `json:"lost,omitempty"`
	// Unexpected: stored cells that no write produced, or that only writes which certainly
	// failed produced.
	Unexpected []CellProblem `json:"unexpected,omitempty"`
	// Corrupted: stored cells whose body is not the body written.
	Corrupted []CellProblem `json:"corrupted,omitempty"`
	// Duplicated: a key stored twice in one replica (two added_ids), or an acknowledged write
	// whose answer named another added_id than the one stored.
	Duplicated []CellProblem `json:"duplicated,omitempty"`
	// Diverged names the shards whose replicas hold different (added_id, key) sequences.
	Diverged []string `json:"diverged,omitempty"`
	// Valid is true when every list above is empty.
	Valid bool `json:"valid"`
}

type cellKey struct {
	row, col string
	ref      int64
}

// CheckDurability checks the durability workload's writes against what every replica holds
// after the run. ops are the history's operations (only Workload "durability", F "put" are
// read; one operation per cell); replicas maps each node to every cell it holds, in added_id
// order per shard; shardReplicas maps each shard to the nodes that hold a replica of it (a node
// missing from replicas is treated as holding nothing).
//
// Rules: every acknowledged cell is on every replica of its shard with its exact body (else
// lost or corrupted); a stored cell was written by an operation that did not certainly fail
// (else unexpected); a key appears once per replica; an acknowledged write's added_id is the one
// stored; all replicas of a shard hold the same sequence of (added_id, key).
func CheckDurability(ops []Op, replicas map[string][]StoredCell, shardReplicas map[int][]string) DurabilityResult {
	var res DurabilityResult
	type written struct {
		body    string
		outcome Outcome
		addedID int64
	}
	writes := map[cellKey][]written{}
	for _, o := range ops {
		if o.Workload != "durability" || o.F != "put" {
			continue
		}
		k := cellKey{o.RowKey, o.ColumnKey, o.RefKey}
		writes[k] = append(writes[k], written{o.Body, o.Outcome, o.AddedID})
	}
	// Per key: the acknowledged body (if any), whether any write may have happened.
	type verdict struct {
		acked     bool
		ackedBody string
		ackedID   int64
		maybe     map[string]bool // bodies of ok and info writes
	}
	verdicts := map[cellKey]*verdict{}
	for k, ws := range writes {
		v := &verdict{maybe: map[string]bool{}}
		for _, w := range ws {
			switch w.outcome {
			case OK:
				v.maybe[w.body] = true
				if !v.acked {
					v.acked, v.ackedBody, v.ackedID = true, w.body, w.addedID
				}
			case Info:
				v.maybe[w.body] = true
			}
		}
		switch {
		case v.acked:
			res.Acknowledged++
		case len(v.maybe) > 0:
			res.Indeterminate++
		default:
			res.Failed++
		}
		verdicts[k] = v
	}

	nodes := make([]string, 0, len(replicas))
	for n := range replicas {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	// index: node -> key -> cells stored under it (more than one is a duplicate).
	stored := map[string]map[cellKey][]StoredCell{}
	shardOf := map[cellKey]int{}
	recovered := map[cellKey]bool{}
	for _, n := range nodes {
		byKey := map[cellKey][]StoredCell{}
		for _, c := range replicas[n] {
			k := cellKey{c.RowKey, c.ColumnKey, c.RefKey}
			byKey[k] = append(byKey[k], c)
			shardOf[k] = c.Shard
		}
		stored[n] = byKey
		for k, cs := range byKey {
			c := cs[0]
			p := CellProblem{Node: n, Shard: c.Shard, RowKey: k.row, ColumnKey: k.col, RefKey: k.ref}
			if len(cs) > 1 {
				ids := make([]int64, len(cs))
				for i := range cs {
					ids[i] = cs[i].AddedID
				}
				p.Detail = fmt.Sprintf("stored %d times, added_ids %v", len(cs), ids)
				res.Duplicated = append(res.Duplicated, p)
			}
			v := verdicts[k]
			switch {
			case v == nil || len(v.maybe) == 0:
				p.Detail = "no write that may have succeeded produced it"
				if v != nil {
					p.Detail = "only writes that failed produced it"
				}
				res.Unexpected = append(res.Unexpected, p)
				continue
			case !v.maybe[c.Body]:
				p.Detail = fmt.Sprintf("body %s was never written", c.Body)
				res.Corrupted = append(res.Corrupted, p)
				continue
			case v.acked && c.Body != v.ackedBody:
				p.Detail = fmt.Sprintf("body %s, acknowledged %s", c.Body, v.ackedBody)
				res.Corrupted = append(res.Corrupted, p)
				continue
			}
			if v.acked && v.ackedID != 0 && c.AddedID != v.ackedID {
				p.Detail = fmt.Sprintf("stored with added_id %d, acknowledged with %d", c.AddedID, v.ackedID)
				res.Duplicated = append(res.Duplicated, p)
			}
			if !v.acked {
				recovered[k] = true
			}
		}
	}
	res.Recovered = len(recovered)

	// Lost: every acknowledged cell on every replica of its shard.
	for k, v := range verdicts {
		if !v.acked {
			continue
		}
		shard, known := shardOf[k]
		if !known {
			shard = -1
		}
		holders := shardReplicas[shard]
		if !known {
			// Stored nowhere: lost on every node.
			holders = nil
			for n := range replicas {
				holders = append(holders, n)
			}
			if len(holders) == 0 {
				holders = []string{"(every replica)"}
			}
			sort.Strings(holders)
		}
		for _, n := range holders {
			if len(stored[n][k]) == 0 {
				res.Lost = append(res.Lost, CellProblem{Node: n, Shard: shard, RowKey: k.row, ColumnKey: k.col, RefKey: k.ref,
					Detail: "acknowledged, not stored"})
			}
		}
	}

	res.Diverged = CompareReplicas(replicas, shardReplicas)
	sortProblems(res.Lost)
	sortProblems(res.Unexpected)
	sortProblems(res.Corrupted)
	sortProblems(res.Duplicated)
	res.Valid = len(res.Lost) == 0 && len(res.Unexpected) == 0 && len(res.Corrupted) == 0 &&
		len(res.Duplicated) == 0 && len(res.Diverged) == 0
	return res
}

// CompareReplicas checks that every replica of each shard holds the same sequence of cells
// (added_id, key and body, in added_id order) and returns one line per shard where two replicas
// differ. replicas and shardReplicas are as for CheckDurability.
func CompareReplicas(replicas map[string][]StoredCell, shardReplicas map[int][]string) []string {
	var out []string
	shards := make([]int, 0, len(shardReplicas))
	for s := range shardReplicas {
		shards = append(shards, s)
	}
	sort.Ints(shards)
	for _, s := range shards {
		var ref []StoredCell
		var refNode string
		for _, n := range shardReplicas[s] {
			var seq []StoredCell
			for _, c := range replicas[n] {
				if c.Shard == s {
					seq = append(seq, c)
				}
			}
			if refNode == "" {
				ref, refNode = seq, n
				continue
			}
			if d := firstDifference(ref, seq); d != "" {
				out = append(out, fmt.Sprintf("shard %d: %s and %s differ: %s", s, refNode, n, d))
			}
		}
	}
	return out
}

// firstDifference describes where two replicas' shard logs first differ ("" if they do not).
func firstDifference(a, b []StoredCell) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if x.AddedID != y.AddedID || x.RowKey != y.RowKey || x.ColumnKey != y.ColumnKey || x.RefKey != y.RefKey || x.Body != y.Body {
			return fmt.Sprintf("position %d: added_id %d %s/%s/%d against added_id %d %s/%s/%d",
				i, x.AddedID, x.RowKey, x.ColumnKey, x.RefKey, y.AddedID, y.RowKey, y.ColumnKey, y.RefKey)
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d cells against %d", len(a), len(b))
	}
	return ""
}

func sortProblems(ps []CellProblem) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.RowKey != b.RowKey {
			return a.RowKey < b.RowKey
		}
		if a.ColumnKey != b.ColumnKey {
			return a.ColumnKey < b.ColumnKey
		}
		if a.RefKey != b.RefKey {
			return a.RefKey < b.RefKey
		}
		return a.Node < b.Node
	})
}
