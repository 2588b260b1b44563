// Package raftlog keeps the raft logs of all the partition replicas of a node in one store, so
// that one fsync makes many groups' appends durable at once.
//
// A node hosts a replica of several partitions, each its own hashicorp/raft group. With a log
// per group (raft-wal, raft-boltdb) every group's append pays its own fdatasync, and a dozen
// groups on one disk queue their fsyncs behind each other. Production multi-raft systems
// (CockroachDB, TiKV) instead write every group's log into one engine per node, whose write-ahead
// log commits concurrent appends together. This package does the same on
// cockroachdb/pebble: a Store is one pebble database per node (a directory); a Group is one raft
// group's view of it, implementing raft.LogStore and raft.StableStore.
//
// Durability: Group.StoreLogs, DeleteRange, Set and SetUint64 return only after pebble has
// synced its write-ahead log (pebble.Sync). Pebble's commit pipeline lets appends of several
// groups that arrive while a sync is in progress share the next one (group commit;
// TestGroupCommit: 800 appends of 16 groups at once, about 100 fsyncs).
//
// Keys: a group's entries are "L" + name + 0x00 + the big-endian uint64 index, its stable values
// "S" + name + 0x00 + the key. A group name may not hold a 0x00 byte, so no two groups' key
// ranges overlap. Values of entries are a version byte, then the term, type, append time and
// extensions, then the data (see encode). Deleting a range of a group's entries is one range
// tombstone; pebble's compactions reclaim the space.
//
// FirstIndex and LastIndex are answered from memory: a Group reads its bounds once when opened
// and keeps them with every append and deletion.
package raftlog
