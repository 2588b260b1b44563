package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/security"
)

// Backend is what the server needs of a node (*cluster.Node).
type Backend interface {
	ID() string
	Topology() *topology.Topology
	Datastore(name string) (*topology.DatastoreSpec, error)
	PutCells(ctx context.Context, ds string, cs []cells.Cell) ([]cells.Result, error)
	// Write applies a write request with an idempotency key, conditions or atomicity.
	Write(ctx context.Context, ds string, req cluster.WriteRequest) (cluster.WriteResponse, error)
	GetCells(ctx context.Context, ds string, keys []cluster.GetKey, c cluster.Consistency) ([]cluster.ReadResult, error)
	GetRow(ctx context.Context, ds string, rowKey uuid.UUID, c cluster.Consistency) ([]cells.Cell, error)
	GetVersions(ctx context.Context, ds string, rowKey uuid.UUID, col string, from *int64, limit int, desc bool, c cluster.Consistency) ([]cells.Cell, error)
	// EraseRow erases every cell of a row (DELETE /v1/{ds}/cells/{row}; see erase.go).
	EraseRow(ctx context.Context, ds string, rowKey uuid.UUID) (cluster.EraseResult, error)
	ReadLogs(ctx context.Context, ds string, req cluster.LogRead) ([]cluster.LogPage, error)
	GroupApply(ctx context.Context, ds, group string, cmd consumer.Command) (consumer.Result, error)
	GroupStatus(ctx context.Context, ds, group string, c cluster.Consistency) (consumer.Status, error)
	Groups(ctx context.Context, ds string, c cluster.Consistency) ([]string, error)
	// Ready is the node's readiness (GET /readyz), DatastoreReady one datastore's
	// (GET /readyz?datastore=NAME; cluster.ErrUnknownDatastore for an unknown one).
	Ready() error
	DatastoreReady(name string) error
	Replicas() []cluster.ReplicaStatus

	// Secondary indexes (see indexes.go).
	Catalog(ctx context.Context, ds string, c cluster.Consistency) (*indexes.Catalog, error)
	CatalogApply(ctx context.Context, ds string, cmd indexes.Command) (indexes.Result, error)
	QueryIndex(ctx context.Context, ds, table string, fields []indexes.Field, plan indexes.Plan, c cluster.Consistency) ([]indexes.Entry, error)
	IndexTableStats(ctx context.Context, ds, table string, fields []indexes.Field) (cluster.IndexStats, error)
	DropIndexTable(ctx context.Context, ds, table string) error
	GroupProgress(ctx context.Context, ds, group string, c cluster.Consistency) (cluster.GroupProgress, error)
	LogProgress(ctx context.Context, ds string, leases []consumer.Lease) (cluster.GroupProgress, error)
}

var _ Backend = (*cluster.Node)(nil)

// Config sets the server's limits. Zero fields take DefaultConfig's values.
type Config struct {
	// MaxCellBodyBytes bounds one cell's JSON body. Default 1 MiB.
	MaxCellBodyBytes int64
	// MaxRequestBytes bounds a whole request body (put_cells, batch get). Default 16 MiB.
	MaxRequestBytes int64
	// MaxBatchCells bounds the cells of put_cells and the keys of a batch get. Default 1000.
	MaxBatchCells int
	// DefaultScanLimit and MaxScanLimit bound get_cells_for_shard. Defaults 100 and 1000.
	DefaultScanLimit int
	MaxScanLimit     int
	// MaxWait bounds the wait of a long-polling log read (get_cells_for_shard); such a request
	// may take RequestTimeout plus its wait. Default 30s.
	MaxWait time.Duration
	// RequestTimeout bounds the handling of one request. A write still running then answers
	// 504 indeterminate. Default 10s.
	RequestTimeout time.Duration
	// MaxIndexRequestBytes bounds the body of an index definition, alias or query request.
	// Default 1 MiB.
	MaxIndexRequestBytes int64
	// DefaultIndexLimit is the page size of an index query without a limit; MaxIndexLimit the
	// largest limit a query may ask for. Defaults 100 and 1000.
	DefaultIndexLimit int
	MaxIndexLimit     int
	// MaxTransactionConditions bounds the conditions of one transaction. Default 100
	// (cluster.MaxConditions, which the node enforces too, is the most it may be).
	MaxTransactionConditions int
	// MaxIndexConds bounds the conditions (where) of an index query. Default 32.
	MaxIndexConds int
	// MaxIndexInValues bounds the values of one "in" condition. Default 100.
	MaxIndexInValues int
	// MaxIndexColumns bounds the columns whose latest cells an index query fetches; a page reads
	// at most MaxIndexLimit × MaxIndexColumns cells. Default 16.
	MaxIndexColumns int
	// IndexCatalogTTL is how long a node reuses a stale read of a datastore's index catalog to
	// resolve index queries (an alias switch reaches the queries of other nodes within about
	// this long). A query that finds no ready version in the cached catalog, does not compile
	// against it, fails or finds nothing reads the catalog again, strongly. Default 500ms;
	// negative: a stale read for every query.
	IndexCatalogTTL time.Duration
	// MaxRestoreBytes bounds the body of a restore (POST /v1/admin/restore/...): one
	// partition's backup stream, staged to disk on the partition's leader, never held in
	// memory. Default 64 GiB; must be positive.
	MaxRestoreBytes int64
	// BodyReadTimeout bounds the time from the start of a request's handling to the last byte
	// of its body: a body not received by then answers 408 request_timeout with
	// "Connection: close", and the connection is closed, whatever the route. Requests without a
	// body (long-polling GETs included) are not bounded by it, nor are responses. A restore's
	// body (POST /v1/admin/restore/..., up to MaxRestoreBytes) is bounded per read instead: each
	// read that brings data moves the deadline BodyReadTimeout further. Default 10s; negative:
	// no bound.
	BodyReadTimeout time.Duration
	// MaxInflightPerConn bounds the requests in flight on one connection (an HTTP/2 connection
	// multiplexes many; HTTP/1.1 has one at a time). Counted only when the http.Server's
	// ConnContext is ConnContext. One more answers 429 too_many_requests with Retry-After.
	// Default 100; negative: no bound.
	MaxInflightPerConn int
	// MaxInflightPerPrincipal bounds the requests in flight for one client, all its connections
	// together (see limitKey: the client's IP address). One more answers 429 too_many_requests
	// with Retry-After. GET /healthz and /readyz are never refused. Default 1024; negative: no
	// bound.
	MaxInflightPerPrincipal int
	// AdminTimeout bounds an admin change (adding a voter waits for it to catch up; a
	// rebalance or a drain moves many replicas). Default 30m.
	AdminTimeout time.Duration
	// Auth, when set, authenticates every request but /healthz and /readyz (a bearer token or
	// a client certificate; package security) and checks that its principal holds the role the
	// route needs (see auth.go): 401 and 403 otherwise, in the error envelope. Nil: no
	// authentication, every request allowed.
	Auth *security.Authenticator
	// Audit receives the audit log: every admin operation and every refused request, with the
	// principal. Nil: Logger's.
	Audit *security.Auditor
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the request metrics (see metrics.go):
	// schemaless_http_request_duration_seconds{operation,code},
	// schemaless_http_requests_in_flight and schemaless_http_requests_refused_total{reason}. Servers sharing a Registerer share the series. Default
	// nil: requests are not measured.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxCellBodyBytes: 1 << 20,
		MaxRequestBytes:  16 << 20,
		MaxBatchCells:    1000,
		DefaultScanLimit: 100,
		MaxScanLimit:     1000,
		RequestTimeout:   10 * time.Second,
		MaxWait:          30 * time.Second,

		MaxIndexRequestBytes:     1 << 20,
		DefaultIndexLimit:        100,
		MaxIndexLimit:            1000,
		MaxIndexConds:            32,
		MaxTransactionConditions: cluster.MaxConditions,
		MaxIndexInValues:         100,
		MaxIndexColumns:          16,
		IndexCatalogTTL:          500 * time.Millisecond,
		AdminTimeout:             30 * time.Minute,
		MaxRestoreBytes:          64 << 30,
		BodyReadTimeout:          10 * time.Second,
		MaxInflightPerConn:       100,
		MaxInflightPerPrincipal:  1024,

		Logger: slog.Default(),
	}
}

// EnsureDefaults fills zero fields with DefaultConfig's values.
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	if c.MaxCellBodyBytes == 0 {
		c.MaxCellBodyBytes = d.MaxCellBodyBytes
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = d.MaxRequestBytes
	}
	if c.MaxBatchCells == 0 {
		c.MaxBatchCells = d.MaxBatchCells
	}
	if c.DefaultScanLimit == 0 {
		c.DefaultScanLimit = d.DefaultScanLimit
	}
	if c.MaxScanLimit == 0 {
		c.MaxScanLimit = d.MaxScanLimit
	}
	if c.MaxWait == 0 {
		c.MaxWait = d.MaxWait
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.MaxIndexRequestBytes == 0 {
		c.MaxIndexRequestBytes = d.MaxIndexRequestBytes
	}
	if c.DefaultIndexLimit == 0 {
		c.DefaultIndexLimit = d.DefaultIndexLimit
	}
	if c.MaxIndexLimit == 0 {
		c.MaxIndexLimit = d.MaxIndexLimit
	}
	if c.MaxTransactionConditions == 0 {
		c.MaxTransactionConditions = d.MaxTransactionConditions
	}
	if c.MaxIndexConds == 0 {
		c.MaxIndexConds = d.MaxIndexConds
	}
	if c.MaxIndexInValues == 0 {
		c.MaxIndexInValues = d.MaxIndexInValues
	}
	if c.MaxIndexColumns == 0 {
		c.MaxIndexColumns = d.MaxIndexColumns
	}
	if c.IndexCatalogTTL == 0 {
		c.IndexCatalogTTL = d.IndexCatalogTTL
	}
	if c.AdminTimeout == 0 {
		c.AdminTimeout = d.AdminTimeout
	}
	if c.MaxRestoreBytes == 0 {
		c.MaxRestoreBytes = d.MaxRestoreBytes
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = d.BodyReadTimeout
	}
	if c.MaxInflightPerConn == 0 {
		c.MaxInflightPerConn = d.MaxInflightPerConn
	}
	if c.MaxInflightPerPrincipal == 0 {
		c.MaxInflightPerPrincipal = d.MaxInflightPerPrincipal
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Audit == nil {
		c.Audit = security.NewAuditor(c.Logger)
	}
}

// Validate reports every limit out of range.
func (c Config) Validate() error {
	var errs []error
	if c.MaxCellBodyBytes < 2 || c.MaxRequestBytes < c.MaxCellBodyBytes {
		errs = append(errs, errors.New("api: MaxCellBodyBytes must be >= 2 and MaxRequestBytes >= MaxCellBodyBytes"))
	}
	if c.MaxBatchCells < 1 {
		errs = append(errs, errors.New("api: MaxBatchCells must be positive"))
	}
	if c.DefaultScanLimit < 1 || c.MaxScanLimit < c.DefaultScanLimit {
		errs = append(errs, errors.New("api: DefaultScanLimit must be positive and at most MaxScanLimit"))
	}
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("api: MaxWait must not be negative"))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("api: RequestTimeout must be positive"))
	}
	if c.MaxIndexRequestBytes < 2 {
		errs = append(errs, errors.New("api: MaxIndexRequestBytes must be >= 2"))
	}
	if c.DefaultIndexLimit < 1 || c.MaxIndexLimit < c.DefaultIndexLimit {
		errs = append(errs, errors.New("api: DefaultIndexLimit must be positive and at most MaxIndexLimit"))
	}
	if c.MaxTransactionConditions < 1 || c.MaxTransactionConditions > cluster.MaxConditions {
		errs = append(errs, fmt.Errorf("api: MaxTransactionConditions must be from 1 to %d", cluster.MaxConditions))
	}
	if c.MaxIndexConds < 1 || c.MaxIndexInValues < 1 || c.MaxIndexColumns < 1 {
		errs = append(errs, errors.New("api: MaxIndexConds, MaxIndexInValues and MaxIndexColumns must be positive"))
	}
	return errors.Join(errs...)
}

// Server is the HTTP handler of one node. Safe for concurrent use.
type Server struct {
	cfg     Config
	backend Backend
	mux     *http.ServeMux

	catMu    sync.Mutex
	catalogs map[string]cachedCatalog // by datastore; see IndexCatalogTTL
	metrics  *httpMetrics             // nil without Config.Registerer
	limits   *limiter                 // requests in flight per connection and per principal
}

// NewServer returns the API handler over b.
func NewServer(b Backend, cfg Config) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, backend: b, mux: http.NewServeMux(), catalogs: map[string]cachedCatalog{},
		limits: newLimiter(cfg.MaxInflightPerConn, cfg.MaxInflightPerPrincipal)}
	var err error
	if s.metrics, err = newHTTPMetrics(cfg.Registerer); err != nil {
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	s.routes()
	return s, nil
}

// ServeHTTP serves the API. A request with a body must deliver it within
// Config.BodyReadTimeout (408 otherwise, see bodytimeout.go); a request over the in-flight
// limits of its connection or principal answers 429 (limits.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, r, done := s.guardBody(w, r)
	defer done()
	if he := checkRequest(r); he != nil {
		writeError(w, he)
		return
	}
	// Authentication first, so that the limits count the principal's requests (limitKey).
	if s.cfg.Auth != nil {
		var audited func()
		var ok bool
		if w, r, audited, ok = s.authorize(w, r); !ok {
			return
		}
		defer audited()
	}
	release, he := s.admit(r)
	if he != nil {
		s.cfg.Audit.Refused(r, security.PrincipalFrom(r.Context()), he.status, he.msg)
		writeError(w, he)
		return
	}
	defer release()
	s.mux.ServeHTTP(w, r)
}

// route is a path served for some methods; other methods answer 405 in the API's error shape.
func (s *Server) route(pattern string, handlers map[string]http.HandlerFunc) {
	s.routeTimeout(pattern, s.cfg.RequestTimeout, handlers)
}

// routeTimeout is route with its own bound on a request's handling.
func (s *Server) routeTimeout(pattern string, timeout time.Duration, handlers map[string]http.HandlerFunc) {
	s.mux.HandleFunc(pattern, s.metrics.instrument(routeOperations(pattern, handlers), func(w http.ResponseWriter, r *http.Request) {
		h, ok := handlers[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = handlers[http.MethodGet]
		}
		if !ok {
			allow := ""
			for m := range handlers {
				if allow != "" {
					allow += ", "
				}
				allow += m
			}
			w.Header().Set("Allow", allow)
			writeError(w, &httpError{status: http.StatusMethodNotAllowed, code: wire.CodeMethod, msg: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	}))
}

func (s *Server) routes() {
	s.route("/v1/{ds}/cells/{row}/{col}/{ref}", map[string]http.HandlerFunc{
		http.MethodPut: s.putCell,
		http.MethodGet: s.getCell,
	})
	s.route("/v1/{ds}/cells/{row}/{col}/versions", map[string]http.HandlerFunc{http.MethodGet: s.getVersions})
	s.route("/v1/{ds}/cells/{row}/{col}", map[string]http.HandlerFunc{http.MethodGet: s.getCellLatest})
	s.route("/v1/{ds}/cells/{row}", map[string]http.HandlerFunc{http.MethodGet: s.getRow, http.MethodDelete: s.eraseRow})
	s.route("/v1/{ds}/cells/get", map[string]http.HandlerFunc{http.MethodPost: s.getCells})
	s.route("/v1/{ds}/cells", map[string]http.HandlerFunc{http.MethodPost: s.putCells})
	s.route("/v1/{ds}/transactions", map[string]http.HandlerFunc{http.MethodPost: s.transaction})
	s.route("/v1/{ds}/row_keys", map[string]http.HandlerFunc{http.MethodGet: s.rowKeys})
	long := s.cfg.RequestTimeout + s.cfg.MaxWait
	s.routeTimeout("/v1/{ds}/shards/{shard}/cells", long, map[string]http.HandlerFunc{http.MethodGet: s.shardCells})
	s.routeTimeout("/v1/{ds}/shards/cells", long, map[string]http.HandlerFunc{http.MethodPost: s.shardsCells})
	s.route("/v1/{ds}/groups", map[string]http.HandlerFunc{http.MethodGet: s.groupsList})
	s.route("/v1/{ds}/groups/{group}", map[string]http.HandlerFunc{http.MethodGet: s.groupStatus})
	s.route("/v1/{ds}/groups/{group}/{op}", map[string]http.HandlerFunc{http.MethodPost: s.groupCommandHandler})
	s.route("/v1/{ds}/indexes", map[string]http.HandlerFunc{http.MethodPost: s.indexDefine, http.MethodGet: s.indexList})
	s.route("/v1/{ds}/indexes/{index}", map[string]http.HandlerFunc{http.MethodGet: s.indexGet})
	s.route("/v1/{ds}/indexes/{index}/alias", map[string]http.HandlerFunc{http.MethodPost: s.indexAlias})
	s.route("/v1/{ds}/indexes/{index}/versions/{version}", map[string]http.HandlerFunc{http.MethodDelete: s.indexDrop})
	s.route("/v1/{ds}/indexes/{index}/query", map[string]http.HandlerFunc{http.MethodPost: s.indexQuery})
	s.schemaRoutes()
	s.route("/healthz", map[string]http.HandlerFunc{http.MethodGet: s.healthz})
	s.route("/readyz", map[string]http.HandlerFunc{http.MethodGet: s.readyz})
	s.route("/v1/cluster", map[string]http.HandlerFunc{http.MethodGet: s.clusterStatus})
	s.adminRoutes()
	s.backupRoutes()
	s.consoleRoutes()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, msg: "no route " + r.Method + " " + r.URL.Path})
	})
}
