package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// AsyncMerge describes a merge in place of two adjacent partitions of an async datastore on
// one storage cluster (MergeAsync).
type AsyncMerge struct {
	// Datastore is the async datastore as the nodes serve it (the catalog's view).
	Datastore *topology.DatastoreSpec
	// Left and Right are the partitions' ids: Right's first shard follows Left's last.
	Left, Right int
	// Commit records the merge in the catalog, the merged partition on storage cluster
	// cluster. It runs under both partitions' write locks, after the master holds the merged
	// state, and returns nil once the merge is recorded, an error when it is not: the merge is
	// then undone on the master.
	Commit func(ctx context.Context, cluster string) error
	// MoveRight, when the two partitions are on different storage clusters, moves Right to
	// cluster to (Left's) before the merge, with no lock held (MoveAsync: copy, catch-up,
	// fenced switch); nil: such a merge returns ErrAsyncMergeApart.
	MoveRight func(ctx context.Context, to string) error
	// Cluster carries the storage clusters' tunables; identity fields are filled in.
	Cluster ClusterConfig
	// LockWait bounds the wait for each partition's write lock. Default 30s.
	LockWait time.Duration
	// Logger receives the progress, at Info. Default slog.Default().
	Logger *slog.Logger
}

// AsyncMergeResult is what MergeAsync did.
type AsyncMergeResult struct {
	// Cluster is the storage cluster of the merged partition.
	Cluster string
	// Merged is the merged partition's shard range.
	Merged cells.ShardRange
	// LockHeld is how long the partitions' write locks were held: writes to either wait
	// meanwhile.
	LockHeld time.Duration
}

// ErrAsyncMergeApart: the two partitions of an async merge are on different storage clusters
// (their placement records'): move the right one to the left one's cluster first (MoveAsync).
var ErrAsyncMergeApart = errors.New("partition: the partitions are on different storage clusters")

// MergeAsync merges two adjacent partitions of an async datastore in place on their storage
// cluster: Left takes Right's shards, and no cell moves (a shard's cells and index tables are
// in a database of the shard's own: see SplitAsync). On the master of the cluster both
// partitions' placement records name, under both partitions' move locks (no move runs
// meanwhile) and their write locks (taken left then right; every node's writer takes one):
//
//   - Right's range becomes empty (fsm.RangeKey) and its applied counter moves, in one
//     transaction: every node's state machine of Right reloads the range at its next batch
//     and refuses every write with command.ErrShardOutOfRange (the node routes it again by the
//     newer catalog);
//   - then, in one transaction of Left, Right's request records are joined into Left's
//     (command.JoinRecords: a retry of a write of either finds its outcome), Right's KV rows
//     merged into Left's (fsm.MergedKV: the consumer groups coordinated in Right's shards,
//     schemas and index catalog rows Left lacks), Left's range widened to both and its applied
//     counter moved.
//
// Then Commit records the merge in the catalog and the locks are released; Right's request
// records are deleted (its range row stays, empty, so that a node that missed the merge never
// writes through it). A failure before Commit's success undoes the change on the master (both
// ranges and Left's KV rows back; the joined request records stay in Left, where a retry of
// a write in Right's shards is refused as out of range before it reads them). Buffered writes
// need nothing: the reapers choose buffer rows by shard. Blocks until done or ctx ends.
// Errors: a bad AsyncMerge, ErrAsyncMergeApart, ErrAsyncSplitMoving (a move of either runs),
// storage and connection errors, Commit's.
func MergeAsync(ctx context.Context, mg AsyncMerge) (AsyncMergeResult, error) {
	ds := mg.Datastore
	if ds == nil || ds.Mode != topology.ModeAsync || mg.Commit == nil {
		return AsyncMergeResult{}, errors.New("partition: merge: an async datastore and a Commit are needed")
	}
	lp, rp := ds.PartitionByID(mg.Left), ds.PartitionByID(mg.Right)
	if lp == nil || rp == nil || mg.Left == mg.Right {
		return AsyncMergeResult{}, fmt.Errorf("partition: merge: datastore %s has no partitions %d and %d", ds.Name, mg.Left, mg.Right)
	}
	if rp.Shards().First != lp.Shards().Last+1 {
		return AsyncMergeResult{}, fmt.Errorf("partition: merge: partition %d (shards %d..%d) is not right after partition %d (shards %d..%d)",
			mg.Right, rp.Shards().First, rp.Shards().Last, mg.Left, lp.Shards().First, lp.Shards().Last)
	}
	if mg.LockWait <= 0 {
		mg.LockWait = 30 * time.Second
	}
	if mg.Logger == nil {
		mg.Logger = slog.Default()
	}
	clusters, err := openSpecClusters(ds, mg.Cluster, nil)
	if err != nil {
		return AsyncMergeResult{}, fmt.Errorf("partition: merge: %w", err)
	}
	defer closeClusters(clusters)
	m := &asyncMerger{mg: mg, ds: ds, clusters: clusters, left: lp.Shards(), right: rp.Shards(),
		statics: [2]string{lp.Cluster, rp.Cluster},
		log:     mg.Logger.With("datastore", ds.Name, "left", mg.Left, "right", mg.Right)}
	return m.run(ctx)
}

// asyncMerger is one run of MergeAsync.
type asyncMerger struct {
	mg          AsyncMerge
	ds          *topology.DatastoreSpec
	clusters    []*StorageCluster
	left, right cells.ShardRange
	statics     [2]string
	log         *slog.Logger
	// priorKV is Left's KV rows before the merge, restored by undo.
	priorKV []storage.KV
}

func (m *asyncMerger) run(ctx context.Context) (res AsyncMergeResult, err error) {
	merged := cells.ShardRange{First: m.left.First, Last: m.right.Last}
	res.Merged = merged
	for _, c := range m.clusters {
		if err := c.waitProbed(ctx); err != nil {
			return res, err
		}
	}
	ids := [2]int{m.mg.Left, m.mg.Right}
	places, err := m.placements(ctx)
	if err != nil {
		return res, err
	}
	if places[0].Cluster != places[1].Cluster && m.mg.MoveRight != nil {
		m.log.Info("async merge: moving the right partition to the left one's cluster first", "from", places[1].Cluster, "to", places[0].Cluster)
		if err := m.mg.MoveRight(ctx, places[0].Cluster); err != nil {
			return res, fmt.Errorf("partition: merge: moving partition %d to %s: %w", ids[1], places[0].Cluster, err)
		}
		if places, err = m.placements(ctx); err != nil {
			return res, err
		}
	}
	if places[0].Cluster != places[1].Cluster {
		return res, fmt.Errorf("%w: partition %d is on %s, partition %d on %s", ErrAsyncMergeApart, ids[0], places[0].Cluster, ids[1], places[1].Cluster)
	}
	home := clusterNamed(m.clusters, places[0].Cluster)
	if home == nil {
		return res, fmt.Errorf("partition: merge: the placement names %q, not one of the datastore's storage clusters", places[0].Cluster)
	}
	res.Cluster = home.Name()
	_, st, err := masterOf(ctx, home)
	if err != nil {
		return res, err
	}
	var stores [2]*storage.PartitionStore
	for i, pid := range ids {
		ps, release, err := openMoveLocked(ctx, st, home, m.ds.Name, pid, [2]cells.ShardRange{m.left, m.right}[i])
		if err != nil {
			return res, err
		}
		defer release()
		stores[i] = ps
	}
	var locked time.Time
	for i, pid := range ids {
		unlock, err := st.Lock(ctx, asyncLockName(home.cfg.Prefix, m.ds.Name, pid), m.mg.LockWait)
		if err != nil {
			return res, fmt.Errorf("partition: merge: partition %d's write lock on %s: %w", pid, home.Name(), err)
		}
		if i == 0 {
			locked = time.Now()
		}
		defer unlock()
	}
	defer func() { res.LockHeld = time.Since(locked) }()
	if err := m.join(ctx, stores[0], stores[1], merged); err != nil {
		if uerr := m.undo(stores[0], stores[1]); uerr != nil {
			err = errors.Join(err, fmt.Errorf("undoing it: %w", uerr))
		}
		return res, fmt.Errorf("partition: merge on %s: %w", home.Name(), err)
	}
	m.log.Info("async merge: the merged state written", "cluster", home.Name(), "merged", merged)
	if err := m.mg.Commit(ctx, home.Name()); err != nil {
		if uerr := m.undo(stores[0], stores[1]); uerr != nil {
			return res, fmt.Errorf("partition: merge: %w; and undoing it on %s failed, partition %d refuses its shards until a merge is recorded or its range row is restored: %w",
				err, home.Name(), m.mg.Right, uerr)
		}
		return res, fmt.Errorf("partition: merge: %w (undone)", err)
	}
	if n, err := dropRequests(ctx, stores[1]); err != nil {
		m.log.Warn("async merge: deleting the merged partition's request records", "error", err)
	} else {
		m.log.Info("async merge: the merged partition's request records deleted", "records", n)
	}
	return res, nil
}

// placements returns both partitions' current placements; a partition being moved is
// ErrAsyncSplitMoving.
func (m *asyncMerger) placements(ctx context.Context) ([2]storage.Placement, error) {
	var places [2]storage.Placement
	for i, pid := range [2]int{m.mg.Left, m.mg.Right} {
		cur, moved, err := currentPlacement(ctx, m.clusters, m.ds.Name, pid, m.statics[i])
		if err != nil {
			return places, fmt.Errorf("partition: merge: %w", err)
		}
		if moved && cur.State != storage.PlacementActive {
			return places, fmt.Errorf("%w: partition %d: placement epoch %d is %s", ErrAsyncSplitMoving, pid, cur.Epoch, cur.State)
		}
		places[i] = cur
	}
	return places, nil
}

// join freezes right (empty range) and writes the merged state into left: see MergeAsync.
func (m *asyncMerger) join(ctx context.Context, left, right *storage.PartitionStore, merged cells.ShardRange) error {
	if err := setRange(ctx, right, cells.ShardRange{First: m.right.First, Last: m.right.First - 1}, nil); err != nil {
		return fmt.Errorf("freeze partition %d: %w", m.mg.Right, err)
	}
	own, err := left.ScanKV(ctx, "")
	if err != nil {
		return err
	}
	m.priorKV = own
	incoming, err := right.ScanKV(ctx, "")
	if err != nil {
		return err
	}
	snap, err := right.BeginSnapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	return withTx(ctx, left, func(tx *storage.WriteTx) error {
		if err := tx.AbsorbShards(ctx, snap, m.right, nil, command.JoinRecords); err != nil {
			return err
		}
		put, del := fsm.MergedKV(own, incoming, m.right, m.ds.Shards)
		for _, key := range del {
			if err := tx.DeleteKV(ctx, key); err != nil {
				return err
			}
		}
		for _, row := range append(put, fsm.RangeRow(merged)) {
			if err := tx.PutKV(ctx, row.Key, row.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

// undo gives both partitions their ranges back, and left its KV rows (a merge that the
// catalog did not record, or that failed half way).
func (m *asyncMerger) undo(left, right *storage.PartitionStore) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var kv []storage.KV
	if m.priorKV != nil {
		for _, row := range m.priorKV {
			if row.Key != fsm.RangeKey {
				kv = append(kv, row)
			}
		}
		kv = append(kv, fsm.RangeRow(m.left))
	}
	errs := errors.Join(setRange(ctx, left, m.left, kv), setRange(ctx, right, m.right, nil))
	if errs == nil {
		m.log.Warn("async merge: undone on the master", "left", m.left, "right", m.right)
	}
	return errs
}

// setRange writes ps's range row r and moves its applied counter, in one transaction; with
// kv, its KV rows become kv (which must hold its range row) instead.
func setRange(ctx context.Context, ps *storage.PartitionStore, r cells.ShardRange, kv []storage.KV) error {
	return withTx(ctx, ps, func(tx *storage.WriteTx) error {
		if kv != nil {
			return tx.ReplaceKV(ctx, kv)
		}
		row := fsm.RangeRow(r)
		return tx.PutKV(ctx, row.Key, row.Value)
	})
}

// withTx runs fn in a transaction of ps that also moves its applied counter (so that every
// node's state machine of the partition reloads its range at its next batch), and commits.
func withTx(ctx context.Context, ps *storage.PartitionStore, fn func(tx *storage.WriteTx) error) error {
	applied, err := ps.Applied(ctx)
	if err != nil {
		return err
	}
	tx, err := ps.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.SetApplied(ctx, storage.AppliedState{Index: applied.Index + 1, Term: applied.Term}); err != nil {
		return err
	}
	return tx.Commit()
}

// dropRequests deletes every request record of ps, in transactions of 10,000, and returns how
// many it deleted.
func dropRequests(ctx context.Context, ps *storage.PartitionStore) (int64, error) {
	var total int64
	for {
		tx, err := ps.Begin(ctx)
		if err != nil {
			return total, err
		}
		n, err := tx.PruneRequests(ctx, time.Now().Add(24*time.Hour), 10000)
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			_ = tx.Rollback()
			return total, err
		}
		if total += n; n == 0 {
			return total, nil
		}
	}
}
