package indexes

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// catDef returns a valid definition of index name whose second field is called second.
func catDef(name, second string) Definition {
	return Definition{Table: name, ColumnDefs: []ColumnDef{{ColumnKey: "BASE", Fields: []FieldDef{
		{Field: "city", Type: TypeUUID}, {Field: second, Type: TypeDatetime}}}}}
}

func TestCatalogLifeCycle(t *testing.T) {
	t.Parallel()
	x1, x2 := catDef("x", "created_at"), catDef("x", "updated_at")
	bad := catDef("x", "9bad")
	type step struct {
		cmd     Command
		want    Result
		err     error  // sentinel the error wraps; nil: accepted
		errText string // part of the message
	}
	steps := []step{
		{cmd: Command{Op: OpReady, Name: "x", Version: 1}, err: ErrNotFound, errText: "no index x"},
		{cmd: Command{Op: OpDefine, Name: "x", Definition: x1}, want: Result{Version: 1, Created: true}},
		{cmd: Command{Op: OpDefine, Name: "x", Definition: x1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpDefine, Name: "y", Definition: x1}, err: ErrBadCommand, errText: `the definition's table is "x"`},
		{cmd: Command{Op: OpDefine, Name: "x", Definition: bad}, err: ErrBadCommand, errText: "column_defs[0].fields[1].field"},
		{cmd: Command{Op: OpAlias, Name: "x", Version: 1}, err: ErrNotReady, errText: "version 1 is building, not ready"},
		{cmd: Command{Op: OpDropped, Name: "x", Version: 1}, err: ErrBadCommand, errText: "version 1 is building, not dropping"},
		{cmd: Command{Op: OpReady, Name: "x", Version: 1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpReady, Name: "x", Version: 1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpDefine, Name: "x", Definition: x2}, want: Result{Version: 2, Created: true}},
		{cmd: Command{Op: OpDefine, Name: "x", Definition: x2}, want: Result{Version: 2}},
		// The newest live version is 2: an older definition makes a new version.
		{cmd: Command{Op: OpDefine, Name: "x", Definition: x1}, want: Result{Version: 3, Created: true}},
		{cmd: Command{Op: OpDrop, Name: "x", Version: 1}, err: ErrBadCommand,
			errText: "version 1 is the alias of x: alias another version first"},
		{cmd: Command{Op: OpReady, Name: "x", Version: 2}, want: Result{Version: 2}},
		{cmd: Command{Op: OpAlias, Name: "x", Version: 2}, want: Result{Version: 2}},
		{cmd: Command{Op: OpAlias, Name: "x", Version: 2}, want: Result{Version: 2}},
		{cmd: Command{Op: OpDrop, Name: "x", Version: 1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpDrop, Name: "x", Version: 1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpReady, Name: "x", Version: 1}, err: ErrBadCommand, errText: "version 1 is dropping"},
		{cmd: Command{Op: OpAlias, Name: "x", Version: 1}, err: ErrNotReady, errText: "version 1 is dropping"},
		{cmd: Command{Op: OpDropped, Name: "x", Version: 1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpDropped, Name: "x", Version: 1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpDrop, Name: "x", Version: 1}, want: Result{Version: 1}},
		{cmd: Command{Op: OpDropped, Name: "x", Version: 2}, err: ErrBadCommand, errText: "drop it first"},
		{cmd: Command{Op: OpDrop, Name: "x", Version: 3}, want: Result{Version: 3}},
		{cmd: Command{Op: OpDrop, Name: "x", Version: 2}, want: Result{Version: 2}}, // the only live one: alias cleared
		{cmd: Command{Op: OpDefine, Name: "x", Definition: x1}, want: Result{Version: 4, Created: true}},
		{cmd: Command{Op: OpDefine, Name: "y", Definition: catDef("y", "z")}, want: Result{Version: 1, Created: true}},
		{cmd: Command{Op: "rename", Name: "x", Version: 1}, err: ErrBadCommand, errText: `unknown op "rename"`},
		{cmd: Command{Op: OpReady, Name: "x", Version: 0}, err: ErrBadCommand, errText: "version must be at least 1"},
		{cmd: Command{Op: OpReady, Name: "x", Version: 9}, err: ErrNotFound, errText: "index x has no version 9"},
		{cmd: Command{Op: OpReady, Name: "X!", Version: 1}, err: ErrBadCommand, errText: "not a valid index name"},
	}
	c := NewCatalog()
	for i, s := range steps {
		s.cmd.Now = t0.Add(time.Duration(i) * time.Second).In(time.FixedZone("X", 3600))
		before, _ := EncodeCatalog(c)
		beforeCat := c.Clone()
		res, err := c.Apply(s.cmd)
		if s.err == nil {
			require.NoError(t, err, "step %d: Apply(%+v)", i, s.cmd)
			require.Equal(t, s.want, res, "step %d: Apply(%+v)", i, s.cmd)
			continue
		}
		require.ErrorIs(t, err, s.err, "step %d: Apply(%+v)", i, s.cmd)
		require.ErrorContains(t, err, s.errText, "step %d: Apply(%+v)", i, s.cmd)
		after, _ := EncodeCatalog(c)
		require.Equal(t, before, after, "step %d: the refused command %+v changed the catalog's encoding", i, s.cmd)
		require.Equal(t, beforeCat, c, "step %d: the refused command %+v changed the catalog", i, s.cmd)
	}
	var fe *FieldError
	_, err := c.Apply(Command{Op: OpDefine, Name: "x", Definition: bad})
	assert.ErrorAs(t, err, &fe, "define of an invalid definition: want an error wrapping its FieldError")

	ix := c.Indexes["x"]
	states := []State{}
	for _, v := range ix.Versions {
		states = append(states, v.State)
	}
	assert.Equal(t, []State{StateDropped, StateDropping, StateDropping, StateBuilding}, states, "x: states of the versions")
	assert.Zero(t, ix.Alias, "x: alias")
	v1 := ix.Versions[0]
	assert.True(t, v1.CreatedAt.Equal(t0.Add(1*time.Second)) && v1.ReadyAt.Equal(t0.Add(7*time.Second)) &&
		v1.DroppedAt.Equal(t0.Add(20*time.Second)) && v1.CreatedAt.Location() == time.UTC,
		"version 1 times %v %v %v, want created, ready and dropped at steps 1, 7 and 20, in UTC",
		v1.CreatedAt, v1.ReadyAt, v1.DroppedAt)
	v4 := ix.Versions[3]
	assert.True(t, v4.Definition.Equal(x1), "version 4 = %+v, want the definition x1", v4)
	assert.Equal(t, "x_v4", v4.Table(), "version 4 table")

	// Resolve and the maintainers' lists.
	_, err = c.Resolve("x", 0)
	assert.ErrorIs(t, err, ErrNotReady, "Resolve(x, 0)")
	assert.ErrorContains(t, err, "index x has no ready version yet (version 4 is building)", "Resolve(x, 0): want it to name version 4")
	for _, v := range []int{1, 2, 5} {
		_, err := c.Resolve("x", v)
		assert.ErrorIs(t, err, ErrNotFound, "Resolve(x, %d)", v)
	}
	_, err = c.Resolve("x", 4)
	assert.ErrorIs(t, err, ErrNotReady, "Resolve(x, 4) of a building version")
	_, err = c.Resolve("nope", 0)
	assert.ErrorIs(t, err, ErrNotFound, "Resolve(nope, 0)")
	assert.Equal(t, []string{"x_v4", "y_v1"}, versionNames(c.Active()), "Active()")
	assert.Equal(t, []string{"x_v2", "x_v3"}, versionNames(c.Dropping()), "Dropping()")
	mustApply(t, c, Command{Op: OpReady, Name: "x", Version: 4})
	v, err := c.Resolve("x", 0)
	if assert.NoError(t, err, "Resolve(x, 0) after ready") {
		assert.Equal(t, 4, v.Version, "Resolve(x, 0) after ready: want the new alias")
		assert.Equal(t, StateReady, v.State, "Resolve(x, 0) after ready: state")
	}
	// Resolve returns a copy.
	v.Definition.ColumnDefs[0].Fields[0].Field = "scribble"
	w, _ := c.Resolve("x", 4)
	assert.Equal(t, "city", w.Definition.ColumnDefs[0].Fields[0].Field, "changing Resolve's result changed the catalog")
	// Every version dropped: no version to resolve.
	mustApply(t, c, Command{Op: OpDrop, Name: "x", Version: 4})
	_, err = c.Resolve("x", 0)
	assert.ErrorIs(t, err, ErrNotFound, "Resolve(x, 0) with every version dropped")
}

func mustApply(t *testing.T, c *Catalog, cmd Command) Result {
	t.Helper()
	res, err := c.Apply(cmd)
	require.NoError(t, err, "Apply(%+v)", cmd)
	return res
}

func versionNames(vs []Version) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Table())
	}
	return out
}

// randomCommand returns a plausible, sometimes refused, catalog command: mostly about a
// version c has.
func randomCommand(rng interface{ IntN(int) int }, c *Catalog, now time.Time) Command {
	names := []string{"a", "b", "c_idx"}
	name := names[rng.IntN(len(names))]
	cmd := Command{Name: name, Version: rng.IntN(6), Now: now}
	if ix := c.Indexes[name]; ix != nil && len(ix.Versions) > 0 && rng.IntN(5) > 0 {
		cmd.Version = ix.Versions[len(ix.Versions)-1-rng.IntN(min(3, len(ix.Versions)))].Version
	}
	switch r := rng.IntN(10); {
	case r < 3:
		cmd.Op = OpDefine
		cmd.Definition = catDef(name, []string{"f", "g", "h"}[rng.IntN(3)])
		if rng.IntN(8) == 0 {
			cmd.Definition.Table = "other"
		}
	case r < 5:
		cmd.Op = OpReady
	case r < 7:
		cmd.Op = OpAlias
	case r < 8:
		cmd.Op = OpDrop
	case r < 9:
		cmd.Op = OpDropped
	default:
		cmd.Op = Op([]string{"define", "nope", ""}[rng.IntN(3)])
	}
	return cmd
}

// The same commands give the same results and the same bytes, whether applied to one catalog,
// to clones, or to catalogs rebuilt from their encoding at every step; refusals change nothing.
func TestCatalogDeterministic(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	for iter := 0; iter < 10; iter++ {
		a, b := NewCatalog(), NewCatalog()
		now := t0
		for i := 0; i < 100; i++ {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			cmd := randomCommand(rng, a, now)
			before, _ := EncodeCatalog(a)
			snapshot := a.Clone()
			ra, ea := a.Apply(cmd)
			rb, eb := b.Apply(cmd)
			require.Equal(t, ra, rb, "iteration %d step %d: Apply(%+v) on one catalog and on another", iter, i, cmd)
			require.Equal(t, fmt.Sprint(ea), fmt.Sprint(eb), "iteration %d step %d: Apply(%+v) errors on one catalog and on another", iter, i, cmd)
			ba, err := EncodeCatalog(a)
			require.NoError(t, err, "iteration %d step %d: EncodeCatalog", iter, i)
			bb, _ := EncodeCatalog(b)
			require.Equal(t, ba, bb, "iteration %d step %d: encodings after %+v", iter, i, cmd)
			if ea != nil {
				require.Equal(t, before, ba, "iteration %d step %d: refused %+v (%v) changed the catalog", iter, i, cmd, ea)
			}
			// The clone taken before did not move.
			sb, _ := EncodeCatalog(snapshot)
			require.Equal(t, before, sb, "iteration %d step %d: applying to a catalog changed its clone", iter, i)
			// b continues from its decoded form: decoding is exact.
			b, err = DecodeCatalog(bb)
			require.NoError(t, err, "iteration %d step %d: DecodeCatalog", iter, i)
			require.Equal(t, a, b, "iteration %d step %d: DecodeCatalog(EncodeCatalog(c))", iter, i)
			checkInvariants(t, a)
		}
	}
}

// checkInvariants: versions ascend; the alias is 0 or a ready version; with no alias there is
// no ready version.
func checkInvariants(t *testing.T, c *Catalog) {
	t.Helper()
	for name, ix := range c.Indexes {
		ready := 0
		for i, v := range ix.Versions {
			if i > 0 {
				require.Greater(t, v.Version, ix.Versions[i-1].Version, "index %s: versions out of order: %+v", name, ix.Versions)
			}
			if v.State == StateReady {
				ready++
			}
		}
		if ix.Alias != 0 {
			i := ix.find(ix.Alias)
			require.True(t, i >= 0 && ix.Versions[i].State == StateReady, "index %s: alias %d is not a ready version", name, ix.Alias)
		} else {
			require.Zero(t, ready, "index %s: ready versions but no alias", name)
		}
	}
}

func TestDecodeCatalogRejects(t *testing.T) {
	t.Parallel()
	enc := func(w wireCatalog) []byte {
		b, err := msgpack.Marshal(&w)
		require.NoError(t, err)
		return b
	}
	v := func(n int, s State) wireVersion { return wireVersion{Version: n, State: string(s)} }
	good := enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x", Alias: 1, Versions: []wireVersion{v(1, StateReady)}}}})
	c, err := DecodeCatalog(good)
	require.NoError(t, err, "DecodeCatalog(good)")
	require.Equal(t, 1, c.Indexes["x"].Alias, "DecodeCatalog(good): alias of x")
	bad := map[string][]byte{
		"garbage":         []byte("garbage"),
		"trailing":        append(append([]byte(nil), good...), 0xc0),
		"format":          enc(wireCatalog{Format: 2}),
		"bad name":        enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "X"}}}),
		"duplicate name":  enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x"}, {Name: "x"}}}),
		"version order":   enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x", Versions: []wireVersion{v(2, StateReady), v(1, StateReady)}}}}),
		"version zero":    enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x", Versions: []wireVersion{v(0, StateReady)}}}}),
		"unknown state":   enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x", Versions: []wireVersion{v(1, "lost")}}}}),
		"alias not ready": enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x", Alias: 1, Versions: []wireVersion{v(1, StateBuilding)}}}}),
		"alias missing":   enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x", Alias: 2, Versions: []wireVersion{v(1, StateReady)}}}}),
	}
	for name, b := range bad {
		c, err := DecodeCatalog(b)
		assert.ErrorIs(t, err, ErrCorruptCatalog, "DecodeCatalog(%s) = %+v", name, c)
	}
	c, err = DecodeCatalog(nil)
	if assert.NoError(t, err, "DecodeCatalog(nil)") {
		assert.Empty(t, c.Indexes, "DecodeCatalog(nil): want an empty catalog")
	}
	empty, _ := EncodeCatalog(nil)
	zero, _ := EncodeCatalog(&Catalog{})
	fresh, _ := EncodeCatalog(NewCatalog())
	assert.Equal(t, empty, zero, "EncodeCatalog of nil and of the zero Catalog")
	assert.Equal(t, zero, fresh, "EncodeCatalog of the zero Catalog and of NewCatalog")
}

// The zero Catalog works, and Apply's times are normalised (no monotonic reading, UTC, µs).
func TestCatalogZeroValueAndTimes(t *testing.T) {
	t.Parallel()
	var c Catalog
	now := time.Now() // has a monotonic reading
	res := mustApply(t, &c, Command{Op: OpDefine, Name: "x", Definition: catDef("x", "f"), Now: now})
	require.Equal(t, Result{Version: 1, Created: true}, res, "define on the zero Catalog")
	got := c.Indexes["x"].Versions[0].CreatedAt
	want := time.UnixMicro(now.UnixMicro()).UTC()
	assert.True(t, got == want, "CreatedAt = %#v, want %#v (UTC, whole µs, no monotonic reading)", got, want)
	b, _ := EncodeCatalog(&c)
	d, err := DecodeCatalog(b)
	if assert.NoError(t, err, "DecodeCatalog(EncodeCatalog(c))") {
		assert.Equal(t, c.Indexes, d.Indexes, "round trip of the catalog")
	}
	assert.Equal(t, "trips_by_city_v12", TableName("trips_by_city", 12), "TableName")
}

// An index version's consumer group is named after its table: the name is part of the groups'
// state in every datastore, so it must not change.
func TestGroupName(t *testing.T) {
	assert.Equal(t, "_index.by_city_v1", GroupName("by_city", 1))
	assert.Equal(t, "_index.trips_by_driver_v12", GroupName("trips_by_driver", 12))
	assert.Equal(t, GroupPrefix+TableName("x", 3), GroupName("x", 3))
}
