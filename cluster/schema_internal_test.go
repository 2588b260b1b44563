package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// schemaPart is a partition served by the test node ("n9") over a real state machine and
// SQLite store: what the schema orchestration asks of a partition (ApplySchema, Put, schema
// reads). down makes ApplySchema unavailable; before, when set, runs before each ApplySchema.
type schemaPart struct {
	Partition
	mu     sync.Mutex // serializes the state machine, as a raft group or a master's lock would
	f      *fsm.FSM
	st     *storage.PartitionStore
	down   atomic.Bool
	before func(cmd command.Schema)
	puts   atomic.Int32
}

func (p *schemaPart) Leader() (string, string) { return "n9", "" }
func (p *schemaPart) Elected() bool            { return false }

func (p *schemaPart) apply(ctx context.Context, data []byte) (*fsm.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := p.f.ApplyShared(ctx, [][]byte{data})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

func (p *schemaPart) ApplySchema(ctx context.Context, cmd command.Schema) (command.SchemaResult, error) {
	if p.down.Load() {
		return command.SchemaResult{}, fmt.Errorf("%w: test partition down", ErrUnavailable)
	}
	if p.before != nil {
		p.before(cmd)
	}
	cmd.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
	data, err := command.Encode(&cmd)
	if err != nil {
		return command.SchemaResult{}, err
	}
	r, err := p.apply(ctx, data)
	if err != nil {
		return command.SchemaResult{}, err
	}
	return fsm.Unwrap[command.SchemaResult](r)
}

func (p *schemaPart) Put(ctx context.Context, w command.Write) (command.WriteResult, error) {
	p.puts.Add(1)
	data, err := command.Encode(&command.Append{CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Writes: []command.Write{w}})
	if err != nil {
		return command.WriteResult{}, err
	}
	r, err := p.apply(ctx, data)
	if err != nil {
		return command.WriteResult{}, err
	}
	ws, err := fsm.Unwrap[[]command.WriteResult](r)
	if err != nil {
		return command.WriteResult{}, err
	}
	return ws[0], nil
}

func (p *schemaPart) Read(ctx context.Context, _ Consistency, req partition.ReadRequest) (partition.ReadResult, error) {
	if req.Schemas == nil {
		return partition.ReadResult{}, errors.New("test partition: only schema reads")
	}
	vs, err := fsm.LoadSchemas(ctx, p.st, req.Schemas.Column, req.Schemas.Latest)
	return partition.ReadResult{Schemas: vs}, err
}

// versions returns "version:text" of every version of column p holds.
func (p *schemaPart) versions(t *testing.T, column string) []string {
	t.Helper()
	vs, err := fsm.LoadSchemas(context.Background(), p.st, column, false)
	require.NoError(t, err, "LoadSchemas")
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%d:%s", v.Version, v.Text))
	}
	return out
}

// schemaNode returns a node serving datastore "trips" (8 shards) as two test partitions:
// 0 (shards 0-3, the arbiter) and 1 (shards 4-7).
func schemaNode(t *testing.T) (*Node, *datastore, [2]*schemaPart) {
	t.Helper()
	st, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: t.TempDir()})
	require.NoError(t, err, "OpenSQLite")
	t.Cleanup(func() { st.Close() })
	spec := &topology.DatastoreSpec{Name: "trips", Mode: topology.ModeAsync, Shards: 8, Partitions: []topology.PartitionSpec{
		{ID: 0, FirstShard: 0, LastShard: 3}, {ID: 1, FirstShard: 4, LastShard: 7}}}
	d := &datastore{spec: spec}
	var parts [2]*schemaPart
	for i := range spec.Partitions {
		ps := &spec.Partitions[i]
		pst, err := st.Partition(context.Background(), storage.PartitionID{Datastore: "trips", Partition: ps.ID}, ps.Shards())
		require.NoError(t, err, "Partition %d", ps.ID)
		f, err := fsm.New(context.Background(), fsm.Config{Store: pst, StoreAttempts: 1})
		require.NoError(t, err, "fsm.New")
		parts[i] = &schemaPart{f: f, st: pst}
		r := &route{spec: ps, ds: spec}
		r.serve(parts[i])
		d.partitions = append(d.partitions, r)
	}
	n := &Node{cfg: Config{NodeID: "n9", Topology: &topology.Topology{}, RetryBackoff: time.Millisecond, RetryBackoffMax: 5 * time.Millisecond},
		log: slog.New(slog.DiscardHandler)}
	n.view.Store(&nodeView{byName: map[string]*datastore{"trips": d}, top: &topology.Topology{Datastores: []topology.DatastoreSpec{*spec}}})
	return n, d, parts
}

func canonical(t *testing.T, text string) string {
	t.Helper()
	c, err := schemas.Canonical([]byte(text))
	require.NoError(t, err)
	return string(c)
}

const (
	nodeSchemaV1 = `{"required":["distance"],"properties":{"distance":{"type":"integer","minimum":0}}}`
	nodeSchemaV2 = `{"required":["distance","origin"]}`
	nodeSchemaV3 = `{"required":["origin"]}`
)

// A registration reaches every partition; the same text again is no new version; one that
// failed part-way is completed by registering again; a partition that missed a version gets
// it before the next.
func TestPutSchemaEveryPartition(t *testing.T) {
	t.Parallel()
	n, _, parts := schemaNode(t)
	ctx := context.Background()
	v1, v2, v3 := canonical(t, nodeSchemaV1), canonical(t, nodeSchemaV2), canonical(t, nodeSchemaV3)

	reg, err := n.PutSchema(ctx, "trips", "BASE", []byte(nodeSchemaV1))
	require.NoError(t, err, "PutSchema v1")
	assert.Equal(t, SchemaRegistration{Column: "BASE", Version: 1, Created: true}, reg)
	for i, p := range parts {
		assert.Equal(t, []string{"1:" + v1}, p.versions(t, "BASE"), "partition %d", i)
	}
	reg, err = n.PutSchema(ctx, "trips", "BASE", []byte(" "+nodeSchemaV1))
	require.NoError(t, err, "PutSchema v1 again")
	assert.Equal(t, SchemaRegistration{Column: "BASE", Version: 1, Created: false}, reg, "the same text: no new version")

	// Partition 1 is down: version 2 reaches the arbiter only.
	parts[1].down.Store(true)
	_, err = n.PutSchema(ctx, "trips", "BASE", []byte(nodeSchemaV2))
	require.Error(t, err, "PutSchema v2 with a partition down")
	assert.ErrorIs(t, err, ErrUnavailable, "a partition down: unavailable")
	assert.Contains(t, err.Error(), "register it again", "says how to complete it")
	assert.Equal(t, []string{"1:" + v1, "2:" + v2}, parts[0].versions(t, "BASE"), "the arbiter holds version 2")
	assert.Equal(t, []string{"1:" + v1}, parts[1].versions(t, "BASE"), "partition 1 does not")

	// Back up: the next version first brings partition 1 version 2 (a gap), then version 3.
	parts[1].down.Store(false)
	reg, err = n.PutSchema(ctx, "trips", "BASE", []byte(nodeSchemaV3))
	require.NoError(t, err, "PutSchema v3")
	assert.Equal(t, SchemaRegistration{Column: "BASE", Version: 3, Created: true}, reg)
	for i, p := range parts {
		assert.Equal(t, []string{"1:" + v1, "2:" + v2, "3:" + v3}, p.versions(t, "BASE"), "partition %d", i)
	}

	// A registration that failed part-way is completed by the same registration again.
	parts[1].down.Store(true)
	_, err = n.PutSchema(ctx, "trips", "STATUS", []byte(nodeSchemaV1))
	require.ErrorIs(t, err, ErrUnavailable, "STATUS with a partition down")
	parts[1].down.Store(false)
	reg, err = n.PutSchema(ctx, "trips", "STATUS", []byte(nodeSchemaV1))
	require.NoError(t, err, "STATUS again")
	assert.Equal(t, SchemaRegistration{Column: "STATUS", Version: 1, Created: false}, reg, "completed: the arbiter had it")
	assert.Equal(t, []string{"1:" + v1}, parts[1].versions(t, "STATUS"), "partition 1 now holds it")

	vs, err := n.Schemas(ctx, "trips", "", Strong)
	require.NoError(t, err, "Schemas")
	require.Len(t, vs, 2, "latest of each column")
	assert.Equal(t, 3, vs[0].Version, "BASE latest")
	_, err = n.PutSchema(ctx, "trips", "BASE", []byte(`{"minimum":"x"}`))
	assert.ErrorIs(t, err, ErrBadSchema, "a schema that does not compile")
	_, err = n.PutSchema(ctx, "trips", "bad/col", []byte(nodeSchemaV1))
	assert.ErrorIs(t, err, ErrBadSchema, "a bad column key")
}

// Two registrations of one column cannot both win its next version: the one the arbiter
// refuses is a conflict and reaches no other partition.
func TestPutSchemaConflict(t *testing.T) {
	t.Parallel()
	n, _, parts := schemaNode(t)
	ctx := context.Background()
	other := canonical(t, nodeSchemaV3)
	var once sync.Once
	parts[0].before = func(cmd command.Schema) {
		// Another node registers version 1 with another text between this node's read and
		// its command.
		once.Do(func() {
			parts[0].before = nil
			data, err := command.Encode(&command.Schema{CreatedAt: time.Now(), Column: cmd.Column, Version: cmd.Version, Text: []byte(other)})
			require.NoError(t, err)
			_, err = parts[0].apply(ctx, data)
			require.NoError(t, err)
		})
	}
	_, err := n.PutSchema(ctx, "trips", "BASE", []byte(nodeSchemaV1))
	require.ErrorIs(t, err, ErrSchemaConflict, "the version was taken")
	assert.Equal(t, []string{"1:" + other}, parts[0].versions(t, "BASE"), "the arbiter holds the winner")
	assert.Empty(t, parts[1].versions(t, "BASE"), "the loser reached no other partition")
	reg, err := n.PutSchema(ctx, "trips", "BASE", []byte(nodeSchemaV1))
	require.NoError(t, err, "registering again")
	assert.Equal(t, 2, reg.Version, "the next version")
}

// cellOn returns a BASE cell (ref key 1) of a row of partition pid (shards 0-3 or 4-7 of 8).
func cellOn(t *testing.T, pid, i int, body string) cells.Cell {
	t.Helper()
	for j := 0; ; j++ {
		rk := uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("node-schema", pid, i, j)))
		if cells.ShardOf(rk, 8)/4 == pid {
			b, err := cells.EncodeBody([]byte(body))
			require.NoError(t, err)
			return cells.Cell{Key: cells.Key{RowKey: rk, ColumnKey: "BASE", RefKey: 1}, Body: b}
		}
	}
}

// The node checks a write before proposing it, so a batch spanning partitions writes
// nothing when one cell violates; a node whose copy of the schemas is stale lets it through,
// the partition refuses its share, and the node reads the schemas again for the next write.
func TestWriteChecksSchemasFirst(t *testing.T) {
	t.Parallel()
	n, d, parts := schemaNode(t)
	ctx := context.Background()
	_, err := n.PutSchema(ctx, "trips", "BASE", []byte(nodeSchemaV1))
	require.NoError(t, err)

	batch := []cells.Cell{cellOn(t, 0, 1, `{"distance":1}`), cellOn(t, 1, 2, `{"distance":-2}`)}
	res, err := n.Write(ctx, "trips", WriteRequest{Cells: batch})
	require.NoError(t, err, "Write")
	require.NotNil(t, res.Violation, "violation: %+v", res)
	assert.Equal(t, schemas.CellViolation{Cell: 1, Column: "BASE", Version: 1, Pointer: "/distance", Message: "minimum: got -2, want 0"}, *res.Violation)
	assert.Zero(t, parts[0].puts.Load()+parts[1].puts.Load(), "nothing proposed")

	// A node that does not know the schema yet (as another node within SchemaCacheTTL).
	d.schemas.mu.Lock()
	d.schemas.latest, d.schemas.fetched = map[string]cachedSchema{}, time.Now()
	d.schemas.mu.Unlock()
	_, err = n.PutCells(ctx, "trips", batch)
	var sv *SchemaViolationError
	require.ErrorAs(t, err, &sv, "PutCells with a stale copy")
	assert.Equal(t, 1, sv.Violation.Cell, "the cell's index in the request")
	assert.True(t, sv.Partial, "partition 0's cell was applied")
	assert.Equal(t, int32(1), parts[0].puts.Load(), "partition 0 applied its share")
	assert.Equal(t, int32(1), parts[1].puts.Load(), "partition 1 refused its share")

	// The refusal named a version the copy lacks: the next write reads the schemas again.
	batch2 := []cells.Cell{cellOn(t, 0, 3, `{"distance":3}`), cellOn(t, 1, 4, `{}`)}
	res, err = n.Write(ctx, "trips", WriteRequest{Cells: batch2})
	require.NoError(t, err)
	require.NotNil(t, res.Violation, "violation: %+v", res)
	assert.Equal(t, "/distance", res.Violation.Pointer, "missing distance")
	assert.Equal(t, int32(2), parts[0].puts.Load()+parts[1].puts.Load(), "refused before proposing")
}
