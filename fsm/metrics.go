package fsm

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/storage"
)

// The FSM's Prometheus series. They are package-level because an FSM is built deep inside a
// partition replica; they are exposed only once registered (MetricCollectors). Labels name the
// partition of the FSM's store (empty for a Store that does not tell its ID).
var (
	applySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemaless_fsm_apply_seconds",
		Help:    "Time to apply one batch of committed raft entries to the SQL store (one transaction, retries included), in seconds.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5ms .. 16s
	}, []string{"datastore", "partition"})
	applyEntries = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemaless_fsm_apply_batch_entries",
		Help:    "Raft log entries in one applied batch (entries per SQL transaction).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
	}, []string{"datastore", "partition"})
	applyCells = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemaless_fsm_apply_batch_cells",
		Help:    "Cells of the cell commands in one applied batch (cells per SQL transaction).",
		Buckets: prometheus.ExponentialBuckets(1, 4, 9), // 1 .. 65536
	}, []string{"datastore", "partition"})
	requestRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schemaless_fsm_request_record_retries_total",
		Help: "Batch transactions applied a second time, with a lookup of the request records, because a write's request ID had a stored record (a retried write).",
	}, []string{"datastore", "partition"})
)

// MetricCollectors returns the package's collectors, for the caller to register once per
// registry (registering them in two registries is fine; twice in one is an error):
//
//   - schemaless_fsm_apply_seconds{datastore,partition}: histogram of the time of one
//     ApplyBatch that applied entries (its SQL transaction, retries included), in seconds
//   - schemaless_fsm_apply_batch_entries{datastore,partition}: histogram of raft entries per
//     applied batch
//   - schemaless_fsm_apply_batch_cells{datastore,partition}: histogram of cells per applied batch
//   - schemaless_fsm_request_record_retries_total{datastore,partition}: batches applied again
//     with a lookup of the request records, because a write's ID had a stored record (the first
//     attempt takes every ID for new; see applyWrites)
//
// The series of every FSM of the process are recorded whether or not they are registered.
func MetricCollectors() []prometheus.Collector {
	return []prometheus.Collector{applySeconds, applyEntries, applyCells, requestRetries}
}

// storeLabels returns the datastore and partition labels of store's series.
func storeLabels(store Store) (ds, part string) {
	if s, ok := store.(interface{ ID() storage.PartitionID }); ok {
		id := s.ID()
		ds, part = id.Datastore, strconv.Itoa(id.Partition)
	}
	return ds, part
}

// observeApply records one successful ApplyBatch of n raft entries holding cells cells, begun
// at began. Called on the FSM goroutine.
func observeApply(store Store, began time.Time, n, cells int) {
	ds, part := storeLabels(store)
	applySeconds.WithLabelValues(ds, part).Observe(time.Since(began).Seconds())
	applyEntries.WithLabelValues(ds, part).Observe(float64(n))
	applyCells.WithLabelValues(ds, part).Observe(float64(cells))
}
