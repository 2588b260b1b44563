package cells_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/workload"
)

// tripEvery is the step between the flights of the sample checked by TestDirectTrips.
const tripEvery = 20

// TestDirectTrips: real trip bodies, as the importer sends them (workload.Flight.BaseJSON of the
// repository's flights sample, every tripEvery-th flight), give the same packed bytes and JSON
// on the direct transcoders as on the decoding paths.
func TestDirectTrips(t *testing.T) {
	t.Parallel()
	af, err := os.Open(filepath.Join("..", "testdata", "airports.csv"))
	require.NoError(t, err)
	defer af.Close()
	airports, err := workload.LoadAirports(af)
	require.NoError(t, err)
	ff, err := os.Open(filepath.Join("..", "testdata", "flights-100k.csv.gz"))
	require.NoError(t, err)
	defer ff.Close()
	r, err := workload.NewReader(ff)
	require.NoError(t, err)
	checked := 0
	for i := 0; ; i++ {
		fl, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if i%tripEvery != 0 {
			continue
		}
		text, err := fl.BaseJSON(airports)
		require.NoError(t, err, "line %d", fl.Line)
		if !assert.NoError(t, cells.CheckDirect(text), "line %d", fl.Line) {
			continue
		}
		checked++
	}
	assert.Equal(t, 100000/tripEvery, checked, "trips checked")
}
