package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Metric reads one sample of the Prometheus metrics of the node at endpoint (a base URL, one of
// Config.Endpoints or not): GET /metrics, which `schemaless serve` serves on its API address, in
// the text exposition format. name is a series without labels, such as
// "process_resident_memory_bytes"; Metric returns the value of its first sample. It makes
// exactly one attempt, bounded by RequestTimeout and ctx, and does not touch the cool-downs,
// like Ready. Errors: ErrNotFound (no such series, or a node that serves no /metrics),
// ErrBadResponse (a value that is not a number), an *APIError for another status, an error
// wrapping ErrUnavailable when the node cannot be reached, ErrInvalidConfig for a malformed
// endpoint, or ctx's error.
func (c *Client) Metric(ctx context.Context, endpoint, name string) (float64, error) {
	const op = "metrics"
	base, err := normalizeEndpoint(endpoint)
	if err != nil {
		return 0, fmt.Errorf("client: %s: %w: %w", op, ErrInvalidConfig, err)
	}
	res := c.attempt(ctx, base, &request{op: op, method: http.MethodGet, path: "/metrics", ok: []int{http.StatusOK},
		accept: "text/plain; version=0.0.4"})
	if res.err != nil {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("client: %s: %w", op, err)
		}
		return 0, fmt.Errorf("client: %s: %w", op, res.err)
	}
	sc := bufio.NewScanner(bytes.NewReader(res.ans.body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		fs := strings.Fields(v) // value [timestamp]
		if len(fs) == 0 {
			break
		}
		x, err := strconv.ParseFloat(fs[0], 64)
		if err != nil {
			return 0, badResponse(op, res.ans, "%s %q: %v", name, fs[0], err)
		}
		return x, nil
	}
	if err := sc.Err(); err != nil {
		return 0, badResponse(op, res.ans, "%v", err)
	}
	return 0, fmt.Errorf("client: %s: %w: %s serves no sample of %s", op, ErrNotFound, base, name)
}
