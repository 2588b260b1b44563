package triggers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
)

// Start positions of a group: where a shard with no committed offset starts.
const (
	// StartEarliest: the first cell of the shard (the default).
	StartEarliest = "earliest"
	// StartLatest: after the last cell stored when the shard is first handed out.
	StartLatest = "latest"
	// StartTimestamp: the first cell created at or after Config.StartTime.
	StartTimestamp = "timestamp"
)

// Errors returned by Run.
var (
	// ErrHalted: the group halted because parked cells reached its halt threshold. Fix the
	// handler, then retry or drop the parked cells (`schemaless triggers parked`) and run again.
	ErrHalted = errors.New("triggers: group halted: too many parked cells")
	// ErrInvalidConfig: a Config field is missing or out of range (the message names it).
	ErrInvalidConfig = errors.New("triggers: invalid config")
)

// Handler is called once per delivered cell, on one goroutine per shard at a time. It returns
// nil when the cell is handled; an error is retried and finally parks the cell. ctx ends when
// the worker stops or loses the shard; a handler should then return promptly (its cell will be
// delivered again to the next owner).
type Handler func(ctx context.Context, c cells.Cell) error

// BatchHandler is called by RunBatch with one page of cells of one shard, in added_id order, on
// one goroutine per shard at a time. It returns nil when every cell is handled; an error retries
// the whole page (so a handler must be idempotent per cell). ctx ends as for Handler.
type BatchHandler func(ctx context.Context, shard int, cs []cells.Cell) error

// Config configures a worker. Source and Group are required; zero fields take the defaults of
// DefaultConfig.
type Config struct {
	// Source is the datastore the worker reads and its group's coordinator: the HTTP client's
	// (client.Client.TriggerSource, over the HTTP API), or an in-process Source (package
	// maintainer's, over a cluster node).
	Source Source
	// Group is the consumer group's name: letters, digits, '-', '_', '.'.
	Group string
	// Worker is this worker's id in the group, unique among its members. Default:
	// "<hostname>-<pid>-<random>".
	Worker string
	// ColumnKey, when set, delivers only the cells of that column, and the tombstones of
	// erased rows (cells.TombstoneColumn), which every consumer must see.
	ColumnKey string
	// Start is where shards with no committed offset start: StartEarliest (default),
	// StartLatest or StartTimestamp (with StartTime). It is stored when the group is created;
	// later workers' values are ignored.
	Start     string
	StartTime time.Time
	// SessionTimeout is how long the worker stays a member (and keeps its shards) without a
	// heartbeat. Default 3s.
	SessionTimeout time.Duration
	// HeartbeatInterval is the time between heartbeats. Default SessionTimeout/6.
	HeartbeatInterval time.Duration
	// LeaseMargin is cut from the local lease deadline to absorb clock-rate differences and the
	// heartbeat's travel. Default SessionTimeout/5.
	LeaseMargin time.Duration
	// BatchSize bounds the cells read per shard per poll. Default 200.
	BatchSize int
	// PollWait is the long poll's wait when no shard has new cells. Default 1s.
	PollWait time.Duration
	// Concurrency bounds the shards delivered at once. Default 8.
	Concurrency int
	// MaxAttempts is how many times a cell is tried before it is parked. Default 5.
	MaxAttempts int
	// Backoff is the wait after the first failed attempt, doubled after each up to BackoffMax.
	// Defaults 100ms and 5s.
	Backoff    time.Duration
	BackoffMax time.Duration
	// HaltThreshold: the group halts when this many cells are parked. Default 100; negative
	// disables halting.
	HaltThreshold int
	// Consistency of log reads: ConsistencyStale (default; any replica, since added_id order is
	// the same on every replica) or ConsistencyStrong (the leader). client's constants of the
	// same names are the same values.
	Consistency string
	// Pipeline delivers each shard on its own: a shard whose page is handled is read again at
	// once (the long poll of the others is cut short for it), instead of every shard of a poll
	// waiting for the slowest page of that poll. It suits handlers whose pages take a network
	// round trip (replication between clusters, package peering): a cell then waits for at most
	// its own shard's page in flight. Off by default: each cut poll is a new log read, which
	// over HTTP (client.TriggerSource) costs a connection.
	Pipeline bool
	// PipelineDepth is how many pages of one shard may be in delivery at once with Pipeline
	// (RunPages and RunBatch; 0 or 1: one, the default). Above 1, a shard's next page is read
	// and handed to the batch handler while its earlier pages are still in delivery, so the
	// handler must itself keep the pages' effects in order (package peering chains them at the
	// peer: docs/api.md, "order"); OnPage tells it that order. The worker still moves a shard's
	// offset page by page in order, falls back to cell-by-cell delivery only after the page
	// before has been delivered, and after a page that was not delivered (the shard lost, a
	// park that failed) drops the pages after it, and the answer of a read still on its way,
	// and reads them again.
	PipelineDepth int
	// OnPage, when set, is called from the worker's loop for each page about to be delivered,
	// in each shard's page order, before its handler runs (beside the pages before it when
	// PipelineDepth is above 1); what it returns reaches the page's batch handler as
	// PageToken(ctx). It must not block. RunPages and RunBatch only.
	OnPage func(shard int, cs []cells.Cell) any
	// OnPageEnd, when set, is called with OnPage's token once the page's delivery ended,
	// whatever its outcome, including a page whose handler never ran (the shard lost first).
	OnPageEnd func(token any)
	// OnCommit, when set, is called for each offset commit the group's coordinator accepted
	// (sent alone or with a heartbeat): from then on the shard's committed offset is at least
	// offset, and a later owner of the shard starts after it. It is called from the worker's
	// loops with the worker's lock held, so it must return quickly and not call the worker.
	OnCommit func(shard int, offset int64)
	// Registerer receives the worker's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger receives rebalances, parked cells and errors. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults, with no Source or Group.
func DefaultConfig() Config {
	return Config{
		Start:          StartEarliest,
		SessionTimeout: 3 * time.Second,
		BatchSize:      200,
		PollWait:       time.Second,
		Concurrency:    8,
		MaxAttempts:    5,
		Backoff:        100 * time.Millisecond,
		BackoffMax:     5 * time.Second,
		HaltThreshold:  100,
		Consistency:    ConsistencyStale,
		Logger:         slog.Default(),
	}
}

// EnsureDefaults sets every zero field to its default.
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	if c.Worker == "" {
		host, _ := os.Hostname()
		c.Worker = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.Start == "" {
		c.Start = d.Start
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = d.SessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.SessionTimeout / 6
	}
	if c.LeaseMargin == 0 {
		c.LeaseMargin = c.SessionTimeout / 5
	}
	if c.BatchSize == 0 {
		c.BatchSize = d.BatchSize
	}
	if c.PollWait == 0 {
		c.PollWait = d.PollWait
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.Backoff == 0 {
		c.Backoff = d.Backoff
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = d.BackoffMax
	}
	if c.HaltThreshold == 0 {
		c.HaltThreshold = d.HaltThreshold
	}
	if c.Consistency == "" {
		c.Consistency = d.Consistency
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
}

// Validate reports every missing or out-of-range field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Source == nil {
		bad("Source is required")
	}
	if err := consumer.ValidGroupName(c.Group); err != nil {
		bad("Group: %v", err)
	}
	if c.ColumnKey != "" {
		if err := cells.ValidateColumnKey(c.ColumnKey); err != nil {
			bad("ColumnKey %q: %v", c.ColumnKey, err)
		}
	}
	switch c.Start {
	case StartEarliest, StartLatest:
	case StartTimestamp:
		if c.StartTime.IsZero() {
			bad("StartTime is required with Start %q", StartTimestamp)
		}
	default:
		bad("Start %q: want earliest, latest or timestamp", c.Start)
	}
	if c.SessionTimeout <= 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout {
		bad("HeartbeatInterval (%s) must be positive and below SessionTimeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.LeaseMargin < 0 || c.LeaseMargin+c.HeartbeatInterval >= c.SessionTimeout {
		bad("LeaseMargin (%s) plus HeartbeatInterval must be below SessionTimeout", c.LeaseMargin)
	}
	if c.BatchSize < 1 || c.BatchSize > 1000 {
		bad("BatchSize %d: want 1..1000", c.BatchSize)
	}
	if c.PollWait < 0 || c.Concurrency < 1 || c.MaxAttempts < 1 || c.Backoff < 0 || c.BackoffMax < c.Backoff {
		bad("PollWait, Concurrency, MaxAttempts, Backoff and BackoffMax must be positive, BackoffMax >= Backoff")
	}
	if c.PipelineDepth < 0 || c.PipelineDepth > 64 || (c.PipelineDepth > 1 && !c.Pipeline) {
		bad("PipelineDepth %d: want 0..64, and above 1 only with Pipeline", c.PipelineDepth)
	}
	if c.Consistency != ConsistencyStale && c.Consistency != ConsistencyStrong {
		bad("Consistency %q: want stale or strong", c.Consistency)
	}
	return errors.Join(errs...)
}
