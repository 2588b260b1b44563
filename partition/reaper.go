package partition

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// reapPage is how many buffer rows the reaper reads per statement.
const reapPage = 500

// Where the reaper found a buffered cell.
const (
	reapUnknown  = iota // not looked up (the cluster did not answer)
	reapOnMinion        // on a minion with the same body: the buffer row can go
	reapConflict        // stored with another body: the buffered write lost; the row goes
	reapOnMaster        // on the master only: replication will bring it to the minions
	reapMissing         // nowhere on the primary cluster: replay it
)

// reapLoop runs a reaper pass every ReapInterval (with jitter, since every node runs one).
func (a *Async) reapLoop() {
	defer a.wg.Done()
	for {
		d := a.cfg.ReapInterval/2 + rand.N(a.cfg.ReapInterval)
		select {
		case <-time.After(d):
		case <-a.stop:
			return
		}
		a.reapPass()
	}
}

// reapPass reads every cluster's buffered cells of this partition, deletes those now on a
// minion of the primary cluster, and replays into the primary master those missing from it
// for longer than ReplayAfter. It records the buffer depth it saw. Once the partition has
// moved, every cluster of the datastore is read, the primary's own too: the cells buffered on
// the new primary while it was a buffer are there. A cluster the pass could not read through
// (no master, a failed scan, the pass's deadline) counts with what an earlier pass saw there,
// when that was more: a buffer the reaper cannot see is not an empty one, and the depth must
// not read 0 (schemaless_buffer_depth, the harness's wait for quiet) while cells wait there.
func (a *Async) reapPass() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var total bufferSeen
	pl := a.placement()
	for _, bc := range a.all {
		if bc == pl.primary && pl.epoch == 0 {
			continue // never moved: no cell of the partition is buffered on its own cluster
		}
		seen, complete := a.reapCluster(ctx, bc)
		if prev := a.seen[bc]; !complete && prev.depth > seen.depth {
			seen = prev
		}
		a.seen[bc] = seen
		total.add(seen)
	}
	a.depth.Store(total.depth)
	if total.oldest.IsZero() {
		a.oldest.Store(0)
	} else {
		a.oldest.Store(total.oldest.UnixMicro())
	}
}

// bufferSeen is what a reaper pass saw of the partition's cells in a buffer cluster: how many,
// and when the oldest was buffered (zero when none).
type bufferSeen struct {
	depth  int64
	oldest time.Time
}

func (b *bufferSeen) add(o bufferSeen) {
	b.depth += o.depth
	if !o.oldest.IsZero() && (b.oldest.IsZero() || o.oldest.Before(b.oldest)) {
		b.oldest = o.oldest
	}
}

// reapCluster reaps the partition's rows in buffer cluster bc, page by page, and reports what it
// saw and whether it read them all (false: no master, a failed scan, or ctx ended).
func (a *Async) reapCluster(ctx context.Context, bc *StorageCluster) (bufferSeen, bool) {
	var seen bufferSeen
	_, m, err := bc.masterMember(ctx)
	if err != nil {
		return seen, false
	}
	after := int64(0)
	for ctx.Err() == nil {
		var rows []storage.BufferedCell
		err := m.run(func() error {
			st, err := m.writeStore(ctx, bc)
			if err != nil {
				return err
			}
			rows, err = st.ScanBuffered(ctx, a.cfg.Datastore, a.Shards(), after, reapPage)
			return err
		})
		if err != nil {
			return seen, false
		}
		if len(rows) == 0 {
			return seen, true
		}
		after = rows[len(rows)-1].ID
		seen.depth += int64(len(rows))
		for _, r := range rows {
			seen.add(bufferSeen{oldest: r.BufferedAt})
		}
		a.reapRows(ctx, bc, m, rows)
		if len(rows) < reapPage {
			return seen, true
		}
	}
	return seen, false
}

// reapRows handles one page of buffer rows of buffer cluster bc (master m).
func (a *Async) reapRows(ctx context.Context, bc *StorageCluster, m *member, rows []storage.BufferedCell) {
	where := make([]int, len(rows))
	// look finds the rows in st, in a copy of where kept only if the read succeeds: a read
	// of a copy that moved away (refused after the fact) teaches nothing.
	look := func(read func(context.Context, func(*storage.PartitionStore) error) error, found int) {
		w := make([]int, len(where))
		err := read(ctx, func(st *storage.PartitionStore) error {
			copy(w, where)
			return lookIn(ctx, st, rows, w, found)
		})
		if err == nil {
			copy(where, w)
		}
	}
	look(a.onMinion, reapOnMinion)
	look(func(ctx context.Context, fn func(*storage.PartitionStore) error) error {
		return a.readWith(ctx, true, fn)
	}, reapOnMaster)

	var del []int64
	var replay []storage.BufferedCell
	for i, r := range rows {
		switch where[i] {
		case reapOnMinion:
			del = append(del, r.ID)
		case reapConflict:
			del = append(del, r.ID)
			a.conflicts.Add(1)
			a.cfg.Logger.Error("partition: reaper: a buffered cell's key holds another body on its primary cluster; the buffered cell is dropped",
				"datastore", a.cfg.Datastore, "partition", a.cfg.Partition, "key", r.Cell.Key.String(), "buffer", bc.Name())
		case reapMissing:
			if time.Since(r.BufferedAt) >= a.cfg.ReplayAfter {
				replay = append(replay, r)
			}
		}
	}
	if len(replay) > 0 {
		// Replayed cells stay in the buffer until a later pass finds them on a minion; cells a
		// schema refuses will never get there, and go now.
		del = append(del, a.replay(ctx, bc, m, replay)...)
	}
	if len(del) > 0 {
		var n int64
		err := m.run(func() error {
			st, err := m.writeStore(ctx, bc)
			if err != nil {
				return err
			}
			n, err = st.DeleteBuffered(ctx, del)
			return err
		})
		if err == nil {
			a.reaped.Add(n) // rows this node deleted; another node's reaper may have taken some
		}
	}
}

// lookIn looks up in st the rows whose place is still unknown in where, and records where it
// found them: found when stored with the same body, reapConflict with another body, and, when
// found is reapOnMaster, reapMissing when absent.
func lookIn(ctx context.Context, st *storage.PartitionStore, rows []storage.BufferedCell, where []int, found int) error {
	for i, r := range rows {
		if where[i] != reapUnknown {
			continue
		}
		c, err := st.GetCell(ctx, r.Shard, r.Cell.Key)
		if errors.Is(err, storage.ErrNotFound) {
			if found == reapOnMaster {
				where[i] = reapMissing
			}
			continue
		}
		if err != nil {
			return err
		}
		same, err := cells.SameBody(c.Body, r.Cell.Body)
		if err != nil {
			return err
		}
		if !same {
			where[i] = reapConflict
		} else {
			where[i] = found
		}
	}
	return nil
}

// onMinion runs fn on a minion of the primary cluster (the master when the cluster has no
// minions), trying each reachable minion in turn. A minion whose copy moved away (its
// placement names another cluster) fails like an unreachable one.
func (a *Async) onMinion(ctx context.Context, fn func(*storage.PartitionStore) error) error {
	primary := a.placement().primary
	if !primary.HasMinions() {
		return a.readWith(ctx, true, fn)
	}
	ms, err := primary.minionMembers(ctx)
	if err != nil {
		return err
	}
	lastErr := fmt.Errorf("%w: no minion of %s is reachable", ErrUnavailable, primary.Name())
	for _, m := range ms {
		err := a.readOn(ctx, primary, m, false, fn)
		if err == nil {
			return nil
		}
		lastErr = err
	}
	return lastErr
}

// replay applies buffered cells of buffer cluster bc (master m) to the primary master, one
// command per write time (so each cell keeps the created_at of its original write). Under the
// partition's lock, before applying, it checks that the rows are still in bc's buffer: a row an
// erasure of its row key deleted meanwhile is not replayed (see Async.EraseRow). It returns the
// IDs of the rows whose cell the master refused as violating its column's schema (logged): a
// write refused when it was made (the node knew the schema too late to refuse it before
// buffering), or, rarely, one buffered while the master was down and refused by a schema
// registered before the replay. The other cells of a refused command are applied without it.
func (a *Async) replay(ctx context.Context, bc *StorageCluster, m *member, rows []storage.BufferedCell) (refused []int64) {
	// One command per write time and origin: each keeps its created_at and the cells' origin.
	type group struct {
		t      time.Time
		origin string
	}
	byTime := map[group][]storage.BufferedCell{}
	var times []group
	for _, r := range rows {
		g := group{r.Cell.CreatedAt, r.Cell.Origin}
		if _, ok := byTime[g]; !ok {
			times = append(times, g)
		}
		byTime[g] = append(byTime[g], r)
	}
	for _, g := range times {
		t, rs := g.t, byTime[g]
		for len(rs) > 0 {
			var sent []byte // the command prepare built, read once applyOp answered
			res, err := a.applyOp(ctx, &asyncOp{prepare: func(ctx context.Context) ([]byte, error) {
				data, err := a.stillBuffered(ctx, bc, m, t, rs)
				sent = data
				return data, err
			}, done: make(chan asyncResult, 1)})
			if err != nil || res.Err != nil {
				return refused // the master is still away; the next pass tries again
			}
			if i, v, ok := violatingRow(res, sent, rs); ok {
				a.cfg.Logger.Error("partition: reaper: a buffered cell violates its column's schema; the buffered cell is dropped",
					"datastore", a.cfg.Datastore, "partition", a.cfg.Partition, "key", rs[i].Cell.Key.String(), "buffer", bc.Name(),
					"schema_version", v.Version, "pointer", v.Pointer, "violation", v.Message)
				refused = append(refused, rs[i].ID)
				rs = append(rs[:i:i], rs[i+1:]...) // the others again, without it
				continue
			}
			ws, _ := fsm.Unwrap[[]command.WriteResult](res)
			for _, wr := range ws {
				for _, c := range wr.Cells {
					if c.Status == cells.StatusCreated {
						a.replayed.Add(1)
					}
				}
			}
			break
		}
	}
	return refused
}
