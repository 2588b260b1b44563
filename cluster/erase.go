package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
)

// EraseResult is the outcome of an erasure (command.EraseResult): how many cells it deleted and
// the added_id of the tombstone it appended to the row's shard log (0 when it deleted none).
type EraseResult = command.EraseResult

// EraseRow erases every cell of row rowKey of datastore ds, on every replica: the cells are
// deleted from the row's shard table and a tombstone takes their place in the shard's log (see
// package fsm), in raft mode by a replicated command, in async mode on the primary master with
// the row's buffered copies deleted (partition.Async.EraseRow). It is sent to the leader of the
// row's partition (forwarded when that is another node) and retried like a write, which is
// safe: erasing is idempotent (a row with no cell answers Erased 0). Blocks until the erasure
// is applied on the leader or ctx ends.
//
// Errors: ErrUnknownDatastore; ErrUnavailable (not applied: no leader, or in async mode a
// storage cluster without a master); ErrIndeterminate (maybe applied: retrying is safe).
func (n *Node) EraseRow(ctx context.Context, ds string, rowKey uuid.UUID) (EraseResult, error) {
	return n.EraseRowFrom(ctx, ds, rowKey, "")
}

// EraseRowFrom is EraseRow for an erasure that arrived from cluster origin (replication
// between clusters; "" for this cluster's own): the tombstone stores the origin, so that this
// cluster does not send the erasure on. An origin that is not a cluster name, or that is this
// cluster's name, is ErrBadWrite (nothing erased).
func (n *Node) EraseRowFrom(ctx context.Context, ds string, rowKey uuid.UUID, origin string) (EraseResult, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return EraseResult{}, err
	}
	if origin != "" {
		if err := cells.ValidateClusterName("origin", origin); err != nil {
			return EraseResult{}, fmt.Errorf("%w: %w", ErrBadWrite, err)
		}
		if origin == n.cfg.ClusterName {
			return EraseResult{}, fmt.Errorf("%w: origin: %q is this cluster's own name", ErrBadWrite, origin)
		}
	}
	shard := cells.ShardOf(rowKey, d.spec.Shards)
	return callLeaderOp(ctx, n, eraseOp, ds, d.routeOf(shard), &command.Erase{Shard: int32(shard), RowKey: rowKey, Origin: origin})
}

// EraseIndexEntries deletes the entries of rowKeys from index table table of ds on every
// partition (a command.IndexErase command each, the partitions in parallel): an entry lives on the
// index shard of its shard field's value, which an erased row's cells no longer tell. It
// returns how many entries were deleted. Blocks until every partition applied its command or
// ctx ends. Errors as IndexApply; on error some partitions may have deleted theirs (retrying
// is safe: a deleted entry stays deleted).
func (n *Node) EraseIndexEntries(ctx context.Context, ds, table string, rowKeys []uuid.UUID) (int, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return 0, err
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		errs    []error
		deleted int
	)
	for _, r := range d.partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.IndexApply(ctx, ds, r.spec.ID, command.Index{Op: command.IndexErase, Table: table, RowKeys: rowKeys})
			mu.Lock()
			defer mu.Unlock()
			deleted += res.Changed
			if err != nil {
				errs = append(errs, fmt.Errorf("partition %d: %w", r.spec.ID, err))
			}
		}()
	}
	wg.Wait()
	return deleted, errors.Join(errs...)
}
