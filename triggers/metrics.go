package triggers

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a worker's Prometheus series; all methods are no-ops on a nil *metrics.
type metrics struct {
	lagCells, lagSeconds *prometheus.GaugeVec
	owned                prometheus.Gauge
	delivered, errs      prometheus.Counter
	parked               prometheus.Counter
	group                string
}

// newMetrics registers the worker's series with reg (nil: none), labelled with its group and
// worker id, so several workers may share one registry.
func newMetrics(reg prometheus.Registerer, group, worker string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	labels := prometheus.Labels{"group": group, "worker": worker}
	m := &metrics{group: group}
	var err error
	gauge := func(name, help string) (*prometheus.GaugeVec, error) {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, []string{"shard"})
		return g, reg.Register(g)
	}
	counter := func(name, help string) (prometheus.Counter, error) {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		return c, reg.Register(c)
	}
	if m.lagCells, err = gauge("schemaless_triggers_lag_cells", "Cells of the shard's log after the worker's position (all columns)."); err != nil {
		return nil, err
	}
	if m.lagSeconds, err = gauge("schemaless_triggers_lag_seconds", "Age of the oldest cell of the shard not yet delivered (0 when caught up)."); err != nil {
		return nil, err
	}
	if m.delivered, err = counter("schemaless_triggers_delivered_total", "Cells the handler returned nil for."); err != nil {
		return nil, err
	}
	if m.errs, err = counter("schemaless_triggers_handler_errors_total", "Handler calls that returned an error."); err != nil {
		return nil, err
	}
	if m.parked, err = counter("schemaless_triggers_parked_total", "Cells parked after MaxAttempts failures."); err != nil {
		return nil, err
	}
	m.owned = prometheus.NewGauge(prometheus.GaugeOpts{Name: "schemaless_triggers_owned_shards", Help: "Shards this worker owns.", ConstLabels: labels})
	if err := reg.Register(m.owned); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) lag(shard int, cells int64, seconds float64) {
	if m == nil {
		return
	}
	s := strconv.Itoa(shard)
	m.lagCells.WithLabelValues(s).Set(float64(cells))
	m.lagSeconds.WithLabelValues(s).Set(seconds)
}

func (m *metrics) forget(shard int) {
	if m == nil {
		return
	}
	s := strconv.Itoa(shard)
	m.lagCells.DeleteLabelValues(s)
	m.lagSeconds.DeleteLabelValues(s)
}

func (m *metrics) setOwned(n int) {
	if m != nil {
		m.owned.Set(float64(n))
	}
}

func (m *metrics) incDelivered() {
	if m != nil {
		m.delivered.Inc()
	}
}

func (m *metrics) incError() {
	if m != nil {
		m.errs.Inc()
	}
}

func (m *metrics) incParked() {
	if m != nil {
		m.parked.Inc()
	}
}

// unregister removes the worker's series.
func (m *metrics) unregister(reg prometheus.Registerer) {
	if m == nil {
		return
	}
	for _, c := range []prometheus.Collector{m.lagCells, m.lagSeconds, m.owned, m.delivered, m.errs, m.parked} {
		reg.Unregister(c)
	}
}
