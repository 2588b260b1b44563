package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/schemas"
)

// Column schemas: a version is registered on every partition of the datastore, the one holding
// CatalogShard (the arbiter) first; see fsm/DESIGN.md ("Schema commands").

// Schema RPC: one command.Schema forwarded to a partition's leader.
const rpcSchemaPath = "/internal/v1/schema"

// SchemaCacheTTL is how long a node checks writes against the schemas it last read (before
// proposing them, so that a put_cells spanning partitions writes nothing when one cell
// violates). A registration made through this node is in its cache at once; one made through
// another node reaches this node's check within about SchemaCacheTTL. Each partition's state
// machine checks every write again when it applies it, so the cache never lets a violating
// cell in: a stale cache only means a batch spanning partitions may be refused by one
// partition after others applied their cells.
const SchemaCacheTTL = time.Second

// MaxSchemaDryRunExamples bounds the rejected cells a dry run describes.
const MaxSchemaDryRunExamples = 10

// Errors of schema registration.
var (
	// ErrBadSchema: the column key or the schema is refused (wraps schemas.ErrInvalid for a
	// schema that is not a JSON object, names another draft, refers outside itself or does
	// not compile); nothing was registered. The message says why.
	ErrBadSchema = errors.New("cluster: bad schema")
	// ErrSchemaConflict: the version this registration needed was registered with another
	// text meanwhile (a concurrent registration of the column won it); nothing was
	// registered by this call. Read the versions and register again if still wanted.
	ErrSchemaConflict = errors.New("cluster: schema version taken by another text")
)

// SchemaViolationError is the error of PutCells when a cell violates its column's latest
// schema. Violation.Cell is the cell's index in the request. When the node's check refused it
// (the common case) nothing was written; when a partition refused it at apply time (the node
// learned of the schema too late), Partial says cells of other partitions may be applied.
type SchemaViolationError struct {
	Violation schemas.CellViolation
	Partial   bool
}

// Error describes the violation: the cell, column, version, JSON pointer and message.
func (e *SchemaViolationError) Error() string {
	v := e.Violation
	at := v.Pointer
	if at == "" {
		at = "the body"
	}
	s := fmt.Sprintf("cluster: cell %d (column %s) violates schema version %d at %s: %s", v.Cell, v.Column, v.Version, at, v.Message)
	if e.Partial {
		s += " (cells of other partitions may be applied)"
	}
	return s
}

// SchemaRegistration is the outcome of PutSchema: the column's version that holds the text,
// and whether this call created it (false: it was registered before, and this call made sure
// every partition holds it).
type SchemaRegistration struct {
	Column  string
	Version int
	Created bool
}

// SchemaDryRun is the outcome of DryRunSchema: the version the schema would get (the latest
// when it holds the same text), the partitions checked, how many rows have a cell of the
// column (Rows: their latest cells were checked), how many of those cells the schema rejects,
// and up to MaxSchemaDryRunExamples of them, by row key.
type SchemaDryRun struct {
	Column     string
	Version    int
	Partitions []int
	Rows       int64
	Rejected   int64
	Examples   []partition.SchemaRejection
}

type schemaRPC struct {
	Datastore     string
	Partition     int
	TimeoutMicros int64
	Command       command.Schema
}

type schemaRPCResponse struct {
	Result command.SchemaResult
}

// PutSchema registers text, a JSON Schema (draft 2020-12; package schemas), as the next
// version of column's schema in datastore ds, on every partition: first on the arbiter (the
// partition holding CatalogShard), which decides the version, then on the others in parallel.
// From each partition's schema entry on, that partition refuses writes whose cells of column
// violate it. The same text as the column's latest version registers nothing new: it answers
// that version (Created false) after making sure every partition holds it, so retrying a
// registration that failed part-way completes it. Blocks until every partition applied it or
// ctx ends.
//
// Errors: ErrUnknownDatastore; ErrBadSchema (nothing registered); ErrSchemaConflict (a
// concurrent registration took the version: nothing registered by this call); ErrUnavailable
// (a partition has no leader, or in async mode no master: the arbiter's answer says whether
// the version was registered there; retry to complete it); ErrIndeterminate.
func (n *Node) PutSchema(ctx context.Context, ds, column string, text []byte) (SchemaRegistration, error) {
	d, s, err := n.schemaArgs(ds, column, text)
	if err != nil {
		return SchemaRegistration{}, err
	}
	canon := s.Text()
	arb := d.routeOf(CatalogShard)
	versions, version, err := n.nextSchemaVersion(ctx, ds, arb, column, canon)
	if err != nil {
		return SchemaRegistration{}, err
	}
	texts := map[int][]byte{version: canon}
	for _, v := range versions {
		texts[v.Version] = v.Text
	}
	res, err := n.schemaApply(ctx, ds, arb, command.Schema{Column: column, Version: version, Text: canon})
	if err != nil {
		return SchemaRegistration{}, fmt.Errorf("partition %d: %w", arb.spec.ID, err)
	}
	if err := schemaOutcome(arb.spec.ID, column, version, res); err != nil {
		return SchemaRegistration{}, err
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, r := range d.partitions {
		if r == arb {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.registerOn(ctx, ds, r, column, version, texts); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("partition %d: %w", r.spec.ID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return SchemaRegistration{}, asClass(classOf(errs), fmt.Sprintf("version %d of column %s is registered on the arbiter, not on every partition (register it again to complete)", version, column), err)
	}
	d.schemas.put(column, version, s)
	return SchemaRegistration{Column: column, Version: version, Created: res.Status == command.SchemaCreated}, nil
}

// classOf returns the error class a failed registration reports: ErrIndeterminate when a
// partition may have applied it, else ErrUnavailable, unless a definitive refusal came.
func classOf(errs []error) error {
	class := ErrUnavailable
	for _, err := range errs {
		switch {
		case errors.Is(err, ErrSchemaConflict):
			return ErrSchemaConflict
		case errors.Is(err, ErrIndeterminate):
			class = ErrIndeterminate
		}
	}
	return class
}

// schemaArgs checks the arguments of a registration or a dry run.
func (n *Node) schemaArgs(ds, column string, text []byte) (*datastore, *schemas.Schema, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, nil, err
	}
	if err := cells.ValidateColumnKey(column); err != nil {
		return nil, nil, fmt.Errorf("%w: column %q: %w", ErrBadSchema, column, err)
	}
	s, err := schemas.Compile(text)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	return d, s, nil
}

// nextSchemaVersion reads the column's versions on the arbiter (strongly) and returns them
// with the version canon would get: the latest when it holds canon, else latest + 1.
func (n *Node) nextSchemaVersion(ctx context.Context, ds string, arb *route, column string, canon []byte) ([]schemas.Version, int, error) {
	versions, err := n.readSchemas(ctx, ds, arb, column, false, Strong)
	if err != nil {
		return nil, 0, err
	}
	if len(versions) == 0 {
		return nil, 1, nil
	}
	last := versions[len(versions)-1]
	if bytes.Equal(last.Text, canon) {
		return versions, last.Version, nil
	}
	return versions, last.Version + 1, nil
}

// registerOn makes partition r hold version of column: it proposes it, and when r lacks
// earlier versions (a gap: a registration that failed part-way) proposes those first, from
// texts.
func (n *Node) registerOn(ctx context.Context, ds string, r *route, column string, version int, texts map[int][]byte) error {
	res, err := n.schemaApply(ctx, ds, r, command.Schema{Column: column, Version: version, Text: texts[version]})
	if err != nil {
		return err
	}
	if res.Status != command.SchemaGap {
		return schemaOutcome(r.spec.ID, column, version, res)
	}
	for v := res.Latest + 1; v <= version; v++ {
		text, ok := texts[v]
		if !ok {
			return fmt.Errorf("%w: version %d of column %s is missing on the arbiter", ErrSchemaConflict, v, column)
		}
		res, err := n.schemaApply(ctx, ds, r, command.Schema{Column: column, Version: v, Text: text})
		if err != nil {
			return err
		}
		if err := schemaOutcome(r.spec.ID, column, v, res); err != nil {
			return err
		}
	}
	return nil
}

// schemaOutcome turns a partition's refusal of a schema command into an error.
func schemaOutcome(pid int, column string, version int, res command.SchemaResult) error {
	switch res.Status {
	case command.SchemaCreated, command.SchemaExists:
		return nil
	case command.SchemaConflict:
		return fmt.Errorf("%w: version %d of column %s holds another text on partition %d", ErrSchemaConflict, version, column, pid)
	case command.SchemaGap:
		return fmt.Errorf("%w: partition %d holds versions up to %d of column %s, not %d", ErrSchemaConflict, pid, res.Latest, column, version-1)
	case command.SchemaInvalid:
		return fmt.Errorf("%w: %s", ErrBadSchema, res.Message)
	}
	return fmt.Errorf("%w: schema status %v", fsm.ErrUnexpectedResponse, res.Status)
}

// schemaApply proposes cmd to the leader of partition r (locally or forwarded). Errors:
// ErrUnavailable (not applied), ErrIndeterminate (maybe applied; safe to retry).
func (n *Node) schemaApply(ctx context.Context, ds string, r *route, cmd command.Schema) (command.SchemaResult, error) {
	return callLeaderOp(ctx, n, schemaOp, ds, r, &cmd)
}

// Schemas reads the schemas of datastore ds from the arbiter partition with consistency c:
// every version of column, or with column "" the latest version of every column; sorted by
// column, then version. A column with no schema reads as none. Errors: ErrUnknownDatastore,
// ErrBadSchema (a bad column key), ErrUnavailable.
func (n *Node) Schemas(ctx context.Context, ds, column string, c Consistency) ([]schemas.Version, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	if column != "" {
		if err := cells.ValidateColumnKey(column); err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", ErrBadSchema, column, err)
		}
	}
	return n.readSchemas(ctx, ds, d.routeOf(CatalogShard), column, column == "", c)
}

func (n *Node) readSchemas(ctx context.Context, ds string, r *route, column string, latest bool, c Consistency) ([]schemas.Version, error) {
	resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c,
		Read: partition.ReadRequest{Schemas: &partition.SchemasRead{Column: column, Latest: latest}}})
	if err != nil {
		return nil, err
	}
	return resp.Schemas, nil
}

// DryRunSchema checks text as a new version of column's schema would be, without registering
// it: it counts the rows of the partitions pids (nil: every partition) whose latest cell of
// column text rejects, reading each partition's shard logs with consistency c (Strong: on the
// leader, or async mode's master, after every acknowledged write; Stale: on any replica or
// minion, sparing the leader, and may miss the last writes), the partitions in parallel. It
// takes time on a large datastore; a caller showing progress asks one partition at a time.
// Errors: ErrUnknownDatastore, ErrBadSchema, ErrBadShard (no such partition), ErrUnavailable.
func (n *Node) DryRunSchema(ctx context.Context, ds, column string, text []byte, pids []int, c Consistency) (SchemaDryRun, error) {
	d, s, err := n.schemaArgs(ds, column, text)
	if err != nil {
		return SchemaDryRun{}, err
	}
	routes := d.partitions
	if pids != nil {
		routes = nil
		for _, pid := range pids {
			r, err := n.localRoute(ds, pid)
			if err != nil {
				return SchemaDryRun{}, err
			}
			routes = append(routes, r)
		}
	}
	_, version, err := n.nextSchemaVersion(ctx, ds, d.routeOf(CatalogShard), column, s.Text())
	if err != nil {
		return SchemaDryRun{}, err
	}
	out := SchemaDryRun{Column: column, Version: version}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, r := range routes {
		out.Partitions = append(out.Partitions, r.spec.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c,
				Read: partition.ReadRequest{SchemaCheck: &partition.SchemaCheckRead{Column: column, Text: s.Text(), Examples: MaxSchemaDryRunExamples}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("partition %d: %w", r.spec.ID, err))
			case resp.SchemaCheck == nil:
				errs = append(errs, fmt.Errorf("%w: partition %d: no dry run in the answer", ErrUnavailable, r.spec.ID))
			default:
				out.Rows += resp.SchemaCheck.Rows
				out.Rejected += resp.SchemaCheck.Rejected
				out.Examples = append(out.Examples, resp.SchemaCheck.Examples...)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return SchemaDryRun{}, err
	}
	sort.Ints(out.Partitions)
	sort.Slice(out.Examples, func(i, j int) bool { return out.Examples[i].RowKey.String() < out.Examples[j].RowKey.String() })
	if len(out.Examples) > MaxSchemaDryRunExamples {
		out.Examples = out.Examples[:MaxSchemaDryRunExamples]
	}
	return out, nil
}

// schemaCache is a node's copy of a datastore's latest schemas, for the check before
// proposing (see SchemaCacheTTL). The zero value is empty and ready.
type schemaCache struct {
	mu      sync.Mutex
	latest  map[string]cachedSchema // by column
	fetched time.Time               // when latest was read (zero: never, or invalidated)
	loading chan struct{}           // closed when the read in flight ends; nil when none
}

type cachedSchema struct {
	version int
	schema  *schemas.Schema
}

// put records a version this node registered.
func (c *schemaCache) put(column string, version int, s *schemas.Schema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.latest[column]; ok && cur.version >= version {
		return
	}
	if c.latest == nil {
		c.latest = map[string]cachedSchema{}
	}
	c.latest[column] = cachedSchema{version: version, schema: s}
}

// invalidate makes the next check read the schemas again, when a partition refused a write
// by a version the cache does not hold.
func (c *schemaCache) invalidate(v *schemas.CellViolation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.latest[v.Column]; !ok || cur.version < v.Version {
		c.fetched = time.Time{}
	}
}

// latestSchemas returns d's latest schemas as this node knows them, reading them again (a
// stale read of the arbiter) when older than SchemaCacheTTL. One read at a time: callers
// meanwhile use the previous copy, or wait for the first. When the read fails the previous
// copy is used (and read again at the next call after a short pause); with none, nil: the
// check is skipped and the partitions' state machines check alone.
func (n *Node) latestSchemas(ctx context.Context, ds string, d *datastore) map[string]cachedSchema {
	c := &d.schemas
	c.mu.Lock()
	for {
		if time.Since(c.fetched) < SchemaCacheTTL {
			m := c.latest
			c.mu.Unlock()
			return m
		}
		if c.loading == nil {
			break
		}
		if !c.fetched.IsZero() || c.latest != nil {
			m := c.latest // a refresh is under way: the previous copy will do
			c.mu.Unlock()
			return m
		}
		wait := c.loading
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil
		}
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.loading = done
	prev := c.latest
	c.mu.Unlock()

	vs, err := n.readSchemas(ctx, ds, d.routeOf(CatalogShard), "", true, Stale)
	next := map[string]cachedSchema{}
	if err == nil {
		for _, v := range vs {
			if cur, ok := prev[v.Column]; ok && cur.version == v.Version {
				next[v.Column] = cur
				continue
			}
			s, cerr := schemas.Compile(v.Text)
			if cerr != nil {
				err = fmt.Errorf("column %s version %d: %w", v.Column, v.Version, cerr)
				break
			}
			next[v.Column] = cachedSchema{version: v.Version, schema: s}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.loading = nil
	close(done)
	if err != nil {
		n.log.Debug("cluster: read schemas for the write check", "datastore", ds, "error", err)
		// Try again in a tenth of the TTL; keep the previous copy meanwhile.
		c.fetched = time.Now().Add(-SchemaCacheTTL + SchemaCacheTTL/10)
		return c.latest
	}
	for col, cur := range c.latest {
		if nv, ok := next[col]; !ok || nv.version < cur.version {
			next[col] = cur // a registration through this node during the read
		}
	}
	c.latest, c.fetched = next, time.Now()
	return next
}

// checkSchemas checks cs against the latest schemas of d as this node knows them and returns
// the first violation (nil: none, or no schemas known).
func (n *Node) checkSchemas(ctx context.Context, d *datastore, cs []cells.Cell) *schemas.CellViolation {
	if len(cs) == 0 {
		return nil
	}
	m := n.latestSchemas(ctx, d.spec.Name, d)
	if len(m) == 0 {
		return nil
	}
	for i := range cs {
		s, ok := m[cs[i].ColumnKey]
		if !ok {
			continue
		}
		v, err := s.schema.Validate(cs[i].Body)
		if err != nil {
			v = &schemas.Violation{Message: err.Error()}
		}
		if v != nil {
			return &schemas.CellViolation{Cell: i, Column: cs[i].ColumnKey, Version: s.version, Pointer: v.Pointer, Message: v.Message}
		}
	}
	return nil
}

// partlyApplied reports whether a refused request has cells with a result: cells of other
// partitions that were applied.
func partlyApplied(res WriteResponse) bool {
	for _, c := range res.Cells {
		if c.Status != 0 {
			return true
		}
	}
	return false
}
