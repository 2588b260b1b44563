package examples_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

const (
	sampleFlights  = "../testdata/flights-100k.csv.gz"
	sampleAirports = "../testdata/airports.csv"
)

func TestCountFlights(t *testing.T) {
	t.Parallel()
	n, err := examples.CountFlights(sampleFlights)
	require.NoError(t, err)
	assert.Equal(t, 100000, n, "flights of the gzip-compressed sample")
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		text string
		want int
	}{
		"empty":             {"", 0},
		"header only":       {"date,delay,distance,origin,destination\n", 0},
		"two flights":       {"h\na\nb\n", 2},
		"no final newline":  {"h\na\nb", 2},
		"header no newline": {"h", 0},
	} {
		path := filepath.Join(dir, name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o644))
		got, err := examples.CountFlights(path)
		if assert.NoError(t, err, name) {
			assert.Equal(t, tc.want, got, "%s: %q", name, tc.text)
		}
	}
	_, err = examples.CountFlights(filepath.Join(dir, "missing.csv"))
	assert.Error(t, err, "a missing file")
}

// Flights imported into a real cluster read back, strong and stale, with every body as
// written; flights not imported are reported missing.
func TestReadBack(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.Datastore = c.URLs(), "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	_, err = examples.VerifyFlights(ctx, cl, sampleFlights, sampleAirports, 300, client.ConsistencyStrong)
	assert.ErrorContains(t, err, "read back: 200 of 200 cells missing", "before the import")

	st, err := examples.ImportFlights(ctx, cl, sampleFlights, sampleAirports, examples.ImportOptions{Batch: 100, Concurrency: 4, Limit: 300})
	require.NoError(t, err, "import")
	var out bytes.Buffer
	st.Print(&out, "p: ")
	assert.Contains(t, out.String(), "p: imported 300 flights in ", "the import's figures")
	assert.Contains(t, out.String(), "(300 created, 0 exists, 0 conflicts)")

	n, err := examples.VerifyFlights(ctx, cl, sampleFlights, sampleAirports, 300, client.ConsistencyStrong)
	require.NoError(t, err)
	assert.Equal(t, 300, n, "cells read back and checked")

	out.Reset()
	require.NoError(t, examples.ReadBack(ctx, cl, sampleFlights, sampleAirports, 300, 10*time.Second, &out, "p: "))
	assert.Contains(t, out.String(), "p: read back 300 cells (strong) in ")
	assert.Contains(t, out.String(), "p: read back 300 cells (stale) in ")
	assert.Contains(t, out.String(), "every body as written")

	out.Reset()
	err = examples.ReadBack(ctx, cl, sampleFlights, sampleAirports, 400, 0, &out, "p: ")
	assert.ErrorContains(t, err, "read back: 100 of 200 cells missing", "flights 301 to 400 were not imported")
	assert.ErrorContains(t, err, "p: verify: ", "the strong read-back fails the call")
}
