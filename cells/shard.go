package cells

import "github.com/google/uuid"

// MaxShards is the most shards a datastore can have: the storage layout writes shard numbers
// with 4 digits in table and database names, so they range over [0, MaxShards-1].
const MaxShards = 10000

// ShardRange is the inclusive range of shards [First, Last] held by one partition.
type ShardRange struct {
	First, Last int
}

// Contains reports whether shard is in the range.
func (r ShardRange) Contains(shard int) bool { return shard >= r.First && shard <= r.Last }

// Len is the number of shards in the range.
func (r ShardRange) Len() int { return r.Last - r.First + 1 }

// FNV-1a 64-bit parameters (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// ShardHash is the stable hash of a row key: FNV-1a 64 over the 16 bytes of the UUID in network
// order. It never changes: shards of stored data depend on it, and test vectors pin it.
func ShardHash(rowKey uuid.UUID) uint64 {
	h := uint64(fnvOffset64)
	for _, b := range rowKey {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	return h
}

// ShardOf returns the shard of rowKey in a datastore of shardCount shards:
// ShardHash(rowKey) mod shardCount. It panics if shardCount is not positive; shard counts are
// validated when a datastore is configured.
func ShardOf(rowKey uuid.UUID, shardCount int) int {
	if shardCount <= 0 {
		panic("cells: shard count must be positive")
	}
	return int(ShardHash(rowKey) % uint64(shardCount))
}

// MaxDatastoreNameLen is the longest datastore name, in bytes.
const MaxDatastoreNameLen = 32

// ValidDatastoreName reports whether name is a valid datastore name: [a-z][a-z0-9_]{0,31}. The
// name becomes part of database, file and key names, so the rule is the same everywhere.
func ValidDatastoreName(name string) bool {
	ok := len(name) >= 1 && len(name) <= MaxDatastoreNameLen && name[0] >= 'a' && name[0] <= 'z'
	for i := 1; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	return ok
}
