package fsm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/storage"
)

// A merge joins two adjacent partitions on the same replicas in two entries. The right one
// applies command.Freeze: its range becomes empty (every request refused as out of range,
// nothing applied) and FreezeKey records where it froze, so its state stays as it was at that
// index. The left one then applies command.Merge: each replica copies the frozen state of its
// own replica of the right partition (Config.MergeSource, the same node) into its store and
// widens its range, in one transaction. The node running the merge makes sure every replica of
// the right partition has applied the freeze before the left one's log holds the merge.

// FreezeKey is the KV row of a frozen partition: its FreezeState.
const FreezeKey = "partition/freeze"

// FreezeState is what a frozen partition records (FreezeKey): Into, the partition that takes
// its shards; Generation, the catalog generation the merge was decided on; Index and Term, the
// freeze entry's place in its log; and First..Last, the range it held.
type FreezeState struct {
	_msgpack   struct{} `msgpack:",as_array"`
	Into       int
	Generation uint64
	Index      uint64
	Term       uint64
	First      int
	Last       int
}

// Shards returns the range the partition held when it froze.
func (s FreezeState) Shards() cells.ShardRange { return cells.ShardRange{First: s.First, Last: s.Last} }

// MergeEvent tells the FSM's owner that the partition took the shards of partition Right
// (Config.OnMerge): Merged is its range now, Applied the merge entry's index and term.
type MergeEvent struct {
	Right   int
	Merged  cells.ShardRange
	Applied storage.AppliedState
}

// ReadFreeze returns the FreezeState of a frozen partition's store, and false for a partition
// that is not frozen.
func ReadFreeze(ctx context.Context, st interface {
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
}) (FreezeState, bool, error) {
	return readRow[FreezeState](ctx, st, FreezeKey)
}

// emptyRange is the range of a frozen partition: no shard, starting where r starts.
func emptyRange(r cells.ShardRange) cells.ShardRange {
	return cells.ShardRange{First: r.First, Last: r.First - 1}
}

// applyFreeze applies one freeze entry on its own (see command.Freeze). A freeze of a frozen
// partition, or a thaw of one that is not frozen for Into, changes nothing but the applied
// index; a thaw of a partition that is not frozen is refused (command.ErrBadCommand).
func (f *FSM) applyFreeze(l *raft.Log) interface{} {
	applied, cmd, refused, done := beginAlone[*command.Freeze](f, l)
	if done != nil {
		return done
	}
	var (
		res    command.FreezeResult
		shards = f.shards
	)
	if !f.retryOne("freeze", l.Index, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
		defer cancel()
		if refused != nil {
			return f.appliedOnlyTx(applied)
		}
		cur, frozen, err := ReadFreeze(ctx, f.cfg.Store)
		if err != nil {
			return err
		}
		tx, err := f.cfg.Store.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer tx.Rollback()
		switch {
		case !cmd.Thaw && frozen:
			res, shards = command.FreezeResult{Index: cur.Index, Shards: cur.Shards(), Already: true}, f.shards
		case !cmd.Thaw:
			st := FreezeState{Into: int(cmd.Into), Generation: cmd.Generation, Index: l.Index, Term: l.Term,
				First: f.shards.First, Last: f.shards.Last}
			b, err := msgpack.Marshal(&st)
			if err != nil {
				return err
			}
			if err := tx.PutKV(ctx, FreezeKey, b); err != nil {
				return err
			}
			res, shards = command.FreezeResult{Index: l.Index, Shards: f.shards}, emptyRange(f.shards)
			if err := tx.PutKV(ctx, RangeKey, encodeRange(shards)); err != nil {
				return err
			}
		case frozen && cur.Into == int(cmd.Into):
			if err := tx.DeleteKV(ctx, FreezeKey); err != nil {
				return err
			}
			res, shards = command.FreezeResult{Index: l.Index, Shards: cur.Shards()}, cur.Shards()
			if err := tx.PutKV(ctx, RangeKey, encodeRange(shards)); err != nil {
				return err
			}
		default:
			refused = fmt.Errorf("%w: thaw: the partition is not frozen for partition %d", command.ErrBadCommand, cmd.Into)
		}
		if err := tx.SetApplied(ctx, applied); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return &ambiguousCommitError{err}
		}
		return nil
	}) {
		return &Response{Err: ErrFailed}
	}
	if shards != f.shards {
		f.setShards(shards)
		f.resetCaches()
		f.cfg.Logger.Info("fsm: partition frozen or thawed", "thaw", cmd.Thaw, "into", cmd.Into, "first", shards.First, "last", shards.Last, "index", l.Index)
	}
	f.setApplied(applied)
	if refused != nil {
		return &Response{Err: refused}
	}
	return &Response{Result: res}
}

// errMergeSource marks a merge whose right partition's replica here cannot give its frozen
// state yet (not caught up to its freeze, or busy): the transaction is retried, and the FSM
// stops if it never can.
var errMergeSource = errors.New("fsm: the right partition's replica is not ready for the merge")

// applyMerge applies one merge entry on its own (see command.Merge and the comment above). A
// command that does not decode, whose shards do not follow the range, or that reaches a replica
// without Config.MergeSource is a deterministic refusal and only the applied index moves. A
// right replica not frozen at FrozenAt is retried (it catches up) and stops the FSM at last, as
// storage failures do: every replica of the right partition applied the freeze before the
// merge was decided.
func (f *FSM) applyMerge(l *raft.Log) interface{} {
	began := time.Now()
	applied, cmd, refused, done := beginAlone[*command.Merge](f, l)
	if done != nil {
		return done
	}
	if refused == nil && (f.cfg.MergeSource == nil || cmd.Shards <= 0) {
		refused = fmt.Errorf("%w: this replica's state machine cannot merge", command.ErrBadCommand)
	}
	var merged cells.ShardRange
	if refused == nil {
		merged = cells.ShardRange{First: f.shards.First, Last: int(cmd.Last)}
	}
	if done := f.runAlone("merge", l, began, applied, refused, merged, func() error { return f.mergeTx(cmd, merged, applied) }); done != nil {
		return done
	}
	f.cfg.Logger.Info("fsm: partition merged", "right", cmd.Right, "first", merged.First, "last", merged.Last, "index", l.Index, "took", time.Since(began))
	if f.cfg.OnMerge != nil {
		f.cfg.OnMerge(MergeEvent{Right: int(cmd.Right), Merged: merged, Applied: applied})
	}
	return &Response{Result: command.MergeResult{Merged: merged}}
}

// mergeTx runs one attempt at a merge: the right partition's frozen view read, then one
// transaction of this partition's store with its shards, its KV rows and the new range.
func (f *FSM) mergeTx(cmd *command.Merge, merged cells.ShardRange, applied storage.AppliedState) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
	defer cancel()
	right := cells.ShardRange{First: int(cmd.First), Last: int(cmd.Last)}
	rs, release, err := f.cfg.MergeSource(ctx, int(cmd.Right))
	if err != nil {
		return fmt.Errorf("%w: open partition %d: %w", errMergeSource, cmd.Right, err)
	}
	defer func() { _ = release() }()
	snap, err := rs.BeginSnapshot(ctx)
	if err != nil {
		return fmt.Errorf("%w: snapshot of partition %d: %w", errMergeSource, cmd.Right, err)
	}
	defer snap.Close()
	var (
		kv     []storage.KV
		frozen *FreezeState
	)
	err = snap.ScanKV(ctx, func(row storage.KV) error {
		if row.Key == FreezeKey {
			var s FreezeState
			if err := msgpack.Unmarshal(row.Value, &s); err != nil {
				return fmt.Errorf("malformed %s row: %w", FreezeKey, err)
			}
			frozen = &s
		}
		kv = append(kv, row)
		return nil
	})
	if err != nil {
		return fmt.Errorf("KV rows of partition %d: %w", cmd.Right, err)
	}
	if frozen == nil || frozen.Index != cmd.FrozenAt || frozen.Shards() != right {
		return fmt.Errorf("%w: partition %d here is at index %d, frozen %v, want frozen at %d with shards %d..%d",
			errMergeSource, cmd.Right, snap.Applied().Index, frozen, cmd.FrozenAt, right.First, right.Last)
	}
	_, tables, err := indexTablesOf(kv)
	if err != nil {
		return err
	}
	begin := f.cfg.Store.Begin
	if a, ok := f.cfg.Store.(absorber); ok {
		begin = func(ctx context.Context) (*storage.WriteTx, error) { return a.BeginAbsorb(ctx, snap) }
	}
	tx, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := tx.AbsorbShards(ctx, snap, right, tables, command.JoinRecords); err != nil {
		return fmt.Errorf("absorb shards %d..%d: %w", right.First, right.Last, err)
	}
	if err := f.mergeKV(ctx, tx, kv, right, int(cmd.Shards)); err != nil {
		return err
	}
	if err := tx.PutKV(ctx, RangeKey, encodeRange(merged)); err != nil {
		return err
	}
	if err := tx.SetApplied(ctx, applied); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return &ambiguousCommitError{err}
	}
	return nil
}

// absorber is a store that begins a merge's transaction for AbsorbShards from the right
// partition's view (storage.PartitionStore.BeginAbsorb: SQLite attaches the right partition's
// file to it, so that the shards are copied inside SQLite).
type absorber interface {
	BeginAbsorb(ctx context.Context, src *storage.SnapshotTx) (*storage.WriteTx, error)
}

// mergeKV writes in tx the KV rows of the right partition (kv) that the merged partition
// takes (MergedKV, against this partition's rows).
func (f *FSM) mergeKV(ctx context.Context, tx *storage.WriteTx, kv []storage.KV, right cells.ShardRange, shards int) error {
	own, err := f.cfg.Store.ScanKV(ctx, "")
	if err != nil {
		return fmt.Errorf("KV rows: %w", err)
	}
	put, del := MergedKV(own, kv, right, shards)
	for _, key := range del {
		if err := tx.DeleteKV(ctx, key); err != nil {
			return err
		}
	}
	for _, row := range put {
		if err := tx.PutKV(ctx, row.Key, row.Value); err != nil {
			return fmt.Errorf("KV row %s: %w", row.Key, err)
		}
	}
	return nil
}

// MergedKV returns what a merge changes in the left partition's KV rows own when it takes the
// right partition's rows incoming and its shards right (of a datastore of shards shards):
// del, the left one's copies of the consumer groups whose coordinator shard is in right, to
// delete first; put, the rows to write: the whole state of those groups from incoming, and
// every other row of incoming that own lacks (schemas and index catalog rows of a registration
// that reached one of the two only). The partition's own rows (ownRow) and its freeze
// (FreezeKey) are neither taken nor deleted. Raft merges (the state machine's merge entry) and
// async ones (partition.MergeAsync) use it.
func MergedKV(own, incoming []storage.KV, right cells.ShardRange, shards int) (put []storage.KV, del []string) {
	have := make(map[string]bool, len(own))
	for _, row := range own {
		have[row.Key] = true
	}
	moved := func(key string) (string, bool) {
		rest, ok := strings.CutPrefix(key, groupKeyPrefix)
		if !ok {
			return "", false
		}
		name, _, _ := strings.Cut(rest, "/")
		return name, right.Contains(consumer.CoordinatorShard(name, shards))
	}
	for _, row := range own { // this partition's stale copy of a moving group goes
		if _, ok := moved(row.Key); ok {
			del = append(del, row.Key)
		}
	}
	for _, row := range incoming {
		if ownRow(row.Key) || row.Key == FreezeKey {
			continue
		}
		_, group := moved(row.Key)
		isGroup := strings.HasPrefix(row.Key, groupKeyPrefix)
		if group || (!isGroup && !have[row.Key]) {
			put = append(put, row)
		}
	}
	return put, del
}
