package bench

// The index-lag workload of `schemaless bench`: the time from a put_cell's answer to the first
// index query (strong) that returns the cell's entry, at a fixed write rate.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/wire"
)

// raftCommitted returns the sum of the commit indexes of the partitions hosted by the node that
// answers cl (every partition on the in-process targets).
func raftCommitted(ctx context.Context, cl *client.Client) (uint64, error) {
	st, err := cl.Cluster(ctx)
	if err != nil {
		return 0, err
	}
	var sum uint64
	for _, d := range st.Datastores {
		for _, p := range d.Partitions {
			if p.Local {
				sum += p.CommitIndex
			}
		}
	}
	return sum, nil
}

// lagWrite is the state of one index-lag write; times are nanoseconds since the run's base
// time, 0 when not (yet) reached.
type lagWrite struct {
	start, ack atomic.Int64
	failed     atomic.Bool
}

// probeSet tracks the probes of an index-lag run: probe k is write k*every, and seen[k] is when
// a query first returned its entry.
type probeSet struct {
	every  int
	writes []lagWrite
	seen   []atomic.Int64
}

func newProbeSet(writes []lagWrite, every int) *probeSet {
	return &probeSet{every: every, writes: writes, seen: make([]atomic.Int64, (len(writes)+every-1)/every)}
}

// next returns the lowest probe from k on that is still to be seen: neither seen nor failed.
// Probes not yet written are still to be seen.
func (p *probeSet) next(k int) int {
	for k < len(p.seen) && (p.seen[k].Load() > 0 || p.writes[k*p.every].failed.Load()) {
		k++
	}
	return k
}

// see records that a query answered at time at (nanoseconds since the base) returned probe k;
// out-of-range probes (not this run's) are ignored.
func (p *probeSet) see(k int64, at int64) {
	if k >= 0 && k < int64(len(p.seen)) {
		p.seen[k].CompareAndSwap(0, at)
	}
}

// lagBody is the body of an index-lag write: a flight from origin whose distance is distance.
func lagBody(rng *rand.Rand, origin string, distance int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"date":"2001-01-%02dT%02d:%02d:00","delay":%d,"distance":%d,"origin":%q,"destination":%q,`+
		`"origin_city":"Bench City","origin_state":"BC","destination_city":"Bench City","destination_state":"BC"}`,
		1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(200)-20, distance, origin, randomCode(rng)))
}

// randomCode is a random three-letter airport code.
func randomCode(rng *rand.Rand) string {
	return string([]byte{byte('A' + rng.IntN(26)), byte('A' + rng.IntN(26)), byte('A' + rng.IntN(26))})
}

// benchIndexLag defines an index over a new column and waits until it is ready, then puts cells
// of that column at rate per second (open loop, as trigger-latency) while one poller queries
// (strong) the index shard of the probes every --lag-poll; it records the time from each
// probe's put_cell answer to the answer of the first query that returned its entry.
//
// Probes (one write in --lag-sample) all carry the origin "probe-<tag>" and their probe number
// as distance, so one query (origin = probe, distance >= the lowest probe not yet seen, ordered
// by distance) finds every new probe entry at once; the other writes carry random origins, so
// their entries spread over the index shards. The index is dropped afterwards.
func benchIndexLag(ctx context.Context, env *Env, target string, endpoints []string, rate int) (Result, error) {
	f := env.Config
	x := f.Index
	_, tag := runTag()
	name, column, probe := "bench_lag_"+tag, "IDXLAG_"+tag, "probe-"+tag
	res := Result{Workload: workloadIndexLag, Consistency: client.ConsistencyStrong}
	admin, err := newClient(endpoints, 2)
	if err != nil {
		return res, err
	}
	def, err := defineIndex(ctx, admin, examples.FlightsIndexDefinition(name, column))
	if err != nil {
		return res, err
	}
	defer dropIndex(context.WithoutCancel(ctx), env.Stderr, admin, name, def.Version)
	if err := waitIndexReady(ctx, admin, name, def.Version, 50*time.Millisecond, x.Timeout, nil); err != nil {
		return res, err
	}

	warm := int(int64(rate) * int64(f.Warmup) / int64(time.Second))
	total := warm + int(int64(rate)*int64(f.Duration)/int64(time.Second))
	ws := make([]lagWrite, total)
	ps := newProbeSet(ws, x.LagSample)
	var base time.Time
	since := func() int64 { return max(time.Since(base).Nanoseconds(), 1) }

	// The poller.
	poller, err := newClient(endpoints, 1)
	if err != nil {
		return res, err
	}
	pollHist := hdrhistogram.New(1, 600_000_000, 3)
	var polls, pollErrs int64
	var pollFirstErr string
	pollCtx, stopPoll := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	strong := client.WithConsistency(client.ConsistencyStrong)
	stopProfile := profilePhase(env, target, workloadIndexLag)
	defer stopProfile()
	base = time.Now()
	go func() {
		defer close(pollDone)
		k := 0
		for pollCtx.Err() == nil {
			t0 := time.Now()
			k = ps.next(k)
			q := wire.IndexQuery{ShardValue: probe, Where: []wire.IndexCond{{Field: "distance", Op: ">=", Value: k}},
				Fields: []string{"distance"}, OrderBy: "distance", Limit: 1000}
			for pollCtx.Err() == nil { // every page of this poll
				qs := time.Now()
				ans, err := poller.QueryIndex(pollCtx, name, q, strong)
				if pollCtx.Err() != nil {
					return
				}
				at := since()
				polls++
				_ = pollHist.RecordValue(time.Since(qs).Microseconds())
				if err != nil {
					pollErrs++
					if pollFirstErr == "" {
						pollFirstErr = err.Error()
					}
					break
				}
				for _, e := range ans.Entries {
					if n, ok := e.Fields["distance"].(json.Number); ok {
						if d, err := n.Int64(); err == nil {
							ps.see(d, at)
						}
					}
				}
				if ans.NextCursor == "" {
					break
				}
				q.Cursor = ans.NextCursor
			}
			if d := x.LagPoll - time.Since(t0); d > 0 {
				time.Sleep(d)
			}
		}
	}()
	pollStopped := false
	defer func() {
		if !pollStopped {
			stopPoll()
			<-pollDone
		}
	}()

	// The writers, open loop.
	cl, err := newClient(endpoints, f.Triggers.MaxWriters)
	if err != nil {
		return res, err
	}
	due := func(i int) int64 { return int64(i) * int64(time.Second) / int64(rate) }
	jobs := make(chan int)
	var writers sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < f.Triggers.MaxWriters; w++ {
		writers.Add(1)
		go func(seed uint64) {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(seed, seed+1))
			for i := range jobs {
				origin, distance := randomCode(rng), rng.IntN(3000)
				if i%x.LagSample == 0 {
					origin, distance = probe, i/x.LagSample
				}
				body := lagBody(rng, origin, distance)
				c := &ws[i]
				c.start.Store(since())
				_, err := cl.PutCell(ctx, benchKey(0, i), column, 1, body)
				if err != nil {
					c.failed.Store(true)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				c.ack.Store(since())
			}
		}(uint64(w) + 100)
	}
	// The raft entries committed during the measured writes, read from one node both times.
	status, err := newClient(endpoints[:1], 1)
	if err != nil {
		return res, err
	}
	writeStart := since()
	type commitRead struct {
		n  uint64
		at time.Time
	}
	first := make(chan commitRead, 1)
	firstAsked := false
	for i := 0; i < total && ctx.Err() == nil; i++ {
		if d := time.Duration(writeStart + due(i) - since()); d > 0 {
			time.Sleep(d)
		}
		if i == warm {
			firstAsked = true
			go func() { n, _ := raftCommitted(ctx, status); first <- commitRead{n, time.Now()} }()
		}
		jobs <- i
	}
	close(jobs)
	writers.Wait()
	commit1, _ := raftCommitted(ctx, status)
	commitAt1 := time.Now()
	var c0 commitRead
	if firstAsked {
		c0 = <-first
	}

	// Drain: until every acknowledged measured probe is seen, or --drain.
	firstProbe := (warm + x.LagSample - 1) / x.LagSample
	pending := func() int {
		n := 0
		for k := firstProbe; k < len(ps.seen); k++ {
			if ws[k*x.LagSample].ack.Load() > 0 && ps.seen[k].Load() == 0 {
				n++
			}
		}
		return n
	}
	drainEnd := time.Now().Add(f.Triggers.Drain)
	for pending() > 0 && time.Now().Before(drainEnd) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopPoll()
	<-pollDone
	pollStopped = true
	stopProfile()

	lat := hdrhistogram.New(1, 600_000_000, 3)
	put := hdrhistogram.New(1, 600_000_000, 3)
	fig := &IndexFigures{Index: name, Version: def.Version, Rate: rate, Polls: polls, PollErrors: pollErrs,
		PollP50: pollHist.ValueAtQuantile(50), PollP99: pollHist.ValueAtQuantile(99)}
	res.Index = fig
	var firstDue, lastStart, lastAck int64 = writeStart + due(warm), 0, 0
	for i := warm; i < total; i++ {
		c := &ws[i]
		if s := c.start.Load(); s > 0 {
			fig.BehindMax = max(fig.BehindMax, (s-writeStart-due(i))/1000)
		}
		if c.failed.Load() {
			res.Errors++
			continue
		}
		a := c.ack.Load()
		if a == 0 {
			continue // never written (ctx ended)
		}
		res.Ops++
		lastAck, lastStart = max(lastAck, a), max(lastStart, c.start.Load())
		_ = put.RecordValue((a - c.start.Load()) / 1000)
		if i%x.LagSample != 0 {
			continue
		}
		fig.Probes++
		switch s := ps.seen[i/x.LagSample].Load(); {
		case s == 0:
			fig.Unseen++
		case s < a:
			fig.Seen++
			fig.Early++
			_ = lat.RecordValue(0)
		default:
			fig.Seen++
			_ = lat.RecordValue((s - a) / 1000)
		}
	}
	res.Cells = fig.Seen
	res.Seconds = float64(lastAck-firstDue) / 1e9
	if lastStart > 0 {
		res.OpsPerSec = float64(res.Ops) / (float64(lastStart-firstDue+int64(time.Second)/int64(rate)) / 1e9)
	}
	if res.Seconds > 0 {
		res.CellsPerSec = float64(res.Cells) / res.Seconds
	}
	fig.WritesPerSec = res.OpsPerSec
	if c0.n > 0 && commit1 > c0.n {
		fig.RaftEntriesPerSec = float64(commit1-c0.n) / commitAt1.Sub(c0.at).Seconds()
		if fig.WritesPerSec > 0 {
			fig.EntriesPerWrite = fig.RaftEntriesPerSec / fig.WritesPerSec
		}
	}
	res.P50, res.P90, res.P99, res.Max = lat.ValueAtQuantile(50), lat.ValueAtQuantile(90), lat.ValueAtQuantile(99), lat.Max()
	fig.PutP50, fig.PutP99 = put.ValueAtQuantile(50), put.ValueAtQuantile(99)
	if e, ok := firstErr.Load().(string); ok {
		res.FirstError = e
	} else if pollFirstErr != "" {
		res.FirstError = "probe query: " + pollFirstErr
	}
	return res, nil
}
