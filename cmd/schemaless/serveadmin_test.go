package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape fetches url and parses its Prometheus text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, url)
	require.Equal(t, http.StatusOK, code, "GET %s:\n%s", url, body)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err, "GET %s: parse", url)
	return fams
}

// TestServeMetricsAndAdmin runs `serve` of a 1-node cluster with --admin-addr (and --store
// sqlite, whose connection pools give the schemaless_sql_pool_* series) and checks what
// serve wires around the node (package node tests the node's metrics families and admin
// listener in depth): it becomes ready, takes writes, exposes the node's series and the
// process's (Go runtime, process, hashicorp/raft's go-metrics) on both listeners, serves
// net/http/pprof on the admin listener only, and stops cleanly on cancel, admin listener
// included.
func TestServeMetricsAndAdmin(t *testing.T) {
	base := freePortRange(t, 3)
	raftAddr := "127.0.0.1:" + strconv.Itoa(base)
	httpAddr := "127.0.0.1:" + strconv.Itoa(base+1)
	adminAddr := "127.0.0.1:" + strconv.Itoa(base+2)
	dir := t.TempDir()
	topo := filepath.Join(dir, "topology.yaml")
	require.NoError(t, os.WriteFile(topo, []byte(fmt.Sprintf(`nodes:
  - {id: n1, raft_addr: %q, http_addr: %q}
datastores:
  - name: users
    shards: 4
    partition_count: 2
`, raftAddr, httpAddr)), 0o644))
	api := "http://" + httpAddr
	admin := "http://" + adminAddr
	stop := startServe(t, api, "serve", "--config", topo, "--node-id", "n1", "--data-dir", filepath.Join(dir, "data"),
		"--admin-addr", adminAddr, "--store", "sqlite", "--log-level", "warn", "--heartbeat-timeout", "200ms", "--election-timeout", "200ms",
		"--leader-lease-timeout", "100ms")

	row := uuid.NewSHA1(uuid.NameSpaceURL, []byte("serveadmin")).String()
	req, err := http.NewRequest(http.MethodPut, api+"/v1/users/cells/"+row+"/BASE/1", strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "put_cell")
	resp.Body.Close()
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, resp.StatusCode, "put_cell status")

	for _, url := range []string{api + "/metrics", admin + "/metrics"} {
		fams := scrape(t, url)
		for _, name := range []string{"schemaless_http_request_duration_seconds", "schemaless_fsm_apply_seconds", "schemaless_raft_commit_seconds",
			"schemaless_sql_pool_open", "schemaless_raft_commitTime", "go_goroutines", "process_open_fds"} {
			assert.Contains(t, fams, name, "GET %s: metric family", url)
		}
	}
	code, body := httpGet(t, admin+"/debug/pprof/")
	assert.Equal(t, http.StatusOK, code, "GET admin /debug/pprof/")
	assert.Contains(t, body, "heap", "GET admin /debug/pprof/ lists heap")
	code, _ = httpGet(t, api+"/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "GET API /debug/pprof/: pprof only on --admin-addr")

	stop()
	if resp, err := http.Get(admin + "/metrics"); err == nil {
		resp.Body.Close()
		assert.Fail(t, "admin listener still answers after serve returned")
	}
}
