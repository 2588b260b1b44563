package storage

import (
	"context"
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
)

// ShardSizes returns, for each shard of r (by shard from r.First), the bytes the partition's
// cells and shard log of that shard take on disk, as pebble estimates them from its sstables
// (pebble.DB.EstimateDiskUsage): writes still in a memtable (at most a few memtables, see
// PebbleConfig.MemTableMiB) count once flushed. Index entries are not counted. Pebble only
// (ErrInvalidConfig elsewhere); ErrShardRange when r is not inside the partition's range. It
// reads metadata only and does not block on I/O beyond it.
func (p *PartitionStore) ShardSizes(ctx context.Context, r cells.ShardRange) ([]int64, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if p.pb == nil {
		return nil, fmt.Errorf("%w: ShardSizes needs the pebble engine", ErrInvalidConfig)
	}
	if err := p.checkShard(r.First); err != nil {
		return nil, err
	}
	if err := p.checkShard(r.Last); err != nil {
		return nil, err
	}
	pp := p.pb
	defer pp.rlock()()
	out := make([]int64, 0, r.Len())
	for s := r.First; s <= r.Last; s++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var size int64
		for _, tag := range []byte{tagCell, tagLog} {
			n, err := pp.db.EstimateDiskUsage(appendShard(pp.key(tag, 2), s), appendShard(pp.key(tag, 2), s+1))
			if err != nil {
				return nil, fmt.Errorf("storage: shard sizes: %w", err)
			}
			size += int64(n)
		}
		out = append(out, size)
	}
	return out, nil
}

// Flush writes the pebble memtables of the store to sstables and waits until they are written
// (ShardSizes counts them from then on). A no-op for the SQL engines.
func (s *Store) Flush() error {
	if s.pebble == nil {
		return nil
	}
	return s.pebble.db.Flush()
}
