package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/spf13/cobra"
)

type benchFlags struct {
	targets     []string
	endpoints   []string
	mysqlDSN    string
	workloads   []string
	clients     []int
	duration    time.Duration
	warmup      time.Duration
	batch       int
	valueSize   int
	rows        int
	consistency []string
	shards      int
	partitions  int
	inflight    int
	logStore    string
	asJSON      bool
	cpuProfile  string
	trig        triggerFlags
	idx         indexFlags
	async       asyncFlags
	trips       tripsFlags
	scale       scaleFlags
	baselines   []string
	connections int
	ops         int
	// rateSet: --rate was given; put, put-batch and get-latest then run open loop at each
	// --rate value instead of closed loop.
	rateSet bool
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and latency of writes, reads and triggers through the HTTP API",
		Long: `Measure the datastore through its HTTP API with the Go client. Every combination of --target,
--workload, --clients and (for reads) --consistency runs for --duration after --warmup, and one
table row (or JSON object, with --json) reports ops/s, cells/s, latency percentiles (ms in the
table, µs in JSON) and errors. Progress lines go to stderr, the table and its notes to stdout.

Targets:
  external      the cluster at --endpoints (for example one started by 'schemaless dev')
  sqlite        an in-process 3-node cluster on embedded SQLite, in a fresh temp dir
  mysql         the same on the MySQL/MariaDB server at --mysql (databases dropped afterwards)
  raft-noop     the same raft setup with a state machine that stores nothing: the baseline
                that shows the cost of the SQL apply as a ratio
  async         'trips' in async mode (no raft): 6 MariaDB servers started from the installed
                mariadbd in a temp dir (2 storage clusters of a master and 2 minions, GTID
                row-based asynchronous replication), and 3 nodes serving every partition on
                them, partition i on cluster i mod 2, with buffered writes: each cell is first
                inserted into the buffer table of the other cluster's master (one statement
                per cell), then written to its own master, in one transaction per batch of
                commands under a named lock; a reaper deletes buffer rows once their cell is
                on a minion. Default async settings (probes every 500 ms, a reaper pass every
                250 ms, replay after 2 s). The servers are started once per bench run and
                shared by both async targets (databases of their own prefix, dropped
                afterwards); they need mariadbd and mariadb-install-db
  async-unsafe  the same with unsafe_no_buffered_writes: true (one round trip to the master,
                no buffer, no reaper): what buffering costs

Baselines (--baseline, none by default): put and put-batch only (other workloads are skipped
with a note on stderr), run after the --target runs in the same invocation so that the ratios
hold on a noisy machine, with the same --clients, --rate, --batch, --value-size, --warmup and
--duration or --ops:
  raft-noop  the raft-noop target below (not run again when it is among --target: its rows serve)
  mysql      the same inserts straight into the server at --mysql, no datastore in between: a new
             database benchbase_<random> (dropped afterwards, even on error) with one table of the
             datastore's cell table's columns, keys and engine (InnoDB); each request is one
             autocommitted INSERT (one transaction, one commit) of 1 row (put) or of --batch rows
             (put-batch), row keys and bodies made as for the datastore; each client has a
             connection of its own (at most --connections in all). Rows of target baseline-mysql.
The table then gets, for each put and put-batch row, its cells/s as a percentage of the baseline
row of the same workload, clients and rate: columns "vs noop" and "vs mysql" (in JSON
vs_raft_noop and vs_mysql, fractions; absent without a matching row).

Workloads:
  put         put_cell of one new cell per request (random row key, column BASE, ref key 1, a
              JSON body of about --value-size bytes)
  put-batch   put_cells of --batch such cells per request
  get-latest  get_cell_latest of a random row among --rows preloaded rows, per --consistency
  These three run closed loop: each of --clients clients sends its next request as soon as the
  previous one is answered, and a request is measured when it ends within --duration after
  --warmup. With --ops N, a run ends instead once the first N requests started after the warm-up
  are answered (ops + errors = N). With --rate R given explicitly, they run open loop instead,
  one run per --rate and --clients value: request i is due at i/R seconds from the start and is
  sent then to a free client (--clients is the most requests in flight); its latency runs from
  its due time, so a stalled server shows in the percentiles instead of slowing the load (no
  coordinated omission). A request due while every client is busy is late (sent when one is
  free, or never if the run ends first): the JSON field late, and a note under the table. The
  measured requests are those due within --duration after --warmup (the run waits for their
  answers), or with --ops the next N. The clients share one HTTP client with a keep-alive
  connection per request in flight, or at most --connections per node.
  trips        the Mezzanine flow on the real flights: BASE cells written, a billing trigger group
               that writes STATUS cells, index queries and reads; reports the nodes' RSS
  scale-cells  latency at a fixed rate as the stored cells grow, measured at each step of
               --scale-steps (the table's stored column gives the cells stored at each step)

Consumer-group workloads (package triggers; each run creates a new group whose --workers workers
run in this process, and one run per --workers and --trigger-consistency value; the clients column
shows the workers; not on raft-noop, which stores no cells):
  trigger-latency  put_cell of new cells at --rate writes/s, open loop (each write starts when it
                   is due, with up to --max-writers in flight), for --warmup then the measured
                   --duration, while the group, started from the latest position once every shard
                   is owned, delivers them; then up to --drain for late cells. Latency is from the
                   put_cell answer to the call of the handler for that cell; a cell delivered
                   before its answer arrives counts as 0. ops/s is the write rate achieved, cells/s
                   the deliveries; a note under the table gives the cells undelivered after
                   --drain, early, duplicates, and how far the writes fell behind schedule.
  log-read         preload --log-cells cells (put_cells of 500, once per target), then a group
                   reads them from the earliest position with a handler that only counts: cells/s
                   from starting the workers to the last cell's delivery (no latency columns).
                   --read-cpuprofile profiles the read phase alone.

Secondary-index workloads (package indexes; on the in-process targets every node runs the index
maintainer as 'schemaless serve' does, with --index-poll-interval; not on raft-noop):
  index-lag       define an index over a new column and wait until it is ready, then put_cell at
                  --rate writes/s (2000 unless --rate is given), open loop as trigger-latency
                  (--max-writers, --warmup, --duration, --drain). One write in --lag-sample is a
                  probe: all probes share one origin (the index's shard field) and carry their
                  number as distance, so that one strong query every --lag-poll finds every new
                  probe entry. Latency is from the put_cell answer to the answer of the first
                  query that returned the probe's entry (an entry returned before its answer
                  counts as 0). ops/s is the write rate achieved, cells/s the probes seen. The
                  index is dropped afterwards.
  index-backfill  load --index-flights flights from --flights (put_cells of 500, 8 in flight; once
                  per target), then define an index on their BASE cells (origin, date,
                  destination, delay, distance; sharded by origin) and read its status every
                  250 ms until ready: cells/s is the cells handled over the time from defining it
                  to the status showing every cell handled (no latency columns); the note gives
                  the time to the first handled cell and to the state ready.
  index-query     on that index (built first if index-backfill did not run), --clients clients
                  each query one of the --query-origins busiest origins with --query-where,
                  order_by --query-order, pages of --query-limit entries, following cursors up to
                  --query-pages pages, then another origin. One run per --consistency,
                  --query-order, --query-columns (none, or a column whose latest cell comes with
                  each entry) and --clients value; latency is per page, cells/s the entries.
--index-cpuprofile profiles each measured phase of these alone (not the loads and builds).

Async-mode workloads (async targets only; the others skip them with a note on stderr):
  reaper           two variants, one run each per --clients value, --reaper-cells cells each,
                   put_cells of --batch with --clients requests in flight, at full speed.
                   drain: every cell is written normally; samples the buffer depth (rows of the
                   datastore in the buffer tables, counted on the masters) every 100 ms and
                   measures buffer rows created/s and reaped/s during the writes, then the time
                   from the last write to an empty buffer. cells/s is the reaper's throughput
                   over the whole run: rows reaped / (writes + drain).
                   replay: cluster c0's master is fenced (SET GLOBAL read_only=1, which the
                   datastore's user obeys) and only cells of partitions on c0 are written, so
                   every write answers buffered; 2 s after the last write (the replay delay)
                   the master is unfenced (read_only=0). cells/s is cells / (unfence to empty
                   buffer: the reaper deletes a row only once its cell is on a minion); the note
                   gives the times to the master's discovery, the first and the last replay,
                   and the cells a strong get_cells did not find afterwards (unreadable).
                   Not on async-unsafe (no buffer). No latency columns; the note gives put_cells
                   latencies.
  replication-lag  put_cell of new cells by --clients clients for --warmup then --duration, at
                   full speed or, when --rate is given, at most --rate writes/s (one run per
                   value). Meanwhile, every 100 ms, every minion and its master are probed:
                   GTID lag = seq_no of the master's gtid_binlog_pos - seq_no of the minion's
                   gtid_slave_pos (transactions not yet applied; the master is probed first, so
                   a lower bound), and Seconds_Behind_Master. And one marker at a time: a
                   put_cell, then stale get_cells back to back (each served by one random
                   minion of the cell's cluster) until one finds the cell. The latency columns
                   are that ack -> visible on a minion time; ops/s the load's puts.

In-process targets use the production raft timeouts and one datastore 'trips' with --shards shards
in --partitions partitions on 3 nodes; clients and nodes (and the async targets' MariaDB servers)
share this machine's cores.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.rateSet = cmd.Flags().Changed("rate")
			f.idx.rateSet = f.rateSet
			f.async.rateSet = f.rateSet
			return runBench(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.targets, "target", []string{"sqlite"}, "targets, comma-separated, run one after the other: external, sqlite, mysql, raft-noop, async, async-unsafe (see Targets)")
	fl.StringSliceVar(&f.endpoints, "endpoints", []string{"http://127.0.0.1:7070", "http://127.0.0.1:7071", "http://127.0.0.1:7072"}, "nodes (HTTP base URLs) of the external target, comma-separated")
	fl.StringVar(&f.mysqlDSN, "mysql", "root@tcp(127.0.0.1:3306)/", "DSN of the MySQL/MariaDB server of the mysql target and the mysql baseline (its database part is ignored)")
	fl.StringSliceVar(&f.workloads, "workload", []string{"put"}, "workloads, comma-separated, run in this order on each target: put, put-batch, get-latest, trigger-latency, log-read, index-lag, index-query, index-backfill, reaper, replication-lag, trips, scale-cells (see Workloads)")
	fl.StringSliceVar(&f.baselines, "baseline", nil, "baselines of put and put-batch, comma-separated, run after the targets: mysql, raft-noop (none by default; see Baselines)")
	fl.IntSliceVar(&f.clients, "clients", []int{1}, "concurrent clients of put, put-batch, get-latest (open loop: requests in flight at most), the baselines, index-query and replication-lag, requests in flight of reaper; comma-separated (one run per value; scale-cells uses the first value only)")
	fl.IntVar(&f.connections, "connections", 0, "put, put-batch, get-latest: HTTP connections per node at most, shared by all clients (http.Transport.MaxConnsPerHost); mysql baseline: connections to the server at most; 0: one per client")
	fl.IntVar(&f.ops, "ops", 0, "put, put-batch, get-latest and the baselines: end each run after this many measured requests (answered, or failed: ops + errors) instead of after --duration; the warm-up is unchanged; 0: use --duration")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "measured time of each run: put, put-batch, get-latest and the baselines (unless --ops is set), trigger-latency, index-lag, index-query, replication-lag, scale-cells (each step)")
	fl.DurationVar(&f.warmup, "warmup", 2*time.Second, "unmeasured time at the start of each run of the workloads that use --duration (requests ending in it are not counted)")
	fl.IntVar(&f.batch, "batch", 100, "cells per put_cells request (put-batch, reaper) and rows per INSERT of the mysql baseline's put-batch")
	fl.IntVar(&f.valueSize, "value-size", 200, "approximate size of each cell body written, in bytes of JSON")
	fl.IntVar(&f.rows, "rows", 10000, "get-latest: rows preloaded (one BASE cell each, put_cells of 500, once per target), read at random")
	fl.StringSliceVar(&f.consistency, "consistency", []string{client.ConsistencyStrong}, "read consistencies of get-latest and index-query, comma-separated (one run per value): strong (the leader), stale (any replica)")
	fl.IntVar(&f.shards, "shards", 64, "shards of the in-process targets' datastore")
	fl.IntVar(&f.partitions, "partitions", 4, "partitions of the in-process targets' datastore (3 replicas each)")
	fl.IntVar(&f.inflight, "max-inflight", partition.DefaultConfig().MaxInflight, "raft entries in flight per partition of the in-process targets (see serve --max-inflight)")
	fl.StringVar(&f.logStore, "raft-log-store", partition.DefaultConfig().LogStore, "raft log format of the in-process targets' replicas: bolt (raft-boltdb) or wal (hashicorp/raft-wal); see serve --raft-log-store")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (clients and in-process nodes) to this file")
	fl.BoolVar(&f.asJSON, "json", false, "print results as JSON lines (one object per run, latencies in µs) instead of a table")
	f.trig.register(fl)
	f.idx.register(fl)
	f.async.register(fl)
	f.trips.register(fl)
	f.scale.register(fl)
	cmd.AddCommand(newBenchPlotCmd())
	return cmd
}

// benchResult is one run's figures. Latencies are in microseconds. For the trigger workloads,
// Clients is the group's workers and Triggers holds their other figures.
type benchResult struct {
	Target      string  `json:"target"`
	Workload    string  `json:"workload"`
	Consistency string  `json:"consistency,omitempty"`
	Clients     int     `json:"clients"`
	Seconds     float64 `json:"seconds"`
	Ops         int64   `json:"ops"`
	Cells       int64   `json:"cells"`
	Errors      int64   `json:"errors"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	CellsPerSec float64 `json:"cells_per_sec"`
	P50         int64   `json:"p50_us"`
	P90         int64   `json:"p90_us"`
	P99         int64   `json:"p99_us"`
	Max         int64   `json:"max_us"`
	FirstError  string  `json:"first_error,omitempty"`
	// StoredCells is the cells the datastore held during the run (scale-cells, trips).
	StoredCells int64 `json:"stored_cells,omitempty"`
	// Rate is the requests/s asked of an open-loop run of put, put-batch or get-latest (--rate);
	// 0 for a closed-loop run. Late counts its measured requests that found every client busy
	// at their scheduled time: sent late, or never when the run ended first (see runLoad).
	Rate int   `json:"rate,omitempty"`
	Late int64 `json:"late,omitempty"`
	// VsRaftNoop and VsMySQL are a put or put-batch row's cells/s as a fraction of the matching
	// row (same workload, clients and rate) of the raft-noop target and of the mysql baseline
	// (see setBaselineRatios); 0 when there is none.
	VsRaftNoop float64 `json:"vs_raft_noop,omitempty"`
	VsMySQL    float64 `json:"vs_mysql,omitempty"`

	Triggers *triggerFigures `json:"triggers,omitempty"`
	Index    *indexFigures   `json:"index,omitempty"`
	Reaper   *reaperFigures  `json:"reaper,omitempty"`
	Lag      *lagFigures     `json:"replication_lag,omitempty"`
}

func runBench(ctx context.Context, f benchFlags) error {
	for _, w := range f.workloads {
		switch w {
		case "put", "put-batch", "get-latest", workloadTriggerLatency, workloadLogRead, workloadIndexLag, workloadIndexQuery, workloadIndexBackfill,
			workloadReaper, workloadReplicationLag, workloadTrips, workloadScaleCells:
		default:
			return fmt.Errorf("--workload %q: want put, put-batch, get-latest, trigger-latency, log-read, index-lag, index-query, index-backfill, reaper, replication-lag, trips or scale-cells", w)
		}
	}
	if err := f.trig.validate(f); err != nil {
		return err
	}
	if err := f.idx.validate(f.cpuProfile); err != nil {
		return err
	}
	if err := f.async.validate(); err != nil {
		return err
	}
	if err := f.trips.validate(f); err != nil {
		return err
	}
	if err := f.scale.validate(f); err != nil {
		return err
	}
	for _, c := range f.consistency {
		if c != client.ConsistencyStrong && c != client.ConsistencyStale {
			return fmt.Errorf("--consistency %q: want strong or stale", c)
		}
	}
	if f.batch < 1 || f.valueSize < 2 || f.rows < 1 || f.duration <= 0 {
		return errors.New("--batch, --value-size, --rows and --duration must be positive")
	}
	if f.ops < 0 || f.connections < 0 || f.warmup < 0 {
		return errors.New("--ops, --connections and --warmup must not be negative")
	}
	if err := validateBaselines(f.baselines); err != nil {
		return err
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if !f.asJSON {
		fmt.Printf("# %s, %d CPUs, %s\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.Version())
	}
	var results []benchResult
	var repl replicatedServers // the async targets' servers, started on first use
	defer repl.close()
	for _, target := range f.targets {
		env, err := startTarget(ctx, target, f, &repl)
		if err != nil {
			return err
		}
		rs, err := benchTarget(ctx, target, env, f)
		env.stop()
		results = append(results, rs...)
		if err != nil {
			return err
		}
	}
	rs, err := runBaselines(ctx, f, &repl)
	results = append(results, rs...)
	if err != nil {
		return err
	}
	setBaselineRatios(results)
	if f.asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	printBenchTable(results)
	return nil
}

// benchEnv is a started target.
type benchEnv struct {
	endpoints []string
	// stop stops the target (not the servers of repl, which runBench stops at the end).
	stop func()
	// async is set for the async targets.
	async *asyncEnv
}

// startTarget starts target (the async targets on repl's servers, starting them if needed).
func startTarget(ctx context.Context, target string, f benchFlags, repl *replicatedServers) (benchEnv, error) {
	if target == "external" {
		return benchEnv{endpoints: f.endpoints, stop: func() {}}, nil
	}
	dir, err := os.MkdirTemp("", "schemaless-bench-")
	if err != nil {
		return benchEnv{}, err
	}
	opts := localcluster.Options{Dir: dir, Shards: f.shards, Partitions: f.partitions, Partition: partition.DefaultConfig()}
	opts.API.RequestTimeout = benchRequestTimeout
	opts.Partition.MaxInflight = f.inflight
	opts.Partition.LogStore = f.logStore
	opts.OnFatal = func(node string, err error) { fmt.Fprintf(os.Stderr, "bench: node %s: fatal: %v\n", node, err) }
	var prefix, asyncPrefix string
	switch target {
	case "sqlite":
	case "mysql":
		prefix = fmt.Sprintf("bench%06d", rand.N(1000000))
		opts.MySQLDSN, opts.MySQLPrefix = f.mysqlDSN, prefix
	case "raft-noop":
		opts.Partition.NewStateMachine = func(context.Context) (partition.StateMachine, error) { return fsm.NewNoop(), nil }
	case targetAsync, targetAsyncUnsafe:
		set, err := repl.get(ctx)
		if err != nil {
			os.RemoveAll(dir)
			return benchEnv{}, fmt.Errorf("--target %s: %w", target, err)
		}
		asyncPrefix = fmt.Sprintf("bench%06d", rand.N(1000000))
		opts.Async = asyncOptions(set, asyncPrefix, target == targetAsyncUnsafe)
	default:
		os.RemoveAll(dir)
		return benchEnv{}, fmt.Errorf("--target %q: want external, sqlite, mysql, raft-noop, async or async-unsafe", target)
	}
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		if asyncPrefix != "" {
			repl.drop(asyncPrefix)
		}
		return benchEnv{}, fmt.Errorf("start %s cluster: %w", target, err)
	}
	var aenv *asyncEnv
	if opts.Async != nil {
		aenv = newAsyncEnv(repl.set, c, opts.Async)
	}
	stopMaintainers := func() {}
	if target != "raft-noop" && slices.ContainsFunc(f.workloads, needsMaintainers) {
		if stopMaintainers, err = startMaintainers(ctx, c, f.idx); err != nil {
			_ = c.Close()
			os.RemoveAll(dir)
			if asyncPrefix != "" {
				repl.drop(asyncPrefix)
			}
			return benchEnv{}, fmt.Errorf("start %s index maintainers: %w", target, err)
		}
	}
	return benchEnv{endpoints: c.URLs(), async: aenv, stop: func() {
		stopMaintainers()
		if aenv != nil {
			aenv.close()
		}
		_ = c.Close()
		os.RemoveAll(dir)
		if prefix != "" {
			if err := dropDatabases(context.Background(), f.mysqlDSN, []string{prefix}); err != nil {
				fmt.Fprintf(os.Stderr, "bench: drop databases %s_*: %v\n", prefix, err)
			}
		}
		if asyncPrefix != "" {
			repl.drop(asyncPrefix)
		}
	}}, nil
}

// benchClient returns a client of the datastore "trips" on endpoints for clients concurrent
// requests, keeping one idle keep-alive connection per request in flight.
func benchClient(endpoints []string, clients int) (*client.Client, error) {
	return benchClientConns(endpoints, clients, 0)
}

// benchRequestTimeout bounds one request of the benchmark's clients and, on the in-process
// targets, the nodes' handling of it (api.Config.RequestTimeout, 10 s by default). A slow
// answer is measured, not cut and retried: a loaded machine can take longer than 10 s for a
// put_cells of 500.
const benchRequestTimeout = time.Minute

// benchClientConns is benchClient with at most conns HTTP connections per node, shared by
// the clients (requests wait for a free one); conns 0 is benchClient's one per client.
func benchClientConns(endpoints []string, clients, conns int) (*client.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = clients + 16
	t.MaxIdleConns = 3*clients + 64
	if conns > 0 {
		t.MaxConnsPerHost = conns
		t.MaxIdleConnsPerHost = conns
		t.MaxIdleConns = len(endpoints) * conns
	}
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = "trips"
	cfg.HTTPClient = &http.Client{Transport: t}
	cfg.RequestTimeout = benchRequestTimeout
	return client.New(cfg)
}

// benchBody returns a JSON object of about size bytes.
func benchBody(rng *rand.Rand, size int) json.RawMessage {
	head := fmt.Sprintf(`{"origin":"SFO","destination":"JFK","distance":%d,"delay":%d,"pad":"`, rng.IntN(3000), rng.IntN(200)-20)
	pad := size - len(head) - 2
	if pad < 0 {
		pad = 0
	}
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 0, len(head)+pad+2)
	b = append(b, head...)
	for i := 0; i < pad; i++ {
		b = append(b, letters[rng.IntN(len(letters))])
	}
	return append(b, '"', '}')
}

func benchTarget(ctx context.Context, target string, env benchEnv, f benchFlags) ([]benchResult, error) {
	endpoints := env.endpoints
	var out []benchResult
	var rows []uuid.UUID
	var lp logPreload
	var fx indexFixture
	for _, w := range f.workloads {
		if w == workloadTrips || w == workloadScaleCells {
			run := benchTripsWorkload
			if w == workloadScaleCells {
				run = benchScaleCellsWorkload
			}
			rs, err := run(ctx, target, env, f)
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
			continue
		}
		if isAsyncWorkload(w) {
			rs, err := benchAsyncWorkload(ctx, target, env, w, f)
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
			continue
		}
		if isIndexWorkload(w) {
			rs, err := benchIndexWorkload(ctx, target, endpoints, w, &fx, f)
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
			continue
		}
		if isTriggerWorkload(w) {
			rs, err := benchTriggerWorkload(ctx, target, endpoints, w, &lp, f)
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
			continue
		}
		consistencies := []string{""}
		if w == "get-latest" {
			consistencies = f.consistency
			if rows == nil {
				var err error
				if rows, err = preload(ctx, endpoints, f); err != nil {
					return out, fmt.Errorf("%s: preload: %w", target, err)
				}
			}
		}
		for _, cons := range consistencies {
			for _, rate := range loadRates(f) {
				for _, n := range f.clients {
					cl, err := benchClientConns(endpoints, n, f.connections)
					if err != nil {
						return out, err
					}
					r := benchRunRate(ctx, cl, w, cons, n, rate, rows, f)
					r.Target = target
					if !f.asJSON {
						fmt.Fprintln(os.Stderr, runLine(r))
					}
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}

// preload writes f.rows rows (one BASE cell each) for the read workloads.
func preload(ctx context.Context, endpoints []string, f benchFlags) ([]uuid.UUID, error) {
	cl, err := benchClient(endpoints, 8)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]uuid.UUID, f.rows)
	for i := range rows {
		rows[i] = uuid.New()
	}
	for i := 0; i < len(rows); i += 500 {
		end := min(i+500, len(rows))
		ws := make([]client.CellWrite, 0, end-i)
		for _, r := range rows[i:end] {
			ws = append(ws, client.CellWrite{Key: cellKey(r), Body: benchBody(rng, f.valueSize)})
		}
		if _, err := cl.PutCells(ctx, ws); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// benchRun runs one workload with n clients, closed loop: for f.warmup, then for f.duration or
// f.ops measured requests (see runLoad).
func benchRun(ctx context.Context, cl *client.Client, workload, consistency string, n int, rows []uuid.UUID, f benchFlags) benchResult {
	return benchRunRate(ctx, cl, workload, consistency, n, 0, rows, f)
}

// benchRunRate is benchRun at rate requests/s, open loop, or closed loop when rate is 0.
func benchRunRate(ctx context.Context, cl *client.Client, workload, consistency string, n, rate int, rows []uuid.UUID, f benchFlags) benchResult {
	r := runLoad(ctx, n, rate, f, func(ctx context.Context, rng *rand.Rand) (int, error) {
		return benchOp(ctx, cl, workload, consistency, rows, rng, f)
	})
	r.Workload, r.Consistency = workload, consistency
	return r
}

// runLine is the line printed on stderr after a run of put, put-batch or get-latest.
func runLine(r benchResult) string {
	s := fmt.Sprintf("%s %s clients=%d: %.0f ops/s, %.0f cells/s, p50 %dus, p99 %dus, %d errors", r.Target, benchLabel(r), r.Clients,
		r.OpsPerSec, r.CellsPerSec, r.P50, r.P99, r.Errors)
	if r.Rate > 0 {
		s += fmt.Sprintf(", %d late", r.Late)
	}
	return s
}

// benchOp does one operation and returns the cells it wrote or read.
func benchOp(ctx context.Context, cl *client.Client, workload, consistency string, rows []uuid.UUID, rng *rand.Rand, f benchFlags) (int, error) {
	switch workload {
	case "put":
		k := cellKey(uuid.New())
		_, err := cl.PutCell(ctx, k.RowKey, k.ColumnKey, k.RefKey, benchBody(rng, f.valueSize))
		return 1, err
	case "put-batch":
		ws := make([]client.CellWrite, f.batch)
		for i := range ws {
			ws[i] = client.CellWrite{Key: cellKey(uuid.New()), Body: benchBody(rng, f.valueSize)}
		}
		_, err := cl.PutCells(ctx, ws)
		return f.batch, err
	default:
		_, err := cl.GetCellLatest(ctx, rows[rng.IntN(len(rows))], "BASE", client.WithConsistency(consistency))
		return 1, err
	}
}

// printBenchTable prints rs as a table, then the notes of the rows that have one and their
// first errors. The columns vs noop, vs mysql (see setBaselineRatios) and stored (StoredCells)
// appear only when some row has a value for them.
func printBenchTable(rs []benchResult) {
	var vsNoop, vsMySQL, stored bool
	for _, r := range rs {
		vsNoop = vsNoop || r.VsRaftNoop > 0
		vsMySQL = vsMySQL || r.VsMySQL > 0
		stored = stored || r.StoredCells > 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "target\tworkload\tclients\tops/s\tcells/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\t"
	if vsNoop {
		head += "vs noop\t"
	}
	if vsMySQL {
		head += "vs mysql\t"
	}
	if stored {
		head += "stored\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rs {
		lat := fmt.Sprintf("%.2f\t%.2f\t%.2f\t%.1f", float64(r.P50)/1000, float64(r.P90)/1000, float64(r.P99)/1000, float64(r.Max)/1000)
		if r.Workload == workloadLogRead || r.Workload == workloadIndexBackfill || r.Workload == workloadReaper || r.Workload == scaleWorkloadLoad { // no latency figures
			lat = "-\t-\t-\t-"
		}
		line := fmt.Sprintf("%s\t%s\t%d\t%.0f\t%.0f\t%s\t%d\t", r.Target, benchLabel(r), r.Clients, r.OpsPerSec, r.CellsPerSec, lat, r.Errors)
		if vsNoop {
			line += percent(r.VsRaftNoop) + "\t"
		}
		if vsMySQL {
			line += percent(r.VsMySQL) + "\t"
		}
		if stored {
			line += fmt.Sprintf("%d\t", r.StoredCells)
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	for _, r := range rs {
		if r.Triggers != nil {
			fmt.Println(triggerNote(r))
		}
		if r.Index != nil {
			fmt.Println(indexNote(r))
		}
		if r.Reaper != nil {
			fmt.Println(reaperNote(r))
		}
		if r.Lag != nil {
			fmt.Println(lagNote(r))
		}
		if r.Rate > 0 && isLoadWorkload(r.Workload) {
			fmt.Println(openLoopNote(r))
		}
	}
	for _, r := range rs {
		if r.FirstError != "" {
			fmt.Printf("%s %s clients=%d first error: %s\n", r.Target, benchLabel(r), r.Clients, strings.TrimSpace(r.FirstError))
		}
	}
}

// benchLabel is the workload column of r: the workload and its variant, consistency and, for an
// open-loop run, its rate ("put @500/s").
func benchLabel(r benchResult) string {
	w := r.Workload
	if r.Index != nil && r.Index.Variant != "" {
		w += " " + r.Index.Variant
	}
	if r.Consistency != "" {
		w += " " + r.Consistency
	}
	if r.Reaper != nil && r.Reaper.Variant != "" {
		w += " " + r.Reaper.Variant
	}
	if r.Rate > 0 && isLoadWorkload(r.Workload) {
		w += fmt.Sprintf(" @%d/s", r.Rate)
	}
	return w
}

// isLoadWorkload reports whether w is run by runLoad: put, put-batch or get-latest.
func isLoadWorkload(w string) bool { return w == "put" || w == "put-batch" || w == "get-latest" }

// percent formats a fraction as a percentage, "-" for 0.
func percent(x float64) string {
	switch {
	case x <= 0:
		return "-"
	case x < 0.1:
		return fmt.Sprintf("%.1f%%", 100*x)
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// openLoopNote is the line printed under the table for an open-loop run.
func openLoopNote(r benchResult) string {
	return fmt.Sprintf("%s %s clients=%d: open loop, %d requests/s asked, %.0f done; %d late (every client busy at their scheduled time: sent late, or never when the run ended first); latency counts from the scheduled time",
		r.Target, benchLabel(r), r.Clients, r.Rate, r.OpsPerSec, r.Late)
}

// needsMaintainers reports whether workload w needs the index maintainers beside the nodes: the
// index workloads, and trips (its flights index).
func needsMaintainers(w string) bool { return isIndexWorkload(w) || w == workloadTrips }

// cellKey is the key of a benchmark cell: the row's BASE cell, ref key 1.
func cellKey(row uuid.UUID) cells.Key { return cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1} }
