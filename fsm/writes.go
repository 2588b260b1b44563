package fsm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
)

// pruneEvery is how often (in entry time) the FSM deletes request records older than
// command.RequestWindow. Each prune deletes at most pruneLimit records, or twice the records
// stored since the previous prune when that is more, so that pruning outpaces any write rate and
// the table holds about one window of records. Pruning is physical clean-up only: a record older
// than the window is ignored whether or not it is still stored, so replicas that prune at other
// moments still decide alike.
const (
	pruneEvery = time.Second
	pruneLimit = 1000
)

// pruneLimitFor returns how many records a prune may delete after recorded were stored since the
// previous one.
func pruneLimitFor(recorded int) int { return max(pruneLimit, 2*recorded) }

// item is one cell of a write being applied: the entry, write and cell indexes, and the cell.
type item struct {
	e, w, c int
	cell    *command.Cell
	at      time.Time
}

// colKey names a column of a row in a shard, for conditions.
type colKey struct {
	shard int
	row   uuid.UUID
	col   string
}

type latestRef struct {
	ref int64
	ok  bool
}

// errRequestStored is applyWrites' answer, without lookup, when a write's ID turned out to have a
// stored request record: the transaction must be rolled back and the batch applied again with
// lookup.
var errRequestStored = errors.New("fsm: a write's request ID has a stored record")

// applyWrites decides and stores the writes of the cell commands of entries inside tx, given
// the next added_id base of every shard they touch (next, updated). It fills each entry's res.
//
// With lookup, the request records of the writes' IDs are read first, and a write whose ID has
// a record within command.RequestWindow is answered from it. Without lookup, every ID is taken
// for new and its record inserted at the end: when one is stored after all (a retry, or an
// expired record still kept), it returns an error wrapping errRequestStored and the caller rolls
// tx back and applies the batch again with lookup. The outcomes of the two agree whenever no ID
// has a record, so the optimistic pass saves the lookup, a B-tree probe per write, in the
// common case (a retry is rare) and changes no decision; the same insert-first way decides
// cells (decideByShard).
func (f *FSM) applyWrites(ctx context.Context, tx *storage.WriteTx, entries []appendEntry, next map[int]int64, lookup bool) error {
	var ids []uuid.UUID
	for i := range entries {
		e := &entries[i]
		e.res = make([]command.WriteResult, len(e.cmd.Writes))
		for j := range e.cmd.Writes {
			if id := e.cmd.Writes[j].ID; id != uuid.Nil {
				ids = append(ids, id)
			}
		}
	}
	var recs map[uuid.UUID]storage.RequestRecord
	if len(ids) > 0 && lookup {
		var err error
		if recs, err = tx.LookupRequests(ctx, ids); err != nil {
			return fmt.Errorf("look up request records: %w", err)
		}
	}
	// known holds, by ID, what is recorded under it, as sequential applies would leave it: the
	// stored record (rec, or nil) and the writes of this batch applied under the ID since, each
	// a share of the request in shards nothing recorded before it held (held: the shards of
	// both). A later write with the ID is such a share again, or is answered from the record
	// as it is at its turn (Record.Answer).
	type known struct {
		rec    *command.Record
		shares []writeRef
		held   map[int]bool // nil: every shard (a stored record of the earlier layout)
	}
	seen := map[uuid.UUID]*known{}
	type dup struct {
		e, w   int
		shares int // how many of its ID's shares precede it
	}
	var (
		dups    []dup
		active  []writeRef // writes to decide, in log order
		atomic  bool
		lastAt  time.Time
		toStore []uuid.UUID // the IDs whose records to store, in order
	)
	for i := range entries {
		e := &entries[i]
		lastAt = e.cmd.CreatedAt
		for j := range e.cmd.Writes {
			w := &e.cmd.Writes[j]
			r := writeRef{e: i, w: j}
			if w.ID != uuid.Nil {
				k := seen[w.ID]
				if k == nil {
					k = &known{held: map[int]bool{}}
					if rec, stored := recs[w.ID]; stored && !rec.CreatedAt.Before(e.cmd.CreatedAt.Add(-command.RequestWindow)) {
						out, err := command.DecodeRecord(rec.Record)
						if err != nil {
							return fmt.Errorf("request record %s: %w", w.ID, err)
						}
						k.rec, k.held = &out, out.Shards()
					}
					seen[w.ID] = k
				}
				if (k.rec != nil || len(k.shares) > 0) && (w.IsAtomic() || !disjoint(k.held, w)) {
					if len(k.shares) == 0 {
						e.res[j], _ = k.rec.Answer(w)
					} else {
						dups = append(dups, dup{e: i, w: j, shares: len(k.shares)})
					}
					continue
				}
				// The first write of the ID, or another share of its request: applied, and
				// recorded with what the ID holds.
				if len(k.shares) == 0 {
					toStore = append(toStore, w.ID)
				}
				k.shares = append(k.shares, r)
				if k.held != nil {
					for _, sp := range w.Shards() {
						k.held[sp] = true
					}
				}
			}
			v, err := f.validateWrite(ctx, tx, w)
			if err != nil {
				return err
			}
			if v != nil {
				e.res[j] = command.WriteResult{Violation: v}
				continue
			}
			atomic = atomic || w.IsAtomic()
			active = append(active, r)
		}
	}
	var items []item
	for _, r := range active {
		e := &entries[r.e]
		w := &e.cmd.Writes[r.w]
		e.res[r.w].Cells = make([]cells.Result, len(w.Cells))
		for c := range w.Cells {
			items = append(items, item{e: r.e, w: r.w, c: c, cell: &w.Cells[c], at: e.cmd.CreatedAt})
		}
	}
	var err error
	if atomic {
		err = f.decideInOrder(ctx, tx, entries, active, items, next)
	} else {
		err = f.decideByShard(ctx, tx, entries, items, next)
	}
	if err != nil {
		return err
	}
	// record returns what ID's k holds after its first n shares of this batch.
	record := func(k *known, n int) command.Record {
		var rec command.Record
		if k.rec != nil {
			rec = *k.rec
		}
		for _, r := range k.shares[:n] {
			e := &entries[r.e]
			rec = rec.Extend(&e.cmd.Writes[r.w], &e.res[r.w])
		}
		return rec
	}
	for _, d := range dups {
		w := &entries[d.e].cmd.Writes[d.w]
		rec := record(seen[w.ID], d.shares)
		entries[d.e].res[d.w], _ = rec.Answer(w)
	}
	if len(toStore) > 0 {
		rs := make([]storage.RequestRecord, len(toStore))
		for i, id := range toStore {
			k := seen[id]
			rec := record(k, len(k.shares))
			b, err := command.EncodeRecord(&rec)
			if err != nil {
				return err
			}
			last := k.shares[len(k.shares)-1]
			rs[i] = storage.RequestRecord{ID: id, CreatedAt: entries[last.e].cmd.CreatedAt, Record: b}
		}
		if !lookup {
			err := tx.InsertRequests(ctx, rs)
			if errors.Is(err, storage.ErrDuplicate) {
				return fmt.Errorf("%w: %w", errRequestStored, err)
			}
			if err != nil {
				return fmt.Errorf("store %d request records: %w", len(rs), err)
			}
		} else if err := tx.PutRequests(ctx, rs); err != nil {
			return fmt.Errorf("store %d request records: %w", len(rs), err)
		}
	}
	f.recorded += len(toStore)
	if !lastAt.IsZero() && !lastAt.Before(f.pruneAt) {
		if _, err := tx.PruneRequests(ctx, lastAt.Add(-command.RequestWindow), pruneLimitFor(f.recorded)); err != nil {
			return fmt.Errorf("prune request records: %w", err)
		}
		f.pruneAt = lastAt.Add(pruneEvery)
		f.recorded = 0
	}
	return nil
}

// decideByShard decides the cells of writes that are none of them atomic: each shard's cells
// are inserted first and looked up only when the INSERT meets a stored key (ErrDuplicate,
// nothing of the shard's INSERT kept): a retried write is rare, and the unique key answers the
// common case without a SELECT per cell.
func (f *FSM) decideByShard(ctx context.Context, tx *storage.WriteTx, entries []appendEntry, items []item, next map[int]int64) error {
	for _, s := range sortedShards(items) {
		base := next[s]
		id, inserts, err := resolveShard(entries, items, s, base, nil)
		if err != nil {
			return err
		}
		err = tx.Insert(ctx, s, inserts)
		if errors.Is(err, storage.ErrDuplicate) {
			found, lerr := tx.Lookup(ctx, s, shardKeys(items, s))
			if lerr != nil {
				return fmt.Errorf("lookup in shard %d: %w", s, lerr)
			}
			if id, inserts, err = resolveShard(entries, items, s, base, found); err != nil {
				return err
			}
			err = nil
			if len(inserts) > 0 {
				err = tx.Insert(ctx, s, inserts)
			}
		}
		if err != nil {
			return fmt.Errorf("insert into shard %d: %w", s, err)
		}
		next[s] = id
	}
	return nil
}

// decideInOrder decides every write in log order, for batches holding an atomic write: it
// looks up every key and every condition's column first, then checks each write's conditions
// and (atomic writes) conflicts against the store and the writes before it, and stores the
// cells of the writes that hold.
func (f *FSM) decideInOrder(ctx context.Context, tx *storage.WriteTx, entries []appendEntry, active []writeRef, items []item, next map[int]int64) error {
	shards := sortedShards(items)
	found := make(map[int]map[cells.Key]storage.Existing, len(shards))
	for _, s := range shards {
		m, err := tx.Lookup(ctx, s, shardKeys(items, s))
		if err != nil {
			return fmt.Errorf("lookup in shard %d: %w", s, err)
		}
		found[s] = m
	}
	latest := map[colKey]latestRef{}
	for _, r := range active {
		for _, c := range entries[r.e].cmd.Writes[r.w].Conditions {
			k := colKey{c.Shard, c.RowKey, c.ColumnKey}
			if _, ok := latest[k]; ok {
				continue
			}
			ref, ok, err := tx.LatestRefKey(ctx, c.Shard, c.RowKey, c.ColumnKey)
			if err != nil {
				return fmt.Errorf("latest ref key of condition: %w", err)
			}
			latest[k] = latestRef{ref, ok}
		}
	}
	batch := map[cells.Key]storage.Existing{}
	existing := func(c *command.Cell) (storage.Existing, bool) {
		if ex, ok := found[c.Shard][c.Key]; ok {
			return ex, true
		}
		ex, ok := batch[c.Key]
		return ex, ok
	}
	inserts := map[int][]cells.Cell{}
	for _, r := range active {
		e := &entries[r.e]
		w := &e.cmd.Writes[r.w]
		res := &e.res[r.w]
		for i, c := range w.Conditions {
			cur := latest[colKey{c.Shard, c.RowKey, c.ColumnKey}]
			holds := cur.ok && cur.ref == c.LatestRefKey
			if c.None {
				holds = !cur.ok
			}
			if !holds {
				res.Failed = append(res.Failed, command.ConditionFailure{Index: i, LatestRefKey: cur.ref, Found: cur.ok})
			}
		}
		if len(res.Failed) > 0 {
			res.Cells = nil
			continue
		}
		if w.IsAtomic() {
			var own map[cells.Key]int // the write's own earlier cells, by key
			for i := range w.Cells {
				c := &w.Cells[i]
				if j, ok := own[c.Key]; ok {
					same, err := cells.SameBody(w.Cells[j].Body, c.Body)
					if err != nil {
						return fmt.Errorf("compare body of %s: %w", c.Key, err)
					}
					if !same {
						res.Conflict = true
						res.Cells[i] = cells.Result{Status: cells.StatusConflict}
					}
					continue
				}
				if own == nil {
					own = map[cells.Key]int{}
				}
				own[c.Key] = i
				if ex, ok := existing(c); ok {
					same, err := cells.SameBody(ex.Body, c.Body)
					if err != nil {
						return fmt.Errorf("compare body of %s: %w", c.Key, err)
					}
					if !same {
						res.Conflict = true
						res.Cells[i] = cells.Result{Status: cells.StatusConflict, AddedID: ex.AddedID, CreatedAt: ex.CreatedAt}
					}
				}
			}
			if res.Conflict {
				continue
			}
		}
		for i := range w.Cells {
			c := &w.Cells[i]
			if ex, ok := existing(c); ok {
				same, err := cells.SameBody(ex.Body, c.Body)
				if err != nil {
					return fmt.Errorf("compare body of %s: %w", c.Key, err)
				}
				st := cells.StatusConflict
				if same {
					st = cells.StatusExists
				}
				res.Cells[i] = cells.Result{Status: st, AddedID: ex.AddedID, CreatedAt: ex.CreatedAt}
				continue
			}
			next[c.Shard]++
			cell := cells.Cell{Key: c.Key, Body: c.Body, AddedID: next[c.Shard], CreatedAt: e.cmd.CreatedAt, Origin: w.Origin}
			inserts[c.Shard] = append(inserts[c.Shard], cell)
			batch[c.Key] = storage.Existing{AddedID: cell.AddedID, Body: cell.Body, CreatedAt: cell.CreatedAt}
			res.Cells[i] = cells.Result{Status: cells.StatusCreated, AddedID: cell.AddedID, CreatedAt: cell.CreatedAt}
			k := colKey{c.Shard, c.Key.RowKey, c.Key.ColumnKey}
			if cur, tracked := latest[k]; tracked && (!cur.ok || c.Key.RefKey > cur.ref) {
				latest[k] = latestRef{c.Key.RefKey, true}
			}
		}
	}
	for _, s := range shards {
		if len(inserts[s]) == 0 {
			continue
		}
		if err := tx.Insert(ctx, s, inserts[s]); err != nil {
			return fmt.Errorf("insert into shard %d: %w", s, err)
		}
	}
	return nil
}

// writeRef names a write of a batch: entry e, write w.
type writeRef struct {
	e, w int
}

// disjoint reports whether w touches no shard of held (nil holds every shard).
func disjoint(held map[int]bool, w *command.Write) bool {
	if held == nil {
		return false
	}
	for _, s := range w.Shards() {
		if held[s] {
			return false
		}
	}
	return true
}

// sortedShards returns the shards of items, ascending.
func sortedShards(items []item) []int {
	seen := map[int]bool{}
	var out []int
	for _, it := range items {
		if !seen[it.cell.Shard] {
			seen[it.cell.Shard] = true
			out = append(out, it.cell.Shard)
		}
	}
	sort.Ints(out)
	return out
}

// shardKeys returns the keys of the cells of shard in items (a key may come twice).
func shardKeys(items []item, shard int) []cells.Key {
	var keys []cells.Key
	for _, it := range items {
		if it.cell.Shard == shard {
			keys = append(keys, it.cell.Key)
		}
	}
	return keys
}

// resolveShard decides the outcome of every cell of shard in items, in log order, given the
// cells stored before the batch (found; nil: none): a key stored before or earlier in the
// batch is exists (same body) or conflict, any other is created with the next added_id after
// base. It writes the cells' results into their entries' res and returns the last added_id
// given and the cells to insert, in added_id order.
func resolveShard(entries []appendEntry, items []item, shard int, base int64, found map[cells.Key]storage.Existing) (int64, []cells.Cell, error) {
	var inserts []cells.Cell
	var batch map[cells.Key]storage.Existing // cells created earlier in this batch
	id := base
	for _, it := range items {
		c := it.cell
		if c.Shard != shard {
			continue
		}
		out := &entries[it.e].res[it.w].Cells[it.c]
		ex, ok := found[c.Key]
		if !ok {
			ex, ok = batch[c.Key]
		}
		if ok {
			same, err := cells.SameBody(ex.Body, c.Body)
			if err != nil {
				return 0, nil, fmt.Errorf("compare body of %s: %w", c.Key, err)
			}
			st := cells.StatusConflict
			if same {
				st = cells.StatusExists
			}
			*out = cells.Result{Status: st, AddedID: ex.AddedID, CreatedAt: ex.CreatedAt}
			continue
		}
		id++
		cell := cells.Cell{Key: c.Key, Body: c.Body, AddedID: id, CreatedAt: it.at, Origin: entries[it.e].cmd.Writes[it.w].Origin}
		inserts = append(inserts, cell)
		if batch == nil {
			batch = map[cells.Key]storage.Existing{}
		}
		batch[c.Key] = storage.Existing{AddedID: cell.AddedID, Body: cell.Body, CreatedAt: cell.CreatedAt}
		*out = cells.Result{Status: cells.StatusCreated, AddedID: cell.AddedID, CreatedAt: cell.CreatedAt}
	}
	return id, inserts, nil
}
