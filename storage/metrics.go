package storage

import (
	"database/sql"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// DBStats returns the statistics of the store's connection pools, by pool name: "mysql" for
// the one pool of a MySQL store; "<datastore>/<partition>/write" and ".../read" for the two
// pools of each open partition of a SQLite store. A closed store has none. Safe for concurrent
// use; no I/O.
func (s *Store) DBStats() map[string]sql.DBStats {
	out := map[string]sql.DBStats{}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return out
	}
	if s.db != nil {
		out["mysql"] = s.db.Stats()
	}
	for id, p := range s.parts {
		if p == nil || !p.owned {
			continue // being opened, or using the store's pool
		}
		name := fmt.Sprintf("%s/%d", id.Datastore, id.Partition)
		out[name+"/write"] = p.write.Stats()
		if p.read != p.write {
			out[name+"/read"] = p.read.Stats()
		}
	}
	return out
}

// poolCollector exports DBStats (see PoolCollector).
type poolCollector struct {
	s *Store

	open, inUse, idle, maxOpen, waitCount, waitSeconds *prometheus.Desc
}

// PoolCollector returns a Prometheus collector of the store's connection pools (DBStats), read
// at each scrape, labelled by pool:
//
//   - schemaless_sql_pool_open{pool}: connections open (in use and idle)
//   - schemaless_sql_pool_in_use{pool}, schemaless_sql_pool_idle{pool}: of which in use, idle
//   - schemaless_sql_pool_max_open{pool}: the pool's limit (0: unlimited)
//   - schemaless_sql_pool_wait_count_total{pool}: connections waited for (pool exhausted)
//   - schemaless_sql_pool_wait_seconds_total{pool}: total time waited for a connection
func (s *Store) PoolCollector() prometheus.Collector {
	l := []string{"pool"}
	return &poolCollector{s: s,
		open:        prometheus.NewDesc("schemaless_sql_pool_open", "Connections open in the SQL pool (in use and idle).", l, nil),
		inUse:       prometheus.NewDesc("schemaless_sql_pool_in_use", "Connections of the SQL pool in use.", l, nil),
		idle:        prometheus.NewDesc("schemaless_sql_pool_idle", "Idle connections of the SQL pool.", l, nil),
		maxOpen:     prometheus.NewDesc("schemaless_sql_pool_max_open", "Most connections the SQL pool may open (0: unlimited).", l, nil),
		waitCount:   prometheus.NewDesc("schemaless_sql_pool_wait_count_total", "Connections requests waited for because the SQL pool was exhausted.", l, nil),
		waitSeconds: prometheus.NewDesc("schemaless_sql_pool_wait_seconds_total", "Total time waited for a connection of the SQL pool, in seconds.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.inUse, c.idle, c.maxOpen, c.waitCount, c.waitSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for pool, st := range c.s.DBStats() {
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.OpenConnections), pool)
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.InUse), pool)
		ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(st.Idle), pool)
		ch <- prometheus.MustNewConstMetric(c.maxOpen, prometheus.GaugeValue, float64(st.MaxOpenConnections), pool)
		ch <- prometheus.MustNewConstMetric(c.waitCount, prometheus.CounterValue, float64(st.WaitCount), pool)
		ch <- prometheus.MustNewConstMetric(c.waitSeconds, prometheus.CounterValue, st.WaitDuration.Seconds(), pool)
	}
}
