package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/workload"
)

// The example triggers of `schemaless dev`: two consumer groups on the BASE cells of trips.
// Their handlers are idempotent: the cell each writes is a deterministic function of the BASE
// cell (same row key, same ref key, a body computed from the BASE body only, no clock), so a
// redelivered BASE cell writes the identical cell again and the datastore answers "exists".
const (
	// columnStatus is the column of the billing group's cell: {"state":"billed",...}.
	columnStatus = "STATUS"
	// columnFareAdjustment is the column of the delay-compensation group's credit.
	columnFareAdjustment = "FARE_ADJUSTMENT"
	// compensationDelayMinutes: a flight that arrives more than this late gets a credit.
	compensationDelayMinutes = 60
	// devTriggerWorkers is the number of workers per group in the dev process.
	devTriggerWorkers = 2
	// catchUpLimit bounds the wait for the groups to catch up after an import.
	catchUpLimit = 10 * time.Minute
	// devTriggerConcurrency is the shards a worker delivers at once: every shard it owns.
	devTriggerConcurrency = 32
	// Writes of concurrent handlers are sent together (cellBatcher): up to batchSenders
	// put_cells requests in flight, each of up to batchMaxCells cells.
	batchSenders  = 2
	batchMaxCells = 200
)

// fareCents is the fare of a flight of distanceMiles: $25 plus $0.11 a mile, in cents. Integer
// arithmetic, so the fare never depends on floating-point rounding.
func fareCents(distanceMiles int64) int64 { return 2500 + 11*distanceMiles }

// creditCents is the credit of a flight that arrived delayMinutes late: $25 after more than 60
// minutes, $50 after more than 120, $100 after more than 180; 0 up to 60 minutes (or early).
func creditCents(delayMinutes int64) int64 {
	switch {
	case delayMinutes > 180:
		return 10000
	case delayMinutes > 120:
		return 5000
	case delayMinutes > compensationDelayMinutes:
		return 2500
	}
	return 0
}

// usd writes a non-negative amount of cents as a JSON number of dollars with two decimals.
func usd(cents int64) json.Number {
	return json.Number(fmt.Sprintf("%d.%02d", cents/100, cents%100))
}

// billingStatus is the body of the STATUS cell the billing group writes.
type billingStatus struct {
	State         string      `json:"state"`
	DistanceMiles int64       `json:"distance_miles"`
	FareCents     int64       `json:"fare_cents"`
	FareUSD       json.Number `json:"fare_usd"`
}

// fareAdjustment is the body of the FARE_ADJUSTMENT cell the delay-compensation group writes.
type fareAdjustment struct {
	Reason       string      `json:"reason"`
	DelayMinutes int64       `json:"delay_minutes"`
	CreditCents  int64       `json:"credit_cents"`
	CreditUSD    json.Number `json:"credit_usd"`
}

// billingBody returns the STATUS body for a trip's BASE body (as cells.Body.Object decodes it):
// {"state":"billed","distance_miles":d,"fare_cents":c,"fare_usd":c/100}. It fails when the
// distance is missing, not an integer or negative.
func billingBody(base map[string]any) ([]byte, error) {
	d, err := intField(base, "distance")
	if err != nil {
		return nil, err
	}
	if d < 0 {
		return nil, fmt.Errorf("distance %d is negative", d)
	}
	c := fareCents(d)
	return json.Marshal(billingStatus{State: "billed", DistanceMiles: d, FareCents: c, FareUSD: usd(c)})
}

// compensationBody returns the FARE_ADJUSTMENT body for a trip's BASE body, and false when the
// flight arrived at most 60 minutes late or the body has no delay (no credit, nothing to write):
// {"reason":"arrival_delay","delay_minutes":d,"credit_cents":c,"credit_usd":c/100}. It fails when
// the delay is not an integer.
func compensationBody(base map[string]any) ([]byte, bool, error) {
	if _, ok := base["delay"]; !ok {
		return nil, false, nil
	}
	d, err := intField(base, "delay")
	if err != nil {
		return nil, false, err
	}
	c := creditCents(d)
	if c == 0 {
		return nil, false, nil
	}
	b, err := json.Marshal(fareAdjustment{Reason: "arrival_delay", DelayMinutes: d, CreditCents: c, CreditUSD: usd(c)})
	return b, err == nil, err
}

// intField reads an integer field of a decoded body.
func intField(obj map[string]any, name string) (int64, error) {
	v, ok := obj[name]
	if !ok {
		return 0, fmt.Errorf("body has no %q", name)
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	case int8:
		return int64(n), nil
	case int16:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case uint8:
		return int64(n), nil
	case uint16:
		return int64(n), nil
	case uint32:
		return int64(n), nil
	case uint64:
		if n <= 1<<63-1 {
			return int64(n), nil
		}
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, nil
		}
	}
	return 0, fmt.Errorf("body field %q is %v (%T), not an integer", name, v, v)
}

// derivation computes the cell a trigger writes for a BASE body, or false for none.
type derivation func(base map[string]any) (body []byte, write bool, err error)

// devTrigger is one example group: its handler, shared by its workers, and their counts.
type devTrigger struct {
	group  string
	column string // the column written
	derive derivation
	w      *cellBatcher

	delivered, retried, duplicates atomic.Int64
	created, exists, conflicts     atomic.Int64
	skipped                        atomic.Int64 // delivered cells that call for no write
	halted                         atomic.Bool  // the group halted and has not resumed

	mu          sync.Mutex
	handled     map[cells.Key]bool // BASE key -> its handler succeeded once
	first, last time.Time          // first and last delivery
}

func newDevTriggers(w *cellBatcher) []*devTrigger {
	return []*devTrigger{
		{group: "billing", column: columnStatus, w: w, handled: map[cells.Key]bool{},
			derive: func(base map[string]any) ([]byte, bool, error) {
				b, err := billingBody(base)
				return b, err == nil, err
			}},
		{group: "delay-compensation", column: columnFareAdjustment, w: w, handled: map[cells.Key]bool{},
			derive: compensationBody},
	}
}

// handle is the group's handler: it writes the derived cell under the BASE cell's row and ref
// key. "exists" (a redelivery) is success; "conflict" means the derivation is not deterministic,
// a bug: the error is retried and the cell finally parked.
func (t *devTrigger) handle(ctx context.Context, c cells.Cell) error {
	t.delivery(c.Key)
	err := t.write(ctx, c)
	if err == nil {
		t.mu.Lock()
		t.handled[c.Key] = true
		t.mu.Unlock()
	}
	return err
}

func (t *devTrigger) write(ctx context.Context, c cells.Cell) error {
	base, err := c.Body.Object()
	if err != nil {
		return fmt.Errorf("%s: %s: %w", t.group, c.Key, err)
	}
	body, ok, err := t.derive(base)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", t.group, c.Key, err)
	}
	if !ok {
		t.skipped.Add(1)
		return nil
	}
	res, err := t.w.put(ctx, client.CellWrite{Key: cells.Key{RowKey: c.RowKey, ColumnKey: t.column, RefKey: c.RefKey}, Body: body})
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", t.group, err)
	case res.Status == wire.StatusConflict:
		t.conflicts.Add(1)
		return fmt.Errorf("%s: %s/%s/%d holds another body than %s: %w", t.group, c.RowKey, t.column, c.RefKey, body, client.ErrConflict)
	case res.Status == wire.StatusCreated:
		t.created.Add(1)
	default:
		t.exists.Add(1)
	}
	return nil
}

// delivery counts one handler call: a duplicate when the cell was handled before, a retry when
// an earlier call for it failed.
func (t *devTrigger) delivery(k cells.Key) {
	t.delivered.Add(1)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	ok, seen := t.handled[k]
	switch {
	case ok:
		t.duplicates.Add(1)
	case seen:
		t.retried.Add(1)
	default:
		t.handled[k] = false
	}
}

// devTriggers runs the example groups in the dev process.
type devTriggers struct {
	cl     *client.Client
	w      *cellBatcher
	groups []*devTrigger
	cancel context.CancelFunc
	wg     sync.WaitGroup

	importEnd time.Time
	caught    []chan catchUp // per group, the watcher's outcome
}

// catchUp is when a group caught up with the import, or why it did not.
type catchUp struct {
	at  time.Time
	err error
}

// startDevTriggers starts devTriggerWorkers workers of each example group, logging to
// <data-dir>/triggers.log. They run until stop.
func startDevTriggers(ctx context.Context, cl *client.Client, f devFlags) (*devTriggers, error) {
	logPath := filepath.Join(f.dataDir, "triggers.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(f.logLevel))); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("--log-level %q: %w", f.logLevel, err)
	}
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithCancel(ctx)
	d := &devTriggers{cl: cl, w: newCellBatcher(ctx, cl), cancel: cancel}
	d.groups = newDevTriggers(d.w)
	for _, t := range d.groups {
		for i := 1; i <= devTriggerWorkers; i++ {
			cfg := triggers.DefaultConfig()
			cfg.Client, cfg.Group, cfg.Worker = cl, t.group, "dev-"+strconv.Itoa(i)
			cfg.ColumnKey, cfg.Start = workload.ColumnBase, triggers.StartEarliest
			cfg.Concurrency = devTriggerConcurrency
			cfg.Logger = logger
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				t.runWorker(ctx, cfg, logPath)
			}()
		}
	}
	go func() {
		d.wg.Wait()
		logFile.Close()
	}()
	var names []string
	for _, t := range d.groups {
		names = append(names, fmt.Sprintf("%s (BASE -> %s)", t.group, t.column))
	}
	fmt.Printf("triggers: groups %s, %d workers each, log %s\n", strings.Join(names, ", "), devTriggerWorkers, logPath)
	return d, nil
}

// runWorker runs one worker until ctx ends. When the group halts it says so (once per group and
// halt), waits for the halt to be lifted (`triggers parked retry` or `drop`), and runs again.
// Another error of Run (a bad configuration) is printed and ends the worker.
func (t *devTrigger) runWorker(ctx context.Context, cfg triggers.Config, logPath string) {
	for {
		err := triggers.Run(ctx, cfg, t.handle)
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, triggers.ErrHalted) {
			fmt.Printf("trigger group %s worker %s stopped: %v (see %s)\n", cfg.Group, cfg.Worker, err, logPath)
			return
		}
		if t.halted.CompareAndSwap(false, true) {
			fmt.Printf("trigger group %s halted: too many parked cells; see 'schemaless triggers parked list %s', then retry or drop them\n", t.group, t.group)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			st, err := cfg.Client.GroupStatus(ctx, t.group)
			if err == nil && !st.Halted {
				break
			}
		}
		if t.halted.CompareAndSwap(true, false) {
			fmt.Printf("trigger group %s resumed\n", t.group)
		}
	}
}

// stop stops the workers (each commits and leaves its group) and waits up to 10s for them.
func (d *devTriggers) stop() {
	d.cancel()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// imported starts, for each group, a watcher of its catch-up with the cells written so far.
func (d *devTriggers) imported(ctx context.Context) {
	d.importEnd = time.Now()
	d.caught = make([]chan catchUp, len(d.groups))
	for i, t := range d.groups {
		ch := make(chan catchUp, 1)
		d.caught[i] = ch
		go func() {
			ctx, cancel := context.WithTimeout(ctx, catchUpLimit)
			defer cancel()
			ch <- waitCaughtUp(ctx, d.cl, t.group)
		}()
	}
}

// waitCaughtUp polls until no BASE cell is left after the group's committed offsets in any
// shard, and returns when that was seen.
//
// Why not the group's LagCells: lag counts every column of a shard's log, including the STATUS
// and FARE_ADJUSTMENT cells the triggers themselves write into the same shards (same row keys).
// A group filtered on BASE skips those, but its committed offset may stay at its last BASE cell,
// so LagCells need not reach 0 even when every BASE cell is handled. Instead this reads, in one
// batch log read filtered on BASE (strong, through the leaders), one cell after each shard's
// committed offset: none in any shard means every BASE cell written so far, the whole import
// included, was handled (an offset is committed only after the handler returned for every cell
// up to it, or parked it), so its output cell is stored.
func waitCaughtUp(ctx context.Context, cl *client.Client, group string) catchUp {
	strong := client.WithConsistency(client.ConsistencyStrong)
	var lastErr error
	for {
		ok, err := caughtUp(ctx, cl, group, strong)
		if err != nil && errors.Is(err, triggers.ErrHalted) {
			return catchUp{err: err}
		}
		if ok {
			return catchUp{at: time.Now()}
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return catchUp{err: fmt.Errorf("%w (last error: %w)", ctx.Err(), lastErr)}
			}
			return catchUp{err: ctx.Err()}
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func caughtUp(ctx context.Context, cl *client.Client, group string, read client.ReadOption) (bool, error) {
	st, err := cl.GroupStatus(ctx, group, read)
	if err != nil {
		return false, err
	}
	if st.Halted {
		return false, fmt.Errorf("%w: %d cells parked (schemaless triggers parked list %s)", triggers.ErrHalted, len(st.Parked), group)
	}
	locs := make([]wire.ShardLocation, len(st.Shards))
	for i, s := range st.Shards {
		locs[i] = wire.ShardLocation{Shard: s.Shard, Location: max(s.Offset, 0)}
	}
	if len(locs) == 0 {
		return false, nil
	}
	resp, err := cl.ReadLogs(ctx, client.LogsRequest{Shards: locs, ColumnKey: workload.ColumnBase, Limit: 1}, read)
	if err != nil {
		return false, err
	}
	for _, p := range resp.Shards {
		if len(p.Cells) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// report waits for each group's catch-up watcher, prints a line per group, then checks the
// output cells of every imported flight. It returns an error when a group did not catch up or a
// flight lacks its STATUS cell (or holds a wrong one).
func (d *devTriggers) report(ctx context.Context, f devFlags) error {
	var failed []string
	for i, t := range d.groups {
		var cu catchUp
		select {
		case cu = <-d.caught[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if cu.err != nil {
			failed = append(failed, t.group)
			fmt.Printf("trigger %s: not caught up: %v\n", t.group, cu.err)
		}
		t.print(cu, d.importEnd)
	}
	if n := d.w.batches.Load(); n > 0 {
		fmt.Printf("triggers: cells written in %d put_cells requests, %.1f cells each on average\n", n, float64(d.w.cells.Load())/float64(n))
	}
	if len(failed) > 0 {
		return fmt.Errorf("trigger groups %s did not catch up", strings.Join(failed, ", "))
	}
	start := time.Now()
	chk, err := checkTriggerCells(ctx, d.cl, f.importPath, f.airports, f.importOpts.limit)
	if err != nil {
		return fmt.Errorf("check trigger cells: %w", err)
	}
	chk.print(time.Since(start))
	if !chk.ok() {
		return errors.New("trigger check failed: flights with a missing or wrong STATUS or FARE_ADJUSTMENT cell")
	}
	return nil
}

func (t *devTrigger) print(cu catchUp, importEnd time.Time) {
	t.mu.Lock()
	first, last := t.first, t.last
	t.mu.Unlock()
	n := t.delivered.Load()
	rate := ""
	if span := last.Sub(first); n > 1 && span > 0 {
		rate = fmt.Sprintf(" in %.1fs (%.0f cells/s)", span.Seconds(), float64(n)/span.Seconds())
	}
	caught := "not caught up"
	if cu.err == nil {
		caught = fmt.Sprintf("caught up %.1fs after the import's end", max(cu.at.Sub(importEnd), 0).Seconds())
	}
	fmt.Printf("trigger %s: %s; %d cells delivered%s, %d duplicates, %d retried; %d %s cells written (%d created, %d exists, %d conflicts), %d without one\n",
		t.group, caught, n, rate, t.duplicates.Load(), t.retried.Load(), t.created.Load()+t.exists.Load(), t.column,
		t.created.Load(), t.exists.Load(), t.conflicts.Load(), t.skipped.Load())
}

// triggerCheck counts, over the imported flights, the output cells of the example groups.
type triggerCheck struct {
	flights                                         int
	statusMissing, statusWrong                      int
	adjustExpected, adjustMissing, adjustUnexpected int
	adjustWrong                                     int
	firstProblem                                    string
}

func (c triggerCheck) ok() bool {
	return c.statusMissing == 0 && c.statusWrong == 0 && c.adjustMissing == 0 && c.adjustUnexpected == 0 && c.adjustWrong == 0
}

func (c triggerCheck) print(el time.Duration) {
	fmt.Printf("trigger check of %d flights in %.1fs: STATUS missing %d, wrong %d; FARE_ADJUSTMENT %d expected (delay > %d min), missing %d, unexpected %d, wrong %d\n",
		c.flights, el.Seconds(), c.statusMissing, c.statusWrong, c.adjustExpected, compensationDelayMinutes, c.adjustMissing, c.adjustUnexpected, c.adjustWrong)
	if c.firstProblem != "" {
		fmt.Printf("  first problem: %s\n", c.firstProblem)
	}
}

// checkTriggerCells reads the STATUS and FARE_ADJUSTMENT cells of every flight of path (strong
// reads) and compares them with the bodies the handlers derive from the flight's BASE body.
func checkTriggerCells(ctx context.Context, cl *client.Client, path, airportsPath string, limit int) (triggerCheck, error) {
	var chk triggerCheck
	r, airports, closeFile, err := openFlights(path, airportsPath)
	if err != nil {
		return chk, err
	}
	defer closeFile()
	problem := func(format string, args ...any) {
		if chk.firstProblem == "" {
			chk.firstProblem = fmt.Sprintf(format, args...)
		}
	}
	_, err = workload.Import(ctx, r, airports, 200, limit, func(ctx context.Context, b []workload.Trip) error {
		keys := make([]client.GetKey, 0, 2*len(b))
		wantStatus := make(map[string][]byte, len(b))
		wantAdjust := make(map[string][]byte, len(b))
		for _, t := range b {
			body, err := cells.EncodeBody(t.Body)
			if err != nil {
				return err
			}
			base, err := body.Object()
			if err != nil {
				return err
			}
			rk := t.RowKey.String()
			if wantStatus[rk], err = billingBody(base); err != nil {
				return fmt.Errorf("%s: %w", rk, err)
			}
			adj, ok, err := compensationBody(base)
			if err != nil {
				return fmt.Errorf("%s: %w", rk, err)
			}
			if ok {
				wantAdjust[rk] = adj
				chk.adjustExpected++
			}
			keys = append(keys, client.GetKey{RowKey: t.RowKey, ColumnKey: columnStatus, RefKey: t.RefKey},
				client.GetKey{RowKey: t.RowKey, ColumnKey: columnFareAdjustment, RefKey: t.RefKey})
		}
		chk.flights += len(b)
		resp, err := cl.GetCells(ctx, keys, client.WithConsistency(client.ConsistencyStrong))
		if err != nil {
			return err
		}
		gotAdjust := map[string]bool{}
		for _, c := range resp.Cells {
			rk := strings.ToLower(c.RowKey)
			switch c.ColumnKey {
			case columnStatus:
				if err := sameJSON(c.Body, wantStatus[rk]); err != nil {
					chk.statusWrong++
					problem("%s/%s: %v", rk, c.ColumnKey, err)
				}
			case columnFareAdjustment:
				gotAdjust[rk] = true
				want, ok := wantAdjust[rk]
				if !ok {
					chk.adjustUnexpected++
					problem("%s/%s: unexpected %s", rk, c.ColumnKey, c.Body)
				} else if err := sameJSON(c.Body, want); err != nil {
					chk.adjustWrong++
					problem("%s/%s: %v", rk, c.ColumnKey, err)
				}
			}
		}
		for _, m := range resp.Missing {
			if m.ColumnKey == columnStatus {
				chk.statusMissing++
				problem("%s/%s missing", m.RowKey, m.ColumnKey)
			}
		}
		for rk := range wantAdjust {
			if !gotAdjust[rk] {
				chk.adjustMissing++
				problem("%s/%s missing", rk, columnFareAdjustment)
			}
		}
		return nil
	}, nil)
	return chk, err
}

// cellBatcher coalesces the cell writes of concurrent handlers into put_cells requests. A raft
// commit costs about the same for one cell as for a hundred (see BENCHMARKS.md: put_cell at 64
// clients 1,250 cells/s, put_cells of 100 7,800), and each handler writes one cell at a time, so
// the writes of the shards being delivered at once are sent together: a free sender takes every
// write waiting, up to batchMaxCells, and answers each from its own result. Safe for concurrent
// use; its senders stop when the context given to newCellBatcher ends.
type cellBatcher struct {
	cl   *client.Client
	reqs chan *batchedWrite

	batches, cells atomic.Int64 // put_cells requests sent and their cells
}

type batchedWrite struct {
	w    client.CellWrite
	done chan batchedResult // buffered: the sender never blocks on it
}

type batchedResult struct {
	res wire.PutResult
	err error
}

func newCellBatcher(ctx context.Context, cl *client.Client) *cellBatcher {
	b := &cellBatcher{cl: cl, reqs: make(chan *batchedWrite)}
	for i := 0; i < batchSenders; i++ {
		go b.send(ctx)
	}
	return b
}

// put writes one cell in the next batch and returns its result (Status created, exists or
// conflict) or the batch's error (see client.PutCells). It blocks until the batch is answered or
// ctx ends; a write whose caller gave up may still be applied, which is harmless for the
// idempotent writes of the triggers.
func (b *cellBatcher) put(ctx context.Context, w client.CellWrite) (wire.PutResult, error) {
	bw := &batchedWrite{w: w, done: make(chan batchedResult, 1)}
	select {
	case b.reqs <- bw:
	case <-ctx.Done():
		return wire.PutResult{}, ctx.Err()
	}
	select {
	case r := <-bw.done:
		return r.res, r.err
	case <-ctx.Done():
		return wire.PutResult{}, ctx.Err()
	}
}

func (b *cellBatcher) send(ctx context.Context) {
	for {
		var batch []*batchedWrite
		select {
		case bw := <-b.reqs:
			batch = append(batch, bw)
		case <-ctx.Done():
			return
		}
	drain:
		for len(batch) < batchMaxCells {
			select {
			case bw := <-b.reqs:
				batch = append(batch, bw)
			default:
				break drain
			}
		}
		ws := make([]client.CellWrite, len(batch))
		for i, bw := range batch {
			ws[i] = bw.w
		}
		b.batches.Add(1)
		b.cells.Add(int64(len(ws)))
		res, err := b.cl.PutCells(ctx, ws)
		for i, bw := range batch {
			if err != nil {
				bw.done <- batchedResult{err: err}
			} else {
				bw.done <- batchedResult{res: res[i]}
			}
		}
	}
}
