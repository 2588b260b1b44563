package jepsen

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cread builds a cas workload read of register "r" that found ref (0: no cell) with body.
func cread(process int, invoke, complete int64, ref int64, body string) Op {
	return Op{Process: process, Workload: "cas", F: "read", RowKey: "r", ColumnKey: "REG", Invoke: invoke, Complete: complete,
		Outcome: OK, Found: ref > 0, ReadRef: ref, ReadBody: body}
}

// ccas builds a cas of register "r" writing ref key expect+1 with body, answered status (ok),
// or with outcome Fail or Info when status is "".
func ccas(process int, invoke, complete int64, expect int64, body string, outcome Outcome, status string) Op {
	return Op{Process: process, Workload: "cas", F: "cas", RowKey: "r", ColumnKey: "REG", RefKey: expect + 1, Body: body,
		Invoke: invoke, Complete: complete, Outcome: outcome, Status: status}
}

// refused builds a cas answered 412 reporting latest (nil: no cell).
func refused(process int, invoke, complete int64, expect int64, body string, latest *int64) Op {
	o := ccas(process, invoke, complete, expect, body, OK, "precondition_failed")
	o.Extra, _ = json.Marshal(casExtra{LatestRefKey: latest})
	return o
}

func ptr(n int64) *int64 { return &n }

func checkCas(t *testing.T, ops []Op) porcupine.CheckResult {
	t.Helper()
	return checkPorcupine(CasModel, CasOperations, ops)
}

func TestCasModel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"sequential cas and reads", []Op{
			cread(0, 0, 10, 0, ""),
			ccas(0, 20, 30, 0, `{"v":1}`, OK, "created"),
			cread(1, 40, 50, 1, `{"v":1}`),
			ccas(1, 60, 70, 1, `{"v":2}`, OK, "created"),
			refused(0, 80, 90, 1, `{"v":3}`, ptr(2)),
			cread(0, 100, 110, 2, `{"v":2}`),
		}, porcupine.Ok},
		{"concurrent cas on one ref key: one wins, the other is refused", []Op{
			ccas(0, 0, 50, 0, `{"v":1}`, OK, "created"),
			refused(1, 10, 40, 0, `{"v":2}`, ptr(1)),
			cread(2, 60, 70, 1, `{"v":1}`),
		}, porcupine.Ok},
		{"lost update: two cas succeed on the same expected ref key", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			ccas(1, 20, 30, 0, `{"v":2}`, OK, "created"),
		}, porcupine.Illegal},
		{"lost update, concurrent: both succeed from ref key 1", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			ccas(1, 20, 50, 1, `{"v":2}`, OK, "created"),
			ccas(2, 25, 45, 1, `{"v":3}`, OK, "created"),
		}, porcupine.Illegal},
		{"stale read after a cas", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			cread(1, 20, 30, 0, ""),
		}, porcupine.Illegal},
		{"refused although the condition held", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			refused(1, 20, 30, 1, `{"v":2}`, ptr(1)),
		}, porcupine.Illegal},
		{"refused reporting a latest ref key that is not the register's", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			ccas(0, 20, 30, 1, `{"v":2}`, OK, "created"),
			refused(1, 40, 50, 0, `{"v":3}`, ptr(1)),
		}, porcupine.Illegal},
		{"refused with no cell reported while one is stored", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			refused(1, 20, 30, 5, `{"v":2}`, nil),
		}, porcupine.Illegal},
		{"indeterminate cas that took effect late", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, Info, ""),
			cread(1, 20, 30, 0, ""),
			cread(1, 40, 50, 1, `{"v":1}`),
		}, porcupine.Ok},
		{"indeterminate cas that never took effect", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, Info, ""),
			ccas(1, 20, 30, 0, `{"v":2}`, OK, "created"),
			cread(1, 40, 50, 1, `{"v":2}`),
		}, porcupine.Ok},
		{"indeterminate cas seen, then unseen", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, Info, ""),
			cread(1, 20, 30, 1, `{"v":1}`),
			cread(1, 40, 50, 0, ""),
		}, porcupine.Illegal},
		{"unavailable cas (certainly not applied) seen by a read", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, Fail, ""),
			cread(1, 20, 30, 1, `{"v":1}`),
		}, porcupine.Illegal},
		{"unavailable cas dropped", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, Fail, ""),
			cread(1, 20, 30, 0, ""),
		}, porcupine.Ok},
		{"exists answered to the call that stored it", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "exists"),
			cread(1, 20, 30, 1, `{"v":1}`),
		}, porcupine.Ok},
		{"read of a body never written", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			cread(1, 20, 30, 1, `{"v":9}`),
		}, porcupine.Illegal},
		{"conflict on a ref key that holds another body", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
			ccas(1, 20, 30, 0, `{"v":2}`, OK, "conflict"),
		}, porcupine.Ok},
		{"conflict with nothing stored", []Op{
			ccas(0, 0, 10, 0, `{"v":1}`, OK, "conflict"),
		}, porcupine.Illegal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, checkCas(t, tc.ops), "check")
		})
	}
}

// CheckCas counts the outcomes, and in async mode checks the registers touched by a failover
// window apart: a lost update there is reported, not a violation.
func TestCheckCas(t *testing.T) {
	t.Parallel()
	other := func(o Op) Op { o.RowKey = "s"; return o }
	ops := []Op{
		ccas(0, 0, 10, 0, `{"v":1}`, OK, "created"),
		refused(1, 0, 10, 0, `{"v":2}`, ptr(1)),
		ccas(2, 0, 10, 0, `{"v":3}`, Fail, ""),
		ccas(3, 0, 10, 0, `{"v":4}`, Info, ""),
		cread(4, 20, 30, 1, `{"v":1}`),
		// Register s: a lost update between 100 and 130.
		other(ccas(0, 100, 110, 0, `{"v":5}`, OK, "created")),
		other(ccas(1, 120, 130, 0, `{"v":6}`, OK, "created")),
	}
	for i := range ops {
		ops[i].Index = i
	}
	env := &CheckEnv{CheckTimeout: 10 * time.Second}

	res := CheckCas(ops, env, nil)
	assert.Equal(t, "no", res.Linearizability.Result, "raft mode: the lost update on s is a violation")
	assert.Nil(t, res.Excused, "raft mode: nothing excused")
	assert.Equal(t, [6]int{1, 3, 1, 0, 1, 1}, [6]int{res.Reads, res.Written, res.Refused, res.Conflicts, res.Unavailable, res.Unknown},
		"reads, written, refused, conflicts, unavailable, unknown")

	res = CheckCas(ops, env, []Window{{Start: 115, End: 200, Why: "failover of cluster c0"}})
	assert.Equal(t, "yes", res.Linearizability.Result, "register r, outside the window")
	require.NotNil(t, res.Excused, "register s overlaps the window")
	assert.Equal(t, "no", res.Excused.Result, "the excused register is still checked and reported")
	assert.Equal(t, 1, res.Excused.Registers)
}

// TestCheckBoundedReads: the bounded-read checker catches a read that misses a write
// acknowledged more than the bound before it and a read of a value never written, and accepts
// a read that misses only a write acknowledged within the bound, refused reads, and reads of
// an unknown write's value.
func TestCheckBoundedReads(t *testing.T) {
	sec := int64(time.Second)
	reg := func(o Op) Op { o.Workload, o.RowKey, o.ColumnKey = "cas", "r1", "REG"; return o }
	cas := func(i int, ref int64, body string, invoke, complete int64, outcome Outcome, status string) Op {
		return reg(Op{Index: i, F: "cas", RefKey: ref, Body: body, Invoke: invoke, Complete: complete, Outcome: outcome, Status: status})
	}
	read := func(i int, ref int64, body string, invoke int64, outcome Outcome) Op {
		return reg(Op{Index: i, F: "bounded-read", Found: ref > 0, ReadRef: ref, ReadBody: body, Invoke: invoke, Complete: invoke + sec/100, Outcome: outcome})
	}
	writes := []Op{
		cas(0, 1, `{"v":1}`, 0, sec/10, OK, "created"),
		cas(1, 2, `{"v":2}`, 2*sec, 2*sec+sec/10, OK, "created"),
		cas(2, 3, `{"v":3}`, 5*sec, 5*sec+sec/10, Info, ""),
	}
	ok := append(slices.Clone(writes),
		read(3, 1, `{"v":1}`, 2*sec+sec/2, OK), // write 2 acknowledged 0.4s before: within the bound
		read(4, 2, `{"v":2}`, 4*sec, OK),
		read(5, 3, `{"v":3}`, 6*sec, OK), // the unknown write's value
		read(6, 0, "", 7*sec, Info),      // refused
	)
	res := CheckBoundedReads(ok, time.Second)
	assert.Equal(t, 3, res.Reads)
	assert.Equal(t, 1, res.Refused)
	assert.Empty(t, res.Stale)
	assert.Empty(t, res.Invented)

	bad := append(slices.Clone(writes),
		read(3, 1, `{"v":1}`, 4*sec, OK), // write 2 acknowledged 1.9s before: stale
		read(4, 2, `{"v":9}`, 4*sec, OK), // no write wrote that body
		read(5, 0, "", 3*sec+sec/2, OK),  // no cell, though writes 1 and 2 were acknowledged long before
	)
	res = CheckBoundedReads(bad, time.Second)
	assert.Len(t, res.Stale, 2, "%q", res.Stale)
	assert.Len(t, res.Invented, 1, "%q", res.Invented)
}
