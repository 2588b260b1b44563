package command

import (
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
)

// Split is a split command: the partition applying it keeps the shards below AtShard and hands
// the rest, from AtShard to its last shard, to a new partition, Right, whose raft group starts
// on Voters (the parent's voters when the split was proposed) at the index of this command.
// Generation is the cluster catalog's generation that made the split (catalog.OpSplit). Every
// replica applies it at the same index: the right half's cells, logs, consumer offsets, index
// entries and KV rows are copied into the right partition's store, and the parent drops them.
// Its outcome is a SplitResult.
type Split struct {
	_msgpack   struct{} `msgpack:",as_array"`
	AtShard    int32
	Right      int32
	Generation uint64
	Voters     []Voter
}

// Voter is a server of the right half's first raft configuration: its node id and raft address.
type Voter struct {
	_msgpack struct{} `msgpack:",as_array"`
	ID       string
	Addr     string
}

func (*Split) isCommand() {}

// CheckShards checks that AtShard splits r in two non-empty halves: above r's first shard, at
// most its last. A split applied before (the range already ends below AtShard) is out of
// range too.
func (s *Split) CheckShards(r cells.ShardRange) error {
	if int(s.AtShard) <= r.First || int(s.AtShard) > r.Last {
		return fmt.Errorf("%w: split at shard %d, partition holds %d..%d (each half keeps one shard at least)", ErrShardOutOfRange, s.AtShard, r.First, r.Last)
	}
	return nil
}

// SplitResult is the outcome of a split command: the shard ranges of the two halves.
type SplitResult struct {
	Left  cells.ShardRange
	Right cells.ShardRange
}
