package command

import (
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
)

// Freeze is the first command of a merge, applied by the right partition of the pair: from its
// index on, the partition holds no shard (its range is empty, every request for a shard is
// refused with ErrShardOutOfRange, nothing applied) and its state stays as it is, so that Into,
// its left neighbour, can take it (Merge). Generation is the catalog generation the merge was
// decided on. Thaw undoes a freeze whose merge was not decided (the partition takes its range
// back); a freeze of a frozen partition answers the first freeze's index, changing nothing.
// Its outcome is a FreezeResult.
type Freeze struct {
	_msgpack   struct{} `msgpack:",as_array"`
	Into       int32
	Generation uint64
	Thaw       bool
}

func (*Freeze) isCommand() {}

// CheckShards is nil: a freeze names no shard.
func (*Freeze) CheckShards(cells.ShardRange) error { return nil }

// FreezeResult is the outcome of a freeze: Index, the raft index of the freeze entry that froze
// the partition (for a thaw, of the thaw), Shards, the range the partition held before it, and
// Already, set when the partition was frozen before this entry (by another merge's freeze, or
// this one's sent again).
type FreezeResult struct {
	Index   uint64
	Shards  cells.ShardRange
	Already bool
}

// Merge is the second command of a merge, applied by the left partition of the pair: the
// partition takes the shards First..Last (right after its own) of partition Right, which froze
// at index FrozenAt of its own log (Freeze), copying Right's state as it was there from each
// replica's own copy of Right: the cells with their added_ids and created_at, the shard logs,
// the index entries of those shards, the request records, the consumer groups whose
// coordinator shard is among them (their whole state), and the schemas and index catalog rows
// the partition lacks. Shards is the datastore's shard count, which places the coordinator
// shards. Generation is the catalog generation of the merge (catalog.OpMerge). Its outcome is
// a MergeResult.
type Merge struct {
	_msgpack   struct{} `msgpack:",as_array"`
	Right      int32
	First      int32
	Last       int32
	FrozenAt   uint64
	Shards     int32
	Generation uint64
}

func (*Merge) isCommand() {}

// CheckShards checks that First..Last extends r: First is r's last shard plus one. A merge
// applied before (r ends at Last already) is out of range.
func (m *Merge) CheckShards(r cells.ShardRange) error {
	if int(m.First) != r.Last+1 || m.Last < m.First {
		return fmt.Errorf("%w: merge of shards %d..%d, partition holds %d..%d (the merged shards must follow its last)", ErrShardOutOfRange, m.First, m.Last, r.First, r.Last)
	}
	return nil
}

// MergeResult is the outcome of a merge: the partition's shard range after it.
type MergeResult struct {
	Merged cells.ShardRange
}
