package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// workloadSplit is the split workload: partitions split online under writers.
const workloadSplit = "split"

// SplitConfig are the settings of the split workload.
type SplitConfig struct {
	// Count is how many splits run, one after the other.
	Count int
	// Preload is how many cells are written to the datastore before the first split (put_cells
	// of 100, 8 in flight), so that a split copies that much.
	Preload int
	// Interval is the time between the end of a split and the start of the next.
	Interval time.Duration
	// Hot, when 0 or more, is a partition of trips that takes every write, and the workload
	// splits nothing itself: it waits (at most HotWait) for the cluster's load-based splitting
	// to split that partition and move a half's leader, and reports when (Count is ignored).
	// -1: the workload splits (Count splits).
	Hot     int
	HotWait time.Duration
	// Merges is how many merges run among the Count splits (0 to Count): one after every
	// Count/Merges splits, of the two neighbouring partitions on the same replicas with the
	// fewest shards together.
	Merges int
}

type splitWorkload struct{}

func (splitWorkload) Name() string { return workloadSplit }

// splitSample is one put_cell of the writers: when it was sent, to which shard, how long it
// took, its error.
type splitSample struct {
	at    time.Time
	shard int
	lat   time.Duration
	err   error
}

// Run runs the split workload on t: it preloads --split-preload cells into trips, starts the
// first --clients value of writers, each writing new cells with put_cell in a closed loop, and
// after --warmup splits the partition with the most shards at its middle, --split-count times,
// --split-interval apart; then it stops the writers after --warmup more. Rows: one "split" row
// per split (Seconds: from the request to the answer, the right half having a leader; Cells:
// the cells the datastore held) and a "split merge" row per merge (--split-merges; P50: the
// pause of the right partition's writes the merge reported), then "split put" over every write
// of the run and "split put during" over the writes sent while a split or merge ran (their p99
// and max are the pause they cause), and "split put moving" over those of them whose shard the
// split or merge moved to another partition (the right half's shards; a merge's right
// partition's): the writes the change pauses. Errors count the writes that failed; the first
// is in FirstError.
func (splitWorkload) Run(ctx context.Context, env *Env, t Target) ([]Result, error) {
	f, target := env.Config, t.Name()
	if !storesCells(t) {
		fmt.Fprintf(env.Stderr, "%s %s: skipped (raft-noop stores no cells)\n", target, workloadSplit)
		return nil, nil
	}
	s := f.Split
	writers := 64
	if len(f.Clients) > 0 && f.Clients[0] > 0 {
		writers = f.Clients[0]
	}
	cl, err := newClient(t.Endpoints(), writers+8)
	if err != nil {
		return nil, err
	}
	// Preload.
	began := time.Now()
	if err := splitPreload(ctx, cl, s.Preload, f.ValueSize); err != nil {
		return nil, fmt.Errorf("%s %s: preload: %w", target, workloadSplit, err)
	}
	if !f.JSON && s.Preload > 0 {
		fmt.Fprintf(env.Stderr, "%s %s: preloaded %d cells in %.1fs\n", target, workloadSplit, s.Preload, time.Since(began).Seconds())
	}

	var hotRows []uuid.UUID // Hot: the rows the writers write, all in partition Hot
	cat0, err := cl.Datastores(ctx)
	if err != nil {
		return nil, err
	}
	shards := datastoreShards(cat0, "trips")
	if shards == 0 {
		return nil, fmt.Errorf("%s %s: the target has no datastore trips", target, workloadSplit)
	}
	if s.Hot >= 0 {
		if hotRows, err = rowsOfPartition(cat0, "trips", s.Hot, 4096); err != nil {
			return nil, fmt.Errorf("%s %s: --split-hot: %w", target, workloadSplit, err)
		}
	}
	var mu sync.Mutex
	var samples []splitSample
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	cpu := cpuSpan{m: cpuMeter{pids: f.CPUPIDs}}
	cpu.begin()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			var local []splitSample
			for wctx.Err() == nil {
				at := time.Now()
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				row := uuid.New()
				if hotRows != nil {
					row = hotRows[wr.IntN(len(hotRows))]
				}
				_, err := cl.PutCell(rctx, row, "BASE", int64(at.UnixNano()), benchBody(wr, f.ValueSize))
				cancel()
				if wctx.Err() != nil && err != nil {
					break // stopped, not failed
				}
				local = append(local, splitSample{at: at, shard: cells.ShardOf(row, shards), lat: time.Since(at), err: err})
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		}()
	}
	var out []Result
	// window is a split's or merge's time, and the shards it moved.
	type window struct {
		from, to time.Time
		moved    cells.ShardRange
	}
	var windows []window
	var splitErr error
	sleep := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	if s.Hot >= 0 {
		out = append(out, waitHotSplit(ctx, env, cl, target, writers, s, start))
		stop()
		wg.Wait()
		return out, nil
	}
	sleep(f.Warmup)
	merges := 0
	for i := range s.Count {
		cat, err := cl.Datastores(ctx)
		if err != nil {
			splitErr = err
			break
		}
		pid, at := splitTarget(cat, "trips")
		if pid < 0 {
			fmt.Fprintf(env.Stderr, "%s %s: no partition of trips has 2 shards left after %d splits\n", target, workloadSplit, i)
			break
		}
		from := time.Now()
		res, err := cl.SplitPartition(ctx, "trips", pid, at)
		windows = append(windows, window{from, time.Now(), cells.ShardRange{First: res.Right.FirstShard, Last: res.Right.LastShard}})
		if err != nil {
			splitErr = fmt.Errorf("split %d (partition %d at %d): %w", i+1, pid, at, err)
			break
		}
		r := Result{Target: target, Workload: workloadSplit, Clients: writers, Seconds: time.Since(from).Seconds(), Ops: 1, StoredCells: int64(s.Preload)}
		if !f.JSON {
			fmt.Fprintf(env.Stderr, "%s %s %d: partition %d at shard %d -> %d [%d..%d] and %d [%d..%d] in %d ms (ready %v)\n",
				target, workloadSplit, i+1, pid, at, res.Left.ID, res.Left.FirstShard, res.Left.LastShard, res.Right.ID,
				res.Right.FirstShard, res.Right.LastShard, res.TookMillis, res.Ready)
		}
		out = append(out, r)
		sleep(s.Interval)
		if s.Merges > 0 && merges < s.Merges && (i+1)%max(1, s.Count/s.Merges) == 0 {
			from := time.Now()
			mr, right, err := splitMerge(ctx, cl, "trips")
			windows = append(windows, window{from, time.Now(), right})
			if err != nil {
				splitErr = fmt.Errorf("merge %d: %w", merges+1, err)
				break
			}
			merges++
			out = append(out, Result{Target: target, Workload: workloadSplit + " merge", Clients: writers, Seconds: time.Since(from).Seconds(), Ops: 1,
				StoredCells: int64(s.Preload), P50: mr.PauseMillis * 1000})
			if !f.JSON {
				fmt.Fprintf(env.Stderr, "%s %s merge %d: -> %d [%d..%d] in %d ms, writes to the right one paused %d ms\n",
					target, workloadSplit, merges, mr.Merged.ID, mr.Merged.FirstShard, mr.Merged.LastShard, mr.TookMillis, mr.PauseMillis)
			}
			sleep(s.Interval)
		}
	}
	sleep(f.Warmup)
	stop()
	wg.Wait()
	all := splitFigures(samples, func(splitSample) bool { return true })
	all.Target, all.Workload, all.Clients, all.Seconds = target, workloadSplit+" put", writers, time.Since(start).Seconds()
	all.OpsPerSec, all.CellsPerSec = float64(all.Ops)/all.Seconds, float64(all.Cells)/all.Seconds
	all.CPUSeconds, all.NodeCPUSeconds = cpu.end()
	during := splitFigures(samples, func(x splitSample) bool {
		return slices.ContainsFunc(windows, func(w window) bool { return !x.at.Before(w.from) && x.at.Before(w.to) })
	})
	during.Target, during.Workload, during.Clients = target, workloadSplit+" put during", writers
	moving := splitFigures(samples, func(x splitSample) bool {
		return slices.ContainsFunc(windows, func(w window) bool { return !x.at.Before(w.from) && x.at.Before(w.to) && w.moved.Contains(x.shard) })
	})
	moving.Target, moving.Workload, moving.Clients = target, workloadSplit+" put moving", writers
	for _, w := range windows {
		during.Seconds += w.to.Sub(w.from).Seconds()
	}
	if during.Seconds > 0 {
		during.OpsPerSec, during.CellsPerSec = float64(during.Ops)/during.Seconds, float64(during.Cells)/during.Seconds
	}
	moving.Seconds = during.Seconds
	out = append(out, all, during, moving)
	if !f.JSON {
		fmt.Fprintf(env.Stderr, "%s %s: %d writes, %d failed; during splits p99 %dus, max %dus; to the moving shards p99 %dus, max %dus\n",
			target, workloadSplit, all.Ops, all.Errors, during.P99, during.Max, moving.P99, moving.Max)
	}
	return out, splitErr
}

// splitPreload writes n cells with put_cells of 100, 8 requests in flight.
func splitPreload(ctx context.Context, cl *client.Client, n, valueSize int) error {
	const batch, inflight = 100, 8
	jobs := make(chan int)
	errc := make(chan error, inflight)
	var wg sync.WaitGroup
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 99))
			for size := range jobs {
				cs := make([]client.CellWrite, size)
				for i := range cs {
					cs[i] = client.CellWrite{Key: cellKey(uuid.New()), Body: benchBody(r, valueSize)}
				}
				if _, err := cl.PutCells(ctx, cs); err != nil {
					select {
					case errc <- err:
					default:
					}
					return
				}
			}
		}()
	}
	var err error
	for left := n; left > 0 && err == nil; left -= batch {
		select {
		case jobs <- min(batch, left):
		case err = <-errc:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// splitTarget returns the partition of datastore ds with the most shards (the first in shard
// order among equals) and its middle shard; pid -1 when none has 2 shards.
func splitTarget(cat wire.DatastoresResponse, ds string) (pid, at int) {
	pid = -1
	best := 1
	for _, d := range cat.Datastores {
		if d.Name != ds {
			continue
		}
		for _, p := range d.Partitions {
			if n := p.LastShard - p.FirstShard + 1; n > best {
				best, pid, at = n, p.ID, p.FirstShard+n/2
			}
		}
	}
	return pid, at
}

// splitMerge merges the two neighbouring partitions of datastore ds on the same replicas with
// the fewest shards together (the first in shard order among equals), and returns the right
// one's shards too.
func splitMerge(ctx context.Context, cl *client.Client, ds string) (wire.MergeResponse, cells.ShardRange, error) {
	cat, err := cl.Datastores(ctx)
	if err != nil {
		return wire.MergeResponse{}, cells.ShardRange{}, err
	}
	left, right, best := -1, -1, 0
	var moved cells.ShardRange
	for _, d := range cat.Datastores {
		if d.Name != ds {
			continue
		}
		ps := slices.Clone(d.Partitions)
		slices.SortFunc(ps, func(a, b wire.CatalogPartition) int { return a.FirstShard - b.FirstShard })
		for i := 1; i < len(ps); i++ {
			l, r := ps[i-1], ps[i]
			n := r.LastShard - l.FirstShard + 1
			if slices.Equal(sortedCopy(l.Replicas), sortedCopy(r.Replicas)) && (left < 0 || n < best) {
				left, right, best = l.ID, r.ID, n
				moved = cells.ShardRange{First: r.FirstShard, Last: r.LastShard}
			}
		}
	}
	if left < 0 {
		return wire.MergeResponse{}, moved, fmt.Errorf("no two neighbouring partitions of %s on the same replicas", ds)
	}
	mr, err := cl.MergePartitions(ctx, ds, left, right)
	return mr, moved, err
}

// datastoreShards returns the shard count of datastore ds in cat (0 when it is not there).
func datastoreShards(cat wire.DatastoresResponse, ds string) int {
	for _, d := range cat.Datastores {
		if d.Name == ds {
			return d.Shards
		}
	}
	return 0
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// splitFigures returns the count, errors and latency percentiles of the samples keep selects.
func splitFigures(samples []splitSample, keep func(splitSample) bool) Result {
	var r Result
	var lats []time.Duration
	for _, x := range samples {
		if !keep(x) {
			continue
		}
		r.Ops++
		if x.err != nil {
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = x.err.Error()
			}
			continue
		}
		r.Cells++
		lats = append(lats, x.lat)
	}
	if len(lats) == 0 {
		return r
	}
	slices.Sort(lats)
	pct := func(p float64) int64 { return lats[min(len(lats)-1, int(p*float64(len(lats))))].Microseconds() }
	r.P50, r.P90, r.P99, r.Max = pct(0.50), pct(0.90), pct(0.99), lats[len(lats)-1].Microseconds()
	return r
}

// rowsOfPartition returns n new row keys whose shards are in partition pid of datastore ds.
func rowsOfPartition(cat wire.DatastoresResponse, ds string, pid, n int) ([]uuid.UUID, error) {
	for _, d := range cat.Datastores {
		if d.Name != ds {
			continue
		}
		for _, p := range d.Partitions {
			if p.ID != pid {
				continue
			}
			var rows []uuid.UUID
			for len(rows) < n {
				row := uuid.New()
				if s := cells.ShardOf(row, d.Shards); s >= p.FirstShard && s <= p.LastShard {
					rows = append(rows, row)
				}
			}
			return rows, nil
		}
		return nil, fmt.Errorf("no partition %d in %s", pid, ds)
	}
	return nil, fmt.Errorf("no datastore %s", ds)
}

// waitHotSplit waits, at most s.HotWait after start, for partition s.Hot of trips to split on
// its own and for the halves' leaders to be on two nodes, and returns a row: Seconds from start
// to the split (0 when none came), P50 the microseconds from start until the leaders were
// apart (0 when they were not), FirstError what did not happen.
func waitHotSplit(ctx context.Context, env *Env, cl *client.Client, target string, writers int, s SplitConfig, start time.Time) Result {
	r := Result{Target: target, Workload: workloadSplit + " by load", Clients: writers}
	deadline := start.Add(s.HotWait)
	right := -1
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		cat, err := cl.Datastores(ctx)
		if err != nil {
			continue
		}
		if right < 0 {
			for _, d := range cat.Datastores {
				for _, p := range d.Partitions {
					if d.Name == "trips" && p.Parent == s.Hot {
						right = p.ID
					}
				}
			}
			if right < 0 {
				continue
			}
			r.Seconds = time.Since(start).Seconds()
			if !env.Config.JSON {
				fmt.Fprintf(env.Stderr, "%s %s: partition %d split by load into %d after %.1fs\n", target, workloadSplit, s.Hot, right, r.Seconds)
			}
		}
		reps, err := cl.Partitions(ctx, "trips")
		if err != nil {
			continue
		}
		leaders := map[int]string{}
		for _, rep := range reps {
			leaders[rep.Partition] = rep.Leader
		}
		if l, rl := leaders[s.Hot], leaders[right]; l != "" && rl != "" && l != rl {
			r.P50 = time.Since(start).Microseconds()
			if !env.Config.JSON {
				fmt.Fprintf(env.Stderr, "%s %s: the halves' leaders on %s and %s after %.1fs\n", target, workloadSplit, l, rl, time.Since(start).Seconds())
			}
			return r
		}
	}
	switch {
	case right < 0:
		r.FirstError = fmt.Sprintf("partition %d did not split within %s", s.Hot, s.HotWait)
	default:
		r.FirstError = fmt.Sprintf("the halves' leaders were not apart within %s", s.HotWait)
	}
	return r
}
