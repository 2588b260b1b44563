package fsm

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// KV keys of the index state a partition holds.
const (
	// indexTableKeyPrefix + table name: the fields of an index table this partition has
	// created (an encoded []indexes.Field), so snapshots know which tables to carry.
	indexTableKeyPrefix = "index/table/"
	// indexDroppedKeyPrefix + table name: a dropped index table. Later upserts into it are
	// ignored, and its SQL tables are dropped again when the FSM starts.
	indexDroppedKeyPrefix = "index/dropped/"
	// indexCatalogKey: the datastore's index catalog, on the partition holding
	// CatalogShard.
	indexCatalogKey = "index/catalog"
)

// IndexTableOf returns the storage table of an index table named name with fields (shard
// field first).
func IndexTableOf(name string, fields []indexes.Field) storage.IndexTable {
	t := storage.IndexTable{Name: name, Columns: make([]storage.IndexColumn, len(fields))}
	for i, f := range fields {
		t.Columns[i] = storage.IndexColumn{Name: f.Name, Kind: IndexKindOf(f.Type)}
	}
	return t
}

// IndexKindOf maps an index field type to its storage column kind.
func IndexKindOf(t indexes.FieldType) storage.IndexKind {
	switch t {
	case indexes.TypeUUID:
		return storage.IndexUUID
	case indexes.TypeString:
		return storage.IndexString
	case indexes.TypeInt:
		return storage.IndexInt
	case indexes.TypeFloat:
		return storage.IndexFloat
	case indexes.TypeBool:
		return storage.IndexBool
	case indexes.TypeDatetime:
		return storage.IndexDatetime
	}
	return 0
}

// kvScanner is the read side of the KV rows.
type kvScanner interface {
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
}

// LoadCatalog reads the datastore's index catalog from a store's committed KV rows (any
// replica of the partition holding the catalog, any goroutine). No catalog yet loads as an
// empty one.
func LoadCatalog(ctx context.Context, st kvScanner) (*indexes.Catalog, error) {
	kvs, err := st.ScanKV(ctx, indexCatalogKey)
	if err != nil {
		return nil, fmt.Errorf("fsm: load index catalog: %w", err)
	}
	for _, kv := range kvs {
		if kv.Key == indexCatalogKey {
			c, err := indexes.DecodeCatalog(kv.Value)
			if err != nil {
				return nil, fmt.Errorf("fsm: load index catalog: %w", err)
			}
			return c, nil
		}
	}
	return indexes.NewCatalog(), nil
}

// IndexTables reads the index tables a store's partition has created and not dropped, by
// name, with their fields (shard field first).
func IndexTables(ctx context.Context, st kvScanner) (map[string][]indexes.Field, error) {
	kvs, err := st.ScanKV(ctx, indexTableKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("fsm: load index tables: %w", err)
	}
	out := make(map[string][]indexes.Field, len(kvs))
	for _, kv := range kvs {
		var fields []indexes.Field
		if err := msgpack.Unmarshal(kv.Value, &fields); err != nil {
			return nil, fmt.Errorf("fsm: index table %s: %w", kv.Key, err)
		}
		out[strings.TrimPrefix(kv.Key, indexTableKeyPrefix)] = fields
	}
	return out, nil
}

// droppedIndexes reads the tombstones of dropped index tables.
func droppedIndexes(ctx context.Context, st kvScanner) (map[string]bool, error) {
	kvs, err := st.ScanKV(ctx, indexDroppedKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("fsm: load dropped index tables: %w", err)
	}
	out := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		out[strings.TrimPrefix(kv.Key, indexDroppedKeyPrefix)] = true
	}
	return out, nil
}

// indexState is the FSM's cached view of the index KV rows. FSM goroutine only.
type indexState struct {
	loaded  bool
	tables  map[string][]indexes.Field
	dropped map[string]bool
	catalog *indexes.Catalog
}

// loadIndexState loads the index state on first use and drops the SQL tables of dropped
// indexes that a crash may have left behind.
func (f *FSM) loadIndexState(ctx context.Context) error {
	if f.idx.loaded {
		return nil
	}
	tables, err := IndexTables(ctx, f.cfg.Store)
	if err != nil {
		return err
	}
	dropped, err := droppedIndexes(ctx, f.cfg.Store)
	if err != nil {
		return err
	}
	catalog, err := LoadCatalog(ctx, f.cfg.Store)
	if err != nil {
		return err
	}
	if len(dropped) > 0 {
		names, err := f.cfg.Store.IndexNames(ctx)
		if err != nil {
			return fmt.Errorf("fsm: list index tables: %w", err)
		}
		for _, n := range names {
			if dropped[n] {
				if err := f.cfg.Store.DropIndex(ctx, n); err != nil {
					return fmt.Errorf("fsm: drop index table %s: %w", n, err)
				}
			}
		}
	}
	f.idx = indexState{loaded: true, tables: tables, dropped: dropped, catalog: catalog}
	return nil
}

// ensureIndexTables creates, before the batch transaction, the tables the batch's upserts
// write (DDL runs outside transactions).
func (f *FSM) ensureIndexTables(ctx context.Context, entries []indexEntry) error {
	if err := f.loadIndexState(ctx); err != nil {
		return err
	}
	for _, e := range entries {
		c := e.cmd
		if c.Op != command.IndexUpsert || f.idx.dropped[c.Table] || len(c.Entries) == 0 {
			continue
		}
		seen := map[int]bool{}
		var shards []int
		for _, ie := range c.Entries {
			if s := int(ie.Shard); !seen[s] {
				seen[s] = true
				shards = append(shards, s)
			}
		}
		sort.Ints(shards)
		if err := f.cfg.Store.EnsureIndex(ctx, IndexTableOf(c.Table, c.Fields), shards); err != nil {
			return fmt.Errorf("ensure index table %s: %w", c.Table, err)
		}
	}
	return nil
}

// indexApply is what applyIndexes leaves to install once the batch transaction commits.
type indexApply struct {
	tables  map[string][]indexes.Field
	dropped []string
	catalog *indexes.Catalog
}

// applyIndexes applies the index entries of a batch in tx, in order, and sets each entry's
// result. It returns what to install after COMMIT.
func (f *FSM) applyIndexes(ctx context.Context, tx *storage.WriteTx, entries []indexEntry) (*indexApply, error) {
	out := &indexApply{tables: map[string][]indexes.Field{}}
	dropped := map[string]bool{}
	for i := range entries {
		e := &entries[i]
		c := e.cmd
		switch c.Op {
		case command.IndexCatalog:
			if out.catalog == nil {
				out.catalog = f.idx.catalog.Clone()
			}
			res, err := out.catalog.Apply(c.Catalog)
			if err != nil {
				e.err = err
				continue
			}
			b, err := indexes.EncodeCatalog(out.catalog)
			if err != nil {
				return nil, fmt.Errorf("encode index catalog: %w", err)
			}
			if err := tx.PutKV(ctx, indexCatalogKey, b); err != nil {
				return nil, fmt.Errorf("write index catalog: %w", err)
			}
			e.res = command.IndexResult{Catalog: res}
		case command.IndexDrop:
			if !f.idx.dropped[c.Table] && !dropped[c.Table] {
				if err := tx.PutKV(ctx, indexDroppedKeyPrefix+c.Table, []byte{1}); err != nil {
					return nil, fmt.Errorf("write index tombstone %s: %w", c.Table, err)
				}
				if err := tx.DeleteKV(ctx, indexTableKeyPrefix+c.Table); err != nil {
					return nil, fmt.Errorf("delete index table row %s: %w", c.Table, err)
				}
				dropped[c.Table] = true
				out.dropped = append(out.dropped, c.Table)
				delete(out.tables, c.Table)
			}
		case command.IndexUpsert:
			if f.idx.dropped[c.Table] || dropped[c.Table] {
				continue
			}
			n, err := f.upsertIndex(ctx, tx, c)
			if err != nil {
				return nil, err
			}
			if _, ok := f.idx.tables[c.Table]; !ok {
				if _, ok := out.tables[c.Table]; !ok {
					b, err := msgpack.Marshal(c.Fields)
					if err != nil {
						return nil, fmt.Errorf("encode index table %s: %w", c.Table, err)
					}
					if err := tx.PutKV(ctx, indexTableKeyPrefix+c.Table, b); err != nil {
						return nil, fmt.Errorf("write index table row %s: %w", c.Table, err)
					}
					out.tables[c.Table] = c.Fields
				}
			}
			e.res = command.IndexResult{Changed: n}
		case command.IndexErase:
			if err := f.eraseIndexEntries(ctx, tx, e, dropped); err != nil {
				return nil, err
			}
		default:
			e.err = fmt.Errorf("%w: unknown index op %d", command.ErrBadCommand, c.Op)
		}
	}
	return out, nil
}

// upsertIndex merges one command's entries into its table and returns how many changed.
func (f *FSM) upsertIndex(ctx context.Context, tx *storage.WriteTx, c *command.Index) (int, error) {
	t := IndexTableOf(c.Table, c.Fields)
	byShard := map[int][]int{}
	var shards []int
	for i, ie := range c.Entries {
		s := int(ie.Shard)
		if _, ok := byShard[s]; !ok {
			shards = append(shards, s)
		}
		byShard[s] = append(byShard[s], i)
	}
	sort.Ints(shards)
	changed := 0
	for _, s := range shards {
		idx := byShard[s]
		keys := make([]uuid.UUID, 0, len(idx))
		seen := map[uuid.UUID]bool{}
		for _, i := range idx {
			if rk := c.Entries[i].RowKey; !seen[rk] {
				seen[rk] = true
				keys = append(keys, rk)
			}
		}
		found, err := tx.LookupIndex(ctx, s, t, keys)
		if err != nil {
			return 0, fmt.Errorf("look up index %s shard %d: %w", c.Table, s, err)
		}
		current := make(map[uuid.UUID]*indexes.Entry, len(found))
		for rk, se := range found {
			refs, err := indexes.DecodeRefs(se.Refs)
			if err != nil {
				return 0, fmt.Errorf("index %s shard %d row %s: refs: %w", c.Table, s, rk, err)
			}
			current[rk] = &indexes.Entry{RowKey: rk, Values: se.Values, Refs: refs, Violation: se.Violation}
		}
		dirty := map[uuid.UUID]bool{}
		for _, i := range idx {
			ie := c.Entries[i]
			in := indexes.Entry{RowKey: ie.RowKey, Values: ie.Values, Refs: ie.Refs, Violation: ie.Violation}
			out, ch := indexes.Merge(c.Fields, current[ie.RowKey], in)
			if ch || current[ie.RowKey] == nil {
				current[ie.RowKey] = &out
				dirty[ie.RowKey] = true
			}
		}
		if len(dirty) == 0 {
			continue
		}
		rows := make([]storage.IndexEntry, 0, len(dirty))
		for _, rk := range keys {
			if !dirty[rk] {
				continue
			}
			e := current[rk]
			rows = append(rows, storage.IndexEntry{RowKey: rk, Values: e.Values, Refs: indexes.EncodeRefs(e.Refs), Violation: e.Violation})
		}
		if err := tx.UpsertIndex(ctx, s, t, rows); err != nil {
			return 0, fmt.Errorf("write index %s shard %d: %w", c.Table, s, err)
		}
		changed += len(rows)
	}
	return changed, nil
}

// installIndexes installs, after COMMIT, what applyIndexes changed, and drops the SQL tables of
// dropped indexes (a failure is logged: the tombstone makes the FSM drop them again on start).
func (f *FSM) installIndexes(ctx context.Context, a *indexApply) {
	if a == nil {
		return
	}
	for name, fields := range a.tables {
		f.idx.tables[name] = fields
	}
	if a.catalog != nil {
		f.idx.catalog = a.catalog
	}
	for _, name := range a.dropped {
		f.idx.dropped[name] = true
		delete(f.idx.tables, name)
		if err := f.cfg.Store.DropIndex(ctx, name); err != nil {
			f.cfg.Logger.Warn("fsm: drop index tables failed; retried when the replica starts", "table", name, "error", err)
		}
	}
}
