package cluster

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors returns every collector of the node: AsyncCollector, ReplicaCollector,
// GroupLagCollector, NodeLogCollector and CatalogCollector. Register them once per registry.
func (n *Node) Collectors() []prometheus.Collector {
	return []prometheus.Collector{n.AsyncCollector(), n.ReplicaCollector(), n.GroupLagCollector(), n.NodeLogCollector(), n.CatalogCollector()}
}

// catalogCollector exports the node's view of the catalog (see CatalogCollector).
type catalogCollector struct {
	n                          *Node
	generation, datastores, ld *prometheus.Desc
}

// CatalogCollector returns a Prometheus collector of the cluster's catalog as this node applied
// it, read at each scrape without I/O:
//
//   - schemaless_catalog_generation: the generation this node serves (0 before it learned one);
//     nodes that differ for long are not following the catalog
//   - schemaless_catalog_datastores: the datastores it serves
//   - schemaless_catalog_leader: 1 when this node's catalog voter leads the catalog's raft group
func (n *Node) CatalogCollector() prometheus.Collector {
	return &catalogCollector{n: n,
		generation: prometheus.NewDesc("schemaless_catalog_generation", "Generation of the cluster catalog this node serves (0 before it learned one).", nil, nil),
		datastores: prometheus.NewDesc("schemaless_catalog_datastores", "Datastores this node serves.", nil, nil),
		ld:         prometheus.NewDesc("schemaless_catalog_leader", "1 when this node's voter of the catalog leads the catalog's raft group, else 0.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *catalogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.generation
	ch <- c.datastores
	ch <- c.ld
}

// Collect implements prometheus.Collector.
func (c *catalogCollector) Collect(ch chan<- prometheus.Metric) {
	var g uint64
	if cat := c.n.cat.cur.Load(); cat != nil {
		g = cat.Generation
	}
	leader := 0.0
	if c.n.catalogLeads() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(c.generation, prometheus.GaugeValue, float64(g))
	ch <- prometheus.MustNewConstMetric(c.datastores, prometheus.GaugeValue, float64(len(c.n.datastores())))
	ch <- prometheus.MustNewConstMetric(c.ld, prometheus.GaugeValue, leader)
}

// asyncCollector exports the state of a node's async datastores (see AsyncCollector).
type asyncCollector struct {
	n *Node

	depth, oldest, reaped, replayed, conflicts, breaker, lag, master *prometheus.Desc
}

// AsyncCollector returns a Prometheus collector of the node's async datastores, read at each
// scrape from Replicas (no I/O: the figures are those of the last probe and reaper pass):
//
//   - schemaless_async_buffer_depth{datastore,partition}: buffered cells not yet seen on a minion
//   - schemaless_async_buffer_oldest_seconds{datastore,partition}: age of the oldest of them
//   - schemaless_async_reaped_total, _replayed_total, _reaper_conflicts_total{datastore,partition}:
//     this node's reaper's deletions, replays and dropped conflicting cells
//   - schemaless_storage_breaker_state{datastore,cluster,member}: 0 closed, 1 half-open, 2 open
//   - schemaless_storage_replication_lag_seconds{datastore,cluster,member}: Seconds_Behind_Master
//     of a minion (-1 when not replicating)
//   - schemaless_storage_master{datastore,cluster,member}: 1 for the member the node writes to
func (n *Node) AsyncCollector() prometheus.Collector {
	p := []string{"datastore", "partition"}
	m := []string{"datastore", "cluster", "member"}
	return &asyncCollector{n: n,
		depth:     prometheus.NewDesc("schemaless_async_buffer_depth", "Buffered cells of the partition not yet seen on a minion of its cluster (last reaper pass).", p, nil),
		oldest:    prometheus.NewDesc("schemaless_async_buffer_oldest_seconds", "Age of the oldest buffered cell of the partition (0 when none).", p, nil),
		reaped:    prometheus.NewDesc("schemaless_async_reaped_total", "Buffer rows this node's reaper deleted once their cell was on a minion.", p, nil),
		replayed:  prometheus.NewDesc("schemaless_async_replayed_total", "Buffered cells this node's reaper replayed into the primary master.", p, nil),
		conflicts: prometheus.NewDesc("schemaless_async_reaper_conflicts_total", "Buffered cells dropped because the primary holds their key with another body.", p, nil),
		breaker:   prometheus.NewDesc("schemaless_storage_breaker_state", "Circuit breaker of a storage member: 0 closed, 1 half-open, 2 open.", m, nil),
		lag:       prometheus.NewDesc("schemaless_storage_replication_lag_seconds", "Seconds_Behind_Master of a storage member (-1 when it does not replicate).", m, nil),
		master:    prometheus.NewDesc("schemaless_storage_master", "1 for the member this node found to be its cluster's master, else 0.", m, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *asyncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.oldest, c.reaped, c.replayed, c.conflicts, c.breaker, c.lag, c.master} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *asyncCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for _, r := range c.n.Replicas() {
		a := r.Async
		if a == nil {
			continue
		}
		pl := []string{r.Datastore, strconv.Itoa(r.Partition)}
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(a.BufferDepth), pl...)
		age := 0.0
		if !a.BufferOldest.IsZero() {
			age = time.Since(a.BufferOldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, pl...)
		ch <- prometheus.MustNewConstMetric(c.reaped, prometheus.CounterValue, float64(a.Reaped), pl...)
		ch <- prometheus.MustNewConstMetric(c.replayed, prometheus.CounterValue, float64(a.Replayed), pl...)
		ch <- prometheus.MustNewConstMetric(c.conflicts, prometheus.CounterValue, float64(a.Conflicts), pl...)
		key := r.Datastore + "/" + a.Cluster
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, m := range a.Members {
			ml := []string{r.Datastore, a.Cluster, m.Addr}
			state := map[string]float64{"closed": 0, "half-open": 1, "open": 2}[m.Breaker]
			ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, state, ml...)
			lag := float64(m.Probe.SecondsBehind)
			if !m.Probe.Replicating {
				lag = -1
			}
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, lag, ml...)
			isMaster := 0.0
			if m.Role == "master" {
				isMaster = 1
			}
			ch <- prometheus.MustNewConstMetric(c.master, prometheus.GaugeValue, isMaster, ml...)
		}
	}
}

// replicaCollector exports the raft state of a node's replicas (see ReplicaCollector).
type replicaCollector struct {
	n *Node

	applied, commit, last, lag, leader, term, quiesced *prometheus.Desc
}

// ReplicaCollector returns a Prometheus collector of the raft replicas this node hosts, read at
// each scrape from Replicas (no I/O), labelled {datastore,partition}:
//
//   - schemaless_raft_applied_index: the last raft index the replica's SQL store reflects
//   - schemaless_raft_commit_index: the last index the replica knows committed
//   - schemaless_raft_last_index: the last index in the replica's log
//   - schemaless_raft_replica_lag_entries: commit minus applied (committed entries not yet in
//     SQL; a follower behind its leader also shows in the leader's commit index against its own)
//   - schemaless_raft_is_leader: 1 on the leader, else 0
//   - schemaless_raft_term: the replica's current term
//   - schemaless_raft_quiesced: 1 while the replica is quiesced (an idle group), else 0
//
// Partitions of async datastores and partitions the node does not host have none.
func (n *Node) ReplicaCollector() prometheus.Collector {
	p := []string{"datastore", "partition"}
	return &replicaCollector{n: n,
		applied:  prometheus.NewDesc("schemaless_raft_applied_index", "Last raft log index applied to the replica's SQL store.", p, nil),
		commit:   prometheus.NewDesc("schemaless_raft_commit_index", "Last raft log index the replica knows to be committed.", p, nil),
		last:     prometheus.NewDesc("schemaless_raft_last_index", "Last raft log index stored in the replica's log.", p, nil),
		lag:      prometheus.NewDesc("schemaless_raft_replica_lag_entries", "Committed raft entries not yet applied to the replica's SQL store (commit index minus applied index).", p, nil),
		leader:   prometheus.NewDesc("schemaless_raft_is_leader", "1 when this node's replica is the partition's leader, else 0.", p, nil),
		term:     prometheus.NewDesc("schemaless_raft_term", "The replica's current raft term.", p, nil),
		quiesced: prometheus.NewDesc("schemaless_raft_quiesced", "1 while this node's replica is quiesced (the partition is idle and its group sends no heartbeats), else 0.", p, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.applied, c.commit, c.last, c.lag, c.leader, c.term, c.quiesced} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.n.Replicas() {
		if !r.Local || r.Async != nil {
			continue
		}
		l := []string{r.Datastore, strconv.Itoa(r.Partition)}
		lag := 0.0
		if r.CommitIndex > r.AppliedIndex {
			lag = float64(r.CommitIndex - r.AppliedIndex)
		}
		isLeader := 0.0
		if r.State == "Leader" {
			isLeader = 1
		}
		ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(r.AppliedIndex), l...)
		ch <- prometheus.MustNewConstMetric(c.commit, prometheus.GaugeValue, float64(r.CommitIndex), l...)
		ch <- prometheus.MustNewConstMetric(c.last, prometheus.GaugeValue, float64(r.LastIndex), l...)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, lag, l...)
		ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, isLeader, l...)
		ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(r.Term), l...)
		q := 0.0
		if r.Quiesced {
			q = 1
		}
		ch <- prometheus.MustNewConstMetric(c.quiesced, prometheus.GaugeValue, q, l...)
	}
}

// Group lag collection: how long a measurement is reused, and the bound of one measurement.
const (
	groupLagTTL     = 5 * time.Second
	groupLagTimeout = 3 * time.Second
)

// groupLag is one group's lag at the last measurement.
type groupLag struct {
	datastore, group string
	cells            int64
	seconds          float64
}

// groupLagCollector exports consumer groups' lag (see GroupLagCollector).
type groupLagCollector struct {
	n *Node

	cells, seconds, errs *prometheus.Desc

	mu       sync.Mutex // held during a measurement: concurrent scrapes share it
	measured time.Time
	lags     []groupLag
	failures int
}

// GroupLagCollector returns a Prometheus collector of the lag of every consumer group of every
// datastore (index maintainers' groups, "_index.*", included):
//
//   - schemaless_consumer_group_lag_cells{datastore,group}: cells of the datastore's logs after
//     the group's committed offsets (a shard never committed counts its whole log)
//   - schemaless_consumer_group_lag_seconds{datastore,group}: age of the oldest cell not yet
//     handled, the largest over the shards (0 when caught up)
//   - schemaless_consumer_group_lag_errors: datastores and groups whose measurement failed at
//     the last measurement (their series are then missing)
//
// A scrape measures (Groups and GroupProgress, stale reads from any replica, within 3 s) at
// most every 5 s and otherwise repeats the last figures. Every node reports the same
// cluster-wide figures, as far as its stale reads see them: aggregate with max, not sum.
func (n *Node) GroupLagCollector() prometheus.Collector {
	l := []string{"datastore", "group"}
	return &groupLagCollector{n: n,
		cells:   prometheus.NewDesc("schemaless_consumer_group_lag_cells", "Cells of the datastore's shard logs after the consumer group's committed offsets (all columns).", l, nil),
		seconds: prometheus.NewDesc("schemaless_consumer_group_lag_seconds", "Age of the oldest cell the consumer group has not handled, in seconds (0 when caught up).", l, nil),
		errs:    prometheus.NewDesc("schemaless_consumer_group_lag_errors", "Datastores and consumer groups whose lag could not be measured at the last measurement.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *groupLagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.cells
	ch <- c.seconds
	ch <- c.errs
}

// Collect implements prometheus.Collector. It blocks for up to groupLagTimeout when the last
// measurement is older than groupLagTTL.
func (c *groupLagCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.measured) >= groupLagTTL {
		c.measure()
	}
	lags, failures := c.lags, c.failures
	c.mu.Unlock()
	for _, g := range lags {
		ch <- prometheus.MustNewConstMetric(c.cells, prometheus.GaugeValue, float64(g.cells), g.datastore, g.group)
		ch <- prometheus.MustNewConstMetric(c.seconds, prometheus.GaugeValue, g.seconds, g.datastore, g.group)
	}
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.GaugeValue, float64(failures))
}

// measure reads every group's progress; c.mu is held.
func (c *groupLagCollector) measure() {
	ctx, cancel := context.WithTimeout(context.Background(), groupLagTimeout)
	defer cancel()
	var lags []groupLag
	failures := 0
	for _, ds := range c.n.Topology().Datastores {
		groups, err := c.n.Groups(ctx, ds.Name, Stale)
		if err != nil {
			failures++
			c.n.log.Debug("metrics: list consumer groups", "datastore", ds.Name, "error", err)
			continue
		}
		for _, g := range groups {
			p, err := c.n.GroupProgress(ctx, ds.Name, g, Stale)
			if err != nil {
				failures++
				c.n.log.Debug("metrics: consumer group progress", "datastore", ds.Name, "group", g, "error", err)
				continue
			}
			lags = append(lags, groupLag{datastore: ds.Name, group: g, cells: p.LagCells, seconds: p.LagSeconds})
		}
	}
	c.lags, c.failures, c.measured = lags, failures, time.Now()
}

// nodeLogCollector exports the counts of the node's shared raft log store (see NodeLogCollector).
type nodeLogCollector struct {
	n                       *Node
	appends, entries, syncs *prometheus.Desc
}

// NodeLogCollector returns a Prometheus collector of the node's shared raft log store (package
// raftlog; nothing while no replica uses it), read at each scrape from raftlog.Store.Stats:
//
//   - schemaless_raftlog_appends_total: raft log appends (StoreLogs calls) of all the node's
//     replicas
//   - schemaless_raftlog_entries_total: raft entries they stored
//   - schemaless_raftlog_syncs_total: fsyncs of the store's write-ahead log; below appends when
//     appends of several partitions shared one (group commit)
func (n *Node) NodeLogCollector() prometheus.Collector {
	return &nodeLogCollector{n: n,
		appends: prometheus.NewDesc("schemaless_raftlog_appends_total", "Raft log appends of all this node's replicas in the shared raft log store.", nil, nil),
		entries: prometheus.NewDesc("schemaless_raftlog_entries_total", "Raft entries stored by those appends.", nil, nil),
		syncs:   prometheus.NewDesc("schemaless_raftlog_syncs_total", "Fsyncs of the shared raft log store's write-ahead log (appends of several partitions share one).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *nodeLogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.appends
	ch <- c.entries
	ch <- c.syncs
}

// Collect implements prometheus.Collector.
func (c *nodeLogCollector) Collect(ch chan<- prometheus.Metric) {
	c.n.nodeLogMu.Lock()
	s := c.n.nodeLog
	c.n.nodeLogMu.Unlock()
	if s == nil {
		return
	}
	st := s.Stats()
	ch <- prometheus.MustNewConstMetric(c.appends, prometheus.CounterValue, float64(st.Appends))
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.CounterValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(c.syncs, prometheus.CounterValue, float64(st.Syncs))
}
