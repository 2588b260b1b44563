package clustertest

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/internal/watchdog"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
)

// Engine selects the store of every node.
type Engine string

// Engines.
const (
	SQLite Engine = "sqlite"
	MySQL  Engine = "mysql"
	// Pebble gives every node one pebble store in the test's temp dir
	// (localcluster.Options.Store "pebble").
	Pebble Engine = "pebble"
	// Async makes "trips" an async datastore on the process's shared replicated MariaDB set
	// (2 storage clusters of a master and 2 minions, mariadbtest.SharedReplicated), one
	// partition per cluster by default, under a database prefix of the test's own.
	Async Engine = "async"
)

// Options shape a test cluster. Zero fields take defaults: 3 nodes, datastore "trips" with 16
// shards in 2 partitions, SQLite, raft timeouts of 500ms (fast, yet stable on a loaded 2-core
// machine running tests in parallel).
type Options struct {
	// AutoSplit sets the nodes' load-based splitting (zero: off).
	AutoSplit  cluster.AutoSplitConfig
	Nodes      int
	Shards     int
	Partitions int
	Engine     Engine
	// Partition overrides raft tunables (zero fields: the test defaults).
	Partition partition.Config
	// API overrides the API limits.
	API api.Config
	// AsyncCluster, with Engine Async, returns the async options to use on set instead of the
	// defaults (a prefix of the test's own, probes every 200ms); Clusters is filled in.
	AsyncCluster func(set *mariadb.ReplicatedSet) *localcluster.AsyncOptions
	// ReplicatedSet, with Engine Async, is the set to use instead of the shared one (tests
	// that kill, fence or promote members need their own).
	ReplicatedSet *mariadb.ReplicatedSet
	// Indexes runs the index maintainer (package maintainer) in every node, as `schemaless
	// serve` does: without it, defined indexes stay building forever.
	Indexes bool
	// Gossip gives the nodes gossip addresses (see localcluster.Options.Gossip).
	Gossip bool
	// Zones are the nodes' zones (see localcluster.Options.Zones).
	Zones []string
	// Maintainer overrides the maintainers' tunables; Backend, Datastores, Worker and Logger
	// are set per node. A zero PollInterval is 200ms here (the maintainer's default is 1s).
	Maintainer maintainer.Config
}

// Cluster is a running test cluster; every failure fails the test.
type Cluster struct {
	t testing.TB
	*localcluster.Cluster
	// Topology is the cluster's topology.
	Topology *topology.Topology
}

// Watchdog is how long a test that started a cluster may run before its watchdog ends the test
// binary with every goroutine's stack (package watchdog): several times the longest such test
// under -race on a loaded 2-core machine.
const Watchdog = 15 * time.Minute

// Start starts a cluster and waits until every node is ready. It is stopped at t's cleanup.
// It arms t's watchdog (Watchdog).
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	watchdog.Start(t, Watchdog)
	p := &opts.Partition
	// The deployed timeouts (partition.DefaultConfig), not shorter ones: under -race, with other
	// packages' tests on the same 2 cores, a 250ms lease made leaders step down again and again.
	if p.HeartbeatTimeout == 0 {
		p.HeartbeatTimeout = time.Second
	}
	if p.ElectionTimeout == 0 {
		p.ElectionTimeout = time.Second
	}
	if p.LeaderLeaseTimeout == 0 {
		p.LeaderLeaseTimeout = 500 * time.Millisecond
	}
	if p.CommitTimeout == 0 {
		p.CommitTimeout = 10 * time.Millisecond
	}
	logger := slog.New(slog.NewTextHandler(NewTestWriter(t), &slog.HandlerOptions{Level: LogLevel()}))
	lo := localcluster.Options{
		Nodes: opts.Nodes, Shards: opts.Shards, Partitions: opts.Partitions, Dir: t.TempDir(),
		Partition: opts.Partition, API: opts.API, Gossip: opts.Gossip, AutoSplit: opts.AutoSplit, Zones: opts.Zones,
		Logger:  logger,
		OnFatal: func(node string, err error) { t.Errorf("node %s: fatal storage error: %v", node, err) },
	}
	if opts.Indexes {
		m := opts.Maintainer
		m.Worker = ""
		if m.PollInterval == 0 {
			m.PollInterval = 200 * time.Millisecond
		}
		lo.Maintainer = &m
	}
	switch opts.Engine {
	case Pebble:
		lo.Store = string(Pebble)
	case MySQL:
		lo.MySQLDSN = mariadbtest.DSN(t)
		lo.MySQLPrefix = mariadbtest.Prefix(t)
	case Async:
		set := opts.ReplicatedSet
		if set == nil {
			set = mariadbtest.SharedReplicated(t)
		}
		a := &localcluster.AsyncOptions{Prefix: mariadbtest.ReplicatedPrefix(t, set),
			Cluster: partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond}}
		if opts.AsyncCluster != nil {
			a = opts.AsyncCluster(set)
		}
		a.Clusters = append(a.Clusters, topology.StorageClustersOf(set.DSNs())...)
		lo.Async = a
	}
	lc, err := localcluster.Start(context.Background(), lo)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, Cluster: lc, Topology: lc.Topology}
	t.Cleanup(c.StopAll)
	return c
}

// TestWriter writes log lines through t.Log, so they show only when a test fails. Once the
// test's cleanups have run, lines are dropped: a goroutine that outlives its test (a replica
// still stopping) must not panic the test binary by logging after the test completed.
type TestWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

// NewTestWriter returns a TestWriter for t. Register it before anything that logs through it,
// so that its cleanup runs after theirs.
func NewTestWriter(t testing.TB) *TestWriter {
	w := &TestWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

// Write logs p (one or more lines) through t.Log, or drops it after the test. Never fails.
func (w *TestWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// StartNode starts (or restarts) node i over its data, with its index maintainer with
// Options.Indexes.
func (c *Cluster) StartNode(i int) {
	c.t.Helper()
	if err := c.Cluster.StartNode(context.Background(), i); err != nil {
		c.t.Fatal(err)
	}
}

// StopNode stops node i like a crash of its process (no leadership transfer). Its index
// maintainer, if any, is stopped first (cleanly: its workers leave their groups).
func (c *Cluster) StopNode(i int) {
	if err := c.Cluster.StopNode(i); err != nil {
		c.t.Logf("stop node %d: %v", i, err)
	}
}

// StopAll stops every running node (each node's index maintainer first).
func (c *Cluster) StopAll() {
	if err := c.Cluster.Close(); err != nil {
		c.t.Logf("stop: %v", err)
	}
}

// WaitReady waits up to 20s until every running node is ready.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	if err := c.Cluster.WaitReady(context.Background(), 20*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// LeaderOf returns the index of the node leading partition p of "trips", waiting up to 20s.
func (c *Cluster) LeaderOf(p int) int {
	c.t.Helper()
	i, err := c.Cluster.LeaderOf(context.Background(), p, 20*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return i
}

// LogLevel is the level of the test clusters' node logs: warnings and errors, or the level the
// environment variable SCHEMALESS_TEST_LOG names (debug, info, warn, error), to see what the
// nodes did in a failing test: SCHEMALESS_TEST_LOG=info go test -run TestX ./cluster/.
func LogLevel() slog.Level {
	var l slog.Level = slog.LevelWarn
	if v := os.Getenv("SCHEMALESS_TEST_LOG"); v != "" {
		if err := l.UnmarshalText([]byte(v)); err != nil {
			return slog.LevelWarn
		}
	}
	return l
}
