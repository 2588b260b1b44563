package jepsen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A synthetic index run. Row "a": k0 at ref 1 (n 1) and ref 2 (n 5), both acknowledged. Row
// "b": k1, ref 1 acknowledged (n 2), ref 2 indeterminate (n 6). Row "c": k0 at ref 1 (n 3),
// then ref 2 changes k to k2 (n 7), acknowledged at added_id 20: a violation of the shard field.
// Row "d": one write that certainly failed (n 4). Row "e": ref 1 indeterminate with k3 (n 8),
// ref 2 acknowledged with k4 (n 9): the first appended cell is either.
func idxPut(row string, ref int64, k string, n int64, outcome Outcome, addedID int64) Op {
	return Op{Workload: "index", F: "put", RowKey: row, ColumnKey: "IDX", RefKey: ref, Outcome: outcome, AddedID: addedID,
		Body: fmt.Sprintf(`{"k":%q,"n":%d,"w":"p1"}`, k, n)}
}

func idxOps() []Op {
	return []Op{
		idxPut("a", 1, "k0", 1, OK, 10),
		idxPut("b", 1, "k1", 2, OK, 11),
		idxPut("c", 1, "k0", 3, OK, 12),
		idxPut("d", 1, "k5", 4, Fail, 0),
		idxPut("a", 2, "k0", 5, OK, 13),
		idxPut("b", 2, "k1", 6, Info, 0),
		idxPut("c", 2, "k2", 7, OK, 20),
		idxPut("e", 1, "k3", 8, Info, 0),
		idxPut("e", 2, "k4", 9, OK, 22),
		{Workload: "durability", F: "put", RowKey: "x", ColumnKey: "D", RefKey: 1, Body: `{"p":1}`, Outcome: OK},
	}
}

// ie is an entry of the index under shard value k.
func ie(row, k string, n int64, violation int64) IndexedEntry {
	return IndexedEntry{ShardValue: k, RowKey: row, K: k, N: n, W: "p1", Violation: violation}
}

// idxEntries is a clean full read: b's indeterminate cell made it, e's did not.
func idxEntries() []IndexedEntry {
	return []IndexedEntry{ie("a", "k0", 5, 0), ie("b", "k1", 6, 0), ie("c", "k0", 7, 20), ie("e", "k4", 9, 0)}
}

// idxStored are the stored cells matching idxEntries.
func idxStored() []StoredCell {
	cell := func(row string, ref int64, k string, n, addedID int64) StoredCell {
		return StoredCell{Shard: 0, RowKey: row, ColumnKey: "IDX", RefKey: ref, AddedID: addedID, Body: fmt.Sprintf(`{"k":%q,"n":%d,"w":"p1"}`, k, n)}
	}
	return []StoredCell{cell("a", 1, "k0", 1, 10), cell("b", 1, "k1", 2, 11), cell("c", 1, "k0", 3, 12), cell("a", 2, "k0", 5, 13),
		cell("b", 2, "k1", 6, 14), cell("c", 2, "k2", 7, 20), cell("e", 2, "k4", 9, 22)}
}

func idxInput() IndexCheckInput {
	return IndexCheckInput{Ops: idxOps(), Entries: idxEntries(), Stored: idxStored(), CaughtUp: true,
		CatchUp: 1500 * time.Millisecond, Bound: time.Minute}
}

// query is an index query during the run that answered entries under shard value sv.
func idxQuery(index int, sv string, es ...IndexedEntry) Op {
	b, _ := json.Marshal(IndexQueryRecord{ShardValue: sv, Entries: es})
	return Op{Index: index, Workload: "index", F: "query", Outcome: OK, Extra: b}
}

func TestCheckIndexClean(t *testing.T) {
	t.Parallel()
	in := idxInput()
	in.Ops = append(in.Ops,
		idxQuery(100, "k0", ie("a", "k0", 1, 0), ie("c", "k0", 3, 0)), // old values: eventual consistency
		idxQuery(101, "k1"),
		Op{Index: 102, Workload: "index", F: "query", Outcome: Fail, Error: "client: unavailable"})
	res := CheckIndex(in)
	require.True(t, res.Valid, "a clean run: got invalid %+v", res)
	want := IndexResult{Rows: 5, Acknowledged: 6, Indeterminate: 2, Failed: 1, KChanges: 2, Entries: 4, Marked: 1, StoredRows: 4,
		Queries: 2, QueryErrors: 1, QueryEntries: 2, CatchUpSeconds: 1.5, BoundSeconds: 60, CaughtUp: true, Valid: true}
	assert.Equal(t, want, res, "a clean run's result")
}

// Row e's first cell, indeterminate, may have been appended: then e's entry is under k3, marked
// at the acknowledged cell's added_id, and holds that cell's values.
func TestCheckIndexIndeterminateFirstCell(t *testing.T) {
	t.Parallel()
	in := idxInput()
	in.Entries[3] = ie("e", "k3", 9, 22)
	in.Stored = nil
	res := CheckIndex(in)
	assert.True(t, res.Valid, "e's indeterminate first cell appended: got invalid %+v", res)
}

func TestCheckIndexCatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(*IndexCheckInput)
		count  func(IndexResult) int
		want   string // in the first problem's text
	}{
		{"an acknowledged row without entry", func(in *IndexCheckInput) {
			in.Entries = in.Entries[1:] // a's entry is gone
			in.Stored = nil
		}, func(r IndexResult) int { return len(r.Lost) }, "no entry"},
		{"an acknowledged row without entry, also against the stored cells", func(in *IndexCheckInput) {
			in.Entries = in.Entries[1:]
		}, func(r IndexResult) int { return len(r.Lost) + len(r.Diverged) }, "no entry"},
		{"a stale entry (n below the highest acknowledged)", func(in *IndexCheckInput) {
			in.Entries[0] = ie("a", "k0", 1, 0)
		}, func(r IndexResult) int { return len(r.Stale) }, "n 1, but the cell at ref key 2 with n 5 was acknowledged"},
		{"an entry for a row never written", func(in *IndexCheckInput) {
			in.Entries = append(in.Entries, ie("z", "k0", 5, 0))
		}, func(r IndexResult) int { return len(r.Unexpected) }, "no cell of this row was ever written"},
		{"an entry for a row only a failed write wrote", func(in *IndexCheckInput) {
			in.Entries = append(in.Entries, ie("d", "k5", 4, 0))
			in.Stored = nil
		}, func(r IndexResult) int { return len(r.Unexpected) }, "certainly failed"},
		{"an entry for a row never written, seen by a query during the run", func(in *IndexCheckInput) {
			in.Ops = append(in.Ops, idxQuery(100, "k0", ie("z", "k0", 5, 0)))
		}, func(r IndexResult) int { return len(r.Unexpected) }, "query op 100"},
		{"invented values (n, w of no cell)", func(in *IndexCheckInput) {
			in.Entries[0] = ie("a", "k0", 6, 0) // 6 is b's n
		}, func(r IndexResult) int { return len(r.Invented) }, "n 6, w p1 is the body of no cell"},
		{"invented values: a writer that did not write the row", func(in *IndexCheckInput) {
			in.Entries[0].W = "p2"
		}, func(r IndexResult) int { return len(r.Invented) }, "w p2"},
		{"invented values: a k never written for the row", func(in *IndexCheckInput) {
			in.Entries[0] = ie("a", "k6", 5, 0)
		}, func(r IndexResult) int { return len(r.Invented) }, "k k6 was never written"},
		{"invented values: fields that do not decode", func(in *IndexCheckInput) {
			in.Entries[0].Bad = `n is <nil>`
		}, func(r IndexResult) int { return len(r.Invented) }, "do not decode"},
		{"invented values in a query during the run", func(in *IndexCheckInput) {
			in.Ops = append(in.Ops, idxQuery(100, "k1", ie("b", "k1", 3, 0)))
		}, func(r IndexResult) int { return len(r.Invented) }, "query op 100"},
		{"a row duplicated under two shard values", func(in *IndexCheckInput) {
			in.Entries = append(in.Entries, ie("c", "k2", 7, 0)) // moved by the k change, and kept
		}, func(r IndexResult) int { return len(r.Duplicated) }, "2 entries"},
		{"a row twice in one answer", func(in *IndexCheckInput) {
			in.Ops = append(in.Ops, idxQuery(100, "k0", ie("a", "k0", 5, 0), ie("a", "k0", 5, 0)))
		}, func(r IndexResult) int { return len(r.Duplicated) }, "twice in one answer"},
		{"a row moved to the shard value of its later cell", func(in *IndexCheckInput) {
			in.Entries[2] = ie("c", "k2", 7, 0)
		}, func(r IndexResult) int { return len(r.Misplaced) }, "cannot be the k of the row's first appended cell"},
		{"an entry under another shard value than its k", func(in *IndexCheckInput) {
			in.Entries[0].ShardValue = "k1"
		}, func(r IndexResult) int { return len(r.Misplaced) }, "found under shard value k1"},
		{"an acknowledged k change not marked", func(in *IndexCheckInput) {
			in.Entries[2].Violation = 0
			in.Stored = nil
		}, func(r IndexResult) int { return len(r.Marks) }, "not marked"},
		{"a mark on a row whose k never changed", func(in *IndexCheckInput) {
			in.Entries[0].Violation = 13
			in.Stored = nil
		}, func(r IndexResult) int { return len(r.Marks) }, "no cell of the row has another k"},
		{"an entry that is not what the stored cells give", func(in *IndexCheckInput) {
			in.Entries[1] = ie("b", "k1", 2, 0) // b's indeterminate n 6 is stored
		}, func(r IndexResult) int { return len(r.Diverged) }, "the stored cell with the highest ref key (2) has n 6"},
		{"a catch-up beyond the bound", func(in *IndexCheckInput) {
			in.CatchUp = 75 * time.Second
		}, func(r IndexResult) int {
			if r.Late != "" {
				return 1
			}
			return 0
		}, "beyond the bound"},
		{"no catch-up", func(in *IndexCheckInput) {
			in.CaughtUp, in.CatchUp = false, 61*time.Second
		}, func(r IndexResult) int {
			if r.Late != "" {
				return 1
			}
			return 0
		}, "did not catch up"},
		{"no full read", func(in *IndexCheckInput) {
			in.Entries = nil
		}, func(r IndexResult) int { return len(r.Problems) }, "not read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := idxInput()
			tc.change(&in)
			res := CheckIndex(in)
			require.False(t, res.Valid, "valid (%+v)", res)
			require.NotZero(t, tc.count(res), "problems of the kind (%+v)", res)
			text := res.Late + strings.Join(res.Problems, "; ")
			for _, ps := range [][]IndexProblem{res.Lost, res.Stale, res.Unexpected, res.Invented, res.Duplicated, res.Misplaced, res.Marks, res.Diverged} {
				for _, p := range ps {
					text += "; " + p.String()
				}
			}
			assert.Contains(t, text, tc.want, "the problems' text")
		})
	}
}
