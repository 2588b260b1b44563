package fsm

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// schemaCommandVersion is the first byte of a schema command entry (see command.go for the
// others).
const schemaCommandVersion byte = 4

// schemaKeyPrefix starts the KV keys of the column schemas a partition holds:
// "schema/<column>/<version %08d>", whose value is an encoded schemaRow. Column keys hold no
// "/", and versions are fixed-width, so the keys of a column sort by version.
const schemaKeyPrefix = "schema/"

// MaxSchemaVersion is the highest version a column's schema may reach (the width of the KV
// key's version).
const MaxSchemaVersion = 99_999_999

// SchemaCommand is the data of a schema log entry: register version Version of the schema of
// column Column, whose canonical text (schemas.Canonical) is Text. CreatedAt is the
// proposer's clock (the version's created_at on this partition).
//
// The partition accepts it (SchemaCreated) when Version is its latest version of the column
// plus one, answers SchemaExists when it holds Version with the same text, SchemaConflict
// when it holds Version with another text, and SchemaGap when Version is beyond latest + 1
// (an earlier version is missing: register it first). A text that does not compile, or is not
// canonical, is SchemaInvalid. Every replica decides alike; only SchemaCreated changes state.
type SchemaCommand struct {
	_msgpack  struct{} `msgpack:",as_array"`
	CreatedAt time.Time
	Column    string
	Version   int
	Text      []byte
}

// SchemaStatus is the outcome of a SchemaCommand.
type SchemaStatus uint8

// Outcomes of a SchemaCommand (see SchemaCommand).
const (
	SchemaCreated SchemaStatus = iota + 1
	SchemaExists
	SchemaConflict
	SchemaGap
	SchemaInvalid
)

// String returns "created", "exists", "conflict", "gap" or "invalid".
func (s SchemaStatus) String() string {
	switch s {
	case SchemaCreated:
		return "created"
	case SchemaExists:
		return "exists"
	case SchemaConflict:
		return "conflict"
	case SchemaGap:
		return "gap"
	case SchemaInvalid:
		return "invalid"
	}
	return "unknown(" + strconv.Itoa(int(s)) + ")"
}

// SchemaResult is the outcome of a SchemaCommand on one partition: Status, the column's latest
// version there once the command is applied (0: none), and for SchemaInvalid why.
type SchemaResult struct {
	Status  SchemaStatus
	Latest  int
	Message string
}

// SchemaVersion is one registered version of a column's schema, as a partition holds it: its
// canonical text and the time the partition applied it (the proposer's clock, UTC).
type SchemaVersion struct {
	Column    string
	Version   int
	CreatedAt time.Time
	Text      []byte
}

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

// EncodeSchemaCommand returns the log entry data of c: a version byte, then MessagePack.
func EncodeSchemaCommand(c SchemaCommand) ([]byte, error) {
	b, err := msgpack.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode schema command: %w", err)
	}
	return append([]byte{schemaCommandVersion}, b...), nil
}

// DecodeSchemaCommand parses data written by EncodeSchemaCommand. Errors wrap ErrBadCommand.
func DecodeSchemaCommand(data []byte) (SchemaCommand, error) {
	if len(data) == 0 || data[0] != schemaCommandVersion {
		return SchemaCommand{}, fmt.Errorf("%w: not a schema command", ErrBadCommand)
	}
	var c SchemaCommand
	if err := msgpack.Unmarshal(data[1:], &c); err != nil {
		return SchemaCommand{}, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// SchemaResponseOf waits for f and returns the schema command's result. Errors are raft's own
// (the outcome may be unknown; every schema command is safe to retry) or the Response's Err.
func SchemaResponseOf(f raft.ApplyFuture) (SchemaResult, error) {
	if err := f.Error(); err != nil {
		return SchemaResult{}, err
	}
	r, ok := f.Response().(*Response)
	if !ok {
		return SchemaResult{}, fmt.Errorf("%w: %T", ErrUnexpectedResponse, f.Response())
	}
	return SchemaResultOf(r)
}

// SchemaResultOf returns the schema result of a Response (of ApplyShared), or its Err.
func SchemaResultOf(r *Response) (SchemaResult, error) {
	if r.Err != nil {
		return SchemaResult{}, r.Err
	}
	if r.Schema == nil {
		return SchemaResult{}, fmt.Errorf("%w: no schema result", ErrUnexpectedResponse)
	}
	return *r.Schema, nil
}

// LoadSchemas reads the schema versions a store's committed KV rows hold (any replica, any
// goroutine): every version of column, or with column "" of every column; with latestOnly
// only the latest version of each. Sorted by column, then version.
func LoadSchemas(ctx context.Context, st interface {
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
}, column string, latestOnly bool) ([]SchemaVersion, error) {
	prefix := schemaKeyPrefix
	if column != "" {
		prefix += column + "/"
	}
	kvs, err := st.ScanKV(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("fsm: load schemas: %w", err)
	}
	var out []SchemaVersion
	for _, kv := range kvs {
		col, v, ok := parseSchemaKey(kv.Key)
		if !ok {
			continue
		}
		var row schemaRow
		if err := msgpack.Unmarshal(kv.Value, &row); err != nil {
			return nil, fmt.Errorf("fsm: load schemas: %s: %w", kv.Key, err)
		}
		sv := SchemaVersion{Column: col, Version: v, CreatedAt: time.UnixMicro(row.CreatedAtMicros).UTC(), Text: row.Text}
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
	writePos map[*Write]int
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

// schemaEntry is a schema command of a batch and its outcome.
type schemaEntry struct {
	cmd SchemaCommand
	res SchemaResult
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
func (f *FSM) applySchemas(ctx context.Context, tx *storage.WriteTx, entries []entry) error {
	f.sch.batch, f.sch.writePos = nil, nil
	has := false
	for i := range entries {
		has = has || entries[i].schema != nil
	}
	if !has {
		return nil
	}
	if err := f.loadSchemas(ctx); err != nil {
		return err
	}
	for i := range entries {
		e := &entries[i]
		if e.schema == nil {
			continue
		}
		res, err := f.applySchema(ctx, tx, e.pos, &e.schema.cmd)
		if err != nil {
			return err
		}
		e.schema.res = res
	}
	if len(f.sch.batch) > 0 {
		f.sch.writePos = map[*Write]int{}
		for i := range entries {
			e := &entries[i]
			for j := range e.cmd.Writes {
				f.sch.writePos[&e.cmd.Writes[j]] = e.pos
			}
		}
	}
	return nil
}

// applySchema decides one schema command (see SchemaCommand).
func (f *FSM) applySchema(ctx context.Context, tx *storage.WriteTx, pos int, c *SchemaCommand) (SchemaResult, error) {
	latest := 0
	if cur := f.schemaAt(c.Column, math.MaxInt); cur != nil {
		latest = cur.version
	}
	invalid := func(format string, args ...any) (SchemaResult, error) {
		return SchemaResult{Status: SchemaInvalid, Latest: latest, Message: fmt.Sprintf(format, args...)}, nil
	}
	if err := cells.ValidateColumnKey(c.Column); err != nil {
		return invalid("column %q: %v", c.Column, err)
	}
	if c.Version < 1 || c.Version > MaxSchemaVersion {
		return invalid("version %d: want 1 to %d", c.Version, MaxSchemaVersion)
	}
	switch {
	case c.Version <= latest:
		text, err := f.schemaText(ctx, c.Column, c.Version)
		if err != nil {
			return SchemaResult{}, err
		}
		if bytes.Equal(text, c.Text) {
			return SchemaResult{Status: SchemaExists, Latest: latest}, nil
		}
		return SchemaResult{Status: SchemaConflict, Latest: latest}, nil
	case c.Version > latest+1:
		return SchemaResult{Status: SchemaGap, Latest: latest}, nil
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
		return SchemaResult{}, fmt.Errorf("fsm: encode schema row: %w", err)
	}
	if err := tx.PutKV(ctx, schemaKey(c.Column, c.Version), row); err != nil {
		return SchemaResult{}, fmt.Errorf("write schema %s version %d: %w", c.Column, c.Version, err)
	}
	f.sch.batch = append(f.sch.batch, batchSchema{pos: pos, column: c.Column, columnSchema: columnSchema{version: c.Version, schema: s}})
	return SchemaResult{Status: SchemaCreated, Latest: c.Version}, nil
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
func (f *FSM) validateWrite(ctx context.Context, tx *storage.WriteTx, w *Write) (*SchemaViolation, error) {
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
			return &SchemaViolation{Cell: i, Column: c.Key.ColumnKey, Version: cs.version, Pointer: v.Pointer, Message: v.Message}, nil
		}
	}
	return nil, nil
}
