package fsm

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// schemaKeyPrefix starts the KV keys of the column schemas a partition holds:
// "schema/<column>/<version %08d>", whose value is an encoded schemaRow. Column keys hold no
// "/", and versions are fixed-width, so the keys of a column sort by version.
const schemaKeyPrefix = "schema/"

// schemaRow is the KV value of a schema version.
type schemaRow struct {
	_msgpack        struct{} `msgpack:",as_array"`
	CreatedAtMicros int64
	Text            []byte
}

func schemaKey(column string, version int) string {
	return fmt.Sprintf("%s%s/%08d", schemaKeyPrefix, column, version)
}

// parseSchemaKey splits a KV key of a schema version.
func parseSchemaKey(key string) (column string, version int, ok bool) {
	rest, ok := strings.CutPrefix(key, schemaKeyPrefix)
	if !ok {
		return "", 0, false
	}
	column, v, ok := strings.Cut(rest, "/")
	if !ok {
		return "", 0, false
	}
	version, err := strconv.Atoi(v)
	return column, version, err == nil && version > 0
}

// LoadSchemas reads the schema versions a store's committed KV rows hold (any replica, any
// goroutine): every version of column, or with column "" of every column; with latestOnly
// only the latest version of each. Sorted by column, then version.
func LoadSchemas(ctx context.Context, st interface {
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
}, column string, latestOnly bool) ([]schemas.Version, error) {
	prefix := schemaKeyPrefix
	if column != "" {
		prefix += column + "/"
	}
	kvs, err := st.ScanKV(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("fsm: load schemas: %w", err)
	}
	var out []schemas.Version
	for _, kv := range kvs {
		col, v, ok := parseSchemaKey(kv.Key)
		if !ok {
			continue
		}
		var row schemaRow
		if err := msgpack.Unmarshal(kv.Value, &row); err != nil {
			return nil, fmt.Errorf("fsm: load schemas: %s: %w", kv.Key, err)
		}
		sv := schemas.Version{Column: col, Version: v, CreatedAt: time.UnixMicro(row.CreatedAtMicros).UTC(), Text: row.Text}
		if latestOnly && len(out) > 0 && out[len(out)-1].Column == col {
			out[len(out)-1] = sv // keys sort by version within a column
			continue
		}
		out = append(out, sv)
	}
	return out, nil
}

// schemaState is what the FSM knows of the schemas of its partition. FSM goroutine only.
type schemaState struct {
	loaded bool
	latest map[string]columnSchema // the committed latest version of each column with one
	// batch holds the versions the batch being applied created, in log order, installed into
	// latest after COMMIT; writePos gives the batch position of each write of the batch when
	// batch is not empty, so that a write is checked against the versions before it only.
	batch    []batchSchema
	writePos map[*command.Write]int
}

type columnSchema struct {
	version int
	schema  *schemas.Schema
}

type batchSchema struct {
	pos    int
	column string
	columnSchema
}

// loadSchemas reads and compiles the latest version of every column once (the store's
// committed rows: a batch's own versions are in schemaState.batch). A stored schema that no
// longer compiles is a storage failure: this build judges bodies differently from the one that
// registered it, and the replica must not go on.
func (f *FSM) loadSchemas(ctx context.Context) error {
	if f.sch.loaded {
		return nil
	}
	vs, err := LoadSchemas(ctx, f.cfg.Store, "", true)
	if err != nil {
		return err
	}
	latest := make(map[string]columnSchema, len(vs))
	for _, v := range vs {
		s, err := schemas.Compile(v.Text)
		if err != nil {
			return fmt.Errorf("fsm: stored schema of column %s version %d: %w", v.Column, v.Version, err)
		}
		latest[v.Column] = columnSchema{version: v.Version, schema: s}
	}
	f.sch.latest, f.sch.loaded = latest, true
	return nil
}

// schemaAt returns the latest version of column's schema as a write at batch position pos
// sees it (nil: none).
func (f *FSM) schemaAt(column string, pos int) *columnSchema {
	for i := len(f.sch.batch) - 1; i >= 0; i-- {
		if b := &f.sch.batch[i]; b.pos < pos && b.column == column {
			return &b.columnSchema
		}
	}
	if cs, ok := f.sch.latest[column]; ok {
		return &cs
	}
	return nil
}

// applySchemas applies the schema entries of a batch, in log order, inside tx: each created
// version is written to the KV table and kept in f.sch.batch until installSchemas. It sets
// each entry's result. Called once per attempt at the batch transaction, before its writes.
func (f *FSM) applySchemas(ctx context.Context, tx *storage.WriteTx, b *batch) error {
	f.sch.batch, f.sch.writePos = nil, nil
	if len(b.schemas) == 0 {
		return nil
	}
	if err := f.loadSchemas(ctx); err != nil {
		return err
	}
	for i := range b.schemas {
		e := &b.schemas[i]
		res, err := f.applySchema(ctx, tx, e.pos, e.cmd)
		if err != nil {
			return err
		}
		e.res = res
	}
	if len(f.sch.batch) > 0 {
		f.sch.writePos = map[*command.Write]int{}
		for i := range b.appends {
			e := &b.appends[i]
			for j := range e.cmd.Writes {
				f.sch.writePos[&e.cmd.Writes[j]] = e.pos
			}
		}
	}
	return nil
}

// applySchema decides one schema command (see command.Schema).
func (f *FSM) applySchema(ctx context.Context, tx *storage.WriteTx, pos int, c *command.Schema) (command.SchemaResult, error) {
	latest := 0
	if cur := f.schemaAt(c.Column, math.MaxInt); cur != nil {
		latest = cur.version
	}
	invalid := func(format string, args ...any) (command.SchemaResult, error) {
		return command.SchemaResult{Status: command.SchemaInvalid, Latest: latest, Message: fmt.Sprintf(format, args...)}, nil
	}
	if err := cells.ValidateColumnKey(c.Column); err != nil {
		return invalid("column %q: %v", c.Column, err)
	}
	if c.Version < 1 || c.Version > schemas.MaxVersion {
		return invalid("version %d: want 1 to %d", c.Version, schemas.MaxVersion)
	}
	switch {
	case c.Version <= latest:
		text, err := f.schemaText(ctx, c.Column, c.Version)
		if err != nil {
			return command.SchemaResult{}, err
		}
		if bytes.Equal(text, c.Text) {
			return command.SchemaResult{Status: command.SchemaExists, Latest: latest}, nil
		}
		return command.SchemaResult{Status: command.SchemaConflict, Latest: latest}, nil
	case c.Version > latest+1:
		return command.SchemaResult{Status: command.SchemaGap, Latest: latest}, nil
	}
	s, err := schemas.Compile(c.Text)
	if err != nil {
		return invalid("%v", err)
	}
	if !bytes.Equal(s.Text(), c.Text) {
		return invalid("the text is not canonical (schemas.Canonical)")
	}
	row, err := msgpack.Marshal(&schemaRow{CreatedAtMicros: c.CreatedAt.UnixMicro(), Text: c.Text})
	if err != nil {
		return command.SchemaResult{}, fmt.Errorf("fsm: encode schema row: %w", err)
	}
	if err := tx.PutKV(ctx, schemaKey(c.Column, c.Version), row); err != nil {
		return command.SchemaResult{}, fmt.Errorf("write schema %s version %d: %w", c.Column, c.Version, err)
	}
	f.sch.batch = append(f.sch.batch, batchSchema{pos: pos, column: c.Column, columnSchema: columnSchema{version: c.Version, schema: s}})
	return command.SchemaResult{Status: command.SchemaCreated, Latest: c.Version}, nil
}

// schemaText returns the text of a version the partition holds: created earlier in the batch,
// or committed.
func (f *FSM) schemaText(ctx context.Context, column string, version int) ([]byte, error) {
	for _, b := range f.sch.batch {
		if b.column == column && b.version == version {
			return b.schema.Text(), nil
		}
	}
	kvs, err := f.cfg.Store.ScanKV(ctx, schemaKey(column, version))
	if err != nil {
		return nil, fmt.Errorf("read schema %s version %d: %w", column, version, err)
	}
	for _, kv := range kvs {
		if kv.Key == schemaKey(column, version) {
			var row schemaRow
			if err := msgpack.Unmarshal(kv.Value, &row); err != nil {
				return nil, fmt.Errorf("fsm: decode schema %s version %d: %w", column, version, err)
			}
			return row.Text, nil
		}
	}
	return nil, fmt.Errorf("fsm: schema %s version %d is missing below the latest", column, version)
}

// installSchemas makes the versions the batch created the latest, once its transaction
// committed.
func (f *FSM) installSchemas() {
	for _, b := range f.sch.batch {
		f.sch.latest[b.column] = b.columnSchema
	}
	f.sch.batch, f.sch.writePos = nil, nil
}

// validateWrite checks every cell of w against the latest schema of its column and returns the
// first violation (nil: none). Called on the FSM goroutine inside the batch transaction, before
// any cell of w is decided, so a violating write stores nothing. An error is a storage failure.
//
// The latest schema is the one a schema entry before w's entry registered: a version created
// by a later entry of the same batch does not apply to w. A cell of a column with no schema
// costs a map lookup.
//
// A write replicated from another cluster (Origin set) is not checked: its cells were checked
// against the schemas of their origin when written there, and a schema version registered
// there later may reach this cluster before them (refusing them would stop the stream for
// good).
func (f *FSM) validateWrite(ctx context.Context, tx *storage.WriteTx, w *command.Write) (*schemas.CellViolation, error) {
	if w.Origin != "" {
		return nil, nil
	}
	if err := f.loadSchemas(ctx); err != nil {
		return nil, err
	}
	if len(f.sch.latest) == 0 && len(f.sch.batch) == 0 {
		return nil, nil
	}
	pos := math.MaxInt
	if p, ok := f.sch.writePos[w]; ok {
		pos = p
	}
	for i := range w.Cells {
		c := &w.Cells[i]
		cs := f.schemaAt(c.Key.ColumnKey, pos)
		if cs == nil {
			continue
		}
		v, err := cs.schema.Validate(c.Body)
		if err != nil {
			// Stored bodies always decode; a command's that does not is refused alike everywhere.
			v = &schemas.Violation{Message: err.Error()}
		}
		if v != nil {
			return &schemas.CellViolation{Cell: i, Column: c.Key.ColumnKey, Version: cs.version, Pointer: v.Pointer, Message: v.Message}, nil
		}
	}
	return nil, nil
}
