// Package jepsen is the fault-injection harness that checks the datastore's guarantees against
// real processes: a cluster of `schemaless serve` nodes, each on its own loopback address;
// client workers recording a history; a nemesis that kills (kill -9), pauses (SIGSTOP) and cuts
// off (iptables) nodes, and kills and pauses trigger workers, on a schedule (opt-in: changes
// raft configurations and splits partitions through the admin API, membership.go and
// split.go); then a heal, a quiet period, and checks.
//
// The shape follows etcd's tests/robustness: cluster -> traffic + faults -> history -> check ->
// report. Run starts it all and writes one directory per run: history.jsonl (every operation,
// with invoke and complete times from a monotonic clock and its outcome ok, fail or info),
// nemesis.jsonl (every fault start and end), each node's log, summary.json, porcupine's
// linearizability.html with the fault windows annotated, and latency.png (latency and
// throughput over time, fault windows shaded).
//
// Workloads (the Workload interface; new ones plug into Workloads):
//
//   - cells: put_cell, get_cell and get_cell_latest on a few (row key, column key) registers with
//     colliding ref keys and bodies, checked for linearizability by porcupine against CellsModel,
//     a versioned write-once cell map; and every replica's copy of the datastore compared.
//   - durability: many unique cells written with put_cells; after the heal, every cell is read
//     back from every replica and CheckDurability counts lost, unexpected, corrupted and
//     duplicated cells and diverged shards.
//   - triggers: unique cells of two columns, one of them consumed by a consumer group of trigger
//     worker processes (RunTriggerWorker, `schemaless jepsen trigger-worker`) that record every
//     delivery; the kill-worker and pause-worker nemeses kill and pause them. CheckTriggers
//     counts lost cells, unexpected deliveries, order violations, skipped cells and duplicates.
//   - index: a secondary index defined at setup (IndexWorkload), rows of a few cells whose
//     shard field k is skewed over k0..k7 and sometimes changes, queried during the run; after
//     the catch-up (the index's lag at 0), the whole index is read and CheckIndex counts lost,
//     stale, unexpected, invented, duplicated and misplaced entries, wrong violation marks,
//     entries that differ from the stored cells, and a late catch-up.
//   - cas: registers read with get_cell_latest and changed only by conditional writes of the
//     next ref key (CasWorkload), checked linearizable by porcupine against CasModel, a
//     compare-and-set register; a 412 is a failed cas, an indeterminate write one of unknown
//     outcome.
//   - bank: accounts in one partition (BankWorkload), transfers as transactions conditional on
//     the versions read, reads as one strong batch get; CheckBank finds reads with another total,
//     a negative balance or more than one snapshot, torn and stale reads, invented versions, lost
//     updates, and a final state that misses a committed transfer; it reports the commit and 412
//     rates.
//   - replication: a second cluster, west, started beside the run's, east (ReplicationWorkload),
//     the two replicating both ways (package peering); unique cells written to both while the
//     nemeses act on east, the worker nemeses kill and pause west's nodes, and the workload cuts
//     every link between the clusters; after the streams drain, CheckReplication reads every
//     replica of both and counts cells lost on the way, unexpected, corrupted, with the wrong
//     origin or twice, shards whose cells of one origin the other cluster holds in another
//     order, and diverged replicas.
//
// Async mode (Config.Mode "async") makes the cells, durability, cas and bank datastores async
// datastores on MySQL storage clusters the harness starts (Storage: 2 clusters of a master and 2
// minions, MariaDB replication), adds the storage nemeses (kill-master, failover, partition-master,
// partition-failover, pause-replication), and checks read-your-writes of strong reads outside
// failover windows (CheckReadYourWrites), the final state with buffered writes
// (CheckAsyncCells), the staleness of stale reads, durability against every member, and that
// the members replicating from each master agree. See DESIGN.md, "Async mode".
//
// The checkers are pure functions over a history (CheckLinearizable, CheckDurability,
// CompareReplicas, CheckTriggers, CheckIndex, CheckReadYourWrites, CheckAsyncCells, CheckCas,
// CheckBank, CheckReplication), tested on synthetic histories in checker_test.go, triggers_test.go,
// indexcheck_test.go, asynccheck_test.go, cas_test.go, bankcheck_test.go and replcheck_test.go;
// e2e_test.go shows a real run with stale reads under partitions being
// caught, triggers_e2e_test.go a real triggers run under worker and node kills,
// replication_e2e_test.go two clusters replicating under kills and cuts,
// index_e2e_test.go a real index run under node kills and partitions, and async_e2e_test.go a
// failover losing acknowledged writes without buffered writes and none with them.
//
// # Caveats
//
// Network faults need iptables and root: the harness adds its own chain to the filter table's
// INPUT chain and removes it at the end (and at the start of the next run, after a crash). Two
// runs at the same time need different addresses, ports and chain names (Config). The seed
// fixes every choice the harness makes, not the timing of the processes, so a run is
// reproducible only as far as the operating system's scheduling allows.
//
// See DESIGN.md for the model's rules and how indeterminate operations are checked.
package jepsen
