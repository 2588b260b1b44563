package indexes

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// State is the life-cycle state of an index version.
type State string

// The states of an index version: building -> ready -> dropping -> dropped, or building ->
// dropping -> dropped.
const (
	// StateBuilding: the version's maintainers are backfilling it; queries are refused.
	StateBuilding State = "building"
	// StateReady: the backfill is done; the version can be queried and aliased. Maintainers keep
	// it up to date.
	StateReady State = "ready"
	// StateDropping: the version is being deleted; its maintainers stop and its tables are
	// deleted (Dropping lists these versions).
	StateDropping State = "dropping"
	// StateDropped: the version's data is gone. Its number is never reused.
	StateDropped State = "dropped"
)

// Version is one version of an index: its number (1, 2, ...), definition, state and the times
// (from Command.Now, UTC, microsecond precision; zero when not reached) it was created, became
// ready and was dropped.
type Version struct {
	Version    int
	Definition Definition
	State      State
	CreatedAt  time.Time
	ReadyAt    time.Time
	DroppedAt  time.Time
}

// Table returns the name of the version's SQL table: TableName(v.Definition.Table, v.Version).
func (v Version) Table() string { return TableName(v.Definition.Table, v.Version) }

// Index is one named index: its versions, in ascending order of version number (dropped ones
// included, so their numbers are never reused), and its alias: the version queries with version
// 0 use (0: none yet).
type Index struct {
	Name     string
	Alias    int
	Versions []Version
}

// Catalog is the index catalog of one datastore: a pure, deterministic state machine replicated
// by raft elsewhere. It changes only through Apply; the same catalog with the same commands
// always gives the same results and the same state (and bytes, see EncodeCatalog): it reads no
// clock and never lets map iteration order reach a result or an encoding.
//
// Indexes maps an index name to the index; callers must not modify it (use Apply). The zero
// Catalog is an empty catalog. A Catalog is not safe for concurrent use: apply commands to a
// Clone and swap it in if readers run concurrently.
type Catalog struct {
	Indexes map[string]*Index
}

// Op is the operation of a catalog Command.
type Op string

// The catalog operations. See Catalog.Apply for their rules.
const (
	// OpDefine creates a new version of an index from Command.Definition (idempotent).
	OpDefine Op = "define"
	// OpReady marks a building version ready (its backfill is done).
	OpReady Op = "ready"
	// OpAlias points the index's alias at a ready version.
	OpAlias Op = "alias"
	// OpDrop starts dropping a version.
	OpDrop Op = "drop"
	// OpDropped records that a dropping version's data is deleted.
	OpDropped Op = "dropped"
)

// Command is one change to the catalog. Name is the index's name; Version the version concerned
// (not used by OpDefine); Definition the definition of OpDefine; Now the time of the command,
// chosen by the proposer (the raft leader), the only clock the catalog reads.
type Command struct {
	Op         Op
	Name       string
	Version    int
	Definition Definition
	Now        time.Time
}

// Result is the outcome of an accepted command: the version concerned, and for OpDefine whether
// a new version was created (false: an equal definition already had a live version).
type Result struct {
	Version int
	Created bool
}

// Errors of the catalog. Each is wrapped with a message naming the index and version.
var (
	// ErrBadCommand: Apply refused the command (unknown op, invalid name, version or definition,
	// or a transition the version's state does not allow). The catalog did not change.
	ErrBadCommand = errors.New("indexes: bad command")
	// ErrNotFound: no such index or version, or the version is dropping or dropped.
	ErrNotFound = errors.New("indexes: not found")
	// ErrNotReady: the version (or, for version 0, the index's alias) is not ready: it is still
	// building, or the index has no ready version yet. OpAlias of a version not ready returns it
	// too. Retry once the version is ready.
	ErrNotReady = errors.New("indexes: not ready")
	// ErrCorruptCatalog: DecodeCatalog found bytes that are not a catalog.
	ErrCorruptCatalog = errors.New("indexes: corrupt catalog")
)

// TableName returns the name of the SQL table of version of the index name: "<name>_v<version>".
func TableName(name string, version int) string { return fmt.Sprintf("%s_v%d", name, version) }

// GroupPrefix starts the name of the consumer group that maintains an index version:
// GroupPrefix + TableName ("_index.<name>_v<version>").
const GroupPrefix = "_index."

// GroupName returns the consumer group that maintains version of index name:
// "_index.<name>_v<version>". The maintainer's workers join it; progress reports read it.
func GroupName(name string, version int) string { return GroupPrefix + TableName(name, version) }

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog { return &Catalog{Indexes: map[string]*Index{}} }

// Clone returns a deep copy of c: changing one never changes the other.
func (c *Catalog) Clone() *Catalog {
	out := NewCatalog()
	for name, ix := range c.Indexes {
		out.Indexes[name] = ix.clone()
	}
	return out
}

func (ix *Index) clone() *Index {
	c := &Index{Name: ix.Name, Alias: ix.Alias, Versions: make([]Version, len(ix.Versions))}
	for i, v := range ix.Versions {
		c.Versions[i] = v.clone()
	}
	return c
}

func (v Version) clone() Version {
	v.Definition = v.Definition.clone()
	return v
}

// find returns the position of version in ix.Versions, or -1.
func (ix *Index) find(version int) int {
	for i, v := range ix.Versions {
		if v.Version == version {
			return i
		}
	}
	return -1
}

// live reports whether a state is building or ready.
func live(s State) bool { return s == StateBuilding || s == StateReady }

// normTime drops t's monotonic reading and location and keeps microseconds, as stored.
func normTime(t time.Time) time.Time { return t.Round(0).UTC().Truncate(time.Microsecond) }

// Apply applies cmd and returns its result. A refused command changes nothing and returns an
// error wrapping ErrBadCommand, ErrNotFound (no such index or version) or ErrNotReady (OpAlias of
// a version that is not ready), with a message naming the index, the version and the reason.
//
//   - OpDefine: cmd.Definition must be valid (the error also wraps its *FieldErrors) and its
//     Table must be cmd.Name. If the newest version that is not dropping or dropped has an Equal
//     definition, that version is the result (Created false): re-defining is idempotent.
//     Otherwise a new version is created, numbered 1 + the highest number the index ever used
//     (numbers are never reused, even after drops), in state building (Created true).
//   - OpReady: building -> ready (ReadyAt = Now); idempotent on a ready version. If the index has
//     no alias, the alias becomes this version. Refused on a dropping or dropped version.
//   - OpAlias: the alias becomes the version, which must be ready (else ErrNotReady).
//   - OpDrop: building or ready -> dropping; idempotent on a dropping or dropped version. Refused
//     for the alias target while the index has another building or ready version (alias another
//     version first); allowed if it is the only one, and the alias is cleared.
//   - OpDropped: dropping -> dropped (DroppedAt = Now); idempotent on a dropped version; refused
//     on a building or ready version (drop it first).
func (c *Catalog) Apply(cmd Command) (Result, error) {
	if !tablePattern.MatchString(cmd.Name) {
		return Result{}, fmt.Errorf("%w: %s: %q is not a valid index name (want [a-z][a-z0-9_]{0,39})",
			ErrBadCommand, cmd.Op, cmd.Name)
	}
	switch cmd.Op {
	case OpDefine:
		return c.define(cmd)
	case OpReady, OpAlias, OpDrop, OpDropped:
	default:
		return Result{}, fmt.Errorf("%w: unknown op %q (want define, ready, alias, drop or dropped)", ErrBadCommand, cmd.Op)
	}
	if cmd.Version <= 0 {
		return Result{}, fmt.Errorf("%w: %s %s: version must be at least 1, got %d", ErrBadCommand, cmd.Op, cmd.Name, cmd.Version)
	}
	ix := c.Indexes[cmd.Name]
	if ix == nil {
		return Result{}, fmt.Errorf("%w: %s %s version %d: no index %s", ErrNotFound, cmd.Op, cmd.Name, cmd.Version, cmd.Name)
	}
	i := ix.find(cmd.Version)
	if i < 0 {
		return Result{}, fmt.Errorf("%w: %s %s version %d: index %s has no version %d",
			ErrNotFound, cmd.Op, cmd.Name, cmd.Version, cmd.Name, cmd.Version)
	}
	v := &ix.Versions[i]
	res := Result{Version: v.Version}
	refuse := func(sentinel error, format string, args ...any) (Result, error) {
		return Result{}, fmt.Errorf("%w: %s %s version %d: %s", sentinel, cmd.Op, cmd.Name, cmd.Version, fmt.Sprintf(format, args...))
	}
	switch cmd.Op {
	case OpReady:
		switch v.State {
		case StateBuilding:
			v.State, v.ReadyAt = StateReady, normTime(cmd.Now)
		case StateReady:
		default:
			return refuse(ErrBadCommand, "version %d is %s", v.Version, v.State)
		}
		if ix.Alias == 0 {
			ix.Alias = v.Version
		}
	case OpAlias:
		if v.State != StateReady {
			return refuse(ErrNotReady, "version %d is %s, not ready", v.Version, v.State)
		}
		ix.Alias = v.Version
	case OpDrop:
		if !live(v.State) {
			return res, nil
		}
		if ix.Alias == v.Version {
			for _, o := range ix.Versions {
				if o.Version != v.Version && live(o.State) {
					return refuse(ErrBadCommand, "version %d is the alias of %s: alias another version first",
						v.Version, ix.Name)
				}
			}
			ix.Alias = 0
		}
		v.State = StateDropping
	case OpDropped:
		switch v.State {
		case StateDropping:
			v.State, v.DroppedAt = StateDropped, normTime(cmd.Now)
		case StateDropped:
		default:
			return refuse(ErrBadCommand, "version %d is %s, not dropping: drop it first", v.Version, v.State)
		}
	}
	return res, nil
}

// define applies an OpDefine; see Apply.
func (c *Catalog) define(cmd Command) (Result, error) {
	if err := cmd.Definition.Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: define %s: invalid definition: %w", ErrBadCommand, cmd.Name, err)
	}
	if cmd.Definition.Table != cmd.Name {
		return Result{}, fmt.Errorf("%w: define %s: the definition's table is %q, not the index's name",
			ErrBadCommand, cmd.Name, cmd.Definition.Table)
	}
	ix := c.Indexes[cmd.Name]
	next := 1
	if ix != nil {
		for i := len(ix.Versions) - 1; i >= 0; i-- {
			if v := ix.Versions[i]; live(v.State) {
				if v.Definition.Equal(cmd.Definition) {
					return Result{Version: v.Version}, nil
				}
				break
			}
		}
		for _, v := range ix.Versions {
			if v.Version >= next {
				next = v.Version + 1
			}
		}
	} else {
		if c.Indexes == nil {
			c.Indexes = map[string]*Index{}
		}
		ix = &Index{Name: cmd.Name}
		c.Indexes[cmd.Name] = ix
	}
	ix.Versions = append(ix.Versions, Version{
		Version:    next,
		Definition: cmd.Definition.clone(),
		State:      StateBuilding,
		CreatedAt:  normTime(cmd.Now),
	})
	return Result{Version: next, Created: true}, nil
}

// Resolve returns the version of the index name that queries use: version, or the alias if
// version is 0. The result is a copy.
//
// Errors: ErrNotFound for an unknown index or version, or a version that is dropping or dropped;
// ErrNotReady for a building version, or for version 0 when the index has no alias ("index x has
// no ready version yet (version 1 is building)").
func (c *Catalog) Resolve(name string, version int) (Version, error) {
	ix := c.Indexes[name]
	if ix == nil {
		return Version{}, fmt.Errorf("%w: no index %s", ErrNotFound, name)
	}
	if version == 0 {
		if ix.Alias == 0 {
			for i := len(ix.Versions) - 1; i >= 0; i-- {
				if v := ix.Versions[i]; live(v.State) {
					return Version{}, fmt.Errorf("%w: index %s has no ready version yet (version %d is %s)",
						ErrNotReady, name, v.Version, v.State)
				}
			}
			return Version{}, fmt.Errorf("%w: index %s has no version that is not dropped", ErrNotFound, name)
		}
		version = ix.Alias
	}
	i := ix.find(version)
	if i < 0 {
		return Version{}, fmt.Errorf("%w: index %s has no version %d", ErrNotFound, name, version)
	}
	v := ix.Versions[i]
	switch v.State {
	case StateReady:
		return v.clone(), nil
	case StateBuilding:
		return Version{}, fmt.Errorf("%w: version %d of index %s is building", ErrNotReady, version, name)
	}
	return Version{}, fmt.Errorf("%w: version %d of index %s is %s", ErrNotFound, version, name, v.State)
}

// names returns the index names, sorted.
func (c *Catalog) names() []string {
	names := make([]string, 0, len(c.Indexes))
	for n := range c.Indexes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// versionsIn returns copies of the versions whose state is one of states, sorted by index name
// then version.
func (c *Catalog) versionsIn(states ...State) []Version {
	var out []Version
	for _, n := range c.names() {
		for _, v := range c.Indexes[n].Versions {
			for _, s := range states {
				if v.State == s {
					out = append(out, v.clone())
				}
			}
		}
	}
	return out
}

// Active returns copies of every version that is building or ready, sorted by index name then
// version: the versions whose maintainers must run.
func (c *Catalog) Active() []Version { return c.versionsIn(StateBuilding, StateReady) }

// Dropping returns copies of every version that is dropping, sorted by index name then version:
// the versions whose data must be deleted (then OpDropped).
func (c *Catalog) Dropping() []Version { return c.versionsIn(StateDropping) }

// catalogFormat is the version of EncodeCatalog's format.
const catalogFormat = 1

// The stored form of a catalog. Field tags are the format: never rename them.
type (
	wireCatalog struct {
		Format  int         `msgpack:"format"`
		Indexes []wireIndex `msgpack:"indexes"` // sorted by name
	}
	wireIndex struct {
		Name     string        `msgpack:"name"`
		Alias    int           `msgpack:"alias"`
		Versions []wireVersion `msgpack:"versions"`
	}
	wireVersion struct {
		Version    int     `msgpack:"version"`
		State      string  `msgpack:"state"`
		CreatedAt  *int64  `msgpack:"created_at"` // Unix microseconds; nil: zero time
		ReadyAt    *int64  `msgpack:"ready_at"`
		DroppedAt  *int64  `msgpack:"dropped_at"`
		Definition wireDef `msgpack:"definition"`
	}
	wireDef struct {
		Table      string          `msgpack:"table"`
		Datastore  string          `msgpack:"datastore"`
		ShardField string          `msgpack:"shard_field"`
		ColumnDefs []wireColumnDef `msgpack:"column_defs"`
	}
	wireColumnDef struct {
		ColumnKey string      `msgpack:"column_key"`
		Fields    []wireField `msgpack:"fields"`
	}
	wireField struct {
		Field string `msgpack:"field"`
		Type  string `msgpack:"type"`
	}
)

func toWireTime(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	us := t.UnixMicro()
	return &us
}

func fromWireTime(us *int64) time.Time {
	if us == nil {
		return time.Time{}
	}
	return time.UnixMicro(*us).UTC()
}

// EncodeCatalog returns the stored form of c: MessagePack of a format number and the indexes
// sorted by name, each with its versions in order. Equal catalogs give equal bytes. A nil c
// encodes as an empty catalog.
func EncodeCatalog(c *Catalog) ([]byte, error) {
	w := wireCatalog{Format: catalogFormat, Indexes: []wireIndex{}}
	if c != nil {
		for _, n := range c.names() {
			ix := c.Indexes[n]
			wi := wireIndex{Name: n, Alias: ix.Alias, Versions: []wireVersion{}}
			for _, v := range ix.Versions {
				wd := wireDef{Table: v.Definition.Table, Datastore: v.Definition.Datastore,
					ShardField: v.Definition.ShardField, ColumnDefs: []wireColumnDef{}}
				for _, cd := range v.Definition.ColumnDefs {
					wc := wireColumnDef{ColumnKey: cd.ColumnKey, Fields: []wireField{}}
					for _, f := range cd.Fields {
						wc.Fields = append(wc.Fields, wireField{Field: f.Field, Type: string(f.Type)})
					}
					wd.ColumnDefs = append(wd.ColumnDefs, wc)
				}
				wi.Versions = append(wi.Versions, wireVersion{Version: v.Version, State: string(v.State),
					CreatedAt: toWireTime(v.CreatedAt), ReadyAt: toWireTime(v.ReadyAt), DroppedAt: toWireTime(v.DroppedAt),
					Definition: wd})
			}
			w.Indexes = append(w.Indexes, wi)
		}
	}
	var buf bytes.Buffer
	if err := msgpack.NewEncoder(&buf).Encode(&w); err != nil {
		return nil, fmt.Errorf("indexes: encode catalog: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeCatalog rebuilds a catalog from EncodeCatalog's output; empty input is an empty catalog.
// Bytes that do not decode, an unknown format, repeated or invalid index names, versions out of
// order or not positive, unknown states, or an alias that is not a ready version give an error
// wrapping ErrCorruptCatalog. Definitions are not re-validated: rules may tighten, stored
// indexes stay.
func DecodeCatalog(b []byte) (*Catalog, error) {
	c := NewCatalog()
	if len(b) == 0 {
		return c, nil
	}
	var w wireCatalog
	r := bytes.NewReader(b)
	if err := msgpack.NewDecoder(r).Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCatalog, err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the catalog", ErrCorruptCatalog, r.Len())
	}
	if w.Format != catalogFormat {
		return nil, fmt.Errorf("%w: format %d, want %d", ErrCorruptCatalog, w.Format, catalogFormat)
	}
	for _, wi := range w.Indexes {
		if !tablePattern.MatchString(wi.Name) {
			return nil, fmt.Errorf("%w: invalid index name %q", ErrCorruptCatalog, wi.Name)
		}
		if _, dup := c.Indexes[wi.Name]; dup {
			return nil, fmt.Errorf("%w: index %s appears twice", ErrCorruptCatalog, wi.Name)
		}
		ix := &Index{Name: wi.Name, Alias: wi.Alias}
		for _, wv := range wi.Versions {
			if wv.Version <= 0 || (len(ix.Versions) > 0 && wv.Version <= ix.Versions[len(ix.Versions)-1].Version) {
				return nil, fmt.Errorf("%w: index %s: version %d out of order", ErrCorruptCatalog, wi.Name, wv.Version)
			}
			switch State(wv.State) {
			case StateBuilding, StateReady, StateDropping, StateDropped:
			default:
				return nil, fmt.Errorf("%w: index %s version %d: unknown state %q", ErrCorruptCatalog, wi.Name, wv.Version, wv.State)
			}
			d := Definition{Table: wv.Definition.Table, Datastore: wv.Definition.Datastore,
				ShardField: wv.Definition.ShardField}
			for _, wc := range wv.Definition.ColumnDefs {
				cd := ColumnDef{ColumnKey: wc.ColumnKey}
				for _, f := range wc.Fields {
					cd.Fields = append(cd.Fields, FieldDef{Field: f.Field, Type: FieldType(f.Type)})
				}
				d.ColumnDefs = append(d.ColumnDefs, cd)
			}
			ix.Versions = append(ix.Versions, Version{Version: wv.Version, Definition: d, State: State(wv.State),
				CreatedAt: fromWireTime(wv.CreatedAt), ReadyAt: fromWireTime(wv.ReadyAt), DroppedAt: fromWireTime(wv.DroppedAt)})
		}
		if ix.Alias != 0 {
			if i := ix.find(ix.Alias); i < 0 || ix.Versions[i].State != StateReady {
				return nil, fmt.Errorf("%w: index %s: alias %d is not a ready version", ErrCorruptCatalog, wi.Name, ix.Alias)
			}
		}
		c.Indexes[wi.Name] = ix
	}
	return c, nil
}
