package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// MoveConfig configures MovePartition. Datastore, Shards, Clusters, Static and To are required.
type MoveConfig struct {
	Datastore string
	Partition int
	Shards    cells.ShardRange
	// Clusters are every storage cluster of the datastore (the caller opens them, with a user
	// that may write their masters, and closes them).
	Clusters []*StorageCluster
	// Static names the cluster the topology places the partition on: where it lives while no
	// placement record exists.
	Static string
	// To names the cluster to move the partition to, one of Clusters.
	To string
	// LockWait bounds the wait for the partition's write lock on the old master at the
	// switch. Default 30s.
	LockWait time.Duration
	// CatchUpRounds bounds the catch-up rounds before the switch; the rounds stop earlier
	// when one copies fewer than CatchUpCells cells. Defaults 20 and 1000.
	CatchUpRounds int
	CatchUpCells  int64
	// DrainTimeout bounds the wait, after the switch, for the partition's buffer rows
	// written before the switch to be reaped (MoveResult.Drained). Default 5m; negative: do
	// not wait.
	DrainTimeout time.Duration
	// DropOld drops the old copy (its shard databases and KV rows; the placement row that
	// fences it stays) once drained and at least DropGrace after the switch (default 10s: long
	// enough for every node to have read the new placement). Not without a drain. With the
	// partition already on To (a rerun), it drains and drops the fenced copies left behind.
	DropOld   bool
	DropGrace time.Duration
	// Logger receives the progress, at Info. Default slog.Default().
	Logger *slog.Logger
}

func (c *MoveConfig) ensureDefaults() {
	if c.LockWait <= 0 {
		c.LockWait = 30 * time.Second
	}
	if c.CatchUpRounds <= 0 {
		c.CatchUpRounds = 20
	}
	if c.CatchUpCells <= 0 {
		c.CatchUpCells = 1000
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 5 * time.Minute
	}
	if c.DropGrace <= 0 {
		c.DropGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// MoveResult is what MovePartition did.
type MoveResult struct {
	From, To string
	// Epoch is the epoch of the placement naming To.
	Epoch int64
	// AlreadyThere: the placement named To already; nothing was copied (the record was only
	// written where it was missing).
	AlreadyThere bool
	// Resumed: a switch interrupted after the old copy was fenced was finished (final
	// catch-up from the fenced copy, then the new copy unfenced).
	Resumed bool
	// CopiedCells is the highest added_id of each shard after the bulk copy, summed (added_ids
	// are dense: the cells copied), CopyTime how long the bulk copy took.
	CopiedCells int64
	CopyTime    time.Duration
	// RoundCells are the cells each catch-up round copied before the switch.
	RoundCells []int64
	// FinalCells, FinalKV and FinalIndexEntries are what the final catch-up copied under the
	// lock: cells since the last round, and every KV row and index entry again.
	FinalCells        int64
	FinalKV           int
	FinalIndexEntries int64
	// LockHeld is how long the partition's write lock was held on the old master (writes to
	// the partition wait or are retried meanwhile); SwitchedAt when the new copy was unfenced.
	LockHeld   time.Duration
	SwitchedAt time.Time
	// Drained: every buffer row of the partition written before the switch was reaped (after
	// DrainTime). Dropped: the old copy was dropped.
	Drained   bool
	DrainTime time.Duration
	Dropped   bool
	// Took is the whole move.
	Took time.Duration
}

// Errors of MovePartition.
var (
	// ErrMoveRunning: another move of the partition holds its move lock on the old master.
	ErrMoveRunning = errors.New("partition: another move of the partition is running")
	// ErrMoveAborted: the move failed after the old copy was fenced and was rolled back: the
	// partition is served by the old cluster again (under a new placement epoch). Rerun it.
	ErrMoveAborted = errors.New("partition: move aborted and rolled back")
)

// MovePartition moves a partition of an async datastore to storage cluster To, online: copy,
// catch up from the shard logs, switch, drain. Nodes keep writing meanwhile; a write may wait
// or be retried while the switch holds the partition's lock, and is never lost or applied
// twice. It runs against the masters directly (no node is involved) and blocks until done or
// ctx ends:
//
//  1. The placement records are read from every master; the partition is on the cluster of
//     the record with the highest epoch E (no record: Static). A record (From, E, moving) is
//     written on every master, which fences the target: its copy names another cluster, so
//     no node can write it (storage SetFence).
//  2. Copy: a consistent snapshot of the partition on the old master (cells, KV rows, index
//     tables: fsm's snapshot stream) is restored into the new master, while writes continue.
//  3. Catch up: cells with an added_id above each shard's copied high water are read from the
//     old master and inserted into the new one with their added_id and created_at, in rounds,
//     until a round copies fewer than CatchUpCells.
//  4. Switch: under the partition's write lock on the old master, the record (To, E+1,
//     active) is written there, fencing the old copy inside every later write transaction
//     (nodes still pointing at it are refused with storage.ErrMoved and retry on the new
//     primary); the final catch-up copies the cells since the last round and every KV row and
//     index entry again, in one transaction; then (To, E+1, active) is written on the new
//     master, unfencing it, and on every other master, and the lock is released. Nodes switch
//     at their next placement read (PlacementInterval) or at their first refused write.
//  5. Drain: it waits until every buffer row of the partition written before the switch was
//     reaped (the reapers replay into the new primary), and with DropOld drops the old copy.
//
// A failure before the switch leaves the partition where it was (the partial copy on the
// target is replaced by the next attempt). A failure after the old copy was fenced and before
// the new one is unfenced rolls back: (From, E+2, active) is written on every master
// (ErrMoveAborted). A rerun after an interruption between the two finishes the switch
// (MoveResult.Resumed). Errors: ErrMoveRunning, ErrMoveAborted, storage and connection
// errors, ctx's.
func MovePartition(ctx context.Context, cfg MoveConfig) (MoveResult, error) {
	cfg.ensureDefaults()
	start := time.Now()
	mv := &mover{cfg: cfg, log: cfg.Logger.With("datastore", cfg.Datastore, "partition", cfg.Partition),
		id: storage.PartitionID{Datastore: cfg.Datastore, Partition: cfg.Partition}}
	res, err := mv.run(ctx)
	res.Took = time.Since(start)
	return res, err
}

// mover is one run of MovePartition.
type mover struct {
	cfg MoveConfig
	log *slog.Logger
	id  storage.PartitionID

	from, to     *StorageCluster
	fromSt, toSt *storage.Store // the masters' stores
	src, dst     *storage.PartitionStore
	epoch        int64         // the epoch of the placement the move starts from
	hw           map[int]int64 // per shard, the highest added_id copied to the target
	dstApplied   storage.AppliedState
}

func (mv *mover) cluster(name string) *StorageCluster { return clusterNamed(mv.cfg.Clusters, name) }

// clusterNamed returns the cluster of cs named name, nil when none is.
func clusterNamed(cs []*StorageCluster, name string) *StorageCluster {
	for _, c := range cs {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// master returns the store of c's master.
func (mv *mover) master(ctx context.Context, c *StorageCluster) (*member, *storage.Store, error) {
	return masterOf(ctx, c)
}

// masterOf returns the store of c's master, once c was probed.
func masterOf(ctx context.Context, c *StorageCluster) (*member, *storage.Store, error) {
	if err := c.waitProbed(ctx); err != nil {
		return nil, nil, err
	}
	_, m, err := c.masterMember(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := m.writeStore(ctx, c)
	if err != nil {
		return nil, nil, fmt.Errorf("master of %s: %w", c.Name(), err)
	}
	return m, st, nil
}

func (mv *mover) run(ctx context.Context) (MoveResult, error) {
	cfg := mv.cfg
	res := MoveResult{To: cfg.To}
	if cfg.Datastore == "" || len(cfg.Clusters) == 0 || cfg.Static == "" || cfg.To == "" {
		return res, errors.New("partition: MoveConfig needs Datastore, Clusters, Static and To")
	}
	if mv.to = mv.cluster(cfg.To); mv.to == nil {
		return res, fmt.Errorf("partition: move to %q: not one of the datastore's storage clusters", cfg.To)
	}
	if mv.cluster(cfg.Static) == nil {
		return res, fmt.Errorf("partition: the topology places the partition on %q, not one of the datastore's storage clusters", cfg.Static)
	}
	for _, c := range cfg.Clusters {
		if err := c.waitProbed(ctx); err != nil {
			return res, err
		}
	}
	reads := readPlacements(ctx, cfg.Clusters, cfg.Datastore, cfg.Partition)
	cur := storage.Placement{Datastore: cfg.Datastore, Partition: cfg.Partition, Cluster: cfg.Static}
	var toRead placementRead
	for _, r := range reads {
		if r.cluster == mv.to {
			toRead = r
		}
		switch {
		case r.err != nil:
			mv.log.Warn("partition move: placement unreadable on a master", "cluster", r.cluster.Name(), "error", r.err)
		case r.found && r.rec.Epoch >= cur.Epoch:
			if r.rec.Epoch > cur.Epoch || cur.State == "" {
				cur = r.rec
			}
		}
	}
	if toRead.err != nil {
		return res, fmt.Errorf("partition move: the target's master: %w", toRead.err)
	}
	if mv.from = mv.cluster(cur.Cluster); mv.from == nil {
		return res, fmt.Errorf("partition move: placement epoch %d names %q, not one of the datastore's storage clusters", cur.Epoch, cur.Cluster)
	}
	res.From, mv.epoch = cur.Cluster, cur.Epoch
	mv.log.Info("partition move: placement read", "on", cur.Cluster, "epoch", cur.Epoch, "to", cfg.To)

	if mv.from == mv.to {
		if !toRead.found || toRead.rec.Cluster == cfg.To {
			// Done before: spread the record where it is missing.
			res.AlreadyThere, res.Epoch = true, cur.Epoch
			if cur.State != "" {
				_ = mv.writeEverywhere(ctx, storage.Placement{Datastore: cfg.Datastore, Partition: cfg.Partition, Cluster: cfg.To, Epoch: cur.Epoch, State: storage.PlacementActive}, nil)
			}
			if cfg.DropOld && cur.State != "" {
				res.SwitchedAt = cur.UpdatedAt
				mv.drain(ctx, &res)
			}
			return res, nil
		}
		// The old copy was fenced (a record names To) but the target was never unfenced:
		// the switch was interrupted. Its source is the cluster the target's record names.
		if mv.from = mv.cluster(toRead.rec.Cluster); mv.from == nil {
			return res, fmt.Errorf("partition move: the target's placement names %q, not one of the datastore's storage clusters", toRead.rec.Cluster)
		}
		res.From, res.Resumed = mv.from.Name(), true
		mv.log.Warn("partition move: finishing an interrupted switch", "from", mv.from.Name(), "to", cfg.To, "epoch", cur.Epoch)
		return mv.resume(ctx, res, cur.Epoch)
	}

	_, fromSt, err := mv.master(ctx, mv.from)
	if err != nil {
		return res, err
	}
	_, toSt, err := mv.master(ctx, mv.to)
	if err != nil {
		return res, err
	}
	mv.fromSt, mv.toSt = fromSt, toSt
	prefix := mv.from.cfg.Prefix
	unlockMove, err := fromSt.Lock(ctx, asyncLockName(prefix, cfg.Datastore, cfg.Partition)+"_move", 0)
	if errors.Is(err, storage.ErrLockTimeout) {
		return res, ErrMoveRunning
	}
	if err != nil {
		return res, err
	}
	defer unlockMove()

	// 1. Fence the target: every master says the partition is on From (moving).
	moving := storage.Placement{Datastore: cfg.Datastore, Partition: cfg.Partition, Cluster: mv.from.Name(), Epoch: mv.epoch, State: storage.PlacementMoving}
	if err := mv.writeEverywhere(ctx, moving, []*StorageCluster{mv.from, mv.to}); err != nil {
		return res, err
	}
	mv.log.Info("partition move: target fenced", "placement", moving.Cluster, "epoch", moving.Epoch, "state", moving.State)
	switched := false
	defer func() {
		if !switched {
			// Failed before the switch: the partition never left From; say so again.
			active := moving
			active.State = storage.PlacementActive
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = mv.writeEverywhere(wctx, active, nil)
		}
	}()

	if err := mv.openStores(ctx); err != nil {
		return res, err
	}
	defer mv.src.Close()
	defer mv.dst.Close()

	// 2. Copy.
	t0 := time.Now()
	if err := mv.copySnapshot(ctx); err != nil {
		return res, fmt.Errorf("partition move: copy: %w", err)
	}
	for _, h := range mv.hw {
		res.CopiedCells += h
	}
	res.CopyTime = time.Since(t0)
	mv.log.Info("partition move: copied", "cells", res.CopiedCells, "took", res.CopyTime.Round(time.Millisecond))

	// 3. Catch up.
	for round := 1; round <= cfg.CatchUpRounds; round++ {
		n, err := mv.catchUp(ctx)
		if err != nil {
			return res, fmt.Errorf("partition move: catch-up round %d: %w", round, err)
		}
		res.RoundCells = append(res.RoundCells, n)
		mv.log.Info("partition move: catch-up round", "round", round, "cells", n)
		if n < cfg.CatchUpCells {
			break
		}
	}

	// 4. Switch.
	err = mv.switchOver(ctx, &res)
	switched = !res.SwitchedAt.IsZero() || errors.Is(err, ErrMoveAborted)
	if err != nil {
		return res, err
	}
	// 5. Drain, drop.
	mv.drain(ctx, &res)
	return res, nil
}

// writeEverywhere writes p on every cluster's master (forward only, see
// storage.Store.WritePlacement); the masters of required must take it, the others are best
// effort (logged).
func (mv *mover) writeEverywhere(ctx context.Context, p storage.Placement, required []*StorageCluster) error {
	var errs []error
	for _, c := range mv.cfg.Clusters {
		err := mv.writeOn(ctx, c, p)
		if err == nil {
			continue
		}
		if slices.Contains(required, c) {
			errs = append(errs, err)
		} else {
			mv.log.Warn("partition move: placement not written on a master (readers take the highest epoch they can read)", "cluster", c.Name(), "error", err)
		}
	}
	return errors.Join(errs...)
}

// writeOn writes p on c's master; a master holding a higher epoch is an error.
func (mv *mover) writeOn(ctx context.Context, c *StorageCluster, p storage.Placement) error {
	_, st, err := mv.master(ctx, c)
	if err != nil {
		return fmt.Errorf("placement on %s: %w", c.Name(), err)
	}
	ok, err := st.WritePlacement(ctx, p)
	if err != nil {
		return fmt.Errorf("placement on %s: %w", c.Name(), err)
	}
	if !ok {
		return fmt.Errorf("placement on %s: it holds an epoch above %d: another move ran meanwhile", c.Name(), p.Epoch)
	}
	return nil
}

// openStores opens the partition on both masters.
func (mv *mover) openStores(ctx context.Context) error {
	var err error
	if mv.src, err = mv.fromSt.Partition(ctx, mv.id, mv.cfg.Shards); err != nil {
		return fmt.Errorf("partition move: open the partition on %s: %w", mv.from.Name(), err)
	}
	if mv.dst, err = mv.toSt.Partition(ctx, mv.id, mv.cfg.Shards); err != nil {
		mv.src.Close()
		return fmt.Errorf("partition move: open the partition on %s: %w", mv.to.Name(), err)
	}
	return nil
}

// copySnapshot streams a consistent snapshot of src (fsm's snapshot format: KV rows, cells,
// index entries) into a Restore of dst, replacing whatever dst held, and records the copied
// high waters.
func (mv *mover) copySnapshot(ctx context.Context) error {
	sf, err := fsm.New(ctx, fsm.Config{Store: mv.src, Logger: mv.log, StoreAttempts: 1})
	if err != nil {
		return err
	}
	snap, err := sf.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	df, err := fsm.New(ctx, fsm.Config{Store: mv.dst, Logger: mv.log, StoreAttempts: 1})
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	persisted := make(chan error, 1)
	go func() { persisted <- snap.Persist(pipeSink{pw}) }()
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	defer stop()
	rerr := df.Restore(pr) // closes pr, which stops Persist if Restore stopped early
	perr := <-persisted
	if rerr != nil {
		return errors.Join(rerr, perr)
	}
	if perr != nil {
		return perr
	}
	if mv.dstApplied, err = mv.dst.Applied(ctx); err != nil {
		return err
	}
	mv.hw = map[int]int64{}
	for s := mv.cfg.Shards.First; s <= mv.cfg.Shards.Last; s++ {
		if mv.hw[s], err = mv.dst.MaxAddedID(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// pipeSink is a raft.SnapshotSink writing into a pipe.
type pipeSink struct{ w *io.PipeWriter }

func (s pipeSink) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s pipeSink) Close() error                { return s.w.Close() }
func (s pipeSink) ID() string                  { return "partition-move" }
func (s pipeSink) Cancel() error {
	return s.w.CloseWithError(errors.New("partition: snapshot persist canceled"))
}

// catchUpPage is how many cells a catch-up reads per statement (and inserts per transaction
// before the switch).
const catchUpPage = 1000

// catchUp copies the cells of every shard above its high water from src to dst, a
// transaction per page, and returns how many it copied.
func (mv *mover) catchUp(ctx context.Context) (int64, error) {
	var n int64
	for s := mv.cfg.Shards.First; s <= mv.cfg.Shards.Last; s++ {
		for {
			cs, _, _, err := mv.src.ReadLog(ctx, s, mv.hw[s], "", catchUpPage)
			if err != nil {
				return n, err
			}
			if len(cs) == 0 {
				break
			}
			tx, err := mv.dst.Begin(ctx)
			if err != nil {
				return n, err
			}
			if err := mv.insert(ctx, tx, s, cs); err != nil {
				tx.Rollback()
				return n, err
			}
			if err := tx.Commit(); err != nil {
				return n, err
			}
			mv.hw[s] = cs[len(cs)-1].AddedID
			n += int64(len(cs))
			if len(cs) < catchUpPage {
				break
			}
		}
	}
	return n, nil
}

// insert inserts cells of shard s read from src into dst's transaction (whose tables exist:
// Restore or EnsureShards created them), in log order. A tombstone (an erasure of its row on
// src, since the copy) erases the row's cells copied before it, then is inserted itself, so the
// target ends as src is.
func (mv *mover) insert(ctx context.Context, tx *storage.WriteTx, s int, cs []cells.Cell) error {
	for len(cs) > 0 {
		n := slices.IndexFunc(cs, func(c cells.Cell) bool { return c.Key.IsTombstone() })
		if n < 0 {
			n = len(cs)
		}
		if n > 0 {
			if err := tx.Insert(ctx, s, cs[:n]); err != nil {
				return fmt.Errorf("insert %d cells into shard %d of the target (added_id %d..%d): %w", n, s, cs[0].AddedID, cs[n-1].AddedID, err)
			}
			cs = cs[n:]
			continue
		}
		if _, err := tx.EraseRow(ctx, s, cs[0].RowKey); err != nil {
			return fmt.Errorf("erase row %s in shard %d of the target (tombstone %d): %w", cs[0].RowKey, s, cs[0].AddedID, err)
		}
		if err := tx.Insert(ctx, s, cs[:1]); err != nil {
			return fmt.Errorf("insert the tombstone %d into shard %d of the target: %w", cs[0].AddedID, s, err)
		}
		cs = cs[1:]
	}
	return nil
}

// switchOver is step 4 of MovePartition.
func (mv *mover) switchOver(ctx context.Context, res *MoveResult) error {
	cfg := mv.cfg
	lockName := asyncLockName(mv.from.cfg.Prefix, cfg.Datastore, cfg.Partition)
	unlock, err := mv.fromSt.Lock(ctx, lockName, cfg.LockWait)
	if err != nil {
		return fmt.Errorf("partition move: the partition's write lock on %s: %w", mv.from.Name(), err)
	}
	locked := time.Now()
	released := false
	release := func() {
		if !released {
			unlock()
			released = true
			res.LockHeld = time.Since(locked)
		}
	}
	defer release()
	for _, c := range []*StorageCluster{mv.from, mv.to} {
		want := map[*StorageCluster]*storage.Store{mv.from: mv.fromSt, mv.to: mv.toSt}[c]
		if _, st, err := mv.master(ctx, c); err != nil || st != want {
			return fmt.Errorf("partition move: the master of %s changed during the move; rerun it", c.Name())
		}
	}
	next := storage.Placement{Datastore: cfg.Datastore, Partition: cfg.Partition, Cluster: cfg.To, Epoch: mv.epoch + 1, State: storage.PlacementActive}
	ok, err := mv.fromSt.WritePlacement(ctx, next)
	if err == nil && !ok {
		return fmt.Errorf("partition move: %s holds a placement epoch above %d: another move ran meanwhile", mv.from.Name(), next.Epoch)
	}
	if err != nil {
		// The record may have been written: roll back to be sure.
		return mv.rollback(ctx, fmt.Errorf("fence %s: %w", mv.from.Name(), err))
	}
	mv.log.Info("partition move: old copy fenced", "cluster", mv.from.Name(), "epoch", next.Epoch)
	if err := mv.final(ctx, res); err != nil {
		return mv.rollback(ctx, err)
	}
	// Unfence on the very server the final catch-up wrote: if its cluster failed over
	// meanwhile, the new master lacks both (the partition stays fenced there, and a rerun
	// finishes the switch from the fenced old copy) rather than having the record only.
	if ok, err := mv.toSt.WritePlacement(ctx, next); err != nil || !ok {
		return mv.rollback(ctx, fmt.Errorf("unfence %s: written %v: %w", mv.to.Name(), ok, err))
	}
	res.SwitchedAt, res.Epoch = time.Now(), next.Epoch
	release()
	mv.log.Info("partition move: switched", "to", cfg.To, "epoch", next.Epoch, "lock_held", res.LockHeld.Round(time.Millisecond),
		"final_cells", res.FinalCells, "final_kv", res.FinalKV, "final_index_entries", res.FinalIndexEntries)
	_ = mv.writeEverywhere(ctx, next, nil)
	return nil
}

// resume finishes a switch that was interrupted after the old copy was fenced at epoch: the
// old copy takes no write, so the final catch-up needs no lock.
func (mv *mover) resume(ctx context.Context, res MoveResult, epoch int64) (MoveResult, error) {
	var err error
	if _, mv.fromSt, err = mv.master(ctx, mv.from); err != nil {
		return res, err
	}
	if _, mv.toSt, err = mv.master(ctx, mv.to); err != nil {
		return res, err
	}
	pl, ok, err := mv.fromSt.ReadPlacement(ctx, mv.cfg.Datastore, mv.cfg.Partition)
	if err != nil {
		return res, err
	}
	if !ok || pl.Cluster != mv.cfg.To || pl.Epoch != epoch {
		return res, fmt.Errorf("partition move: the placement records disagree (highest epoch %d names %s, %s's names %s at epoch %d): inspect them before moving",
			epoch, mv.cfg.To, mv.from.Name(), pl.Cluster, pl.Epoch)
	}
	unlockMove, err := mv.fromSt.Lock(ctx, asyncLockName(mv.from.cfg.Prefix, mv.cfg.Datastore, mv.cfg.Partition)+"_move", 0)
	if errors.Is(err, storage.ErrLockTimeout) {
		return res, ErrMoveRunning
	}
	if err != nil {
		return res, err
	}
	defer unlockMove()
	mv.epoch = epoch - 1
	if err := mv.openStores(ctx); err != nil {
		return res, err
	}
	defer mv.src.Close()
	defer mv.dst.Close()
	if mv.dstApplied, err = mv.dst.Applied(ctx); err != nil {
		return res, err
	}
	mv.hw = map[int]int64{}
	for s := mv.cfg.Shards.First; s <= mv.cfg.Shards.Last; s++ {
		if mv.hw[s], err = mv.dst.MaxAddedID(ctx, s); err != nil {
			return res, err
		}
	}
	if err := mv.final(ctx, &res); err != nil {
		return res, err
	}
	next := storage.Placement{Datastore: mv.cfg.Datastore, Partition: mv.cfg.Partition, Cluster: mv.cfg.To, Epoch: epoch, State: storage.PlacementActive}
	if ok, err := mv.toSt.WritePlacement(ctx, next); err != nil || !ok {
		return res, fmt.Errorf("partition move: unfence %s: written %v: %w", mv.to.Name(), ok, err)
	}
	res.SwitchedAt, res.Epoch = time.Now(), epoch
	_ = mv.writeEverywhere(ctx, next, nil)
	mv.drain(ctx, &res)
	return res, nil
}

// rollback hands the partition back to the old copy after a failure that left it fenced: the
// record (From, E+2, active) on every master (the old one first).
func (mv *mover) rollback(ctx context.Context, cause error) error {
	back := storage.Placement{Datastore: mv.cfg.Datastore, Partition: mv.cfg.Partition, Cluster: mv.from.Name(), Epoch: mv.epoch + 2, State: storage.PlacementActive}
	mv.log.Error("partition move: failed after fencing the old copy; rolling back", "error", cause, "epoch", back.Epoch)
	// A fresh context: ctx may be what ended.
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mv.writeOn(rctx, mv.from, back); err != nil {
		return fmt.Errorf("partition move: %w; and the rollback failed, the partition is unavailable until a rerun finishes or rolls back the move: %w", cause, err)
	}
	if err := mv.writeEverywhere(rctx, back, []*StorageCluster{mv.to}); err != nil {
		// The target may have been unfenced (an unfence whose answer was lost): it must learn
		// the rollback too, or a node reading only its record could write there.
		return fmt.Errorf("%w: %w; the rollback could not reach the target %s, rerun the move or write the placement there: %w", ErrMoveAborted, cause, mv.to.Name(), err)
	}
	return fmt.Errorf("%w: %w", ErrMoveAborted, cause)
}
