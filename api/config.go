package api

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/security"
)

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
	// together (see limitKey: the authenticated principal when Auth is set, else the client's IP
	// address). One more answers 429 too_many_requests with Retry-After. GET /healthz and /readyz
	// are never refused. Default 1024; negative: no bound.
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
