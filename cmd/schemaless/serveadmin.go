package main

import (
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
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
)

// newServeRegistry returns the registry serve exposes at /metrics, holding the Go runtime and
// process collectors, the node's (async datastores, raft replicas, consumer group lag), the
// store's connection pools, the FSM's and the raft replicas' series, and hashicorp/raft's own
// go-metrics (installRaftMetrics). The API and the index maintainer register theirs later.
func newServeRegistry(node *cluster.Node, store *storage.Store) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		store.PoolCollector(),
	}
	cs = append(cs, node.Collectors()...)
	cs = append(cs, fsm.MetricCollectors()...)
	cs = append(cs, partition.MetricCollectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	if err := installRaftMetrics(reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// installRaftMetrics sends hashicorp/raft's and raft-boltdb's metrics to reg. They use
// github.com/hashicorp/go-metrics/compat, which without the hashicorpmetrics build tag forwards
// to the process-global github.com/armon/go-metrics: this replaces that global with one whose
// sink is a Prometheus collector registered in reg. Names are "schemaless_" plus raft's key
// joined by "_" (schemaless_raft_commitTime, schemaless_raft_fsm_apply); timers are summaries
// in milliseconds. They aggregate every partition of the node (raft labels none).
func installRaftMetrics(reg prometheus.Registerer) error {
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
		{"raft.boltdb.storeLogs", "raft-boltdb: time to store a batch of entries in the raft log, in milliseconds (all partitions)."},
		{"raft.snapshot.persist", "hashicorp/raft: time to write a snapshot to disk, in milliseconds (all partitions)."},
	} {
		opts.SummaryDefinitions = append(opts.SummaryDefinitions, gometricsprom.SummaryDefinition{Name: append([]string{"schemaless"}, strings.Split(d.key, ".")...), Help: d.help})
	}
	sink, err := gometricsprom.NewPrometheusSinkFrom(opts)
	if err != nil {
		return fmt.Errorf("metrics: raft go-metrics sink: %w", err)
	}
	cfg := gometrics.DefaultConfig("schemaless")
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false // the Go collector has them
	cfg.EnableServiceLabel = false   // "schemaless" prefixes the names instead
	cfg.EnableTypePrefix = false
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("metrics: raft go-metrics: %w", err)
	}
	return nil
}

// routeLibraryLogs sends what libraries log outside the loggers serve passes them to logger,
// so that --log-format and --log-level apply to every line: the standard library's log package
// (slog.SetDefault) and go-sql-driver/mysql's connection errors.
func routeLibraryLogs(logger *slog.Logger) {
	slog.SetDefault(logger)
	_ = mysql.SetLogger(mysqlLogger{logger.With("component", "mysql")})
}

// mysqlLogger is go-sql-driver/mysql's Logger over slog, at Warn (it logs dropped connections
// and protocol errors, which the driver retries or returns).
type mysqlLogger struct{ l *slog.Logger }

// Print logs v, formatted as fmt.Sprint does.
func (m mysqlLogger) Print(v ...any) { m.l.Warn(fmt.Sprint(v...)) }

// adminMux serves the admin listener: /metrics from reg and net/http/pprof's /debug/pprof/
// (index, cmdline, profile, symbol, trace and the named profiles such as heap and goroutine).
func adminMux(reg prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startAdmin listens on addr and serves adminMux(reg) until the returned stop is called; an
// empty addr starts nothing (stop does nothing). Errors: the listen error. The server has no
// write timeout, so that CPU profiles and traces of any length complete.
func startAdmin(addr string, reg prometheus.Gatherer, logger *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin server: %w", err)
	}
	srv := &http.Server{Handler: adminMux(reg), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin server stopped", "error", err)
		}
	}()
	logger.Info("serving admin", "metrics", "http://"+ln.Addr().String()+"/metrics", "pprof", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { _ = srv.Close() }, nil
}
