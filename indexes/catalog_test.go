package indexes

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/vmihailenco/msgpack/v5"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// catDef returns a valid definition of index name whose second field is called second.
func catDef(name, second string) Definition {
	return Definition{Table: name, ColumnDefs: []ColumnDef{{ColumnKey: "BASE", Fields: []FieldDef{
		{Field: "city", Type: TypeUUID}, {Field: second, Type: TypeDatetime}}}}}
}

func TestCatalogLifeCycle(t *testing.T) {
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
			if err != nil || res != s.want {
				t.Fatalf("step %d: Apply(%+v) = %+v, %v; want %+v, nil", i, s.cmd, res, err, s.want)
			}
			continue
		}
		if !errors.Is(err, s.err) || !strings.Contains(err.Error(), s.errText) {
			t.Fatalf("step %d: Apply(%+v) = %v; want an error wrapping %v containing %q", i, s.cmd, err, s.err, s.errText)
		}
		after, _ := EncodeCatalog(c)
		if !bytes.Equal(before, after) || !reflect.DeepEqual(beforeCat, c) {
			t.Fatalf("step %d: the refused command %+v changed the catalog", i, s.cmd)
		}
	}
	var fe *FieldError
	if _, err := c.Apply(Command{Op: OpDefine, Name: "x", Definition: bad}); !errors.As(err, &fe) {
		t.Errorf("define of an invalid definition = %v, want an error wrapping its FieldError", err)
	}

	ix := c.Indexes["x"]
	states := []State{}
	for _, v := range ix.Versions {
		states = append(states, v.State)
	}
	if want := []State{StateDropped, StateDropping, StateDropping, StateBuilding}; !reflect.DeepEqual(states, want) || ix.Alias != 0 {
		t.Errorf("x: states %v alias %d, want %v alias 0", states, ix.Alias, want)
	}
	v1 := ix.Versions[0]
	if !v1.CreatedAt.Equal(t0.Add(1*time.Second)) || !v1.ReadyAt.Equal(t0.Add(7*time.Second)) ||
		!v1.DroppedAt.Equal(t0.Add(20*time.Second)) || v1.CreatedAt.Location() != time.UTC {
		t.Errorf("version 1 times %v %v %v, want created, ready and dropped at steps 1, 7 and 20, in UTC",
			v1.CreatedAt, v1.ReadyAt, v1.DroppedAt)
	}
	if v := ix.Versions[3]; !v.Definition.Equal(x1) || v.Table() != "x_v4" {
		t.Errorf("version 4 = %+v, want the definition x1 and table x_v4", v)
	}

	// Resolve and the maintainers' lists.
	if _, err := c.Resolve("x", 0); !errors.Is(err, ErrNotReady) ||
		!strings.Contains(err.Error(), "index x has no ready version yet (version 4 is building)") {
		t.Errorf("Resolve(x, 0) = %v, want ErrNotReady naming version 4", err)
	}
	for _, v := range []int{1, 2, 5} {
		if _, err := c.Resolve("x", v); !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(x, %d) = %v, want ErrNotFound", v, err)
		}
	}
	if _, err := c.Resolve("x", 4); !errors.Is(err, ErrNotReady) {
		t.Errorf("Resolve(x, 4) = %v, want ErrNotReady (building)", err)
	}
	if _, err := c.Resolve("nope", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(nope, 0) = %v, want ErrNotFound", err)
	}
	if got := versionNames(c.Active()); !reflect.DeepEqual(got, []string{"x_v4", "y_v1"}) {
		t.Errorf("Active() = %v, want [x_v4 y_v1]", got)
	}
	if got := versionNames(c.Dropping()); !reflect.DeepEqual(got, []string{"x_v2", "x_v3"}) {
		t.Errorf("Dropping() = %v, want [x_v2 x_v3]", got)
	}
	mustApply(t, c, Command{Op: OpReady, Name: "x", Version: 4})
	v, err := c.Resolve("x", 0)
	if err != nil || v.Version != 4 || v.State != StateReady {
		t.Errorf("Resolve(x, 0) after ready = %+v, %v; want version 4, ready (the new alias)", v, err)
	}
	// Resolve returns a copy.
	v.Definition.ColumnDefs[0].Fields[0].Field = "scribble"
	if w, _ := c.Resolve("x", 4); w.Definition.ColumnDefs[0].Fields[0].Field != "city" {
		t.Error("changing Resolve's result changed the catalog")
	}
	// Every version dropped: no version to resolve.
	mustApply(t, c, Command{Op: OpDrop, Name: "x", Version: 4})
	if _, err := c.Resolve("x", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(x, 0) with every version dropped = %v, want ErrNotFound", err)
	}
}

func mustApply(t *testing.T, c *Catalog, cmd Command) Result {
	t.Helper()
	res, err := c.Apply(cmd)
	if err != nil {
		t.Fatalf("Apply(%+v) = %v", cmd, err)
	}
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
			if ra != rb || fmt.Sprint(ea) != fmt.Sprint(eb) {
				t.Fatalf("iteration %d step %d: Apply(%+v) = %+v, %v on one catalog and %+v, %v on another",
					iter, i, cmd, ra, ea, rb, eb)
			}
			ba, err := EncodeCatalog(a)
			if err != nil {
				t.Fatal(err)
			}
			bb, _ := EncodeCatalog(b)
			if !bytes.Equal(ba, bb) {
				t.Fatalf("iteration %d step %d: encodings differ after %+v", iter, i, cmd)
			}
			if ea != nil && !bytes.Equal(before, ba) {
				t.Fatalf("iteration %d step %d: refused %+v (%v) changed the catalog", iter, i, cmd, ea)
			}
			// The clone taken before did not move.
			if sb, _ := EncodeCatalog(snapshot); !bytes.Equal(sb, before) {
				t.Fatalf("iteration %d step %d: applying to a catalog changed its clone", iter, i)
			}
			// b continues from its decoded form: decoding is exact.
			if b, err = DecodeCatalog(bb); err != nil {
				t.Fatalf("iteration %d step %d: DecodeCatalog = %v", iter, i, err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("iteration %d step %d: DecodeCatalog(EncodeCatalog(c)) = %+v, want %+v", iter, i, b, a)
			}
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
			if i > 0 && v.Version <= ix.Versions[i-1].Version {
				t.Fatalf("index %s: versions out of order: %+v", name, ix.Versions)
			}
			if v.State == StateReady {
				ready++
			}
		}
		if ix.Alias != 0 {
			if i := ix.find(ix.Alias); i < 0 || ix.Versions[i].State != StateReady {
				t.Fatalf("index %s: alias %d is not a ready version", name, ix.Alias)
			}
		} else if ready > 0 {
			t.Fatalf("index %s: %d ready versions but no alias", name, ready)
		}
	}
}

func TestDecodeCatalogRejects(t *testing.T) {
	enc := func(w wireCatalog) []byte {
		b, err := msgpack.Marshal(&w)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	v := func(n int, s State) wireVersion { return wireVersion{Version: n, State: string(s)} }
	good := enc(wireCatalog{Format: 1, Indexes: []wireIndex{{Name: "x", Alias: 1, Versions: []wireVersion{v(1, StateReady)}}}})
	if c, err := DecodeCatalog(good); err != nil || c.Indexes["x"].Alias != 1 {
		t.Fatalf("DecodeCatalog(good) = %+v, %v", c, err)
	}
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
		if c, err := DecodeCatalog(b); !errors.Is(err, ErrCorruptCatalog) {
			t.Errorf("DecodeCatalog(%s) = %+v, %v; want ErrCorruptCatalog", name, c, err)
		}
	}
	if c, err := DecodeCatalog(nil); err != nil || len(c.Indexes) != 0 {
		t.Errorf("DecodeCatalog(nil) = %+v, %v; want an empty catalog", c, err)
	}
	empty, _ := EncodeCatalog(nil)
	zero, _ := EncodeCatalog(&Catalog{})
	fresh, _ := EncodeCatalog(NewCatalog())
	if !bytes.Equal(empty, zero) || !bytes.Equal(zero, fresh) {
		t.Errorf("EncodeCatalog(nil), of the zero Catalog and of NewCatalog differ: %x %x %x", empty, zero, fresh)
	}
}

// The zero Catalog works, and Apply's times are normalised (no monotonic reading, UTC, µs).
func TestCatalogZeroValueAndTimes(t *testing.T) {
	var c Catalog
	now := time.Now() // has a monotonic reading
	res := mustApply(t, &c, Command{Op: OpDefine, Name: "x", Definition: catDef("x", "f"), Now: now})
	if res != (Result{Version: 1, Created: true}) {
		t.Fatalf("define on the zero Catalog = %+v", res)
	}
	got := c.Indexes["x"].Versions[0].CreatedAt
	if want := time.UnixMicro(now.UnixMicro()).UTC(); got != want {
		t.Errorf("CreatedAt = %#v, want %#v", got, want)
	}
	b, _ := EncodeCatalog(&c)
	d, err := DecodeCatalog(b)
	if err != nil || !reflect.DeepEqual(d.Indexes, c.Indexes) {
		t.Errorf("round trip = %+v, %v; want %+v", d, err, c)
	}
	if TableName("trips_by_city", 12) != "trips_by_city_v12" {
		t.Errorf("TableName = %q", TableName("trips_by_city", 12))
	}
}

// An index version's consumer group is named after its table: the name is part of the groups'
// state in every datastore, so it must not change.
func TestGroupName(t *testing.T) {
	assert.Equal(t, "_index.by_city_v1", GroupName("by_city", 1))
	assert.Equal(t, "_index.trips_by_driver_v12", GroupName("trips_by_driver", 12))
	assert.Equal(t, GroupPrefix+TableName("x", 3), GroupName("x", 3))
}
