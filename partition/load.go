package partition

import (
	"sync/atomic"

	"github.com/schemaless-db/schemaless/cells"
)

// shardLoad counts the requests a replica served per shard (cells written, keys and rows read),
// for the node's load-based splitting. Counters only grow; a reader takes differences.
type shardLoad struct {
	first  int
	counts []atomic.Int64
}

func newShardLoad(r cells.ShardRange) *shardLoad {
	return &shardLoad{first: r.First, counts: make([]atomic.Int64, r.Len())}
}

func (l *shardLoad) add(shard int, n int64) {
	if i := shard - l.first; i >= 0 && i < len(l.counts) {
		l.counts[i].Add(n)
	}
}

// ShardLoad returns the requests this replica served per shard since it opened, from shard
// first on (the range it was opened with, Config.Shards): cells written through Put on the
// leader, keys and rows read. The counts only grow; load-based splitting takes the differences
// over a window. No I/O.
func (p *Raft) ShardLoad() (first int, counts []int64) {
	counts = make([]int64, len(p.load.counts))
	for i := range p.load.counts {
		counts[i] = p.load.counts[i].Load()
	}
	return p.load.first, counts
}

// countRead counts the shards a read names.
func (l *shardLoad) countRead(req ReadRequest) {
	switch {
	case req.Get != nil:
		for _, k := range req.Get.Keys {
			l.add(k.Shard, 1)
		}
	case req.Row != nil:
		l.add(req.Row.Shard, 1)
	case req.Versions != nil:
		l.add(req.Versions.Shard, 1)
	}
}
