package fsm

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// ErrSharedApply: ApplyShared could not apply its commands (the store failed or the commit's
// outcome is unknown). The FSM is ready for the next call; the caller decides what the
// failure means (async mode: the primary master is unavailable).
var ErrSharedApply = errors.New("fsm: shared apply failed")

// ApplyShared applies commands (encoded as for raft: command.Encode) to a store that several writers share: async mode's master, written by
// every node. The caller must hold the store's cross-process lock (storage.Store.Lock) for
// the whole call. ApplyShared reads the store's applied index; if another writer moved it since
// this FSM's last apply, the FSM forgets what it cached of the store (high-water added_ids,
// consumer groups, index state) and reloads its shard range (RangeKey, written by a split in
// place of an async partition, partition.SplitAsync: a command on a shard the store no longer
// holds is then refused with command.ErrShardOutOfRange). It then applies the commands as the entries following the
// stored index, in one transaction (group commit), and returns one *Response per command, in
// order. The store's applied index counts applied batches; it is not a raft index.
//
// On failure the error wraps ErrSharedApply and the store's error, the FSM forgets its caches
// and the next call starts afresh; whether a commit happened is unknown when the failure came
// at COMMIT.
//
// A store with a fence (storage.PartitionStore.SetFence, async mode's partition moves) is
// checked before the batch and again inside its write transaction: when the partition's
// placement names another storage cluster the error wraps storage.ErrMoved and nothing was
// written, so the caller may retry the commands on the cluster the placement names. Blocks
// on I/O until ctx ends (ctx bounds the reads before the batch; the batch itself is bounded by
// Config.StoreTimeout and retried Config.StoreAttempts times).
func (f *FSM) ApplyShared(ctx context.Context, commands [][]byte) ([]*Response, error) {
	stored, err := f.cfg.Store.Applied(ctx)
	if err != nil {
		f.forgetShared()
		return nil, fmt.Errorf("%w: read applied index: %w", ErrSharedApply, err)
	}
	if f.Failed() != nil || stored != f.Applied() {
		f.forgetShared()
		f.mu.Lock()
		f.applied = stored
		f.mu.Unlock()
		// The range too: an async partition split in place (partition.SplitAsync) wrote the
		// parent's new range under the lock the caller holds, and moved the applied index.
		r, ok, err := loadRange(ctx, f.cfg.Store)
		if err != nil {
			f.forgetShared()
			return nil, fmt.Errorf("%w: read shard range: %w", ErrSharedApply, err)
		}
		if ok {
			f.setShards(r)
		}
	}
	if fs, ok := f.cfg.Store.(fencedStore); ok {
		// Cheap and early: a copy that moved away refuses here, before any DDL. The check that
		// holds against a concurrent move is the one inside the write transaction.
		if err := fs.CheckFence(ctx); err != nil {
			f.forgetShared()
			return nil, fmt.Errorf("%w: %w", ErrSharedApply, err)
		}
	}
	logs := make([]*raft.Log, len(commands))
	for i, c := range commands {
		logs[i] = &raft.Log{Index: stored.Index + uint64(i) + 1, Type: raft.LogCommand, Data: c}
	}
	outs := f.ApplyBatch(logs)
	if err := f.Failed(); err != nil {
		f.forgetShared()
		return nil, fmt.Errorf("%w: %w", ErrSharedApply, err)
	}
	res := make([]*Response, len(outs))
	for i, o := range outs {
		r, ok := o.(*Response)
		if !ok {
			return nil, fmt.Errorf("%w: %T", ErrUnexpectedResponse, o)
		}
		res[i] = r
	}
	return res, nil
}

// fencedStore is a store that can tell it holds a copy of the partition that moved away
// (*storage.PartitionStore).
type fencedStore interface {
	CheckFence(ctx context.Context) error
}

// forgetShared drops the caches and a stored failure so that the next ApplyShared reloads
// everything from the store.
func (f *FSM) forgetShared() {
	f.resetCaches()
	f.mu.Lock()
	f.failErr = nil
	f.applied.Index = 0
	f.applied.Term = ^uint64(0) // never equal to a stored state: forces a reload
	f.mu.Unlock()
}
