// Package jepsen is the home of the fault-injection harness that checks the guarantees table
// of the README against real processes: a cluster of `schemaless serve` nodes, concurrent
// clients recording a history, nemeses (kill -9, SIGSTOP, iptables partitions), and a
// linearizability check of the history with porcupine.
//
// The harness is not built yet; this package holds no code. Until it is, the guarantees are
// checked by the in-process fault tests of packages partition, cluster and client.
package jepsen
