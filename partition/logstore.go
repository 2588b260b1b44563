package partition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/storage"
)

// The raft log formats of Config.LogStore.
const (
	LogStoreAuto = "auto"
	LogStoreNode = "node"
	LogStoreBolt = "bolt"
	LogStoreWAL  = "wal"
)

// AutoLogStoreForNewReplica is the format LogStoreAuto gives a replica directory that holds no
// log yet (a directory that holds one keeps its format).
const AutoLogStoreForNewReplica = LogStoreWAL

// nodeLogMarker is the file in a replica directory whose log is in the node's shared log store;
// it holds the replica's group name there.
const nodeLogMarker = "nodelog"

// ErrLogStoreMismatch: Config.LogStore names another format than the replica directory holds.
var ErrLogStoreMismatch = errors.New("partition: the replica's raft log is in another format")

// checkLogStore validates a Config.LogStore value against the node log it would need.
func checkLogStore(kind string, nodeLog *raftlog.Store) error {
	switch kind {
	case LogStoreAuto, LogStoreWAL, LogStoreBolt:
		return nil
	case LogStoreNode:
		if nodeLog == nil {
			return fmt.Errorf("%q needs the node's log store (Config.NodeLog)", kind)
		}
		return nil
	}
	return fmt.Errorf("%q: want %q, %q, %q or %q", kind, LogStoreAuto, LogStoreNode, LogStoreWAL, LogStoreBolt)
}

// LogName is the name of partition id's raft group in a node's shared log store: "ds/N".
func LogName(id storage.PartitionID) string { return fmt.Sprintf("%s/%d", id.Datastore, id.Partition) }

// InNodeLog reports whether replica directory dir keeps its raft log in the node's shared log
// store (its marker file is there): such a replica opens only with Config.NodeLog set.
func InNodeLog(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, nodeLogMarker))
	return err == nil
}

// HasLog reports whether replica directory dir holds a raft log, in any format (for the node's
// shared log: the directory's marker that its log is there).
func HasLog(dir string) bool {
	for _, name := range []string{"raft.db", "wal", nodeLogMarker} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// OpenLogStore opens the raft log and stable store of a replica directory dir in format kind
// (see Config.LogStore), as a partition does, for a program that runs hashicorp/raft itself
// (the benchmark's raft-raw baseline); nodeLog and name are the node's shared store and the
// group's name in it, used by LogStoreNode and by LogStoreAuto on a directory whose log is
// there. The caller
// calls the returned close function after raft has shut down. Errors: ErrLogStoreMismatch, a
// bad kind, or the log library's.
func OpenLogStore(dir, kind string, nodeLog *raftlog.Store, name string) (raft.LogStore, raft.StableStore, func() error, error) {
	if err := checkLogStore(kind, nodeLog); err != nil {
		return nil, nil, nil, fmt.Errorf("partition: log store %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	return openLogStore(dir, kind, nodeLog, name)
}

// DropLog deletes what a removed replica of partition id left in the node's shared log store
// (nothing when nodeLog is nil or the replica's log was elsewhere). The replica must be closed.
// The replica directory is the caller's to delete, before this call: a directory without its
// marker makes a later replica of the same partition drop the group itself.
func DropLog(nodeLog *raftlog.Store, id storage.PartitionID) error {
	if nodeLog == nil {
		return nil
	}
	return nodeLog.Drop(LogName(id))
}

// openLogStore opens the raft log of a replica directory in format kind (see Config.LogStore):
// raft.db for bolt, the wal/ directory for wal, group name of nodeLog (with the directory's
// marker file) for node; auto opens the format the directory holds, or
// AutoLogStoreForNewReplica for a directory that holds none. A directory holding another format
// than a named kind is refused with ErrLogStoreMismatch rather than opened empty (which would
// lose the replica's log).
func openLogStore(dir, kind string, nodeLog *raftlog.Store, name string) (raft.LogStore, raft.StableStore, func() error, error) {
	paths := map[string]string{
		LogStoreBolt: filepath.Join(dir, "raft.db"),
		LogStoreWAL:  filepath.Join(dir, "wal"),
		LogStoreNode: filepath.Join(dir, nodeLogMarker),
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	held := ""
	for _, k := range []string{LogStoreBolt, LogStoreWAL, LogStoreNode} {
		if exists(paths[k]) {
			held = k
			break
		}
	}
	if kind == LogStoreAuto {
		kind = AutoLogStoreForNewReplica
		if held != "" {
			kind = held
		}
	}
	if held != "" && held != kind {
		return nil, nil, nil, fmt.Errorf("%w: %s holds a %s log, not %s (the log store %q opens any)", ErrLogStoreMismatch, dir, held, kind, LogStoreAuto)
	}
	switch kind {
	case LogStoreNode:
		if nodeLog == nil {
			return nil, nil, nil, fmt.Errorf("%w: %s holds a log in the node's shared log store, and none is open", ErrLogStoreMismatch, dir)
		}
		return openNodeLog(paths[LogStoreNode], held == "", nodeLog, name)
	case LogStoreWAL:
		if err := os.MkdirAll(paths[LogStoreWAL], 0o755); err != nil {
			return nil, nil, nil, err
		}
		// raft-wal v0.4.0's Close leaves its meta database (bbolt) open, and bbolt's file lock
		// then blocks the next Open of the directory in this process forever (a replica
		// removed and added back, a node restarted in place): the meta database is ours to
		// close.
		meta := &metadb.BoltMetaDB{}
		w, err := raftwal.Open(paths[LogStoreWAL], raftwal.WithMetaStore(meta))
		if err != nil {
			_ = meta.Close()
			return nil, nil, nil, err
		}
		return w, w, func() error { return errors.Join(w.Close(), meta.Close()) }, nil
	}
	b, err := raftboltdb.New(raftboltdb.Options{Path: paths[LogStoreBolt]})
	if err != nil {
		return nil, nil, nil, err
	}
	return b, b, b.Close, nil
}

// openNodeLog opens group name of nodeLog for the replica whose marker file is marker. A new
// replica (fresh: no marker yet) first drops whatever the group holds, left by an earlier
// replica of the same partition whose directory was deleted (Unhost deletes the directory, then
// the group; a crash between the two leaves the group), and then writes its marker durably.
func openNodeLog(marker string, fresh bool, nodeLog *raftlog.Store, name string) (raft.LogStore, raft.StableStore, func() error, error) {
	if fresh {
		if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
			return nil, nil, nil, err
		}
		if err := nodeLog.Drop(name); err != nil {
			return nil, nil, nil, err
		}
		if err := writeSynced(marker, name+"\n"); err != nil {
			return nil, nil, nil, err
		}
	} else {
		b, err := os.ReadFile(marker)
		if err != nil {
			return nil, nil, nil, err
		}
		if got := strings.TrimSpace(string(b)); got != name {
			return nil, nil, nil, fmt.Errorf("%w: %s is the log of group %q, not %q", ErrLogStoreMismatch, marker, got, name)
		}
	}
	g, err := nodeLog.Group(name)
	if err != nil {
		return nil, nil, nil, err
	}
	return g, g, g.Close, nil
}

// writeSynced writes a small file and syncs it and its directory.
func writeSynced(path, content string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
