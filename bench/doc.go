// Package bench measures a schemaless cluster's throughput and latency through its HTTP API:
// the engine of `schemaless bench`, with its targets, workloads, baselines and reports.
//
// # Shape
//
// Run takes a Config (which cmd fills from the flags) and, for each of its targets, starts the
// Target (startTarget), runs each Workload of Config.Workloads on it, stops it, then runs the
// baselines, and prints one row per run (Result): a table, or JSON lines with Config.JSON.
// Workloads are looked up by name (Lookup) in a fixed table, in the order --help lists them.
//
// Targets: "external" (a running cluster at Config.Endpoints), and clusters of 3 nodes started
// in this process with package localcluster: "sqlite", "pebble" (localcluster.Options.Store),
// "mysql", "raft-noop" (a state machine that stores nothing: the cost of raft alone), "async"
// and "async-unsafe" (datastore trips in async mode on 6 MariaDB servers started once per run).
// sqlite, pebble, mysql and raft-noop have secure variants ("sqlite-secure", ...:
// localcluster.Options.Secure, TLS and bearer tokens),
// whose clients use https and the app token (clientAuth). The mysql baseline is a target too
// (baseline-mysql): a bare database on the MySQL server taking the same inserts with no
// datastore in between.
//
// Workloads: the load runner's put, put-batch and get-latest (closed loop, or open loop at a rate
// with no coordinated omission: runLoad), each with one of two HTTP clients (Config.ClientKinds,
// --client): package client, leader-aware with retries and an idempotency key per write, or the
// plain client (plainClient), which sends every request to a random node with no idempotency key
// and no retry, as curl or a Python program would; the consumer-group workloads (trigger-latency,
// log-read), the index workloads (index-lag, index-query, index-backfill), the async-mode ones
// (reaper, replication-lag), trips (the Mezzanine flow with package examples' billing trigger and
// flights index) and scale-cells (latency as the stored cells grow).
//
// Package bench/plot draws the JSON lines as charts.
//
// # Caveats
//
// The clients and the in-process nodes share this machine's cores: the figures of in-process
// targets measure both. A Result's latencies are in microseconds; its rates per second of the
// measured phase only (never the warm-up). Errors of Config.Validate and Run name the
// `schemaless bench` flag of the setting at fault, since that is how users see them.
package bench
