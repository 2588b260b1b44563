package bench

// The replication-lag workload of `schemaless bench` (async targets): how far the minions of
// each storage cluster trail their master under a put load, as MariaDB reports it (GTID
// positions, Seconds_Behind_Master) and as a reader sees it (a written cell's first stale read
// that finds it).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/replication"
)

const (
	// lagSampleInterval is how often replication-lag probes every minion and its master (and
	// the reaper workload samples the buffer depth).
	lagSampleInterval = 100 * time.Millisecond
	// markerTimeout bounds the stale reads of one marker; a marker not seen by then is unseen.
	markerTimeout = 10 * time.Second
)

// LagFigures are the figures of the replication-lag workload (Result.Lag); the result's
// latency columns are the markers' ack -> visible times. Times are in microseconds.
type LagFigures struct {
	// Rate is the put rate asked for (0: full speed); the load's put_cell latencies are
	// PutP50 and PutP99.
	Rate   int   `json:"rate,omitempty"`
	PutP50 int64 `json:"put_p50_us"`
	PutP99 int64 `json:"put_p99_us"`
	// Markers counts the markers timed (acknowledged, then found by a stale read), Unseen
	// those no stale read found within 10 s, FirstPoll those the first stale read after the
	// ack found already, Polls the markers' stale reads, PollErrors those that failed (not
	// "not found"), MarkerErrors the markers' failed puts.
	Markers      int64 `json:"markers"`
	Unseen       int64 `json:"unseen"`
	FirstPoll    int64 `json:"first_poll"`
	Polls        int64 `json:"polls"`
	PollErrors   int64 `json:"poll_errors"`
	MarkerErrors int64 `json:"marker_errors"`
	// Samples counts the minion probes (one per minion every 100 ms), ProbeErrors the failed
	// ones. SeqP50, SeqP99 and SeqMax are the GTID lag of the samples: seq_no of the master's
	// gtid_binlog_pos minus seq_no of the minion's gtid_slave_pos, in transactions (the
	// master is probed just before its minions, so a transaction committed in between makes a
	// sample low by one, never high; negative differences count as 0).
	Samples     int64 `json:"samples"`
	ProbeErrors int64 `json:"probe_errors"`
	SeqP50      int64 `json:"seq_p50"`
	SeqP99      int64 `json:"seq_p99"`
	SeqMax      int64 `json:"seq_max"`
	// SecondsBehindP99 and SecondsBehindMax are the samples' Seconds_Behind_Master (whole
	// seconds, as MariaDB reports it); SecondsBehindNull counts the samples where it was NULL.
	SecondsBehindP99  int64 `json:"seconds_behind_p99"`
	SecondsBehindMax  int64 `json:"seconds_behind_max"`
	SecondsBehindNull int64 `json:"seconds_behind_null"`
}

// benchReplicationLag runs put_cell with n clients (at most rate puts/s in all when rate > 0)
// for f.Warmup, then for f.Duration while it samples the minions and times markers.
func benchReplicationLag(ctx context.Context, e *asyncEnv, endpoints []string, n, rate int, f Config) (Result, error) {
	r := Result{Workload: workloadReplicationLag, Clients: n}
	fig := &LagFigures{Rate: rate}
	r.Lag = fig
	cl, err := newClient(endpoints, n+1)
	if err != nil {
		return r, err
	}
	sampler, err := newLagSampler(e)
	if err != nil {
		return r, err
	}
	defer sampler.close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pace chan struct{}
	if rate > 0 {
		pace = make(chan struct{})
		go func() {
			start, every := time.Now(), time.Second/time.Duration(rate)
			for i := 1; ; i++ {
				if sleepCtx(ctx, time.Until(start.Add(time.Duration(i)*every))) != nil {
					return
				}
				select {
				case pace <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var (
		measuring atomic.Bool
		ops, errs atomic.Int64
		firstErr  atomic.Value
		wg        sync.WaitGroup
	)
	hists := make([]*hdrhistogram.Histogram, n)
	for i := range n {
		hists[i] = hdrhistogram.New(1, 60_000_000, 3)
		h := hists[i]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i)+1, uint64(i)+2))
			for ctx.Err() == nil {
				if pace != nil {
					select {
					case <-pace:
					case <-ctx.Done():
						return
					}
				}
				k := cellKey(uuid.New())
				start := time.Now()
				_, err := cl.PutCell(ctx, k.RowKey, k.ColumnKey, k.RefKey, benchBody(rng, f.ValueSize))
				if ctx.Err() != nil || !measuring.Load() {
					continue
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				_ = h.RecordValue(time.Since(start).Microseconds())
				ops.Add(1)
			}
		})
	}
	if err := sleepCtx(ctx, f.Warmup); err != nil {
		cancel()
		wg.Wait()
		return r, err
	}
	measuring.Store(true)
	mctx, stopMeasuring := context.WithCancel(ctx)
	visible := hdrhistogram.New(1, 60_000_000, 3)
	var side sync.WaitGroup
	side.Go(func() { sampler.run(mctx, fig) })
	side.Go(func() { timeMarkers(mctx, cl, visible, fig, f.ValueSize) })
	start := time.Now()
	_ = sleepCtx(ctx, f.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stopMeasuring()
	side.Wait()
	cancel()
	wg.Wait()

	all := hdrhistogram.New(1, 60_000_000, 3)
	for _, h := range hists {
		all.Merge(h)
	}
	r.Seconds = elapsed.Seconds()
	r.Ops, r.Cells, r.Errors = ops.Load(), ops.Load(), errs.Load()
	r.OpsPerSec, r.CellsPerSec = float64(r.Ops)/r.Seconds, float64(r.Cells)/r.Seconds
	fig.PutP50, fig.PutP99 = all.ValueAtQuantile(50), all.ValueAtQuantile(99)
	r.P50, r.P90, r.P99, r.Max = visible.ValueAtQuantile(50), visible.ValueAtQuantile(90), visible.ValueAtQuantile(99), visible.Max()
	if s, ok := firstErr.Load().(string); ok {
		r.FirstError = s
	}
	return r, nil
}

// timeMarkers writes one marker cell at a time until ctx ends: a put_cell, then stale
// get_cells back to back until one finds it, recording the time from the put's answer to that
// read's answer in h.
func timeMarkers(ctx context.Context, cl *client.Client, h *hdrhistogram.Histogram, fig *LagFigures, valueSize int) {
	rng := rand.New(rand.NewPCG(7, 8))
	for ctx.Err() == nil {
		k := cellKey(uuid.New())
		if _, err := cl.PutCell(ctx, k.RowKey, k.ColumnKey, k.RefKey, benchBody(rng, valueSize)); err != nil {
			if ctx.Err() == nil {
				fig.MarkerErrors++
			}
			continue
		}
		ack := time.Now()
		for polls := 1; ; polls++ {
			_, err := cl.GetCell(ctx, k, client.WithConsistency(client.ConsistencyStale))
			if ctx.Err() != nil {
				return // the measured time ended: the marker is neither seen nor unseen
			}
			fig.Polls++
			if err == nil {
				_ = h.RecordValue(max(time.Since(ack).Microseconds(), 1))
				fig.Markers++
				if polls == 1 {
					fig.FirstPoll++
				}
				break
			}
			if !errors.Is(err, client.ErrNotFound) {
				fig.PollErrors++
			}
			if time.Since(ack) > markerTimeout {
				fig.Unseen++
				break
			}
		}
	}
}

// lagSampler probes the members of every storage cluster as root.
type lagSampler struct {
	dsns [][]string  // by cluster, member (0 the master)
	dbs  [][]*sql.DB // likewise
}

func newLagSampler(e *asyncEnv) (*lagSampler, error) {
	s := &lagSampler{}
	for c := range e.set.Clusters {
		var dsns []string
		var dbs []*sql.DB
		for m := range e.set.Clusters[c].Instances {
			dsn := e.set.AdminDSN(c, m)
			db, err := replication.Open(dsn)
			if err != nil {
				s.close()
				return nil, err
			}
			dsns, dbs = append(dsns, dsn), append(dbs, db)
		}
		s.dsns, s.dbs = append(s.dsns, dsns), append(s.dbs, dbs)
	}
	return s, nil
}

func (s *lagSampler) close() {
	for _, dbs := range s.dbs {
		for _, db := range dbs {
			_ = db.Close()
		}
	}
}

// run probes every lagSampleInterval until ctx ends, then fills fig's sample figures.
func (s *lagSampler) run(ctx context.Context, fig *LagFigures) {
	var seqs, behind []int64
	t := time.NewTicker(lagSampleInterval)
	defer t.Stop()
	for ctx.Err() == nil {
		for c := range s.dbs {
			s.probeCluster(ctx, c, fig, &seqs, &behind)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	fig.SeqP50, fig.SeqP99, fig.SeqMax = quantile(seqs, 0.5), quantile(seqs, 0.99), quantile(seqs, 1)
	fig.SecondsBehindP99, fig.SecondsBehindMax = quantile(behind, 0.99), quantile(behind, 1)
}

// probeCluster probes cluster c's master, then each of its minions, appending each minion's
// GTID lag to seqs and its Seconds_Behind_Master to behind. A probe cut by ctx is not counted.
func (s *lagSampler) probeCluster(ctx context.Context, c int, fig *LagFigures, seqs, behind *[]int64) {
	master, err := replication.Probe(ctx, s.dbs[c][0], s.dsns[c][0])
	for m := 1; m < len(s.dbs[c]) && ctx.Err() == nil; m++ {
		minion, merr := replication.Probe(ctx, s.dbs[c][m], s.dsns[c][m])
		if ctx.Err() != nil {
			return
		}
		fig.Samples++
		if err != nil || merr != nil {
			fig.ProbeErrors++
			continue
		}
		d := int64(replication.SeqNo(master.GTIDBinlogPos, 0)) - int64(replication.SeqNo(minion.GTIDSlavePos, 0))
		*seqs = append(*seqs, max(d, 0))
		if minion.SecondsBehind < 0 {
			fig.SecondsBehindNull++
		} else {
			*behind = append(*behind, minion.SecondsBehind)
		}
	}
}

// quantile returns the q-quantile (0..1) of xs by nearest rank, 0 for none. It sorts xs.
func quantile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// lagNote is the line printed under the table for a replication-lag run.
func lagNote(r Result) string {
	x := r.Lag
	rate := "full speed"
	if x.Rate > 0 {
		rate = fmt.Sprintf("rate %d/s asked", x.Rate)
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return fmt.Sprintf("%s replication-lag clients=%d: %s, %.0f puts/s (p50 %.2f ms, p99 %.2f ms, %d failed); "+
		"put ack -> first stale read finding the cell on a minion: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.1f ms over %d markers "+
		"(%d found by the first read, %d unseen after 10 s, %d reads, %d failed, %d marker puts failed); "+
		"GTID lag in transactions (master gtid_binlog_pos - minion gtid_slave_pos, every minion every 100 ms): p50 %d, p99 %d, max %d over %d samples (%d failed); "+
		"Seconds_Behind_Master p99 %d, max %d (%d NULL)",
		r.Target, r.Clients, rate, r.OpsPerSec, ms(x.PutP50), ms(x.PutP99), r.Errors,
		ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max), x.Markers, x.FirstPoll, x.Unseen, x.Polls, x.PollErrors, x.MarkerErrors,
		x.SeqP50, x.SeqP99, x.SeqMax, x.Samples, x.ProbeErrors, x.SecondsBehindP99, x.SecondsBehindMax, x.SecondsBehindNull)
}
