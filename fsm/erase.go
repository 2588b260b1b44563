package fsm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
)

// applyWithErases is ApplyBatch for a batch holding erase, split, freeze or merge entries
// (appliedAlone): the entries take
// effect in log order, so the entries before the first erase are applied as a batch of their own
// (one transaction), then the erase (or split) in its own transaction with its applied index,
// then the rest the same way. It reports false, doing nothing, for a batch without an erase entry. Erasures
// are rare: splitting the batch keeps the per-shard cell apply of ApplyBatch, which handles
// every cell of a shard together, free of ordering concerns.
func (f *FSM) applyWithErases(logs []*raft.Log) ([]interface{}, bool) {
	first := -1
	for i, l := range logs {
		if l.Type == raft.LogCommand && appliedAlone(command.KindOf(l.Data)) {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, false
	}
	out := make([]interface{}, 0, len(logs))
	if first > 0 {
		out = append(out, f.ApplyBatch(logs[:first])...)
	}
	switch command.KindOf(logs[first].Data) {
	case command.KindSplit:
		out = append(out, f.applySplit(logs[first]))
	case command.KindFreeze:
		out = append(out, f.applyFreeze(logs[first]))
	case command.KindMerge:
		out = append(out, f.applyMerge(logs[first]))
	default:
		out = append(out, f.applyErase(logs[first]))
	}
	if rest := logs[first+1:]; len(rest) > 0 {
		out = append(out, f.ApplyBatch(rest)...) // splits again at the next erase
	}
	return out, true
}

// appliedAlone reports whether entries of kind k are applied in a transaction of their own:
// erases, splits, freezes and merges.
func appliedAlone(k command.Kind) bool {
	switch k {
	case command.KindErase, command.KindEraseOrigin, command.KindSplit, command.KindFreeze, command.KindMerge:
		return true
	}
	return false
}

// applyErase applies one erase entry in its own transaction: the row's cells deleted (the rows
// of the shard's entity table, storage.WriteTx.EraseRow), a tombstone appended with the shard's
// next added_id when any was, and the entry's applied index. A command that does not decode or
// names a shard outside the partition is a deterministic refusal (its Response.Err), and only
// the applied index moves. Storage failures are retried and then stop the FSM, as in
// ApplyBatch.
func (f *FSM) applyErase(l *raft.Log) interface{} {
	began := time.Now()
	if f.Failed() != nil {
		return &Response{Err: ErrFailed}
	}
	if l.Index <= f.Applied().Index {
		return &Response{Err: ErrAlreadyApplied}
	}
	applied := storage.AppliedState{Index: l.Index, Term: l.Term}
	cmd, refused := command.DecodeAs[*command.Erase](l.Data)
	if refused == nil {
		refused = cmd.CheckShards(f.shards)
	} else {
		cmd = &command.Erase{} // only the applied index moves
	}
	var res command.EraseResult
	if !f.retryOne("erase", l.Index, func() (err error) {
		res, err = f.eraseTx(cmd, refused == nil, applied)
		return err
	}) {
		return &Response{Err: ErrFailed}
	}
	f.setApplied(applied)
	observeApply(f.cfg.Store, began, 1, 0)
	if refused != nil {
		return &Response{Err: refused}
	}
	return &Response{Result: res}
}

// retryOne runs tx, the transaction of the entry at index applied on its own (an erase, a
// split), until it succeeds, retrying a failure after the store backoff, doubled each time, as
// ApplyBatch does. After Config.StoreAttempts failures, or one whose commit outcome is unknown,
// it stops the FSM and returns false.
func (f *FSM) retryOne(what string, index uint64, tx func() error) bool {
	backoff := f.cfg.StoreBackoff
	for attempt := 1; ; attempt++ {
		err := tx()
		if err == nil {
			return true
		}
		var amb *ambiguousCommitError
		if errors.As(err, &amb) || attempt >= f.cfg.StoreAttempts {
			f.fail(fmt.Errorf("fsm: apply %s entry %d: %w", what, index, err))
			return false
		}
		f.cfg.Logger.Warn("fsm: "+what+" transaction failed, retrying", "attempt", attempt, "backoff", backoff, "error", err)
		time.Sleep(backoff)
		backoff *= 2
	}
}

// eraseTx runs one attempt at an erase entry's transaction (with do false, only the applied
// index is written). The high-water added_id of the shard moves only once it commits.
func (f *FSM) eraseTx(cmd *command.Erase, do bool, applied storage.AppliedState) (command.EraseResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
	defer cancel()
	shard := int(cmd.Shard)
	var high int64
	if do {
		var known bool
		if high, known = f.HighWater(shard); !known {
			var err error
			if high, err = f.cfg.Store.MaxAddedID(ctx, shard); err != nil {
				return command.EraseResult{}, fmt.Errorf("max added_id of shard %d: %w", shard, err)
			}
		}
	}
	tx, err := f.cfg.Store.Begin(ctx)
	if err != nil {
		return command.EraseResult{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var res command.EraseResult
	if do {
		n, err := tx.EraseRow(ctx, shard, cmd.RowKey)
		if err != nil {
			return command.EraseResult{}, fmt.Errorf("erase row %s in shard %d: %w", cmd.RowKey, shard, err)
		}
		if n > 0 {
			// The tombstone takes an added_id above every deleted cell's, so the shard's
			// highest added_id never goes back, on any replica, even after a restart.
			res = command.EraseResult{Erased: n, AddedID: high + 1}
			if err := tx.Insert(ctx, shard, []cells.Cell{withOrigin(cells.NewTombstone(cmd.RowKey, res.AddedID, cmd.CreatedAt), cmd.Origin)}); err != nil {
				return command.EraseResult{}, fmt.Errorf("tombstone of row %s in shard %d: %w", cmd.RowKey, shard, err)
			}
		}
	}
	if err := tx.SetApplied(ctx, applied); err != nil {
		return command.EraseResult{}, fmt.Errorf("set applied index %d: %w", applied.Index, err)
	}
	if err := tx.Commit(); err != nil {
		return command.EraseResult{}, &ambiguousCommitError{err}
	}
	if do {
		f.mu.Lock()
		f.high[shard] = max(high, res.AddedID)
		f.mu.Unlock()
	}
	return res, nil
}

// eraseIndexEntries applies e's IndexErase command in tx and sets e's result: the entries of its
// row keys are deleted from its table on every shard of the partition holding one. A dropped
// table (before the batch, or earlier in it: dropped) has nothing to delete; a table name that
// is not valid is the entry's refusal (ErrBadCommand), the same on every replica. The error
// returned is the store's.
func (f *FSM) eraseIndexEntries(ctx context.Context, tx *storage.WriteTx, e *indexEntry, dropped map[string]bool) error {
	c := e.cmd
	if f.idx.dropped[c.Table] || dropped[c.Table] {
		return nil
	}
	n, err := tx.DeleteIndexEntries(ctx, c.Table, c.RowKeys)
	switch {
	case errors.Is(err, storage.ErrInvalidConfig): // refused before any I/O
		e.err = fmt.Errorf("%w: erase index entries: %w", command.ErrBadCommand, err)
		return nil
	case err != nil:
		return fmt.Errorf("erase %d row keys from index %s: %w", len(c.RowKeys), c.Table, err)
	}
	e.res = command.IndexResult{Changed: n}
	return nil
}

// withOrigin returns c with origin o: an erasure that arrived from another cluster stores its
// origin on its tombstone, as cells do.
func withOrigin(c cells.Cell, o string) cells.Cell {
	c.Origin = o
	return c
}
