package bench

// The reaper workload of `schemaless bench` (target async): how fast the buffer of buffered
// writes drains while and after cells are written (drain), and how fast buffered cells are
// replayed into a master that comes back (replay).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/wire"
)

// Variants of the reaper workload.
const (
	reaperDrain  = "drain"
	reaperReplay = "replay"
)

// reaperPoll is how often the reaper workload reads the buffer depth and the nodes' counters
// while it waits (the depth during the writes is sampled every lagSampleInterval).
const reaperPoll = 20 * time.Millisecond

// ReaperFigures are the figures of the reaper workload (Result.Reaper). Times are in
// microseconds. "Rows" are buffer rows: each acknowledged cell creates Copies of them.
type ReaperFigures struct {
	// Variant is reaperDrain or reaperReplay.
	Variant string `json:"variant"`
	// Copies is the datastore's buffer copies per cell (buffer_clusters).
	Copies int `json:"copies"`
	// Written counts the acknowledged cells, Buffered those answered buffered (all of them in
	// the replay variant, normally none in the drain variant).
	Written  int64 `json:"written"`
	Buffered int64 `json:"buffered"`
	// WriteSeconds is the write phase, from the first request to the last answer; PutP50 and
	// PutP99 the latencies of its put_cells requests.
	WriteSeconds float64 `json:"write_seconds"`
	PutP50       int64   `json:"put_p50_us"`
	PutP99       int64   `json:"put_p99_us"`
	// RowsCreatedPerSec is Written*Copies / WriteSeconds; RowsReapedPerSec (drain) the rows
	// reaped during the writes: (Written*Copies - StartDepth) / WriteSeconds.
	RowsCreatedPerSec float64 `json:"rows_created_per_sec"`
	RowsReapedPerSec  float64 `json:"rows_reaped_per_sec,omitempty"`
	// PeakDepth is the largest buffer depth sampled during the writes (every 100 ms).
	PeakDepth int64 `json:"peak_depth"`
	// StartDepth is the buffer depth (rows of the datastore in the masters' buffer tables)
	// when the writes ended (drain) or when the master was unfenced (replay). Empty is the time
	// from then until the buffer tables held no row; EmptyRowsPerSec is StartDepth / Empty;
	// ReportedEmpty the time until every node reported buffer_depth 0 for every partition (the
	// nodes' figure is from their last reaper pass).
	StartDepth      int64   `json:"start_depth"`
	Empty           int64   `json:"empty_us"`
	EmptyRowsPerSec float64 `json:"empty_rows_per_sec"`
	ReportedEmpty   int64   `json:"reported_empty_us"`
	// Replay only, from the unfence: MasterSeen until every node sees the master again,
	// FirstReplay until the nodes' replayed counters first grow, LastReplay until they last
	// grow (before the buffer is empty). ReplayCellsPerSec is Replayed / (LastReplay -
	// FirstReplay): the replays alone, without the wait for the master or for the minions.
	// (A replay whose commit outlives the reaper's 30 s pass is not counted as replayed.)
	MasterSeen        int64   `json:"master_seen_us,omitempty"`
	FirstReplay       int64   `json:"first_replay_us,omitempty"`
	LastReplay        int64   `json:"last_replay_us,omitempty"`
	ReplayCellsPerSec float64 `json:"replay_cells_per_sec,omitempty"`
	// Reaped, Replayed and Conflicts are what the nodes' counters grew by, summed over the
	// nodes and partitions (every node runs a reaper per partition; a row two reapers delete at
	// once counts twice in Reaped).
	Reaped    int64 `json:"reaped"`
	Replayed  int64 `json:"replayed"`
	Conflicts int64 `json:"conflicts"`
	// Left is the buffer depth when the wait for an empty buffer gave up (0 normally);
	// Unreadable the written cells a strong read did not find at the end.
	Left       int64 `json:"left"`
	Unreadable int64 `json:"unreadable"`
}

// benchReaper runs one variant of the reaper workload with n put_cells requests in flight.
func benchReaper(ctx context.Context, e *asyncEnv, endpoints []string, variant string, n int, env *Env) (Result, error) {
	f := env.Config
	r := Result{Workload: workloadReaper, Clients: n}
	fig := &ReaperFigures{Variant: variant, Copies: e.bufferCopies()}
	r.Reaper = fig
	cl, err := newClient(endpoints, n)
	if err != nil {
		return r, err
	}
	if err := e.waitEmpty(ctx); err != nil {
		return r, err
	}
	base := e.counters()
	newKey := func() cells.Key { return cellKey(uuid.New()) }
	if variant == reaperReplay {
		if err := e.setReadOnly(ctx, 0, true); err != nil {
			return r, fmt.Errorf("fence cluster c0: %w", err)
		}
		fenced := true
		defer func() {
			if fenced {
				if err := e.setReadOnly(context.Background(), 0, false); err != nil {
					fmt.Fprintf(env.Stderr, "bench: reaper: unfence cluster c0: %v\n", err)
				}
			}
		}()
		newKey = func() cells.Key {
			for {
				if u := uuid.New(); e.onCluster(u, 0) {
					return cellKey(u)
				}
			}
		}
		wo, err := e.writePhase(ctx, cl, newKey, n, &r, f)
		if err != nil {
			return r, err
		}
		if err := sleepCtx(ctx, time.Until(wo.end.Add(asyncReplayAfter))); err != nil {
			return r, err
		}
		if fig.StartDepth, err = e.bufferDepth(ctx); err != nil {
			return r, err
		}
		db, err := replication.Open(e.set.AdminDSN(0, 0))
		if err != nil {
			return r, err
		}
		t0 := time.Now()
		err = unfence(ctx, db)
		db.Close()
		if err != nil {
			return r, err
		}
		fenced = false
		if err := e.waitReplayed(ctx, t0, base, wo, fig); err != nil {
			return r, err
		}
		// The reaper deletes a row only once its cell is on a minion: an empty buffer means
		// every cell is on the primary cluster (ReportedEmpty is not used: the nodes' figure
		// lags by up to a reaper pass).
		r.Seconds = float64(fig.Empty) / 1e6
		e.finishFigures(base, fig)
		if fig.LastReplay > fig.FirstReplay {
			fig.ReplayCellsPerSec = float64(fig.Replayed) / (float64(fig.LastReplay-fig.FirstReplay) / 1e6)
		}
		r.CellsPerSec = float64(fig.Written) / r.Seconds
		return r, nil
	}
	wo, err := e.writePhase(ctx, cl, newKey, n, &r, f)
	if err != nil {
		return r, err
	}
	if fig.StartDepth, err = e.bufferDepth(ctx); err != nil {
		return r, err
	}
	if fig.WriteSeconds > 0 {
		fig.RowsReapedPerSec = float64(fig.Written*int64(fig.Copies)-fig.StartDepth) / fig.WriteSeconds
	}
	if err := e.waitDrained(ctx, wo.end, fig, nil); err != nil {
		return r, err
	}
	r.Seconds = fig.WriteSeconds + float64(fig.Empty)/1e6
	r.CellsPerSec = float64(fig.Written*int64(fig.Copies)) / r.Seconds
	wo.checkReadable(ctx, cl, fig)
	e.finishFigures(base, fig)
	return r, nil
}

// writeOutcome is what a write phase did.
type writeOutcome struct {
	keys       []cells.Key // the acknowledged cells
	start, end time.Time
}

// writePhase writes f.Async.ReaperCells cells with put_cells of f.Batch, n requests in flight,
// sampling the buffer depth meanwhile, and fills r's request figures and fig's write figures.
// Failed requests count as r.Errors (their cells are not acknowledged); it fails when every
// request did.
func (e *asyncEnv) writePhase(ctx context.Context, cl *client.Client, newKey func() cells.Key, n int, r *Result, f Config) (writeOutcome, error) {
	fig := r.Reaper
	total := f.Async.ReaperCells
	var (
		next                 atomic.Int64
		mu                   sync.Mutex
		wo                   writeOutcome
		buffered, errs, reqs atomic.Int64
		firstErr             atomic.Value
	)
	stopSampling := e.samplePeakDepth(ctx, &fig.PeakDepth)
	hists := make([]*hdrhistogram.Histogram, n)
	var wg sync.WaitGroup
	wo.start = time.Now()
	for i := range n {
		hists[i] = hdrhistogram.New(1, 60_000_000, 3)
		h := hists[i]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i)+1, uint64(i)+2))
			for ctx.Err() == nil {
				first := int(next.Add(int64(f.Batch))) - f.Batch
				if first >= total {
					return
				}
				ws := make([]client.CellWrite, min(f.Batch, total-first))
				for j := range ws {
					ws[j] = client.CellWrite{Key: newKey(), Body: benchBody(rng, f.ValueSize)}
				}
				start := time.Now()
				res, err := cl.PutCells(ctx, ws)
				reqs.Add(1)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				_ = h.RecordValue(time.Since(start).Microseconds())
				mu.Lock()
				for j, pr := range res {
					switch pr.Status {
					case wire.StatusCreated, wire.StatusExists, wire.StatusBuffered:
						wo.keys = append(wo.keys, ws[j].Key)
					}
					if pr.Status == wire.StatusBuffered {
						buffered.Add(1)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wo.end = time.Now()
	stopSampling()
	all := hdrhistogram.New(1, 60_000_000, 3)
	for _, h := range hists {
		all.Merge(h)
	}
	fig.Written, fig.Buffered = int64(len(wo.keys)), buffered.Load()
	fig.WriteSeconds = wo.end.Sub(wo.start).Seconds()
	fig.PutP50, fig.PutP99 = all.ValueAtQuantile(50), all.ValueAtQuantile(99)
	fig.RowsCreatedPerSec = float64(fig.Written*int64(fig.Copies)) / fig.WriteSeconds
	r.Ops, r.Cells, r.Errors = reqs.Load()-errs.Load(), fig.Written, errs.Load()
	r.OpsPerSec = float64(r.Ops) / fig.WriteSeconds
	if s, ok := firstErr.Load().(string); ok {
		r.FirstError = s
	}
	if err := ctx.Err(); err != nil {
		return wo, err
	}
	if r.Ops == 0 {
		return wo, fmt.Errorf("%w: all %d put_cells requests failed, first: %s", errWrites, reqs.Load(), r.FirstError)
	}
	return wo, nil
}

// samplePeakDepth keeps the largest buffer depth seen in *peak, sampling every
// lagSampleInterval until the returned function is called.
func (e *asyncEnv) samplePeakDepth(ctx context.Context, peak *int64) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lagSampleInterval)
		defer t.Stop()
		for {
			if d, err := e.bufferDepth(ctx); err == nil {
				*peak = max(*peak, d)
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// waitReplayed waits, from the unfence at t0, until the buffer is empty and every node reports
// it empty, recording when the nodes saw the master and replayed their first and last cells;
// then it checks that a strong read finds every written cell (fig.Unreadable), untimed.
func (e *asyncEnv) waitReplayed(ctx context.Context, t0 time.Time, base reaperCounters, wo writeOutcome, fig *ReaperFigures) error {
	since := func() int64 { return max(time.Since(t0).Microseconds(), 1) }
	name := e.spec.StorageClusters[0].Name
	var last int64 // the replayed counters' last value seen
	err := e.waitDrained(ctx, t0, fig, func() bool {
		if fig.MasterSeen == 0 && e.everyNodeSees(name, true) {
			fig.MasterSeen = since()
		}
		if replayed := e.counters().replayed - base.replayed; replayed > last {
			if last == 0 {
				fig.FirstReplay = since()
			}
			fig.LastReplay, last = since(), replayed
		}
		return true
	})
	if err != nil {
		return err
	}
	cl, err := newClient(e.lc.URLs(), 8)
	if err != nil {
		return err
	}
	wo.checkReadable(ctx, cl, fig)
	return nil
}

// waitDrained waits until the buffer tables hold no row of the datastore, every node reports
// so, and each (if not nil; called at every poll) returns true, timing the first two from from
// (fig.Empty, fig.ReportedEmpty; fig.Left is the last depth seen).
func (e *asyncEnv) waitDrained(ctx context.Context, from time.Time, fig *ReaperFigures, each func() bool) error {
	if each == nil {
		each = func() bool { return true }
	}
	deadline := time.Now().Add(asyncSettleTimeout)
	for {
		if fig.Empty == 0 {
			d, err := e.bufferDepth(ctx)
			if err == nil && d == 0 {
				fig.Empty = max(time.Since(from).Microseconds(), 1)
			}
			fig.Left = d
		}
		if fig.ReportedEmpty == 0 && fig.Empty != 0 && e.counters().maxDepth == 0 {
			fig.ReportedEmpty = max(time.Since(from).Microseconds(), 1)
		}
		if ok := each(); ok && fig.Empty != 0 && fig.ReportedEmpty != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("buffer not drained after %s: %d rows left, %d cells unreadable", asyncSettleTimeout, fig.Left, fig.Unreadable)
		}
		if err := sleepCtx(ctx, reaperPoll); err != nil {
			return err
		}
	}
}

// checkReadable sets fig.Unreadable to the written cells a strong get_cells does not find
// (a failed request counts its keys as unreadable).
func (wo writeOutcome) checkReadable(ctx context.Context, cl *client.Client, fig *ReaperFigures) {
	var missing int64
	for i := 0; i < len(wo.keys); i += 500 {
		chunk := wo.keys[i:min(i+500, len(wo.keys))]
		keys := make([]client.GetKey, len(chunk))
		for j, k := range chunk {
			keys[j] = client.GetKey{RowKey: k.RowKey, ColumnKey: k.ColumnKey, RefKey: k.RefKey}
		}
		res, err := cl.GetCells(ctx, keys, client.WithConsistency(client.ConsistencyStrong))
		if err != nil {
			missing += int64(len(chunk))
			continue
		}
		missing += int64(len(res.Missing))
	}
	fig.Unreadable = missing
}

// finishFigures fills the counter deltas and the drain rate.
func (e *asyncEnv) finishFigures(base reaperCounters, fig *ReaperFigures) {
	c := e.counters()
	fig.Reaped, fig.Replayed, fig.Conflicts = c.reaped-base.reaped, c.replayed-base.replayed, c.conflicts-base.conflicts
	if fig.Empty > 0 {
		fig.EmptyRowsPerSec = float64(fig.StartDepth) / (float64(fig.Empty) / 1e6)
	}
}

// reaperNote is the line printed under the table for a reaper run.
func reaperNote(r Result) string {
	x := r.Reaper
	ms := func(us int64) float64 { return float64(us) / 1000 }
	head := fmt.Sprintf("%s reaper %s clients=%d: %d cells written in %.2fs (%.0f cells/s, put_cells of up to %d: p50 %.1f ms, p99 %.1f ms, %d failed), %d answered buffered",
		r.Target, x.Variant, r.Clients, x.Written, x.WriteSeconds, float64(x.Written)/x.WriteSeconds, max(int64(1), r.Cells/max(r.Ops, 1)),
		ms(x.PutP50), ms(x.PutP99), r.Errors, x.Buffered)
	tail := fmt.Sprintf("nodes' counters: %d reaped, %d replayed, %d conflicts; %d left, %d unreadable", x.Reaped, x.Replayed, x.Conflicts, x.Left, x.Unreadable)
	if x.Variant == reaperReplay {
		return fmt.Sprintf("%s; after the unfence (%d rows buffered): master seen by every node at %.0f ms, first replay %.0f ms, last %.0f ms "+
			"(%.0f cells/s between them), buffer empty %.0f ms (every node reports 0 at %.0f ms): %.0f cells/s from unfence to empty; %s",
			head, x.StartDepth, ms(x.MasterSeen), ms(x.FirstReplay), ms(x.LastReplay), x.ReplayCellsPerSec, ms(x.Empty), ms(x.ReportedEmpty), r.CellsPerSec, tail)
	}
	return fmt.Sprintf("%s; buffer rows created %.0f/s, reaped %.0f/s during the writes (peak depth %d); %d rows left at the end of the writes, empty %.0f ms later "+
		"(%.0f rows/s; every node reports 0 at %.0f ms); %.0f rows/s reaped overall; %s",
		head, x.RowsCreatedPerSec, x.RowsReapedPerSec, x.PeakDepth, x.StartDepth, ms(x.Empty), x.EmptyRowsPerSec, ms(x.ReportedEmpty), r.CellsPerSec, tail)
}
