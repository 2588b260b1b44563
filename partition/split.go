package partition

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/storage"
)

// A partition made by a split starts on every replica that applied the split from the copy of
// the right half in its store (fsm.SplitOrigin), not from an empty log: its raft group begins
// with a snapshot at the index of the split in the parent's log, holding that copy and the
// voters the split named. No entry precedes it, so a replica that lacks the copy (one that
// learned of the split from a snapshot of the parent) gets the snapshot from the leader, never
// entries to apply on an empty store (CockroachDB starts the right-hand range of a split the
// same way, from the split trigger's state rather than a log).

// WriteSplitBase writes, into the replica directory dir, the raft snapshot the right half of a
// split starts from, when dir holds no raft log and no snapshot yet and store holds a split's
// copy (fsm.ReadSplitOrigin) applied up to the split. It reports whether dir now holds a base
// to start from (written now or before). trans encodes the voters' addresses into the
// snapshot's metadata. It blocks while the snapshot is written (the size of the right half).
func WriteSplitBase(ctx context.Context, dir string, store *storage.PartitionStore, trans raft.Transport, logger *slog.Logger) (bool, error) {
	if HasLog(dir) {
		return false, nil
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogslog.New(logger, "raft"))
	if err != nil {
		return false, err
	}
	if metas, err := snaps.List(); err != nil {
		return false, err
	} else if len(metas) > 0 {
		return true, nil
	}
	origin, ok, err := fsm.ReadSplitOrigin(ctx, store)
	if err != nil || !ok {
		return false, err
	}
	applied, err := store.Applied(ctx)
	if err != nil {
		return false, err
	}
	if applied.Index < origin.Index {
		return false, nil
	}
	f, err := fsm.New(ctx, fsm.Config{Store: store, Logger: logger})
	if err != nil {
		return false, err
	}
	snap, err := f.Snapshot()
	if err != nil {
		return false, err
	}
	defer snap.Release()
	var conf raft.Configuration
	for _, v := range origin.Voters {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(v.ID), Address: raft.ServerAddress(v.Addr), Suffrage: raft.Voter})
	}
	if len(conf.Servers) == 0 {
		return false, fmt.Errorf("partition: the split's copy names no voter")
	}
	// Term 1, as the copy's applied state: the group's first leader (term 1 or more) never
	// appends below its log's last term.
	sink, err := snaps.Create(raft.SnapshotVersionMax, applied.Index, 1, conf, applied.Index, trans)
	if err != nil {
		return false, err
	}
	if err := snap.Persist(sink); err != nil {
		return false, err
	}
	return true, nil
}
