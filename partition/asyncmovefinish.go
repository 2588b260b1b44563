package partition

import (
	"context"
	"maps"
	"sort"
	"time"

	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// The last steps of MovePartition: the final catch-up under the fence, the drain of the
// buffers written before the switch, and the drop of the old copy.

// final is the final catch-up, with the old copy fenced: the index tables of dst made like
// src's, then in one transaction of dst the cells since the last round, every KV row and every
// index entry, and an applied state above both copies' (so that any cache of dst is reloaded).
func (mv *mover) final(ctx context.Context, res *MoveResult) error {
	tables, err := fsm.IndexTables(ctx, mv.src)
	if err != nil {
		return err
	}
	names, err := mv.dst.IndexNames(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, ok := tables[n]; !ok {
			if err := mv.dst.DropIndex(ctx, n); err != nil {
				return err
			}
		}
	}
	var shards []int
	for s := mv.cfg.Shards.First; s <= mv.cfg.Shards.Last; s++ {
		shards = append(shards, s)
	}
	tnames := make([]string, 0, len(tables))
	for n := range tables {
		tnames = append(tnames, n)
	}
	sort.Strings(tnames)
	var tlist []storage.IndexTable
	for _, n := range tnames {
		t := fsm.IndexTableOf(n, tables[n])
		if err := mv.dst.EnsureIndex(ctx, t, shards); err != nil {
			return err
		}
		tlist = append(tlist, t)
	}
	kvs, err := mv.src.ScanKV(ctx, "")
	if err != nil {
		return err
	}
	srcApplied, err := mv.src.Applied(ctx)
	if err != nil {
		return err
	}
	// The bulk copy created every shard's table; a resumed switch may come before it.
	if err := mv.dst.EnsureShards(ctx, shards); err != nil {
		return err
	}
	snap, err := mv.src.BeginSnapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	tx, err := mv.dst.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	hw := maps.Clone(mv.hw)
	var cellsCopied int64
	for _, s := range shards {
		for {
			cs, _, _, err := mv.src.ReadLog(ctx, s, hw[s], "", catchUpPage)
			if err != nil {
				return err
			}
			if len(cs) == 0 {
				break
			}
			if err := mv.insert(ctx, tx, s, cs); err != nil {
				return err
			}
			hw[s] = cs[len(cs)-1].AddedID
			cellsCopied += int64(len(cs))
			if len(cs) < catchUpPage {
				break
			}
		}
	}
	if err := tx.ReplaceKV(ctx, kvs); err != nil {
		return err
	}
	var entries int64
	for _, t := range tlist {
		for _, s := range shards {
			if err := tx.ClearIndex(ctx, s, t); err != nil {
				return err
			}
			var batch []storage.IndexEntry
			flush := func() error {
				if len(batch) == 0 {
					return nil
				}
				err := tx.UpsertIndex(ctx, s, t, batch)
				entries += int64(len(batch))
				batch = batch[:0]
				return err
			}
			err := snap.ScanIndex(ctx, s, t, func(e storage.IndexEntry) error {
				batch = append(batch, e)
				if len(batch) >= 500 {
					return flush()
				}
				return nil
			})
			if err == nil {
				err = flush()
			}
			if err != nil {
				return err
			}
		}
	}
	applied := storage.AppliedState{Index: max(srcApplied.Index, mv.dstApplied.Index) + 1, Term: srcApplied.Term}
	if err := tx.SetApplied(ctx, applied); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	mv.hw = hw
	res.FinalCells, res.FinalKV, res.FinalIndexEntries = cellsCopied, len(kvs), entries
	return nil
}

// drain is step 5 of MovePartition: wait for the buffer rows of the partition written before
// the switch to be reaped, then, with DropOld, drop the old copy.
func (mv *mover) drain(ctx context.Context, res *MoveResult) {
	if mv.cfg.DrainTimeout < 0 {
		return
	}
	start := time.Now()
	high := map[*StorageCluster]int64{}
	for _, c := range mv.cfg.Clusters {
		_, st, err := mv.master(ctx, c)
		if err != nil {
			mv.log.Warn("partition move: drain: a master is unreachable", "cluster", c.Name(), "error", err)
			high[c] = -1 // unknown: wait for every row
			continue
		}
		if high[c], err = st.BufferHighID(ctx, mv.cfg.Datastore, mv.cfg.Shards); err != nil {
			high[c] = -1
		}
	}
	deadline := start.Add(mv.cfg.DrainTimeout)
	for {
		left := 0
		for _, c := range mv.cfg.Clusters {
			_, st, err := mv.master(ctx, c)
			if err != nil {
				left++
				continue
			}
			rows, err := st.ScanBuffered(ctx, mv.cfg.Datastore, mv.cfg.Shards, 0, 1)
			if err != nil || (len(rows) > 0 && (high[c] < 0 || rows[0].ID <= high[c])) {
				left++
			}
		}
		if left == 0 {
			res.Drained, res.DrainTime = true, time.Since(start)
			mv.log.Info("partition move: drained: the buffer rows written before the switch are reaped", "took", res.DrainTime.Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			mv.log.Warn("partition move: drain timed out: buffer rows written before the switch remain; the old copy is kept", "clusters_with_rows", left)
			return
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if !mv.cfg.DropOld {
		return
	}
	if wait := time.Until(res.SwitchedAt.Add(mv.cfg.DropGrace)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
	var failed []error
	for _, c := range mv.cfg.Clusters {
		if c == mv.to {
			continue
		}
		dropped, err := mv.dropOld(ctx, c)
		if err != nil {
			failed = append(failed, err)
			mv.log.Error("partition move: dropping an old copy failed; rerun with the drop (the copy is fenced either way)", "cluster", c.Name(), "error", err)
		} else if dropped {
			mv.log.Info("partition move: old copy dropped", "cluster", c.Name())
		}
	}
	res.Dropped = len(failed) == 0
}

// dropOld drops the partition's copy on c's master if the placement row there fences it
// (names another cluster): the old copy, or a leftover of an aborted move (on a cluster that
// never held the partition there is nothing to drop, and dropping costs nothing). It reports
// whether it dropped.
func (mv *mover) dropOld(ctx context.Context, c *StorageCluster) (bool, error) {
	_, st, err := mv.master(ctx, c)
	if err != nil {
		return false, err
	}
	pl, ok, err := st.ReadPlacement(ctx, mv.cfg.Datastore, mv.cfg.Partition)
	if err != nil {
		return false, err
	}
	if !ok || pl.Cluster == c.Name() || pl.Cluster != mv.cfg.To {
		return false, nil // not fenced by this move's placement: not ours to drop
	}
	if mv.src != nil && st == mv.fromSt {
		return true, mv.src.DropCopy(ctx)
	}
	ps, err := st.Partition(ctx, mv.id, mv.cfg.Shards)
	if err != nil {
		return false, err
	}
	defer ps.Close()
	if c != mv.from {
		// A cluster that never held a copy has no meta row of the partition.
		if a, err := ps.Applied(ctx); err != nil || a == (storage.AppliedState{}) {
			return false, err
		}
	}
	return true, ps.DropCopy(ctx)
}
