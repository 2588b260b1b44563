package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	gometrics "github.com/armon/go-metrics"
	gometricsprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/storage"
)

// registerNodeMetrics registers in reg the store's connection pools, the cluster node's
// collectors (async datastores, raft replicas, consumer group lag) and the FSM's and the raft
// replicas' series. The API and the maintainer register theirs themselves.
func registerNodeMetrics(reg prometheus.Registerer, cn *cluster.Node, store *storage.Store) error {
	cs := []prometheus.Collector{store.PoolCollector()}
	cs = append(cs, cn.Collectors()...)
	cs = append(cs, fsm.MetricCollectors()...)
	cs = append(cs, partition.MetricCollectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("node: metrics: %w", err)
		}
	}
	return nil
}

// RegisterProcessMetrics registers the series of the whole process in reg: the Go runtime and
// process collectors, and hashicorp/raft's and raft-boltdb's own metrics. Those use
// github.com/hashicorp/go-metrics/compat, which without the hashicorpmetrics build tag forwards
// to the process-global github.com/armon/go-metrics: this replaces that global with one whose
// sink is a Prometheus collector registered in reg. Their names are "schemaless_" plus raft's
// key joined by "_" (schemaless_raft_commitTime, schemaless_raft_fsm_apply); timers are
// summaries in milliseconds. They aggregate every partition of the process (raft labels none).
// raft's transport timers (raft.net.*) are not kept.
// Call it once per process, from the program's main: a second call moves raft's metrics to the
// second registry. Errors: a registration's.
func RegisterProcessMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("node: metrics: %w", err)
		}
	}
	opts := gometricsprom.PrometheusOpts{
		Registerer: reg,
		Name:       "schemaless_raft_go_metrics_sink",
		// Never expire: a timer of an idle leader keeps its count and sum.
		Expiration: 0,
	}
	// The main series are declared up front, with units in their help (the others get their
	// name as help): they show from the start, at zero.
	for _, d := range []struct{ key, help string }{
		{"raft.commitTime", "hashicorp/raft: time from a leader's dispatch of an entry to its commit, in milliseconds (all partitions)."},
		{"raft.fsm.applyBatch", "hashicorp/raft: time of one FSM ApplyBatch call, in milliseconds (all partitions)."},
		{"raft.fsm.applyBatchNum", "hashicorp/raft: entries per FSM ApplyBatch call (all partitions)."},
		{"raft.fsm.enqueue", "hashicorp/raft: time to hand committed entries to the FSM goroutine, in milliseconds (all partitions)."},
		{"raft.leader.dispatchLog", "hashicorp/raft: time for a leader to write entries to its log, in milliseconds (all partitions)."},
		{"raft.rpc.appendEntries", "hashicorp/raft: time for a follower to handle an AppendEntries RPC, in milliseconds (all partitions)."},
		{"raft.boltdb.storeLogs", "raft-boltdb: time to store a batch of entries in the raft log, in milliseconds (all partitions; replicas with a bolt log only, see serve --raft-log-store)."},
		{"raft.snapshot.persist", "hashicorp/raft: time to write a snapshot to disk, in milliseconds (all partitions)."},
	} {
		opts.SummaryDefinitions = append(opts.SummaryDefinitions, gometricsprom.SummaryDefinition{Name: append([]string{"schemaless"}, strings.Split(d.key, ".")...), Help: d.help})
	}
	sink, err := gometricsprom.NewPrometheusSinkFrom(opts)
	if err != nil {
		return fmt.Errorf("node: metrics: raft go-metrics sink: %w", err)
	}
	cfg := gometrics.DefaultConfig("schemaless")
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false // the Go collector has them
	cfg.EnableServiceLabel = false   // "schemaless" prefixes the names instead
	cfg.EnableTypePrefix = false
	// hashicorp/raft's transport times four steps of every RPC it receives (raft.net.getRPCType,
	// rpcDecode, rpcEnqueue, rpcRespond), each a Prometheus summary observation under a lock:
	// most of the observations of a busy or an idle node, and of little use beside
	// raft.rpc.appendEntries and raft.commitTime. They are dropped.
	cfg.BlockedPrefixes = []string{"schemaless.raft.net."} // keys carry the service name first
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("node: metrics: raft go-metrics: %w", err)
	}
	return nil
}

// adminMux serves the admin listener: /metrics from reg (when not nil; the metrics role, or
// admin) and net/http/pprof's /debug/pprof/ (index, cmdline, profile, symbol, trace and the
// named profiles such as heap and goroutine; the admin role). With a nil Authenticator nothing
// is guarded.
func adminMux(reg prometheus.Gatherer, auth *security.Authenticator, audit *security.Auditor) *http.ServeMux {
	mux := http.NewServeMux()
	if reg != nil {
		mux.Handle("GET /metrics", api.Guard(auth, audit, security.RoleMetrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	}
	admin := func(h http.HandlerFunc) http.Handler { return api.Guard(auth, audit, security.RoleAdmin, h) }
	mux.Handle("/debug/pprof/", admin(pprof.Index))
	mux.Handle("/debug/pprof/cmdline", admin(pprof.Cmdline))
	mux.Handle("/debug/pprof/profile", admin(pprof.Profile))
	mux.Handle("/debug/pprof/symbol", admin(pprof.Symbol))
	mux.Handle("/debug/pprof/trace", admin(pprof.Trace))
	return mux
}

// startAdmin listens on Config.AdminAddr (when set) and serves adminMux there until the node
// stops. The server has no write timeout, so that CPU profiles and traces of any length
// complete. Errors: the listen error.
func (n *Node) startAdmin() error {
	if n.cfg.AdminAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("node: admin server: %w", err)
	}
	var reg prometheus.Gatherer
	if n.cfg.Registry != nil {
		reg = n.cfg.Registry
	}
	scheme := "http"
	if n.cfg.TLS != nil {
		ln = tls.NewListener(ln, n.cfg.TLS.ServerConfig())
		scheme = "https"
	}
	n.adminLn = ln
	n.admin = &http.Server{Handler: adminMux(reg, n.cfg.Auth, n.cfg.Audit), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
	go func() {
		if err := n.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("admin server stopped", "error", err)
		}
	}()
	n.log.Info("serving admin", "metrics", scheme+"://"+ln.Addr().String()+"/metrics", "pprof", scheme+"://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}
