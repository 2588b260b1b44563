package command

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/indexes"
)

// IndexOp is the kind of an Index command.
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
	// partition holding one (the maintainer, on the tombstone of an erased row).
	IndexErase
)

// Index is an index command. Its outcome is an IndexResult, or for a refused catalog command
// an error wrapping indexes.ErrBadCommand, ErrNotFound or ErrNotReady.
//
// Values of entries are typed by Fields: Encode carries a UUID as 16 bytes and Decode types
// every value again (TypedIndexValue), so a decoded command holds the Go types the fields name.
type Index struct {
	_msgpack struct{} `msgpack:",as_array"`
	Op       IndexOp
	// CreatedAt is the proposer's clock: the catalog's "now".
	CreatedAt time.Time
	// Table is the index table of IndexUpsert, IndexDrop and IndexErase:
	// indexes.TableName(index, version).
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

func (*Index) isCommand() {}

// CheckShards checks the index shard of every entry against r.
func (c *Index) CheckShards(r cells.ShardRange) error {
	for i, e := range c.Entries {
		if !r.Contains(int(e.Shard)) {
			return outOfRange(fmt.Sprintf("index entry %d", i), int(e.Shard), r)
		}
	}
	return nil
}

// IndexEntry is one entry of an IndexUpsert: the values of the index's fields (Index.Fields)
// for row key RowKey on index shard Shard, the ref key of each source column in Refs, and the
// violation count the maintainer recorded.
type IndexEntry struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Shard     int32
	RowKey    uuid.UUID
	Values    []any
	Refs      map[string]int64
	Violation int64
}

// IndexResult is the result of an index command: how many entries an IndexUpsert or
// IndexErase changed, or the catalog's answer.
type IndexResult struct {
	Changed int
	Catalog indexes.Result
}

// packed returns a copy of c whose values are packed for MessagePack (PackIndexValues).
func (c *Index) packed() *Index {
	out := *c
	out.Entries = make([]IndexEntry, len(c.Entries))
	for i, e := range c.Entries {
		e.Values = PackIndexValues(e.Values)
		out.Entries[i] = e
	}
	return &out
}

// typeValues restores the Go types of a decoded command's values and its time's location.
func (c *Index) typeValues() error {
	c.CreatedAt = c.CreatedAt.UTC()
	for i := range c.Entries {
		e := &c.Entries[i]
		if len(e.Values) != len(c.Fields) {
			return fmt.Errorf("%w: index entry %d has %d values for %d fields", ErrBadCommand, i, len(e.Values), len(c.Fields))
		}
		for j, v := range e.Values {
			tv, err := TypedIndexValue(c.Fields[j].Type, v)
			if err != nil {
				return fmt.Errorf("%w: index entry %d field %s: %w", ErrBadCommand, i, c.Fields[j].Name, err)
			}
			e.Values[j] = tv
		}
	}
	return nil
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

// TypedIndexValue restores the Go type of a decoded MessagePack value of a field of type t:
// uuid.UUID, string, int64 (ints and datetimes), float64 or bool; nil stays nil. A value that
// does not fit t is an error.
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
