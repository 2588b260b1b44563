// Package launcher runs a cluster of `schemaless serve` processes on this machine: it writes
// their topology file, starts one process per node with its own data directory and log file,
// waits until every node is ready or one exits, signals them (SIGTERM, SIGKILL, SIGSTOP and
// SIGCONT), restarts them over their data, and stops them.
//
// It is the process layer shared by `schemaless dev` (a local cluster for development) and the
// jepsen harness (a cluster under fault injection). It knows the nodes only as processes and
// through package client (their /readyz answers): nothing of a node's internals.
//
// Process is one child process whose output is appended to a log file; Node is one slot of a
// Cluster, restartable, each start a new Process; Cluster is the nodes of a topology.
//
// # Caveats
//
// Linux only: Command.DieWithParent uses the parent-death signal, and every process runs in
// its own process group (a Ctrl-C of the terminal reaches only the launching process, which
// stops its children itself). A Process killed while paused is resumed first, so that the
// kernel reaps it at once.
package launcher
