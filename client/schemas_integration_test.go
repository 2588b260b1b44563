package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// TestIntegrationSchemas registers, evolves and lists a column's schema through the client,
// runs dry runs (whole and per partition), and reads the typed errors of refused schemas and
// of writes that violate one.
func TestIntegrationSchemas(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const col = "CLIENT_T"
	v1 := json.RawMessage(`{"type":"object","required":["fare"],"properties":{"fare":{"type":"number","minimum":0}}}`)

	// Refused before sending: a bad column, an empty schema.
	_, err := cl.PutSchema(ctx, "bad-col", v1, false)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "bad column")
	_, err = cl.PutSchema(ctx, col, nil, false)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "empty schema")
	_, err = cl.Schemas(ctx, "bad-col")
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "Schemas of a bad column")
	// Refused by the server, naming the body.
	_, err = cl.PutSchema(ctx, col, json.RawMessage(`{"type":"strng"}`), false)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae, "a schema that does not compile")
	assert.ErrorIs(t, err, client.ErrInvalidArgument)
	assert.Equal(t, "body", ae.Field, "field")

	_, err = cl.PutCell(ctx, itRow(t, 1), col, 1, json.RawMessage(`{"fare":-1}`))
	require.NoError(t, err, "no schema yet: anything goes")

	dry, err := cl.PutSchema(ctx, col, v1, true)
	require.NoError(t, err, "dry run")
	assert.Equal(t, wire.SchemaDryRun, dry.Status)
	assert.Equal(t, 1, dry.Version, "the version it would get")
	require.NotNil(t, dry.DryRun)
	assert.Equal(t, int64(1), dry.DryRun.Rejected, "the cell written before")
	st, err := cl.Cluster(ctx)
	require.NoError(t, err)
	var rejected int64
	for _, p := range st.Datastores[0].Partitions {
		res, err := cl.DryRunSchemaPartition(ctx, col, v1, p.ID)
		require.NoError(t, err, "dry run of partition %d", p.ID)
		assert.Equal(t, []int{p.ID}, res.DryRun.Partitions)
		rejected += res.DryRun.Rejected
	}
	assert.Equal(t, int64(1), rejected, "per partition")
	var calls []int
	sum, err := cl.DryRunSchemaByPartition(ctx, col, v1, func(done, all int, so wire.SchemaDryRunCheck) {
		assert.Equal(t, len(st.Datastores[0].Partitions), all, "progress: partitions")
		assert.Len(t, so.Partitions, done, "progress: the sum so far covers the partitions done")
		calls = append(calls, done)
	})
	require.NoError(t, err, "dry run by partition")
	require.NotNil(t, sum.DryRun)
	assert.Equal(t, int64(1), sum.DryRun.Rejected, "by partition: the cell written before")
	assert.Equal(t, dry.DryRun.Rows, sum.DryRun.Rows, "by partition: the rows of the whole dry run")
	assert.Len(t, sum.DryRun.Partitions, len(st.Datastores[0].Partitions))
	assert.Equal(t, 1, sum.Version)
	assert.Equal(t, len(st.Datastores[0].Partitions)+1, len(calls), "progress before each partition and after the last")
	_, err = cl.WithDatastore("nope").DryRunSchemaByPartition(ctx, col, v1, nil)
	assert.ErrorIs(t, err, client.ErrNotFound, "a datastore the cluster does not have")
	_, err = cl.DryRunSchemaPartition(ctx, col, v1, 99)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "no partition 99")

	res, err := cl.PutSchema(ctx, col, v1, false)
	require.NoError(t, err, "register")
	// A registration that failed part-way (a partition's leader changed under a loaded machine)
	// is retried by the client and completed by the retry, which answers "exists".
	assert.Contains(t, []string{wire.SchemaCreated, wire.SchemaExists}, res.Status, "status")
	assert.Equal(t, wire.SchemaResult{Column: col, Version: 1, Status: res.Status}, res)
	res, err = cl.PutSchema(ctx, col, v1, false)
	require.NoError(t, err, "register again")
	assert.Equal(t, wire.SchemaExists, res.Status, "the same again")

	_, err = cl.PutCell(ctx, itRow(t, 2), col, 1, json.RawMessage(`{"fare":-2}`))
	require.Error(t, err, "a violating cell")
	assert.True(t, errors.Is(err, client.ErrSchemaViolation), "errors.Is(%v, ErrSchemaViolation)", err)
	assert.True(t, errors.Is(err, client.ErrInvalidArgument), "a schema violation is an invalid argument")
	require.ErrorAs(t, err, &ae)
	require.NotNil(t, ae.Violation, "the violation's details")
	assert.Equal(t, wire.SchemaViolation{Cell: 0, Column: col, Version: 1, Pointer: "/fare", Message: "minimum: got -2, want 0"}, *ae.Violation)

	_, err = cl.PutCells(ctx, []client.CellWrite{
		{Key: cells.Key{RowKey: itRow(t, 3), ColumnKey: col, RefKey: 1}, Body: json.RawMessage(`{"fare":3}`)},
		{Key: cells.Key{RowKey: itRow(t, 4), ColumnKey: col, RefKey: 1}, Body: json.RawMessage(`{"price":4}`)},
	})
	require.ErrorAs(t, err, &ae, "a batch with a violating cell")
	require.NotNil(t, ae.Violation)
	assert.Equal(t, 1, ae.Violation.Cell, "the second cell")
	assert.Equal(t, "/fare", ae.Violation.Pointer, "the missing field")
	assert.Equal(t, "cells[1].body/fare", ae.Field)
	_, err = cl.GetCellLatest(ctx, itRow(t, 3), col)
	assert.ErrorIs(t, err, client.ErrNotFound, "nothing of the batch was written")

	vs, err := cl.Schemas(ctx, col)
	require.NoError(t, err)
	require.Len(t, vs.Versions, 1)
	assert.JSONEq(t, string(v1), string(vs.Versions[0].Schema), "text")
	all, err := cl.Schemas(ctx, "", client.WithConsistency(client.ConsistencyStale))
	require.NoError(t, err)
	assert.Empty(t, all.Column)
	assert.NotEmpty(t, all.Versions, "every column's latest")
}
