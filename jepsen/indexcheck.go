package jepsen

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// IndexedEntry is one entry of the index workload's index as a query answered it: the shard
// value it was found under and its fields. Bad says what was wrong with the fields when they
// did not decode as the index's k (string), n (integer) and w (string); K, N and W then hold
// what could be read.
type IndexedEntry struct {
	// ShardValue is the shard value the query that returned the entry named.
	ShardValue string `json:"shard_value"`
	RowKey     string `json:"row_key"`
	K          string `json:"k"`
	N          int64  `json:"n"`
	W          string `json:"w"`
	// Violation is the entry's shard-field violation mark (wire.IndexEntry.Violation): 0, or the
	// added_id of the latest cell of the row whose k differed from the entry's.
	Violation int64  `json:"violation,omitempty"`
	Bad       string `json:"bad,omitempty"`
}

// String renders the entry for reports.
func (e IndexedEntry) String() string {
	s := fmt.Sprintf("{k:%s n:%d w:%s}", e.K, e.N, e.W)
	if e.Violation != 0 {
		s += fmt.Sprintf(" violation %d", e.Violation)
	}
	if e.Bad != "" {
		s += " (" + e.Bad + ")"
	}
	return s + " under " + e.ShardValue
}

// IndexQueryRecord is what an index query of the workload records in its operation's Extra:
// the shard value asked and the entries answered.
type IndexQueryRecord struct {
	ShardValue string         `json:"shard_value"`
	Entries    []IndexedEntry `json:"entries"`
}

// IndexProblem is one row or entry that breaks the index check.
type IndexProblem struct {
	// Source is where the entry was seen: "read" (the full read after the catch-up), "query
	// op N" (a query during the run, N its operation index) or "history" (a row without entry).
	Source string `json:"source"`
	RowKey string `json:"row_key"`
	// Entry renders the entry concerned ("" when there is none).
	Entry  string `json:"entry,omitempty"`
	Detail string `json:"detail"`
}

// String renders the problem for reports.
func (p IndexProblem) String() string {
	s := p.RowKey + " (" + p.Source + ")"
	if p.Entry != "" {
		s += " entry " + p.Entry
	}
	return s + ": " + p.Detail
}

// IndexCheckInput is what CheckIndex judges.
type IndexCheckInput struct {
	// Ops are the run's operations: Workload "index", F "put" (one per cell, Body the JSON
	// {"k","n","w"}) and F "query" (Extra an IndexQueryRecord) are read.
	Ops []Op
	// Entries are every entry of the index, read under every shard value after the catch-up
	// (nil when the read failed: the checks that need it are left out and the result is
	// invalid).
	Entries []IndexedEntry
	// Stored are the datastore's cells of the index's column on one replica of each shard,
	// read after the catch-up (nil: the comparison with the stored cells is left out).
	Stored []StoredCell
	// CaughtUp says whether the index reached lag 0 after the traffic stopped; CatchUp is how
	// long that took, Bound the most it may take.
	CaughtUp       bool
	CatchUp, Bound time.Duration
	// MaxLag is the highest lag read during the traffic (a figure only).
	MaxLag int64
}

// IndexResult is the verdict of CheckIndex. Cell counts are per cell written; problem lists
// hold one element per row or entry, sorted.
type IndexResult struct {
	// Rows counts the row keys written; Acknowledged, Indeterminate and Failed their cells by
	// outcome; KChanges the cells written (any outcome) whose k differs from their row's first
	// cell's.
	Rows          int `json:"rows"`
	Acknowledged  int `json:"acknowledged"`
	Indeterminate int `json:"indeterminate"`
	Failed        int `json:"failed"`
	KChanges      int `json:"k_changes"`
	// Entries counts the entries of the full read, Marked those with a violation mark, and
	// StoredRows the rows of the stored cells compared with them.
	Entries    int `json:"entries"`
	Marked     int `json:"marked"`
	StoredRows int `json:"stored_rows"`
	// Queries counts the queries during the run that answered, QueryErrors those that did
	// not (allowed under faults), QueryEntries the entries they returned.
	Queries      int `json:"queries"`
	QueryErrors  int `json:"query_errors"`
	QueryEntries int `json:"query_entries"`
	// CatchUpSeconds is how long the index took to reach lag 0 after the traffic stopped;
	// BoundSeconds the most allowed; CaughtUp false if it did not within the bound's wait.
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	BoundSeconds   float64 `json:"bound_seconds"`
	CaughtUp       bool    `json:"caught_up"`
	// MaxLagCells is the highest lag of the index read during the traffic.
	MaxLagCells int64 `json:"max_lag_cells"`

	// Lost: rows with an acknowledged cell and no entry in the full read.
	Lost []IndexProblem `json:"lost,omitempty"`
	// Stale: entries whose n is below the n of their row's highest acknowledged cell.
	Stale []IndexProblem `json:"stale,omitempty"`
	// Unexpected: entries of rows never written, or written only by writes that certainly
	// failed.
	Unexpected []IndexProblem `json:"unexpected,omitempty"`
	// Invented: entries whose (n, w) is not the body of a cell of the row that may have been
	// written, whose k was never written for the row, or whose fields do not decode.
	Invented []IndexProblem `json:"invented,omitempty"`
	// Duplicated: rows with more than one entry (across shard values, or twice in one answer).
	Duplicated []IndexProblem `json:"duplicated,omitempty"`
	// Misplaced: entries found under another shard value than their k, or whose k cannot be
	// that of the row's first appended cell (the acknowledged cell with the lowest ref key, or
	// an indeterminate one before it).
	Misplaced []IndexProblem `json:"misplaced,omitempty"`
	// Marks: wrong violation marks: a mark on a row none of whose cells changed k, or no mark
	// (or a mark below its added_id) on a row with an acknowledged cell that changed it.
	Marks []IndexProblem `json:"marks,omitempty"`
	// Diverged: entries that are not what the stored cells give (k of the row's first appended
	// cell, n and w of its highest ref key, the mark of its last cell with another k), stored
	// rows without an entry, entries of rows without stored cells.
	Diverged []IndexProblem `json:"diverged,omitempty"`
	// Late says why the catch-up failed ("" when the index caught up within the bound).
	Late string `json:"late,omitempty"`
	// Problems are the workload's other findings (a read that failed, replicas that differ).
	Problems []string `json:"problems,omitempty"`
	// Valid is true when every list above is empty, Late is "" and the full read was made.
	Valid bool `json:"valid"`
}

// indexCell is one cell of the index workload as the history records it.
type indexCell struct {
	ref     int64
	k, w    string
	n       int64
	outcome Outcome
	addedID int64
}

// indexRow is what the history says of one row: its cells by ascending ref key.
type indexRow struct {
	cells []indexCell
}

// maybe reports whether the cell may have been written (acknowledged or indeterminate).
func (c indexCell) maybe() bool { return c.outcome == OK || c.outcome == Info }

// attempted reports whether any cell of the row may have been written.
func (r *indexRow) attempted() bool {
	return slices.ContainsFunc(r.cells, indexCell.maybe)
}

// body reports whether (n, w) is the body of a cell of the row that may have been written.
func (r *indexRow) body(n int64, w string) bool {
	return slices.ContainsFunc(r.cells, func(c indexCell) bool { return c.maybe() && c.n == n && c.w == w })
}

// wroteK reports whether a cell of the row that may have been written has k.
func (r *indexRow) wroteK(k string) bool {
	return slices.ContainsFunc(r.cells, func(c indexCell) bool { return c.maybe() && c.k == k })
}

// highestAcked is the acknowledged cell with the highest ref key (ok false: none).
func (r *indexRow) highestAcked() (indexCell, bool) {
	for i := len(r.cells) - 1; i >= 0; i-- {
		if r.cells[i].outcome == OK {
			return r.cells[i], true
		}
	}
	return indexCell{}, false
}

// firstKs are the k values the row's first appended cell can have. A row's cells are written
// one after the other by one worker, each invoked after the previous one completed: so no cell
// invoked after an acknowledged one can be appended before it, and the first appended cell is
// the acknowledged cell with the lowest ref key or an indeterminate cell before it (any
// indeterminate cell when none was acknowledged).
func (r *indexRow) firstKs() []string {
	var ks []string
	for _, c := range r.cells {
		switch c.outcome {
		case Info:
			ks = append(ks, c.k)
		case OK:
			return append(ks, c.k)
		}
	}
	return ks
}

// parseIndexBody decodes a body of the index workload, {"k": string, "n": int, "w": string}.
func parseIndexBody(body string) (k string, n int64, w string, err error) {
	var b struct {
		K *string `json:"k"`
		N *int64  `json:"n"`
		W *string `json:"w"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		return "", 0, "", err
	}
	if b.K == nil || b.N == nil || b.W == nil {
		return "", 0, "", fmt.Errorf("body %s lacks k, n or w", body)
	}
	return *b.K, *b.N, *b.W, nil
}

// CheckIndex checks the index workload's index against its writes, its queries during the run,
// the stored cells and the catch-up. The rules (see jepsen/DESIGN.md):
//
//  1. every acknowledged cell is reflected: its row has an entry whose n is at least the n of
//     the row's highest acknowledged cell (an indeterminate later cell's values are allowed);
//     else lost or stale;
//  2. no entry, in the full read or in a query during the run, belongs to a row never written
//     (unexpected), and its (n, w) is the body of a cell of its row that may have been written
//     and its k one written for the row (else invented);
//  3. a row has one entry across every shard value (else duplicated), found under its own k,
//     and that k is one the row's first appended cell can have (else misplaced); a row with an
//     acknowledged cell of another k is marked, at that cell's added_id or later, and a row
//     without any cell of another k is not (else marks);
//  4. the index caught up within the bound after the traffic stopped (else late);
//
// and, when the stored cells are given, every entry is what they give (else diverged).
func CheckIndex(in IndexCheckInput) IndexResult {
	res := IndexResult{CatchUpSeconds: in.CatchUp.Seconds(), BoundSeconds: in.Bound.Seconds(), CaughtUp: in.CaughtUp, MaxLagCells: in.MaxLag}
	rows := map[string]*indexRow{}
	var queries []Op
	for _, o := range in.Ops {
		if o.Workload != "index" {
			continue
		}
		switch o.F {
		case "put":
			k, n, w, err := parseIndexBody(o.Body)
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("op %d wrote an unreadable body: %v", o.Index, err))
				continue
			}
			r := rows[o.RowKey]
			if r == nil {
				r = &indexRow{}
				rows[o.RowKey] = r
			}
			r.cells = append(r.cells, indexCell{ref: o.RefKey, k: k, n: n, w: w, outcome: o.Outcome, addedID: o.AddedID})
			switch o.Outcome {
			case OK:
				res.Acknowledged++
			case Info:
				res.Indeterminate++
			default:
				res.Failed++
			}
		case "query":
			if o.Outcome != OK {
				res.QueryErrors++
				continue
			}
			res.Queries++
			queries = append(queries, o)
		}
	}
	res.Rows = len(rows)
	for _, r := range rows {
		sort.Slice(r.cells, func(i, j int) bool { return r.cells[i].ref < r.cells[j].ref })
		for _, c := range r.cells[1:] {
			if c.k != r.cells[0].k {
				res.KChanges++
			}
		}
	}

	// Rules 2 and 3 on one entry, wherever it was seen; reports whether it is sound enough for
	// the later rules (its row was written and its k is the row's).
	judge := func(source string, e IndexedEntry) bool {
		p := func(detail string, args ...any) IndexProblem {
			return IndexProblem{Source: source, RowKey: e.RowKey, Entry: e.String(), Detail: fmt.Sprintf(detail, args...)}
		}
		r := rows[e.RowKey]
		switch {
		case r == nil:
			res.Unexpected = append(res.Unexpected, p("no cell of this row was ever written"))
			return false
		case !r.attempted():
			res.Unexpected = append(res.Unexpected, p("only writes that certainly failed wrote this row"))
			return false
		}
		ok := true
		if e.Bad != "" {
			res.Invented = append(res.Invented, p("fields do not decode: %s", e.Bad))
			return false
		}
		if !r.body(e.N, e.W) {
			res.Invented = append(res.Invented, p("n %d, w %s is the body of no cell of the row that may have been written", e.N, e.W))
			ok = false
		}
		switch {
		case !r.wroteK(e.K):
			res.Invented = append(res.Invented, p("k %s was never written for this row (written: %s)", e.K, strings.Join(r.ks(), ", ")))
			ok = false
		case e.K != e.ShardValue:
			res.Misplaced = append(res.Misplaced, p("k %s found under shard value %s", e.K, e.ShardValue))
			ok = false
		case !slices.Contains(r.firstKs(), e.K):
			res.Misplaced = append(res.Misplaced, p("k %s cannot be the k of the row's first appended cell (%s)", e.K, strings.Join(r.firstKs(), " or ")))
			ok = false
		}
		return ok
	}

	for _, q := range queries {
		var rec IndexQueryRecord
		if err := json.Unmarshal(q.Extra, &rec); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("query op %d: unreadable record: %v", q.Index, err))
			continue
		}
		source := fmt.Sprintf("query op %d", q.Index)
		seen := map[string]bool{}
		for _, e := range rec.Entries {
			res.QueryEntries++
			if seen[e.RowKey] {
				res.Duplicated = append(res.Duplicated, IndexProblem{Source: source, RowKey: e.RowKey, Entry: e.String(),
					Detail: "the row twice in one answer"})
			}
			seen[e.RowKey] = true
			judge(source, e)
		}
	}

	if in.Entries == nil {
		res.Problems = append(res.Problems, "the index was not read after the catch-up")
	}
	byRow := map[string][]IndexedEntry{}
	for _, e := range in.Entries {
		res.Entries++
		if e.Violation != 0 {
			res.Marked++
		}
		byRow[e.RowKey] = append(byRow[e.RowKey], e)
	}
	for rk, es := range byRow {
		if len(es) > 1 {
			var where []string
			for _, e := range es {
				where = append(where, e.String())
			}
			res.Duplicated = append(res.Duplicated, IndexProblem{Source: "read", RowKey: rk,
				Detail: fmt.Sprintf("%d entries: %s", len(es), strings.Join(where, "; "))})
		}
		for _, e := range es {
			if !judge("read", e) {
				continue
			}
			r := rows[rk]
			p := func(detail string, args ...any) IndexProblem {
				return IndexProblem{Source: "read", RowKey: rk, Entry: e.String(), Detail: fmt.Sprintf(detail, args...)}
			}
			if c, ok := r.highestAcked(); ok && e.N < c.n {
				res.Stale = append(res.Stale, p("n %d, but the cell at ref key %d with n %d was acknowledged", e.N, c.ref, c.n))
			}
			// Marks: a cell with another k than the entry's is a violation of the shard field.
			var changed, ackedChange bool
			var ackedChangeID int64
			for _, c := range r.cells {
				if !c.maybe() || c.k == e.K {
					continue
				}
				changed = true
				if c.outcome == OK {
					ackedChange = true
					ackedChangeID = max(ackedChangeID, c.addedID)
				}
			}
			switch {
			case e.Violation != 0 && !changed:
				res.Marks = append(res.Marks, p("marked, but no cell of the row has another k than %s", e.K))
			case ackedChange && e.Violation == 0:
				res.Marks = append(res.Marks, p("not marked, but an acknowledged cell changed k (added_id %d)", ackedChangeID))
			case ackedChange && e.Violation < ackedChangeID:
				res.Marks = append(res.Marks, p("marked at added_id %d, before the acknowledged cell that changed k (added_id %d)", e.Violation, ackedChangeID))
			}
		}
	}
	if in.Entries != nil {
		for rk, r := range rows {
			if c, ok := r.highestAcked(); ok && len(byRow[rk]) == 0 {
				res.Lost = append(res.Lost, IndexProblem{Source: "history", RowKey: rk,
					Detail: fmt.Sprintf("acknowledged (ref key %d, n %d, k %s), no entry under any shard value", c.ref, c.n, c.k)})
			}
		}
	}

	if in.Stored != nil && in.Entries != nil {
		res.StoredRows, res.Diverged = compareStored(in.Stored, byRow)
	}

	switch {
	case !in.CaughtUp:
		res.Late = fmt.Sprintf("the index did not catch up within %s of the traffic's end", in.Bound)
	case in.CatchUp > in.Bound:
		res.Late = fmt.Sprintf("the index caught up %.1fs after the traffic's end, beyond the bound of %s", in.CatchUp.Seconds(), in.Bound)
	}
	for _, ps := range [][]IndexProblem{res.Lost, res.Stale, res.Unexpected, res.Invented, res.Duplicated, res.Misplaced, res.Marks, res.Diverged} {
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].RowKey != ps[j].RowKey {
				return ps[i].RowKey < ps[j].RowKey
			}
			return ps[i].Source < ps[j].Source
		})
	}
	res.Valid = len(res.Lost)+len(res.Stale)+len(res.Unexpected)+len(res.Invented)+len(res.Duplicated)+
		len(res.Misplaced)+len(res.Marks)+len(res.Diverged) == 0 && res.Late == "" && len(res.Problems) == 0
	return res
}

// ks lists the k values of the row's cells that may have been written, once each.
func (r *indexRow) ks() []string {
	var out []string
	for _, c := range r.cells {
		if c.maybe() && !slices.Contains(out, c.k) {
			out = append(out, c.k)
		}
	}
	return out
}

// compareStored compares the entries (by row) with what the stored cells give: the k of each
// row's first appended cell (lowest added_id), the n and w of its highest ref key, and the mark
// of its last cell (highest added_id) with another k than the first. It returns the rows stored
// and the differences.
func compareStored(stored []StoredCell, byRow map[string][]IndexedEntry) (int, []IndexProblem) {
	type want struct {
		first, latest StoredCell
		mark          int64
		cells         []StoredCell
	}
	rows := map[string]*want{}
	for _, c := range stored {
		w := rows[c.RowKey]
		if w == nil {
			w = &want{first: c, latest: c}
			rows[c.RowKey] = w
		}
		if c.AddedID < w.first.AddedID {
			w.first = c
		}
		if c.RefKey > w.latest.RefKey {
			w.latest = c
		}
		w.cells = append(w.cells, c)
	}
	var out []IndexProblem
	for rk, w := range rows {
		k, _, _, err := parseIndexBody(w.first.Body)
		if err != nil {
			out = append(out, IndexProblem{Source: "stored", RowKey: rk, Detail: fmt.Sprintf("stored cell at added_id %d: %v", w.first.AddedID, err)})
			continue
		}
		for _, c := range w.cells {
			if ck, _, _, err := parseIndexBody(c.Body); err == nil && ck != k {
				w.mark = max(w.mark, c.AddedID)
			}
		}
		_, n, wr, err := parseIndexBody(w.latest.Body)
		if err != nil {
			out = append(out, IndexProblem{Source: "stored", RowKey: rk, Detail: fmt.Sprintf("stored cell at added_id %d: %v", w.latest.AddedID, err)})
			continue
		}
		es := byRow[rk]
		if len(es) == 0 {
			out = append(out, IndexProblem{Source: "read", RowKey: rk,
				Detail: fmt.Sprintf("stored (first cell k %s at added_id %d, latest n %d), no entry", k, w.first.AddedID, n)})
			continue
		}
		for _, e := range es {
			var diffs []string
			if e.K != k {
				diffs = append(diffs, fmt.Sprintf("k %s, the first stored cell (added_id %d) has %s", e.K, w.first.AddedID, k))
			}
			if e.N != n || e.W != wr {
				diffs = append(diffs, fmt.Sprintf("n %d w %s, the stored cell with the highest ref key (%d) has n %d w %s", e.N, e.W, w.latest.RefKey, n, wr))
			}
			if e.Violation != w.mark {
				diffs = append(diffs, fmt.Sprintf("mark %d, the stored cells give %d", e.Violation, w.mark))
			}
			if len(diffs) > 0 {
				out = append(out, IndexProblem{Source: "read", RowKey: rk, Entry: e.String(), Detail: strings.Join(diffs, "; ")})
			}
		}
	}
	for rk, es := range byRow {
		if rows[rk] == nil {
			out = append(out, IndexProblem{Source: "read", RowKey: rk, Entry: es[0].String(), Detail: "no cell of the row is stored"})
		}
	}
	return len(rows), out
}
