package fsm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
)

// The shard range of a partition is part of its replicated state: a split shrinks it at one
// index of the raft log, on every replica. The FSM keeps it in a KV row (RangeKey) written by
// the split, so a replica that restarts, or restores a snapshot taken after the split, applies
// the log with the range it had there. A partition that never split has no such row: its range
// is the one its store was opened with (the range it was created with, catalog.Partition.Origin).

const (
	// RangeKey is the KV row holding a partition's shard range once it has split (msgpack
	// [first, last]).
	RangeKey = "partition/range"
	// SplitKey is the KV row of a partition made by a split: its SplitOrigin.
	SplitKey = "partition/split"
	// ChildPrefix starts the KV rows a partition's splits write in it, one per partition they
	// made (ChildKey; msgpack: the raft index of the split): its replicated record of the
	// splits it applied, which its snapshots carry. A split's right half and a merge's left
	// partition do not take them.
	ChildPrefix = "partition/child/"
)

// ChildKey is the KV row (under ChildPrefix) a split writes in the parent for the partition
// right it made.
func ChildKey(right int) string { return ChildPrefix + strconv.Itoa(right) }

// SplitApplied reports whether the partition whose store is st has applied the split that made
// partition right (its ChildKey row: written by the split's entry, or restored from a snapshot
// taken after it). Splits applied by builds before these rows existed are not recorded.
func SplitApplied(ctx context.Context, st Store, right int) (bool, error) {
	_, ok, err := readRow[uint64](ctx, st, ChildKey(right))
	return ok, err
}

// SplitOrigin is what a partition made by a split records of its making (SplitKey): the parent
// partition, the catalog generation of the split, the raft index and term of the split in the
// parent's log, and the voters its raft group starts with.
type SplitOrigin struct {
	_msgpack   struct{} `msgpack:",as_array"`
	Parent     int
	Generation uint64
	Index      uint64
	Term       uint64
	Voters     []command.Voter
}

// SplitEvent tells the FSM's owner that the partition split (Config.OnSplit): Right, the new
// partition, now holds Shards in its store, at Applied (the index and term of the split entry),
// and the parent holds Left; or that it begins to (Config.OnSplitStart). Voters are the right
// half's first raft configuration (command.Split.Voters).
type SplitEvent struct {
	Right   int
	Left    cells.ShardRange
	Shards  cells.ShardRange
	Applied storage.AppliedState
	Voters  []command.Voter
}

// Shards returns the shard range the partition holds now. Safe from any goroutine.
func (f *FSM) Shards() cells.ShardRange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shards
}

// setShards makes r the partition's range, in the FSM and in its store.
func (f *FSM) setShards(r cells.ShardRange) {
	f.mu.Lock()
	f.shards = r
	f.mu.Unlock()
	f.cfg.Store.SetShards(r)
}

// loadRange reads the range RangeKey holds, if any.
func loadRange(ctx context.Context, st Store) (cells.ShardRange, bool, error) {
	kvs, err := st.ScanKV(ctx, RangeKey)
	if err != nil {
		return cells.ShardRange{}, false, err
	}
	for _, kv := range kvs {
		if kv.Key == RangeKey {
			r, err := decodeRange(kv.Value)
			return r, err == nil, err
		}
	}
	return cells.ShardRange{}, false, nil
}

func encodeRange(r cells.ShardRange) []byte {
	b, _ := msgpack.Marshal([]int{r.First, r.Last})
	return b
}

func decodeRange(b []byte) (cells.ShardRange, error) {
	var v []int
	if err := msgpack.Unmarshal(b, &v); err != nil || len(v) != 2 || v[0] < 0 || v[1] < v[0]-1 { // empty: frozen
		return cells.ShardRange{}, fmt.Errorf("fsm: malformed %s row (%v)", RangeKey, err)
	}
	return cells.ShardRange{First: v[0], Last: v[1]}, nil
}

// ReadSplitOrigin returns the SplitOrigin a partition made by a split holds, and false for any
// other partition.
func ReadSplitOrigin(ctx context.Context, st Store) (SplitOrigin, bool, error) {
	return readRow[SplitOrigin](ctx, st, SplitKey)
}

// readRow returns the MessagePack value of the KV row key of st, and false when there is none.
func readRow[T any](ctx context.Context, st interface {
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
}, key string) (T, bool, error) {
	var v T
	kvs, err := st.ScanKV(ctx, key)
	if err != nil {
		return v, false, err
	}
	for _, kv := range kvs {
		if kv.Key == key {
			if err := msgpack.Unmarshal(kv.Value, &v); err != nil {
				return v, false, fmt.Errorf("fsm: malformed %s row: %w", key, err)
			}
			return v, true, nil
		}
	}
	return v, false, nil
}

// applySplit applies one split entry on its own: the right partition's store
// (Config.SplitStore) made the owner of the right half's shards (shared in place within one
// pebble store, else copied), then, in one transaction of the parent's store, the right half's
// shards handed over (let go, or deleted when copied), the parent's new range and the entry's
// applied index written.
// A command that does not decode, does not split the current range in two, or reaches a
// replica without Config.SplitStore is a deterministic refusal and only the applied index
// moves. Storage failures are retried and then stop the FSM, as in ApplyBatch.
func (f *FSM) applySplit(l *raft.Log) interface{} {
	began := time.Now()
	applied, cmd, refused, done := beginAlone[*command.Split](f, l)
	if done != nil {
		return done
	}
	if refused == nil && f.cfg.SplitStore == nil {
		refused = fmt.Errorf("%w: this replica's state machine cannot split", command.ErrBadCommand)
	}
	cur := f.shards
	var left, right cells.ShardRange
	if refused == nil {
		left = cells.ShardRange{First: cur.First, Last: int(cmd.AtShard) - 1}
		right = cells.ShardRange{First: int(cmd.AtShard), Last: cur.Last}
	}
	if refused == nil && f.cfg.OnSplitStart != nil {
		f.cfg.OnSplitStart(SplitEvent{Right: int(cmd.Right), Left: left, Shards: right, Applied: applied, Voters: cmd.Voters})
	}
	var times splitTimes
	if done := f.runAlone("split", l, began, applied, refused, left, func() error { return f.splitTx(cmd, left, right, applied, &times) }); done != nil {
		return done
	}
	f.cfg.Logger.Info("fsm: partition split", "left_first", left.First, "left_last", left.Last, "right", cmd.Right,
		"right_first", right.First, "right_last", right.Last, "index", l.Index, "took", time.Since(began), "right_store", times.rightStore,
		"hand_over", times.handOver, "commit", times.commit)
	if f.cfg.OnSplit != nil {
		f.cfg.OnSplit(SplitEvent{Right: int(cmd.Right), Left: left, Shards: right, Applied: applied, Voters: cmd.Voters})
	}
	return &Response{Result: command.SplitResult{Left: left, Right: right}}
}

// beginAlone starts applying l, an entry applied on its own (a split, freeze or merge): it
// returns the entry's applied state, its command decoded as C, and the command's deterministic
// refusal (it does not decode, or names shards outside the partition's range); or done, the
// answer to give at once when the FSM stopped or the entry is applied already.
func beginAlone[C command.Command](f *FSM, l *raft.Log) (applied storage.AppliedState, cmd C, refused error, done *Response) {
	if f.Failed() != nil {
		return applied, cmd, nil, &Response{Err: ErrFailed}
	}
	if l.Index <= f.Applied().Index {
		return applied, cmd, nil, &Response{Err: ErrAlreadyApplied}
	}
	applied = storage.AppliedState{Index: l.Index, Term: l.Term}
	cmd, refused = command.DecodeAs[C](l.Data)
	if refused == nil {
		refused = cmd.CheckShards(f.shards)
	}
	return applied, cmd, refused, nil
}

// runAlone runs tx, the transaction of an entry applied on its own that changes the
// partition's range to shards, retried by retryOne (for a refused entry, only the applied
// index is written). On success the FSM takes shards and the entry's applied index, and runAlone
// returns nil; else it returns the answer to give: ErrFailed, or the refusal.
func (f *FSM) runAlone(what string, l *raft.Log, began time.Time, applied storage.AppliedState, refused error, shards cells.ShardRange, tx func() error) *Response {
	if !f.retryOne(what, l.Index, func() error {
		if refused != nil {
			return f.appliedOnlyTx(applied)
		}
		return tx()
	}) {
		return &Response{Err: ErrFailed}
	}
	if refused != nil {
		f.setApplied(applied)
		return &Response{Err: refused}
	}
	f.setShards(shards)
	f.resetCaches()
	f.setApplied(applied)
	observeApply(f.cfg.Store, began, 1, 0)
	return nil
}

// appliedOnlyTx writes the applied index alone (a refused entry).
func (f *FSM) appliedOnlyTx(applied storage.AppliedState) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
	defer cancel()
	tx, err := f.cfg.Store.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := tx.SetApplied(ctx, applied); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return &ambiguousCommitError{err}
	}
	return nil
}

// splitTimes is where the last attempt at a split spent its time, for the split's log line:
// making the right partition's store the owner of its shards (opened, shared or copied, and
// released), the parent's hand-over of them (ReleaseShards or DropShards), and the parent's
// commit.
type splitTimes struct{ rightStore, handOver, commit time.Duration }

// splitTx runs one attempt at a split: the right partition's store made the owner of its shards
// (skipped when that store already holds the split or later: a replay after a crash), then the
// parent's transaction. It records the steps' times in times.
func (f *FSM) splitTx(cmd *command.Split, left, right cells.ShardRange, applied storage.AppliedState, times *splitTimes) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
	defer cancel()
	snap, err := f.cfg.Store.BeginSnapshot(ctx)
	if err != nil {
		return fmt.Errorf("begin snapshot: %w", err)
	}
	defer snap.Close()
	// Every KV row goes to the right half: the index catalog and the schemas are every
	// partition's, and a consumer group's coordinator state is kept by both halves, while only
	// the half holding the group's coordinator shard takes its commands and strong reads
	// (command.Group.CheckShards), and a merge keeps the coordinating half's state (MergedKV).
	var kv []storage.KV
	err = snap.ScanKV(ctx, func(row storage.KV) error {
		if CopiedBySplit(row.Key) {
			kv = append(kv, row)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("KV rows: %w", err)
	}
	origin, err := msgpack.Marshal(&SplitOrigin{Parent: -1, Generation: cmd.Generation, Index: applied.Index, Term: applied.Term, Voters: cmd.Voters})
	if err != nil {
		return err
	}
	kv = append(kv, storage.KV{Key: RangeKey, Value: encodeRange(right)}, storage.KV{Key: SplitKey, Value: origin})
	_, tables, err := indexTablesOf(kv)
	if err != nil {
		return err
	}
	began := time.Now()
	rs, release, err := f.cfg.SplitStore(ctx, int(cmd.Right), right)
	if err != nil {
		return fmt.Errorf("open the right partition %d: %w", cmd.Right, err)
	}
	// copied: the right half got a copy of its shards through Restore (a store without
	// ShareShards), which the parent then deletes; else ShareShards gave them to it (pebble
	// and MySQL share them, SQLite copies them into the right half's file) and the parent
	// lets them go (ReleaseShards, which drops SQLite's copy).
	copied := false
	rightApplied, err := rs.Applied(ctx)
	if err == nil && rightApplied.Index < applied.Index {
		// The right half's raft group starts at the split's index in term 1 (see
		// partition.WriteSplitBase): its first leader's terms never fall below its log's.
		base := storage.AppliedState{Index: applied.Index, Term: 1}
		err = storage.ErrInvalidConfig
		if c, ok := rs.(shardSharer); ok {
			err = c.ShareShards(ctx, snap, right, kv, base)
		}
		if errors.Is(err, storage.ErrInvalidConfig) {
			copied = true
			err = rs.Restore(ctx, base, splitRecords(ctx, snap, right, tables), kv, tables)
		}
	}
	if rerr := release(); err == nil {
		err = rerr
	}
	times.rightStore = time.Since(began)
	if err != nil {
		return fmt.Errorf("copy into the right partition %d: %w", cmd.Right, err)
	}
	tx, err := f.cfg.Store.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	handOver := tx.ReleaseShards
	if copied {
		handOver = tx.DropShards
	}
	began = time.Now()
	if err := handOver(ctx, right); err != nil {
		return fmt.Errorf("hand over shards %d..%d: %w", right.First, right.Last, err)
	}
	times.handOver = time.Since(began)
	if err := tx.PutKV(ctx, RangeKey, encodeRange(left)); err != nil {
		return err
	}
	child, err := msgpack.Marshal(applied.Index)
	if err != nil {
		return err
	}
	if err := tx.PutKV(ctx, ChildKey(int(cmd.Right)), child); err != nil {
		return err
	}
	if err := tx.SetApplied(ctx, applied); err != nil {
		return err
	}
	began = time.Now()
	if err := tx.Commit(); err != nil {
		return &ambiguousCommitError{err}
	}
	times.commit = time.Since(began)
	return nil
}

// shardSharer is a store whose partitions can share the shards' data of a snapshot of
// another partition of its own engine, with no copy (storage.PartitionStore.ShareShards,
// pebble).
type shardSharer interface {
	ShareShards(ctx context.Context, src *storage.SnapshotTx, r cells.ShardRange, kv []storage.KV, applied storage.AppliedState) error
}

// splitRecords returns the records of the right half of the view snap for Store.Restore: the
// cells of shards r in added_id order, the entries of every index table on those shards, and
// every request record (a retry of a write of a moved row finds its outcome in either half). A
// goroutine reads the view ahead of the restore.
func splitRecords(ctx context.Context, snap *storage.SnapshotTx, r cells.ShardRange, tables []storage.IndexTable) func() (storage.RestoreRecord, error) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan storage.RestoreRecord, 1024)
	errc := make(chan error, 1)
	go func() {
		defer close(ch)
		send := func(rec storage.RestoreRecord) error {
			select {
			case ch <- rec:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := func() error {
			for s := r.First; s <= r.Last; s++ {
				if err := snap.ScanShard(ctx, s, func(c cells.Cell) error { return send(storage.RestoreRecord{Shard: s, Cell: c}) }); err != nil {
					return fmt.Errorf("shard %d: %w", s, err)
				}
			}
			for _, t := range tables {
				for s := r.First; s <= r.Last; s++ {
					err := snap.ScanIndex(ctx, s, t, func(e storage.IndexEntry) error {
						return send(storage.RestoreRecord{Shard: s, Index: t.Name, Entry: e})
					})
					if err != nil && !errors.Is(err, storage.ErrNoIndexTable) {
						return fmt.Errorf("index %s shard %d: %w", t.Name, s, err)
					}
				}
			}
			return snap.ScanRequests(ctx, func(rr storage.RequestRecord) error { return send(storage.RestoreRecord{Request: &rr}) })
		}()
		errc <- err
	}()
	return func() (storage.RestoreRecord, error) {
		rec, ok := <-ch
		if ok {
			return rec, nil
		}
		cancel()
		if err := <-errc; err != nil {
			errc <- err
			return storage.RestoreRecord{}, err
		}
		errc <- nil
		return storage.RestoreRecord{}, io.EOF
	}
}

// ReadRange returns the shard range the KV row RangeKey of st gives its partition, and false
// when st has no such row (a partition that never split: its range is the one it was created
// with). One KV read.
func ReadRange(ctx context.Context, st Store) (cells.ShardRange, bool, error) {
	return loadRange(ctx, st)
}

// CopiedBySplit reports whether a split copies the parent's KV row key into the right half:
// every row but the partition's own (ownRow), which the split writes anew for each half.
func CopiedBySplit(key string) bool { return !ownRow(key) }

// ownRow reports whether KV row key describes the partition itself, not the datastore: its
// range and origin (RangeKey, SplitKey) and its record of the splits it applied (ChildPrefix).
// Neither a split's right half nor a merge's left partition takes such rows.
func ownRow(key string) bool {
	return key == RangeKey || key == SplitKey || strings.HasPrefix(key, ChildPrefix)
}

// RangeRow returns the KV row (RangeKey) that gives a partition the shard range r: what a split
// writes, and what an async partition split in place writes on its master
// (partition.SplitAsync).
func RangeRow(r cells.ShardRange) storage.KV {
	return storage.KV{Key: RangeKey, Value: encodeRange(r)}
}
