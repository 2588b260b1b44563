package clustertest

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
)

// Engine selects the store of every node.
type Engine string

// Engines.
const (
	SQLite Engine = "sqlite"
	MySQL  Engine = "mysql"
)

// Options shape a test cluster. Zero fields take defaults: 3 nodes, datastore "trips" with 16
// shards in 2 partitions, SQLite, raft timeouts of 500ms (fast, yet stable on a loaded 2-core
// machine running tests in parallel).
type Options struct {
	Nodes      int
	Shards     int
	Partitions int
	Engine     Engine
	// Partition overrides raft tunables (zero fields: the test defaults).
	Partition partition.Config
	// API overrides the API limits.
	API api.Config
}

// Cluster is a running test cluster; every failure fails the test.
type Cluster struct {
	t testing.TB
	*localcluster.Cluster
	// Topology is the cluster's topology.
	Topology *cluster.Topology
}

// Start starts a cluster and waits until every node is ready. It is stopped at t's cleanup.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	p := &opts.Partition
	if p.HeartbeatTimeout == 0 {
		p.HeartbeatTimeout = 500 * time.Millisecond
	}
	if p.ElectionTimeout == 0 {
		p.ElectionTimeout = 500 * time.Millisecond
	}
	if p.LeaderLeaseTimeout == 0 {
		p.LeaderLeaseTimeout = 250 * time.Millisecond
	}
	if p.CommitTimeout == 0 {
		p.CommitTimeout = 10 * time.Millisecond
	}
	lo := localcluster.Options{
		Nodes: opts.Nodes, Shards: opts.Shards, Partitions: opts.Partitions, Dir: t.TempDir(),
		Partition: opts.Partition, API: opts.API,
		Logger:  slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnFatal: func(node string, err error) { t.Errorf("node %s: fatal storage error: %v", node, err) },
	}
	if opts.Engine == MySQL {
		lo.MySQLDSN = mariadbtest.DSN(t)
		lo.MySQLPrefix = mariadbtest.Prefix(t)
	}
	lc, err := localcluster.Start(context.Background(), lo)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, Cluster: lc, Topology: lc.Topology}
	t.Cleanup(c.StopAll)
	return c
}

// tWriter writes log lines through t.Log, so they show only when a test fails.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// StartNode starts (or restarts) node i over its data.
func (c *Cluster) StartNode(i int) {
	c.t.Helper()
	if err := c.Cluster.StartNode(context.Background(), i); err != nil {
		c.t.Fatal(err)
	}
}

// StopNode stops node i like a crash of its process (no leadership transfer).
func (c *Cluster) StopNode(i int) {
	if err := c.Cluster.StopNode(i); err != nil {
		c.t.Logf("stop node %d: %v", i, err)
	}
}

// StopAll stops every running node.
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
