package jepsen

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func binit(account int, balance int64) Op {
	return Op{Workload: "bank", F: "init", RefKey: 1, Outcome: OK, Extra: mustJSON(bankInit{Account: account, Balance: balance})}
}

// bread is an answered read of one partition's snapshot (partition 0 unless parts are given).
func bread(invoke, complete int64, refs, balances []int64, parts ...int) Op {
	if parts == nil {
		parts = []int{0}
	}
	return Op{Workload: "bank", F: "read", Invoke: invoke, Complete: complete, Outcome: OK,
		Extra: mustJSON(bankRead{Refs: refs, Balances: balances, Partitions: parts})}
}

// bxfer is a transfer of amount from account from (ref key fromRef, balance fromBal read) to
// account to; a committed one answers the ref keys written.
func bxfer(invoke, complete int64, from, to int, amount, fromRef, toRef, fromBal, toBal int64, outcome Outcome, status string) Op {
	t := bankTransfer{From: from, To: to, Amount: amount, FromRef: fromRef, ToRef: toRef, FromBalance: fromBal, ToBalance: toBal}
	if status == "committed" {
		t.Results = []int64{fromRef + 1, toRef + 1}
	}
	return Op{Workload: "bank", F: "transfer", Invoke: invoke, Complete: complete, Outcome: outcome, Status: status, Extra: mustJSON(t)}
}

// bankHistory is a clean history of 3 accounts of 100 and its final versions.
func bankHistory() ([]Op, [][]BankVersion) {
	ops := []Op{
		binit(0, 100), binit(1, 100), binit(2, 100),
		bread(10, 20, []int64{1, 1, 1}, []int64{100, 100, 100}),
		bxfer(30, 40, 0, 1, 10, 1, 1, 100, 100, OK, "committed"),          // a0 r2 90, a1 r2 110
		bxfer(35, 45, 0, 2, 5, 1, 1, 100, 100, OK, "precondition_failed"), // refused
		bread(50, 60, []int64{2, 2, 1}, []int64{90, 110, 100}),
		bxfer(70, 80, 1, 2, 5, 2, 1, 110, 100, Info, ""), // a1 r3 105, a2 r2 105: happened
		bread(75, 85, []int64{2, 2, 1}, []int64{90, 110, 100}),
		bread(90, 100, []int64{2, 3, 2}, []int64{90, 105, 105}),
		bxfer(110, 120, 2, 0, 1, 2, 2, 105, 90, Fail, ""), // certainly not applied
		bread(130, 140, []int64{2, 3, 2}, []int64{90, 105, 105}),
	}
	for i := range ops {
		ops[i].Index = i
	}
	final := [][]BankVersion{
		{{1, 100}, {2, 90}},
		{{1, 100}, {2, 110}, {3, 105}},
		{{1, 100}, {2, 105}},
	}
	return ops, final
}

func TestCheckBank(t *testing.T) {
	t.Parallel()
	ops, final := bankHistory()
	res := CheckBank(ops, final, nil)
	require.True(t, res.Valid, "clean history: got %v, want valid", res.violationLines())
	assert.Equal(t, [3]int64{3, 300, 5}, [3]int64{int64(res.Accounts), res.Total, int64(res.Reads)}, "accounts, total, reads")
	assert.Equal(t, [5]int{4, 1, 1, 1, 1}, [5]int{res.Transfers, res.Committed, res.Refused, res.Unknown, res.Unavailable},
		"transfers, committed, refused, unknown, unavailable")
	assert.InDelta(t, 0.25, res.CommitRate, 1e-9, "commit rate")
	assert.InDelta(t, 0.25, res.RefusedRate, 1e-9, "refused rate")
	assert.Equal(t, 7, res.FinalVersions)

	cases := []struct {
		name   string
		mutate func(ops []Op, final [][]BankVersion) ([]Op, [][]BankVersion)
		flag   func(r BankResult) *BankProblems // the kind of problem that must be found
		want   string                           // in its first example
	}{
		{"torn read: a transfer's credit without its debit", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			ops[9] = bread(90, 100, []int64{2, 3, 1}, []int64{90, 105, 100})
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.Torn }, "account 1 ref key 3"},
		{"torn read: the wrong total", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			ops[9] = bread(90, 100, []int64{2, 3, 1}, []int64{90, 105, 100})
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.BadReads }, "total 295, want 300"},
		{"stale read: misses a committed transfer, the total right", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			ops[6] = bread(50, 60, []int64{1, 1, 1}, []int64{100, 100, 100})
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.Stale }, "committed transfer op 4 showed 2"},
		{"stale read: goes back from an earlier read", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			ops[11] = bread(130, 140, []int64{2, 2, 1}, []int64{90, 110, 100})
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.Stale }, "read op 9 showed 3"},
		{"lost update: two committed transfers from the same version", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			x := bxfer(31, 41, 0, 2, 20, 1, 1, 100, 100, OK, "committed")
			x.Index = len(ops)
			return append(ops, x), f
		}, func(r BankResult) *BankProblems { return &r.LostUpdates }, "account 0 ref key 2 written by committed transfers [4 12]"},
		{"read of two partitions", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			ops[6] = bread(50, 60, []int64{2, 2, 1}, []int64{90, 110, 100}, 0, 1)
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.BadReads }, "2 snapshots"},
		{"a certainly failed transfer seen", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			ops[11] = bread(130, 140, []int64{3, 3, 3}, []int64{91, 105, 104})
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.Invented }, "account 0 ref key 3 balance 91"},
		{"committed answer with other ref keys", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			ops[4].Extra = mustJSON(bankTransfer{From: 0, To: 1, Amount: 10, FromRef: 1, ToRef: 1, FromBalance: 100, ToBalance: 100, Results: []int64{3, 2}})
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.BadAnswers }, "committed ref keys [3 2]"},
		{"final: a committed transfer lost", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			f[0] = f[0][:1]
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.Final }, "the accounts end with total 310"},
		{"final: a ref key skipped", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			f[0][1].Ref = 3
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.Final }, "ref keys advance by one"},
		{"final: an indeterminate transfer stored half", func(ops []Op, f [][]BankVersion) ([]Op, [][]BankVersion) {
			f[2] = f[2][:1]
			ops[9], ops[11] = bread(90, 100, []int64{2, 2, 1}, []int64{90, 110, 100}), bread(130, 140, []int64{2, 2, 1}, []int64{90, 110, 100})
			return ops, f
		}, func(r BankResult) *BankProblems { return &r.Torn }, "stored: account 1 ref key 3 balance 105 without"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ops, final := bankHistory()
			ops, final = tc.mutate(ops, final)
			r := CheckBank(ops, final, nil)
			assert.False(t, r.Valid, "valid")
			p := tc.flag(r)
			require.NotZero(t, p.Count, "got %v, want it flagged", r.violationLines())
			assert.True(t, strings.Contains(p.Examples[0], tc.want), "got %q, want it to contain %q", p.Examples[0], tc.want)
		})
	}
}

// A negative balance is found even when the total is right.
func TestCheckBankNegative(t *testing.T) {
	t.Parallel()
	ops := []Op{binit(0, 100), binit(1, 100),
		bxfer(10, 20, 0, 1, 110, 1, 1, 100, 100, OK, "committed"),
		bread(30, 40, []int64{2, 2}, []int64{-10, 210})}
	for i := range ops {
		ops[i].Index = i
	}
	r := CheckBank(ops, nil, nil)
	require.Equal(t, 1, r.BadReads.Count, "got %v, want the read flagged", r.violationLines())
	assert.Contains(t, r.BadReads.Examples[0], "account 0 negative: -10")
	assert.False(t, r.Valid)
}

// In async mode a stale read in a failover window is excused, not a violation.
func TestCheckBankExcused(t *testing.T) {
	t.Parallel()
	ops, final := bankHistory()
	ops[6] = bread(50, 60, []int64{1, 1, 1}, []int64{100, 100, 100})
	r := CheckBank(ops, final, []Window{{Start: 45, End: 70, Why: "failover of cluster c0"}})
	assert.True(t, r.Valid, "got %v, want valid", r.violationLines())
	require.Equal(t, 1, r.Excused.Count)
	assert.Contains(t, r.Excused.Examples[0], "in the window of failover of cluster c0")
}

// In async mode a failover may lose what the old master committed: a transfer committed before
// the kill, missing after the promotion and overwritten by a later one, is excused there and a
// violation without the failover.
func TestCheckBankLostInFailover(t *testing.T) {
	t.Parallel()
	ops := []Op{binit(0, 100), binit(1, 100), binit(2, 100),
		bxfer(30, 40, 0, 1, 10, 1, 1, 100, 100, OK, "committed"), // lost with the old master
		bread(80, 90, []int64{1, 1, 1}, []int64{100, 100, 100}),
		bxfer(100, 110, 0, 2, 20, 1, 1, 100, 100, OK, "committed"),
		bread(120, 130, []int64{2, 1, 2}, []int64{80, 100, 120}),
	}
	for i := range ops {
		ops[i].Index = i
	}
	final := [][]BankVersion{{{1, 100}, {2, 80}}, {{1, 100}}, {{1, 100}, {2, 120}}}

	r := CheckBank(ops, final, nil)
	assert.False(t, r.Valid, "without a failover: invalid")
	assert.Equal(t, [3]int{2, 1, 2}, [3]int{r.Stale.Count, r.LostUpdates.Count, r.Final.Count}, "stale, lost updates, final: %v", r.violationLines())

	r = CheckBank(ops, final, []Window{{Start: 45, End: 60, Why: "failover of cluster c0"}})
	assert.True(t, r.Valid, "got %v, want valid", r.violationLines())
	assert.Equal(t, 5, r.Excused.Count, "excused: %v", r.Excused.Examples)
}

// In async mode the guarantees hold while the accounts' first master lives: a torn read after
// a failover began is excused (the reaper replays the old master's cells unchecked), one before
// it is not.
func TestCheckBankAfterFailover(t *testing.T) {
	t.Parallel()
	ops, final := bankHistory()
	ops[9] = bread(90, 100, []int64{2, 3, 1}, []int64{90, 105, 100})
	final[2] = final[2][:1] // stored half too

	r := CheckBank(ops, final, []Window{{Start: 105, End: 120, Why: "failover of cluster c0"}})
	assert.False(t, r.Valid, "a torn read before the failover")
	assert.Equal(t, 1, r.Torn.Count, "torn before the failover: %v", r.violationLines())

	r = CheckBank(ops, final, []Window{{Start: 85, End: 88, Why: "failover of cluster c0"}})
	assert.True(t, r.Valid, "got %v, want valid", r.violationLines())
	require.NotZero(t, r.Excused.Count)
	assert.Contains(t, r.Excused.Examples[0], "after the failover of cluster c0")
}
