package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOperationName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ method, pattern, want string }{
		{http.MethodPut, "/v1/{ds}/cells/{row}/{col}/{ref}", "put_cell"},
		{http.MethodGet, "/v1/{ds}/cells/{row}/{col}/{ref}", "get_cell"},
		{http.MethodPost, "/v1/{ds}/cells", "put_cells"},
		{http.MethodPost, "/v1/{ds}/shards/cells", "shards_cells"},
		{http.MethodPost, "/v1/{ds}/indexes/{index}/query", "index_query"},
		{http.MethodGet, "/v1/cluster", "cluster"},
		{http.MethodPost, "/v1/admin/partitions/{ds}/{p}/transfer", "admin"},
		{http.MethodPost, "/v1/admin/partitions/{ds}/merge", "admin"},
		{http.MethodGet, "/v1/{ds}/backup", "backup"},
		{http.MethodGet, "/console/data", "console"},
		{http.MethodPost, "/v1/{ds}/widgets/{w}/Spin", "post_v1_widgets_spin"},
	} {
		assert.Equal(t, c.want, operationName(c.method, c.pattern), "operationName(%s, %s)", c.method, c.pattern)
	}
}

// nodeIDBackend answers ID only (healthz); every other NodeBackend method panics.
type nodeIDBackend struct{ NodeBackend }

func (nodeIDBackend) ID() string { return "n1" }

// TestRequestMetrics checks the request series a Server records in its Registerer: the
// operation and code of served requests, HEAD counted as GET's operation, a method the route
// does not serve as method_not_allowed, and nothing in flight after. Parallel: the registry is
// the test's own.
func TestRequestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s, err := NewServer(Backends{Node: nodeIDBackend{}}, Config{Registerer: reg})
	require.NoError(t, err)
	// A second server on the same registry shares the series.
	_, err = NewServer(Backends{Node: nodeIDBackend{}}, Config{Registerer: reg})
	require.NoError(t, err, "second server on the same registry")
	for _, m := range []string{http.MethodGet, http.MethodGet, http.MethodHead, http.MethodPut} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(m, "/healthz", nil))
	}
	count := func(op, code string) int {
		t.Helper()
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() != "schemaless_http_request_duration_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["operation"] == op && l["code"] == code {
					return int(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return 0
	}
	assert.Equal(t, 3, count("healthz", "200"), "healthz 200: requests (two GET, one HEAD)")
	assert.Equal(t, 1, count(opMethodNotAllowed, "405"), "method_not_allowed 405: requests")
	var m dto.Metric
	require.NoError(t, s.metrics.inFlight.Write(&m))
	assert.Zero(t, m.GetGauge().GetValue(), "in flight after the requests")
}
