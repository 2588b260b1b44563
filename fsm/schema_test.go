package fsm

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/storage"
)

// Schemas of the tests: v1 requires a non-negative distance, v2 also an origin.
const (
	schemaV1 = `{"type":"object","required":["distance"],"properties":{"distance":{"type":"integer","minimum":0}}}`
	schemaV2 = `{"type":"object","required":["distance","origin"],"properties":{"distance":{"type":"integer","minimum":0},"origin":{"type":"string"}}}`
)

var schemaAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func schemaLog(t testing.TB, index uint64, column string, version int, text string) *raft.Log {
	t.Helper()
	canon, err := schemas.Canonical([]byte(text))
	require.NoError(t, err, "Canonical(%s)", text)
	data, err := command.Encode(&command.Schema{CreatedAt: schemaAt.Add(time.Duration(index) * time.Second), Column: column, Version: version, Text: canon})
	require.NoError(t, err, "command.Encode")
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// schemaOf returns the schema result of entry r, failing t when it has none.
func schemaOf(t *testing.T, r *Response) command.SchemaResult {
	t.Helper()
	res, err := Unwrap[command.SchemaResult](r)
	require.NoError(t, err, "schema entry: want a schema result, got %+v", r)
	return res
}

// bothEngines runs fn on a SQLite store and, unless -short, on a MariaDB one.
func bothEngines(t *testing.T, fn func(t *testing.T, open func(t *testing.T) *storage.PartitionStore)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, openSQLite) })
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("-short: no MariaDB")
		}
		fn(t, openMySQL)
	})
}

// A version is accepted as latest + 1 only; the same text again is exists, another text
// for a held version is a conflict, a version past latest + 1 is a gap, and a text that does
// not compile is invalid. Only created changes state.
func TestSchemaVersioning(t *testing.T) {
	t.Parallel()
	bothEngines(t, func(t *testing.T, open func(t *testing.T) *storage.PartitionStore) {
		st := open(t)
		f := newFSM(t, st)
		out := responses(t, f.ApplyBatch([]*raft.Log{
			schemaLog(t, 1, "BASE", 1, schemaV1),
			schemaLog(t, 2, "BASE", 1, " "+schemaV1+"\n"), // same canonical text
			schemaLog(t, 3, "BASE", 1, schemaV2),
			schemaLog(t, 4, "BASE", 3, schemaV2),
			schemaLog(t, 5, "BASE", 2, `{"minimum":"x"}`),
			schemaLog(t, 6, "BASE", 2, schemaV2),
			schemaLog(t, 7, "BASE", 1, schemaV1), // an older version, same text: exists
			schemaLog(t, 8, "STATUS", 1, schemaV2),
			schemaLog(t, 9, "bad/column", 1, schemaV2),
			schemaLog(t, 10, "BASE", 0, schemaV2),
		}))
		want := []command.SchemaResult{
			{Status: command.SchemaCreated, Latest: 1},
			{Status: command.SchemaExists, Latest: 1},
			{Status: command.SchemaConflict, Latest: 1},
			{Status: command.SchemaGap, Latest: 1},
			{Status: command.SchemaInvalid, Latest: 1},
			{Status: command.SchemaCreated, Latest: 2},
			{Status: command.SchemaExists, Latest: 2},
			{Status: command.SchemaCreated, Latest: 1},
			{Status: command.SchemaInvalid},
			{Status: command.SchemaInvalid, Latest: 2},
		}
		require.Len(t, out, len(want), "one response per entry")
		for i, r := range out {
			got := schemaOf(t, r)
			if want[i].Status == command.SchemaInvalid {
				assert.NotEmpty(t, got.Message, "entry %d: an invalid command says why", i+1)
				got.Message = ""
			}
			assert.Equal(t, want[i], got, "entry %d", i+1)
		}
		assert.Contains(t, schemaOf(t, out[4]).Message, "/minimum", "entry 5: names the bad keyword")

		// A schema text that is not canonical is refused: texts are compared as given.
		data, err := command.Encode(&command.Schema{CreatedAt: schemaAt, Column: "BASE", Version: 3, Text: []byte(" {} ")})
		require.NoError(t, err)
		r := responses(t, f.ApplyBatch([]*raft.Log{{Index: 11, Term: 1, Type: raft.LogCommand, Data: data}}))[0]
		assert.Equal(t, command.SchemaInvalid, schemaOf(t, r).Status, "a text that is not canonical")

		vs, err := LoadSchemas(context.Background(), st, "", false)
		require.NoError(t, err, "LoadSchemas")
		var got []string
		for _, v := range vs {
			got = append(got, v.Column+"/"+string(rune('0'+v.Version))+" "+string(v.Text))
		}
		c1, _ := schemas.Canonical([]byte(schemaV1))
		c2, _ := schemas.Canonical([]byte(schemaV2))
		assert.Equal(t, []string{"BASE/1 " + string(c1), "BASE/2 " + string(c2), "STATUS/1 " + string(c2)}, got, "stored versions")
		assert.True(t, vs[0].CreatedAt.Equal(schemaAt.Add(time.Second)), "created_at of BASE/1: got %v, want the command's", vs[0].CreatedAt)
		latest, err := LoadSchemas(context.Background(), st, "", true)
		require.NoError(t, err, "LoadSchemas latest")
		require.Len(t, latest, 2, "latest: one per column")
		assert.Equal(t, 2, latest[0].Version, "latest of BASE")
		one, err := LoadSchemas(context.Background(), st, "BASE", false)
		require.NoError(t, err, "LoadSchemas BASE")
		assert.Len(t, one, 2, "versions of BASE")
	})
}

// A write is checked against its column's latest schema when applied: a violating write
// stores nothing and names the cell, the field and the version; other columns are not
// checked; a later version replaces the earlier one.
func TestSchemaValidate(t *testing.T) {
	t.Parallel()
	bothEngines(t, func(t *testing.T, open func(t *testing.T) *storage.PartitionStore) {
		st := open(t)
		f := newFSM(t, st)
		at := schemaAt.Add(time.Hour)
		write := func(index uint64, cs ...command.Cell) command.WriteResult {
			t.Helper()
			r := responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, index, at, cs...)}))[0]
			require.NoError(t, r.Err, "entry %d", index)
			require.Len(t, r.writes(), 1, "entry %d: one write", index)
			return r.writes()[0]
		}
		require.Equal(t, command.SchemaCreated, schemaOf(t, responses(t, f.ApplyBatch([]*raft.Log{schemaLog(t, 1, "BASE", 1, schemaV1)}))[0]).Status)

		ok := write(2, cell(8, 1, "BASE", 1, body(t, `{"distance":10}`)), cell(9, 2, "STATUS", 1, body(t, `{"distance":-1}`)))
		require.True(t, ok.Applied(), "conforming write: %+v", ok)
		assert.Equal(t, cells.StatusCreated, ok.Cells[0].Status, "BASE cell")
		assert.Equal(t, cells.StatusCreated, ok.Cells[1].Status, "a column with no schema is not checked")

		bad := write(3, cell(8, 3, "BASE", 1, body(t, `{"distance":5}`)), cell(10, 4, "BASE", 1, body(t, `{"distance":-5}`)))
		assert.False(t, bad.Applied(), "violating write applied: %+v", bad)
		assert.Equal(t, &schemas.CellViolation{Cell: 1, Column: "BASE", Version: 1, Pointer: "/distance", Message: "minimum: got -5, want 0"}, bad.Violation, "violation")
		assert.Empty(t, bad.Cells, "a refused write has no cell results")
		assert.Len(t, dump(t, st), 2, "nothing of the violating write is stored (its valid cell neither)")

		require.Equal(t, command.SchemaCreated, schemaOf(t, responses(t, f.ApplyBatch([]*raft.Log{schemaLog(t, 4, "BASE", 2, schemaV2)}))[0]).Status)
		v2 := write(5, cell(8, 5, "BASE", 1, body(t, `{"distance":5}`)))
		assert.Equal(t, &schemas.CellViolation{Cell: 0, Column: "BASE", Version: 2, Pointer: "/origin", Message: "missing property 'origin'"}, v2.Violation, "checked against version 2")
		good := write(6, cell(8, 5, "BASE", 1, body(t, `{"distance":5,"origin":"SFO"}`)))
		assert.True(t, good.Applied(), "conforms to version 2: %+v", good)
		// A write replicated from another cluster was checked there: it is not checked here,
		// on either apply path.
		for i, w := range []command.Write{
			{Cells: []command.Cell{cell(8, 7, "BASE", 1, body(t, `{"distance":5}`))}, Origin: "west"},
			{Atomic: true, Cells: []command.Cell{cell(9, 7, "BASE", 1, body(t, `{"distance":-2}`))}, Origin: "west"},
		} {
			r := responses(t, f.ApplyBatch([]*raft.Log{writesLog(t, uint64(20+i), at, w)}))[0]
			require.NoError(t, r.Err)
			require.Len(t, r.writes(), 1)
			assert.True(t, r.writes()[0].Applied(), "replicated write %d, violating version 2, applied: %+v", i, r.writes()[0])
		}

		// A restarted replica (a new FSM over the same store) loads the schemas.
		f = newFSM(t, st)
		again := write(30, cell(8, 6, "BASE", 1, body(t, `{"distance":5}`)))
		require.NotNil(t, again.Violation, "after a restart: want a violation, got %+v", again)
		assert.Equal(t, 2, again.Violation.Version, "after a restart: violation %+v", again.Violation)
	})
}

// Within one batch a schema entry applies to the writes after it, not to those before it,
// and a refused schema command applies to none.
func TestSchemaSameBatch(t *testing.T) {
	t.Parallel()
	f := newFSM(t, openStore(t))
	at := schemaAt.Add(time.Hour)
	neg := body(t, `{"distance":-1}`)
	out := responses(t, f.ApplyBatch([]*raft.Log{
		cmdLog(t, 1, at, cell(8, 1, "BASE", 1, neg)),
		schemaLog(t, 2, "BASE", 1, schemaV1),
		cmdLog(t, 3, at, cell(8, 2, "BASE", 1, neg)),
		schemaLog(t, 4, "BASE", 2, `{"type":"object"}`),
		cmdLog(t, 5, at, cell(8, 3, "BASE", 1, neg)),
		schemaLog(t, 6, "BASE", 4, schemaV1), // a gap: changes nothing
		cmdLog(t, 7, at, cell(8, 4, "BASE", 1, neg)),
	}))
	require.Len(t, out, 7)
	assert.True(t, out[0].writes()[0].Applied(), "before the schema entry: not checked (%+v)", out[0].writes()[0])
	if assert.NotNil(t, out[2].writes()[0].Violation, "after version 1: want a violation, got %+v", out[2].writes()[0]) {
		assert.Equal(t, 1, out[2].writes()[0].Violation.Version, "after version 1: checked against it")
	}
	assert.True(t, out[4].writes()[0].Applied(), "after version 2 (any object): accepted (%+v)", out[4].writes()[0])
	assert.True(t, out[6].writes()[0].Applied(), "after a refused command: still version 2 (%+v)", out[6].writes()[0])
	assert.Equal(t, command.SchemaGap, schemaOf(t, out[5]).Status, "version 4 after 2")

	// The next batch sees version 2 installed (version 1 would refuse a missing distance).
	r := responses(t, f.ApplyBatch([]*raft.Log{cmdLog(t, 8, at, cell(8, 5, "BASE", 1, body(t, `{"x":1}`)))}))[0]
	assert.True(t, r.writes()[0].Applied(), "next batch: version 2 (%+v)", r.writes()[0])
}

// Schemas travel in snapshots: a replica restored from one checks writes against them.
func TestSchemaSnapshotRestore(t *testing.T) {
	t.Parallel()
	src := newFSM(t, openStore(t))
	require.Equal(t, command.SchemaCreated, schemaOf(t, responses(t, src.ApplyBatch([]*raft.Log{schemaLog(t, 1, "BASE", 1, schemaV1)}))[0]).Status)
	snap, err := src.Snapshot()
	require.NoError(t, err, "Snapshot")
	var sink memSink
	require.NoError(t, snap.Persist(&sink), "Persist")
	snap.Release()

	dstStore := openStore(t)
	dst := newFSM(t, dstStore)
	// The destination knew other schemas before: the restore replaces them.
	require.Equal(t, command.SchemaCreated, schemaOf(t, responses(t, dst.ApplyBatch([]*raft.Log{schemaLog(t, 1, "STATUS", 1, schemaV1)}))[0]).Status)
	require.NoError(t, dst.Restore(nopCloser{&sink}), "Restore")
	out := responses(t, dst.ApplyBatch([]*raft.Log{cmdLog(t, 2, schemaAt, cell(8, 1, "BASE", 1, body(t, `{"distance":-1}`)), cell(8, 2, "STATUS", 1, body(t, `{}`)))}))
	require.NoError(t, out[0].Err)
	v := out[0].writes()[0].Violation
	require.NotNil(t, v, "restored replica must check BASE: %+v", out[0].writes()[0])
	assert.Equal(t, schemas.CellViolation{Cell: 0, Column: "BASE", Version: 1, Pointer: "/distance", Message: "minimum: got -1, want 0"}, *v)
	vs, err := LoadSchemas(context.Background(), dstStore, "", false)
	require.NoError(t, err)
	require.Len(t, vs, 1, "the restored store holds the snapshot's schemas only")
	assert.Equal(t, "BASE", vs[0].Column)
}

// A violation is the same on every replica, and so is its request record: a retry of the
// same write (same ID) answers it.
func TestSchemaViolationRecorded(t *testing.T) {
	t.Parallel()
	f := newFSM(t, openStore(t))
	require.Equal(t, command.SchemaCreated, schemaOf(t, responses(t, f.ApplyBatch([]*raft.Log{schemaLog(t, 1, "BASE", 1, schemaV1)}))[0]).Status)
	w := command.Write{ID: rowKey(99), Cells: []command.Cell{cell(8, 1, "BASE", 1, body(t, `{"distance":-1,"a":1,"b":2}`))}}
	entry := func(index uint64) *raft.Log {
		data, err := command.Encode(&command.Append{CreatedAt: schemaAt, Writes: []command.Write{w}})
		require.NoError(t, err)
		return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
	}
	first := responses(t, f.ApplyBatch([]*raft.Log{entry(2)}))[0].writes()[0]
	require.NotNil(t, first.Violation, "first: %+v", first)
	again := responses(t, f.ApplyBatch([]*raft.Log{entry(3)}))[0].writes()[0]
	assert.True(t, again.Replayed, "a retry answers the recorded outcome")
	assert.Equal(t, first.Violation, again.Violation, "recorded violation")
}

func TestBadSchemaEntry(t *testing.T) {
	// A bad schema entry is answered with command.ErrBadCommand, as every replica does.
	f := newFSM(t, openStore(t))
	r := responses(t, f.ApplyBatch([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte{byte(command.KindSchema), 0xc1}}}))[0]
	assert.ErrorIs(t, r.Err, command.ErrBadCommand, "undecodable entry")
}
