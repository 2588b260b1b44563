package bench

// The async-mode targets of `schemaless bench` (async, async-unsafe: datastore "trips" on
// replicated MariaDB storage clusters) and what their workloads share: the servers, the buffer
// depth as the masters hold it, the nodes' reaper counters, and fencing a master.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// Shape of the async targets' servers and settings the workloads rely on.
const (
	asyncClusters = 2 // storage clusters
	asyncMinions  = 2 // minions per storage cluster
	// asyncReplayAfter is the targets' partition.AsyncConfig.ReplayAfter, set explicitly (it
	// is also the default) because the reaper workload's replay variant waits it out.
	asyncReplayAfter = 2 * time.Second
	// asyncStartTimeout bounds starting the six servers.
	asyncStartTimeout = 3 * time.Minute
	// asyncSettleTimeout bounds the waits of the workloads on the cluster: an empty buffer,
	// a fenced or unfenced master seen by every node, every cell readable.
	asyncSettleTimeout = 2 * time.Minute
)

// replicatedServers are the MariaDB servers of the async targets, started on first use and
// shared by every async target of one bench run. Not safe for concurrent use.
type replicatedServers struct {
	set *mariadb.ReplicatedSet
}

// get returns the servers, starting them on the first call (several seconds; a line on
// stderr says so).
func (r *replicatedServers) get(ctx context.Context, stderr io.Writer) (*mariadb.ReplicatedSet, error) {
	if r.set != nil {
		return r.set, nil
	}
	if _, _, err := mariadb.FindBinaries(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, asyncStartTimeout)
	defer cancel()
	start := time.Now()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: asyncClusters, Minions: asyncMinions})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: %d MariaDB servers (%d clusters of a master and %d minions) started in %.1fs\n",
		asyncClusters*(asyncMinions+1), asyncClusters, asyncMinions, time.Since(start).Seconds())
	r.set = set
	return set, nil
}

// drop drops the databases of prefix on every cluster's master (the drops replicate),
// reporting failures on stderr.
func (r *replicatedServers) drop(prefix string, stderr io.Writer) {
	if r.set == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for c := range r.set.Clusters {
		if err := storage.DropMySQLPrefix(ctx, r.set.AdminDSN(c, 0), prefix); err != nil {
			fmt.Fprintf(stderr, "bench: drop databases %s_* on cluster %d: %v\n", prefix, c, err)
		}
	}
}

// close stops the servers, if started, reporting a failure on stderr.
func (r *replicatedServers) close(stderr io.Writer) {
	if r.set == nil {
		return
	}
	if err := r.set.Close(); err != nil {
		fmt.Fprintf(stderr, "bench: stop the MariaDB servers: %v\n", err)
	}
	r.set = nil
}

// asyncOptions returns the async options of a target on set: one storage cluster per cluster
// of set (named c0, c1, ...), with the default settings except ReplayAfter (the same value,
// made explicit), and buffered writes unless unsafe.
func asyncOptions(set *mariadb.ReplicatedSet, prefix string, unsafe bool) *localcluster.AsyncOptions {
	return &localcluster.AsyncOptions{Prefix: prefix, Unsafe: unsafe, Clusters: topology.StorageClustersOf(set.DSNs()),
		Partition: partition.AsyncConfig{ReplayAfter: asyncReplayAfter}}
}

// asyncEnv is a running async target as its workloads see it. The servers are never
// promoted during a bench run, so member 0 of each cluster stays its master.
type asyncEnv struct {
	set    *mariadb.ReplicatedSet
	lc     *localcluster.Cluster
	spec   *topology.DatastoreSpec // "trips", normalized
	prefix string
	unsafe bool

	mu sync.Mutex // guards buffers
	// buffers are the stores on each cluster's master (as root) that count buffer rows,
	// opened on first use.
	buffers []*storage.Store
}

func newAsyncEnv(set *mariadb.ReplicatedSet, lc *localcluster.Cluster, a *localcluster.AsyncOptions) *asyncEnv {
	return &asyncEnv{set: set, lc: lc, spec: &lc.Topology.Datastores[0], prefix: a.Prefix, unsafe: a.Unsafe}
}

func (e *asyncEnv) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closeBuffers()
}

func (e *asyncEnv) closeBuffers() {
	for _, st := range e.buffers {
		_ = st.Close()
	}
	e.buffers = nil
}

// bufferCopies is how many buffer rows each write creates (0 for async-unsafe).
func (e *asyncEnv) bufferCopies() int { return e.spec.BufferClusters }

// bufferDepth counts the buffer rows of "trips" on every master (one statement per master).
// Safe for concurrent use.
func (e *asyncEnv) bufferDepth(ctx context.Context) (int64, error) {
	e.mu.Lock()
	if e.buffers == nil {
		for c := range e.set.Clusters {
			st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: e.set.AdminDSN(c, 0), Prefix: e.prefix, MaxOpenConns: 2})
			if err != nil {
				e.closeBuffers()
				e.mu.Unlock()
				return 0, fmt.Errorf("open the buffer of cluster %d: %w", c, err)
			}
			e.buffers = append(e.buffers, st)
		}
	}
	buffers := e.buffers
	e.mu.Unlock()
	var total int64
	for c, st := range buffers {
		n, _, err := st.BufferStats(ctx, "trips")
		if err != nil {
			return 0, fmt.Errorf("buffer of cluster %d: %w", c, err)
		}
		total += n
	}
	return total, nil
}

// reaperCounters are the nodes' reaper counters summed over every node and partition, and the
// largest buffer depth a node reports for a partition.
type reaperCounters struct {
	reaped, replayed, conflicts int64
	maxDepth                    int64
}

func (e *asyncEnv) counters() reaperCounters {
	var rc reaperCounters
	for i := range e.lc.Topology.Nodes {
		n := e.lc.Node(i)
		if n == nil {
			continue
		}
		for _, r := range n.Replicas() {
			if r.Async == nil {
				continue
			}
			rc.reaped += r.Async.Reaped
			rc.replayed += r.Async.Replayed
			rc.conflicts += r.Async.Conflicts
			rc.maxDepth = max(rc.maxDepth, r.Async.BufferDepth)
		}
	}
	return rc
}

// waitEmpty waits until the buffer tables hold no row of "trips" (what earlier workloads left).
func (e *asyncEnv) waitEmpty(ctx context.Context) error {
	deadline := time.Now().Add(asyncSettleTimeout)
	for {
		n, err := e.bufferDepth(ctx)
		if err == nil && n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("buffer not empty after %s: %d rows (%v)", asyncSettleTimeout, n, err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// onCluster reports whether rowKey's partition is on storage cluster c.
func (e *asyncEnv) onCluster(rowKey [16]byte, c int) bool {
	shard := cells.ShardOf(rowKey, e.spec.Shards)
	for _, p := range e.spec.Partitions {
		if shard >= p.FirstShard && shard <= p.LastShard {
			return p.Cluster == e.spec.StorageClusters[c].Name
		}
	}
	return false
}

// setReadOnly fences (on) or unfences cluster c's master as root, then waits until every node
// sees the cluster without a master (on) or with one (off).
func (e *asyncEnv) setReadOnly(ctx context.Context, c int, on bool) error {
	db, err := replication.Open(e.set.AdminDSN(c, 0))
	if err != nil {
		return err
	}
	defer db.Close()
	if on {
		err = replication.Fence(ctx, db)
	} else {
		err = unfence(ctx, db)
	}
	if err != nil {
		return err
	}
	name := e.spec.StorageClusters[c].Name
	deadline := time.Now().Add(asyncSettleTimeout)
	for !e.everyNodeSees(name, !on) {
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %s: nodes do not see read_only=%v after %s", name, on, asyncSettleTimeout)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// unfence lets the datastore's user write on the member behind db again.
func unfence(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, "SET GLOBAL read_only = 0"); err != nil {
		return fmt.Errorf("unfence: %w", err)
	}
	return nil
}

// everyNodeSees reports whether every running node's status of storage cluster name shows a
// master (master true) or none (false).
func (e *asyncEnv) everyNodeSees(name string, master bool) bool {
	for i := range e.lc.Topology.Nodes {
		n := e.lc.Node(i)
		if n == nil {
			continue
		}
		for _, r := range n.Replicas() {
			if r.Async == nil || r.Async.Cluster != name {
				continue
			}
			has := false
			for _, m := range r.Async.Members {
				has = has || m.Role == "master"
			}
			if has != master {
				return false
			}
		}
	}
	return true
}

// asyncWorkload is an async-mode workload: reaper (how fast the buffer of buffered writes
// drains, and replays into a master that comes back) or replication-lag (how far the minions
// trail their master under a put load). Async targets only.
type asyncWorkload struct{ name string }

func (w asyncWorkload) Name() string { return w.name }

// Run runs the workload on t, one run per --clients value (and per --rate value for
// replication-lag when --rate is given; both variants for reaper). Targets it does not apply to
// get a note on env.Stderr and no result.
func (w asyncWorkload) Run(ctx context.Context, env *Env, t Target) ([]Result, error) {
	f, target := env.Config, t.Name()
	var e *asyncEnv
	if ct, ok := t.(*clusterTarget); ok {
		e = ct.async
	}
	switch {
	case e == nil:
		fmt.Fprintf(env.Stderr, "bench: %s: not applicable to target %s (async targets only); skipped\n", w.name, target)
		return nil, nil
	case w.name == workloadReaper && e.unsafe:
		fmt.Fprintf(env.Stderr, "bench: %s: not applicable to target %s (no buffered writes, no reaper); skipped\n", w.name, target)
		return nil, nil
	}
	var out []Result
	for _, n := range f.Clients {
		if w.name == workloadReaper {
			for _, variant := range []string{reaperDrain, reaperReplay} {
				r, err := benchReaper(ctx, e, t.Endpoints(), variant, n, env)
				r.Target = target
				if err != nil {
					return out, fmt.Errorf("%s %s %s clients=%d: %w", target, w.name, variant, n, err)
				}
				if !f.JSON {
					fmt.Fprintf(env.Stderr, "%s %s %s clients=%d: %.0f cells/s\n", target, w.name, variant, n, r.CellsPerSec)
				}
				out = append(out, r)
			}
			continue
		}
		rates := []int{0}
		if f.RateSet {
			rates = f.Rates
		}
		for _, rate := range rates {
			r, err := benchReplicationLag(ctx, e, t.Endpoints(), n, rate, f)
			r.Target = target
			if err != nil {
				return out, fmt.Errorf("%s %s clients=%d: %w", target, w.name, n, err)
			}
			if !f.JSON {
				fmt.Fprintf(env.Stderr, "%s %s clients=%d: %.0f puts/s, ack->visible p50 %dus, p99 %dus\n", target, w.name, n, r.OpsPerSec, r.P50, r.P99)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errWrites: every write of a workload's write phase failed, so there is nothing to measure.
var errWrites = errors.New("bench: every write failed")
