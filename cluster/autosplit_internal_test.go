package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schemaless-db/schemaless/cells"
)

// bestSplit halves the load, not the range; it refuses a range of one shard, no load, and a
// load sitting on one shard (splitting would not divide it).
func TestBestSplit(t *testing.T) {
	r := cells.ShardRange{First: 8, Last: 15}
	for _, tc := range []struct {
		deltas []int64
		at     int
		ok     bool
	}{
		{[]int64{10, 10, 10, 10, 10, 10, 10, 10}, 12, true},
		{[]int64{100, 100, 0, 0, 0, 0, 0, 10}, 9, true},
		{[]int64{0, 0, 0, 0, 0, 5, 5, 5}, 14, true},
		{[]int64{0, 0, 0, 100, 0, 0, 0, 1}, 0, false},
		{[]int64{0, 0, 0, 0, 0, 0, 0, 0}, 0, false},
	} {
		at, ok := bestSplit(r, tc.deltas)
		assert.Equal(t, tc.ok, ok, "%v", tc.deltas)
		if tc.ok {
			assert.Equal(t, tc.at, at, "%v", tc.deltas)
		}
	}
	_, ok := bestSplit(cells.ShardRange{First: 3, Last: 3}, []int64{50})
	assert.False(t, ok, "one shard")
}
