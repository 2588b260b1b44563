package fsm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/storage"
)

// Errors carried in a Response or returned by the FSM's methods.
var (
	// ErrAlreadyApplied: the entry is at or below the applied index the store held when the
	// replica started; it was applied before and is skipped.
	ErrAlreadyApplied = errors.New("fsm: entry already applied")
	// ErrFailed: the store failed and the FSM stopped applying; the replica must be restarted.
	ErrFailed = errors.New("fsm: state machine stopped after a storage failure")
	// ErrUnexpectedResponse: an apply future answered something that is not a *Response.
	ErrUnexpectedResponse = errors.New("fsm: unexpected apply response")
)

// Store is what the FSM needs of a partition's tables (*storage.PartitionStore).
type Store interface {
	Shards() cells.ShardRange
	SetShards(r cells.ShardRange)
	Applied(ctx context.Context) (storage.AppliedState, error)
	MaxAddedID(ctx context.Context, shard int) (int64, error)
	EnsureShards(ctx context.Context, shards []int) error
	Begin(ctx context.Context) (*storage.WriteTx, error)
	BeginSnapshot(ctx context.Context) (*storage.SnapshotTx, error)
	Restore(ctx context.Context, applied storage.AppliedState, next func() (storage.RestoreRecord, error), kv []storage.KV, indexes []storage.IndexTable) error
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
	EnsureIndex(ctx context.Context, t storage.IndexTable, shards []int) error
	DropIndex(ctx context.Context, name string) error
	IndexNames(ctx context.Context) ([]string, error)
}

// Config configures an FSM. Store is required; the rest have defaults (DefaultConfig).
type Config struct {
	// Store holds the partition's tables.
	Store Store
	// Logger receives storage retries and failures. Default slog.Default().
	Logger *slog.Logger
	// OnFatal is called once, from the FSM goroutine, when the store keeps failing. It should
	// stop the replica (the process, or the partition). Default: log only.
	OnFatal func(error)
	// StoreAttempts is how many times a failing batch transaction is tried before the FSM stops.
	// Default 5.
	StoreAttempts int
	// StoreBackoff is the wait after the first failed attempt, doubled after each. Default 100ms.
	StoreBackoff time.Duration
	// StoreTimeout bounds one attempt at a batch transaction. Default 60s.
	StoreTimeout time.Duration
	// SplitStore opens the store of partition right, to hold shards after a split of this
	// partition (command.Split), and returns it with the function that releases it once the
	// copy is in; the release makes the copy durable, as the parent's commit that hands the
	// shards over follows it. Nil: this replica refuses splits (a deterministic refusal, as every replica
	// of a partition runs with the same configuration).
	SplitStore func(ctx context.Context, right int, shards cells.ShardRange) (Store, func() error, error)
	// OnSplit, when set, is called on the FSM goroutine after a split is applied and committed.
	// It must not block: the partition's raft log waits for it.
	OnSplit func(SplitEvent)
	// OnSplitStart, when set, is called on the FSM goroutine when a split entry that splits
	// the partition's range begins to apply, before the right half's store gets its shards:
	// its owner can prepare what the right half's raft replica starts from meanwhile (its
	// base, which the entry alone determines). The split may still fail (a storage failure
	// stops the FSM) and is applied again after a crash, calling it again. It must not block.
	OnSplitStart func(SplitEvent)
	// MergeSource opens this node's store of partition right, the frozen right partition of a
	// merge into this one (command.Merge), and returns it with the function that releases it
	// once its state is copied. Nil: this replica refuses merges (deterministic, as for
	// SplitStore).
	MergeSource func(ctx context.Context, right int) (Store, func() error, error)
	// OnMerge, when set, is called on the FSM goroutine after a merge is applied and
	// committed. It must not block.
	OnMerge func(MergeEvent)
}

// DefaultConfig returns a Config with every default set and no Store.
func DefaultConfig() Config {
	return Config{Logger: slog.Default(), StoreAttempts: 5, StoreBackoff: 100 * time.Millisecond, StoreTimeout: 60 * time.Second}
}

// Validate reports every missing or out-of-range field.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("fsm: Config.Store is required"))
	}
	if c.StoreAttempts < 1 {
		errs = append(errs, errors.New("fsm: Config.StoreAttempts must be at least 1"))
	}
	if c.StoreBackoff < 0 || c.StoreTimeout <= 0 {
		errs = append(errs, errors.New("fsm: Config.StoreBackoff must be >= 0 and StoreTimeout > 0"))
	}
	return errors.Join(errs...)
}

func (c *Config) ensureDefaults() {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.StoreAttempts == 0 {
		c.StoreAttempts = d.StoreAttempts
	}
	if c.StoreBackoff == 0 {
		c.StoreBackoff = d.StoreBackoff
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = d.StoreTimeout
	}
	if c.OnFatal == nil {
		c.OnFatal = func(error) {}
	}
}

// Response is what ApplyBatch returns for each log entry: Result, the outcome of the entry's
// command, or Err, a deterministic refusal (command.ErrBadCommand, command.ErrShardOutOfRange,
// consumer.ErrBadCommand for a group command the coordinator refused, a refused catalog
// command's indexes error) or ErrAlreadyApplied or ErrFailed. Result holds, by command:
//
//	*command.Append  []command.WriteResult, one per write
//	*command.Group   consumer.Result
//	*command.Index   command.IndexResult
//	*command.Schema  command.SchemaResult
//	*command.Erase   command.EraseResult
//
// and nil for an entry that is not a command (a raft configuration or no-op entry).
type Response struct {
	Result any
	Err    error
}

// ResultOf waits for f and returns its entry's outcome as a T (see Response). Errors are
// raft's own (raft.ErrNotLeader, raft.ErrLeadershipLost, ...: the outcome may be unknown), the
// Response's Err, or ErrUnexpectedResponse when f answered something else. It is the only
// place that looks inside the interface{} raft hands back.
func ResultOf[T any](f raft.ApplyFuture) (T, error) {
	if err := f.Error(); err != nil {
		var zero T
		return zero, err
	}
	r, ok := f.Response().(*Response)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w: %T", ErrUnexpectedResponse, f.Response())
	}
	return Unwrap[T](r)
}

// Unwrap returns r's outcome as a T, r.Err, or ErrUnexpectedResponse when r holds another
// outcome (ApplyShared's responses, which no future wraps).
func Unwrap[T any](r *Response) (T, error) {
	var zero T
	if r.Err != nil {
		return zero, r.Err
	}
	t, ok := r.Result.(T)
	if !ok {
		return zero, fmt.Errorf("%w: %T, want %T", ErrUnexpectedResponse, r.Result, zero)
	}
	return t, nil
}

// FSM applies cell appends to one partition's store. See the package documentation for which
// goroutine calls what.
type FSM struct {
	cfg    Config
	shards cells.ShardRange

	// mu guards applied, appliedCh and failErr, which readers on other goroutines use.
	mu        sync.Mutex
	applied   storage.AppliedState
	appliedCh chan struct{} // closed and replaced when applied advances
	failErr   error
	// high holds the last added_id of each shard the FSM has written or looked up since it
	// started (or since the last Restore): the FSM goroutine assigns the next ids from it, long
	// polls read it (HighWater). Written only on the FSM goroutine, after COMMIT.
	high map[int]int64

	// Used only on the FSM goroutine.
	knownShards map[int]bool               // shards whose tables exist
	groups      map[string]*consumer.Group // consumer groups' coordinator state, loaded on first use
	idx         indexState                 // index tables, tombstones and catalog, loaded on first use
	pruneAt     time.Time                  // entry time of the next prune of request records
	recorded    int                        // request records stored since the last prune
	sch         schemaState                // column schemas, loaded on first use (schema.go)
}

var (
	_ raft.BatchingFSM = (*FSM)(nil)
	_ raft.FSMSnapshot = (*snapshot)(nil)
)

// New returns an FSM over cfg.Store, starting from the applied state stored there.
func New(ctx context.Context, cfg Config) (*FSM, error) {
	cfg.ensureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	applied, err := cfg.Store.Applied(ctx)
	if err != nil {
		return nil, fmt.Errorf("fsm: read applied index: %w", err)
	}
	shards := cfg.Store.Shards()
	if r, ok, err := loadRange(ctx, cfg.Store); err != nil {
		return nil, fmt.Errorf("fsm: read shard range: %w", err)
	} else if ok {
		shards = r
		cfg.Store.SetShards(r)
	}
	return &FSM{
		cfg:         cfg,
		shards:      shards,
		applied:     applied,
		appliedCh:   make(chan struct{}),
		knownShards: map[int]bool{},
		groups:      map[string]*consumer.Group{},
		high:        map[int]int64{},
	}, nil
}

// Applied returns the state the store reflects: every command entry at or below Applied().Index
// is applied and committed to SQL. Safe from any goroutine.
func (f *FSM) Applied() storage.AppliedState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// Failed returns nil while the FSM applies entries, and the storage error that stopped it after.
func (f *FSM) Failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failErr
}

// WaitApplied blocks until the applied index reaches index, ctx ends (ctx.Err()) or the FSM
// stops (ErrFailed). Safe from any goroutine.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		applied, ch, failed := f.applied.Index, f.appliedCh, f.failErr
		f.mu.Unlock()
		if applied >= index {
			return nil
		}
		if failed != nil {
			return fmt.Errorf("%w: %w", ErrFailed, failed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *FSM) setApplied(a storage.AppliedState) {
	f.mu.Lock()
	f.applied = a
	close(f.appliedCh)
	f.appliedCh = make(chan struct{})
	f.mu.Unlock()
}

func (f *FSM) fail(err error) {
	f.mu.Lock()
	first := f.failErr == nil
	if first {
		f.failErr = err
		close(f.appliedCh)
		f.appliedCh = make(chan struct{})
	}
	f.mu.Unlock()
	if first {
		f.cfg.Logger.Error("fsm: store failed, replica stops applying", "error", err)
		f.cfg.OnFatal(err)
	}
}

// Apply applies one entry (raft.FSM).
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// batch is the decoded command entries of one ApplyBatch transaction, one slice per command
// kind, each entry with its position in the batch and its outcome once applyTx sets it. Erase
// entries never share a transaction (applyWithErases).
type batch struct {
	appends []appendEntry
	groups  []groupEntry
	indexes []indexEntry
	schemas []schemaEntry
}

// appendEntry is a cell append of a batch and the outcome of each of its writes (applyWrites).
type appendEntry struct {
	pos int
	cmd *command.Append
	res []command.WriteResult
}

// groupEntry is a consumer-group command of a batch and its outcome (applyGroups).
type groupEntry struct {
	pos int
	cmd *command.Group
	res consumer.Result
	err error
}

// indexEntry is an index command of a batch and its outcome (applyIndexes).
type indexEntry struct {
	pos int
	cmd *command.Index
	res command.IndexResult
	err error
}

// schemaEntry is a schema command of a batch and its outcome (applySchemas).
type schemaEntry struct {
	pos int
	cmd *command.Schema
	res command.SchemaResult
}

// add decodes one command entry at batch position pos into b, or returns its refusal.
func (b *batch) add(pos int, data []byte, shards cells.ShardRange) error {
	c, err := command.Decode(data)
	if err == nil {
		err = c.CheckShards(shards)
	}
	if a, ok := c.(*command.Append); ok && err == nil {
		// An origin storage would refuse (the proposer checks it first): refused whole, on
		// every replica alike, rather than a storage failure that stops the replica.
		err = a.Validate()
	}
	if err != nil {
		return err
	}
	switch c := c.(type) {
	case *command.Append:
		b.appends = append(b.appends, appendEntry{pos: pos, cmd: c})
	case *command.Group:
		b.groups = append(b.groups, groupEntry{pos: pos, cmd: c})
	case *command.Index:
		b.indexes = append(b.indexes, indexEntry{pos: pos, cmd: c})
	case *command.Schema:
		b.schemas = append(b.schemas, schemaEntry{pos: pos, cmd: c})
	default:
		return fmt.Errorf("%w: a %T in a batch", command.ErrBadCommand, c)
	}
	return nil
}

// respond sets the Response of every entry of b in out.
func (b *batch) respond(out []interface{}) {
	for _, e := range b.appends {
		out[e.pos] = &Response{Result: e.res}
	}
	for _, e := range b.groups {
		out[e.pos] = outcome(e.res, e.err)
	}
	for _, e := range b.indexes {
		out[e.pos] = outcome(e.res, e.err)
	}
	for _, e := range b.schemas {
		out[e.pos] = &Response{Result: e.res}
	}
}

// cellCount is the number of cells of every append of b.
func (b *batch) cellCount() int {
	n := 0
	for _, e := range b.appends {
		n += e.cmd.CellCount()
	}
	return n
}

func outcome[T any](res T, err error) *Response {
	if err != nil {
		return &Response{Err: err}
	}
	return &Response{Result: res}
}

// ApplyBatch applies committed entries in one SQL transaction and returns a *Response per entry
// (raft.BatchingFSM). It blocks while the store is retried after a failure. A batch holding
// erase entries is split at them, so that every entry takes effect in log order (erase.go).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if out, ok := f.applyWithErases(logs); ok {
		return out
	}
	began := time.Now()
	out := make([]interface{}, len(logs))
	if err := f.Failed(); err != nil {
		for i := range out {
			out[i] = &Response{Err: ErrFailed}
		}
		return out
	}
	start := f.Applied()
	last := start
	var b batch
	for i, l := range logs {
		if l.Index <= start.Index {
			out[i] = &Response{Err: ErrAlreadyApplied}
			continue
		}
		last = storage.AppliedState{Index: l.Index, Term: l.Term}
		if l.Type != raft.LogCommand {
			out[i] = &Response{}
			continue
		}
		if err := b.add(i, l.Data, f.shards); err != nil {
			out[i] = &Response{Err: err}
		}
	}
	if last == start {
		return out
	}
	backoff := f.cfg.StoreBackoff
	for attempt := 1; ; attempt++ {
		err := f.applyTx(&b, last)
		if err == nil {
			b.respond(out)
			break
		}
		var amb *ambiguousCommitError
		if errors.As(err, &amb) || attempt >= f.cfg.StoreAttempts {
			f.fail(fmt.Errorf("fsm: apply entries %d..%d: %w", start.Index+1, last.Index, err))
			for i, r := range out {
				if r == nil {
					out[i] = &Response{Err: ErrFailed}
				}
			}
			return out
		}
		f.cfg.Logger.Warn("fsm: batch transaction failed, retrying", "attempt", attempt, "backoff", backoff, "error", err)
		time.Sleep(backoff)
		backoff *= 2
	}
	f.setApplied(last)
	observeApply(f.cfg.Store, began, len(logs), b.cellCount())
	return out
}

// ambiguousCommitError: COMMIT failed, so whether the batch is stored is unknown. Retrying could
// report other outcomes than a clean first apply, so the FSM stops instead.
type ambiguousCommitError struct{ err error }

func (e *ambiguousCommitError) Error() string { return "commit outcome unknown: " + e.err.Error() }
func (e *ambiguousCommitError) Unwrap() error { return e.err }

// applyTx runs one attempt at the batch and sets the results of each entry. The attempt is one
// transaction with every write's request ID taken for new, and, when one of them was recorded
// already (applyWrites), a second one that reads the request records first. It changes the
// FSM's in-memory state only when a transaction commits.
func (f *FSM) applyTx(b *batch, last storage.AppliedState) error {
	err := f.applyTxOnce(b, last, false)
	if errors.Is(err, errRequestStored) {
		requestRetries.WithLabelValues(storeLabels(f.cfg.Store)).Inc()
		err = f.applyTxOnce(b, last, true)
	}
	return err
}

// applyTxOnce is one attempt of applyTx; lookup is applyWrites'.
func (f *FSM) applyTxOnce(b *batch, last storage.AppliedState, lookup bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
	defer cancel()

	// Shards touched, in a fixed order.
	touched := map[int]bool{}
	for _, e := range b.appends {
		for _, w := range e.cmd.Writes {
			for _, c := range w.Cells {
				touched[c.Shard] = true
			}
			for _, c := range w.Conditions {
				touched[c.Shard] = true
			}
		}
	}
	shards := make([]int, 0, len(touched))
	var newShards []int
	for s := range touched {
		shards = append(shards, s)
		if !f.knownShards[s] {
			newShards = append(newShards, s)
		}
	}
	sort.Ints(shards)
	if len(newShards) > 0 {
		sort.Ints(newShards)
		if err := f.cfg.Store.EnsureShards(ctx, newShards); err != nil {
			return fmt.Errorf("ensure shards: %w", err)
		}
		for _, s := range newShards {
			f.knownShards[s] = true
		}
	}
	next := make(map[int]int64, len(shards))
	for _, s := range shards {
		id, ok := f.HighWater(s)
		if !ok {
			var err error
			if id, err = f.cfg.Store.MaxAddedID(ctx, s); err != nil {
				return fmt.Errorf("max added_id of shard %d: %w", s, err)
			}
			f.mu.Lock()
			f.high[s] = id
			f.mu.Unlock()
		}
		next[s] = id
	}

	hasIndex := len(b.indexes) > 0
	if hasIndex {
		if err := f.ensureIndexTables(ctx, b.indexes); err != nil {
			return err
		}
	}

	tx, err := f.cfg.Store.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()

	groups, err := f.applyGroups(ctx, tx, b.groups)
	if err != nil {
		return err
	}
	var idx *indexApply
	if hasIndex {
		if idx, err = f.applyIndexes(ctx, tx, b.indexes); err != nil {
			return err
		}
	}

	if err := f.applySchemas(ctx, tx, b); err != nil {
		return err
	}
	pruneAt, recorded := f.pruneAt, f.recorded
	if err := f.applyWrites(ctx, tx, b.appends, next, lookup); err != nil {
		f.pruneAt, f.recorded = pruneAt, recorded
		return err
	}
	if err := tx.SetApplied(ctx, last); err != nil {
		return fmt.Errorf("set applied index %d: %w", last.Index, err)
	}
	if err := tx.Commit(); err != nil {
		return &ambiguousCommitError{err}
	}
	for name, g := range groups {
		g.ResetDirty()
		f.groups[name] = g
	}
	f.installIndexes(ctx, idx)
	f.installSchemas()
	f.mu.Lock()
	for s, id := range next {
		f.high[s] = id
	}
	f.mu.Unlock()
	return nil
}

// resetCaches forgets what the FSM remembers of the store, after a Restore replaced it.
func (f *FSM) resetCaches() {
	f.knownShards = map[int]bool{}
	f.groups = map[string]*consumer.Group{}
	f.idx = indexState{}
	f.sch = schemaState{}
	f.mu.Lock()
	f.high = map[int]int64{}
	f.mu.Unlock()
}

// HighWater returns the highest added_id of shard as far as the FSM knows it without I/O, and
// whether it knows it: a shard the FSM has not written since it started (or since a Restore)
// is unknown, and its store must be asked (storage MaxAddedID). Safe from any goroutine.
func (f *FSM) HighWater(shard int) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.high[shard]
	return h, ok
}

// AppliedChanged returns a channel closed the next time the applied index advances (or the FSM
// stops). Long polls wait on it, then read again. Safe from any goroutine.
func (f *FSM) AppliedChanged() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.appliedCh
}
