package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// AsyncSplit describes a split in place of a partition of an async datastore (SplitAsync).
type AsyncSplit struct {
	// Datastore is the async datastore as the nodes serve it (the catalog's view).
	Datastore *topology.DatastoreSpec
	// Partition is the id of the partition to split, AtShard the first shard of the right
	// half (above the partition's first shard, at most its last).
	Partition int
	AtShard   int
	// Right is the id the right half gets (the catalog's next partition id).
	Right int
	// Commit records the split in the catalog, the right half on storage cluster cluster. It
	// runs under the partition's write lock, after the master holds both halves' state, and
	// returns nil once the split is recorded, an error when it is not (a stale catalog, ...):
	// the split is then undone on the master.
	Commit func(ctx context.Context, cluster string) error
	// Cluster carries the storage clusters' tunables; identity fields are filled in.
	Cluster ClusterConfig
	// LockWait bounds the wait for the partition's write lock. Default 30s.
	LockWait time.Duration
	// Logger receives the progress, at Info. Default slog.Default().
	Logger *slog.Logger
}

// AsyncSplitResult is what SplitAsync did.
type AsyncSplitResult struct {
	// Cluster is the storage cluster both halves are on.
	Cluster string
	// Left and Right are the halves' shard ranges.
	Left, Right cells.ShardRange
	// KVRows is how many KV rows the right half got (consumer groups, schemas, index catalog);
	// Placement tells whether the right half got placement records (the parent had some).
	KVRows    int
	Placement bool
	// LockHeld is how long the partition's write lock was held: writes to the partition wait
	// meanwhile.
	LockHeld time.Duration
}

// ErrAsyncSplitMoving: the partition is being moved to another storage cluster (its placement
// is in state moving, or a move holds its move lock); the split waits for the move's end.
var ErrAsyncSplitMoving = errors.New("partition: a move of the partition is running")

// SplitAsync splits a partition of an async datastore in place: shards AtShard to the end of
// its range go to a new partition (Right) on the same storage cluster, and no cell moves. In
// async mode a shard's cells and index tables live in a database of the shard's own
// ("<prefix>_<datastore>_<shard>"), whatever partition serves it; what a partition owns alone
// is its state in the master's meta tables: KV rows (consumer groups, schemas, the index
// catalog), request records (idempotency keys) and the applied counter. So, on the master of
// the cluster the partition's placement names, under the partition's move lock (no move runs
// meanwhile) and its write lock (the one every node's writer takes), in one transaction:
//
//   - the right half gets a copy of every KV row and request record of the parent, and its
//     range (fsm.RangeKey);
//   - the parent's range shrinks to the left half (fsm.RangeKey), and its applied counter
//     moves, so that every node's state machine of the parent reloads the range at its next
//     batch and refuses a write to the right half's shards with command.ErrShardOutOfRange
//     (the node routes it again by the newer catalog).
//
// When the parent has placement records (it was moved), the right half gets a record naming
// the same cluster on every master, at an epoch above any it had. Then Commit records the
// split in the catalog and the locks are released. A failure before Commit's success undoes
// the change on the master (the parent's range back); the right half's state rows left behind
// are replaced by the next attempt. Buffered writes need nothing: the reapers choose buffer
// rows by shard (storage.Store.ScanBuffered). The split trusts the MySQL named lock as every
// async writer does: a writer of the parent that lost its lock's connection mid-batch is not
// fenced out of the right half's shards.
//
// To move the right half to another storage cluster afterwards, MoveAsync it (copy, catch-up,
// fenced switch): a shard range of a master is split off this way. Blocks until done or ctx
// ends. Errors: a bad AsyncSplit, ErrAsyncSplitMoving, storage and connection errors, Commit's.
func SplitAsync(ctx context.Context, sp AsyncSplit) (AsyncSplitResult, error) {
	ds := sp.Datastore
	if ds == nil || ds.Mode != topology.ModeAsync || sp.Commit == nil {
		return AsyncSplitResult{}, errors.New("partition: split: an async datastore and a Commit are needed")
	}
	ps := ds.PartitionByID(sp.Partition)
	if ps == nil {
		return AsyncSplitResult{}, fmt.Errorf("partition: split: datastore %s has no partition %d", ds.Name, sp.Partition)
	}
	rng := ps.Shards()
	if sp.AtShard <= rng.First || sp.AtShard > rng.Last {
		return AsyncSplitResult{}, fmt.Errorf("partition: split: at shard %d, want %d to %d", sp.AtShard, rng.First+1, rng.Last)
	}
	if sp.LockWait <= 0 {
		sp.LockWait = 30 * time.Second
	}
	if sp.Logger == nil {
		sp.Logger = slog.Default()
	}
	clusters, err := openSpecClusters(ds, sp.Cluster, nil)
	if err != nil {
		return AsyncSplitResult{}, fmt.Errorf("partition: split: %w", err)
	}
	defer closeClusters(clusters)
	s := &asyncSplitter{sp: sp, ds: ds, clusters: clusters, static: ps.Cluster,
		left:  cells.ShardRange{First: rng.First, Last: sp.AtShard - 1},
		right: cells.ShardRange{First: sp.AtShard, Last: rng.Last},
		whole: rng,
		log:   sp.Logger.With("datastore", ds.Name, "partition", sp.Partition, "right", sp.Right)}
	return s.run(ctx)
}

// asyncSplitter is one run of SplitAsync.
type asyncSplitter struct {
	sp                 AsyncSplit
	ds                 *topology.DatastoreSpec
	clusters           []*StorageCluster
	static             string
	left, right, whole cells.ShardRange
	log                *slog.Logger
}

// current returns the placement of partition pid with the highest epoch over every master, and
// whether any master holds one. Every master must answer.
func (s *asyncSplitter) current(ctx context.Context, pid int, static string) (storage.Placement, bool, error) {
	return currentPlacement(ctx, s.clusters, s.ds.Name, pid, static)
}

// currentPlacement returns the placement of partition pid of datastore ds with the highest
// epoch over the masters of clusters (static, the catalog's cluster, at epoch 0 when none
// holds one), and whether any master holds one. Every master must answer.
func currentPlacement(ctx context.Context, clusters []*StorageCluster, ds string, pid int, static string) (storage.Placement, bool, error) {
	cur := storage.Placement{Datastore: ds, Partition: pid, Cluster: static}
	found := false
	for _, r := range readPlacements(ctx, clusters, ds, pid) {
		if r.err != nil {
			return cur, false, fmt.Errorf("placement of partition %d on %s: %w", pid, r.cluster.Name(), r.err)
		}
		if r.found && (!found || r.rec.Epoch > cur.Epoch) {
			cur, found = r.rec, true
		}
	}
	return cur, found, nil
}

func (s *asyncSplitter) run(ctx context.Context) (res AsyncSplitResult, err error) {
	res = AsyncSplitResult{Left: s.left, Right: s.right}
	for _, c := range s.clusters {
		if err := c.waitProbed(ctx); err != nil {
			return res, err
		}
	}
	cur, moved, err := s.current(ctx, s.sp.Partition, s.static)
	if err != nil {
		return res, fmt.Errorf("partition: split: %w", err)
	}
	if moved && cur.State != storage.PlacementActive {
		return res, fmt.Errorf("%w: placement epoch %d is %s", ErrAsyncSplitMoving, cur.Epoch, cur.State)
	}
	home := clusterNamed(s.clusters, cur.Cluster)
	if home == nil {
		return res, fmt.Errorf("partition: split: placement epoch %d names %q, not one of the datastore's storage clusters", cur.Epoch, cur.Cluster)
	}
	res.Cluster = home.Name()
	_, st, err := masterOf(ctx, home)
	if err != nil {
		return res, err
	}
	ps, release, err := openMoveLocked(ctx, st, home, s.ds.Name, s.sp.Partition, s.whole)
	if err != nil {
		return res, err
	}
	defer release()

	unlock, err := st.Lock(ctx, asyncLockName(home.cfg.Prefix, s.ds.Name, s.sp.Partition), s.sp.LockWait)
	if err != nil {
		return res, fmt.Errorf("partition: split: the partition's write lock on %s: %w", home.Name(), err)
	}
	locked := time.Now()
	defer func() {
		unlock()
		res.LockHeld = time.Since(locked)
	}()
	if res.KVRows, err = s.divide(ctx, ps); err != nil {
		return res, fmt.Errorf("partition: split on %s: %w", home.Name(), err)
	}
	s.log.Info("async split: both halves' state written", "cluster", home.Name(), "left_shards", s.left, "right_shards", s.right, "kv_rows", res.KVRows)
	err = s.placeRight(ctx, home, moved)
	res.Placement = err == nil && moved
	if err == nil {
		err = s.sp.Commit(ctx, home.Name())
	}
	if err != nil {
		if uerr := s.undo(ps); uerr != nil {
			return res, fmt.Errorf("partition: split: %w; and undoing it on %s failed, the partition refuses shards %d..%d until a split is recorded or its range row is restored: %w",
				err, home.Name(), s.right.First, s.right.Last, uerr)
		}
		return res, fmt.Errorf("partition: split: %w (undone)", err)
	}
	return res, nil
}

// openMoveLocked takes partition pid's move lock on st, the master of home (no move of the
// partition runs until release; ErrAsyncSplitMoving when one holds it), checks under it that
// the partition's placement on the master is active on home, and opens the partition's store
// there with shard range r, fenced to home. release closes the store and the lock.
func openMoveLocked(ctx context.Context, st *storage.Store, home *StorageCluster, ds string, pid int, r cells.ShardRange) (*storage.PartitionStore, func(), error) {
	unlockMove, err := st.Lock(ctx, asyncLockName(home.cfg.Prefix, ds, pid)+"_move", 0)
	if errors.Is(err, storage.ErrLockTimeout) {
		return nil, nil, fmt.Errorf("%w: partition %d", ErrAsyncSplitMoving, pid)
	}
	if err != nil {
		return nil, nil, err
	}
	// Under the move lock the placement cannot change: read it again on the master.
	if pl, ok, err := st.ReadPlacement(ctx, ds, pid); err != nil {
		unlockMove()
		return nil, nil, err
	} else if ok && (pl.Cluster != home.Name() || pl.State != storage.PlacementActive) {
		unlockMove()
		return nil, nil, fmt.Errorf("%w: partition %d's placement changed to %s (%s) at epoch %d", ErrAsyncSplitMoving, pid, pl.Cluster, pl.State, pl.Epoch)
	}
	ps, err := st.Partition(ctx, storage.PartitionID{Datastore: ds, Partition: pid}, r)
	if err != nil {
		unlockMove()
		return nil, nil, err
	}
	ps.SetFence(home.Name())
	return ps, func() { _ = ps.Close(); unlockMove() }, nil
}

// divide writes both halves' state on the master, in one transaction: see SplitAsync.
func (s *asyncSplitter) divide(ctx context.Context, ps *storage.PartitionStore) (int, error) {
	applied, err := ps.Applied(ctx)
	if err != nil {
		return 0, err
	}
	kvs, err := ps.ScanKV(ctx, "")
	if err != nil {
		return 0, err
	}
	var right []storage.KV
	for _, kv := range kvs {
		if fsm.CopiedBySplit(kv.Key) {
			right = append(right, kv)
		}
	}
	right = append(right, fsm.RangeRow(s.right))
	next := storage.AppliedState{Index: applied.Index + 1, Term: applied.Term}
	tx, err := ps.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	lr := fsm.RangeRow(s.left)
	if err := tx.PutKV(ctx, lr.Key, lr.Value); err != nil {
		return 0, err
	}
	if err := tx.CloneStateTo(ctx, s.sp.Right, right, next); err != nil {
		return 0, err
	}
	if err := tx.SetApplied(ctx, next); err != nil {
		return 0, err
	}
	return len(right), tx.Commit()
}

// undo gives the parent its whole range back (a split that the catalog did not record).
func (s *asyncSplitter) undo(ps *storage.PartitionStore) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := setRange(ctx, ps, s.whole, nil); err != nil {
		return err
	}
	s.log.Warn("async split: undone on the master", "range", s.whole)
	return nil
}

// placeRight writes the right half's placement record on every master, naming home, when the
// parent has records (moved) or the right half's id has some (a datastore dropped and created
// again): its nodes must find it where its data is, not where the catalog first placed the
// parent.
func (s *asyncSplitter) placeRight(ctx context.Context, home *StorageCluster, moved bool) error {
	old, had, err := s.current(ctx, s.sp.Right, home.Name())
	if err != nil {
		return err
	}
	if !moved && !had {
		return nil
	}
	p := storage.Placement{Datastore: s.ds.Name, Partition: s.sp.Right, Cluster: home.Name(), State: storage.PlacementActive}
	if had {
		p.Epoch = old.Epoch + 1
	}
	for _, c := range s.clusters {
		_, st, err := masterOf(ctx, c)
		if err != nil {
			return fmt.Errorf("placement of partition %d on %s: %w", s.sp.Right, c.Name(), err)
		}
		if ok, err := st.WritePlacement(ctx, p); err != nil || !ok {
			return fmt.Errorf("placement of partition %d on %s: written %v: %w", s.sp.Right, c.Name(), ok, err)
		}
	}
	return nil
}
