package maintainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/triggers"
)

// Backend is what the maintainer needs of this process's cluster node (*cluster.Node): the
// catalog, reads, index writes and group progress, and (SourceBackend) what its workers' Source
// needs. Every method may be called from several goroutines at once.
type Backend interface {
	SourceBackend
	Datastore(name string) (*topology.DatastoreSpec, error)
	Catalog(ctx context.Context, ds string, c cluster.Consistency) (*indexes.Catalog, error)
	CatalogApply(ctx context.Context, ds string, cmd indexes.Command) (indexes.Result, error)
	FirstCells(ctx context.Context, ds string, shard int, column string, rowKeys []uuid.UUID, atLeast int64, c cluster.Consistency) (map[uuid.UUID]cells.Cell, error)
	PutIndexEntries(ctx context.Context, ds, table string, fields []indexes.Field, entries []command.IndexEntry) (int, error)
	EraseIndexEntries(ctx context.Context, ds, table string, rowKeys []uuid.UUID) (int, error)
	DropIndexTable(ctx context.Context, ds, table string) error
	GroupProgress(ctx context.Context, ds, group string, c cluster.Consistency) (cluster.GroupProgress, error)
}

var _ Backend = (*cluster.Node)(nil)

// Config configures Run. Backend and Datastores (or DatastoresFunc) are required; zero durations and sizes take the
// defaults of DefaultConfig.
type Config struct {
	// Backend is this process's cluster node.
	Backend Backend
	// Source, when set, returns the triggers.Source of datastore ds for the workers' log reads
	// and group commands (a client.TriggerSource, say, to run them over the HTTP API). Default:
	// NewSource(Backend, ds), in-process.
	Source func(ds string) triggers.Source
	// Datastores are maintained (raft mode datastores of the topology).
	Datastores []string
	// DatastoresFunc, when set, replaces Datastores: it is called at every poll and returns
	// the datastores to maintain then (a node's, as the cluster's catalog changes). The workers
	// of a datastore it no longer returns are stopped.
	DatastoresFunc func() []string
	// Worker names this node's workers in the groups (the node id). Default: triggers'.
	Worker string
	// PollInterval is the time between two reads of the catalog. Default 1s.
	PollInterval time.Duration
	// BatchSize bounds the cells of one log page, so of one upsert round. Default 500.
	BatchSize int
	// SessionTimeout of the workers' group membership. Default 3s.
	SessionTimeout time.Duration
	// ReadyLag: a building version is marked ready when no shard's oldest unhandled cell is
	// older than this. Default 2s.
	ReadyLag time.Duration
	// Logger receives starts, stops, violations and errors. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the maintainer's and its workers' metrics; nil registers none.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults, with no Backend or Datastores.
func DefaultConfig() Config {
	return Config{PollInterval: time.Second, BatchSize: 500, SessionTimeout: 3 * time.Second, ReadyLag: 2 * time.Second, Logger: slog.Default()}
}

func (c *Config) ensureDefaults() {
	d := DefaultConfig()
	if c.PollInterval == 0 {
		c.PollInterval = d.PollInterval
	}
	if c.BatchSize == 0 {
		c.BatchSize = d.BatchSize
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = d.SessionTimeout
	}
	if c.ReadyLag == 0 {
		c.ReadyLag = d.ReadyLag
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Source == nil {
		be := c.Backend
		c.Source = func(ds string) triggers.Source { return NewSource(be, ds) }
	}
}

// Validate reports every missing or out-of-range field, wrapping ErrInvalidConfig. Run calls
// it after setting the defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Backend == nil {
		bad("Backend is required")
	}
	if len(c.Datastores) == 0 && c.DatastoresFunc == nil {
		bad("Datastores or DatastoresFunc is required")
	}
	if c.PollInterval < 0 || c.SessionTimeout < 0 || c.ReadyLag < 0 {
		bad("PollInterval (%s), SessionTimeout (%s) and ReadyLag (%s) must not be negative", c.PollInterval, c.SessionTimeout, c.ReadyLag)
	}
	if c.BatchSize < 0 || c.BatchSize > 1000 {
		bad("BatchSize %d: want 1..1000", c.BatchSize)
	}
	return errors.Join(errs...)
}

// metrics are the maintainer's counters, labelled by datastore and index table.
type metrics struct {
	cells, entries, violations, mismatches, noShardValue, erased *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	mk := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"datastore", "index"})
	}
	m := &metrics{
		cells:        mk("schemaless_index_cells_total", "Source cells handled by the index maintainer (replays included)."),
		entries:      mk("schemaless_index_entries_changed_total", "Index entries created or changed by the maintainer's upserts."),
		violations:   mk("schemaless_index_shard_field_violations_total", "Cells that tried to change an entry's shard field (counted on each handling)."),
		mismatches:   mk("schemaless_index_type_mismatches_total", "Field values that did not convert to their index type and were stored as NULL."),
		noShardValue: mk("schemaless_index_no_shard_value_total", "Cells skipped because their row's first shard-field cell has no shard field value."),
		erased:       mk("schemaless_index_entries_erased_total", "Index entries deleted because their row was erased (tombstones in the shard logs)."),
	}
	if reg != nil {
		// A maintainer run again in the same registry (a node's StartMaintainer after
		// StopMaintainer) counts on in the series registered first.
		for _, c := range []**prometheus.CounterVec{&m.cells, &m.entries, &m.violations, &m.mismatches, &m.noShardValue, &m.erased} {
			if err := reg.Register(*c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, err
				}
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					*c = existing
				}
			}
		}
	}
	return m, nil
}

// runner is one index version's worker.
type runner struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Run maintains the indexes of cfg.Datastores until ctx ends, then stops its workers (they
// commit and leave their groups) and returns nil. Catalog and cluster errors are logged and
// retried at the next poll. It returns an error only for a bad cfg or metrics registration.
func Run(ctx context.Context, cfg Config) error {
	cfg.ensureDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return fmt.Errorf("maintainer: metrics: %w", err)
	}
	runners := map[string]*runner{} // by datastore + "/" + table
	defer func() {
		for _, r := range runners {
			r.cancel()
		}
		for _, r := range runners {
			<-r.done
		}
	}()
	t := time.NewTicker(cfg.PollInterval)
	defer t.Stop()
	for {
		list := cfg.Datastores
		if cfg.DatastoresFunc != nil {
			list = cfg.DatastoresFunc()
		}
		for _, ds := range list {
			reconcile(ctx, cfg, m, ds, runners)
		}
		stopGone(list, runners)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// stopGone stops the workers of the datastores not in list (dropped from the catalog).
func stopGone(list []string, runners map[string]*runner) {
	for key, r := range runners {
		ds, _, _ := strings.Cut(key, "/")
		if !slices.Contains(list, ds) {
			r.cancel()
			<-r.done
			delete(runners, key)
		}
	}
}

// reconcile starts the workers of the active versions of ds, stops the others, marks caught-up
// versions ready and finishes drops.
func reconcile(ctx context.Context, cfg Config, m *metrics, ds string, runners map[string]*runner) {
	log := cfg.Logger.With("datastore", ds)
	cat, err := cfg.Backend.Catalog(ctx, ds, cluster.Stale)
	if err != nil {
		if ctx.Err() == nil {
			log.Debug("maintainer: read catalog", "error", err)
		}
		return
	}
	active := map[string]bool{}
	for _, v := range cat.Active() {
		table := indexes.TableName(v.Definition.Table, v.Version)
		key := ds + "/" + table
		active[key] = true
		if _, ok := runners[key]; !ok {
			runners[key] = start(ctx, cfg, m, ds, v)
		}
		if v.State == indexes.StateBuilding {
			markReady(ctx, cfg, ds, v)
		}
	}
	for key, r := range runners {
		if len(key) > len(ds) && key[:len(ds)+1] == ds+"/" && !active[key] {
			r.cancel()
			<-r.done
			delete(runners, key)
		}
	}
	for _, v := range cat.Dropping() {
		table := indexes.TableName(v.Definition.Table, v.Version)
		if err := cfg.Backend.DropIndexTable(ctx, ds, table); err != nil {
			log.Warn("maintainer: drop index tables; retrying", "table", table, "error", err)
			continue
		}
		_, err := cfg.Backend.CatalogApply(ctx, ds, indexes.Command{Op: indexes.OpDropped, Name: v.Definition.Table, Version: v.Version})
		if err != nil {
			log.Warn("maintainer: mark dropped; retrying", "table", table, "error", err)
			continue
		}
		log.Info("maintainer: index version dropped", "table", table)
	}
}

// markReady marks v ready once its group has caught up with every shard's log.
func markReady(ctx context.Context, cfg Config, ds string, v indexes.Version) {
	p, err := cfg.Backend.GroupProgress(ctx, ds, indexes.GroupName(v.Definition.Table, v.Version), cluster.Stale)
	if err != nil {
		return // not created yet, or unavailable: the next poll tries again
	}
	for _, s := range p.Shards {
		if s.LagCells > 0 && (s.Offset < 0 || s.LagSeconds > cfg.ReadyLag.Seconds()) {
			return
		}
	}
	_, err = cfg.Backend.CatalogApply(ctx, ds, indexes.Command{Op: indexes.OpReady, Name: v.Definition.Table, Version: v.Version})
	if err != nil {
		cfg.Logger.Debug("maintainer: mark ready", "datastore", ds, "index", v.Definition.Table, "version", v.Version, "error", err)
		return
	}
	cfg.Logger.Info("maintainer: index version ready", "datastore", ds, "index", v.Definition.Table, "version", v.Version)
}

// start runs the worker of version v until its context is cancelled.
func start(ctx context.Context, cfg Config, m *metrics, ds string, v indexes.Version) *runner {
	vctx, cancel := context.WithCancel(ctx)
	r := &runner{cancel: cancel, done: make(chan struct{})}
	spec, err := cfg.Backend.Datastore(ds)
	h := &handler{be: cfg.Backend, ds: ds, table: indexes.TableName(v.Definition.Table, v.Version),
		fields: v.Definition.Fields(), columns: map[string]bool{}, m: m, log: cfg.Logger.With("datastore", ds, "index", v.Definition.Table, "version", v.Version)}
	h.batch = &batcher{be: cfg.Backend, ds: ds, table: h.table, fields: h.fields, m: m, timeout: 30 * time.Second}
	for _, c := range v.Definition.Columns() {
		h.columns[c] = true
	}
	tcfg := triggers.Config{
		Source: cfg.Source(ds), Group: indexes.GroupName(v.Definition.Table, v.Version), Worker: cfg.Worker,
		BatchSize: cfg.BatchSize, SessionTimeout: cfg.SessionTimeout, Registerer: cfg.Registerer, Logger: cfg.Logger,
		Consistency: triggers.ConsistencyStale, PollWait: time.Second, HaltThreshold: -1,
		// Every owned shard at once: a page waits for nothing but its own reads and writes.
		Concurrency: 64,
	}
	if cols := v.Definition.Columns(); len(cols) == 1 {
		tcfg.ColumnKey = cols[0]
	}
	go func() {
		defer close(r.done)
		if err != nil {
			h.log.Error("maintainer: unknown datastore", "error", err)
			return
		}
		h.shards = spec.Shards
		h.log.Info("maintainer: worker started", "group", tcfg.Group)
		for vctx.Err() == nil {
			err := triggers.RunBatch(vctx, tcfg, h.handle)
			if vctx.Err() != nil {
				break
			}
			h.log.Warn("maintainer: worker stopped; restarting", "error", err)
			select {
			case <-vctx.Done():
			case <-time.After(time.Second):
			}
		}
		h.log.Info("maintainer: worker stopped", "group", tcfg.Group)
	}()
	return r
}

// handler turns pages of a shard's log into index upserts for one index version.
type handler struct {
	be      Backend
	ds      string
	table   string
	fields  []indexes.Field
	columns map[string]bool
	shards  int
	m       *metrics
	log     *slog.Logger
	batch   *batcher
}

// handle is the triggers.BatchHandler: see the package documentation for the steps. A page
// holding tombstones (erased rows) is handled in log order: the cells before a tombstone (their
// upserts applied), then the erasure of the row's entries, then the rest.
func (h *handler) handle(ctx context.Context, shard int, page []cells.Cell) error {
	for len(page) > 0 {
		i := slices.IndexFunc(page, func(c cells.Cell) bool { return c.Key.IsTombstone() })
		if i < 0 {
			return h.handleCells(ctx, shard, page)
		}
		if err := h.handleCells(ctx, shard, page[:i]); err != nil {
			return err
		}
		var erased []uuid.UUID
		for ; i < len(page) && page[i].Key.IsTombstone(); i++ {
			erased = append(erased, page[i].Key.RowKey)
		}
		if err := h.erase(ctx, erased); err != nil {
			return err
		}
		page = page[i:]
	}
	return nil
}

// erase deletes the entries of erased rows from the version's table on every partition (an
// entry lives on the index shard of its shard field's value, which the row's cells no longer
// tell).
func (h *handler) erase(ctx context.Context, rowKeys []uuid.UUID) error {
	n, err := h.be.EraseIndexEntries(ctx, h.ds, h.table, rowKeys)
	if err != nil {
		return fmt.Errorf("erase the entries of %d rows: %w", len(rowKeys), err)
	}
	h.m.erased.With(prometheus.Labels{"datastore": h.ds, "index": h.table}).Add(float64(n))
	return nil
}

// handleCells turns cells of a page (no tombstone among them) into upserts and waits for them.
func (h *handler) handleCells(ctx context.Context, shard int, page []cells.Cell) error {
	shardCol := h.fields[0].Column
	var src []cells.Cell
	var rowKeys []uuid.UUID
	seen := map[uuid.UUID]bool{}
	hasShardCell := map[uuid.UUID]bool{}
	for _, c := range page {
		if !h.columns[c.Key.ColumnKey] {
			continue
		}
		src = append(src, c)
		if !seen[c.Key.RowKey] {
			seen[c.Key.RowKey] = true
			rowKeys = append(rowKeys, c.Key.RowKey)
		}
		if c.Key.ColumnKey == shardCol {
			hasShardCell[c.Key.RowKey] = true
		}
	}
	if len(src) == 0 {
		return nil
	}
	first, err := h.firstCells(ctx, shard, shardCol, rowKeys, page[len(page)-1].AddedID)
	if err != nil {
		return err
	}
	if len(h.columns) > 1 {
		extra, err := h.otherColumns(ctx, shardCol, rowKeys, hasShardCell)
		if err != nil {
			return err
		}
		src = append(src, extra...)
	}
	shardVals := map[uuid.UUID]any{}
	for rk, f := range first {
		obj, err := f.Body.Object()
		if err != nil {
			return fmt.Errorf("decode cell %s: %w", f.Key, err)
		}
		vals, _ := indexes.Extract(h.fields, shardCol, obj)
		shardVals[rk] = vals[0]
	}
	entries := make([]command.IndexEntry, 0, len(src))
	labels := prometheus.Labels{"datastore": h.ds, "index": h.table}
	for _, c := range src {
		h.m.cells.With(labels).Inc()
		sv := shardVals[c.Key.RowKey]
		if sv == nil {
			// No shard-field cell yet (its arrival brings this column's latest cell in), or it
			// carries no usable shard value: the row has no entry.
			if _, ok := first[c.Key.RowKey]; ok {
				h.m.noShardValue.With(labels).Inc()
			}
			continue
		}
		obj, err := c.Body.Object()
		if err != nil {
			return fmt.Errorf("decode cell %s: %w", c.Key, err)
		}
		vals, mismatched := indexes.Extract(h.fields, c.Key.ColumnKey, obj)
		if len(mismatched) > 0 {
			h.m.mismatches.With(labels).Add(float64(len(mismatched)))
			h.log.Debug("maintainer: values of the wrong type stored as NULL", "cell", c.Key.String(), "fields", mismatched)
		}
		values := make([]any, len(h.fields))
		values[0] = sv
		for i, v := range vals {
			if i != 0 {
				values[i] = v
			}
		}
		var violation int64
		if c.Key.ColumnKey == shardCol && vals[0] != sv {
			violation = c.AddedID // positive, and names the cell in the source shard's log
			h.m.violations.With(labels).Inc()
			h.log.Warn("maintainer: a cell changes the immutable shard field; the entry keeps its shard",
				"cell", c.Key.String(), "field", h.fields[0].Name, "entry_value", indexes.Format(h.fields[0].Type, sv),
				"cell_value", indexes.Format(h.fields[0].Type, vals[0]))
		}
		entries = append(entries, command.IndexEntry{
			Shard: int32(indexes.ShardOf(h.fields[0].Type, sv, h.shards)), RowKey: c.Key.RowKey, Values: values,
			Refs: map[string]int64{c.Key.ColumnKey: c.Key.RefKey}, Violation: violation,
		})
	}
	if len(entries) == 0 {
		return nil
	}
	if err := h.batch.put(ctx, entries); err != nil {
		return fmt.Errorf("upsert %d entries: %w", len(entries), err)
	}
	return nil
}

// firstCells reads the first cell of the shard field's column of each row key, from this
// node's replica first (any replica when it hosts none), one whose shard log reaches the page's
// last cell (added_id pageEnd): a cell found there is the row's first for good (a replica
// applies a shard's log in added_id order, so it holds every earlier cell, and every erasure
// up to the page: a first cell that an erasure before the page deleted is not found). Row keys
// it has no cell for, or all of them when no such replica answers, are read again from the
// leader.
func (h *handler) firstCells(ctx context.Context, shard int, shardCol string, rowKeys []uuid.UUID, pageEnd int64) (map[uuid.UUID]cells.Cell, error) {
	first, err := h.be.FirstCells(ctx, h.ds, shard, shardCol, rowKeys, pageEnd, cluster.Stale)
	if err != nil {
		h.log.Debug("maintainer: no replica reaches the page; reading first cells from the leader", "shard", shard, "error", err)
		first = map[uuid.UUID]cells.Cell{}
	}
	var missing []uuid.UUID
	for _, rk := range rowKeys {
		if _, ok := first[rk]; !ok {
			missing = append(missing, rk)
		}
	}
	if len(missing) == 0 {
		return first, nil
	}
	more, err := h.be.FirstCells(ctx, h.ds, shard, shardCol, missing, 0, cluster.Strong)
	if err != nil {
		return nil, fmt.Errorf("read first %s cells from the leader: %w", shardCol, err)
	}
	for rk, c := range more {
		first[rk] = c
	}
	return first, nil
}

// batcher groups the upserts of concurrent pages (one per shard) into one PutIndexEntries call,
// so one raft entry per index partition carries the work of many shards (group commit). One
// call is in flight at a time; pages that arrive meanwhile go together into the next. Merges
// commute, so the order of entries within a call does not matter.
type batcher struct {
	be      Backend
	ds      string
	table   string
	fields  []indexes.Field
	m       *metrics
	timeout time.Duration

	mu      sync.Mutex
	queue   []*pendingPut
	running bool
}

type pendingPut struct {
	entries []command.IndexEntry
	done    chan error // buffered, receives exactly one result
}

// put queues entries for the next call and waits for its outcome or ctx's end (then the
// entries may still be written: harmless, merges are idempotent).
func (b *batcher) put(ctx context.Context, entries []command.IndexEntry) error {
	p := &pendingPut{entries: entries, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go b.loop()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop sends the queued entries, one call at a time, until the queue is empty.
func (b *batcher) loop() {
	labels := prometheus.Labels{"datastore": b.ds, "index": b.table}
	for {
		b.mu.Lock()
		batch := b.queue
		b.queue = nil
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		var all []command.IndexEntry
		for _, p := range batch {
			all = append(all, p.entries...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		changed, err := b.be.PutIndexEntries(ctx, b.ds, b.table, b.fields, all)
		cancel()
		b.m.entries.With(labels).Add(float64(changed))
		for _, p := range batch {
			p.done <- err
		}
	}
}

// otherColumns reads the latest cell of every source column other than the shard field's for
// the rows whose shard-field cell is in the page.
func (h *handler) otherColumns(ctx context.Context, shardCol string, rowKeys []uuid.UUID, hasShardCell map[uuid.UUID]bool) ([]cells.Cell, error) {
	cols := make([]string, 0, len(h.columns))
	for c := range h.columns {
		if c != shardCol {
			cols = append(cols, c)
		}
	}
	sort.Strings(cols)
	var keys []cluster.GetKey
	for _, rk := range rowKeys {
		if !hasShardCell[rk] {
			continue
		}
		for _, col := range cols {
			keys = append(keys, cluster.GetKey{Key: cells.Key{RowKey: rk, ColumnKey: col}, Latest: true})
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	res, err := h.be.GetCells(ctx, h.ds, keys, cluster.Strong)
	if err != nil {
		return nil, fmt.Errorf("read latest cells of other columns: %w", err)
	}
	var out []cells.Cell
	for _, r := range res {
		if r.Found {
			out = append(out, r.Cell)
		}
	}
	return out, nil
}
