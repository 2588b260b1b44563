package api

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/wire"
)

// Server is the HTTP handler of one node. Safe for concurrent use.
type Server struct {
	cfg Config
	b   Backends
	mux *http.ServeMux

	catMu    sync.Mutex
	catalogs map[string]cachedCatalog // by datastore; see IndexCatalogTTL
	metrics  *httpMetrics             // nil without Config.Registerer
	limits   *limiter                 // requests in flight per connection and per principal
	orders   orderChains              // chains of ordered put_cells requests (order.go)
}

// NewServer returns the API handler over the parts of a node in b (b.Node is required; see
// Backends for what a nil part leaves out). It fails when cfg does not validate or its
// Registerer refuses the request metrics.
func NewServer(b Backends, cfg Config) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b.Node == nil {
		return nil, errors.New("api: Backends.Node is required")
	}
	s := &Server{cfg: cfg, b: b, mux: http.NewServeMux(), catalogs: map[string]cachedCatalog{},
		limits: newLimiter(cfg.MaxInflightPerConn, cfg.MaxInflightPerPrincipal)}
	var err error
	if s.metrics, err = newHTTPMetrics(cfg.Registerer); err != nil {
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	s.routes()
	return s, nil
}

// ServeHTTP serves the API. A path with a "." or ".." segment is refused before routing (400,
// see checkRequest); a request with a body must deliver it within Config.BodyReadTimeout (408
// otherwise, see bodytimeout.go); a request over the in-flight limits of its connection or
// principal answers 429 (limits.go).
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

// routes registers the routes of the parts of the node the server has (Backends).
func (s *Server) routes() {
	b := s.b
	reads, writes := b.Reads != nil, b.Writes != nil
	s.route("/v1/{ds}/cells/{row}/{col}/{ref}", handlers{}.
		with(writes, http.MethodPut, s.putCell).
		with(reads, http.MethodGet, s.getCell))
	s.route("/v1/{ds}/cells/{row}/{col}/versions", handlers{}.with(reads, http.MethodGet, s.getVersions))
	s.route("/v1/{ds}/cells/{row}/{col}", handlers{}.with(reads, http.MethodGet, s.getCellLatest))
	s.route("/v1/{ds}/cells/{row}", handlers{}.
		with(reads, http.MethodGet, s.getRow).
		with(writes, http.MethodDelete, s.eraseRow))
	s.route("/v1/{ds}/cells/get", handlers{}.with(reads, http.MethodPost, s.getCells))
	s.route("/v1/{ds}/cells", handlers{}.with(writes, http.MethodPost, s.putCells))
	s.route("/v1/{ds}/transactions", handlers{}.with(writes, http.MethodPost, s.transaction))
	s.route("/v1/{ds}/row_keys", handlers{http.MethodGet: s.rowKeys})
	long := s.cfg.RequestTimeout + s.cfg.MaxWait
	logs := b.Logs != nil
	s.routeTimeout("/v1/{ds}/shards/{shard}/cells", long, handlers{}.with(logs, http.MethodGet, s.shardCells))
	s.routeTimeout("/v1/{ds}/shards/cells", long, handlers{}.with(logs, http.MethodPost, s.shardsCells))
	if b.Groups != nil {
		s.route("/v1/{ds}/groups", handlers{http.MethodGet: s.groupsList})
		s.route("/v1/{ds}/groups/{group}", handlers{http.MethodGet: s.groupStatus})
		s.route("/v1/{ds}/groups/{group}/{op}", handlers{http.MethodPost: s.groupCommandHandler})
	}
	if b.Indexes != nil {
		s.route("/v1/{ds}/indexes", handlers{http.MethodPost: s.indexDefine, http.MethodGet: s.indexList})
		s.route("/v1/{ds}/indexes/{index}", handlers{http.MethodGet: s.indexGet})
		s.route("/v1/{ds}/indexes/{index}/alias", handlers{http.MethodPost: s.indexAlias})
		s.route("/v1/{ds}/indexes/{index}/versions/{version}", handlers{http.MethodDelete: s.indexDrop})
		s.route("/v1/{ds}/indexes/{index}/query", handlers{http.MethodPost: s.indexQuery})
	}
	s.schemaRoutes()
	s.route("/healthz", handlers{http.MethodGet: s.healthz})
	s.route("/readyz", handlers{http.MethodGet: s.readyz})
	s.route("/v1/cluster", handlers{http.MethodGet: s.clusterStatus})
	s.adminRoutes()
	s.datastoreRoutes()
	s.replicationRoutes()
	s.backupRoutes()
	s.consoleRoutes()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, msg: "no route " + r.Method + " " + r.URL.Path})
	})
}
