package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/peering"
	"github.com/schemaless-db/schemaless/security"
)

// Node is one running node: its cluster node, the HTTP API on its listener, the index
// maintainer, the metrics and the admin listener. Its methods are safe for concurrent use.
type Node struct {
	cfg     Config
	log     *slog.Logger
	cluster *cluster.Node
	srv     *http.Server
	addr    string
	admin   *http.Server // nil without an admin listener
	adminLn net.Listener

	mu       sync.Mutex
	maint    *runningMaintainer // nil when not running
	repl     *peering.Replicator
	replStop context.CancelFunc
	replDone chan struct{}
	closed   bool       // Shutdown or Close began: no maintainer starts, Failed is closed
	failed   chan error // buffered 1: the first fatal or serve error

	stopOnce sync.Once
	stopErr  error
}

// runningMaintainer is the index maintainer while it runs.
type runningMaintainer struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start starts a node: the cluster node (cluster.Start, which opens the hosted replicas and
// does not wait for leaders), the metrics, the admin listener, the HTTP API on its listener,
// then the index maintainer. ctx bounds the start only; the node runs until Shutdown or Close.
// On error everything started is stopped again (Config.Listener included; the store stays the
// caller's). Errors: ErrInvalidConfig, cluster.Start's, the listeners' (wrapping the
// syscall's error, so that errors.Is(err, syscall.EADDRINUSE) tells a port already taken).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, failed: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			if cfg.Listener != nil {
				_ = cfg.Listener.Close()
			}
			if n.admin != nil {
				_ = n.admin.Close()
			}
			if n.cluster != nil {
				_ = n.cluster.Close()
			}
		}
	}()
	ccfg := cfg.Cluster
	ccfg.OnFatal = func(err error) { n.fail(fmt.Errorf("%w: %w", ErrFatal, err)) }
	cn, err := cluster.Start(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	n.cluster = cn
	apiCfg := cfg.API
	apiCfg.Logger, apiCfg.Registerer = cfg.Logger, nil
	apiCfg.Auth, apiCfg.Audit = cfg.Auth, cfg.Audit
	if cfg.Registry != nil {
		if err := registerNodeMetrics(cfg.Registry, cn, cfg.Cluster.Store); err != nil {
			return nil, err
		}
		apiCfg.Registerer = cfg.Registry
	}
	rcfg := cfg.Replication
	rcfg.Backend, rcfg.Worker, rcfg.Logger, rcfg.Registerer = cn, cfg.Cluster.NodeID, cfg.Logger, nil
	if rcfg.SourceIP == nil {
		rcfg.SourceIP = cn.SourceIP()
	}
	if cfg.Registry != nil {
		rcfg.Registerer = cfg.Registry
	}
	if n.repl, err = peering.New(rcfg); err != nil {
		return nil, err
	}
	handler, err := api.NewServer(api.Backends{Node: cn, Reads: cn, Writes: cn, Logs: cn, Groups: cn, Indexes: cn,
		Schemas: cn, Admin: cn, Backup: cn, Catalog: cn, Leader: cn, Replication: n.repl}, apiCfg)
	if err != nil {
		return nil, err
	}
	if err := n.startAdmin(); err != nil {
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrServe, err)
		}
	}
	// Not an http.ServeMux: it would clean a path with empty or dot segments and answer a
	// redirect before the API could refuse it (api.Server checks every path itself).
	var metrics http.Handler
	if cfg.Registry != nil {
		metrics = api.Guard(cfg.Auth, cfg.Audit, security.RoleMetrics, promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	}
	scheme := "http"
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS.ServerConfig())
		scheme = "https"
	}
	top := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if metrics != nil && r.URL.Path == "/metrics" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			metrics.ServeHTTP(w, r)
			return
		}
		handler.ServeHTTP(w, r)
	})
	// No ReadTimeout: it would cut long polls. The API bounds each request's body itself
	// (api.Config.BodyReadTimeout, a per-request read deadline); ConnContext counts each
	// connection's requests in flight (api.Config.MaxInflightPerConn); IdleTimeout closes
	// keep-alive connections left idle. TLS handshakes that fail (scanners, clients without
	// the CA) are logged by net/http through ErrorLog: at debug, so that they cannot flood the
	// log.
	n.srv = &http.Server{Handler: top, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnContext: api.ConnContext,
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
	n.addr = ln.Addr().String()
	go func() {
		if err := n.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			n.fail(fmt.Errorf("%w: %w", ErrServe, err))
		}
	}()
	ok = true
	n.log.Info("serving", "node", cfg.Cluster.NodeID, "http", scheme+"://"+n.addr, "raft", cfg.self().RaftAddr, "store", cfg.Cluster.Store.Engine())
	// The maintainer and the replicator start once the API serves, as a node's other
	// clients see it.
	n.StartMaintainer()
	rctx, rcancel := context.WithCancel(context.Background())
	n.replStop, n.replDone = rcancel, make(chan struct{})
	go func() {
		defer close(n.replDone)
		_ = n.repl.Run(rctx)
	}()
	return n, nil
}

// Cluster returns the node's cluster node (for reads, writes and admin in-process).
func (n *Node) Cluster() *cluster.Node { return n.cluster }

// Addr returns the host:port the API listens on.
func (n *Node) Addr() string { return n.addr }

// AdminAddr returns the host:port of the admin listener, "" without one.
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}

// Failed returns a channel that receives the error that ended the node's service, at most
// one: a store failure that stopped a replica (wrapping ErrFatal; the node must then be
// stopped, and a restart replays the log) or the failure of the API's server (wrapping
// ErrServe). It is closed once Shutdown or Close has stopped the node.
func (n *Node) Failed() <-chan error { return n.failed }

// fail reports err on Failed unless an error was reported already or the node stopped.
func (n *Node) fail(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	select {
	case n.failed <- err:
	default:
	}
}

// StartMaintainer starts the index maintainer (Config.Maintainer) over every datastore the node
// serves (those the catalog creates later too), unless it runs, the config has none or the node
// is stopping. Its workers read the logs and commit offsets through this node in-process
// (maintainer.Source). It is started by Start; tests call it again after StopMaintainer.
func (n *Node) StartMaintainer() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.maint != nil || n.cfg.Maintainer == nil {
		return
	}
	mcfg := *n.cfg.Maintainer
	mcfg.Backend = n.cluster
	mcfg.Datastores = nil
	// The datastores the node serves at each poll: the catalog creates and drops them.
	mcfg.DatastoresFunc = func() []string {
		var names []string
		for _, d := range n.cluster.Topology().Datastores {
			names = append(names, d.Name)
		}
		return names
	}
	if mcfg.Worker == "" {
		mcfg.Worker = n.cfg.Cluster.NodeID
	}
	mcfg.Logger = n.log
	mcfg.Registerer = nil
	if n.cfg.Registry != nil {
		mcfg.Registerer = n.cfg.Registry
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &runningMaintainer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := maintainer.Run(ctx, mcfg); err != nil {
			n.log.Error("index maintainer stopped", "error", err)
		}
	}()
	n.maint = m
}

// StopMaintainer stops the index maintainer, if it runs, and waits for it: its workers commit
// and leave their groups, so their shards move to the other nodes' workers at once. The node
// keeps serving; tests use it to hold index versions in their state (building, dropping).
func (n *Node) StopMaintainer() {
	n.mu.Lock()
	m := n.maint
	n.maint = nil
	n.mu.Unlock()
	if m != nil {
		m.cancel()
		<-m.done
	}
}

// Shutdown stops the node gracefully, as `schemaless serve` does on SIGTERM: the maintainer's
// workers commit and leave their groups, the partitions this node leads are handed to other
// replicas (bounded by HandoffTimeout) so that clients see a leader change of milliseconds
// rather than an election timeout, the API finishes its requests in flight (bounded by
// ShutdownTimeout; a failure to is logged), then the admin listener and the cluster node
// stop. ctx bounds the hand-off and the drain too. It returns the cluster node's Close error;
// Shutdown and Close after the first stop return the same.
func (n *Node) Shutdown(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.stopping()
		hctx, cancel := context.WithTimeout(ctx, n.cfg.HandoffTimeout)
		n.cluster.HandOffLeadership(hctx)
		cancel()
		sctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
		defer cancel()
		if err := n.srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Warn("http shutdown", "error", err)
		}
		n.stopErr = n.closeRest()
	})
	return n.stopErr
}

// Close stops the node at once, like a crash of its process as its peers see it: no
// leadership hand-off, the API's connections closed. The maintainer still stops first, its
// workers leaving their groups. The store stays open (the caller's). Errors: the API server's
// and the cluster node's Close errors.
func (n *Node) Close() error {
	n.stopOnce.Do(func() {
		n.stopping()
		n.stopErr = errors.Join(n.srv.Close(), n.closeRest())
	})
	return n.stopErr
}

// stopping stops the maintainer for good (none starts after it) and the replicator; their
// workers leave their groups.
func (n *Node) stopping() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.StopMaintainer()
	if n.replStop != nil {
		n.replStop()
		<-n.replDone
	}
}

// Replicator returns the node's replicator (replication between clusters).
func (n *Node) Replicator() *peering.Replicator { return n.repl }

// closeRest closes the admin listener and the cluster node, then Failed.
func (n *Node) closeRest() error {
	var errs []error
	if n.admin != nil {
		errs = append(errs, n.admin.Close())
	}
	errs = append(errs, n.cluster.Close())
	n.mu.Lock()
	close(n.failed)
	n.mu.Unlock()
	return errors.Join(errs...)
}
