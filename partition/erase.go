package partition

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// EraseRow erases every cell of row rowKey, which lives in shard (one of the partition's), on
// every replica: it proposes an erase command (command.Erase), whose entry deletes the
// row's cells from the shard's table and appends a tombstone to the shard's log (see package
// fsm). It must be called on the leader (else *NotLeaderError, nothing done) and blocks until
// the entry is applied on this replica or ctx ends. Erasing is idempotent: a row with no cell
// answers Erased 0 and appends nothing. The entry's CreatedAt (the tombstone's created_at) is
// the leader's clock.
//
// Errors: *NotLeaderError and ErrUnavailable (nothing applied); ErrIndeterminate (maybe
// applied: retrying is safe); command.ErrShardOutOfRange wrapped for a shard outside the
// partition (nothing changed).
func (p *Raft) EraseRow(ctx context.Context, shard int, rowKey uuid.UUID) (command.EraseResult, error) {
	return p.EraseRowFrom(ctx, shard, rowKey, "")
}

// EraseRowFrom is EraseRow for an erasure that arrived from cluster origin (replication
// between clusters; "" for this cluster's own): its tombstone stores the origin.
func (p *Raft) EraseRowFrom(ctx context.Context, shard int, rowKey uuid.UUID, origin string) (command.EraseResult, error) {
	var res command.EraseResult
	err := p.applyOne(ctx, func(now time.Time) ([]byte, error) {
		return command.Encode(&command.Erase{CreatedAt: now, Shard: int32(shard), RowKey: rowKey, Origin: origin})
	}, func(f raft.ApplyFuture) (err error) {
		res, err = fsm.ResultOf[command.EraseResult](f)
		return err
	}, command.ErrShardOutOfRange)
	if err != nil {
		return command.EraseResult{}, err // res may still be written by the abandoned wait
	}
	return res, nil
}

// EraseRow erases every cell of row rowKey, which lives in shard (one of the partition's), with
// the same state machine as raft mode, on the primary master: the row's cells are deleted, a
// tombstone is appended to the shard's log, and MySQL's replication carries both to the
// minions. It is never buffered: with no primary master it fails with ErrUnavailable.
//
// Under the partition's lock on the master, before the erasure, the row's buffered copies are
// deleted from the buffer table of every storage cluster of the datastore (only the primary's
// own with buffered writes off), so that the reaper cannot replay an erased cell: a replay
// checks, under the same lock, that its buffer rows still exist. So an erasure also needs the
// master of every such cluster: without one it fails with ErrUnavailable, having erased
// nothing on the primary (some buffered copies may be gone already). A buffered write of the
// row that is not yet on the master counts as erased too, though not in EraseResult.Erased,
// which counts the cells deleted from the primary. Blocks until done or ctx ends.
//
// Errors: ErrUnavailable (the erasure was not applied; retry); ErrIndeterminate (the master
// failed during it, or ctx ended: it may be applied; retrying is safe);
// command.ErrShardOutOfRange wrapped for a shard outside the partition (nothing changed).
func (a *Async) EraseRow(ctx context.Context, shard int, rowKey uuid.UUID) (command.EraseResult, error) {
	return a.EraseRowFrom(ctx, shard, rowKey, "")
}

// EraseRowFrom is EraseRow for an erasure that arrived from cluster origin (replication
// between clusters; "" for this cluster's own): its tombstone stores the origin.
func (a *Async) EraseRowFrom(ctx context.Context, shard int, rowKey uuid.UUID, origin string) (command.EraseResult, error) {
	if r := a.Shards(); !r.Contains(shard) {
		return command.EraseResult{}, fmt.Errorf("%w: erase in shard %d, partition holds %d..%d", command.ErrShardOutOfRange, shard, r.First, r.Last)
	}
	data, err := command.Encode(&command.Erase{CreatedAt: time.Now(), Shard: int32(shard), RowKey: rowKey, Origin: origin})
	if err != nil {
		return command.EraseResult{}, err
	}
	res, err := a.applyOp(ctx, &asyncOp{prepare: func(ctx context.Context) ([]byte, error) {
		if err := a.eraseBuffered(ctx, rowKey); err != nil {
			return nil, err
		}
		return data, nil
	}, done: make(chan asyncResult, 1)})
	if err != nil {
		return command.EraseResult{}, err
	}
	return fsm.Unwrap[command.EraseResult](res)
}

// eraseBuffered deletes the buffered copies of rowKey's cells from the buffer table of every
// storage cluster of the datastore (the primary's alone with buffered writes off: no copy is
// written elsewhere). It fails, wrapping ErrUnavailable, when a cluster has no reachable master.
func (a *Async) eraseBuffered(ctx context.Context, rowKey uuid.UUID) error {
	clusters := a.all
	if a.cfg.BufferCopies == 0 {
		clusters = []*StorageCluster{a.placement().primary}
	}
	for _, c := range clusters {
		_, m, err := c.masterMember(ctx)
		if err != nil {
			return fmt.Errorf("%w: buffered copies of row %s on %s: %w", ErrUnavailable, rowKey, c.Name(), err)
		}
		err = m.run(func() error {
			st, err := m.writeStore(ctx, c)
			if err != nil {
				return err
			}
			_, err = st.DeleteBufferedRow(ctx, a.cfg.Datastore, rowKey)
			return err
		})
		if err != nil {
			return fmt.Errorf("%w: delete buffered copies of row %s on %s: %w", ErrUnavailable, rowKey, c.Name(), err)
		}
	}
	return nil
}

// stillBuffered returns the command replaying the rows of rs (buffered on cluster bc, master m,
// written at t, all of one origin) that are still in bc's buffer, or nil when none is: rows reaped or erased since
// the reaper read them are not replayed. It runs under the partition's lock (asyncOp.prepare).
func (a *Async) stillBuffered(ctx context.Context, bc *StorageCluster, m *member, t time.Time, rs []storage.BufferedCell) ([]byte, error) {
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	var still map[int64]bool
	err := m.run(func() error {
		st, err := m.writeStore(ctx, bc)
		if err != nil {
			return err
		}
		still, err = st.StillBuffered(ctx, ids)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("check buffered rows on %s: %w", bc.Name(), err)
	}
	var w command.Write
	if len(rs) > 0 {
		w.Origin = rs[0].Cell.Origin // replay groups rows by origin
	}
	for _, r := range rs {
		if still[r.ID] {
			w.Cells = append(w.Cells, command.Cell{Shard: r.Shard, Key: r.Cell.Key, Body: r.Cell.Body})
		}
	}
	if len(w.Cells) == 0 {
		return nil, nil
	}
	return command.Encode(&command.Append{CreatedAt: t, Writes: []command.Write{w}})
}
