package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches url and parses its Prometheus text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: got status %d, want 200:\n%s", url, code, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s: parse: %v", url, err)
	}
	return fams
}

// series returns the metrics of family name whose labels include want; it fails the test when
// the family is missing.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("metric family %s missing", name)
	}
	var out []*dto.Metric
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// value is a gauge's, counter's or untyped metric's value, a histogram's or summary's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// sum adds the values (counts) of ms; sampleSum adds histograms' sums.
func sum(ms []*dto.Metric) float64 {
	s := 0.0
	for _, m := range ms {
		s += value(m)
	}
	return s
}

func sampleSum(ms []*dto.Metric) float64 {
	s := 0.0
	for _, m := range ms {
		s += m.GetHistogram().GetSampleSum()
	}
	return s
}

// do sends a request with body and returns the status and answer.
func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeMetricsAndAdmin runs `serve` of a 1-node cluster with --admin-addr, writes and reads
// cells, creates a consumer group, and checks every metric family serve exposes (on both
// listeners) and net/http/pprof on the admin listener only.
func TestServeMetricsAndAdmin(t *testing.T) {
	base := freePortRange(t, 3)
	raftAddr := "127.0.0.1:" + strconv.Itoa(base)
	httpAddr := "127.0.0.1:" + strconv.Itoa(base+1)
	adminAddr := "127.0.0.1:" + strconv.Itoa(base+2)
	dir := t.TempDir()
	topo := filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(topo, []byte(fmt.Sprintf(`nodes:
  - {id: n1, raft_addr: %q, http_addr: %q}
datastores:
  - name: users
    shards: 4
    partition_count: 2
`, raftAddr, httpAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var errOut string
	go func() {
		var err error
		_, errOut, err = runCmd(ctx, "serve", "--config", topo, "--node-id", "n1", "--data-dir", filepath.Join(dir, "data"),
			"--admin-addr", adminAddr, "--log-level", "warn", "--heartbeat-timeout", "200ms", "--election-timeout", "200ms",
			"--leader-lease-timeout", "100ms")
		done <- err
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve after cancel: %v, want nil\n%s", err, errOut)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve still running 30s after cancel")
		}
	}
	t.Cleanup(stop)

	api := "http://" + httpAddr
	admin := "http://" + adminAddr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited before ready: %v\n%s", err, errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready after 60s (last error %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

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
		if code, body := do(t, http.MethodPut, api+"/v1/users/cells/"+row+"/BASE/1", fmt.Sprintf(`{"n":%d}`, i)); code != http.StatusCreated {
			t.Fatalf("put_cell %d: got %d %s, want 201", i, code, body)
		}
	}
	if code, body := do(t, http.MethodPut, api+"/v1/users/cells/"+first+"/BASE/1", `{"n":0}`); code != http.StatusOK {
		t.Fatalf("put_cell retry: got %d %s, want 200", code, body)
	}
	if code, body := do(t, http.MethodGet, api+"/v1/users/cells/"+first+"/BASE/1", ""); code != http.StatusOK {
		t.Fatalf("get_cell: got %d %s, want 200", code, body)
	}
	if code, body := do(t, http.MethodGet, api+"/v1/users/cells/"+first+"/BASE/2", ""); code != http.StatusNotFound {
		t.Fatalf("get_cell of a missing cell: got %d %s, want 404", code, body)
	}
	if code, body := do(t, http.MethodPost, api+"/v1/users/groups/billing/heartbeat", `{"worker":"w1","session_timeout":"10m"}`); code != http.StatusOK {
		t.Fatalf("group heartbeat: got %d %s, want 200", code, body)
	}

	// Group lag is measured at most every 5 s: the scrape before the writes may have measured
	// before the group existed.
	var fams map[string]*dto.MetricFamily
	for start := time.Now(); ; time.Sleep(250 * time.Millisecond) {
		fams = scrape(t, admin+"/metrics")
		if f := fams["schemaless_consumer_group_lag_cells"]; f != nil && len(series(t, fams, f.GetName(), map[string]string{"group": "billing"})) > 0 {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("schemaless_consumer_group_lag_cells{group=billing} missing 15s after the group was created")
		}
	}
	apiFams := scrape(t, api+"/metrics")
	for name := range fams {
		if _, ok := apiFams[name]; !ok && strings.HasPrefix(name, "schemaless_") {
			t.Errorf("family %s on the admin listener but not on the API's /metrics", name)
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
		ms := series(t, fams, c.name, c.want)
		if len(ms) == 0 {
			t.Errorf("%s %v: no series", c.name, c.want)
			continue
		}
		if got := sum(ms); got < c.min {
			t.Errorf("%s %v: got %v, want at least %v", c.name, c.want, got, c.min)
		}
	}
	// Exact figures: the group lags by every cell (it never committed), a single node leads
	// every partition, the cells applied are the cells proposed, and the retry's cell was
	// proposed again.
	if got := sum(series(t, fams, "schemaless_consumer_group_lag_cells", map[string]string{"group": "billing"})); got != cells {
		t.Errorf("schemaless_consumer_group_lag_cells{group=billing}: got %v, want %d", got, cells)
	}
	if got := sum(series(t, fams, "schemaless_raft_is_leader", ds)); got != 2 {
		t.Errorf("schemaless_raft_is_leader: got %v, want 2 (both partitions)", got)
	}
	if got := sampleSum(series(t, fams, "schemaless_raft_proposal_cells", ds)); got != cells+1 {
		t.Errorf("schemaless_raft_proposal_cells sum: got %v, want %d", got, cells+1)
	}
	if got := sampleSum(series(t, fams, "schemaless_fsm_apply_batch_cells", ds)) - fsmCellsBefore; got != cells+1 {
		t.Errorf("schemaless_fsm_apply_batch_cells sum: got %v more, want %d", got, cells+1)
	}
	for _, r := range series(t, fams, "schemaless_raft_applied_index", ds) {
		p := map[string]string{"datastore": "users"}
		for _, l := range r.GetLabel() {
			p[l.GetName()] = l.GetValue()
		}
		commit := sum(series(t, fams, "schemaless_raft_commit_index", p))
		if applied := value(r); applied > commit {
			t.Errorf("partition %s: applied index %v above commit index %v", p["partition"], applied, commit)
		}
	}
	if ms := series(t, fams, "schemaless_sql_pool_open", map[string]string{"pool": "users/0/write"}); len(ms) != 1 {
		t.Errorf("schemaless_sql_pool_open{pool=users/0/write}: got %d series, want 1", len(ms))
	}

	// pprof on the admin listener only.
	if code, body := httpGet(t, admin+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "heap") {
		t.Errorf("GET admin /debug/pprof/: got %d, want 200 listing heap:\n%.300s", code, body)
	}
	code, heap := httpGet(t, admin+"/debug/pprof/heap")
	if code != http.StatusOK {
		t.Fatalf("GET admin /debug/pprof/heap: got %d, want 200", code)
	}
	zr, err := gzip.NewReader(bytes.NewReader([]byte(heap)))
	if err != nil {
		t.Fatalf("heap profile: %v, want a gzipped profile", err)
	}
	if raw, err := io.ReadAll(zr); err != nil || len(raw) == 0 {
		t.Errorf("heap profile: %d bytes, %v; want a profile", len(raw), err)
	}
	if code, _ := httpGet(t, api+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("GET API /debug/pprof/: got %d, want 404 (pprof only on --admin-addr)", code)
	}

	stop()
	if resp, err := http.Get(admin + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("admin listener still answers after serve returned")
	}
}
