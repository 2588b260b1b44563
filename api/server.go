package api

import (
	"context"
	"errors"
	"fmt"
	"github.com/schemaless-db/schemaless/api/wire"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
)

// Backend is what the server needs of a node (*cluster.Node).
type Backend interface {
	ID() string
	Topology() *cluster.Topology
	Datastore(name string) (*cluster.DatastoreSpec, error)
	PutCells(ctx context.Context, ds string, cs []cells.Cell) ([]fsm.CellResult, error)
	GetCells(ctx context.Context, ds string, keys []cluster.GetKey, c cluster.Consistency) ([]cluster.ReadResult, error)
	GetRow(ctx context.Context, ds string, rowKey uuid.UUID, c cluster.Consistency) ([]cells.Cell, error)
	ReadLogs(ctx context.Context, ds string, req cluster.LogRead) ([]cluster.LogPage, error)
	GroupApply(ctx context.Context, ds, group string, cmd consumer.Command) (consumer.Result, error)
	GroupStatus(ctx context.Context, ds, group string, c cluster.Consistency) (consumer.Status, error)
	Groups(ctx context.Context, ds string, c cluster.Consistency) ([]string, error)
	Ready() error
	Replicas() []cluster.ReplicaStatus
}

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
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
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
		Logger:           slog.Default(),
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
	if c.Logger == nil {
		c.Logger = d.Logger
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
	return errors.Join(errs...)
}

// Server is the HTTP handler of one node. Safe for concurrent use.
type Server struct {
	cfg     Config
	backend Backend
	mux     *http.ServeMux
}

// NewServer returns the API handler over b.
func NewServer(b Backend, cfg Config) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, backend: b, mux: http.NewServeMux()}
	s.routes()
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// route is a path served for some methods; other methods answer 405 in the API's error shape.
func (s *Server) route(pattern string, handlers map[string]http.HandlerFunc) {
	s.routeTimeout(pattern, s.cfg.RequestTimeout, handlers)
}

// routeTimeout is route with its own bound on a request's handling.
func (s *Server) routeTimeout(pattern string, timeout time.Duration, handlers map[string]http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
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
	})
}

func (s *Server) routes() {
	s.route("/v1/{ds}/cells/{row}/{col}/{ref}", map[string]http.HandlerFunc{
		http.MethodPut: s.putCell,
		http.MethodGet: s.getCell,
	})
	s.route("/v1/{ds}/cells/{row}/{col}", map[string]http.HandlerFunc{http.MethodGet: s.getCellLatest})
	s.route("/v1/{ds}/cells/{row}", map[string]http.HandlerFunc{http.MethodGet: s.getRow})
	s.route("/v1/{ds}/cells/get", map[string]http.HandlerFunc{http.MethodPost: s.getCells})
	s.route("/v1/{ds}/cells", map[string]http.HandlerFunc{http.MethodPost: s.putCells})
	long := s.cfg.RequestTimeout + s.cfg.MaxWait
	s.routeTimeout("/v1/{ds}/shards/{shard}/cells", long, map[string]http.HandlerFunc{http.MethodGet: s.shardCells})
	s.routeTimeout("/v1/{ds}/shards/cells", long, map[string]http.HandlerFunc{http.MethodPost: s.shardsCells})
	s.route("/v1/{ds}/groups", map[string]http.HandlerFunc{http.MethodGet: s.groupsList})
	s.route("/v1/{ds}/groups/{group}", map[string]http.HandlerFunc{http.MethodGet: s.groupStatus})
	s.route("/v1/{ds}/groups/{group}/{op}", map[string]http.HandlerFunc{http.MethodPost: s.groupCommandHandler})
	s.route("/healthz", map[string]http.HandlerFunc{http.MethodGet: s.healthz})
	s.route("/readyz", map[string]http.HandlerFunc{http.MethodGet: s.readyz})
	s.route("/v1/cluster", map[string]http.HandlerFunc{http.MethodGet: s.clusterStatus})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, msg: "no route " + r.Method + " " + r.URL.Path})
	})
}
