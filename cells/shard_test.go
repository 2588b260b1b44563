package cells

import (
	"hash/fnv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shard hash is part of the on-disk format: these vectors must never change.
var shardVectors = []struct {
	rowKey    string
	hash      uint64
	shard64   int
	shard4096 int
}{
	{"00000000-0000-0000-0000-000000000000", 0x88201fb960ff6465, 37, 1125},
	{"ffffffff-ffff-ffff-ffff-ffffffffffff", 0xd6607508f5a1e855, 21, 2133},
	{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", 0x90fc22069f42281c, 28, 2076},
	{"123e4567-e89b-12d3-a456-426614174000", 0x7f0c9ad0139933e0, 32, 992},
	{"f47ac10b-58cc-4372-a567-0e02b2c3d479", 0xf929d81311da233a, 58, 826},
}

func TestShardHashVectors(t *testing.T) {
	t.Parallel()
	for _, v := range shardVectors {
		u := uuid.MustParse(v.rowKey)
		assert.Equal(t, v.hash, ShardHash(u), "ShardHash(%s) = %#x, want %#x", v.rowKey, ShardHash(u), v.hash)
		assert.Equal(t, v.shard64, ShardOf(u, 64), "ShardOf(%s, 64)", v.rowKey)
		assert.Equal(t, v.shard4096, ShardOf(u, 4096), "ShardOf(%s, 4096)", v.rowKey)
	}
}

// ShardHash is FNV-1a 64 over the UUID bytes; check it against the standard library's FNV.
func TestShardHashIsFNV1a(t *testing.T) {
	t.Parallel()
	for i := 0; i < 1000; i++ {
		u := uuid.NewSHA1(uuid.NameSpaceOID, []byte{byte(i), byte(i >> 8)})
		h := fnv.New64a()
		h.Write(u[:])
		require.Equal(t, h.Sum64(), ShardHash(u), "ShardHash(%s): want the standard library's FNV-1a", u)
	}
}

func TestShardOfSpreadsRowKeys(t *testing.T) {
	t.Parallel()
	const shards, n = 64, 64000
	counts := make([]int, shards)
	for i := 0; i < n; i++ {
		u := uuid.NewSHA1(uuid.NameSpaceURL, []byte{byte(i), byte(i >> 8), byte(i >> 16)})
		counts[ShardOf(u, shards)]++
	}
	for s, c := range counts {
		// Expect 1000 per shard; a uniform hash stays well within +-20%.
		assert.InDelta(t, n/shards, c, 200, "row keys of %d in shard %d: want about %d", n, s, n/shards)
	}
}
