package main

import (
	"context"
	"os"

	"github.com/schemaless-db/schemaless/bench"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/spf13/cobra"
)

// newBenchCmd is `schemaless bench`: its flags fill a bench.Config (defaults from
// bench.DefaultConfig), which bench.Run runs.
func newBenchCmd() *cobra.Command {
	return newBenchCmdRunning(func(ctx context.Context, c bench.Config) error {
		return bench.Run(ctx, c, os.Stdout, os.Stderr)
	})
}

// newBenchCmdRunning is newBenchCmd calling run with the configuration its flags give.
func newBenchCmdRunning(run func(context.Context, bench.Config) error) *cobra.Command {
	c := bench.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and latency of writes, reads and triggers through the HTTP API",
		Long: `Measure the datastore through its HTTP API. Every combination of --target, --workload, --clients
and (for reads) --consistency runs for --duration after --warmup, and one table row (or JSON
object, with --json) reports ops/s, cells/s, latency percentiles (ms in the table, µs in JSON)
and errors. Progress lines go to stderr, the table and its notes to stdout.

Targets:
  external      the cluster at --endpoints (for example one started by 'schemaless dev')
  sqlite        an in-process 3-node cluster on embedded SQLite, in a fresh temp dir
  pebble        the same on embedded pebble (one store per node, serve --store pebble's
                default tuning)
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
  sqlite-secure, pebble-secure, mysql-secure, raft-noop-secure
                the same as sqlite, pebble, mysql and raft-noop with security on, as
                'schemaless dev --secure' runs its nodes: a development bundle (CA, node
                certificates, gossip key, principals file) in the temp dir, TLS on the API,
                mutual TLS on the node port, every request authenticated by bearer token,
                gossip on and encrypted.
                The clients use https trusting the bundle's CA and send the app principal's
                token (write role). Only put, put-batch, get-latest, put-if, transaction and
                bank run on them (the others are skipped with a note). Give a target and its
                secure variant alternately in one invocation (--target sqlite,sqlite-secure,
                sqlite,sqlite-secure) to compare them on a noisy machine

Baselines (--baseline, none by default): put and put-batch only (other workloads are skipped
with a note on stderr), run after the --target runs in the same invocation so that the ratios
hold on a noisy machine, with the same --clients, --rate, --batch, --value-size, --warmup and
--duration or --ops:
  raft-noop  the raft-noop target below (not run again when it is among --target: its rows serve)
  raft-raw   hashicorp/raft alone, the consensus library's speed on this machine: 3 raft servers in
             this process, one group, the partitions' raft log (--raft-log-store), log cache,
             timeouts and node transport, a state machine that does nothing; a put is one
             Apply of one body on the leader, a put-batch one Apply of --batch bodies in one
             entry. No HTTP, JSON, cell encoding or SQL. Rows of target raft-raw.
  mysql      the same inserts straight into the server at --mysql, no datastore in between: a new
             database benchbase_<random> (dropped afterwards, even on error) with one table of the
             datastore's cell table's columns, keys and engine (InnoDB); each request is one
             autocommitted INSERT (one transaction, one commit) of 1 row (put) or of --batch rows
             (put-batch), row keys and bodies made as for the datastore; each client has a
             connection of its own (at most --connections in all). Rows of target baseline-mysql.
The table then gets, for each put and put-batch row, its cells/s as a percentage of the baseline
row of the same workload, clients and rate: columns "vs raw", "vs noop" and "vs mysql" (in JSON
vs_raft_raw, vs_raft_noop and vs_mysql, fractions; absent without a matching row).

CPU: each put, put-batch and get-latest run reports the CPU time (user + system) spent in its
measured phase by this process (the clients and the in-process targets' nodes) and the
--cpu-pid processes, per 10,000 cells: column "cpu-s/10k" (in JSON cpu_seconds, the total),
and the --cpu-pid processes' part alone in column "node cpu" (JSON node_cpu_seconds). For the
mysql target and baseline, add the MariaDB server's pid with --cpu-pid.

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
  connection per request in flight, or at most --connections per node. --client go (the
  default) makes it package client's (leader hints, retries, an Idempotency-Key per write);
  --client plain one that sends each request to a random node, as curl or a Python program
  would (no Idempotency-Key, no retry: a failure or an answer other than 2xx is an error).
  --client go,plain alternates them, and the rows then show a client column (JSON client).
  trips        the Mezzanine flow on the real flights: BASE cells written, a billing trigger group
               that writes STATUS cells, index queries and reads; reports the nodes' RSS
  scale-cells  latency at a fixed rate as the stored cells grow, measured at each step of
               --scale-steps (the table's stored column gives the cells stored at each step)
  split        partitions of trips split online under the first --clients value of put_cell
               writers: --split-preload cells first, then --split-count splits of the largest
               partition at its middle, --split-interval apart, and --split-merges merges among
               them; rows: each split's and merge's time, every write's figures, and the writes
               sent while a split or merge ran (their p99 and max: the pause); every target
               but raft-noop (which stores no cells), an external cluster on any store

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
			c.RateSet = cmd.Flags().Changed("rate")
			return run(cmd.Context(), c)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&c.Targets, "target", c.Targets, "targets, comma-separated, run one after the other (a target may repeat): external, sqlite, pebble, mysql, raft-noop, async, async-unsafe, sqlite-secure, pebble-secure, mysql-secure, raft-noop-secure (see Targets)")
	fl.StringSliceVar(&c.Endpoints, "endpoints", c.Endpoints, "nodes (HTTP base URLs) of the external target, comma-separated")
	fl.StringVar(&c.MySQLDSN, "mysql", c.MySQLDSN, "DSN of the MySQL/MariaDB server of the mysql target and the mysql baseline (its database part is ignored)")
	fl.StringSliceVar(&c.Workloads, "workload", c.Workloads, "workloads, comma-separated, run in this order on each target: put, put-batch, get-latest, put-if, transaction, bank, trigger-latency, log-read, index-lag, index-query, index-backfill, reaper, replication-lag, trips, scale-cells (see Workloads)")
	fl.StringSliceVar(&c.Baselines, "baseline", c.Baselines, "baselines of put and put-batch, comma-separated, run after the targets: mysql, raft-noop, raft-raw (none by default; see Baselines)")
	fl.IntSliceVar(&c.CPUPIDs, "cpu-pid", c.CPUPIDs, "processes whose CPU time (user+sys, from /proc) counts in each put, put-batch and get-latest run's cpu-s/10k beside this process's: an external target's nodes, a database server; comma-separated")
	fl.IntSliceVar(&c.Clients, "clients", c.Clients, "concurrent clients of put, put-batch, get-latest, put-if, transaction, bank (open loop: requests in flight at most), the baselines, index-query and replication-lag, requests in flight of reaper; comma-separated (one run per value; scale-cells uses the first value only)")
	fl.StringSliceVar(&c.ClientKinds, "client", c.ClientKinds, "HTTP clients of put, put-batch and get-latest, comma-separated (one run per value for each --clients value, in order; a value may repeat): go (package client: requests to the partition's leader when known, retries with backoff, an Idempotency-Key on every write, HTTP/1.1 also over TLS) or plain (each request with net/http to a node picked at random, the JSON body a curl user sends, the token on a secure target, no Idempotency-Key, no retry, no redirect followed; keep-alive, HTTP/1.1 over http, over https what ALPN agrees: HTTP/2 with the nodes); the other workloads refuse plain")
	fl.IntVar(&c.Connections, "connections", c.Connections, "put, put-batch, get-latest: HTTP connections per node at most, shared by all clients (http.Transport.MaxConnsPerHost); mysql baseline: connections to the server at most; 0: one per client")
	fl.IntVar(&c.Ops, "ops", c.Ops, "put, put-batch, get-latest and the baselines: end each run after this many measured requests (answered, or failed: ops + errors) instead of after --duration; the warm-up is unchanged; 0: use --duration")
	fl.DurationVar(&c.Duration, "duration", c.Duration, "measured time of each run: put, put-batch, get-latest and the baselines (unless --ops is set), trigger-latency, index-lag, index-query, replication-lag, scale-cells (each step)")
	fl.DurationVar(&c.Warmup, "warmup", c.Warmup, "unmeasured time at the start of each run of the workloads that use --duration (requests ending in it are not counted)")
	fl.IntVar(&c.Batch, "batch", c.Batch, "cells per put_cells request (put-batch, reaper) and rows per INSERT of the mysql baseline's put-batch")
	fl.IntVar(&c.ValueSize, "value-size", c.ValueSize, "approximate size of each cell body written, in bytes of JSON")
	fl.IntVar(&c.Rows, "rows", c.Rows, "get-latest: rows preloaded (one BASE cell each, put_cells of 500, once per target), read at random")
	fl.StringSliceVar(&c.Consistency, "consistency", c.Consistency, "read consistencies of get-latest and index-query, comma-separated (one run per value): strong (the leader), stale (any replica)")
	fl.IntVar(&c.Shards, "shards", c.Shards, "shards of the in-process targets' datastore")
	fl.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions of the in-process targets' datastore (3 replicas each)")
	fl.IntVar(&c.MaxInflight, "max-inflight", c.MaxInflight, "raft entries in flight per partition of the in-process targets (see serve --max-inflight)")
	fl.StringVar(&c.RaftLogStore, "raft-log-store", c.RaftLogStore, "raft log format of the in-process targets' replicas and of the raft-raw baseline: auto (a new replica gets "+partition.AutoLogStoreForNewReplica+"), node (the node's shared pebble log), wal (hashicorp/raft-wal) or bolt (raft-boltdb); see serve --raft-log-store")
	fl.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write a CPU profile of the whole run (clients and in-process nodes) to this file")
	fl.BoolVar(&c.JSON, "json", c.JSON, "print results as JSON lines (one object per run, latencies in µs) instead of a table")
	fl.IntSliceVar(&c.Rates, "rate", c.Rates, "requests per second, one run per value: trigger-latency and index-lag put_cell writes, open loop (index-lag: 2000 when not given); replication-lag: writes at most, only when given; put, put-batch, get-latest and the baselines: open loop only when given (else closed loop), --clients in flight at most")
	fl.IntSliceVar(&c.Triggers.Workers, "workers", c.Triggers.Workers, "trigger-latency, log-read: workers of the consumer group, in this process (one run per value)")
	fl.IntVar(&c.Triggers.MaxWriters, "max-writers", c.Triggers.MaxWriters, "trigger-latency, index-lag: writes in flight at most; a write due while all are busy starts late (reported as behind)")
	fl.DurationVar(&c.Triggers.Drain, "drain", c.Triggers.Drain, "trigger-latency: wait this long after the last write for cells not yet delivered (index-lag: for probes not yet seen); log-read: give up after this long without a delivery")
	fl.IntVar(&c.Triggers.LogCells, "log-cells", c.Triggers.LogCells, "log-read: cells preloaded (put_cells of 500, 8 in flight) and then read by the group")
	fl.IntVar(&c.Triggers.BatchSize, "trigger-batch", c.Triggers.BatchSize, "trigger workloads: cells read per shard per poll (triggers.Config.BatchSize, 1..1000)")
	fl.IntVar(&c.Triggers.Concurrency, "trigger-concurrency", c.Triggers.Concurrency, "trigger workloads: shards delivered at once per worker (triggers.Config.Concurrency)")
	fl.DurationVar(&c.Triggers.PollWait, "poll-wait", c.Triggers.PollWait, "trigger workloads: long-poll wait of the log reads (triggers.Config.PollWait)")
	fl.StringSliceVar(&c.Triggers.Consistency, "trigger-consistency", c.Triggers.Consistency, "trigger workloads: consistency of the log reads, comma-separated: stale (any replica), strong (the leader)")
	fl.StringVar(&c.Triggers.ReadCPUProfile, "read-cpuprofile", c.Triggers.ReadCPUProfile, "log-read: write a CPU profile of each read phase (not the preload) to this path plus \".<target>.w<workers>\" (a later run with the same name overwrites it; cannot be combined with --cpuprofile)")
	fl.BoolVar(&c.Triggers.LogWarnings, "trigger-log", c.Triggers.LogWarnings, "trigger workloads: print the workers' warnings (failed log reads, heartbeats) to stderr")
	fl.StringVar(&c.Index.FlightsPath, "flights", c.Index.FlightsPath, "index-query, index-backfill: flights file loaded as BASE cells (the import path: put_cells of 500, 8 in flight)")
	fl.StringVar(&c.Index.AirportsPath, "airports", c.Index.AirportsPath, "index-query, index-backfill: airports file joined into the flights")
	fl.IntVar(&c.Index.Flights, "index-flights", c.Index.Flights, "index-query, index-backfill: flights loaded from --flights, once per target (at most the file's)")
	fl.IntVar(&c.Index.LagSample, "lag-sample", c.Index.LagSample, "index-lag: one write in this many is a probe whose entry is watched for")
	fl.DurationVar(&c.Index.LagPoll, "lag-poll", c.Index.LagPoll, "index-lag: interval of the probe query (strong) that finds the probes' entries; a slower query makes it longer")
	fl.StringSliceVar(&c.Index.QueryColumns, "query-columns", c.Index.QueryColumns, "index-query: cells fetched with each entry, comma-separated runs: none, or a column key (one run per value)")
	fl.StringSliceVar(&c.Index.QueryOrder, "query-order", c.Index.QueryOrder, "index-query: order_by of the query, comma-separated runs: date, -delay, ... (one run per value)")
	fl.StringVar(&c.Index.QueryWhere, "query-where", c.Index.QueryWhere, "index-query: conditions, comma-separated, each <field><op><value> with op one of = != < <= > >= (empty: none)")
	fl.IntVar(&c.Index.QueryOrigins, "query-origins", c.Index.QueryOrigins, "index-query: shard values queried: this many busiest origins of the loaded flights, at random")
	fl.IntVar(&c.Index.QueryPages, "query-pages", c.Index.QueryPages, "index-query: pages followed by cursor before a client starts over with another origin (0: to the last page)")
	fl.IntVar(&c.Index.QueryLimit, "query-limit", c.Index.QueryLimit, "index-query: entries per page (limit)")
	fl.DurationVar(&c.Index.PollInterval, "index-poll-interval", c.Index.PollInterval, "index workloads: catalog poll interval of the in-process targets' maintainers (serve --index-poll-interval): starts builds, marks versions ready")
	fl.DurationVar(&c.Index.Timeout, "index-timeout", c.Index.Timeout, "index workloads: longest wait for an index version to be ready")
	fl.BoolVar(&c.Index.LogWarnings, "index-log", c.Index.LogWarnings, "index workloads: print the in-process maintainers' warnings to stderr")
	fl.StringVar(&c.Index.CPUProfile, "index-cpuprofile", c.Index.CPUProfile, "index workloads: write a CPU profile of each measured phase (index-lag: the writes and the drain; index-backfill: define to ready; index-query: one run) to this path plus \".<target>.<workload>.<n>\" (cannot be combined with --cpuprofile)")
	fl.IntVar(&c.Async.ReaperCells, "reaper-cells", c.Async.ReaperCells, "reaper: cells written in each variant (drain, replay)")
	fl.IntVar(&c.Trips.Flights, "trips-flights", c.Trips.Flights, "trips: flights loaded from --flights (the first ones, at most the file's; airports from --airports) as BASE cells of datastore trips, put_cells of 500 with 8 in flight, once per target; the measured phase starts once billing has caught up with them (at most 10 minutes later); the shared 3 million: --flights ../shared/datasets/flights-3m.csv.gz --trips-flights 3000000")
	fl.StringVar(&c.Trips.Mix, "trips-mix", c.Trips.Mix, "trips: percent of each kind of measured operation, comma-separated kind=percent summing to 100 (a kind left out: 0). write: put_cell of a new trip (new row key, BASE body of the next flight of --flights after the loaded ones, from the file's start again at its end); read: get_cell_latest of a random loaded trip, 2 in 3 its BASE cell (stale), 1 in 3 its STATUS cell (strong); query: one page of --query-limit entries of index flights_by_origin for one of the --query-origins busiest loaded origins with --query-where, order_by the first --query-order, consistency the first --consistency")
	fl.IntVar(&c.Trips.LagSample, "trips-lag-sample", c.Trips.LagSample, "trips: one measured write in this many is a trigger-lag probe: from its put_cell answer, its latest STATUS cell is read (strong; one batch get_cells of every pending probe, at most every 2 ms) until billing has written it, giving up after 10 s; the lag is from the answer to the answer of the first read that found it")
	fl.IntSliceVar(&c.Scale.Steps, "scale-steps", c.Scale.Steps,
		"scale-cells: cumulative cell counts, comma-separated and increasing: before each step's measurement, flights are loaded until the cells this run stored (loads and earlier steps' put_cell calls) reach this many")
	fl.Float64Var(&c.Scale.Rate, "scale-rate", c.Scale.Rate,
		"scale-cells: requests/s of put_cell and, separately, of get_cell_latest during each step's --warmup and --duration (open loop: latency counts from each request's scheduled start)")
	fl.StringVar(&c.Scale.File, "scale-file", c.Scale.File,
		"scale-cells: flights file (.csv or .csv.gz) loaded as BASE cells with new row keys, read again from the top when exhausted; airports from --airports (default ../shared/datasets/flights-3m.csv.gz if it exists, else testdata/flights-100k.csv.gz)")
	fl.IntVar(&c.Split.Count, "split-count", c.Split.Count, "split: splits, one after the other, of the partition of trips with the most shards, at its middle")
	fl.IntVar(&c.Split.Preload, "split-preload", c.Split.Preload, "split: cells written to trips before the first split (put_cells of 100, 8 in flight)")
	fl.DurationVar(&c.Split.Interval, "split-interval", c.Split.Interval, "split: time between the end of a split and the start of the next")
	fl.IntVar(&c.Split.Merges, "split-merges", c.Split.Merges, "split: merges among the splits (at most --split-count): after every --split-count/--split-merges splits, the two neighbouring partitions of trips on the same replicas with the fewest shards merge")
	fl.IntVar(&c.Split.Hot, "split-hot", c.Split.Hot, "split: a partition of trips that takes every write; the workload then splits nothing itself and reports when the cluster's load-based splitting split it (serve --split-load) and moved a half's leader to another node (-1: the workload splits)")
	fl.DurationVar(&c.Split.HotWait, "split-hot-wait", c.Split.HotWait, "split: with --split-hot, how long to wait for the load-based split")
	cmd.AddCommand(newBenchPlotCmd(), newBenchPeeringCmd())
	return cmd
}
