package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// IndexKind is the SQL type of one index column, and the Go type of its values in
// IndexEntry.Values, IndexQuery and IndexCursor.
type IndexKind uint8

// Index column kinds. The zero IndexKind is invalid.
const (
	// IndexUUID: Go value uuid.UUID; SQLite BLOB, MySQL BINARY(16); ordered bytewise.
	IndexUUID IndexKind = iota + 1
	// IndexString: Go string of at most MaxIndexStringBytes bytes; SQLite TEXT (BINARY
	// collation), MySQL VARBINARY(255); ordered bytewise on both engines, every byte
	// significant (no case folding, no trailing-space padding).
	IndexString
	// IndexInt: Go int64; SQLite INTEGER, MySQL BIGINT.
	IndexInt
	// IndexFloat: Go float64, finite (NaN and ±Inf are refused); SQLite REAL, MySQL DOUBLE.
	IndexFloat
	// IndexBool: Go bool, stored 0 (false) or 1 (true), so false sorts first; SQLite INTEGER,
	// MySQL TINYINT.
	IndexBool
	// IndexDatetime: Go int64, microseconds since the Unix epoch (UTC); SQLite INTEGER,
	// MySQL BIGINT.
	IndexDatetime
)

// Limits of index tables.
const (
	// MaxIndexStringBytes bounds an IndexString value, in bytes. MySQL stores strings as
	// VARBINARY(255), bounded in bytes too (a VARCHAR(255) of utf8mb4 would count characters,
	// and its utf8mb4_bin collation pads trailing spaces, so "a" and "a " would be equal there
	// but not in SQLite).
	MaxIndexStringBytes = 255
	// MaxIndexColumns bounds IndexTable.Columns.
	MaxIndexColumns = 32
	// MaxIndexQueryLimit bounds IndexQuery.Limit.
	MaxIndexQueryLimit = 10000
	// maxIndexNameLen and maxIndexColumnNameLen bound IndexTable.Name and IndexColumn.Name.
	maxIndexNameLen       = 48
	maxIndexColumnNameLen = 62
)

// String returns the kind's name: "uuid", "string", "int", "float", "bool" or "datetime".
func (k IndexKind) String() string {
	switch k {
	case IndexUUID:
		return "uuid"
	case IndexString:
		return "string"
	case IndexInt:
		return "int"
	case IndexFloat:
		return "float"
	case IndexBool:
		return "bool"
	case IndexDatetime:
		return "datetime"
	}
	return "IndexKind(" + strconv.Itoa(int(k)) + ")"
}

// IndexColumn is one field column of an index table. Name matches [A-Za-z_][A-Za-z0-9_]{0,61}
// and names the SQL column "f_<Name>"; SQL column names are case-insensitive, so two columns
// of a table may not differ only in case.
type IndexColumn struct {
	Name string
	Kind IndexKind
}

// IndexTable describes the table of one index version on each shard: one row per row key,
// holding the values of Columns. Name matches [a-z][a-z0-9_]{0,47} (callers use
// "<index>_v<version>"); it becomes part of table names. Columns[0] is the shard field, the
// column every IndexQuery fixes with ShardValue. A table has 1 to MaxIndexColumns columns with
// unique names. The same Name must always come with the same Columns: EnsureIndex refuses a
// definition that differs from the table's.
type IndexTable struct {
	Name    string
	Columns []IndexColumn
}

// Validate reports every problem of t (name, number of columns, each column's name and kind,
// names repeated), each wrapping ErrInvalidConfig and naming the bad part, joined with
// errors.Join; nil if t is valid. Every index call validates its table first.
func (t IndexTable) Validate() error {
	var errs []error
	if !validIndexName(t.Name) {
		errs = append(errs, fmt.Errorf("%w: index table name %q must match [a-z][a-z0-9_]{0,%d}", ErrInvalidConfig, t.Name, maxIndexNameLen-1))
	}
	if len(t.Columns) == 0 || len(t.Columns) > MaxIndexColumns {
		errs = append(errs, fmt.Errorf("%w: index table %q has %d columns, want 1 to %d", ErrInvalidConfig, t.Name, len(t.Columns), MaxIndexColumns))
	}
	seen := make(map[string]int, len(t.Columns))
	for i, c := range t.Columns {
		if !validIndexColumnName(c.Name) {
			errs = append(errs, fmt.Errorf("%w: index table %q: column %d name %q must match [A-Za-z_][A-Za-z0-9_]{0,%d}", ErrInvalidConfig, t.Name, i, c.Name, maxIndexColumnNameLen-1))
		}
		if c.Kind < IndexUUID || c.Kind > IndexDatetime {
			errs = append(errs, fmt.Errorf("%w: index table %q: column %d (%s) has invalid kind %d", ErrInvalidConfig, t.Name, i, c.Name, c.Kind))
		}
		lower := strings.ToLower(c.Name)
		if j, ok := seen[lower]; ok {
			errs = append(errs, fmt.Errorf("%w: index table %q: column %d name %q repeats column %d (%q; SQL names ignore case)", ErrInvalidConfig, t.Name, i, c.Name, j, t.Columns[j].Name))
		} else {
			seen[lower] = i
		}
	}
	return errors.Join(errs...)
}

// validIndexName reports whether s matches [a-z][a-z0-9_]{0,47}.
func validIndexName(s string) bool {
	if len(s) == 0 || len(s) > maxIndexNameLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validIndexColumnName reports whether s matches [A-Za-z_][A-Za-z0-9_]{0,61}.
func validIndexColumnName(s string) bool {
	if len(s) == 0 || len(s) > maxIndexColumnNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// signature is the canonical text of t's columns, which EnsureIndex remembers per name.
func (t *IndexTable) signature() string {
	var b strings.Builder
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		b.WriteString(" ")
		b.WriteString(c.Kind.String())
	}
	return b.String()
}

// IndexEntry is one row of an index table: the entry of one row key on one shard.
type IndexEntry struct {
	// RowKey is the row the entry indexes; the table's primary key.
	RowKey uuid.UUID
	// Values holds one value per column of the table (len(IndexTable.Columns)): nil for SQL
	// NULL, otherwise the Go type of the column's kind (uuid.UUID, string, int64, float64,
	// bool, int64 for IndexDatetime).
	Values []any
	// Refs is opaque to storage (the caller's per-column ref keys), stored as a BLOB, never
	// NULL: nil is stored as empty, and empty may read back as nil.
	Refs []byte
	// Violation is 0 when the entry violates nothing, else the caller's reference to the
	// violation; stored in violation_ref and counted by IndexStats.
	Violation int64
}

// indexState is what a partition knows of one index's tables; guarded by the writer token.
type indexState struct {
	// sig is the signature of the columns the tables were checked or created with.
	sig string
	// shards holds the shards whose table exists with that definition.
	shards map[int]bool
}

// indexColumns is the select list (and insert column list) of t's table, in the order
// scanIndexEntry reads.
func indexColumns(t *IndexTable) string {
	var b strings.Builder
	b.WriteString("row_key")
	for _, c := range t.Columns {
		b.WriteString(", f_")
		b.WriteString(c.Name)
	}
	b.WriteString(", refs, violation_ref")
	return b.String()
}

// indexArg converts v, a value of a column of kind k, to its SQL argument; an error (not
// wrapped) says why v does not fit. nil is SQL NULL. Strings are bound as TEXT in SQLite and
// as bytes in MySQL, so that both compare them bytewise.
func (d *dialect) indexArg(k IndexKind, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch k {
	case IndexUUID:
		if u, ok := v.(uuid.UUID); ok {
			return u[:], nil
		}
	case IndexString:
		if s, ok := v.(string); ok {
			if len(s) > MaxIndexStringBytes {
				return nil, fmt.Errorf("string of %d bytes, want at most %d", len(s), MaxIndexStringBytes)
			}
			if d.engine == EngineMySQL {
				return []byte(s), nil
			}
			return s, nil
		}
	case IndexInt, IndexDatetime:
		if n, ok := v.(int64); ok {
			return n, nil
		}
	case IndexFloat:
		if f, ok := v.(float64); ok {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("float %v is not finite", f)
			}
			return f, nil
		}
	case IndexBool:
		if b, ok := v.(bool); ok {
			if b {
				return int64(1), nil
			}
			return int64(0), nil
		}
	}
	return nil, fmt.Errorf("value of type %T, want %s", v, indexGoType(k))
}

// indexGoType names the Go type of a kind's values.
func indexGoType(k IndexKind) string {
	switch k {
	case IndexUUID:
		return "uuid.UUID"
	case IndexString:
		return "string"
	case IndexFloat:
		return "float64"
	case IndexBool:
		return "bool"
	case IndexDatetime:
		return "int64 (Unix microseconds)"
	}
	return "int64"
}

// entryArgs appends the INSERT arguments of e (row_key, the fields, refs, violation_ref), or
// returns an error wrapping ErrIndexValue if a value does not fit its column.
func (d *dialect) entryArgs(args []any, t *IndexTable, e *IndexEntry) ([]any, error) {
	if len(e.Values) != len(t.Columns) {
		return args, fmt.Errorf("%w: index %s: entry of row %s has %d values, want %d", ErrIndexValue, t.Name, e.RowKey, len(e.Values), len(t.Columns))
	}
	args = append(args, e.RowKey[:])
	for i, c := range t.Columns {
		a, err := d.indexArg(c.Kind, e.Values[i])
		if err != nil {
			return args, fmt.Errorf("%w: index %s: row %s: column %s (%s): %w", ErrIndexValue, t.Name, e.RowKey, c.Name, c.Kind, err)
		}
		args = append(args, a)
	}
	refs := e.Refs
	if refs == nil {
		refs = []byte{}
	}
	return append(args, refs, e.Violation), nil
}

// entryBytes estimates the bytes an entry adds to an INSERT statement.
func entryBytes(e *IndexEntry) int {
	n := len(e.Refs) + 64
	for _, v := range e.Values {
		if s, ok := v.(string); ok {
			n += len(s)
		} else {
			n += 16
		}
	}
	return n
}

// insertIndexSQL is a multi-row INSERT of n entries into table tbl; with upsert, an existing
// row_key has every column replaced.
func (d *dialect) insertIndexSQL(t *IndexTable, tbl string, n int, upsert bool) string {
	row := "(?" + strings.Repeat(", ?", len(t.Columns)+2) + ")"
	var b strings.Builder
	b.Grow(128 + n*(len(row)+2))
	b.WriteString("INSERT INTO ")
	b.WriteString(tbl)
	b.WriteString(" (")
	b.WriteString(indexColumns(t))
	b.WriteString(") VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	if !upsert {
		return b.String()
	}
	cols := make([]string, 0, len(t.Columns)+2)
	for _, c := range t.Columns {
		cols = append(cols, "f_"+c.Name)
	}
	cols = append(cols, "refs", "violation_ref")
	if d.engine == EngineSQLite {
		b.WriteString(" ON CONFLICT (row_key) DO UPDATE SET ")
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c + " = excluded." + c)
		}
		return b.String()
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c + " = VALUES(" + c + ")")
	}
	return b.String()
}

// indexMaxVars bounds the placeholders of one statement on index tables: below SQLite's
// 32766 variables and MySQL's 65535 prepared-statement placeholders.
const indexMaxVars = 30000

// insertIndex writes entries into t's table on shard with multi-row INSERTs run by stmt (a
// transaction's cached prepared statement of the text, or the text on the transaction), within
// d's limits (rows, bytes, placeholders): plain INSERTs (a row key already stored returns
// ErrDuplicate), or with upsert, inserts that replace existing rows. Every entry is checked
// before the first statement: a value that does not fit returns ErrIndexValue and writes
// nothing. A missing table returns ErrNoIndexTable.
func insertIndex(ctx context.Context, stmt func(q string) stmtQueryer, d *dialect, t *IndexTable, shard int, entries []IndexEntry, upsert bool) error {
	width := len(t.Columns) + 3
	args := make([]any, 0, width*len(entries))
	for i := range entries {
		var err error
		if args, err = d.entryArgs(args, t, &entries[i]); err != nil {
			return err
		}
	}
	tbl := d.indexTable(t.Name, shard)
	maxRows := max(1, min(d.insertRows, indexMaxVars/width))
	for start := 0; start < len(entries); {
		end, size := start, 0
		for end < len(entries) && end-start < maxRows && (end == start || size+entryBytes(&entries[end]) <= d.insertBytes) {
			size += entryBytes(&entries[end])
			end++
		}
		if _, err := stmt(d.insertIndexSQL(t, tbl, end-start, upsert)).Exec(ctx, args[start*width:end*width]...); err != nil {
			switch {
			case isNoTable(err):
				return fmt.Errorf("storage: write index %s of shard %d: %w: %w", t.Name, shard, ErrNoIndexTable, err)
			case isDuplicate(err):
				return fmt.Errorf("storage: insert %d entries into index %s of shard %d: %w: %w", end-start, t.Name, shard, ErrDuplicate, err)
			}
			return fmt.Errorf("storage: write %d entries into index %s of shard %d: %w", end-start, t.Name, shard, err)
		}
		start = end
	}
	return nil
}
