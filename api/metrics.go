package api

import (
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/schemaless-db/schemaless/security"
)

// operations names the API's routes in metrics, by method and pattern (as given to route).
// Routes missing here are named by operationName's rules.
var operations = map[string]string{
	"PUT /v1/{ds}/cells/{row}/{col}/{ref}":               "put_cell",
	"GET /v1/{ds}/cells/{row}/{col}/{ref}":               "get_cell",
	"GET /v1/{ds}/cells/{row}/{col}":                     "get_cell_latest",
	"GET /v1/{ds}/cells/{row}/{col}/versions":            "get_versions",
	"GET /v1/{ds}/cells/{row}":                           "get_row",
	"DELETE /v1/{ds}/cells/{row}":                        "erase_row",
	"POST /v1/{ds}/cells/get":                            "get_cells",
	"POST /v1/{ds}/cells":                                "put_cells",
	"GET /v1/{ds}/shards/{shard}/cells":                  "shard_cells",
	"POST /v1/{ds}/shards/cells":                         "shards_cells",
	"GET /v1/{ds}/groups":                                "groups",
	"GET /v1/{ds}/groups/{group}":                        "group_status",
	"POST /v1/{ds}/groups/{group}/{op}":                  "group_command",
	"POST /v1/{ds}/indexes":                              "index_define",
	"GET /v1/{ds}/indexes":                               "index_list",
	"GET /v1/{ds}/indexes/{index}":                       "index_get",
	"POST /v1/{ds}/indexes/{index}/alias":                "index_alias",
	"DELETE /v1/{ds}/indexes/{index}/versions/{version}": "index_drop",
	"POST /v1/{ds}/indexes/{index}/query":                "index_query",
	"GET /healthz":                                       "healthz",
	"GET /readyz":                                        "readyz",
	"GET /v1/cluster":                                    "cluster",
}

// opMethodNotAllowed names requests whose method the route does not serve (status 405).
const opMethodNotAllowed = "method_not_allowed"

// operationName returns the metrics name of method on pattern: its entry in operations; else
// "admin", "backup" or "console" for a path under /v1/admin, /v1/backup (or .../backup) or
// /console; else the method and the path's literal segments, lower case, joined by "_"
// ("post_v1_widgets" for POST /v1/{ds}/widgets). Names depend only on the route, so they are
// few and stable.
func operationName(method, pattern string) string {
	if op, ok := operations[method+" "+pattern]; ok {
		return op
	}
	var segs []string
	for _, s := range strings.Split(pattern, "/") {
		if s == "" || strings.HasPrefix(s, "{") {
			continue
		}
		segs = append(segs, strings.ToLower(s))
	}
	for _, s := range segs {
		switch s {
		case "admin", "backup", "console":
			return s
		}
	}
	return strings.ToLower(method) + "_" + strings.Join(segs, "_")
}

// httpMetrics are the API's request series (Config.Registerer).
type httpMetrics struct {
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	refused  *prometheus.CounterVec
}

// newHTTPMetrics registers the API's series with reg: nil registers none and returns nil (no
// instrumentation). Series already registered by another Server on reg are shared.
func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "schemaless_http_request_duration_seconds",
			Help:    "Time to handle one API request, from routing to the handler's return, in seconds, by operation (route name) and HTTP status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5ms .. 16s
		}, []string{"operation", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "schemaless_http_requests_in_flight",
			Help: "API requests being handled (long polls included).",
		}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schemaless_http_requests_refused_total",
		Help: "API requests refused by a server limit, by reason: conn_limit and principal_limit (429, requests in flight), body_read_timeout (408).",
	}, []string{"reason"})
	if err := reg.Register(m.refused); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		m.refused = are.ExistingCollector.(*prometheus.CounterVec)
	}
	if err := reg.Register(m.duration); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		m.duration = are.ExistingCollector.(*prometheus.HistogramVec)
	}
	if err := reg.Register(m.inFlight); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		m.inFlight = are.ExistingCollector.(prometheus.Gauge)
	}
	return m, nil
}

// instrument wraps the handler of a route: it counts the request in flight and observes its
// duration under the operation named by ops (by method; opMethodNotAllowed when missing) and
// the status the handler wrote. A nil m returns h.
func (m *httpMetrics) instrument(ops map[string]string, h http.HandlerFunc) http.HandlerFunc {
	if m == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		op, ok := ops[r.Method]
		if !ok {
			op = opMethodNotAllowed
		}
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		rec := &security.StatusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			code := rec.Status()
			if bodyTimedOut(r) { // answered 408 in place of what the handler wrote (bodytimeout.go)
				code = http.StatusRequestTimeout
			}
			m.duration.WithLabelValues(op, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
		}()
		h(rec, r)
	}
}

// refuse counts a request refused for reason (refused* in limits.go). A nil m counts nothing.
func (m *httpMetrics) refuse(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// routeOperations names each method of hs on pattern (operationName); HEAD, served by GET,
// takes GET's name.
func routeOperations(pattern string, hs handlers) map[string]string {
	methods := make([]string, 0, len(hs))
	for m := range hs {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	ops := make(map[string]string, len(methods)+1)
	for _, m := range methods {
		ops[m] = operationName(m, pattern)
	}
	if _, ok := ops[http.MethodHead]; !ok {
		if op, ok := ops[http.MethodGet]; ok {
			ops[http.MethodHead] = op
		}
	}
	return ops
}
