package node_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	gometrics "github.com/armon/go-metrics"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/schemaless-db/schemaless/node"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsAndAdmin runs a 1-node cluster with a registry (and the process's series) and an
// admin listener, writes and reads cells, creates a consumer group, and checks every metric
// family the node exposes (on both listeners) and net/http/pprof on the admin listener only;
// after Shutdown neither listener answers and Failed is closed.
func TestMetricsAndAdmin(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, node.RegisterProcessMetrics(reg))
	n, _ := startSingle(t, func(c *node.Config) {
		c.Registry = reg
		c.AdminAddr = "127.0.0.1:0"
	})
	api := "http://" + n.Addr()
	admin := "http://" + n.AdminAddr()
	require.NotEqual(t, "http://", admin, "the admin listener's address")
	code, body := do(t, http.MethodGet, api+"/readyz", "")
	require.Equal(t, http.StatusOK, code, "GET /readyz: %s", body)

	// The FSM's series are the process's (package-level): earlier runs in this process count too.
	fsmCellsBefore := 0.0
	if before := scrape(t, admin+"/metrics"); before["schemaless_fsm_apply_batch_cells"] != nil {
		fsmCellsBefore = sampleSum(series(t, before, "schemaless_fsm_apply_batch_cells", map[string]string{"datastore": "users"}))
	}

	// 20 cells (201), one retry (200), a read (200) and a missing cell (404); a consumer group
	// that never commits, so that it lags by every cell.
	const cells = 20
	var first string
	for i := range cells {
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("serveadmin", i))).String()
		if i == 0 {
			first = row
		}
		code, body = do(t, http.MethodPut, api+"/v1/users/cells/"+row+"/BASE/1", fmt.Sprintf(`{"n":%d}`, i))
		require.Equal(t, http.StatusCreated, code, "put_cell %d: %s", i, body)
	}
	code, body = do(t, http.MethodPut, api+"/v1/users/cells/"+first+"/BASE/1", `{"n":0}`)
	require.Equal(t, http.StatusOK, code, "put_cell retry: %s", body)
	code, body = do(t, http.MethodGet, api+"/v1/users/cells/"+first+"/BASE/1", "")
	require.Equal(t, http.StatusOK, code, "get_cell: %s", body)
	code, body = do(t, http.MethodGet, api+"/v1/users/cells/"+first+"/BASE/2", "")
	require.Equal(t, http.StatusNotFound, code, "get_cell of a missing cell: %s", body)
	code, body = do(t, http.MethodPost, api+"/v1/users/groups/billing/heartbeat", `{"worker":"w1","session_timeout":"10m"}`)
	require.Equal(t, http.StatusOK, code, "group heartbeat: %s", body)

	// Group lag is measured at most every 5 s: the scrape before the writes may have measured
	// before the group existed.
	var fams map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		fams = scrape(t, admin+"/metrics")
		f := fams["schemaless_consumer_group_lag_cells"]
		return f != nil && len(series(t, fams, f.GetName(), map[string]string{"group": "billing"})) > 0
	}, 15*time.Second, 250*time.Millisecond, "schemaless_consumer_group_lag_cells{group=billing} after the group was created")
	apiFams := scrape(t, api+"/metrics")
	for name := range fams {
		if strings.HasPrefix(name, "schemaless_") {
			assert.Contains(t, apiFams, name, "family on the admin listener but not on the API's /metrics")
		}
	}

	ds := map[string]string{"datastore": "users"}
	checks := []struct {
		name string
		want map[string]string
		min  float64 // the values' (counts') sum must be at least min
	}{
		{"schemaless_http_request_duration_seconds", map[string]string{"operation": "put_cell", "code": "201"}, cells},
		{"schemaless_http_request_duration_seconds", map[string]string{"operation": "put_cell", "code": "200"}, 1},
		{"schemaless_http_request_duration_seconds", map[string]string{"operation": "get_cell", "code": "200"}, 1},
		{"schemaless_http_request_duration_seconds", map[string]string{"operation": "get_cell", "code": "404"}, 1},
		{"schemaless_http_request_duration_seconds", map[string]string{"operation": "group_command", "code": "200"}, 1},
		{"schemaless_http_request_duration_seconds", map[string]string{"operation": "readyz"}, 1},
		{"schemaless_http_requests_in_flight", nil, 0},
		{"schemaless_fsm_apply_seconds", ds, 2},
		{"schemaless_fsm_apply_batch_entries", ds, 2},
		{"schemaless_fsm_apply_batch_cells", ds, 2},
		{"schemaless_raft_leader_changes_total", map[string]string{"datastore": "users", "partition": "0"}, 1},
		{"schemaless_raft_leader_changes_total", map[string]string{"datastore": "users", "partition": "1"}, 1},
		{"schemaless_raft_commit_seconds", ds, cells},
		{"schemaless_raft_proposal_cells", ds, 1},
		{"schemaless_raft_proposal_requests", ds, 1},
		{"schemaless_raft_applied_index", map[string]string{"datastore": "users", "partition": "0"}, 1},
		{"schemaless_raft_applied_index", map[string]string{"datastore": "users", "partition": "1"}, 1},
		{"schemaless_raft_commit_index", ds, 2},
		{"schemaless_raft_last_index", ds, 2},
		{"schemaless_raft_replica_lag_entries", ds, 0},
		{"schemaless_raft_is_leader", ds, 2},
		{"schemaless_raft_term", ds, 2},
		{"schemaless_raft_quiesced", ds, 0},
		{"schemaless_consumer_group_lag_cells", map[string]string{"datastore": "users", "group": "billing"}, cells},
		{"schemaless_consumer_group_lag_seconds", map[string]string{"datastore": "users", "group": "billing"}, 0},
		{"schemaless_consumer_group_lag_errors", nil, 0},
		{"schemaless_sql_pool_open", nil, 1},
		{"schemaless_sql_pool_in_use", nil, 0},
		{"schemaless_sql_pool_idle", nil, 0},
		{"schemaless_sql_pool_wait_count_total", nil, 0},
		{"schemaless_sql_pool_wait_seconds_total", nil, 0},
		{"schemaless_raft_commitTime", nil, 1},     // hashicorp/raft's go-metrics, in ms
		{"schemaless_raft_fsm_applyBatch", nil, 1}, // idem
		{"go_goroutines", nil, 1},
		{"process_open_fds", nil, 1},
	}
	for _, c := range checks {
		if !assert.Contains(t, fams, c.name, "metric family") {
			continue
		}
		ms := series(t, fams, c.name, c.want)
		if assert.NotEmpty(t, ms, "%s %v: series", c.name, c.want) {
			assert.GreaterOrEqual(t, sum(ms), c.min, "%s %v: sum of values or counts", c.name, c.want)
		}
	}
	// Exact figures: the group lags by every cell (it never committed), a single node leads
	// every partition, the cells applied are the cells proposed, and the retry's cell was
	// proposed again.
	assert.Equal(t, float64(cells), sum(series(t, fams, "schemaless_consumer_group_lag_cells", map[string]string{"group": "billing"})),
		"schemaless_consumer_group_lag_cells{group=billing}")
	assert.Equal(t, 2.0, sum(series(t, fams, "schemaless_raft_is_leader", ds)), "schemaless_raft_is_leader: both partitions")
	assert.Equal(t, float64(cells+1), sampleSum(series(t, fams, "schemaless_raft_proposal_cells", ds)), "schemaless_raft_proposal_cells sum")
	assert.Equal(t, float64(cells+1), sampleSum(series(t, fams, "schemaless_fsm_apply_batch_cells", ds))-fsmCellsBefore,
		"schemaless_fsm_apply_batch_cells sum, more than before")
	for _, r := range series(t, fams, "schemaless_raft_applied_index", ds) {
		p := map[string]string{"datastore": "users"}
		for _, l := range r.GetLabel() {
			p[l.GetName()] = l.GetValue()
		}
		commit := sum(series(t, fams, "schemaless_raft_commit_index", p))
		assert.LessOrEqual(t, value(r), commit, "partition %s: applied index at most the commit index", p["partition"])
	}
	assert.Len(t, series(t, fams, "schemaless_sql_pool_open", map[string]string{"pool": "users/0/write"}), 1, "schemaless_sql_pool_open{pool=users/0/write}")

	// pprof on the admin listener only.
	code, body = do(t, http.MethodGet, admin+"/debug/pprof/", "")
	assert.Equal(t, http.StatusOK, code, "GET admin /debug/pprof/")
	assert.Contains(t, body, "heap", "GET admin /debug/pprof/ lists heap")
	code, heap := do(t, http.MethodGet, admin+"/debug/pprof/heap", "")
	require.Equal(t, http.StatusOK, code, "GET admin /debug/pprof/heap")
	zr, err := gzip.NewReader(bytes.NewReader([]byte(heap)))
	require.NoError(t, err, "heap profile: want a gzipped profile")
	raw, err := io.ReadAll(zr)
	assert.NoError(t, err, "heap profile")
	assert.NotEmpty(t, raw, "heap profile")
	code, _ = do(t, http.MethodGet, api+"/debug/pprof/", "")
	assert.Equal(t, http.StatusNotFound, code, "GET API /debug/pprof/: pprof only on the admin listener")

	require.NoError(t, n.Shutdown(context.Background()), "Shutdown")
	for _, url := range []string{admin + "/metrics", api + "/readyz"} {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			assert.Failf(t, "listener still answers", "GET %s answers %d after Shutdown", url, resp.StatusCode)
		}
	}
	_, open := <-n.Failed()
	assert.False(t, open, "Failed is closed after Shutdown, with no error")
}

// TestRaftTransportTimersDropped checks that RegisterProcessMetrics keeps hashicorp/raft's
// go-metrics timers but drops its transport's per-RPC ones (raft.net.*). It replaces the
// process-global go-metrics, as a second call in a process does, so it does not run in parallel.
func TestRaftTransportTimersDropped(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, node.RegisterProcessMetrics(reg))
	start := time.Now().Add(-time.Millisecond)
	gometrics.MeasureSince([]string{"raft", "rpc", "appendEntries"}, start)
	gometrics.MeasureSince([]string{"raft", "net", "rpcDecode"}, start)
	fams, err := reg.Gather()
	require.NoError(t, err, "Gather")
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	assert.True(t, names["schemaless_raft_rpc_appendEntries"], "raft's appendEntries timer is kept: %v", names)
	assert.False(t, names["schemaless_raft_net_rpcDecode"], "raft's transport timer is dropped")
}
