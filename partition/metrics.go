package partition

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/storage"
)

// The raft-mode replicas' Prometheus series. They are package-level because replicas are opened
// deep inside a node (and reopened when a partition moves); they are exposed only once
// registered (MetricCollectors).
var (
	leaderChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schemaless_raft_leader_changes_total",
		Help: "Times this node's replica of the partition learnt of a new leader (itself included).",
	}, []string{"datastore", "partition"})
	commitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemaless_raft_commit_seconds",
		Help:    "Time from proposing a raft entry of cells on the leader to its apply on the leader (replication, commit and SQL apply), in seconds.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5ms .. 16s
	}, []string{"datastore", "partition"})
	proposalCells = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemaless_raft_proposal_cells",
		Help:    "Cells grouped into one proposed raft entry.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
	}, []string{"datastore", "partition"})
	proposalRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemaless_raft_proposal_requests",
		Help:    "Put calls (API requests' partition parts) grouped into one proposed raft entry.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
	}, []string{"datastore", "partition"})
)

// MetricCollectors returns the package's collectors, for the caller to register once per
// registry:
//
//   - schemaless_raft_leader_changes_total{datastore,partition}: new leaders this node's
//     replica learnt of (a raft.LeaderObservation naming a leader)
//   - schemaless_raft_commit_seconds{datastore,partition}: histogram of the time from proposing
//     an entry of cells (Put's group commit) to its apply on the leader, in seconds
//   - schemaless_raft_proposal_cells{datastore,partition}: histogram of cells per proposed entry
//   - schemaless_raft_proposal_requests{datastore,partition}: histogram of Put calls per
//     proposed entry
//
// The series of every replica of the process are recorded whether or not they are registered;
// a replica's series are deleted when it closes.
func MetricCollectors() []prometheus.Collector {
	return []prometheus.Collector{leaderChanges, commitSeconds, proposalCells, proposalRequests}
}

// raftMetrics are one replica's series.
type raftMetrics struct {
	labels           []string
	leaderChanges    prometheus.Counter
	commit           prometheus.Observer
	cells, proposals prometheus.Observer
}

func newRaftMetrics(id storage.PartitionID) *raftMetrics {
	l := []string{id.Datastore, strconv.Itoa(id.Partition)}
	return &raftMetrics{
		labels:        l,
		leaderChanges: leaderChanges.WithLabelValues(l...),
		commit:        commitSeconds.WithLabelValues(l...),
		cells:         proposalCells.WithLabelValues(l...),
		proposals:     proposalRequests.WithLabelValues(l...),
	}
}

// leaderObserver returns a raft observer counting leader changes. It has no channel: its filter
// counts on raft's goroutine (without blocking) and drops every observation.
func (m *raftMetrics) leaderObserver() *raft.Observer {
	return raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != "" {
			m.leaderChanges.Inc()
		}
		return false
	})
}

// proposed records a proposal of cells grouped from requests Put calls, and returns the function
// to call once its future is done.
func (m *raftMetrics) proposed(cells, requests int) (done func()) {
	m.cells.Observe(float64(cells))
	m.proposals.Observe(float64(requests))
	start := time.Now()
	return func() { m.commit.Observe(time.Since(start).Seconds()) }
}

// forget deletes the replica's series (it closed).
func (m *raftMetrics) forget() {
	for _, v := range []interface{ DeleteLabelValues(...string) bool }{leaderChanges, commitSeconds, proposalCells, proposalRequests} {
		v.DeleteLabelValues(m.labels...)
	}
}
