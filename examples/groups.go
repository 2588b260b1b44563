package examples

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/schemaless-db/schemaless/workload"
)

// How the example groups run in one process.
const (
	// Workers is the number of workers per group.
	Workers = 2
	// Concurrency is the shards a worker delivers at once: every shard it owns.
	Concurrency = 32
	// CatchUpLimit bounds the wait for the groups to catch up after an import.
	CatchUpLimit = 10 * time.Minute
)

// GroupsConfig configures StartGroups.
type GroupsConfig struct {
	// Client reaches the cluster (datastore trips); the workers and their writes use it.
	Client *client.Client
	// Logger gets the workers' logs; LogPath is where it writes, named in the messages.
	Logger  *slog.Logger
	LogPath string
	// Out gets the lines for the user: the groups started, a worker stopped, a group halted or
	// resumed, and Report's figures.
	Out io.Writer
}

// Groups runs Workers workers of each example group (NewTriggers) in this process, reading from
// the earliest position, until Stop. The workers run triggers.RunPages with the group's
// HandlePage and Handle: a page of a shard in one put_cells, cell by cell (parking) when the page
// fails.
type Groups struct {
	cfg    GroupsConfig
	w      *CellBatcher
	groups []*Trigger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}

	importEnd time.Time
	caught    []chan CatchUp // per group, the watcher's outcome
}

// StartGroups starts the workers (named dev-1, dev-2, ...) and prints a line naming the groups
// to cfg.Out. They run until Stop or ctx ends.
func StartGroups(ctx context.Context, cfg GroupsConfig) *Groups {
	ctx, cancel := context.WithCancel(ctx)
	d := &Groups{cfg: cfg, w: NewCellBatcher(ctx, cfg.Client), cancel: cancel, done: make(chan struct{})}
	d.groups = NewTriggers(d.w)
	for _, t := range d.groups {
		for i := 1; i <= Workers; i++ {
			wc := triggers.DefaultConfig()
			wc.Source, wc.Group, wc.Worker = cfg.Client.TriggerSource(), t.Group, "dev-"+strconv.Itoa(i)
			wc.ColumnKey, wc.Start = workload.ColumnBase, triggers.StartEarliest
			wc.Concurrency = Concurrency
			wc.Logger = cfg.Logger
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.runWorker(ctx, t, wc)
			}()
		}
	}
	go func() {
		d.wg.Wait()
		close(d.done)
	}()
	var names []string
	for _, t := range d.groups {
		names = append(names, fmt.Sprintf("%s (BASE -> %s)", t.Group, t.Column))
	}
	fmt.Fprintf(cfg.Out, "triggers: groups %s, %d workers each, log %s\n", strings.Join(names, ", "), Workers, cfg.LogPath)
	return d
}

// Done is closed once every worker has returned.
func (d *Groups) Done() <-chan struct{} { return d.done }

// runWorker runs one worker of t until ctx ends. When the group halts it says so (once per group
// and halt), waits for the halt to be lifted (`triggers parked retry` or `drop`), and runs again.
// Another error of Run (a bad configuration) is printed and ends the worker.
func (d *Groups) runWorker(ctx context.Context, t *Trigger, cfg triggers.Config) {
	out := d.cfg.Out
	for {
		err := triggers.RunPages(ctx, cfg, t.HandlePage, t.Handle)
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, triggers.ErrHalted) {
			fmt.Fprintf(out, "trigger group %s worker %s stopped: %v (see %s)\n", cfg.Group, cfg.Worker, err, d.cfg.LogPath)
			return
		}
		if t.halted.CompareAndSwap(false, true) {
			fmt.Fprintf(out, "trigger group %s halted: too many parked cells; see 'schemaless triggers parked list %s', then retry or drop them\n", t.Group, t.Group)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			st, err := d.cfg.Client.GroupStatus(ctx, t.Group)
			if err == nil && !st.Halted {
				break
			}
		}
		if t.halted.CompareAndSwap(true, false) {
			fmt.Fprintf(out, "trigger group %s resumed\n", t.Group)
		}
	}
}

// Stop stops the workers (each commits and leaves its group) and waits up to 10s for them.
func (d *Groups) Stop() {
	d.cancel()
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
	}
}

// Imported starts, for each group, a watcher of its catch-up with the cells written so far
// (WaitCaughtUp, at most CatchUpLimit), which Report reads.
func (d *Groups) Imported(ctx context.Context) {
	d.importEnd = time.Now()
	d.caught = make([]chan CatchUp, len(d.groups))
	for i, t := range d.groups {
		ch := make(chan CatchUp, 1)
		d.caught[i] = ch
		go func() {
			ctx, cancel := context.WithTimeout(ctx, CatchUpLimit)
			defer cancel()
			ch <- WaitCaughtUp(ctx, d.cfg.Client, t.Group)
		}()
	}
}

// Report waits for each group's catch-up watcher (started by Imported), prints a line per group,
// then checks the output cells of the first limit flights of path (0: all; airports from
// airportsPath) with CheckTriggerCells. It returns an error when a group did not catch up or a
// flight lacks its STATUS cell (or holds a wrong one).
func (d *Groups) Report(ctx context.Context, path, airportsPath string, limit int) error {
	out := d.cfg.Out
	var failed []string
	for i, t := range d.groups {
		var cu CatchUp
		select {
		case cu = <-d.caught[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if cu.Err != nil {
			failed = append(failed, t.Group)
			fmt.Fprintf(out, "trigger %s: not caught up: %v\n", t.Group, cu.Err)
		}
		t.print(out, cu, d.importEnd)
	}
	if n, cells := d.w.Sent(); n > 0 {
		fmt.Fprintf(out, "triggers: cells written in %d put_cells requests, %.1f cells each on average\n", n, float64(cells)/float64(n))
	}
	if len(failed) > 0 {
		return fmt.Errorf("trigger groups %s did not catch up", strings.Join(failed, ", "))
	}
	start := time.Now()
	chk, err := CheckTriggerCells(ctx, d.cfg.Client, path, airportsPath, limit)
	if err != nil {
		return fmt.Errorf("check trigger cells: %w", err)
	}
	chk.Print(out, time.Since(start))
	if !chk.OK() {
		return errors.New("trigger check failed: flights with a missing or wrong STATUS or FARE_ADJUSTMENT cell")
	}
	return nil
}

func (t *Trigger) print(out io.Writer, cu CatchUp, importEnd time.Time) {
	s := t.Stats()
	n := s.Delivered
	rate := ""
	if span := s.Last.Sub(s.First); n > 1 && span > 0 {
		rate = fmt.Sprintf(" in %.1fs (%.0f cells/s)", span.Seconds(), float64(n)/span.Seconds())
	}
	caught := "not caught up"
	if cu.Err == nil {
		caught = fmt.Sprintf("caught up %.1fs after the import's end", max(cu.At.Sub(importEnd), 0).Seconds())
	}
	fmt.Fprintf(out, "trigger %s: %s; %d cells delivered%s, %d duplicates, %d retried; %d %s cells written (%d created, %d exists, %d conflicts), %d without one\n",
		t.Group, caught, n, rate, s.Duplicates, s.Retried, s.Created+s.Exists, t.Column,
		s.Created, s.Exists, s.Conflicts, s.Skipped)
}

// CatchUp is when a group caught up with the cells written, or why it did not.
type CatchUp struct {
	At  time.Time
	Err error
}

// WaitCaughtUp polls every 500 ms until no BASE cell is left after the group's committed offsets
// in any shard, and returns when that was seen; or, as Err, triggers.ErrHalted (wrapped) when the
// group halted, or ctx's error (with the last read error) when ctx ends first.
//
// Why not the group's LagCells: lag counts every column of a shard's log, including the STATUS
// and FARE_ADJUSTMENT cells the triggers themselves write into the same shards (same row keys).
// A group filtered on BASE skips those, but its committed offset may stay at its last BASE cell,
// so LagCells need not reach 0 even when every BASE cell is handled. Instead this reads, in one
// batch log read filtered on BASE (strong, through the leaders), one cell after each shard's
// committed offset: none in any shard means every BASE cell written so far, the whole import
// included, was handled (an offset is committed only after the handler returned for every cell
// up to it, or parked it), so its output cell is stored.
func WaitCaughtUp(ctx context.Context, cl *client.Client, group string) CatchUp {
	strong := client.WithConsistency(client.ConsistencyStrong)
	var lastErr error
	for {
		ok, err := caughtUp(ctx, cl, group, strong)
		if err != nil && errors.Is(err, triggers.ErrHalted) {
			return CatchUp{Err: err}
		}
		if ok {
			return CatchUp{At: time.Now()}
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return CatchUp{Err: fmt.Errorf("%w (last error: %w)", ctx.Err(), lastErr)}
			}
			return CatchUp{Err: ctx.Err()}
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
