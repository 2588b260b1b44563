// Package localcluster runs a cluster of N nodes inside one process: real TCP transports on
// loopback, real raft groups, real stores, and the HTTP API of each node on its own port. Nodes
// can be stopped and restarted over the same data. Each node is a node.Node (package node), as
// `schemaless serve` runs one: cluster node, API and, with Options.Maintainer, the index
// maintainer. The benchmark command and the test helper package clustertest build on it.
package localcluster
