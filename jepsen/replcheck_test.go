package jepsen

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replScenario is a small valid history of the replication workload and what each cluster
// holds: east wrote e1..e3 (shard 0), west wrote w1, w2 (shard 0) and w3 (shard 1), every
// write acknowledged; each cluster has two replicas per shard.
func replScenario() ([]Op, map[string]ClusterCells) {
	put := func(row, origin string) Op {
		return Op{Workload: "replication", F: "put", RowKey: row, ColumnKey: "R", RefKey: 1, Outcome: OK, Status: "created",
			Body: fmt.Sprintf(`{"o":%q,"s":1,"v":7}`, origin)}
	}
	ops := []Op{put("e1", "east"), put("w1", "west"), put("e2", "east"), put("w2", "west"), put("e3", "east"), put("w3", "west")}
	body := map[string]string{}
	for _, op := range ops {
		body[op.RowKey] = op.Body
	}
	cell := func(shard int, row, origin string, added int64) StoredCell {
		return StoredCell{Shard: shard, RowKey: row, ColumnKey: "R", RefKey: 1, Body: body[row], Origin: origin, AddedID: added}
	}
	// east: its own cells in its order, west's interleaved as they arrived.
	east := []StoredCell{cell(0, "e1", "", 1), cell(0, "w1", "west", 2), cell(0, "e2", "", 3), cell(0, "e3", "", 4), cell(0, "w2", "west", 5), cell(1, "w3", "west", 1)}
	west := []StoredCell{cell(0, "w1", "", 1), cell(0, "e1", "east", 2), cell(0, "e2", "east", 3), cell(0, "w2", "", 4), cell(0, "e3", "east", 5), cell(1, "w3", "", 1)}
	onNodes := func(cs []StoredCell) ClusterCells {
		out := ClusterCells{Cells: map[string][]StoredCell{}, Replicas: map[int][]string{0: {"n1", "n2"}, 1: {"n1", "n2"}}}
		for _, n := range []string{"n1", "n2"} {
			for _, c := range cs {
				c.Node = n
				out.Cells[n] = append(out.Cells[n], c)
			}
		}
		return out
	}
	return ops, map[string]ClusterCells{"east": onNodes(east), "west": onNodes(west)}
}

// TestCheckReplication: the valid scenario passes; each kind of fault put into it is caught
// and named.
func TestCheckReplication(t *testing.T) {
	ops, held := replScenario()
	res := CheckReplication(ops, held)
	require.True(t, res.Valid, "the valid scenario: %v", res.Problems)
	assert.Equal(t, map[string]int{"east": 3, "west": 3}, res.Acknowledged)
	assert.Equal(t, map[string]int{"east": 6, "west": 6}, res.Cells)

	edit := func(cluster string, f func([]StoredCell) []StoredCell) map[string]ClusterCells {
		_, h := replScenario()
		for n, cs := range h[cluster].Cells {
			h[cluster].Cells[n] = f(cs)
		}
		return h
	}
	without := func(row string) func([]StoredCell) []StoredCell {
		return func(cs []StoredCell) []StoredCell {
			return slices.DeleteFunc(cs, func(c StoredCell) bool { return c.RowKey == row })
		}
	}
	cases := []struct {
		name  string
		ops   []Op
		held  map[string]ClusterCells
		check func(ReplicationResult) bool
	}{
		{"an acknowledged cell never reached the peer", ops, edit("west", without("e2")), func(r ReplicationResult) bool {
			return len(r.Lost) == 1 && r.Lost[0].RowKey == "e2" && r.Lost[0].Node == "west"
		}},
		{"the peer holds its origin's cells in another order", ops, edit("west", func(cs []StoredCell) []StoredCell {
			cs[2].RowKey, cs[4].RowKey, cs[2].Body, cs[4].Body = cs[4].RowKey, cs[2].RowKey, cs[4].Body, cs[2].Body
			return cs
		}), func(r ReplicationResult) bool { return len(r.OutOfOrder) == 1 && len(r.Lost) == 0 }},
		{"a cell arrives twice", ops, edit("east", func(cs []StoredCell) []StoredCell {
			d := cs[1]
			d.AddedID = 9
			return append(cs, d)
		}), func(r ReplicationResult) bool { return len(r.Duplicated) == 1 && r.Duplicated[0].RowKey == "w1" }},
		{"a body changed on the way", ops, edit("east", func(cs []StoredCell) []StoredCell {
			cs[1].Body = `{"o":"west","s":1,"v":8}`
			return cs
		}), func(r ReplicationResult) bool { return len(r.Corrupted) == 1 && r.Corrupted[0].Node == "east/n1" }},
		{"a replicated cell without its origin", ops, edit("east", func(cs []StoredCell) []StoredCell {
			cs[4].Origin = ""
			return cs
		}), func(r ReplicationResult) bool { return len(r.WrongOrigin) == 1 && r.WrongOrigin[0].RowKey == "w2" }},
		{"a cell of a failed write", func() []Op {
			o := slices.Clone(ops)
			o[2].Outcome = Fail
			return o
		}(), held, func(r ReplicationResult) bool { return len(r.Unexpected) == 2 && r.Unexpected[0].RowKey == "e2" }},
		{"a cell of an indeterminate write that its origin holds and the peer lacks", func() []Op {
			o := slices.Clone(ops)
			o[2].Outcome = Info
			return o
		}(), edit("west", without("e2")), func(r ReplicationResult) bool { return len(r.Lost) == 1 && r.Lost[0].Node == "west" }},
		{"two replicas of a shard differ", ops, func() map[string]ClusterCells {
			_, h := replScenario()
			h["west"].Cells["n2"] = without("w3")(h["west"].Cells["n2"])
			return h
		}(), func(r ReplicationResult) bool { return len(r.Diverged) == 1 }},
	}
	for _, c := range cases {
		res := CheckReplication(c.ops, c.held)
		assert.False(t, res.Valid, "%s: caught", c.name)
		assert.True(t, c.check(res), "%s: named: %+v", c.name, res)
		assert.NotEmpty(t, res.Problems, c.name)
	}
	// An indeterminate write that nobody holds is no problem.
	o := slices.Clone(ops)
	o[2].Outcome = Info
	res = CheckReplication(o, edit("west", without("e2")))
	res2 := CheckReplication(o, func() map[string]ClusterCells {
		_, h := replScenario()
		for _, c := range []string{"east", "west"} {
			for n := range h[c].Cells {
				h[c].Cells[n] = without("e2")(h[c].Cells[n])
			}
		}
		return h
	}())
	assert.False(t, res.Valid)
	assert.True(t, res2.Valid, "an indeterminate write held nowhere: %v", res2.Problems)
}
