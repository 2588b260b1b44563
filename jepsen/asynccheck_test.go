package jepsen

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/topology"
)

// strong and stale mark a synthetic read's consistency.
func strong(o Op) Op { o.Consistency = "strong"; return o }
func stale(o Op) Op  { o.Consistency = "stale"; return o }

func TestCheckReadYourWrites(t *testing.T) {
	t.Parallel()
	put := withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "created")
	window := []Window{{Start: 100, End: 200, Why: "failover of cluster c0"}}
	cases := []struct {
		name                string
		ops                 []Op
		windows             []Window
		checked, bad, inWin int
	}{
		{"own write read back", []Op{put,
			strong(withRead(hop(0, "get", 1, "", 20, 30, OK), true, 0, `{"v":1}`)),
			strong(withRead(hop(0, "latest", 0, "", 40, 50, OK), true, 1, `{"v":1}`)),
		}, nil, 2, 0, 0},
		{"planted: a get misses the worker's own acknowledged write", []Op{put,
			strong(withRead(hop(0, "get", 1, "", 20, 30, OK), false, 0, "")),
		}, nil, 1, 1, 0},
		{"planted: a get reads another body", []Op{put,
			strong(withRead(hop(0, "get", 1, "", 20, 30, OK), true, 0, `{"v":2}`)),
		}, nil, 1, 1, 0},
		{"planted: a latest below the worker's own ref key", []Op{put,
			withStatus(hop(0, "put", 3, `{"v":3}`, 15, 18, OK), "exists"),
			strong(withRead(hop(0, "latest", 0, "", 20, 30, OK), true, 1, `{"v":1}`)),
		}, nil, 1, 1, 0},
		{"the same miss inside a failover window is expected", []Op{put,
			strong(withRead(hop(0, "get", 1, "", 150, 160, OK), false, 0, "")),
		}, window, 1, 0, 1},
		{"a miss overlapping the window's end is expected", []Op{put,
			strong(withRead(hop(0, "get", 1, "", 190, 260, OK), false, 0, "")),
		}, window, 1, 0, 1},
		{"planted: a miss after the window is a violation", []Op{put,
			strong(withRead(hop(0, "get", 1, "", 250, 260, OK), false, 0, "")),
		}, window, 1, 1, 0},
		{"another worker's write need not be seen", []Op{put,
			strong(withRead(hop(1, "get", 1, "", 20, 30, OK), false, 0, "")),
		}, nil, 0, 0, 0},
		{"stale reads are not checked", []Op{put,
			stale(withRead(hop(0, "get", 1, "", 20, 30, OK), false, 0, "")),
		}, nil, 0, 0, 0},
		{"a buffered write need not be visible yet", []Op{
			withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10, OK), "buffered"),
			strong(withRead(hop(0, "get", 1, "", 20, 30, OK), false, 0, "")),
		}, nil, 0, 0, 0},
		{"an indeterminate write need not be visible", []Op{
			hop(0, "put", 1, `{"v":1}`, 0, 10, Info),
			strong(withRead(hop(0, "get", 1, "", 20, 30, OK), false, 0, "")),
		}, nil, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := CheckReadYourWrites(tc.ops, tc.windows)
			assert.Equal(t, [3]int{tc.checked, tc.bad, tc.inWin}, [3]int{res.Checked, len(res.Violations), len(res.Expected)},
				"reads checked, violations, misses expected in a window (%+v)", res)
		})
	}
}

func finalCell(ref int64, body string) StoredCell {
	return StoredCell{Node: StrongReplica, RowKey: "r", ColumnKey: "A", RefKey: ref, Body: body}
}

func TestCheckAsyncCells(t *testing.T) {
	t.Parallel()
	created := func(ref int64, body string, inv, comp int64) Op {
		return withStatus(hop(0, "put", ref, body, inv, comp, OK), "created")
	}
	buffered := func(ref int64, body string, inv, comp int64) Op {
		return withStatus(hop(1, "put", ref, body, inv, comp, OK), "buffered")
	}
	type want struct{ lost, corrupted, unexpected, conflicting, bufConflicts, phantom int }
	cases := []struct {
		name  string
		ops   []Op
		final []StoredCell
		want  want
	}{
		{"clean: acknowledged and buffered cells stored", []Op{
			created(1, `{"v":1}`, 0, 10), buffered(2, `{"v":2}`, 0, 10),
			withStatus(hop(2, "put", 1, `{"v":9}`, 20, 30, OK), "conflict"),
			hop(2, "put", 3, `{"v":3}`, 0, 10, Info),
		}, []StoredCell{finalCell(1, `{"v":1}`), finalCell(2, `{"v":2}`)}, want{}},
		{"planted: an acknowledged cell lost", []Op{created(1, `{"v":1}`, 0, 10)}, nil, want{lost: 1}},
		{"planted: a buffered cell lost", []Op{buffered(1, `{"v":1}`, 0, 10)}, nil, want{lost: 1}},
		{"a buffered body replaced by an earlier one is a buffered conflict", []Op{
			hop(2, "put", 1, `{"v":1}`, 0, 10, Info), buffered(1, `{"v":2}`, 20, 30),
		}, []StoredCell{finalCell(1, `{"v":1}`)}, want{bufConflicts: 1}},
		{"planted: a buffered body replaced by one written after it is lost", []Op{
			buffered(1, `{"v":2}`, 0, 10), hop(2, "put", 1, `{"v":1}`, 20, 30, Info),
		}, []StoredCell{finalCell(1, `{"v":1}`)}, want{lost: 1}},
		{"planted: a body never written", []Op{created(1, `{"v":1}`, 0, 10)}, []StoredCell{finalCell(1, `{"v":7}`)}, want{corrupted: 1}},
		{"planted: another body than the acknowledged one", []Op{
			created(1, `{"v":1}`, 0, 10), hop(2, "put", 1, `{"v":2}`, 0, 10, Info),
		}, []StoredCell{finalCell(1, `{"v":2}`)}, want{corrupted: 1}},
		{"planted: a cell only a failed put wrote", []Op{hop(0, "put", 1, `{"v":1}`, 0, 10, Fail)},
			[]StoredCell{finalCell(1, `{"v":1}`)}, want{unexpected: 1}},
		{"planted: two bodies acknowledged", []Op{
			created(1, `{"v":1}`, 0, 10), withStatus(hop(2, "put", 1, `{"v":2}`, 20, 30, OK), "exists"),
		}, []StoredCell{finalCell(1, `{"v":1}`)}, want{conflicting: 1, corrupted: 0}},
		{"planted: a stale read of a body never written", []Op{
			created(1, `{"v":1}`, 0, 10),
			stale(withRead(hop(3, "get", 1, "", 20, 30, OK), true, 0, `{"v":5}`)),
		}, []StoredCell{finalCell(1, `{"v":1}`)}, want{phantom: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := CheckAsyncCells(tc.ops, tc.final, nil)
			got := want{len(r.Lost), len(r.Corrupted), len(r.Unexpected), len(r.Conflicting), len(r.BufferedConflicts), len(r.Phantom)}
			require.Equal(t, tc.want, got, "problems of each kind (%+v)", r)
			// Buffered conflicts alone leave the run valid.
			assert.Equal(t, tc.want == want{} || tc.want == want{bufConflicts: tc.want.bufConflicts}, r.Valid, "valid with %+v", got)
		})
	}
}

func TestStaleness(t *testing.T) {
	t.Parallel()
	ms := int64(1e6)
	ops := []Op{
		withStatus(hop(0, "put", 1, `{"v":1}`, 0, 10*ms, OK), "created"),
		stale(withRead(hop(1, "get", 1, "", 5*ms, 6*ms, OK), false, 0, "")),     // before the acknowledgement: not eligible
		stale(withRead(hop(1, "get", 1, "", 110*ms, 111*ms, OK), false, 0, "")), // missed, 100 ms old
		stale(withRead(hop(1, "get", 1, "", 510*ms, 511*ms, OK), false, 0, "")), // missed, 500 ms old
		stale(withRead(hop(1, "get", 1, "", 600*ms, 601*ms, OK), true, 0, `{"v":1}`)),
		stale(withRead(hop(1, "get", 2, "", 600*ms, 601*ms, OK), false, 0, "")), // never written
	}
	s := CheckAsyncCells(ops, []StoredCell{finalCell(1, `{"v":1}`)}, nil).Stale
	require.Equal(t, [3]int{5, 3, 2}, [3]int{s.Reads, s.Eligible, s.Missed}, "stale reads, eligible, missed")
	assert.Equal(t, 500.0, s.AgeMaxMs, "age max (ms)")
	assert.Contains(t, []float64{100, 500}, s.AgeP50Ms, "age p50 (ms): one of the two misses")
}

// An acknowledged durability cell stored under another added_id is allowed (renumbered) only
// when its cluster failed over after the write was invoked.
func TestSplitRenumbered(t *testing.T) {
	t.Parallel()
	ds := &topology.DatastoreSpec{Name: "durability", Partitions: []topology.PartitionSpec{
		{ID: 0, FirstShard: 0, LastShard: 7, Cluster: "c0"}, {ID: 1, FirstShard: 8, LastShard: 15, Cluster: "c1"}}}
	op := func(row string, invoke, complete int64) Op {
		return Op{Workload: "durability", F: "put", RowKey: row, ColumnKey: "D", RefKey: 1, Body: "{}", Outcome: OK, Status: "created",
			AddedID: 5, Invoke: invoke, Complete: complete}
	}
	// a: answered after the kill (at 100), invoked before it: the old master may have stored it.
	ops := []Op{op("a", 90, 150), op("b", 0, 10), op("c", 400, 500)}
	replicas := map[string][]StoredCell{StrongReplica: {
		{Node: StrongReplica, Shard: 1, RowKey: "a", ColumnKey: "D", RefKey: 1, Body: "{}", AddedID: 9},  // c0, failed over at 100: renumbered
		{Node: StrongReplica, Shard: 9, RowKey: "b", ColumnKey: "D", RefKey: 1, Body: "{}", AddedID: 9},  // c1, no failover: duplicated
		{Node: StrongReplica, Shard: 2, RowKey: "c", ColumnKey: "D", RefKey: 1, Body: "{}", AddedID: 11}, // c0, invoked after the failover
	}}
	holders := map[int][]string{1: {StrongReplica}, 2: {StrongReplica}, 9: {StrongReplica}}
	r := AsyncDurabilityResult{DurabilityResult: CheckDurability(ops, replicas, holders)}
	r.splitRenumbered(ops, ds, []FailoverRecord{{Cluster: 0, Killed: 100, Promoted: 200}})
	require.Equal(t, 1, r.RenumberedKeys, "renumbered keys")
	require.Len(t, r.Duplicated, 2, "duplicated")
	require.False(t, r.Valid, "valid")
	for _, p := range r.Duplicated {
		assert.NotEqual(t, "a", p.RowKey, "duplicated %+v: want b and c only", p)
		assert.True(t, strings.HasPrefix(p.Detail, "stored with added_id"), "duplicated %+v: detail", p)
	}
}
