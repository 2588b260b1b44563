package jepsen

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/triggers"
)

// DeliveryLog is the handler of a jepsen trigger worker: Handle appends one Delivery per cell to
// a file and fsyncs it before returning nil, so a line in the file means the handler completed
// (what the triggers package may then commit). It is safe for concurrent use: the triggers
// package calls the handler on one goroutine per shard.
//
// It tells the worker's ownership periods of a shard apart by the context the handler gets: the
// triggers package passes the context of the shard's lease, one per ownership period, canceled
// when the lease ends. A context with another Done channel than the last one seen for the
// shard starts a new period (Delivery.Lease). CheckTriggers reports as undecided a log where
// this stops holding (every delivery a new period).
type DeliveryLog struct {
	worker string
	shards int

	mu    sync.Mutex
	f     *os.File
	done  map[int]<-chan struct{} // shard -> Done of the context of its current period
	lease map[int]int             // shard -> current period number
	err   error                   // the first write or sync error; every later Handle fails
}

// OpenDeliveryLog opens (creating or appending to) the delivery file at path for the worker
// with group member id worker, in a datastore of shards shards.
func OpenDeliveryLog(path, worker string, shards int) (*DeliveryLog, error) {
	if shards < 1 {
		return nil, fmt.Errorf("jepsen: delivery log: %d shards", shards)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &DeliveryLog{worker: worker, shards: shards, f: f, done: map[int]<-chan struct{}{}, lease: map[int]int{}}, nil
}

// Handle records c as delivered: it writes and fsyncs its line, then returns nil. After a write
// or sync error it returns that error for this and every later cell (nothing it returns nil for
// is missing from the file).
func (l *DeliveryLog) Handle(ctx context.Context, c cells.Cell) error {
	shard := cells.ShardOf(c.RowKey, l.shards)
	body, err := c.Body.JSON()
	if err != nil {
		body = nil // recorded without a body: the checker then skips the body comparison
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if done := ctx.Done(); l.lease[shard] == 0 || done != l.done[shard] {
		l.done[shard] = done
		l.lease[shard]++
	}
	line, err := json.Marshal(Delivery{Worker: l.worker, Shard: shard, AddedID: c.AddedID, RowKey: c.RowKey.String(),
		Column: c.ColumnKey, RefKey: c.RefKey, Body: string(body), Lease: l.lease[shard], Time: time.Now().UnixNano()})
	if err != nil {
		return err
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		l.err = fmt.Errorf("jepsen: write delivery: %w", err)
		return l.err
	}
	if err := l.f.Sync(); err != nil {
		l.err = fmt.Errorf("jepsen: sync delivery file: %w", err)
		return l.err
	}
	return nil
}

// Commit records that the group's coordinator accepted the commit of offset in shard (a line
// with Delivery.Committed), for the lost-commit check. It is called under the worker's lock
// (triggers.Config.OnCommit), so it does not wait for Handle's fsync: the line is one append
// write on the file, not synced and not under the log's lock. A line lost to a crash or a
// failed write only leaves that commit unchecked.
func (l *DeliveryLog) Commit(shard int, offset int64) {
	line, err := json.Marshal(Delivery{Worker: l.worker, Shard: shard, AddedID: offset, Committed: true, Time: time.Now().UnixNano()})
	if err == nil {
		_, _ = l.f.Write(append(line, '\n')) // O_APPEND: one write, never inside another line
	}
}

// Close closes the file.
func (l *DeliveryLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// TriggerWorkerConfig is one trigger worker process of the triggers workload (the hidden
// `schemaless jepsen trigger-worker` command).
type TriggerWorkerConfig struct {
	// Endpoints are the nodes' HTTP base URLs, the preferred one first.
	Endpoints []string
	// Datastore, Group and Column: the worker delivers the cells of Column in Datastore as
	// member Worker of Group.
	Datastore, Group, Worker, Column string
	// Shards is the datastore's shard count (the shard of a delivered cell is computed).
	Shards int
	// Out is the delivery file (DeliveryLog).
	Out string
	// SessionTimeout, PollWait and BatchSize are the triggers.Config fields.
	SessionTimeout, PollWait time.Duration
	BatchSize                int
	// RequestTimeout bounds one HTTP attempt of the worker's client.
	RequestTimeout time.Duration
	// TLS and Token are the client.Config fields of the worker's client: the CAs trusted for
	// https endpoints (nil: the system's) and the bearer token sent ("" none).
	TLS    *tls.Config
	Token  string
	Logger *slog.Logger
}

// RunTriggerWorker runs triggers.Run with a DeliveryLog handler until ctx ends, then commits,
// leaves the group, closes the file and returns nil. It returns an error when the
// configuration is bad, the file cannot be written (the worker stops rather than deliver
// without recording), or triggers.Run fails (the group halted).
func RunTriggerWorker(ctx context.Context, cfg TriggerWorkerConfig) error {
	if len(cfg.Endpoints) == 0 || cfg.Datastore == "" || cfg.Group == "" || cfg.Worker == "" || cfg.Column == "" || cfg.Out == "" {
		return errors.New("jepsen: trigger worker: endpoints, datastore, group, worker, column and out are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dl, err := OpenDeliveryLog(cfg.Out, cfg.Worker, cfg.Shards)
	if err != nil {
		return err
	}
	cc := client.DefaultConfig()
	cc.Endpoints, cc.Datastore, cc.TLS, cc.Token = cfg.Endpoints, cfg.Datastore, cfg.TLS, cfg.Token
	if cfg.RequestTimeout > 0 {
		cc.RequestTimeout = cfg.RequestTimeout
	}
	cc.MaxAttempts, cc.BackoffBase, cc.BackoffMax = 3, 20*time.Millisecond, 200*time.Millisecond
	cl, err := client.New(cc)
	if err != nil {
		dl.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var failed error // the delivery file's error: the worker stops
	handler := func(hctx context.Context, c cells.Cell) error {
		err := dl.Handle(hctx, c)
		if err != nil {
			mu.Lock()
			failed = cmp.Or(failed, err)
			mu.Unlock()
			cancel()
		}
		return err
	}
	tc := triggers.Config{Source: cl.TriggerSource(), Group: cfg.Group, Worker: cfg.Worker, ColumnKey: cfg.Column,
		SessionTimeout: cfg.SessionTimeout, PollWait: cfg.PollWait, BatchSize: cfg.BatchSize, Logger: cfg.Logger,
		OnCommit: dl.Commit}
	cfg.Logger.Info("jepsen: trigger worker starting", "group", cfg.Group, "worker", cfg.Worker, "out", cfg.Out, "pid", os.Getpid())
	runErr := triggers.Run(ctx, tc, handler)
	closeErr := dl.Close()
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		return failed
	}
	return errors.Join(runErr, closeErr)
}
