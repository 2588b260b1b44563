package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/triggers"
)

// Config is a bench run: which targets, workloads and baselines, and every setting of the
// workloads. DefaultConfig gives the values `schemaless bench` uses when no flag is given;
// Validate checks one. The errors of Validate and Run name the `schemaless bench` flag of the
// field at fault (--clients for Clients, ...).
type Config struct {
	// Targets are run one after the other: external, sqlite, pebble, mysql, raft-noop, async,
	// async-unsafe, and the secure variants sqlite-secure, pebble-secure, mysql-secure,
	// raft-noop-secure (see the package doc). An unknown one fails when its turn comes.
	Targets []string
	// Endpoints are the HTTP base URLs of the external target's nodes.
	Endpoints []string
	// MySQLDSN is the server of the mysql target and the mysql baseline (its database part is
	// ignored).
	MySQLDSN string
	// Workloads are run in this order on each target (names of Workloads()).
	Workloads []string
	// Baselines of put and put-batch, run after the targets: mysql, raft-noop, raft-raw.
	Baselines []string
	// CPUPIDs are processes whose CPU time counts in each run's CPUSeconds beside this
	// process's: the node processes of an external target, a database server.
	CPUPIDs []int
	// Clients are the concurrent clients (requests in flight) of the workloads that have them,
	// one run per value.
	Clients []int
	// ClientKinds are the HTTP clients of put, put-batch and get-latest: each --clients value
	// runs once per value, in order (a value may repeat). "go" is package client (leader-aware,
	// retries, an idempotency key per write), "plain" a client that sends each request to a
	// random node with no idempotency key and no retry, as curl or a Python program would
	// (plainClient). Empty means go. Rows name their client (Result.Client) when some value is
	// not go. Validate refuses plain with any other workload.
	ClientKinds []string
	// Connections bounds the HTTP connections per node of put, put-batch and get-latest, and
	// the mysql baseline's connections to the server; 0: one per client.
	Connections int
	// Ops, when positive, ends each run of put, put-batch, get-latest and the baselines after
	// this many measured requests instead of after Duration.
	Ops int
	// Duration is the measured time of each run of the workloads that have one; Warmup the
	// unmeasured time before it.
	Duration, Warmup time.Duration
	// Batch is the cells per put_cells request (put-batch, reaper) and rows per INSERT of the
	// mysql baseline's put-batch.
	Batch int
	// ValueSize is the approximate size of each cell body written, in bytes of JSON (at least 2).
	ValueSize int
	// Rows are the rows get-latest preloads and reads.
	Rows int
	// Consistency are the read consistencies of get-latest and index-query (client's strong,
	// stale), one run per value.
	Consistency []string
	// Shards and Partitions shape the in-process targets' datastore trips (3 replicas each).
	Shards, Partitions int
	// MaxInflight is the raft entries in flight per partition of the in-process targets;
	// RaftLogStore their replicas' raft log format, as partition.Config.LogStore: auto (a new
	// replica gets partition.AutoLogStoreForNewReplica), node, wal or bolt.
	MaxInflight  int
	RaftLogStore string
	// CPUProfile, when set, is the file of a CPU profile of the whole run.
	CPUProfile string
	// JSON prints one JSON line per run instead of a table (latencies in µs).
	JSON bool
	// Rates are requests per second, one run per value, of trigger-latency and index-lag
	// writes, of replication-lag (at most) and, open loop, of put, put-batch, get-latest and
	// the baselines. RateSet tells whether they were given: without it, put, put-batch,
	// get-latest and the baselines run closed loop, index-lag at 2,000/s and replication-lag at
	// full speed.
	Rates   []int
	RateSet bool

	Triggers TriggerConfig
	Index    IndexConfig
	Async    AsyncConfig
	Trips    TripsConfig
	Scale    ScaleConfig
	Split    SplitConfig
}

// TriggerConfig are the settings of the consumer-group workloads (trigger-latency, log-read).
type TriggerConfig struct {
	// Workers are the group's workers, in this process, one run per value.
	Workers []int
	// MaxWriters bounds the writes in flight of trigger-latency and index-lag.
	MaxWriters int
	// Drain is how long trigger-latency (and index-lag) wait after the last write for what is
	// not yet delivered (seen), and how long log-read waits without a delivery.
	Drain time.Duration
	// LogCells are the cells log-read preloads and reads.
	LogCells int
	// BatchSize (1..1000), Concurrency, PollWait and Consistency are the workers'
	// triggers.Config fields of the same names; Consistency holds one run per value.
	BatchSize   int
	Concurrency int
	PollWait    time.Duration
	Consistency []string
	// ReadCPUProfile, when set, is the path prefix of a CPU profile of each log-read phase.
	ReadCPUProfile string
	// LogWarnings prints the workers' warnings to the run's stderr.
	LogWarnings bool
}

// IndexConfig are the settings of the secondary-index workloads (and of trips' flights and
// queries).
type IndexConfig struct {
	// FlightsPath is the flights file loaded, AirportsPath the airports joined into them.
	FlightsPath, AirportsPath string
	// Flights are the flights index-query and index-backfill load (at most the file's).
	Flights int
	// LagSample: one index-lag write in this many is a probe; LagPoll is the probe query's
	// interval.
	LagSample int
	LagPoll   time.Duration
	// QueryColumns (none, or a column key), QueryOrder (order_by) hold one index-query run per
	// value; QueryWhere is its conditions ("delay>15,origin=ORD"; empty: none).
	QueryColumns []string
	QueryOrder   []string
	QueryWhere   string
	// QueryOrigins are the busiest origins queried, QueryPages the pages followed (0: all),
	// QueryLimit the entries per page.
	QueryOrigins, QueryPages, QueryLimit int
	// PollInterval is the in-process maintainers' catalog poll interval; Timeout the longest
	// wait for an index version to be ready.
	PollInterval, Timeout time.Duration
	// LogWarnings prints the in-process maintainers' warnings to the run's stderr.
	LogWarnings bool
	// CPUProfile, when set, is the path prefix of a CPU profile of each measured phase.
	CPUProfile string
}

// AsyncConfig are the settings of the async-mode workloads.
type AsyncConfig struct {
	// ReaperCells are the cells written in each reaper variant.
	ReaperCells int
}

// TripsConfig are the settings of the trips workload.
type TripsConfig struct {
	// Flights are the flights loaded (the first of IndexConfig.FlightsPath).
	Flights int
	// Mix is the percent of each kind of measured operation: "write=40,read=30,query=30".
	Mix string
	// LagSample: one measured write in this many is a trigger-lag probe.
	LagSample int
}

// ScaleConfig are the settings of the scale-cells workload.
type ScaleConfig struct {
	// Steps are the cumulative cell counts, increasing, loaded before each step's measurement.
	Steps []int
	// Rate is the requests/s of put_cell and, separately, of get_cell_latest in a step.
	Rate float64
	// File is the flights file loaded; "" means ../shared/datasets/flights-3m.csv.gz if it
	// exists, else testdata/flights-100k.csv.gz.
	File string
}

// DefaultConfig returns the configuration of `schemaless bench` without flags.
func DefaultConfig() Config {
	td := triggers.DefaultConfig()
	return Config{
		Targets:      []string{"sqlite"},
		Endpoints:    []string{"http://127.0.0.1:7070", "http://127.0.0.1:7071", "http://127.0.0.1:7072"},
		MySQLDSN:     "root@tcp(127.0.0.1:3306)/",
		Workloads:    []string{"put"},
		Clients:      []int{1},
		ClientKinds:  []string{clientGo},
		Duration:     10 * time.Second,
		Warmup:       2 * time.Second,
		Batch:        100,
		ValueSize:    200,
		Rows:         10000,
		Consistency:  []string{client.ConsistencyStrong},
		Shards:       64,
		Partitions:   4,
		MaxInflight:  partition.DefaultConfig().MaxInflight,
		RaftLogStore: partition.DefaultConfig().LogStore,
		Rates:        []int{1000},
		Triggers: TriggerConfig{
			Workers: []int{1}, MaxWriters: 256, Drain: 10 * time.Second, LogCells: 200000,
			BatchSize: td.BatchSize, Concurrency: td.Concurrency, PollWait: td.PollWait, Consistency: []string{td.Consistency},
		},
		Index: IndexConfig{
			FlightsPath: "testdata/flights-100k.csv.gz", AirportsPath: "testdata/airports.csv", Flights: 100000,
			LagSample: 10, LagPoll: time.Millisecond,
			QueryColumns: []string{"none", "BASE"}, QueryOrder: []string{"date"}, QueryWhere: "delay>15",
			QueryOrigins: 5, QueryPages: 10, QueryLimit: 100,
			PollInterval: maintainer.DefaultConfig().PollInterval, Timeout: 10 * time.Minute,
		},
		Async: AsyncConfig{ReaperCells: 20000},
		Trips: TripsConfig{Flights: 100000, Mix: "write=40,read=30,query=30", LagSample: 20},
		Scale: ScaleConfig{Steps: []int{100000, 300000, 1000000, 3000000}, Rate: 200},
		Split: SplitConfig{Count: 4, Preload: 100000, Interval: 2 * time.Second, Hot: -1, HotWait: 2 * time.Minute},
	}
}

// Validate reports the settings out of range: an unknown workload first, then every bad
// setting of the trigger, index, async, trips and scale-cells workloads (joined), then the
// first bad general setting. Each error names its flag.
func (c Config) Validate() error {
	for _, w := range c.Workloads {
		if _, ok := Lookup(w); !ok {
			return fmt.Errorf("--workload %q: want %s", w, workloadList())
		}
	}
	for _, check := range []func() error{
		c.validateTriggers, c.validateIndex, c.validateAsync, c.validateTrips, c.validateScale, c.validateSplit,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	for _, cons := range c.Consistency {
		if cons != client.ConsistencyStrong && cons != client.ConsistencyStale {
			return fmt.Errorf("--consistency %q: want strong or stale", cons)
		}
	}
	if err := c.validateClientKinds(); err != nil {
		return err
	}
	if c.Batch < 1 || c.ValueSize < 2 || c.Rows < 1 || c.Duration <= 0 {
		return errors.New("--batch, --value-size, --rows and --duration must be positive")
	}
	if c.Ops < 0 || c.Connections < 0 || c.Warmup < 0 {
		return errors.New("--ops, --connections and --warmup must not be negative")
	}
	return validateBaselines(c.Baselines)
}

// workloadList is the names of the workloads for an error message: "a, b or c".
func workloadList() string {
	names := Workloads()
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// validateTriggers reports every trigger setting (and --rate) out of range.
func (c Config) validateTriggers() error {
	t := c.Triggers
	var errs []error
	for _, r := range c.Rates {
		if r < 1 {
			errs = append(errs, fmt.Errorf("--rate %d: must be positive", r))
		}
	}
	for _, w := range t.Workers {
		if w < 1 {
			errs = append(errs, fmt.Errorf("--workers %d: must be positive", w))
		}
	}
	for _, cons := range t.Consistency {
		if cons != client.ConsistencyStrong && cons != client.ConsistencyStale {
			errs = append(errs, fmt.Errorf("--trigger-consistency %q: want stale or strong", cons))
		}
	}
	if t.MaxWriters < 1 || t.Drain <= 0 || t.LogCells < 1 || t.Concurrency < 1 || t.PollWait < 0 {
		errs = append(errs, errors.New("--max-writers, --drain, --log-cells and --trigger-concurrency must be positive"))
	}
	if t.LogCells >= 1<<32 {
		errs = append(errs, errors.New("--log-cells must be below 2^32"))
	}
	if t.BatchSize < 1 || t.BatchSize > 1000 {
		errs = append(errs, fmt.Errorf("--trigger-batch %d: want 1..1000", t.BatchSize))
	}
	if t.ReadCPUProfile != "" && c.CPUProfile != "" {
		errs = append(errs, errors.New("--read-cpuprofile and --cpuprofile cannot be combined"))
	}
	return errors.Join(errs...)
}

// validateIndex reports every index setting out of range, and a --query-where that does not
// parse.
func (c Config) validateIndex() error {
	x := c.Index
	var errs []error
	if x.CPUProfile != "" && c.CPUProfile != "" {
		errs = append(errs, errors.New("--index-cpuprofile and --cpuprofile cannot be combined"))
	}
	if x.Flights < 1 || x.LagSample < 1 || x.QueryOrigins < 1 || x.QueryPages < 0 || x.QueryLimit < 1 {
		errs = append(errs, errors.New("--index-flights, --lag-sample, --query-origins and --query-limit must be positive, --query-pages not negative"))
	}
	if x.LagPoll <= 0 || x.PollInterval <= 0 || x.Timeout <= 0 {
		errs = append(errs, errors.New("--lag-poll, --index-poll-interval and --index-timeout must be positive"))
	}
	if len(x.QueryColumns) == 0 || len(x.QueryOrder) == 0 {
		errs = append(errs, errors.New("--query-columns and --query-order need at least one value"))
	}
	if _, err := parseWhere(x.QueryWhere); err != nil {
		errs = append(errs, fmt.Errorf("--query-where: %w", err))
	}
	return errors.Join(errs...)
}

// validateAsync reports an async setting out of range.
func (c Config) validateAsync() error {
	if c.Async.ReaperCells < 1 {
		return fmt.Errorf("--reaper-cells %d: must be positive", c.Async.ReaperCells)
	}
	return nil
}

// validateTrips reports every trips setting out of range, naming its flag. The file paths are
// checked when the workload opens them.
func (c Config) validateTrips() error {
	t := c.Trips
	var errs []error
	if t.Flights < 1 {
		errs = append(errs, fmt.Errorf("--trips-flights %d: must be positive", t.Flights))
	}
	if _, err := parseTripsMix(t.Mix); err != nil {
		errs = append(errs, fmt.Errorf("--trips-mix %q: %w", t.Mix, err))
	}
	if t.LagSample < 1 {
		errs = append(errs, fmt.Errorf("--trips-lag-sample %d: must be positive", t.LagSample))
	}
	return errors.Join(errs...)
}

// validateSplit reports a bad split setting, naming its flag.
func (c Config) validateSplit() error {
	s := c.Split
	switch {
	case s.Count < 1:
		return fmt.Errorf("--split-count %d: want at least 1", s.Count)
	case s.Preload < 0:
		return fmt.Errorf("--split-preload %d: want 0 or more cells", s.Preload)
	case s.Interval < 0:
		return fmt.Errorf("--split-interval %s: want 0 or more", s.Interval)
	case s.Merges < 0 || s.Merges > s.Count:
		return fmt.Errorf("--split-merges %d: want 0 to --split-count (%d)", s.Merges, s.Count)
	}
	return nil
}

// validateScale reports every bad scale-cells setting, each error naming its flag. The flights
// file and Clients are checked only when the scale-cells workload is selected.
func (c Config) validateScale() error {
	s := c.Scale
	var errs []error
	if len(s.Steps) == 0 {
		errs = append(errs, errors.New("--scale-steps: want at least one cell count"))
	}
	for i, n := range s.Steps {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("--scale-steps %d: want positive cell counts", n))
		} else if i > 0 && n <= s.Steps[i-1] {
			errs = append(errs, fmt.Errorf("--scale-steps %d after %d: want increasing cell counts", n, s.Steps[i-1]))
		}
	}
	if !(s.Rate > 0) || math.IsInf(s.Rate, 0) {
		errs = append(errs, fmt.Errorf("--scale-rate %v: want a positive number of requests/s", s.Rate))
	}
	selected := false
	for _, w := range c.Workloads {
		selected = selected || w == workloadScaleCells
	}
	if selected {
		if _, err := os.Stat(s.path()); err != nil {
			errs = append(errs, fmt.Errorf("--scale-file: %w", err))
		}
		if len(c.Clients) == 0 || c.Clients[0] < 1 {
			errs = append(errs, errors.New("--clients: scale-cells needs a positive first value (its requests in flight)"))
		}
	}
	return errors.Join(errs...)
}

// validateClientKinds reports the first unknown --client value, or a workload of Workloads that
// has no plain client when plain is among them.
func (c Config) validateClientKinds() error {
	for _, k := range c.ClientKinds {
		if k != clientGo && k != clientPlain {
			return fmt.Errorf("--client %q: want go or plain", k)
		}
		if k != clientPlain {
			continue
		}
		for _, w := range c.Workloads {
			if !hasPlainClient(w) {
				return fmt.Errorf("--client plain: workload %s has only the go client (plain runs put, put-batch and get-latest)", w)
			}
		}
	}
	return nil
}
