package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// scrapeRSS reads process_resident_memory_bytes (the Prometheus process collector's gauge, in
// bytes) from endpoint's /metrics, through hc. It is the package's only HTTP request that is not
// a client.Client call: /metrics is Prometheus text, outside the API. It fails on a failed
// request, a status other than 200, or a body without the gauge.
func scrapeRSS(ctx context.Context, hc *http.Client, endpoint string) (int64, error) {
	url := strings.TrimSuffix(endpoint, "/") + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_resident_memory_bytes "); ok {
			fs := strings.Fields(v) // value [timestamp]
			if len(fs) == 0 {
				break
			}
			x, err := strconv.ParseFloat(fs[0], 64)
			if err != nil {
				return 0, fmt.Errorf("GET %s: process_resident_memory_bytes %q: %w", url, fs[0], err)
			}
			return int64(x), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return 0, fmt.Errorf("GET %s: no process_resident_memory_bytes", url)
}
