package jepsen

import (
	"fmt"
	"maps"
	"slices"
)

// ReplicationResult is the verdict of CheckReplication. Problems name a cluster and, where
// one replica is concerned, its node (CellProblem.Node is "cluster/node").
type ReplicationResult struct {
	Valid bool `json:"valid"`
	// Acknowledged counts the acknowledged cells per origin cluster; Cells the cells each
	// cluster holds.
	Acknowledged map[string]int `json:"acknowledged"`
	Cells        map[string]int `json:"cells"`
	// Lost: a cell acknowledged by its origin, or held by it, that a cluster lacks.
	Lost []CellProblem `json:"lost,omitempty"`
	// Unexpected: a cell nobody wrote, one whose write certainly failed, or one the peer holds
	// and its origin does not.
	Unexpected []CellProblem `json:"unexpected,omitempty"`
	// Corrupted: a body other than the one written.
	Corrupted []CellProblem `json:"corrupted,omitempty"`
	// WrongOrigin: a cell whose origin is not its writer's cluster (or is set on a cell
	// written in the cluster holding it).
	WrongOrigin []CellProblem `json:"wrong_origin,omitempty"`
	// Duplicated: a cell held twice by one cluster.
	Duplicated []CellProblem `json:"duplicated,omitempty"`
	// OutOfOrder: a shard whose cells of one origin the other cluster holds in another order.
	OutOfOrder []string `json:"out_of_order,omitempty"`
	// Diverged: replicas of one shard in one cluster that hold different logs.
	Diverged []string `json:"diverged,omitempty"`
	// Cuts are the workload's cuts between the clusters (Check sets them).
	Cuts []Fault `json:"cuts,omitempty"`
	// Problems is one line per kind of problem, for the verdict.
	Problems []string `json:"problems,omitempty"`
}

// CheckReplication judges the replication workload's history (ops of other workloads are
// ignored) against what each cluster holds: clusters maps a cluster name to its ReadBack (node
// to cells, and the shards' replicas). The cluster of a cell's writer is the one its body names ("o"). It checks:
//   - within a cluster, every replica of a shard holds the same log (row key, body, origin,
//     added_id, in added_id order);
//   - every cell acknowledged by its origin is in every cluster, with the body written;
//   - every cell its origin holds is in the other clusters too, and none holds a cell that
//     its origin does not, that nobody wrote, or whose write certainly failed;
//   - a cell's origin is "" in its own cluster and its writer's cluster elsewhere;
//   - no cluster holds a cell twice;
//   - per shard and origin, the other clusters hold the origin's cells in its order (Herb's
//     guarantee: in order per origin).
func CheckReplication(ops []Op, clusters map[string]ClusterCells) ReplicationResult {
	res := ReplicationResult{Acknowledged: map[string]int{}, Cells: map[string]int{}}
	written := map[string]Op{}
	for _, op := range ops {
		if op.Workload != "replication" || op.F != "put" {
			continue
		}
		written[op.RowKey] = op
		if op.Outcome == OK {
			res.Acknowledged[bodyOrigin(op.Body)]++
		}
	}
	// originOf is the cluster that wrote the cell of row: as its write's body says, or the
	// stored body for a cell nobody wrote.
	originOf := func(row, body string) string {
		if op, ok := written[row]; ok {
			return bodyOrigin(op.Body)
		}
		return bodyOrigin(body)
	}
	names := slices.Sorted(maps.Keys(clusters))
	// logs[cluster][shard] is the shard's log on the first of its replicas (by node id).
	logs := map[string]map[int][]StoredCell{}
	held := map[string]map[string]StoredCell{} // cluster, row key
	for _, c := range names {
		logs[c], held[c] = canonicalLogs(c, clusters[c], &res), map[string]StoredCell{}
		for _, shard := range slices.Sorted(maps.Keys(logs[c])) {
			for _, cell := range logs[c][shard] {
				p := CellProblem{Node: c + "/" + cell.Node, Shard: shard, RowKey: cell.RowKey, ColumnKey: cell.ColumnKey, RefKey: cell.RefKey}
				if _, dup := held[c][cell.RowKey]; dup {
					p.Detail = "held twice"
					res.Duplicated = append(res.Duplicated, p)
					continue
				}
				held[c][cell.RowKey] = cell
				res.Cells[c]++
				op, ok := written[cell.RowKey]
				switch {
				case !ok:
					p.Detail = "nobody wrote it"
					res.Unexpected = append(res.Unexpected, p)
				case op.Outcome == Fail:
					p.Detail = "its write failed: " + op.Error
					res.Unexpected = append(res.Unexpected, p)
				case cell.Body != op.Body:
					p.Detail = fmt.Sprintf("body %s, written %s", cell.Body, op.Body)
					res.Corrupted = append(res.Corrupted, p)
				}
				want := originOf(cell.RowKey, cell.Body)
				if want == c {
					want = ""
				}
				if cell.Origin != want {
					p.Detail = fmt.Sprintf("origin %q, want %q", cell.Origin, want)
					res.WrongOrigin = append(res.WrongOrigin, p)
				}
			}
		}
	}
	for _, row := range slices.Sorted(maps.Keys(written)) {
		op := written[row]
		origin := bodyOrigin(op.Body)
		stored, atOrigin := held[origin][row]
		for _, c := range names {
			if _, ok := held[c][row]; ok || c == origin && op.Outcome != OK {
				continue
			}
			p := CellProblem{Node: c, RowKey: row, ColumnKey: op.ColumnKey, RefKey: op.RefKey}
			switch {
			case op.Outcome == OK:
				p.Detail = fmt.Sprintf("acknowledged by %s (added_id %d), missing in %s", origin, op.AddedID, c)
				res.Lost = append(res.Lost, p)
			case atOrigin:
				p.Shard, p.Detail = stored.Shard, fmt.Sprintf("held by its origin %s, missing in %s", origin, c)
				res.Lost = append(res.Lost, p)
			}
		}
		if !atOrigin {
			for _, c := range names {
				if cell, ok := held[c][row]; ok && c != origin {
					res.Unexpected = append(res.Unexpected, CellProblem{Node: c + "/" + cell.Node, Shard: cell.Shard, RowKey: row, ColumnKey: op.ColumnKey, RefKey: op.RefKey,
						Detail: fmt.Sprintf("in %s but not at its origin %s", c, origin)})
				}
			}
		}
	}
	for _, origin := range names {
		for _, other := range names {
			if other != origin {
				res.OutOfOrder = append(res.OutOfOrder, orderProblems(origin, other, logs[origin], logs[other], originOf)...)
			}
		}
	}
	for _, list := range []struct {
		what string
		ps   []CellProblem
	}{{"lost", res.Lost}, {"unexpected", res.Unexpected}, {"corrupted", res.Corrupted}, {"with the wrong origin", res.WrongOrigin}, {"duplicated", res.Duplicated}} {
		if len(list.ps) > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%d cells %s, first: %s on %s: %s", len(list.ps), list.what, list.ps[0].RowKey, list.ps[0].Node, list.ps[0].Detail))
		}
	}
	if len(res.OutOfOrder) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d shards out of origin order, first: %s", len(res.OutOfOrder), res.OutOfOrder[0]))
	}
	res.Problems = append(res.Problems, res.Diverged...)
	res.Valid = len(res.Problems) == 0
	return res
}

// ClusterCells is what one cluster holds of the replication workload's datastore: Cells, its
// ReadBack (node id to cells), and Replicas, the nodes holding each shard (its ShardReplicas),
// so that a replica whose log of a shard is empty counts.
type ClusterCells struct {
	Cells    map[string][]StoredCell
	Replicas map[int][]string
}

// canonicalLogs returns, per shard, the log of the shard's first replica (by node id) in
// cluster c, and records in res.Diverged every other replica whose log differs from it.
func canonicalLogs(c string, cc ClusterCells, res *ReplicationResult) map[int][]StoredCell {
	byShard := map[int]map[string][]StoredCell{}
	for shard, nodes := range cc.Replicas {
		byShard[shard] = map[string][]StoredCell{}
		for _, n := range nodes {
			byShard[shard][n] = nil
		}
	}
	for node, list := range cc.Cells {
		for _, cell := range list {
			if byShard[cell.Shard] == nil {
				byShard[cell.Shard] = map[string][]StoredCell{}
			}
			byShard[cell.Shard][node] = append(byShard[cell.Shard][node], cell)
		}
	}
	logs := map[int][]StoredCell{}
	for shard, replicas := range byShard {
		ids := slices.Sorted(maps.Keys(replicas))
		first := replicas[ids[0]]
		logs[shard] = first
		for _, id := range ids[1:] {
			if !slices.EqualFunc(first, replicas[id], sameLogEntry) {
				res.Diverged = append(res.Diverged, fmt.Sprintf("%s shard %d: %s holds %d cells, %s %d, or the same number in another order or with other bodies, origins or added_ids",
					c, shard, ids[0], len(first), id, len(replicas[id])))
			}
		}
	}
	return logs
}

func sameLogEntry(a, b StoredCell) bool {
	return a.RowKey == b.RowKey && a.ColumnKey == b.ColumnKey && a.RefKey == b.RefKey && a.Body == b.Body && a.Origin == b.Origin && a.AddedID == b.AddedID
}

// orderProblems compares, shard by shard, the order of origin's own cells in origin's logs
// with their order in other's logs, over the cells both hold (missing cells are Lost, not
// disorder): one line per shard whose orders differ.
func orderProblems(origin, other string, originLogs, otherLogs map[int][]StoredCell, originOf func(row, body string) string) []string {
	var out []string
	for _, shard := range slices.Sorted(maps.Keys(originLogs)) {
		own := func(log []StoredCell, keep map[string]bool) []string {
			var rows []string
			for _, c := range log {
				if originOf(c.RowKey, c.Body) == origin && (keep == nil || keep[c.RowKey]) {
					rows = append(rows, c.RowKey)
				}
			}
			return rows
		}
		set := func(rows []string) map[string]bool {
			m := map[string]bool{}
			for _, r := range rows {
				m[r] = true
			}
			return m
		}
		a, b := own(originLogs[shard], nil), own(otherLogs[shard], nil)
		a, b = own(originLogs[shard], set(b)), own(otherLogs[shard], set(a))
		for i := range a {
			if a[i] != b[i] {
				out = append(out, fmt.Sprintf("shard %d: %s's cells in %s: position %d is %s, %s has %s there", shard, origin, other, i, b[i], origin, a[i]))
				break
			}
		}
	}
	return out
}
