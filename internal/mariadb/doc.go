// Package mariadb starts and manages throwaway MariaDB (or MySQL) servers and replicated sets
// of them, for tests, the jepsen harness and `schemaless dev --mode async`.
//
// Start runs a server with its own data directory, port and flags (for replication and fault
// tests: log-bin, server-id, read-only, ...) and returns an *Instance to stop or kill. A
// started server's error log is kept in its data directory (error.log, plus console.log for
// what it writes to stdout and stderr); startup errors quote its tail. Each server gets a
// private tmpdir: at startup a server deletes every "#sql*" file of its tmpdir, which in a
// shared /tmp would be the live temporary tables of other servers. The binaries are mariadbd
// (or mysqld) and mariadb-install-db (or mysql_install_db), looked up by FindBinaries in PATH
// and the usual sbin directories.
//
// StartReplicated starts storage clusters of a master and minions replicating asynchronously
// (GTID, row-based binary logs, as the replication package configures them) and returns a
// *ReplicatedSet. OpenReplicated keeps such a set in a directory across runs: it sets the set up
// the first time and, on later runs, starts the servers again on their data and makes master
// the member that was the master when the set stopped, even after a failover.
// ReplicatedSet.DSNs lists a set's members as the storage clusters of an async datastore need
// them (topology.StorageClustersOf).
//
// Servers started here die with the process that started them (Linux parent-death signal).
// They are for tests and local development only: root has no password, and durability is
// relaxed (innodb_flush_log_at_trx_commit=2) unless Options.Args says otherwise.
package mariadb
