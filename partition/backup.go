package partition

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// Errors of Backup and RestoreBackup.
var (
	// ErrNotEmpty: RestoreBackup without Force on a partition that holds cells; nothing changed.
	ErrNotEmpty = errors.New("partition: the partition holds cells")
	// ErrNoBackup: the replica's state machine is not an *fsm.FSM (the raft-noop baseline).
	ErrNoBackup = errors.New("partition: this state machine has no backup")
	// ErrNotRaft: a raft-only operation (backup, restore) on a partition of an async
	// datastore, whose storage clusters are backed up with MySQL's tools; nothing done.
	ErrNotRaft = errors.New("partition: not a raft datastore")
)

// restoreIndexGap is how far above the leader's last log index a restored backup is placed. raft
// leaves a hole in the log up to the restored snapshot, so every follower installs it. A
// follower that still holds a stale entry (of an earlier term, never committed) at exactly the
// snapshot's index would reject every later AppendEntries and download the snapshot forever
// (hashicorp/raft issue 697, fixed by pull request 704, not in v1.7.3). Stale entries are those
// a deposed leader appended without a quorum, a few batches; a gap of 2^20 entries puts the
// snapshot's index beyond any of them.
const restoreIndexGap = 1 << 20

// Backup writes a consistent snapshot stream of the partition to w (fsm.FSM.Backup) and
// returns what it wrote. It must be called on the leader (else *NotLeaderError). It first takes
// a read index (ReadIndex), so the backup holds every write acknowledged before Backup was
// called; it then streams one read view of the leader's store, while writes go on. The stream's
// header says which raft index and term the view reflects.
//
// ctx bounds the read index and the view's reads; a backup of a large partition takes as long
// as reading it. On an error after bytes reached w, w holds a truncated stream (rejected by
// fsm.VerifySnapshot and by restores). Errors: *NotLeaderError, ErrUnavailable (no quorum
// confirmed the leadership), ErrClosed, ErrNoBackup, fsm.ErrFailed, the store's or w's.
func (p *Raft) Backup(ctx context.Context, w io.Writer) (fsm.BackupInfo, error) {
	f, ok := p.fsm.(*fsm.FSM)
	if !ok {
		return fsm.BackupInfo{}, ErrNoBackup
	}
	if err := p.ReadIndex(ctx); err != nil {
		return fsm.BackupInfo{}, err
	}
	return f.Backup(ctx, w)
}

// RestoreOptions tune RestoreBackup.
type RestoreOptions struct {
	// Force restores into a partition that holds cells, replacing them. Without it such a
	// partition is refused with ErrNotEmpty.
	Force bool
}

// RestoreBackup replaces the partition's whole state (cells, KV rows, index tables) on every
// replica with the snapshot stream read from r, as written by Backup (of this or another
// cluster, with the same shard range). It must be called on the leader (else *NotLeaderError).
//
// Steps: without opts.Force, a read index and a look at every shard's highest added_id refuse a
// partition that holds cells (ErrNotEmpty). The stream is then copied into a file in the
// replica's directory while it is checked record by record (fsm.VerifySnapshotRecords): a
// stream of another shard range, truncated or malformed is refused with fsm.ErrBadSnapshot
// before raft sees it, which matters because raft panics when its FSM fails to restore a user
// snapshot. Last, raft's Restore (hashicorp/raft api.go) writes it as a new snapshot, restores
// the leader's FSM from it, leaves a hole in the log so that each follower installs the
// snapshot, and commits a no-op behind it: when RestoreBackup returns nil, a quorum holds the
// restored state.
//
// The snapshot's raft index is placed restoreIndexGap above max(the leader's last log index,
// the backup's applied index), and the stream's header is rewritten so that the restored
// store's applied index is that snapshot index (term: the leader's current term): every later
// entry is above it, so the FSM applies it, and a replica that restarts, or crashed between
// writing the snapshot file and restoring its store, finds its store behind the snapshot and
// restores it again (see catchUpStore). The backup's own index and term, which belong to the
// source cluster's log, are returned in the BackupInfo's Header.
//
// Every follower installs the snapshot at once, and while it does (its store's restore takes
// as long as writing the partition) it answers no heartbeat: heartbeats are handled on raft's
// main goroutine here (heartbeat.go). A restore longer than LeaderLeaseTimeout therefore makes
// the leader step down. The transfers still complete, so the followers hold the snapshot and
// elect a leader that holds it; RestoreBackup waits for that (this replica's commit index past
// the snapshot, at most restoreSettleTimeout) and then returns nil.
//
// Writes proposed while the restore runs fail (raft answers them ErrAbortedByRestore) or land
// before the snapshot and are replaced by it: stop writers first. ctx bounds the checks and the
// copy of r; once handed to raft the restore runs to its end even if ctx ends, and
// RestoreBackup then returns ErrIndeterminate. Errors: *NotLeaderError, ErrUnavailable,
// ErrIndeterminate (ctx ended during raft's restore, or leadership was lost and no leader
// holding the snapshot committed after it in time: it may or may not have taken effect; rerun
// it with Force), ErrNotEmpty, fsm.ErrBadSnapshot, ErrClosed,
// ErrNoBackup, r's read errors (wrapped), the disk's.
func (p *Raft) RestoreBackup(ctx context.Context, r io.Reader, opts RestoreOptions) (fsm.BackupInfo, error) {
	if _, ok := p.fsm.(*fsm.FSM); !ok {
		return fsm.BackupInfo{}, ErrNoBackup
	}
	if p.closed.Load() {
		return fsm.BackupInfo{}, ErrClosed
	}
	if !p.IsLeader() {
		return fsm.BackupInfo{}, p.notLeader()
	}
	if !opts.Force {
		if err := p.checkEmpty(ctx); err != nil {
			return fsm.BackupInfo{}, err
		}
	}
	staged, info, err := p.stageBackup(ctx, r)
	if err != nil {
		return info, err
	}
	cleanup := func() {
		staged.Close()
		os.Remove(staged.Name())
	}
	st, err := staged.Stat()
	if err == nil && !p.IsLeader() {
		err = p.notLeader()
	}
	if err != nil {
		cleanup()
		return info, err
	}
	index := max(p.raft.LastIndex(), info.Header.Applied.Index) + restoreIndexGap
	h := info.Header
	h.Applied = storage.AppliedState{Index: index + 1, Term: p.raft.CurrentTerm()}
	head, err := fsm.EncodeSnapshotHeader(h)
	if err != nil {
		cleanup()
		return info, err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: index, Term: h.Applied.Term, Size: int64(len(head)) + st.Size()}
	p.log.Warn("restoring a backup: the partition's state is replaced", "snapshot_index", index+1,
		"backup_index", info.Header.Applied.Index, "backup_term", info.Header.Applied.Term, "cells", info.Cells, "bytes", meta.Size)

	done := make(chan error, 1)
	go func() {
		err := p.raft.Restore(meta, io.MultiReader(bytes.NewReader(head), staged), p.cfg.EnqueueTimeout)
		cleanup() // raft has read the file (or failed)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		return info, fmt.Errorf("%w: restore handed to raft, still running: %w", ErrIndeterminate, ctx.Err())
	}
	if err != nil && errors.Is(err, raft.ErrLeadershipLost) && p.waitPast(ctx, index+1) == nil {
		// The followers were installing the snapshot, not answering heartbeats, for longer
		// than the leader lease: the leader stepped down. They hold the snapshot now, and the
		// leader elected among them committed an entry after it.
		p.log.Warn("the leader stepped down while its followers installed the restored backup; the new term holds it", "snapshot_index", index+1)
		err = nil
	}
	if err != nil {
		return info, p.classifyRestore(err)
	}
	p.log.Info("restored a backup", "snapshot_index", index+1, "cells", info.Cells)
	return info, nil
}

// restoreSettleTimeout bounds waitPast: how long a restore whose leader stepped down waits for
// the followers to finish installing the snapshot and elect a leader.
const restoreSettleTimeout = 10 * time.Minute

// waitPast waits until this replica's commit index is past snap, with its log holding an entry
// after it: a leader whose log (or snapshot) holds snap committed an entry after it, so snap is
// committed. It gives up when ctx ends or after restoreSettleTimeout.
func (p *Raft) waitPast(ctx context.Context, snap uint64) error {
	ctx, cancel := context.WithTimeout(ctx, restoreSettleTimeout)
	defer cancel()
	for {
		if p.raft.CommitIndex() > snap && p.raft.LastIndex() > snap {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.stop:
			return ErrClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// classifyRestore maps raft.Restore's errors to the partition's.
func (p *Raft) classifyRestore(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return p.notLeader()
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: restore: %w", ErrUnavailable, err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: restore: %w", ErrIndeterminate, err)
	}
	// "cannot restore snapshot now, wait until the configuration entry ... has been applied",
	// or the snapshot store's errors: nothing was restored.
	return fmt.Errorf("%w: restore: %w", ErrUnavailable, err)
}

// checkEmpty returns ErrNotEmpty when a shard of the partition holds a cell, after a read
// index so that every acknowledged write counts.
func (p *Raft) checkEmpty(ctx context.Context) error {
	if err := p.ReadIndex(ctx); err != nil {
		return err
	}
	for s := p.cfg.Shards.First; s <= p.cfg.Shards.Last; s++ {
		id, err := p.cfg.Store.MaxAddedID(ctx, s)
		if err != nil {
			return fmt.Errorf("partition: restore: %w", err)
		}
		if id > 0 {
			return fmt.Errorf("%w: shard %d has cells up to added_id %d (restore with force to replace them)", ErrNotEmpty, s, id)
		}
	}
	return nil
}

// stageBackup copies the records of the stream r (everything after its header) into a new file
// in the replica's directory, checking them as they pass, and returns the file (positioned at
// its start) and the stream's BackupInfo (Bytes: the whole stream). The file is the caller's to
// close and remove.
func (p *Raft) stageBackup(ctx context.Context, r io.Reader) (*os.File, fsm.BackupInfo, error) {
	br := bufio.NewReaderSize(ctxReader{ctx, r}, 256<<10)
	cr := &countingReader{r: br}
	h, err := fsm.ReadSnapshotHeader(cr)
	if err != nil {
		return nil, fsm.BackupInfo{}, sourceError(ctx, err)
	}
	hdrBytes := cr.n
	if h.FirstShard != p.cfg.Shards.First || h.LastShard != p.cfg.Shards.Last {
		return nil, fsm.BackupInfo{Header: h}, fmt.Errorf("%w: the backup holds shards %d..%d, the partition %d..%d",
			fsm.ErrBadSnapshot, h.FirstShard, h.LastShard, p.cfg.Shards.First, p.cfg.Shards.Last)
	}
	f, err := os.CreateTemp(p.cfg.Dir, "restore-*.tmp")
	if err != nil {
		return nil, fsm.BackupInfo{Header: h}, fmt.Errorf("partition: restore: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	fw := bufio.NewWriterSize(f, 256<<10)
	info, err := fsm.VerifySnapshotRecords(h, io.TeeReader(br, fw))
	if err != nil {
		return nil, info, sourceError(ctx, err)
	}
	info.Bytes += hdrBytes
	if err := fw.Flush(); err != nil {
		return nil, info, fmt.Errorf("partition: restore: %w", err)
	}
	if err := f.Sync(); err != nil {
		return nil, info, fmt.Errorf("partition: restore: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, info, fmt.Errorf("partition: restore: %w", err)
	}
	ok = true
	return f, info, nil
}

// sourceError returns ctx's error when ctx ended while reading, else err.
func sourceError(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("partition: restore: %w (%w)", ctx.Err(), err)
	}
	return err
}

// ctxReader fails reads once ctx has ended.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// countingReader counts the bytes read through it; it keeps the io.ByteScanner of a bufio.Reader
// so that ReadSnapshotHeader reads exactly the header.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *countingReader) UnreadByte() error {
	err := c.r.UnreadByte()
	if err == nil {
		c.n--
	}
	return err
}
