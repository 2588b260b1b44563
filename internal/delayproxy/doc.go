// Package delayproxy is a TCP proxy that holds every byte it forwards for a fixed time in each
// direction: the network delay between two datacenters, on one machine. `schemaless dev
// --clusters 2 --peer-delay 40ms` puts one in front of each node that the other cluster's
// replicators call, and the replication benchmark and jepsen workload do the same.
//
// The delay is the proxy's, on a real TCP hop: the client's connection, the proxy, and the
// proxy's own connection to the target. Bytes are read as they arrive, stamped, and written
// once their time has come, in order; reading goes on meanwhile, so the delay does not limit
// throughput (a window of MaxInFlight bytes per direction is held at most, beyond which the
// proxy stops reading and TCP's flow control pushes back).
package delayproxy
