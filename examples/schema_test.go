package examples

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/schemas"
)

// The trips' BASE schema accepts the BASE body of every flight of the sample the dev cluster
// imports, and rejects a body missing an airport, with a negative distance or a bad code.
func TestTripsBaseSchema(t *testing.T) {
	s, err := schemas.Compile(TripsBaseSchema)
	require.NoError(t, err, "compile examples/schemas/trips_base.json")
	r, airports, closeFile, err := OpenFlights("../testdata/flights-100k.csv.gz", "../testdata/airports.csv")
	require.NoError(t, err, "open the sample")
	defer closeFile()
	n := 0
	for ; n < 20000; n++ {
		f, err := r.Next()
		if err != nil {
			break
		}
		body, err := f.BaseJSON(airports)
		require.NoError(t, err, "BaseJSON of line %d", f.Line)
		v, err := s.ValidateJSON(body)
		require.NoError(t, err)
		require.Nil(t, v, "line %d: %s rejected", f.Line, body)
	}
	require.Equal(t, 20000, n, "flights checked")

	for _, tc := range []struct{ body, pointer string }{
		{`{"date":"2001-01-01T00:01:00","destination":"PHL","distance":2176,"delay":33}`, "/origin"},
		{`{"date":"2001-01-01T00:01:00","origin":"LAS","destination":"PHL","distance":-1,"delay":33}`, "/distance"},
		{`{"date":"2001-01-01T00:01:00","origin":"las","destination":"PHL","distance":1,"delay":33}`, "/origin"},
		{`{"date":"yesterday","origin":"LAS","destination":"PHL","distance":1,"delay":33}`, "/date"},
		{`{"date":"2001-01-01T00:01:00","origin":"LAS","destination":"PHL","distance":1.5,"delay":33}`, "/distance"},
	} {
		v, err := s.ValidateJSON([]byte(tc.body))
		require.NoError(t, err)
		if assert.NotNil(t, v, "%s: want a violation", tc.body) {
			assert.Equal(t, tc.pointer, v.Pointer, "%s: %s", tc.body, v.Message)
		}
	}
}
