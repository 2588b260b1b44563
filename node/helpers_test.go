package node_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/node"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/require"
)

// startSingle starts a one-node cluster holding datastore "users" (4 shards, 2 partitions) on
// SQLite in a temp dir, with fast raft timeouts and the defaults of node.DefaultConfig changed
// by mod, and waits until it is ready. The node is closed, then its store, at t's cleanup.
func startSingle(t *testing.T, mod func(*node.Config)) (*node.Node, *storage.Store) {
	t.Helper()
	ctx := context.Background()
	addrs, err := localcluster.FreeAddrs("127.0.0.1", 2)
	require.NoError(t, err)
	top := &topology.Topology{
		Nodes:      []topology.NodeSpec{{ID: "n1", RaftAddr: addrs[0], HTTPAddr: addrs[1]}},
		Datastores: []topology.DatastoreSpec{{Name: "users", Mode: topology.ModeRaft, Shards: 4, PartitionCount: 2}},
	}
	require.NoError(t, top.Normalize())
	dir := t.TempDir()
	store, err := storage.OpenSQLite(ctx, storage.SQLiteConfig{Dir: filepath.Join(dir, "sqlite")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	pc := partition.DefaultConfig()
	pc.HeartbeatTimeout, pc.ElectionTimeout, pc.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	cfg := node.DefaultConfig()
	cfg.Cluster = cluster.Config{NodeID: "n1", Topology: top, DataDir: dir, Store: store, Partition: pc}
	cfg.Logger = slog.New(slog.NewTextHandler(clustertest.NewTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if mod != nil {
		mod(&cfg)
	}
	n, err := node.Start(ctx, cfg)
	require.NoError(t, err, "node.Start")
	t.Cleanup(func() { _ = n.Close() })
	require.Eventually(t, func() bool { return n.Cluster().Ready() == nil }, 60*time.Second, 20*time.Millisecond, "the node ready")
	return n, store
}

// do sends a request with body and returns the status and answer.
func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "%s %s: read the answer", method, url)
	return resp.StatusCode, string(b)
}

// scrape fetches url and parses its Prometheus text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := do(t, http.MethodGet, url, "")
	require.Equal(t, http.StatusOK, code, "GET %s:\n%s", url, body)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err, "GET %s: parse", url)
	return fams
}

// series returns the metrics of family name whose labels include want; it fails the test when
// the family is missing.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "metric family %s missing", name)
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

// sum adds the values (counts) of ms.
func sum(ms []*dto.Metric) float64 {
	s := 0.0
	for _, m := range ms {
		s += value(m)
	}
	return s
}

// sampleSum adds the sums of the histograms ms.
func sampleSum(ms []*dto.Metric) float64 {
	s := 0.0
	for _, m := range ms {
		s += m.GetHistogram().GetSampleSum()
	}
	return s
}
