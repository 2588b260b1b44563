// Package localcluster runs a cluster of N nodes inside one process: real TCP transports on
// loopback, real raft groups, real stores (SQLite, pebble or MySQL: Options.Store), and the HTTP
// API of each node on its own port. Nodes can be stopped and restarted over the same data. Each
// node is a node.Node (package node), as `schemaless serve` runs one: cluster node, API and,
// with Options.Maintainer, the index maintainer. Its datastore "trips" is in raft mode, or in
// async mode on storage clusters (Options.Async); Options.Datastores adds more beside it, such
// as an async datastore next to a raft "trips" (both modes in the same nodes). The benchmark
// command and the test helper package clustertest build on it.
package localcluster
