package bench

import (
	"context"

	"github.com/schemaless-db/schemaless/client"
)

// nodeRSS returns the resident memory of the node at endpoint, in bytes: the gauge
// process_resident_memory_bytes of its /metrics (the Prometheus process collector's, which
// `schemaless serve` registers), read through cl (client.Metric's errors).
func nodeRSS(ctx context.Context, cl *client.Client, endpoint string) (int64, error) {
	v, err := cl.Metric(ctx, endpoint, "process_resident_memory_bytes")
	return int64(v), err
}
