package examples

import (
	"context"
	_ "embed"
	"fmt"
	"io"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/schemaless-db/schemaless/workload"
)

// TripsBaseSchema is the JSON Schema of the trips' BASE cells (examples/schemas/trips_base.json):
// the body workload.Flight.BaseJSON writes, with its date, airport codes, distance and delay
// required, the distance a non-negative integer and the airports codes of 3 or 4 of A-Z, 0-9.
//
//go:embed schemas/trips_base.json
var TripsBaseSchema []byte

// RegisterSchema registers TripsBaseSchema as the schema of the BASE column through cl (a
// client of trips) and prints the version to out. Registering it again changes nothing.
func RegisterSchema(ctx context.Context, cl *client.Client, out io.Writer) error {
	res, err := cl.PutSchema(ctx, workload.ColumnBase, TripsBaseSchema, false)
	if err != nil {
		return fmt.Errorf("register the BASE schema: %w", err)
	}
	what := "registered"
	if res.Status == wire.SchemaExists {
		what = "already registered"
	}
	fmt.Fprintf(out, "schema of %s version %d %s (examples/schemas/trips_base.json): writes of BASE cells are validated\n", res.Column, res.Version, what)
	return nil
}
