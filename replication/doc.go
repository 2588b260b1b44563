// Package replication administers MariaDB asynchronous replication for a storage cluster: it
// probes which member is the master, points minions at a master, fences and promotes.
//
// # Model
//
// A storage cluster is one master and N minions. Minions replicate from the master with GTIDs
// (CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos), every member runs with binlog_format=ROW
// and log_slave_updates=ON, so any minion's binary log holds everything it applied and it can
// serve as the master of the others after a promotion.
//
// The master is the one member with read_only OFF that replicates from nobody (SHOW SLAVE
// STATUS returns no row): MemberStatus.IsMaster. The datastore's nodes in async mode Probe every
// member and write to the master only.
//
// Every member is expected to start with read_only=ON in its configuration (--read-only=ON),
// so that an old master that crashed and restarts comes back fenced: it is no longer a master
// until an administrator makes it one (MakeMaster) or points it at the new master
// (ConfigureMinion). Only MakeMaster turns read_only off.
//
// Promote is the failover and switchover (schemaless admin promote): it picks the most advanced
// reachable minion, lets it apply what it has, makes it the master and points every other
// reachable member at it. See Promote for the steps and the failure cases.
//
// ProbeCluster reports a storage cluster for an operator (schemaless admin storage): each
// member's role, replication threads, positions and errors, the master, and warnings (no
// master, two masters, a fenced member, a minion replicating from elsewhere or with a thread
// stopped). PromoteResult.Report is a Promote's outcome for printing (schemaless admin
// promote). Reports name members by address (Addr), never by DSN, which may hold a password.
//
// # Privileges
//
// read_only fences only the users without the READ_ONLY ADMIN privilege, and on MariaDB 10.11
// ALL PRIVILEGES includes it. The datastore's user must therefore not have it (GRANT ALL ...;
// REVOKE READ_ONLY ADMIN ON *.* FROM ...), while the administrative connections given to
// MakeMaster, Fence, ConfigureMinion and Promote need it (SET GLOBAL read_only requires it),
// together with REPLICATION SLAVE ADMIN and SLAVE MONITOR (root has all of them). The
// replication user (MASTER_USER) needs REPLICATION SLAVE only.
//
// # Caveats
//
//   - Replication is asynchronous: transactions a crashed master committed but no minion
//     received are lost by a failover. Promote picks the minion that received the most, so it
//     loses no more than that.
//   - Promote cannot fence a master it cannot reach. If the master is alive but unreachable from
//     the administrator (a network partition), promoting another member makes two masters; the
//     nodes that reach both see two masters and should refuse to write. The old master is fenced
//     for good only when it restarts (read_only=ON in its configuration).
//   - An old master that crashed with transactions no minion received has diverged. Pointing it
//     at the new master fails in its IO thread (error 1236, GTID not in the master's binlog,
//     visible in MemberStatus.LastError); it has to be rebuilt from a copy of another member.
//   - ConfigureMinion starts a minion from its gtid_current_pos (what it applied, or wrote while
//     it was a master). A transaction written directly on a minion (an errant transaction, only
//     possible with READ_ONLY ADMIN) is counted as applied there and can break replication.
//   - Positions are compared by the sequence number of one GTID domain (PromoteOptions.Domain,
//     default 0): the model has one writer at a time, hence one domain.
package replication
