package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Readiness of limitsBackend (GET /readyz): ready, with its one datastore.
func (b *limitsBackend) Topology() *topology.Topology {
	return &topology.Topology{Datastores: []topology.DatastoreSpec{{Name: "trips", Shards: 8}}}
}
func (b *limitsBackend) Ready() error                { return nil }
func (b *limitsBackend) DatastoreReady(string) error { return nil }

// holdPolls starts n long polls (wait 30s) with client against hs and waits until b has them
// all waiting. They end when b.hold is closed; the returned WaitGroup then completes.
func holdPolls(t *testing.T, client *http.Client, hs *httptest.Server, b *limitsBackend, n int) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := client.Get(hs.URL + "/v1/trips/shards/1/cells?wait=30s")
			if !assert.NoError(t, err, "held long poll") {
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			assert.Equal(t, http.StatusOK, res.StatusCode, "held long poll: status")
		}()
	}
	require.Eventually(t, func() bool { return b.polling.Load() == int64(n) }, 10*time.Second, 10*time.Millisecond,
		"%d long polls waiting in the backend", n)
	return &wg
}

// expectTooMany checks that GET path answers 429 too_many_requests with Retry-After and
// returns the error message.
func expectTooMany(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	res, err := client.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode, "status (body %s)", body)
	assert.Equal(t, "1", res.Header.Get("Retry-After"), "Retry-After, in seconds")
	var eb wire.ErrorBody
	require.NoError(t, json.Unmarshal(body, &eb), "an error envelope: %s", body)
	assert.Equal(t, wire.CodeTooManyRequests, eb.Error.Code, "code (%s)", body)
	return eb.Error.Message
}

// refused reads schemaless_http_requests_refused_total{reason} from reg.
func refused(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "schemaless_http_requests_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestInflightPerPrincipal: with MaxInflightPerPrincipal 2, a client holding two long polls
// is refused a third request (429, Retry-After) on another connection, the health probes are
// still answered, and once the polls end it is served again.
func TestInflightPerPrincipal(t *testing.T) {
	b := &limitsBackend{hold: make(chan struct{})}
	reg := prometheus.NewRegistry()
	hs := startServer(t, b, api.Config{MaxInflightPerPrincipal: 2, MaxInflightPerConn: -1, Registerer: reg})
	client := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	polls := holdPolls(t, client, hs, b, 2)

	msg := expectTooMany(t, client, hs.URL+"/v1/trips/shards/2/cells")
	assert.Contains(t, msg, "max-inflight-per-principal", "the message names the limit")
	assert.Equal(t, 1.0, refused(t, reg, "principal_limit"), "schemaless_http_requests_refused_total{reason=principal_limit}")
	for _, probe := range []string{"/healthz", "/readyz"} {
		res, err := client.Get(hs.URL + probe)
		require.NoError(t, err)
		_ = res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, "%s while the client is at its limit", probe)
	}

	close(b.hold)
	polls.Wait()
	require.Eventually(t, func() bool {
		res, err := client.Get(hs.URL + "/v1/trips/shards/2/cells")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond, "served again once the long polls ended")
}

// TestInflightPerConn: over HTTP/2, with MaxInflightPerConn 2 and api.ConnContext on the
// server, a third request on a connection holding two long polls is refused (429,
// Retry-After).
func TestInflightPerConn(t *testing.T) {
	b := &limitsBackend{hold: make(chan struct{})}
	reg := prometheus.NewRegistry()
	srv, err := api.NewServer(b.backends(), api.Config{MaxInflightPerConn: 2, MaxInflightPerPrincipal: -1, Registerer: reg})
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(srv)
	hs.EnableHTTP2 = true
	hs.Config.ConnContext = api.ConnContext
	hs.StartTLS()
	t.Cleanup(hs.Close)
	client := hs.Client()
	client.Timeout = 20 * time.Second

	res, err := client.Get(hs.URL + "/healthz")
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, 2, res.ProtoMajor, "the client speaks HTTP/2 (%s)", res.Proto)

	polls := holdPolls(t, client, hs, b, 2)
	msg := expectTooMany(t, client, hs.URL+"/v1/trips/shards/2/cells")
	assert.Contains(t, msg, "max-inflight-per-conn", "the message names the limit")
	assert.Equal(t, 1.0, refused(t, reg, "conn_limit"), "schemaless_http_requests_refused_total{reason=conn_limit}")
	close(b.hold)
	polls.Wait()
}
