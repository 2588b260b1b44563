// Package clustertest runs in-process clusters for tests: N nodes on loopback with real TCP
// transports, real raft groups and real stores (SQLite or pebble in the test's temp dir, or
// MariaDB through package mariadbtest), each node serving the HTTP API on its own port. Nodes
// can be stopped and restarted over the same data. Nodes are built by package localcluster with
// node.Start, as `schemaless serve` builds its node; with Options.Indexes every node also runs
// the index maintainer (package maintainer), in-process.
package clustertest
