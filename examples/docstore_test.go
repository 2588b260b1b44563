package examples_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// The Docstore flow of make run against a real cluster: both checks pass, twice on one trip
// (the second run continues from the versions the first wrote).
func TestDocstoreFlow(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cfg := client.DefaultConfig()
	cfg.Endpoints = c.URLs()
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	trip := uuid.New()
	for run := 0; run < 2; run++ {
		var out bytes.Buffer
		require.NoError(t, examples.Book(ctx, cl, trip, &out), "run %d: booking", run)
		require.NoError(t, examples.RaceStatus(ctx, cl, trip, &out), "run %d: status race", run)
		t.Log(out.String())
		assert.Contains(t, out.String(), "no gap: ok")
		assert.Contains(t, out.String(), "one snapshot")
	}
}
