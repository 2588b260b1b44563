package peering

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/wire"
)

// GroupPrefix starts the name of every stream's consumer group: "_replication.<peer>".
const GroupPrefix = "_replication."

// GroupName returns the consumer group of the streams to peer.
func GroupName(peer string) string { return GroupPrefix + peer }

// Backend is what the replicator needs of its node (*cluster.Node). Every method may be
// called from several goroutines at once.
type Backend interface {
	maintainer.SourceBackend
	SchemaBackend
	ClusterName() string
	Peers() ([]cluster.Peer, uint64)
	SetPeer(ctx context.Context, name string, req wire.ReplicationPeerRequest) (uint64, error)
	DropPeer(ctx context.Context, name string) (uint64, error)
	GroupProgress(ctx context.Context, ds, group string, c cluster.Consistency) (cluster.GroupProgress, error)
	LogProgress(ctx context.Context, ds string, leases []consumer.Lease) (cluster.GroupProgress, error)
	GroupStatus(ctx context.Context, ds, group string, c cluster.Consistency) (consumer.Status, error)
}

// DefaultPipelineDepth is how many pages of one shard a stream has on their way to the peer at
// once by default (Config.Triggers.PipelineDepth): a page does not wait for the round trip of
// the one before it, the peer applying them in order (order.go).
const DefaultPipelineDepth = 2

// Config configures a Replicator. Backend and Worker are required.
type Config struct {
	Backend Backend
	// Worker is this node's member id in every stream's group (the node id).
	Worker string
	// Poll is how often the catalog's peers are read again to start and stop streams.
	// Default 1s.
	Poll time.Duration
	// SampleInterval is how often each stream's offsets are sampled for its rate. Default 5s.
	SampleInterval time.Duration
	// Triggers is the template of every stream's worker (batch size, session timeout, retries,
	// halt threshold; see triggers.Config); Source, Group, Worker, Start, Pipeline (on), Logger
	// and Registerer are set by the replicator. Zero fields take triggers' defaults, except
	// BatchSize (default 500), Concurrency (default 256: every shard a worker holds has a
	// page in flight to the peer) and PipelineDepth (default DefaultPipelineDepth; 1 sends a
	// shard's next page only once the peer answered the one before).
	Triggers triggers.Config
	// RequestTimeout bounds one request to a peer. Default 10s.
	RequestTimeout time.Duration
	// SchemaInterval is how often each stream compares its datastore's schema versions with
	// the peer's and registers there those it lacks (syncSchemas). Default 10s.
	SchemaInterval time.Duration
	// SourceIP, when set, is the address every connection to a peer is dialed from (the
	// node's bind IP, as its raft and RPC connections are: see package transport), so that
	// a firewall rule or a test's cut between two nodes' addresses holds for the streams
	// too. Nil lets the kernel choose.
	SourceIP net.IP
	// Registerer receives the replicator's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Replicator runs the streams of this node to every peer cluster of the catalog. Its methods
// are safe for concurrent use.
type Replicator struct {
	cfg     Config
	log     *slog.Logger
	sent    *prometheus.CounterVec
	errs    *prometheus.CounterVec
	putSec  *prometheus.HistogramVec
	waitSec *prometheus.HistogramVec
	mu      sync.Mutex
	streams map[streamKey]*stream
}

// streamKey names a stream: a peer and a datastore.
type streamKey struct{ peer, ds string }

// stream is one running stream of this node, with its local figures.
type stream struct {
	settings string // the peer's settings it runs with (JSON); a change restarts it
	cancel   context.CancelFunc
	done     chan struct{}

	mu        sync.Mutex
	sent      int64
	lastErr   string
	lastErrAt time.Time
	schemaErr string // the last round of syncSchemas's error, "" when it succeeded
	sampleSum int64
	sampleAt  time.Time
	rate      float64
}

// New returns a Replicator; Run starts its streams. Errors: an invalid config, or the
// metrics' registration.
func New(cfg Config) (*Replicator, error) {
	if cfg.Backend == nil || cfg.Worker == "" {
		return nil, errors.New("peering: Config.Backend and Config.Worker are required")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 5 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.SchemaInterval <= 0 {
		cfg.SchemaInterval = 10 * time.Second
	}
	if cfg.Triggers.BatchSize == 0 {
		cfg.Triggers.BatchSize = 500
	}
	if cfg.Triggers.PipelineDepth == 0 {
		cfg.Triggers.PipelineDepth = DefaultPipelineDepth
	}
	if cfg.Triggers.Concurrency == 0 {
		// Every shard a worker holds has a page on its way to the peer at once: a page waits
		// a round trip between datacenters, so a few shards at a time would queue the others
		// behind it (8 shards of 64 add about a second at 80 ms per round trip).
		cfg.Triggers.Concurrency = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Replicator{cfg: cfg, log: cfg.Logger.With("component", "replication"), streams: map[streamKey]*stream{},
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "schemaless_replication_cells_sent_total",
			Help: "Cells this node's replication workers sent to a peer cluster (created or already there)."}, []string{"peer", "datastore"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "schemaless_replication_errors_total",
			Help: "Failed requests of this node's replication workers to a peer cluster."}, []string{"peer", "datastore"}),
		putSec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "schemaless_replication_put_seconds",
			Help:    "Time of one put_cells of a page to a peer cluster, from sending to its answer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"peer", "datastore"}),
		waitSec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "schemaless_replication_wait_seconds",
			Help:    "Age of a page's first cell (since its created_at at this cluster) when the page is sent to a peer cluster.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"peer", "datastore"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{r.sent, r.errs, r.putSec, r.waitSec} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("peering: register metrics: %w", err)
			}
		}
	}
	return r, nil
}

// Run starts and stops streams as the catalog's peers change, until ctx ends; then it stops
// every stream (their workers leave their groups) and returns nil.
func (r *Replicator) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	s := time.NewTicker(r.cfg.SampleInterval)
	defer s.Stop()
	for {
		r.reconcile(ctx)
		select {
		case <-ctx.Done():
			r.stopAll()
			return nil
		case <-t.C:
		case <-s.C:
			r.sample(ctx)
		}
	}
}

// reconcile starts the streams the catalog's peers ask for and stops the others.
func (r *Replicator) reconcile(ctx context.Context) {
	want := map[streamKey]string{}
	peers := map[string]cluster.Peer{}
	if r.cfg.Backend.ClusterName() != "" {
		ps, _ := r.cfg.Backend.Peers()
		for _, p := range ps {
			b, _ := json.Marshal(p.ReplicationPeerRequest)
			peers[p.Name] = p
			for _, ds := range p.Datastores {
				want[streamKey{p.Name, ds}] = string(b)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, st := range r.streams {
		if want[k] != st.settings {
			st.cancel()
			<-st.done
			delete(r.streams, k)
			r.log.Info("replication stream stopped", "peer", k.peer, "datastore", k.ds)
		}
	}
	for k, settings := range want {
		if _, ok := r.streams[k]; ok || ctx.Err() != nil {
			continue
		}
		st, err := r.start(peers[k.peer], k.ds, settings)
		if err != nil {
			r.log.Error("replication stream cannot start", "peer", k.peer, "datastore", k.ds, "err", err)
			continue
		}
		r.streams[k] = st
		r.log.Info("replication stream started", "peer", k.peer, "datastore", k.ds, "endpoints", peers[k.peer].Endpoints)
	}
}

func (r *Replicator) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, st := range r.streams {
		st.cancel()
		<-st.done
		delete(r.streams, k)
	}
}

// peerClient returns a client of peer's API for datastore ds.
func (r *Replicator) peerClient(p cluster.Peer, ds string) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Datastore, cfg.Token, cfg.RequestTimeout = ds, p.Token, r.cfg.RequestTimeout
	// The worker retries a failed page itself, with its own backoff; one attempt per call
	// keeps the shard's order simple to reason about.
	cfg.MaxAttempts = 1
	cfg.NoLeaderRouting = false
	for _, e := range p.Endpoints {
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		cfg.Endpoints = append(cfg.Endpoints, e)
	}
	if p.CACert != "" || p.ClientCert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if p.CACert != "" {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(p.CACert)) {
				return nil, errors.New("peering: ca_cert holds no certificate")
			}
			tc.RootCAs = pool
		}
		if p.ClientCert != "" {
			kp, err := tls.X509KeyPair([]byte(p.ClientCert), []byte(p.ClientKey))
			if err != nil {
				return nil, fmt.Errorf("peering: client_cert: %w", err)
			}
			tc.Certificates = []tls.Certificate{kp}
		}
		cfg.TLS = tc
	}
	// Every shard a worker holds may have a request in flight to the peer: keep that many
	// connections open rather than the two idle ones per host of Go's default, so that pages
	// do not wait for new connections (a round trip between datacenters each).
	t := client.NewTransport(cfg.TLS)
	t.MaxIdleConnsPerHost = 256
	if ip := r.cfg.SourceIP; ip != nil && !ip.IsUnspecified() {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
		t.DialContext = d.DialContext
	}
	cfg.HTTPClient = &http.Client{Transport: t}
	return client.New(cfg)
}

// start starts the stream of datastore ds to peer p.
func (r *Replicator) start(p cluster.Peer, ds, settings string) (*stream, error) {
	cl, err := r.peerClient(p, ds)
	if err != nil {
		return nil, err
	}
	tc := r.cfg.Triggers
	tc.Source = maintainer.NewSource(r.cfg.Backend, ds)
	tc.Group = GroupName(p.Name)
	tc.Worker = r.cfg.Worker
	tc.Start = triggers.StartEarliest
	tc.Pipeline = true // a page waits a round trip to the peer: the other shards go on meanwhile
	tc.Logger = r.log.With("peer", p.Name, "datastore", ds)
	tc.Registerer = nil
	sctx, cancel := context.WithCancel(context.Background())
	st := &stream{settings: settings, cancel: cancel, done: make(chan struct{})}
	s := &sender{r: r, st: st, cl: cl, origin: r.cfg.Backend.ClusterName(),
		sent: r.sent.WithLabelValues(p.Name, ds), errs: r.errs.WithLabelValues(p.Name, ds),
		putSec: r.putSec.WithLabelValues(p.Name, ds), waitSec: r.waitSec.WithLabelValues(p.Name, ds)}
	tc.OnPage, tc.OnPageEnd = s.onPage, s.onPageEnd
	schemasDone := make(chan struct{})
	go func() {
		defer close(schemasDone)
		s.syncSchemas(sctx, r.cfg.Backend, ds, r.cfg.SchemaInterval)
	}()
	go func() {
		defer close(st.done)
		defer func() { <-schemasDone }()
		for sctx.Err() == nil {
			err := triggers.RunPages(sctx, tc, s.page, s.cell)
			if sctx.Err() != nil {
				return
			}
			// A halted group (too many parked cells) or a bad config: say so, and look
			// again later (an operator may resume the group).
			st.fail(err)
			r.log.Error("replication stream stopped; retrying in 10s", "peer", p.Name, "datastore", ds, "err", err)
			select {
			case <-sctx.Done():
			case <-time.After(10 * time.Second):
			}
		}
	}()
	return st, nil
}

// setSchemaErr records the outcome of a round of syncSchemas (nil: success).
func (st *stream) setSchemaErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	st.mu.Lock()
	st.schemaErr = msg
	st.mu.Unlock()
}

func (st *stream) fail(err error) {
	st.mu.Lock()
	st.lastErr, st.lastErrAt = err.Error(), time.Now().UTC()
	st.mu.Unlock()
}

// sender sends one stream's pages to its peer.
type sender struct {
	r      *Replicator
	st     *stream
	cl     *client.Client
	origin string
	sent   prometheus.Counter
	errs   prometheus.Counter
	// putSec times each request to the peer; waitSec the age of a page's first cell when sent.
	putSec, waitSec prometheus.Observer
	chains          chains // the order of each shard's pages in flight (order.go)
}

// local returns the cells of cs written in this cluster, as writes for the peer. Tombstones
// are left out (page sends them as erasures).
func local(cs []cells.Cell) ([]client.CellWrite, error) {
	var out []client.CellWrite
	for _, c := range cs {
		if c.Origin != "" || c.Key.IsTombstone() {
			continue
		}
		body, err := c.Body.JSON()
		if err != nil {
			return nil, fmt.Errorf("cell %s: %w", c.Key, err)
		}
		out = append(out, client.CellWrite{Key: c.Key, Body: body})
	}
	return out, nil
}

// put sends cws to the peer in one request, again and again until the peer answers or ctx
// ends (the shard was lost, the stream stopped): an unreachable, slow or refusing peer holds
// the shard's stream back, with its error in the status, but never parks a cell. Only a
// conflict (the peer holds a key with another body) is an error, naming the keys: the caller
// then parks those cells.
func (s *sender) put(ctx context.Context, cws []client.CellWrite, opts ...client.WriteOption) error {
	if len(cws) == 0 {
		return nil
	}
	var res []wire.PutResult
	if err := s.retry(ctx, func() error {
		var err error
		res, err = s.send(ctx, cws, opts...)
		return err
	}); err != nil {
		return err
	}
	return s.answered(cws, res)
}

// send sends cws to the peer in one put_cells with this cluster as their origin and opts,
// timing it.
func (s *sender) send(ctx context.Context, cws []client.CellWrite, opts ...client.WriteOption) ([]wire.PutResult, error) {
	start := time.Now()
	res, err := s.cl.PutCells(ctx, cws, append(opts, client.WithOrigin(s.origin))...)
	s.putSec.Observe(time.Since(start).Seconds())
	return res, err
}

// conflictError is the error of an answered request some of whose cells the peer holds with
// another body: the keys.
type conflictError struct{ keys []string }

func (e *conflictError) Error() string {
	return "peering: the peer holds " + strings.Join(e.keys, ", ") + " with another body (written in both clusters)"
}

// retry calls send until it returns nil or ctx ends, waiting with backoff (50 ms doubling to
// 5 s, jittered) after each failure, which it counts and records as the stream's last error.
func (s *sender) retry(ctx context.Context, send func() error) error {
	backoff := 50 * time.Millisecond
	for {
		err := send()
		if err == nil {
			return nil
		}
		s.errs.Inc()
		s.st.fail(err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// answered counts the cells of an answered request and returns the error naming its
// conflicts, nil when there are none.
func (s *sender) answered(cws []client.CellWrite, res []wire.PutResult) error {
	var conflicts []string
	for i, pr := range res {
		if pr.Status == wire.StatusConflict {
			conflicts = append(conflicts, cws[i].Key.String())
		}
	}
	s.sent.Add(float64(len(res) - len(conflicts)))
	s.st.mu.Lock()
	s.st.sent += int64(len(res) - len(conflicts))
	if len(conflicts) == 0 {
		s.st.lastErr = ""
	}
	s.st.mu.Unlock()
	if len(conflicts) > 0 {
		err := &conflictError{keys: conflicts}
		s.st.fail(err)
		return err
	}
	return nil
}

// page is the stream's triggers.BatchHandler: the page's local cells in one request, split at
// each local erasure (a tombstone written in this cluster), which is sent between the cells
// before it and those after it, so that the peer sees the shard's writes and erasures in their
// order. A page registered by onPage (its link in ctx) is chained after the shard's page
// before it (putChained), or, when it erases a row, sent once that one was answered.
func (s *sender) page(ctx context.Context, shard int, cs []cells.Cell) (err error) {
	if len(cs) > 0 {
		s.waitSec.Observe(max(time.Since(cs[0].CreatedAt).Seconds(), 0))
	}
	l, _ := triggers.PageToken(ctx).(*link)
	if l != nil {
		defer func() { s.end(l, err) }()
		if !l.tomb {
			cws, err := local(cs)
			if err != nil {
				return err
			}
			return s.putChained(ctx, shard, l, cws)
		}
		if err := s.waitPredecessor(ctx, l); err != nil {
			return err
		}
	}
	from := 0
	for i, c := range cs {
		if !c.Key.IsTombstone() {
			continue
		}
		if err := s.putLocal(ctx, shard, cs[from:i]); err != nil {
			return err
		}
		if c.Origin == "" {
			if err := s.erase(ctx, c.RowKey); err != nil {
				return err
			}
		}
		from = i + 1
	}
	return s.putLocal(ctx, shard, cs[from:])
}

// cell is the stream's triggers.Handler, for a page that failed: one cell at a time, so that a
// conflicting cell is parked on its own.
func (s *sender) cell(ctx context.Context, c cells.Cell) error {
	if c.Key.IsTombstone() {
		if c.Origin != "" {
			return nil
		}
		return s.erase(ctx, c.RowKey)
	}
	return s.putLocal(ctx, -1, []cells.Cell{c})
}

// putLocal sends the local cells of cs (put), at the head of shard's chain (order.go) when
// shard is not negative, so that a page chained after this one may follow it.
func (s *sender) putLocal(ctx context.Context, shard int, cs []cells.Cell) error {
	cws, err := local(cs)
	if err != nil || len(cws) == 0 {
		return err
	}
	if shard < 0 {
		return s.put(ctx, cws)
	}
	last := int64(0)
	for _, c := range cs {
		if c.Origin == "" {
			last = c.AddedID
		}
	}
	return s.put(ctx, cws, client.WithOrder(strconv.Itoa(shard), last, 0))
}

// erase erases row in the peer with this cluster as its origin, again and again until the
// peer answers or ctx ends, as put does.
func (s *sender) erase(ctx context.Context, row uuid.UUID) error {
	return s.retry(ctx, func() error {
		_, err := s.cl.EraseRow(ctx, row, client.WithOrigin(s.origin))
		if err == nil {
			s.sent.Inc()
			s.st.mu.Lock()
			s.st.sent++
			s.st.mu.Unlock()
		}
		return err
	})
}
