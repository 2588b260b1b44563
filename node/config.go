package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/peering"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/topology"
)

// Errors of Start, Validate and Failed.
var (
	// ErrInvalidConfig: a Config field is missing or out of range (the message names it).
	ErrInvalidConfig = errors.New("node: invalid config")
	// ErrFatal wraps a store failure that stopped a replica from applying (cluster.Config.OnFatal):
	// the node must stop, so that a restart replays the log; it never serves from a replica
	// that may have diverged.
	ErrFatal = errors.New("node: fatal storage failure")
	// ErrServe wraps the failure of the API's HTTP server (its listener failed).
	ErrServe = errors.New("node: http server")
)

// Config configures a node. Cluster.NodeID, Cluster.Topology, Cluster.DataDir and
// Cluster.Store are required; zero fields take the defaults of DefaultConfig.
type Config struct {
	// Cluster configures the cluster node (cluster.Start). The caller opens and closes its
	// Store. A nil Logger is the node's Logger; OnFatal is the node's own (see Node.Failed) and
	// must be nil.
	Cluster cluster.Config
	// API configures the HTTP API (limits and timeouts, api.Config). Its Logger and Registerer
	// are the node's.
	API api.Config
	// Listener, when set, is the listener the API serves on; the node owns it from Start on
	// (it is closed when the node stops, or when Start fails). Nil: Start listens on HTTPAddr.
	Listener net.Listener
	// HTTPAddr is where the API listens when Listener is nil. Default: this node's http_addr
	// (Cluster.Self's, or the topology's entry of Cluster.NodeID).
	HTTPAddr string
	// Maintainer, when set, runs the index maintainer (package maintainer) over every datastore
	// of the topology, in-process. Its Backend, Datastores, Logger and Registerer are set by
	// Start, and an empty Worker is the node id. Nil: no maintainer, and defined indexes stay
	// building.
	Maintainer *maintainer.Config
	// Replication tunes the replicator (package peering), which every node runs: it streams
	// the cells written in this cluster to the catalog's peer clusters (none until an operator
	// sets one). Its Backend, Worker, Logger and Registerer are set by Start.
	Replication peering.Config
	// AdminAddr, when set, is the host:port of the admin listener: /metrics and net/http/pprof's
	// /debug/pprof/, with no write timeout so that profiles and traces of any length complete.
	// Empty: no admin listener.
	AdminAddr string
	// Registry receives the node's metrics: the store's connection pools, the cluster node's
	// collectors (async datastores, raft replicas, consumer group lag), the FSM's and the raft
	// replicas' series, the API's requests and the maintainer's. It is served at GET /metrics on
	// the API's listener and on the admin listener. The process-wide series (Go runtime,
	// process, hashicorp/raft's go-metrics) are RegisterProcessMetrics's. Nil: no metrics and
	// no /metrics route.
	Registry *prometheus.Registry
	// TLS, when set, serves the API and the admin listener over TLS with the node's
	// certificate (security.Certs.ServerConfig; client certificates are verified when sent),
	// and, unless Cluster.PeerServerTLS is set already, makes the node port mutual TLS
	// (PeerServerConfig, PeerClientConfig). The caller reloads it (Certs.Watch). Nil: plaintext.
	TLS *security.Certs
	// Auth, when set, authenticates every request of the API, /metrics and the admin listener
	// but /healthz and /readyz, and checks the route's role (package security; api.Config.Auth).
	// Nil: no authentication.
	Auth *security.Authenticator
	// Audit receives the audit log: admin operations and refused requests. Nil: the node's
	// Logger.
	Audit *security.Auditor
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
	// HandoffTimeout bounds the leadership hand-off of Shutdown. Default 5s.
	HandoffTimeout time.Duration
	// ShutdownTimeout bounds Shutdown's wait for the API's requests in flight. Default 5s.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults: the cluster's and the API's defaults, the index
// maintainer with its defaults, no admin listener, no registry, 5s hand-off and shutdown.
func DefaultConfig() Config {
	m := maintainer.DefaultConfig()
	return Config{
		API:             api.DefaultConfig(),
		Maintainer:      &m,
		Logger:          slog.Default(),
		HandoffTimeout:  5 * time.Second,
		ShutdownTimeout: 5 * time.Second,
	}
}

// EnsureDefaults sets every zero field to its default, except Maintainer (nil means none) and
// Registry (nil means no metrics).
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Cluster.Logger == nil {
		c.Cluster.Logger = c.Logger
	}
	if c.HandoffTimeout == 0 {
		c.HandoffTimeout = d.HandoffTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.Audit == nil {
		c.Audit = security.NewAuditor(c.Logger)
	}
	if c.TLS != nil && c.Cluster.PeerServerTLS == nil && c.Cluster.PeerClientTLS == nil {
		c.Cluster.PeerServerTLS, c.Cluster.PeerClientTLS = c.TLS.PeerServerConfig(), c.TLS.PeerClientConfig()
	}
	if c.HTTPAddr == "" && c.Listener == nil {
		c.HTTPAddr = c.self().HTTPAddr
	}
	c.API.EnsureDefaults()
}

// self is this node's entry: Cluster.Self, or the topology's entry of Cluster.NodeID (zero when
// neither is there).
func (c *Config) self() topology.NodeSpec {
	switch {
	case c.Cluster.Self != nil:
		return *c.Cluster.Self
	case c.Cluster.Topology != nil:
		self, _ := c.Cluster.Topology.Node(c.Cluster.NodeID)
		return self
	}
	return topology.NodeSpec{}
}

// Validate reports every missing or out-of-range field, wrapping ErrInvalidConfig, with the
// errors of the cluster's and the API's Validate. Start calls it after EnsureDefaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Cluster.OnFatal != nil {
		bad("Cluster.OnFatal must be nil: the node reports fatal errors (Node.Failed)")
	}
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if err := c.API.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if c.Listener == nil && c.HTTPAddr == "" {
		bad("HTTPAddr is required without a Listener (the node has no http_addr)")
	}
	if c.Maintainer != nil && (c.Maintainer.PollInterval < 0 || c.Maintainer.SessionTimeout < 0 || c.Maintainer.ReadyLag < 0) {
		bad("Maintainer: PollInterval, SessionTimeout and ReadyLag must not be negative")
	}
	if c.HandoffTimeout < 0 || c.ShutdownTimeout < 0 {
		bad("HandoffTimeout (%s) and ShutdownTimeout (%s) must not be negative", c.HandoffTimeout, c.ShutdownTimeout)
	}
	return errors.Join(errs...)
}
