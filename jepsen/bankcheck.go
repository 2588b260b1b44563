package jepsen

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// BankVersion is one stored version of a bank account: its ref key and balance.
type BankVersion struct {
	Ref     int64 `json:"ref"`
	Balance int64 `json:"balance"`
}

// BankProblems counts one kind of violation of the bank check and keeps its first examples.
type BankProblems struct {
	Count    int      `json:"count"`
	Examples []string `json:"examples,omitempty"`
}

// bankExamples is how many examples a BankProblems keeps.
const bankExamples = 10

func (p *BankProblems) add(format string, args ...any) {
	p.Count++
	if len(p.Examples) < bankExamples {
		p.Examples = append(p.Examples, fmt.Sprintf(format, args...))
	}
}

// BankResult is the bank workload's verdict (CheckBank).
type BankResult struct {
	// Accounts and Total are the accounts set up and the sum of their initial balances.
	Accounts int   `json:"accounts"`
	Total    int64 `json:"total"`
	// Reads counts the answered reads. Transfers counts the transfers tried: Committed,
	// Refused (412), Conflicts (409), Unavailable (certainly not applied), Unknown
	// (indeterminate), Invalid (400, or answered without committing).
	Reads       int `json:"reads"`
	Transfers   int `json:"transfers"`
	Committed   int `json:"committed"`
	Refused     int `json:"refused"`
	Conflicts   int `json:"conflicts"`
	Unavailable int `json:"unavailable"`
	Unknown     int `json:"unknown"`
	Invalid     int `json:"invalid"`
	// CommitRate and RefusedRate are Committed and Refused over Transfers.
	CommitRate  float64 `json:"commit_rate"`
	RefusedRate float64 `json:"refused_rate"`
	// FinalVersions counts the versions read after the heal, all accounts together.
	FinalVersions int `json:"final_versions"`

	// BadReads: a read whose total is not Total, with a negative balance, an account missing
	// or undecodable, or that is not one snapshot of one partition.
	BadReads BankProblems `json:"bad_reads"`
	// Invented: a version (read, or stored at the end) that no transfer that may have
	// committed wrote: another balance, or only transfers that certainly failed wrote it.
	Invented BankProblems `json:"invented"`
	// Torn: a read, or the stored versions, holding one write of a transfer and not the
	// other.
	Torn BankProblems `json:"torn"`
	// Stale: a read that misses a version a committed transfer or an earlier read (one that
	// completed before it was invoked) had shown: not linearizable.
	Stale BankProblems `json:"stale"`
	// LostUpdates: two transfers both answered committed that wrote the same account's ref key.
	LostUpdates BankProblems `json:"lost_updates"`
	// BadAnswers: a committed answer whose results are not the ref keys written (each the
	// ref key read plus one), or a transfer refused as invalid or answered without committing.
	BadAnswers BankProblems `json:"bad_answers"`
	// Final: the versions read after the heal are not a chain of ref keys 1, 2, ... per
	// account, miss a committed transfer's write, or end with another total or a negative
	// balance.
	Final BankProblems `json:"final"`
	// Excused (async mode): what a failover of the accounts' cluster may hide or lose,
	// reported and allowed: a stale read that overlaps a failover window or misses what was
	// shown before a failover began, a committed transfer invoked before a failover began that
	// is missing at the end, two committed transfers of one version with a failover begun
	// between their invocations; and every problem of a read invoked after a failover began,
	// and of the final versions when one did (the old master's transactions that the new one
	// lacks are replayed from the buffers cell by cell, unchecked: the guarantees hold while
	// the first master lives).
	Excused BankProblems `json:"excused"`
	// Valid is true when no violation was found.
	Valid bool `json:"valid"`
}

// violationLines describes the violations, one line per kind.
func (r BankResult) violationLines() []string {
	var out []string
	for _, k := range []struct {
		what string
		p    BankProblems
	}{{"bad reads", r.BadReads}, {"invented versions", r.Invented}, {"torn transfers", r.Torn},
		{"stale reads", r.Stale}, {"lost updates", r.LostUpdates}, {"bad answers", r.BadAnswers}, {"final state problems", r.Final}} {
		if k.p.Count > 0 {
			out = append(out, fmt.Sprintf("%d %s, first: %s", k.p.Count, k.what, k.p.Examples[0]))
		}
	}
	return out
}

// report adds a problem to p, or to Excused, with the excuse, when excuse is not "".
func (r *BankResult) report(p *BankProblems, excuse, format string, args ...any) {
	if excuse != "" {
		r.Excused.add(format+" ("+excuse+")", args...)
		return
	}
	p.add(format, args...)
}

// bankXfer is a transfer of the history that may have committed (answered committed, or of
// unknown outcome).
type bankXfer struct {
	op        Op
	t         bankTransfer
	committed bool
}

// writes returns the transfer's two writes: account, ref key, balance.
func (x *bankXfer) writes() [2]bankCell {
	return [2]bankCell{{x.t.From, x.t.FromRef + 1, x.t.FromBalance - x.t.Amount}, {x.t.To, x.t.ToRef + 1, x.t.ToBalance + x.t.Amount}}
}

// bankOrigin tells where version c comes from: found, some transfer that may have committed
// wrote it; whole, one of them whose other write visible says is there too.
type bankOrigin func(c bankCell, visible func(bankCell) bool) (found, whole bool)

// bankCell is one account's version.
type bankCell struct {
	account int
	ref     int64
	balance int64
}

type bankKey struct {
	account int
	ref     int64
}

// CheckBank checks the bank workload's operations of ops, and final, every account's versions
// read after the heal (by account, in ref key order; nil: not read):
//
//   - every answered read is one snapshot of one partition, finds every account, sums to the
//     initial total and has no negative balance (BadReads);
//   - every version read or stored is the initial balance (ref key 1) or was written by a
//     transfer that may have committed (Invented), and together with the other write of that
//     transfer (Torn: a read or the final versions that hold a transfer's debit without its
//     credit, or the reverse);
//   - reads are linearizable with the committed transfers: a read misses no version that a
//     transfer committed, or a read showed, before it was invoked (Stale);
//   - a committed transfer's ref keys are those read plus one, and no two committed transfers
//     write the same version (BadAnswers, LostUpdates);
//   - the final versions of each account are ref keys 1, 2, ... with no gap, hold every
//     committed transfer's writes, sum to the total with no negative balance (Final).
//
// windows are the failover windows of the accounts' storage cluster (async mode; nil in raft
// mode), from the old master's kill: a promoted minion may lack transactions the old master
// committed, and the reaper replays them cell by cell without their conditions, so what a
// failover explains is Excused rather than a violation (see BankResult.Excused).
func CheckBank(ops []Op, final [][]BankVersion, windows []Window) BankResult {
	var res BankResult
	initial := map[int]int64{}
	var reads []Op
	var parsed []bankRead
	writers := map[bankKey][]*bankXfer{}
	var committed []*bankXfer
	for _, o := range ops {
		if o.Workload != "bank" {
			continue
		}
		switch o.F {
		case "init":
			var in bankInit
			if json.Unmarshal(o.Extra, &in) == nil && o.Outcome == OK {
				initial[in.Account] = in.Balance
			}
		case "read":
			var r bankRead
			if o.Outcome != OK {
				continue
			}
			if err := json.Unmarshal(o.Extra, &r); err != nil {
				res.BadReads.add("read op %d: %v", o.Index, err)
				continue
			}
			reads, parsed = append(reads, o), append(parsed, r)
		case "transfer":
			res.Transfers++
			x := &bankXfer{op: o}
			if err := json.Unmarshal(o.Extra, &x.t); err != nil {
				res.BadAnswers.add("transfer op %d: %v", o.Index, err)
				continue
			}
			switch {
			case o.Outcome == Fail:
				res.Unavailable++
			case o.Outcome == Info:
				res.Unknown++
			case o.Status == "committed":
				res.Committed++
				x.committed = true
				committed = append(committed, x)
				if !slices.Equal(x.t.Results, []int64{x.t.FromRef + 1, x.t.ToRef + 1}) {
					res.BadAnswers.add("transfer op %d committed ref keys %v, want %d and %d", o.Index, x.t.Results, x.t.FromRef+1, x.t.ToRef+1)
				}
			case o.Status == "precondition_failed":
				res.Refused++
			case o.Status == "conflict":
				res.Conflicts++
			default:
				res.Invalid++
				res.BadAnswers.add("transfer op %d answered %s: %s", o.Index, o.Status, o.Error)
			}
			if o.Outcome == Info || x.committed {
				for _, c := range x.writes() {
					writers[bankKey{c.account, c.ref}] = append(writers[bankKey{c.account, c.ref}], x)
				}
			}
		}
	}
	res.Accounts = len(initial)
	for _, b := range initial {
		res.Total += b
	}
	var origin bankOrigin = func(c bankCell, visible func(bankCell) bool) (found, whole bool) {
		for _, x := range writers[bankKey{c.account, c.ref}] {
			ws := x.writes()
			if ws[0] != c && ws[1] != c {
				continue
			}
			found = true
			other := ws[1]
			if ws[1] == c {
				other = ws[0]
			}
			if visible(other) {
				return true, true
			}
		}
		return found, false
	}
	if res.Transfers > 0 {
		res.CommitRate = float64(res.Committed) / float64(res.Transfers)
		res.RefusedRate = float64(res.Refused) / float64(res.Transfers)
	}
	res.Reads = len(reads)
	if res.Accounts == 0 {
		if res.Reads > 0 || res.Transfers > 0 {
			res.BadReads.add("no account was set up")
		}
		res.Valid = res.BadReads.Count == 0 && res.BadAnswers.Count == 0
		return res
	}

	keys := make([]bankKey, 0, len(writers))
	for k := range writers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].account < keys[j].account || keys[i].account == keys[j].account && keys[i].ref < keys[j].ref
	})
	for _, k := range keys {
		xs := writers[k]
		var n []int
		first, last := int64(1<<63-1), int64(-1)
		for _, x := range xs {
			if x.committed {
				n = append(n, x.op.Index)
				first, last = min(first, x.op.Invoke), max(last, x.op.Invoke)
			}
		}
		if len(n) < 2 {
			continue
		}
		sort.Ints(n)
		msg := fmt.Sprintf("account %d ref key %d written by committed transfers %v", k.account, k.ref, n)
		if w := failoverBetween(windows, first, last); w != "" {
			res.Excused.add("%s (%s began between them)", msg, w)
		} else {
			res.LostUpdates.add("%s", msg)
		}
	}

	for i, o := range reads {
		checkBankRead(&res, o, parsed[i], initial, origin, windows)
	}
	checkBankStale(&res, reads, parsed, committed, windows)
	if final != nil {
		checkBankFinal(&res, final, initial, committed, origin, windows)
	}
	res.Valid = res.BadReads.Count+res.Invented.Count+res.Torn.Count+res.Stale.Count+res.LostUpdates.Count+
		res.BadAnswers.Count+res.Final.Count == 0
	return res
}

// checkBankRead checks one answered read: snapshot, accounts, total, balances, and that each
// version it shows comes whole from the initial state or a transfer.
//
// After a failover of the accounts' cluster began (windows) its problems are Excused: the
// old master's committed transactions the new one lacks are replayed from the buffers cell by
// cell, unchecked, so the guarantees hold only while the first master lives.
func checkBankRead(res *BankResult, o Op, r bankRead, initial map[int]int64, origin bankOrigin, windows []Window) {
	excuse := ""
	if w := failoverBetween(windows, -1<<63, o.Invoke); w != "" {
		excuse = "after the " + w
	}
	var problems []string
	if len(r.Partitions) != 1 {
		problems = append(problems, fmt.Sprintf("%d snapshots (partitions %v), want 1", len(r.Partitions), r.Partitions))
	}
	problems = append(problems, r.Bad...)
	if len(r.Refs) != len(initial) || len(r.Balances) != len(initial) {
		res.report(&res.BadReads, excuse, "read op %d: %d accounts, want %d", o.Index, len(r.Refs), len(initial))
		return
	}
	var total int64
	for a, ref := range r.Refs {
		total += r.Balances[a]
		switch {
		case ref == 0:
			problems = append(problems, fmt.Sprintf("account %d not found", a))
		case r.Balances[a] < 0:
			problems = append(problems, fmt.Sprintf("account %d negative: %d", a, r.Balances[a]))
		}
	}
	if total != res.Total {
		problems = append(problems, fmt.Sprintf("total %d, want %d (balances %v)", total, res.Total, r.Balances))
	}
	if len(problems) > 0 {
		res.report(&res.BadReads, excuse, "read op %d at %.3fs: %s", o.Index, float64(o.Invoke)/1e9, strings.Join(problems, "; "))
	}
	// A transfer's write is visible when the read shows it, or a later version of its
	// account (every later version is conditional on it).
	visible := func(c bankCell) bool {
		return c.account < len(r.Refs) && (r.Refs[c.account] > c.ref || r.Refs[c.account] == c.ref && r.Balances[c.account] == c.balance)
	}
	for a, ref := range r.Refs {
		c := bankCell{a, ref, r.Balances[a]}
		switch found, whole := origin(c, visible); {
		case ref == 0:
		case ref == 1:
			if c.balance != initial[a] {
				res.report(&res.Invented, excuse, "read op %d: account %d ref key 1 balance %d, initial %d", o.Index, a, c.balance, initial[a])
			}
		case !found:
			res.report(&res.Invented, excuse, "read op %d: account %d ref key %d balance %d, written by no transfer that may have committed", o.Index, a, ref, c.balance)
		case !whole:
			res.report(&res.Torn, excuse, "read op %d: account %d ref key %d balance %d without the transfer's other write (refs %v)", o.Index, a, ref, c.balance, r.Refs)
		}
	}
}

// failoverBetween returns the first window of windows that began in (from, to], or "".
func failoverBetween(windows []Window, from, to int64) string {
	for _, w := range windows {
		if w.Start > from && w.Start <= to {
			return w.Why
		}
	}
	return ""
}

// checkBankStale checks that each read shows, for each account, at least the ref key of every
// read that completed before it was invoked and of every committed transfer's write that did.
func checkBankStale(res *BankResult, reads []Op, parsed []bankRead, committed []*bankXfer, windows []Window) {
	type event struct {
		invoke, at int64
		refs       map[int]int64
		what       string
	}
	var events []event
	for i, o := range reads {
		m := map[int]int64{}
		for a, ref := range parsed[i].Refs {
			m[a] = ref
		}
		events = append(events, event{o.Invoke, o.Complete, m, fmt.Sprintf("read op %d", o.Index)})
	}
	for _, x := range committed {
		events = append(events, event{x.op.Invoke, x.op.Complete, map[int]int64{x.t.From: x.t.FromRef + 1, x.t.To: x.t.ToRef + 1},
			fmt.Sprintf("committed transfer op %d", x.op.Index)})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })
	order := make([]int, len(reads))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return reads[order[i]].Invoke < reads[order[j]].Invoke })
	floor, by, since := map[int]int64{}, map[int]string{}, map[int]int64{}
	next := 0
	for _, i := range order {
		o := reads[i]
		for ; next < len(events) && events[next].at < o.Invoke; next++ {
			for a, ref := range events[next].refs {
				if ref > floor[a] {
					floor[a], by[a], since[a] = ref, events[next].what, events[next].invoke
				}
			}
		}
		for a, ref := range parsed[i].Refs {
			if ref >= floor[a] {
				continue
			}
			msg := fmt.Sprintf("read op %d at %.3fs: account %d at ref key %d, but %s showed %d before", o.Index, float64(o.Invoke)/1e9, a, ref, by[a], floor[a])
			if w := overlapping(windows, o.Invoke, o.Complete); w != "" {
				res.Excused.add("%s (in the window of %s)", msg, w)
			} else if w := failoverBetween(windows, since[a], o.Invoke); w != "" {
				res.Excused.add("%s (%s began between them)", msg, w)
			} else {
				res.Stale.add("%s", msg)
			}
			break
		}
	}
}

// checkBankFinal checks the versions read after the heal.
//
// After a failover of the accounts' cluster (windows) its problems are Excused, as those of
// the reads after it (see checkBankRead).
func checkBankFinal(res *BankResult, final [][]BankVersion, initial map[int]int64, committed []*bankXfer, origin bankOrigin, windows []Window) {
	excuse := ""
	if len(windows) > 0 {
		excuse = "after the " + windows[0].Why
	}
	if len(final) != len(initial) {
		res.report(&res.Final, excuse, "%d accounts read at the end, want %d", len(final), len(initial))
		return
	}
	stored := map[bankKey]int64{}
	var total int64
	for a, vs := range final {
		for i, v := range vs {
			res.FinalVersions++
			if v.Ref != int64(i+1) {
				res.report(&res.Final, excuse, "account %d: version %d has ref key %d, want %d (ref keys advance by one)", a, i, v.Ref, i+1)
				break
			}
			stored[bankKey{a, v.Ref}] = v.Balance
		}
		if len(vs) == 0 {
			res.report(&res.Final, excuse, "account %d has no version", a)
			continue
		}
		last := vs[len(vs)-1].Balance
		total += last
		if last < 0 {
			res.report(&res.Final, excuse, "account %d ends negative: %d", a, last)
		}
	}
	if total != res.Total {
		res.report(&res.Final, excuse, "the accounts end with total %d, want %d", total, res.Total)
	}
	visible := func(c bankCell) bool {
		b, ok := stored[bankKey{c.account, c.ref}]
		return ok && b == c.balance
	}
	for a, vs := range final {
		for _, v := range vs {
			c := bankCell{a, v.Ref, v.Balance}
			found, whole := origin(c, visible)
			switch {
			case v.Ref == 1:
				if v.Balance != initial[a] {
					res.report(&res.Invented, excuse, "stored: account %d ref key 1 balance %d, initial %d", a, v.Balance, initial[a])
				}
			case !found:
				res.report(&res.Invented, excuse, "stored: account %d ref key %d balance %d, written by no transfer that may have committed", a, v.Ref, v.Balance)
			case !whole:
				res.report(&res.Torn, excuse, "stored: account %d ref key %d balance %d without the transfer's other write", a, v.Ref, v.Balance)
			}
		}
	}
	for _, x := range committed {
		for _, c := range x.writes() {
			if !visible(c) {
				b, ok := stored[bankKey{c.account, c.ref}]
				what := "missing"
				if ok {
					what = fmt.Sprintf("balance %d", b)
				}
				msg := fmt.Sprintf("committed transfer op %d lost: account %d ref key %d balance %d is %s", x.op.Index, c.account, c.ref, c.balance, what)
				if w := failoverBetween(windows, x.op.Invoke, 1<<63-1); w != "" {
					res.Excused.add("%s (%s began after it)", msg, w)
				} else {
					res.report(&res.Final, excuse, "%s", msg)
				}
			}
		}
	}
}
