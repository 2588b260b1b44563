package node_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/node"
	"github.com/schemaless-db/schemaless/security"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for the audit log's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSecureNode runs the probes of an attacker on the network against a node with TLS, a
// principals file and an admin listener: every route but the health probes needs a token
// whose principal holds the route's role, pprof needs admin, /metrics the metrics role, and
// plaintext is refused. Without Auth and TLS (the same probes against an insecure node) the
// probes succeed, which TestSecureNodeProbesOpenWithoutSecurity shows.
func TestSecureNode(t *testing.T) {
	b, err := security.EnsureDevBundle(t.TempDir(), map[string][]string{"n1": {"127.0.0.1"}})
	require.NoError(t, err)
	certs, err := security.LoadCerts(b.Node("n1"), nil)
	require.NoError(t, err)
	auth, err := security.LoadAuthenticator(b.Principals, nil)
	require.NoError(t, err)
	audit := &lockedBuffer{}
	n, _ := startSingle(t, func(c *node.Config) {
		c.TLS, c.Auth = certs, auth
		c.Audit = security.NewAuditor(slog.New(slog.NewJSONHandler(audit, nil)))
		c.Registry = prometheus.NewRegistry()
		c.AdminAddr = "127.0.0.1:0"
	})
	tc, err := security.ClientTLS(b.CA, "", "")
	require.NoError(t, err)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
	api, admin := "https://"+n.Addr(), "https://"+n.AdminAddr()
	call := func(who, method, url, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		if who != "" {
			req.Header.Set("Authorization", "Bearer "+b.Tokens[who])
		}
		resp, err := hc.Do(req)
		require.NoError(t, err, "%s %s", method, url)
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	cell := api + "/v1/users/cells/6ba7b810-9dad-11d1-80b4-00c04fd430c8/BASE"
	for _, tc := range []struct {
		who, method, url, body string
		want                   int
	}{
		{"", http.MethodGet, api + "/healthz", "", 200},
		{"", http.MethodGet, api + "/readyz", "", 200},
		{"", http.MethodPut, cell + "/1", `{"a":1}`, 401},
		{"", http.MethodGet, cell, "", 401},
		{"", http.MethodGet, api + "/v1/users/shards/0/cells", "", 401},
		{"", http.MethodGet, api + "/v1/cluster", "", 401},
		{"", http.MethodGet, api + "/metrics", "", 401},
		{"", http.MethodGet, api + "/console", "", 200}, // static; what it reads needs admin
		{"", http.MethodGet, api + "/v1/admin/partitions", "", 401},
		{"", http.MethodPost, api + "/v1/admin/partitions/users/0/leader", `{}`, 401},
		{"", http.MethodDelete, api + "/v1/admin/partitions/users/0/voters/n1", "", 401},
		{"", http.MethodGet, api + "/v1/admin/backup/users/0", "", 401},
		{"", http.MethodPost, api + "/v1/admin/restore/users/0?force=true", "x", 401},
		{"", http.MethodGet, api + "/no/such/route", "", 401},
		{"reader", http.MethodPut, cell + "/1", `{"a":1}`, 403},
		{"reader", http.MethodGet, api + "/v1/admin/partitions", "", 403},
		{"app", http.MethodGet, api + "/v1/admin/partitions", "", 403},
		{"app", http.MethodPost, api + "/v1/users/indexes", `{}`, 403},
		{"app", http.MethodPut, api + "/v1/users/schemas/BASE", `{}`, 403},
		{"app", http.MethodGet, api + "/metrics", "", 403},
		{"prometheus", http.MethodGet, cell, "", 403},
		{"app", http.MethodPut, cell + "/1", `{"a":1}`, 201},
		{"app", http.MethodPost, api + "/v1/users/cells", `{"origin":"west","cells":[{"row_key":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","column_key":"A","ref_key":1,"body":{}}]}`, 403},
		{"app", http.MethodGet, api + "/v1/admin/replication", "", 403},
		{"app", http.MethodPut, api + "/v1/users/schemas/BASE?origin=west", `{"type":"object"}`, 403},
		{"admin", http.MethodPut, api + "/v1/users/schemas/BASE?origin=west", `{"type":"object"}`, 201},
		{"admin", http.MethodPut, api + "/v1/users/schemas/BASE?origin=West!", `{"type":"object"}`, 400},
		{"admin", http.MethodPut, api + "/v1/users/schemas/BASE?origin=west&dry_run=true", `{"type":"object"}`, 400},
		{"admin", http.MethodPost, api + "/v1/users/cells", `{"origin":"west","cells":[{"row_key":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","column_key":"A","ref_key":1,"body":{}}]}`, 200},
		{"reader", http.MethodGet, cell, "", 200},
		{"prometheus", http.MethodGet, api + "/metrics", "", 200},
		{"admin", http.MethodGet, api + "/v1/admin/partitions", "", 200},
		{"", http.MethodGet, admin + "/debug/pprof/cmdline", "", 401},
		{"", http.MethodGet, admin + "/debug/pprof/goroutine?debug=2", "", 401},
		{"prometheus", http.MethodGet, admin + "/debug/pprof/cmdline", "", 403},
		{"", http.MethodGet, admin + "/metrics", "", 401},
		{"prometheus", http.MethodGet, admin + "/metrics", "", 200},
		{"admin", http.MethodGet, admin + "/debug/pprof/cmdline", "", 200},
	} {
		code, body := call(tc.who, tc.method, tc.url, tc.body)
		assert.Equal(t, tc.want, code, "%s %s as %q: %s", tc.method, tc.url, tc.who, body)
		if tc.want == 401 || tc.want == 403 {
			assert.Contains(t, body, `"error":{"code":"`, "%s %s: the error envelope", tc.method, tc.url)
		}
	}
	// Plaintext to the API's port is not served.
	resp, err := http.Get("http://" + n.Addr() + "/v1/users/cells/6ba7b810-9dad-11d1-80b4-00c04fd430c8/BASE")
	if err == nil {
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plaintext to the TLS port")
		resp.Body.Close()
	}
	// The audit log names the principal of each refusal and admin operation.
	log := audit.String()
	assert.Contains(t, log, `"event":"refused","principal":"-","method":"POST","path":"/v1/admin/restore/users/0","remote":"127.0.0.1","status":401`)
	assert.Contains(t, log, `"event":"refused","principal":"app","method":"GET","path":"/v1/admin/partitions"`)
	assert.Contains(t, log, `"event":"admin","principal":"admin","method":"GET","path":"/v1/admin/partitions"`)
	assert.Contains(t, log, `"event":"admin","principal":"admin","method":"GET","path":"/debug/pprof/cmdline"`)
	assert.NotContains(t, log, b.Tokens["app"], "a token in the audit log")
}

// TestSecureNodeProbesOpenWithoutSecurity is the same attacker against a node without TLS
// and principals: the probes TestSecureNode refuses succeed here, so its refusals come from
// the security configuration.
func TestSecureNodeProbesOpenWithoutSecurity(t *testing.T) {
	n, _ := startSingle(t, func(c *node.Config) {
		c.Registry = prometheus.NewRegistry()
		c.AdminAddr = "127.0.0.1:0"
	})
	code, body := do(t, http.MethodGet, "http://"+n.AdminAddr()+"/debug/pprof/cmdline", "")
	assert.Equal(t, 200, code, body)
	code, body = do(t, http.MethodGet, "http://"+n.Addr()+"/v1/admin/partitions", "")
	assert.Equal(t, 200, code, body)
	code, body = do(t, http.MethodPut, "http://"+n.Addr()+"/v1/users/cells/6ba7b810-9dad-11d1-80b4-00c04fd430c8/BASE/1", `{"a":1}`)
	assert.Equal(t, 201, code, body)
}
