package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestSchemaCommands runs `schema put --dry-run`, `schema put` and `schema list` against a
// 3-node cluster holding flights, one of them with a negative distance.
func TestSchemaCommands(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	cfg := client.DefaultConfig()
	cfg.Endpoints = c.URLs()
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err, "client.New")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var writes []client.CellWrite
	for i := 0; i < 20; i++ {
		distance := 100 + i
		if i == 7 {
			distance = -7
		}
		writes = append(writes, client.CellWrite{Key: cells.Key{RowKey: uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("schemacmd", i))), ColumnKey: "BASE", RefKey: 1},
			Body: json.RawMessage(fmt.Sprintf(`{"date":"2001-01-01T00:01:00","origin":"LAS","destination":"PHL","distance":%d,"delay":3}`, distance))})
	}
	_, err = cl.PutCells(ctx, writes)
	require.NoError(t, err, "PutCells")

	var out, progress bytes.Buffer
	require.NoError(t, runSchemaPut(ctx, cl, "BASE", examples.TripsBaseSchema, schemaPutFlags{dryRun: true}, &out, &progress), "schema put --dry-run")
	assert.Contains(t, out.String(), "column BASE: schema version 1 (dry run, nothing registered) would reject 1 of 20 latest cells (2 partitions)", "dry run summary")
	assert.Contains(t, out.String(), writes[7].Key.RowKey.String()+"/BASE/1  /distance: minimum: got -7, want 0", "dry run example")
	assert.Empty(t, progress.String(), "no progress line off a terminal")

	out.Reset()
	require.NoError(t, runSchemaList(ctx, cl, "", false, &out), "schema list before")
	assert.Equal(t, "no column has a schema\n", out.String(), "the dry run registered nothing")

	out.Reset()
	require.NoError(t, runSchemaPut(ctx, cl, "BASE", examples.TripsBaseSchema, schemaPutFlags{}, &out, &progress), "schema put")
	assert.Equal(t, "column BASE: schema version 1 registered\n", out.String())
	out.Reset()
	require.NoError(t, runSchemaPut(ctx, cl, "BASE", examples.TripsBaseSchema, schemaPutFlags{}, &out, &progress), "schema put again")
	assert.Equal(t, "column BASE: schema version 1 unchanged: the latest version holds this schema\n", out.String())
	err = runSchemaPut(ctx, cl, "BASE", []byte(`{"type":"strng"}`), schemaPutFlags{}, &out, &progress)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "a schema that does not compile")

	out.Reset()
	require.NoError(t, runSchemaList(ctx, cl, "BASE", false, &out), "schema list BASE")
	assert.Regexp(t, `(?s)^COLUMN\s+VERSION\s+CREATED_AT\s+SCHEMA\nBASE\s+1\s+\d{4}-\d\d-\d\dT\S+\s+\{"\$schema":.*\.\.\.\n$`, out.String(), "versions of BASE")
	out.Reset()
	require.NoError(t, runSchemaList(ctx, cl, "BASE", true, &out), "schema list BASE --json")
	var vs struct {
		Column   string `json:"column"`
		Versions []struct {
			Version int `json:"version"`
		} `json:"versions"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &vs), "--json output")
	assert.Equal(t, "BASE", vs.Column)
	assert.Len(t, vs.Versions, 1)

	_, err = cl.PutCell(ctx, uuid.New(), "BASE", 1, json.RawMessage(`{"date":"2001-01-01T00:01:00","destination":"PHL","distance":1,"delay":3}`))
	assert.ErrorIs(t, err, client.ErrSchemaViolation, "a BASE cell without an origin, once registered")
}
