package fsm

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// indexCommandVersion is the first byte of an index command entry; cell commands start with
// commandVersion and consumer-group commands with groupCommandVersion.
const indexCommandVersion byte = 3

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

// IndexOp is the kind of an IndexCommand.
type IndexOp uint8

// Index command kinds.
const (
	// IndexUpsert merges entries into an index table (indexes.Merge: per source column, the
	// newer ref key wins), creating the table on first use.
	IndexUpsert IndexOp = iota + 1
	// IndexDrop drops an index table on this partition and ignores later upserts into it.
	IndexDrop
	// IndexCatalog applies a command to the datastore's index catalog.
	IndexCatalog
	// IndexErase deletes the entries of RowKeys from an index table on every shard of the
	// partition holding one (the maintainer, on the tombstone of an erased row; see erase.go).
	IndexErase
)

// IndexCommand is the data of an index log entry.
type IndexCommand struct {
	_msgpack struct{} `msgpack:",as_array"`
	Op       IndexOp
	// CreatedAt is the leader's clock when it proposed the entry: the catalog's "now".
	CreatedAt time.Time
	// Table is the index table of IndexUpsert and IndexDrop: indexes.TableName(index, version).
	Table string
	// Fields are the table's fields, shard field first (IndexUpsert).
	Fields []indexes.Field
	// Entries are merged in order (IndexUpsert).
	Entries []IndexEntry
	// Catalog is the catalog command (IndexCatalog).
	Catalog indexes.Command
	// RowKeys are the rows whose entries IndexErase deletes from Table.
	RowKeys []uuid.UUID
}

// IndexEntry is one entry of an IndexUpsert: the values of the source columns named in Refs,
// for row key RowKey, on index shard Shard.
type IndexEntry struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Shard     int32
	RowKey    uuid.UUID
	Values    []any
	Refs      map[string]int64
	Violation int64
}

// IndexResult is the result of an index command: how many entries an IndexUpsert changed, or
// the catalog's answer.
type IndexResult struct {
	Changed int
	Catalog indexes.Result
}

// EncodeIndexCommand returns the log entry data of c: a version byte, then MessagePack. UUID
// values are carried as 16-byte strings and restored by DecodeIndexCommand from the fields'
// types.
func EncodeIndexCommand(c IndexCommand) ([]byte, error) {
	entries := make([]IndexEntry, len(c.Entries))
	for i, e := range c.Entries {
		e.Values = PackIndexValues(e.Values)
		entries[i] = e
	}
	c.Entries = entries
	b, err := msgpack.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode index command: %w", err)
	}
	return append([]byte{indexCommandVersion}, b...), nil
}

// PackIndexValues returns a copy of index values with every UUID as a 16-byte slice, as
// MessagePack carries it; TypedIndexValue restores them.
func PackIndexValues(vs []any) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		if u, ok := v.(uuid.UUID); ok {
			v = u[:]
		}
		out[i] = v
	}
	return out
}

// DecodeIndexCommand parses data written by EncodeIndexCommand, typing every value by its
// field. Errors wrap ErrBadCommand.
func DecodeIndexCommand(data []byte) (IndexCommand, error) {
	if len(data) == 0 || data[0] != indexCommandVersion {
		return IndexCommand{}, fmt.Errorf("%w: not an index command", ErrBadCommand)
	}
	var c IndexCommand
	if err := msgpack.Unmarshal(data[1:], &c); err != nil {
		return IndexCommand{}, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	for i := range c.Entries {
		e := &c.Entries[i]
		if len(e.Values) != len(c.Fields) {
			return IndexCommand{}, fmt.Errorf("%w: entry %d has %d values for %d fields", ErrBadCommand, i, len(e.Values), len(c.Fields))
		}
		for j, v := range e.Values {
			tv, err := TypedIndexValue(c.Fields[j].Type, v)
			if err != nil {
				return IndexCommand{}, fmt.Errorf("%w: entry %d field %s: %w", ErrBadCommand, i, c.Fields[j].Name, err)
			}
			e.Values[j] = tv
		}
	}
	return c, nil
}

// typedValue restores the Go type of a decoded MessagePack value of a field of type t.
func TypedIndexValue(t indexes.FieldType, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t {
	case indexes.TypeUUID:
		switch x := v.(type) {
		case []byte:
			return uuid.FromBytes(x)
		case string:
			return uuid.FromBytes([]byte(x))
		}
	case indexes.TypeString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case indexes.TypeInt, indexes.TypeDatetime:
		switch x := v.(type) {
		case int8:
			return int64(x), nil
		case int16:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case int64:
			return x, nil
		case uint8:
			return int64(x), nil
		case uint16:
			return int64(x), nil
		case uint32:
			return int64(x), nil
		case uint64:
			if x <= 1<<63-1 {
				return int64(x), nil
			}
		}
	case indexes.TypeFloat:
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		}
	case indexes.TypeBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("value %v (%T) is not a %s", v, v, t)
}

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

// IndexResponseOf waits for f and returns the index command's result. Errors are raft's own
// (the outcome may be unknown) or the Response's Err (indexes.ErrBadCommand or
// indexes.ErrNotFound for a catalog command refused; nothing changed).
func IndexResponseOf(f raft.ApplyFuture) (IndexResult, error) {
	if err := f.Error(); err != nil {
		return IndexResult{}, err
	}
	r, ok := f.Response().(*Response)
	if !ok {
		return IndexResult{}, fmt.Errorf("%w: %T", ErrUnexpectedResponse, f.Response())
	}
	if r.Err != nil {
		return IndexResult{}, r.Err
	}
	if r.Index == nil {
		return IndexResult{}, fmt.Errorf("%w: no index result", ErrUnexpectedResponse)
	}
	return *r.Index, nil
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
func (f *FSM) ensureIndexTables(ctx context.Context, entries []entry) error {
	if err := f.loadIndexState(ctx); err != nil {
		return err
	}
	for _, e := range entries {
		c := e.index
		if c == nil || c.Op != IndexUpsert || f.idx.dropped[c.Table] || len(c.Entries) == 0 {
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
func (f *FSM) applyIndexes(ctx context.Context, tx *storage.WriteTx, entries []entry) (*indexApply, error) {
	var out *indexApply
	dropped := map[string]bool{}
	for i := range entries {
		e := &entries[i]
		c := e.index
		if c == nil {
			continue
		}
		if out == nil {
			out = &indexApply{tables: map[string][]indexes.Field{}}
		}
		switch c.Op {
		case IndexCatalog:
			if out.catalog == nil {
				out.catalog = f.idx.catalog.Clone()
			}
			res, err := out.catalog.Apply(c.Catalog)
			if err != nil {
				e.indexErr = err
				continue
			}
			b, err := indexes.EncodeCatalog(out.catalog)
			if err != nil {
				return nil, fmt.Errorf("encode index catalog: %w", err)
			}
			if err := tx.PutKV(ctx, indexCatalogKey, b); err != nil {
				return nil, fmt.Errorf("write index catalog: %w", err)
			}
			e.indexRes = &IndexResult{Catalog: res}
		case IndexDrop:
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
			e.indexRes = &IndexResult{}
		case IndexUpsert:
			if f.idx.dropped[c.Table] || dropped[c.Table] {
				e.indexRes = &IndexResult{}
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
			e.indexRes = &IndexResult{Changed: n}
		case IndexErase:
			if err := f.eraseIndexEntries(ctx, tx, e, dropped); err != nil {
				return nil, err
			}
		default:
			e.indexErr = fmt.Errorf("%w: unknown index op %d", ErrBadCommand, c.Op)
		}
	}
	return out, nil
}

// upsertIndex merges one command's entries into its table and returns how many changed.
func (f *FSM) upsertIndex(ctx context.Context, tx *storage.WriteTx, c *IndexCommand) (int, error) {
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
