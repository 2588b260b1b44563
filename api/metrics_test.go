package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestOperationName(t *testing.T) {
	for _, c := range []struct{ method, pattern, want string }{
		{http.MethodPut, "/v1/{ds}/cells/{row}/{col}/{ref}", "put_cell"},
		{http.MethodGet, "/v1/{ds}/cells/{row}/{col}/{ref}", "get_cell"},
		{http.MethodPost, "/v1/{ds}/cells", "put_cells"},
		{http.MethodPost, "/v1/{ds}/shards/cells", "shards_cells"},
		{http.MethodPost, "/v1/{ds}/indexes/{index}/query", "index_query"},
		{http.MethodGet, "/v1/cluster", "cluster"},
		{http.MethodPost, "/v1/admin/partitions/{ds}/{p}/transfer", "admin"},
		{http.MethodGet, "/v1/{ds}/backup", "backup"},
		{http.MethodGet, "/console/data", "console"},
		{http.MethodPost, "/v1/{ds}/widgets/{w}/Spin", "post_v1_widgets_spin"},
	} {
		if got := operationName(c.method, c.pattern); got != c.want {
			t.Errorf("operationName(%s, %s): got %q, want %q", c.method, c.pattern, got, c.want)
		}
	}
}

// nodeIDBackend answers ID only (healthz); every other Backend method panics.
type nodeIDBackend struct{ Backend }

func (nodeIDBackend) ID() string { return "n1" }

// TestRequestMetrics checks the request series a Server records in its Registerer: the
// operation and code of served requests, HEAD counted as GET's operation, a method the route
// does not serve as method_not_allowed, and nothing in flight after.
func TestRequestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := NewServer(nodeIDBackend{}, Config{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	// A second server on the same registry shares the series.
	if _, err := NewServer(nodeIDBackend{}, Config{Registerer: reg}); err != nil {
		t.Fatalf("second server on the same registry: %v", err)
	}
	for _, m := range []string{http.MethodGet, http.MethodGet, http.MethodHead, http.MethodPut} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(m, "/healthz", nil))
	}
	count := func(op, code string) int {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
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
	if got := count("healthz", "200"); got != 3 {
		t.Errorf("healthz 200: got %d requests, want 3 (two GET, one HEAD)", got)
	}
	if got := count(opMethodNotAllowed, "405"); got != 1 {
		t.Errorf("method_not_allowed 405: got %d requests, want 1", got)
	}
	var m dto.Metric
	if err := s.metrics.inFlight.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetGauge().GetValue(); got != 0 {
		t.Errorf("in flight after the requests: got %v, want 0", got)
	}
}
