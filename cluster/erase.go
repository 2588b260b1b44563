package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/topology"
)

// Erase RPC: the erasure of one row, forwarded to its partition's leader.
const rpcErasePath = "/internal/v1/erase"

// eraseRPC asks the node hosting Partition of Datastore to erase row RowKey (16 bytes). The
// receiver computes the row's shard itself and refuses a row of another partition.
type eraseRPC struct {
	Datastore     string
	Partition     int
	TimeoutMicros int64
	RowKey        []byte
}

type eraseRPCResponse struct {
	Result fsm.EraseResult
}

// EraseResult is the outcome of an erasure (fsm.EraseResult): how many cells it deleted and
// the added_id of the tombstone it appended to the row's shard log (0 when it deleted none).
type EraseResult = fsm.EraseResult

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
	d, err := n.datastore(ds)
	if err != nil {
		return EraseResult{}, err
	}
	shard := cells.ShardOf(rowKey, d.spec.Shards)
	r := d.routeOf(shard)
	var res EraseResult
	err = n.callLeader(ctx, r, true,
		func(ctx context.Context) (err error) {
			p, err := r.mustLocal()
			if err != nil {
				return err
			}
			res, err = p.EraseRow(ctx, shard, rowKey)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) error {
			req := eraseRPC{Datastore: ds, Partition: r.spec.ID, TimeoutMicros: remainingMicros(ctx, n.cfg.ForwardTimeout), RowKey: rowKey[:]}
			var resp eraseRPCResponse
			err := n.forward(ctx, target, rpcErasePath, &req, &resp, true, 0)
			res = resp.Result
			return err
		})
	return res, err
}

// serveErase serves the erase RPC: the row key must be a UUID of the named partition of a known
// datastore (400 otherwise), and this node must host the partition's leader (else the
// not-leader answer).
func (n *Node) serveErase(w http.ResponseWriter, r *http.Request) {
	var req eraseRPC
	if err := decodeRPC(r, &req); err != nil {
		http.Error(w, "bad erase request: "+err.Error(), http.StatusBadRequest)
		return
	}
	rt, err := n.rpcRoute(req.Datastore, req.Partition)
	var (
		rk    uuid.UUID
		shard int
	)
	if err == nil {
		rk, shard, err = validateErase(rt.ds, rt.spec, req.RowKey)
	}
	if err != nil {
		refuseRPC(w, "erase", err)
		return
	}
	p := n.hostedReplica(w, req.Datastore, req.Partition)
	if p == nil {
		return
	}
	ctx, cancel := rpcContext(r, req.TimeoutMicros)
	defer cancel()
	res, err := p.EraseRow(ctx, shard, rk)
	if err != nil {
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, eraseRPCResponse{Result: res})
}

// EraseIndexEntries deletes the entries of rowKeys from index table table of ds on every
// partition (an fsm.IndexErase command each, the partitions in parallel): an entry lives on the
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
			res, err := n.IndexApply(ctx, ds, r.spec.ID, fsm.IndexCommand{Op: fsm.IndexErase, Table: table, RowKeys: rowKeys})
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
