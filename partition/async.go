package partition

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// AsyncConfig configures one partition of an async datastore. Datastore, Shards, Primary and
// (unless BufferCopies is 0) Buffers are required.
type AsyncConfig struct {
	Datastore string
	Partition int
	Shards    cells.ShardRange
	// NodeID is the node serving the partition, which Leader reports.
	NodeID string
	// Primary is the storage cluster holding the partition's cells as the topology places it.
	// A placement record (see Placement) naming another of Primary and Buffers moves it there.
	Primary *StorageCluster
	// Buffers are the datastore's other storage clusters, whose masters hold buffered copies.
	// After a move, the buffers are every cluster of Primary and Buffers but the one holding
	// the partition, in that order.
	Buffers []*StorageCluster
	// BufferCopies is how many buffer clusters must take a write before the primary master is
	// written (buffered writes). 0 turns buffered writes off: the unsafe mode, in which a
	// write acknowledged by the primary master is lost if the master dies before a minion got
	// it.
	BufferCopies int
	// ReapInterval is the pause between two passes of the reaper. Default 250ms.
	ReapInterval time.Duration
	// ReplayAfter is how long a buffered cell must be missing from its primary cluster before
	// the reaper replays it into the primary master (a younger cell may still be on its way).
	// Default 2s.
	ReplayAfter time.Duration
	// LockWait bounds the wait for the partition's write lock on the master (a MySQL named
	// lock shared by every node writing the partition). Default 5s.
	LockWait time.Duration
	// MaxBatchCommands bounds the commands (puts of one request, group and index commands)
	// grouped into one write transaction on the master. Default 256.
	MaxBatchCommands int
	// PlacementInterval is how often the partition re-reads its placement (it also does
	// after a write or read refused as moved). Default 500ms (a probe interval).
	PlacementInterval time.Duration
	// MovedWait bounds how long a command or a read refused as moved (storage.ErrMoved: the
	// partition is being switched to another cluster) is retried, re-reading the placement,
	// before it fails with ErrUnavailable. Default 3s.
	MovedWait time.Duration
	// Placement reads the partition's placement record. Default: the record with the highest
	// epoch on the masters of Primary and Buffers (MastersPlacement).
	Placement PlacementSource
	// Logger receives master failures and reaper conflicts. Default slog.Default().
	Logger *slog.Logger
}

func (c *AsyncConfig) ensureDefaults() {
	if c.ReapInterval <= 0 {
		c.ReapInterval = 250 * time.Millisecond
	}
	if c.ReplayAfter <= 0 {
		c.ReplayAfter = 2 * time.Second
	}
	if c.LockWait <= 0 {
		c.LockWait = 5 * time.Second
	}
	if c.MaxBatchCommands <= 0 {
		c.MaxBatchCommands = 256
	}
	if c.PlacementInterval <= 0 {
		c.PlacementInterval = 500 * time.Millisecond
	}
	if c.MovedWait <= 0 {
		c.MovedWait = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Async is one partition of an async datastore: its cells live on a MySQL storage cluster
// (Primary) whose master takes every write and whose minions receive them by MySQL's own
// asynchronous replication. Writes are buffered first (the Schemaless paper's buffered
// writes): each cell goes into the buffer table of BufferCopies other clusters' masters, then
// into the primary master; the write succeeds when both succeed, and with status buffered when
// only the buffer took it. A reaper per partition deletes a buffer row once its cell is on a
// minion of the primary cluster, and replays it into the primary master when it is missing
// there. Every node runs an Async per partition of an async datastore; they share the master
// through a MySQL named lock per partition and apply commands with the same state machine as
// raft mode (fsm.FSM.ApplyShared), so added_id is assigned on the master, gap-free and in
// commit order, and copied to the minions by row-based replication.
//
// The partition may move to another of its clusters while it runs (MovePartition): it re-reads
// its placement record every PlacementInterval and when a write or read is refused as moved,
// and switches its primary (and buffers) at once. Safe for concurrent use.
type Async struct {
	cfg   AsyncConfig
	all   []*StorageCluster // Primary then Buffers: every cluster of the datastore
	queue chan *asyncOp
	stop  chan struct{}
	wg    sync.WaitGroup

	place   atomic.Pointer[asyncPlacement]
	placeMu sync.Mutex // serializes refreshPlacement
	shards  atomic.Pointer[cells.ShardRange]

	// Used only by the writer goroutine.
	fsmMember *member // the member the FSM writes to, nil for none
	fsm       *fsm.FSM

	mu     sync.Mutex
	stores map[storeKey]*storage.PartitionStore

	replayed, reaped, conflicts atomic.Int64
	moved                       atomic.Int64 // operations refused as moved
	depth                       atomic.Int64
	oldest                      atomic.Int64 // unix micros of the oldest buffered cell seen, 0 none

	// Used only by the reaper goroutine: what its passes last saw in each buffer cluster, kept
	// for a cluster a pass could not read (see reapPass).
	seen map[*StorageCluster]bufferSeen
}

// asyncOp is one command waiting for the writer.
type asyncOp struct {
	data []byte
	// prepare, when set, runs on the master's connection after the partition's lock is taken
	// and before the command is applied, and returns the command to apply instead of data (nil:
	// nothing to apply; the op's response is then empty). Its error fails the op as
	// ErrUnavailable, with nothing applied. An op with prepare is applied in a batch of its own
	// (erase.go: an erasure deletes the row's buffered copies, a replay checks that its rows are
	// still buffered, each under the lock, so neither sees the other half done).
	prepare func(ctx context.Context) ([]byte, error)
	done    chan asyncResult // buffered, one result
}

type asyncResult struct {
	res *fsm.Response
	err error
}

// OpenAsync starts the partition's writer and reaper and returns at once.
func OpenAsync(cfg AsyncConfig) (*Async, error) {
	cfg.ensureDefaults()
	if cfg.Primary == nil || cfg.Datastore == "" {
		return nil, errors.New("partition: AsyncConfig needs Datastore and Primary")
	}
	if cfg.BufferCopies > len(cfg.Buffers) {
		return nil, fmt.Errorf("partition: %d buffer copies need as many buffer clusters, have %d", cfg.BufferCopies, len(cfg.Buffers))
	}
	a := &Async{cfg: cfg, queue: make(chan *asyncOp, 4096), stop: make(chan struct{}),
		stores: map[storeKey]*storage.PartitionStore{}, seen: map[*StorageCluster]bufferSeen{}}
	a.all = append([]*StorageCluster{cfg.Primary}, cfg.Buffers...)
	a.shards.Store(&cfg.Shards)
	if a.cfg.Placement == nil {
		a.cfg.Placement = MastersPlacement(a.all, cfg.Datastore, cfg.Partition)
	}
	a.place.Store(&asyncPlacement{primary: cfg.Primary, buffers: cfg.Buffers})
	a.wg.Add(2)
	go a.writeLoop()
	go a.placementLoop()
	if cfg.BufferCopies > 0 {
		a.wg.Add(1)
		go a.reapLoop()
	}
	return a, nil
}

// Shards returns the shard range the partition serves (AsyncConfig.Shards, until SetShards).
// Safe from any goroutine.
func (a *Async) Shards() cells.ShardRange { return *a.shards.Load() }

// SetShards makes r the shard range the partition serves, after a split in place gave the
// rest to a new partition (SplitAsync): the reaper then reaps the buffer rows of r only,
// erasures and queries are bounded by r, and the partition's open stores are told. The state
// machine needs no telling: it reloads the range the split stored (fsm.RangeKey) when it finds
// the applied index moved, under the partition's lock. Safe from any goroutine.
func (a *Async) SetShards(r cells.ShardRange) {
	a.shards.Store(&r)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ps := range a.stores {
		ps.SetShards(r)
	}
}

// Close stops the writer and the reaper; queued commands fail with ErrClosed. The storage
// clusters stay open (they are shared).
func (a *Async) Close() error {
	close(a.stop)
	a.wg.Wait()
	return nil
}

// Put applies one write to the partition and returns its outcome. An atomic or conditional
// write runs on the primary master alone (putAtomic). Otherwise, with buffered
// writes each cell is first stored in the buffer of BufferCopies other clusters' masters (the
// same clusters for the same key, so a second body for a buffered key is a conflict), then the
// cells are applied on the primary master. A cell the primary master did not take gets
// cells.StatusBuffered: it is durable and becomes readable when the reaper replays it. Blocks
// until done or ctx ends.
//
// Errors: ErrUnavailable (nothing written: no buffer cluster took the cells, or, without
// buffered writes, no master); ErrIndeterminate (some cells may be written: a buffer failed
// after others took cells, or, without buffered writes, the master failed at commit or ctx
// ended). Every outcome is safe to retry.
func (a *Async) Put(ctx context.Context, w command.Write) (command.WriteResult, error) {
	if len(w.Cells) == 0 {
		return command.WriteResult{}, nil
	}
	if err := (&command.Append{Writes: []command.Write{w}}).Validate(); err != nil {
		return command.WriteResult{}, err
	}
	if w.IsAtomic() {
		return a.putAtomic(ctx, w)
	}
	cs := w.Cells
	now := time.Now().UTC().Truncate(time.Microsecond)
	results := make([]cells.Result, len(cs))
	pending := make([]int, 0, len(cs))
	if a.cfg.BufferCopies == 0 {
		for i := range cs {
			pending = append(pending, i)
		}
	} else {
		var err error
		if pending, err = a.buffer(ctx, cs, w.Origin, now, results); err != nil {
			return command.WriteResult{}, err
		}
	}
	if len(pending) == 0 {
		return command.WriteResult{Cells: results}, nil
	}
	sub := command.Write{Cells: make([]command.Cell, len(pending)), Origin: w.Origin}
	for j, i := range pending {
		sub.Cells[j] = cs[i]
	}
	if len(pending) == len(cs) {
		// The master records the outcome under the write's ID only when it gets the whole
		// write: a retry whose buffers refused other cells would be another write.
		sub.ID = w.ID
	}
	data, err := command.Encode(&command.Append{CreatedAt: now, Writes: []command.Write{sub}})
	if err != nil {
		return command.WriteResult{}, err
	}
	res, err := a.apply(ctx, data)
	if err == nil {
		var ws []command.WriteResult
		if ws, err = fsm.Unwrap[[]command.WriteResult](res); res.Err != nil {
			// A refused command (a shard out of range: the partition split, and the node
			// routes the write again): nothing is on the master, and the buffered copies go.
			if derr := a.dropBuffered(ctx, cs, pending, now); derr != nil {
				return command.WriteResult{}, fmt.Errorf("%w: refused (%s), but its buffered copies could not all be deleted (a reaper may replay them): %s", ErrIndeterminate, res.Err, derr)
			}
			return command.WriteResult{}, res.Err
		}
		switch {
		case err != nil:
		case len(ws) == 1 && len(ws[0].Cells) == len(pending):
			for j, i := range pending {
				results[i] = ws[0].Cells[j]
			}
			return command.WriteResult{Cells: results, Replayed: ws[0].Replayed}, nil
		case len(ws) == 1 && ws[0].KeyReused:
			// The master refused the write; its buffered copies must not be replayed.
			if err := a.dropBuffered(ctx, cs, pending, now); err != nil {
				return command.WriteResult{}, fmt.Errorf("%w: refused for a reused idempotency key, but its buffered copies could not all be deleted (the reaper may replay them): %s", ErrIndeterminate, err)
			}
			return ws[0], nil
		case len(ws) == 1 && ws[0].Violation != nil:
			// Refused by a schema the node did not know yet: nothing is on the master, and the
			// reaper drops the buffered copies when its replay is refused alike.
			return violationOf(ws[0], pending), nil
		default:
			err = fmt.Errorf("partition: unexpected results for %d cells", len(pending))
		}
	}
	if a.cfg.BufferCopies == 0 {
		return command.WriteResult{}, err
	}
	// The primary master did not answer: the cells are durable in the buffers.
	a.cfg.Logger.Debug("partition: write buffered", "datastore", a.cfg.Datastore, "partition", a.cfg.Partition, "cells", len(pending), "error", err)
	for _, i := range pending {
		results[i] = cells.Result{Status: cells.StatusBuffered, CreatedAt: now}
	}
	a.checkConflictsOnMinion(ctx, cs, pending, results)
	return command.WriteResult{Cells: results}, nil
}

// putAtomic applies an atomic or conditional write on the primary master alone, in one
// transaction of the state machine, which checks its conditions under the partition's lock: a
// buffer cannot check a condition, so with no master the write is refused (ErrUnavailable,
// nothing written). Once the master committed it, its cells are copied into BufferCopies
// buffer clusters, as every acknowledged write is; if that fails the answer is
// ErrIndeterminate (the write is on the master, and a retry with the same ID answers its
// outcome and copies the cells again).
func (a *Async) putAtomic(ctx context.Context, w command.Write) (command.WriteResult, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	data, err := command.Encode(&command.Append{CreatedAt: now, Writes: []command.Write{w}})
	if err != nil {
		return command.WriteResult{}, err
	}
	res, err := a.apply(ctx, data)
	if err != nil {
		if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrClosed) {
			return command.WriteResult{}, err
		}
		return command.WriteResult{}, fmt.Errorf("%w: primary master: %w", ErrUnavailable, err)
	}
	ws, err := fsm.Unwrap[[]command.WriteResult](res)
	if err != nil {
		return command.WriteResult{}, err
	}
	if len(ws) != 1 {
		return command.WriteResult{}, fmt.Errorf("%w: %d results for one write", fsm.ErrUnexpectedResponse, len(ws))
	}
	out := ws[0]
	if !out.Applied() || a.cfg.BufferCopies == 0 {
		return out, nil
	}
	var copies []command.Cell
	var at []time.Time
	for i, r := range out.Cells {
		if r.Status == cells.StatusCreated || r.Status == cells.StatusExists {
			copies = append(copies, w.Cells[i])
			at = append(at, r.CreatedAt)
		}
	}
	if len(copies) == 0 {
		return out, nil
	}
	created := at[0]
	if created.IsZero() {
		created = now
	}
	if _, err := a.buffer(ctx, copies, w.Origin, created, make([]cells.Result, len(copies))); err != nil {
		return command.WriteResult{}, fmt.Errorf("%w: committed on the primary master, but the buffer copies failed: %s", ErrIndeterminate, err)
	}
	return out, nil
}

// buffer stores every cell (of origin origin, "" for this cluster's) in BufferCopies buffer
// clusters and returns the cells still to be
// written to the primary (those not refused as conflicts by a buffer). Cells go to the buffer
// clusters in the order their keys prefer (bufferOrder), one batch per cluster per round: one
// multi-row insert and one lookup, whatever the number of cells.
func (a *Async) buffer(ctx context.Context, cs []command.Cell, origin string, now time.Time, results []cells.Result) ([]int, error) {
	buffers := a.placement().buffers
	copies := make([]int, len(cs))
	conflict := make([]bool, len(cs))
	orders := make([][]*StorageCluster, len(cs))
	for i := range cs {
		orders[i] = bufferOrder(buffers, cs[i].Key)
	}
	stored := false // some cell may be in a buffer
	var lastErr error
	for round := 0; round < len(buffers); round++ {
		groups := map[*StorageCluster][]int{}
		var clusters []*StorageCluster
		for i := range cs {
			if conflict[i] || copies[i] >= a.cfg.BufferCopies {
				continue
			}
			bc := orders[i][round]
			if _, ok := groups[bc]; !ok {
				clusters = append(clusters, bc)
			}
			groups[bc] = append(groups[bc], i)
		}
		for _, bc := range clusters {
			idx := groups[bc]
			_, m, err := bc.masterMember(ctx)
			if err != nil {
				lastErr = err
				continue
			}
			batch := make([]storage.BufferedCell, len(idx))
			for j, i := range idx {
				batch[j] = storage.BufferedCell{Datastore: a.cfg.Datastore, Partition: a.cfg.Partition, Shard: cs[i].Shard,
					Cell: cells.Cell{Key: cs[i].Key, Body: cs[i].Body, CreatedAt: now, Origin: origin}}
			}
			var same []bool
			err = m.run(func() error {
				st, err := m.writeStore(ctx, bc)
				if err != nil {
					return err
				}
				same, err = st.PutBufferedBatch(ctx, batch)
				return err
			})
			if err != nil {
				lastErr = err
				stored = stored || !errors.Is(err, ErrUnavailable)
				continue
			}
			stored = true
			for j, i := range idx {
				if same[j] {
					copies[i]++
				} else {
					conflict[i] = true
				}
			}
		}
	}
	pending := make([]int, 0, len(cs))
	for i := range cs {
		switch {
		case conflict[i]:
			results[i] = cells.Result{Status: cells.StatusConflict}
		case copies[i] < a.cfg.BufferCopies:
			if stored && errors.Is(lastErr, ErrUnavailable) {
				// The last buffer was unavailable, but the outcome is not: keep its text
				// only, so that the error is of one class.
				return nil, fmt.Errorf("%w: cell %d: only %d of %d buffer copies: %s", ErrIndeterminate, i, copies[i], a.cfg.BufferCopies, lastErr)
			}
			if stored {
				return nil, fmt.Errorf("%w: cell %d: only %d of %d buffer copies: %w", ErrIndeterminate, i, copies[i], a.cfg.BufferCopies, lastErr)
			}
			return nil, fmt.Errorf("%w: no buffer cluster took the write: %w", ErrUnavailable, lastErr)
		default:
			pending = append(pending, i)
		}
	}
	return pending, nil
}

// bufferOrder returns the buffer clusters in the order a cell's key prefers them: a rotation
// chosen by a hash of the key, so that the buffers are spread evenly and a key always goes to
// the same buffer while it is up (and the partition does not move).
func bufferOrder(buffers []*StorageCluster, k cells.Key) []*StorageCluster {
	n := len(buffers)
	h := fnv.New32a()
	_, _ = h.Write(k.RowKey[:])
	_, _ = h.Write([]byte(k.ColumnKey))
	var rk [8]byte
	for i := 0; i < 8; i++ {
		rk[i] = byte(k.RefKey >> (8 * i))
	}
	_, _ = h.Write(rk[:])
	start := int(h.Sum32() % uint32(n))
	out := make([]*StorageCluster, n)
	for i := range out {
		out[i] = buffers[(start+i)%n]
	}
	return out
}

// checkConflictsOnMinion turns buffered results into conflicts where a minion of the primary
// already holds the key with another body (best effort: minions may lag).
func (a *Async) checkConflictsOnMinion(ctx context.Context, cs []command.Cell, pending []int, results []cells.Result) {
	_ = a.readWith(ctx, false, func(st *storage.PartitionStore) error {
		for _, i := range pending {
			c, err := st.GetCell(ctx, cs[i].Shard, cs[i].Key)
			if err != nil {
				continue
			}
			if same, err := cells.SameBody(c.Body, cs[i].Body); err == nil && !same {
				results[i] = cells.Result{Status: cells.StatusConflict, AddedID: c.AddedID, CreatedAt: c.CreatedAt}
			}
		}
		return nil
	})
}

// ApplyGroup applies one consumer-group command on the primary master. Errors:
// ErrUnavailable (no master: nothing applied), ErrIndeterminate (the master failed during the
// command), consumer.ErrBadCommand wrapped for a refused command.
func (a *Async) ApplyGroup(ctx context.Context, group string, cmd consumer.Command) (consumer.Result, error) {
	data, err := command.Encode(&command.Group{Group: group, CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Cmd: cmd})
	if err != nil {
		return consumer.Result{}, err
	}
	return applyAs[consumer.Result](ctx, a, data)
}

// ApplyIndex applies one index command on the primary master (see Raft.ApplyIndex for the
// commands). Errors as ApplyGroup's, and indexes.ErrBadCommand, ErrNotFound or ErrNotReady
// wrapped for a refused catalog command.
func (a *Async) ApplyIndex(ctx context.Context, cmd command.Index) (command.IndexResult, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	cmd.CreatedAt = now
	if cmd.Op == command.IndexCatalog {
		cmd.Catalog.Now = now
	}
	data, err := command.Encode(&cmd)
	if err != nil {
		return command.IndexResult{}, err
	}
	return applyAs[command.IndexResult](ctx, a, data)
}

// apply queues one encoded command for the writer and waits for its response.
func (a *Async) apply(ctx context.Context, data []byte) (*fsm.Response, error) {
	return a.applyOp(ctx, &asyncOp{data: data, done: make(chan asyncResult, 1)})
}

// applyAs is apply for a command whose outcome is a T (fsm.Unwrap): errors are apply's, or
// the command's refusal.
func applyAs[T any](ctx context.Context, a *Async, data []byte) (T, error) {
	res, err := a.apply(ctx, data)
	if err != nil {
		var zero T
		return zero, err
	}
	return fsm.Unwrap[T](res)
}

// applyOp queues op for the writer and waits for its response.
func (a *Async) applyOp(ctx context.Context, op *asyncOp) (*fsm.Response, error) {
	select {
	case a.queue <- op:
	case <-a.stop:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
	select {
	case r := <-op.done:
		return r.res, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrIndeterminate, ctx.Err())
	}
}

// writeLoop takes the queued commands, as many as are waiting (up to MaxBatchCommands), and
// applies them in one transaction on the master under the partition's lock.
func (a *Async) writeLoop() {
	defer a.wg.Done()
	var held *asyncOp // an op with prepare met while draining: the next batch, alone
	for {
		var batch []*asyncOp
		if held != nil {
			batch, held = append(batch, held), nil
		} else {
			select {
			case op := <-a.queue:
				batch = append(batch, op)
			case <-a.stop:
				a.failQueued()
				return
			}
		}
	drain:
		for len(batch) < a.cfg.MaxBatchCommands && batch[0].prepare == nil {
			select {
			case op := <-a.queue:
				if op.prepare != nil {
					held = op
					break drain
				}
				batch = append(batch, op)
			default:
				break drain
			}
		}
		res, err := a.applyBatch(batch)
		for i, op := range batch {
			if err != nil {
				op.done <- asyncResult{err: err}
			} else {
				op.done <- asyncResult{res: res[i]}
			}
		}
		select {
		case <-a.stop:
			if held != nil {
				held.done <- asyncResult{err: ErrClosed}
			}
			a.failQueued()
			return
		default:
		}
	}
}

func (a *Async) failQueued() {
	for {
		select {
		case op := <-a.queue:
			op.done <- asyncResult{err: ErrClosed}
		default:
			return
		}
	}
}

// applyBatch applies the batch on the primary master. A batch refused as moved (the
// partition is being switched to another storage cluster) is retried on the primary its
// placement names, re-reading the placement, for up to MovedWait. Errors: ErrUnavailable when
// nothing was written (no master; or still refused as moved, wrapping storage.ErrMoved),
// ErrIndeterminate when the transaction failed on its way.
func (a *Async) applyBatch(batch []*asyncOp) ([]*fsm.Response, error) {
	datas := make([][]byte, len(batch))
	for i, op := range batch {
		datas[i] = op.data
	}
	prepare := batch[0].prepare // set only on a batch of one
	retry := a.movedRetry()
	for {
		pl := a.placement()
		res, err := a.applyOn(pl.primary, datas, prepare)
		if !errors.Is(err, storage.ErrMoved) || !retry.again(context.Background(), pl) {
			return res, err
		}
	}
}

// applyOn applies the batch on the master of c, under the partition's named lock, with the
// command prepare returns instead when prepare is set (a batch of one; see asyncOp).
func (a *Async) applyOn(c *StorageCluster, datas [][]byte, prepare func(context.Context) ([]byte, error)) ([]*fsm.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.LockWait+10*time.Second)
	defer cancel()
	_, m, err := c.masterMember(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var res []*fsm.Response
	var moved error   // kept out of the circuit breaker: the master answered
	var prepErr error // kept out too: it concerns other clusters, or a refusal
	sent := false
	err = m.run(func() error {
		st, err := m.writeStore(ctx, c)
		if err != nil {
			return err
		}
		if a.fsmMember != m || a.fsm == nil {
			ps, err := a.partitionStore(ctx, c, st, m, true)
			if err != nil {
				return err
			}
			f, err := fsm.New(ctx, fsm.Config{Store: ps, Logger: a.cfg.Logger, StoreAttempts: 1, OnFatal: func(error) {}})
			if err != nil {
				return err
			}
			a.fsm, a.fsmMember = f, m
		}
		unlock, err := st.Lock(ctx, asyncLockName(c.cfg.Prefix, a.cfg.Datastore, a.cfg.Partition), a.cfg.LockWait)
		if err != nil {
			return err
		}
		defer unlock()
		if prepare != nil {
			d, err := prepare(ctx)
			switch {
			case err != nil:
				prepErr = err
				return nil
			case d == nil:
				res = []*fsm.Response{{}}
				return nil
			}
			datas = [][]byte{d}
		}
		sent = true
		res, err = a.fsm.ApplyShared(ctx, datas)
		if errors.Is(err, storage.ErrMoved) {
			moved, err = err, nil
		}
		return err
	})
	switch {
	case prepErr != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, prepErr)
	case moved != nil:
		// Refused before anything was written, by the check before the batch or the one
		// inside its transaction.
		return nil, fmt.Errorf("%w: master of %s: %w", ErrUnavailable, c.Name(), moved)
	case err != nil && sent:
		return nil, fmt.Errorf("%w: master of %s: %w", ErrIndeterminate, c.Name(), err)
	case err != nil:
		return nil, fmt.Errorf("%w: master of %s: %w", ErrUnavailable, c.Name(), err)
	}
	return res, nil
}

// asyncLockName is the MySQL named lock (GET_LOCK) that every writer of a partition takes on
// its master around a write transaction; MovePartition takes it too, to switch the partition.
func asyncLockName(prefix, datastore string, partition int) string {
	return fmt.Sprintf("%s_%s_p%d", prefix, datastore, partition)
}

// partitionStore returns the partition's store on member m of cluster c: on its write store
// (write) or its read store, opened on first use, fenced to c (storage SetFence: it refuses
// writes and reports reads as moved when the placement on m names another cluster).
func (a *Async) partitionStore(ctx context.Context, c *StorageCluster, st *storage.Store, m *member, write bool) (*storage.PartitionStore, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := storeKey{m, write}
	if ps, ok := a.stores[key]; ok {
		return ps, nil
	}
	ps, err := st.Partition(ctx, storage.PartitionID{Datastore: a.cfg.Datastore, Partition: a.cfg.Partition}, a.Shards())
	if err != nil {
		return nil, err
	}
	ps.SetFence(c.Name())
	a.stores[key] = ps
	return ps, nil
}

// storeKey names one of a member's partition stores.
type storeKey struct {
	m     *member
	write bool
}

// dropBuffered deletes, from every buffer cluster's master, the copies of the cells of cs at
// pending that this write buffered at now (DeleteBufferedAt), for a write the primary master
// refused. It returns the first failure; copies on a cluster it could not reach remain.
func (a *Async) dropBuffered(ctx context.Context, cs []command.Cell, pending []int, now time.Time) error {
	if a.cfg.BufferCopies == 0 || len(pending) == 0 {
		return nil
	}
	keys := make([]cells.Key, len(pending))
	for j, i := range pending {
		keys[j] = cs[i].Key
	}
	var errs []error
	for _, bc := range a.placement().buffers {
		_, m, err := bc.masterMember(ctx)
		if err == nil {
			err = m.run(func() error {
				st, err := m.writeStore(ctx, bc)
				if err != nil {
					return err
				}
				_, err = st.DeleteBufferedAt(ctx, a.cfg.Datastore, keys, now)
				return err
			})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", bc.Name(), err))
		}
	}
	return errors.Join(errs...)
}
