package jepsen

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hop builds a cells operation on register row/col for a synthetic history.
func hop(process int, f string, ref int64, body string, invoke, complete int64, outcome Outcome) Op {
	return Op{Process: process, Workload: "cells", F: f, RowKey: "r", ColumnKey: "A", RefKey: ref, Body: body,
		Invoke: invoke, Complete: complete, Outcome: outcome}
}

func withRead(o Op, found bool, ref int64, body string) Op {
	o.Found, o.ReadRef, o.ReadBody = found, ref, body
	return o
}

func withStatus(o Op, status string) Op {
	o.Status = status
	return o
}

func checkCells(t *testing.T, ops []Op) porcupine.CheckResult {
	t.Helper()
	return checkPorcupine(CellsModel, CellOperations, ops)
}

// checkPorcupine checks ops, turned into porcupine operations by convert, against model.
func checkPorcupine(model porcupine.Model, convert func([]Op, int64) []porcupine.Operation, ops []Op) porcupine.CheckResult {
	res, _ := porcupine.CheckOperationsVerbose(model, convert(ops, historyEnd(ops, 0)), 10*time.Second)
	return res
}

func TestCellsModel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"sequential put then reads", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "created"),
			withRead(hop(1, "get", 1, "", 20, 30, OK), true, 0, `{"v":1}`),
			withRead(hop(1, "latest", 0, "", 40, 50, OK), true, 1, `{"v":1}`),
			withStatus(hop(2, "put", 1, `{"v":1}`, 60, 70, OK), "exists"),
			withStatus(hop(2, "put", 1, `{"v":2}`, 80, 90, OK), "conflict"),
		}, porcupine.Ok},
		{"stale read: latest misses an acknowledged put", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "created"),
			withRead(hop(1, "latest", 0, "", 20, 30, OK), false, 0, ""),
		}, porcupine.Illegal},
		{"stale read: latest returns an older ref key", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "created"),
			withStatus(hop(0, "put", 2, `{"v":2}`, 20, 30, OK), "created"),
			withRead(hop(1, "latest", 0, "", 40, 50, OK), true, 1, `{"v":1}`),
		}, porcupine.Illegal},
		{"a read concurrent with the put may miss it", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 30, OK), "created"),
			withRead(hop(1, "get", 1, "", 10, 20, OK), false, 0, ""),
			withRead(hop(1, "get", 1, "", 40, 50, OK), true, 0, `{"v":1}`),
		}, porcupine.Ok},
		{"duplicated write: two creates of one ref key", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "created"),
			withStatus(hop(1, "put", 1, `{"v":1}`, 20, 30, OK), "created"),
		}, porcupine.Illegal},
		{"conflict with nothing stored", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "conflict"),
		}, porcupine.Illegal},
		{"indeterminate put that never happened", []Op{
			hop(0, "put", 1, `{"v":1}`, 0, 10, Info),
			withRead(hop(1, "latest", 0, "", 20, 30, OK), false, 0, ""),
			withRead(hop(1, "latest", 0, "", 40, 50, OK), false, 0, ""),
		}, porcupine.Ok},
		{"indeterminate put that happened late", []Op{
			hop(0, "put", 1, `{"v":1}`, 0, 10, Info),
			withRead(hop(1, "latest", 0, "", 20, 30, OK), false, 0, ""),
			withRead(hop(1, "latest", 0, "", 40, 50, OK), true, 1, `{"v":1}`),
		}, porcupine.Ok},
		{"indeterminate put seen, then unseen", []Op{
			hop(0, "put", 1, `{"v":1}`, 0, 10, Info),
			withRead(hop(1, "latest", 0, "", 20, 30, OK), true, 1, `{"v":1}`),
			withRead(hop(1, "latest", 0, "", 40, 50, OK), false, 0, ""),
		}, porcupine.Illegal},
		{"exists answered to the call that stored it (a retried attempt)", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "exists"),
			withRead(hop(1, "get", 1, "", 20, 30, OK), true, 0, `{"v":1}`),
		}, porcupine.Ok},
		{"failed put and timed-out read are dropped", []Op{
			hop(0, "put", 1, `{"v":1}`, 0, 10, Fail),
			hop(1, "get", 1, "", 0, 10, Info),
			withRead(hop(1, "latest", 0, "", 20, 30, OK), false, 0, ""),
		}, porcupine.Ok},
		{"body read differs from the body written", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "created"),
			withRead(hop(1, "get", 1, "", 20, 30, OK), true, 0, `{"v":9}`),
		}, porcupine.Illegal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, checkCells(t, tc.ops), "check")
		})
	}
}

// Registers are checked independently: a violation on one is found among clean others.
func TestCellsModelPartitions(t *testing.T) {
	t.Parallel()
	var ops []Op
	for i, row := range []string{"a", "b", "c"} {
		p := withStatus(hop(i, "put", 1, `{"v":1}`, 0, 10, OK), "created")
		p.RowKey = row
		r := withRead(hop(i, "latest", 0, "", 20, 30, OK), true, 1, `{"v":1}`)
		r.RowKey = row
		ops = append(ops, p, r)
	}
	require.Equal(t, porcupine.Ok, checkCells(t, ops), "three clean registers")
	stale := withRead(hop(9, "latest", 0, "", 40, 50, OK), false, 0, "")
	stale.RowKey = "b"
	assert.Equal(t, porcupine.Illegal, checkCells(t, append(ops, stale)), "a stale read on register b")
}

func dput(row string, ref int64, body string, outcome Outcome, addedID int64) Op {
	return Op{Workload: "durability", F: "put", RowKey: row, ColumnKey: "D", RefKey: ref, Body: body, Outcome: outcome, AddedID: addedID}
}

func stored(node string, shard int, row string, ref int64, body string, addedID int64) StoredCell {
	return StoredCell{Node: node, Shard: shard, RowKey: row, ColumnKey: "D", RefKey: ref, Body: body, AddedID: addedID}
}

func TestCheckDurability(t *testing.T) {
	t.Parallel()
	shards := map[int][]string{0: {"n1", "n2"}, 1: {"n1", "n2"}}
	ops := []Op{
		dput("a", 1, `{"x":1}`, OK, 1),
		dput("b", 1, `{"x":2}`, Info, 0),
		dput("c", 1, `{"x":3}`, Fail, 0),
		dput("d", 1, `{"x":4}`, OK, 1),
	}
	clean := func() map[string][]StoredCell {
		m := map[string][]StoredCell{}
		for _, n := range []string{"n1", "n2"} {
			m[n] = []StoredCell{stored(n, 0, "a", 1, `{"x":1}`, 1), stored(n, 0, "b", 1, `{"x":2}`, 2), stored(n, 1, "d", 1, `{"x":4}`, 1)}
		}
		return m
	}
	res := CheckDurability(ops, clean(), shards)
	require.True(t, res.Valid, "clean run: valid (%+v)", res)
	require.Equal(t, [4]int{2, 1, 1, 1}, [4]int{res.Acknowledged, res.Indeterminate, res.Recovered, res.Failed},
		"clean run: acknowledged, indeterminate, recovered, failed")

	cases := []struct {
		name   string
		mutate func(m map[string][]StoredCell)
		check  func(r DurabilityResult) bool // the violation is reported as expected
	}{
		{"lost acknowledged write", func(m map[string][]StoredCell) {
			m["n2"] = m["n2"][:2] // n2 lost d
		}, func(r DurabilityResult) bool {
			return len(r.Lost) == 1 && r.Lost[0].Node == "n2" && r.Lost[0].RowKey == "d"
		}},
		{"acknowledged write stored nowhere", func(m map[string][]StoredCell) {
			m["n1"], m["n2"] = m["n1"][:2], m["n2"][:2]
		}, func(r DurabilityResult) bool { return len(r.Lost) == 2 }},
		{"duplicated write", func(m map[string][]StoredCell) {
			for _, n := range []string{"n1", "n2"} {
				m[n] = append(m[n], stored(n, 0, "a", 1, `{"x":1}`, 3))
			}
		}, func(r DurabilityResult) bool {
			return len(r.Duplicated) == 2 && strings.Contains(r.Duplicated[0].Detail, "stored 2 times")
		}},
		{"acknowledged added_id differs from the stored one", func(m map[string][]StoredCell) {
			for _, n := range []string{"n1", "n2"} {
				m[n][0].AddedID = 7
			}
		}, func(r DurabilityResult) bool { return len(r.Duplicated) == 2 }},
		{"failed write stored", func(m map[string][]StoredCell) {
			for _, n := range []string{"n1", "n2"} {
				m[n] = append(m[n], stored(n, 1, "c", 1, `{"x":3}`, 2))
			}
		}, func(r DurabilityResult) bool {
			return len(r.Unexpected) == 2 && strings.Contains(r.Unexpected[0].Detail, "failed")
		}},
		{"cell never written", func(m map[string][]StoredCell) {
			m["n1"] = append(m["n1"], stored("n1", 1, "z", 1, `{}`, 2))
		}, func(r DurabilityResult) bool { return len(r.Unexpected) == 1 && len(r.Diverged) == 1 }},
		{"corrupted body", func(m map[string][]StoredCell) {
			m["n1"][0].Body = `{"x":100}`
		}, func(r DurabilityResult) bool { return len(r.Corrupted) == 1 && len(r.Diverged) == 1 }},
		{"replicas diverge in added_id order", func(m map[string][]StoredCell) {
			m["n2"][0].AddedID, m["n2"][1].AddedID = 2, 1
			m["n2"][0], m["n2"][1] = m["n2"][1], m["n2"][0]
		}, func(r DurabilityResult) bool {
			return len(r.Diverged) == 1 && strings.HasPrefix(r.Diverged[0], "shard 0:")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := clean()
			tc.mutate(m)
			r := CheckDurability(ops, m, shards)
			assert.False(t, r.Valid, "valid (%+v)", r)
			assert.True(t, tc.check(r), "got %+v, want it flagged", r)
		})
	}
	// A key written twice, acknowledged with one body while a write of another body ended
	// indeterminate: every replica holding the other body is corrupted, although that body was
	// written.
	t.Run("stored body of an indeterminate write, another acknowledged", func(t *testing.T) {
		t.Parallel()
		twice := append(append([]Op{}, ops...), dput("a", 1, `{"x":9}`, Info, 0))
		m := clean()
		for _, n := range []string{"n1", "n2"} {
			m[n][0].Body = `{"x":9}`
		}
		r := CheckDurability(twice, m, shards)
		assert.False(t, r.Valid, "valid (%+v)", r)
		require.Len(t, r.Corrupted, 2, "corrupted: got %+v, want a and its 2 replicas", r.Corrupted)
		assert.Equal(t, `body {"x":9}, acknowledged {"x":1}`, r.Corrupted[0].Detail)
	})
}
