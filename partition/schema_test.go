package partition

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/schemas"
)

// schemaCell is a BASE cell of row i with ref key ref and body text.
func schemaCell(t *testing.T, i int, ref int64, text string) command.Cell {
	t.Helper()
	rk := uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("schema-row", i)))
	b, err := cells.EncodeBody([]byte(text))
	require.NoError(t, err, "EncodeBody(%s)", text)
	return command.Cell{Shard: cells.ShardOf(rk, 4), Key: cells.Key{RowKey: rk, ColumnKey: "BASE", RefKey: ref}, Body: b}
}

// A schema command goes through raft: every replica holds the version and checks writes
// against it; the dry run counts the latest cells of each row that a schema rejects.
func TestSchemaThroughRaft(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	l := g.leader()
	ctx := context.Background()

	// Rows before any schema: 1 valid; 2 invalid then valid; 3 valid then invalid; 4 invalid.
	_, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{
		schemaCell(t, 1, 1, `{"distance":1}`),
		schemaCell(t, 2, 1, `{"distance":-1}`), schemaCell(t, 2, 2, `{"distance":2}`),
		schemaCell(t, 3, 5, `{"distance":3}`), schemaCell(t, 3, 7, `{"distance":-3}`),
		schemaCell(t, 4, 1, `{}`),
		schemaCell(t, 8, 1, `{"distance":-8}`),
	}})
	require.NoError(t, err, "Put")
	// Row 8 is erased: its cells are gone, its tombstone stays in the shard's log.
	erased := schemaCell(t, 8, 1, `{}`)
	_, err = l.p.EraseRow(ctx, erased.Shard, erased.Key.RowKey)
	require.NoError(t, err, "EraseRow")

	text, err := schemas.Canonical([]byte(`{"type":"object","required":["distance"],"properties":{"distance":{"type":"integer","minimum":0}}}`))
	require.NoError(t, err)
	check, err := l.p.Read(ctx, Strong, ReadRequest{SchemaCheck: &SchemaCheckRead{Column: "BASE", Text: text, Examples: 10}})
	require.NoError(t, err, "dry run")
	require.NotNil(t, check.SchemaCheck, "dry run answer")
	assert.Equal(t, int64(4), check.SchemaCheck.Rows, "rows with a BASE cell (not the erased row, nor its tombstone)")
	assert.Equal(t, int64(2), check.SchemaCheck.Rejected, "latest cells rejected: rows 3 and 4")
	got := map[string]SchemaRejection{}
	for _, e := range check.SchemaCheck.Examples {
		got[e.RowKey.String()] = e
	}
	r3, r4 := schemaCell(t, 3, 7, `{}`).Key.RowKey, schemaCell(t, 4, 1, `{}`).Key.RowKey
	assert.Equal(t, SchemaRejection{RowKey: r3, RefKey: 7, Pointer: "/distance", Message: "minimum: got -3, want 0"}, got[r3.String()], "row 3: its latest cell")
	assert.Equal(t, SchemaRejection{RowKey: r4, RefKey: 1, Pointer: "/distance", Message: "missing property 'distance'"}, got[r4.String()], "row 4")
	_, err = l.p.Read(ctx, Strong, ReadRequest{SchemaCheck: &SchemaCheckRead{Column: "BASE", Text: []byte(`{"minimum":"x"}`)}})
	assert.ErrorIs(t, err, ErrBadRead, "a dry run of a schema that does not compile")

	res, err := l.p.ApplySchema(ctx, command.Schema{Column: "BASE", Version: 1, Text: text})
	require.NoError(t, err, "ApplySchema")
	assert.Equal(t, command.SchemaResult{Status: command.SchemaCreated, Latest: 1}, res, "register version 1")
	res, err = l.p.ApplySchema(ctx, command.Schema{Column: "BASE", Version: 1, Text: text})
	require.NoError(t, err, "ApplySchema again")
	assert.Equal(t, command.SchemaExists, res.Status, "the same again")

	w, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{schemaCell(t, 5, 1, `{"distance":5}`), schemaCell(t, 6, 1, `{"distance":-6}`)}})
	require.NoError(t, err, "Put after the schema")
	require.NotNil(t, w.Violation, "a violating write: %+v", w)
	assert.Equal(t, schemas.CellViolation{Cell: 1, Column: "BASE", Version: 1, Pointer: "/distance", Message: "minimum: got -6, want 0"}, *w.Violation)

	g.converge()
	for _, r := range g.running() {
		out, err := r.p.Read(ctx, Stale, ReadRequest{Schemas: &SchemasRead{Column: "BASE"}})
		require.NoError(t, err, "schemas of a replica")
		require.Len(t, out.Schemas, 1, "every replica holds version 1")
		assert.Equal(t, string(text), string(out.Schemas[0].Text), "text")
	}
	_, err = l.p.Read(ctx, Stale, ReadRequest{Schemas: &SchemasRead{Column: "no/such"}})
	assert.ErrorIs(t, err, ErrBadRead, "a bad column")
	// Row 6 was not written anywhere.
	for _, c := range contents(t, liveReplica{id: l.id, p: l.p}) {
		assert.NotEqual(t, schemaCell(t, 6, 1, `{}`).Key.RowKey, c.Key.RowKey, "the violating write stored a cell")
	}
}
