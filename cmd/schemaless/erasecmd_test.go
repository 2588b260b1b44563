package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// TestEraseCommand runs `schemaless erase ROW_KEY` against a cluster: it prints the count of
// cells erased, then 0 the second time, and refuses a row key that is not a UUID.
func TestEraseCommand(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	cfg := client.DefaultConfig()
	cfg.Endpoints = c.URLs()
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err, "client.New")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	row := uuid.NewSHA1(uuid.NameSpaceURL, []byte("erasecmd"))
	_, err = cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(`{"x":1}`))
	require.NoError(t, err, "PutCell")

	endpoints := "--endpoints=" + strings.Join(c.URLs(), ",")
	erase := func() wire.EraseResult {
		t.Helper()
		out, stderr, err := runCmd(ctx, "erase", row.String(), endpoints)
		require.NoError(t, err, "erase: stderr %s", stderr)
		var res wire.EraseResult
		require.NoError(t, json.Unmarshal([]byte(out), &res), "erase: output %s", out)
		return res
	}
	first := erase()
	assert.Equal(t, row.String(), first.RowKey, "erase: row key (%+v)", first)
	assert.Equal(t, 1, first.Erased, "erase: cells erased (%+v)", first)
	assert.Positive(t, first.AddedID, "erase: the tombstone's added_id (%+v)", first)
	assert.Equal(t, wire.EraseResult{RowKey: row.String()}, erase(), "erase again")
	_, err = cl.GetCellLatest(ctx, row, "BASE")
	assert.ErrorIs(t, err, client.ErrNotFound, "the erased cell")
	_, _, err = runCmd(ctx, "erase", "not-a-uuid", endpoints)
	assert.ErrorContains(t, err, "row_key", "erase of a bad row key")
}
