// Package clustertest runs in-process clusters for tests: N nodes on loopback with real TCP
// transports, real raft groups and real stores (SQLite in the test's temp dir, or MariaDB through
// package mariadbtest), each node serving the HTTP API on its own port. Nodes can be stopped and
// restarted over the same data. With Options.Indexes every node also runs the index maintainer
// (package indexes/maintainer), as `schemaless serve` does.
package clustertest
