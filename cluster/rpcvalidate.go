package cluster

import (
	"errors"
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/topology"
)

// ErrBadRPC: an internal request that a node refuses as the public API would: a key, a ref key,
// a shard or a body that no API request could have produced. Nothing was done.
var ErrBadRPC = errors.New("cluster: bad internal request")

// validateWrite checks a write sent to partition p of datastore ds over the node RPC as the
// public path checks a request: every cell's key (row key, column key, ref key), its shard
// (the row key's, within the partition) and its body (zlib-compressed MessagePack of a JSON
// object), and every condition's column key, ref key and shard. The first problem is returned,
// wrapping ErrBadRPC. It decodes every body once.
func validateWrite(ds *topology.DatastoreSpec, p *topology.PartitionSpec, w *fsm.Write) error {
	shards := p.Shards()
	shardOf := func(what string, i int, row [16]byte, shard int) error {
		want := cells.ShardOf(row, ds.Shards)
		if shard != want || !shards.Contains(shard) {
			return fmt.Errorf("%w: %s %d names shard %d; its row key is in shard %d, partition %d holds %d..%d",
				ErrBadRPC, what, i, shard, want, p.ID, shards.First, shards.Last)
		}
		return nil
	}
	for i := range w.Cells {
		c := &w.Cells[i]
		if err := c.Key.Validate(); err != nil {
			return fmt.Errorf("%w: cell %d: %w", ErrBadRPC, i, err)
		}
		if err := shardOf("cell", i, c.Key.RowKey, c.Shard); err != nil {
			return err
		}
		if _, err := c.Body.Object(); err != nil {
			return fmt.Errorf("%w: cell %d: body: %w", ErrBadRPC, i, err)
		}
	}
	for i, c := range w.Conditions {
		if err := cells.ValidateColumnKey(c.ColumnKey); err != nil {
			return fmt.Errorf("%w: condition %d: %w", ErrBadRPC, i, err)
		}
		if c.LatestRefKey < 0 {
			return fmt.Errorf("%w: condition %d: ref key %d is negative", ErrBadRPC, i, c.LatestRefKey)
		}
		if err := shardOf("condition", i, c.RowKey, c.Shard); err != nil {
			return err
		}
	}
	return nil
}
