package cluster

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
