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
	// ErrNotEmpty: RestoreBackup without Force or AcceptLostCells on a partition that holds
	// cells; nothing changed.
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

// RestoreOptions tune RestoreBackup. The zero value restores into a partition without cells
// only. A partition's cells are compared with the backup's by key (RestoreResult.CellsLost):
//
//   - CellsLost > 0 (the partition holds cells the backup does not, e.g. written after it): the
//     restore proceeds only with AcceptLostCells equal to CellsLost (else *CellsLostError);
//     Force alone does not allow it.
//   - CellsLost == 0 and the partition holds cells (all of them in the backup): Force or
//     AcceptLostCells = 0 allows it (else ErrNotEmpty).
//   - AcceptLostCells, when given, must equal CellsLost in every case (else *CellsLostError).
type RestoreOptions struct {
	// DryRun stages and checks the stream and compares it with the partition, then returns
	// the comparison (RestoreResult) without changing anything. Force and AcceptLostCells
	// are ignored.
	DryRun bool
	// Force allows replacing a partition that holds cells when every one of them is in the
	// backup. It never allows dropping a cell the backup lacks.
	Force bool
	// AcceptLostCells, when not nil, is the number of the partition's cells absent from the
	// backup that the caller accepts to lose: the restore proceeds only if the count made
	// under the restore's write gate equals it (the caller took it from a dry run). It
	// allows replacing a partition that holds cells, as Force does.
	AcceptLostCells *int64
}

// RestoreBackup replaces the partition's whole state (cells, KV rows, index tables) on every
// replica with the snapshot stream read from r, as written by Backup (of this or another
// cluster, with the same shard range), and returns the backup's BackupInfo with the comparison
// that allowed it (RestoreResult: the cells replaced and those lost). It must be called on the
// leader (else *NotLeaderError).
//
// Steps: without opts.Force, opts.AcceptLostCells or opts.DryRun, a read index and a look at
// every shard's highest added_id refuse at once a partition that holds cells (ErrNotEmpty),
// before r is read. The stream is then copied into a file in the replica's directory while it
// is checked record by record (fsm.VerifySnapshotRecords): a stream of another shard range,
// truncated or malformed is refused with fsm.ErrBadSnapshot before raft sees it, which matters
// because raft panics when its FSM fails to restore a user snapshot.
//
// A dry run then takes a read index, compares the partition's cells with the staged backup's
// by key (compareBackup), removes the file and returns: nothing changed. A restore closes the
// partition's write gate (new write batches wait in the queue; see propose), waits until every
// entry already in the log is applied (raft.Barrier), and compares under the gate, so that the
// count is exactly what raft's restore replaces; RestoreOptions says which counts proceed. The
// gate opens when raft's restore ends. Last, raft's Restore (hashicorp/raft api.go) writes the
// backup as a new snapshot, restores the leader's FSM from it, leaves a hole in the log so that
// each follower installs the snapshot, and commits a no-op behind it: when RestoreBackup
// returns nil, a quorum holds the restored state.
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
// Writes proposed while the restore runs wait behind the gate and land after the restored
// state, or fail (a full queue: ErrUnavailable; ctx). Other commands (index, schema, group,
// erase) are not gated: one applied between the count and raft's restore is replaced by the
// backup's state (an erase only lowers what is lost). Stop writers first. ctx bounds the
// checks and the copy of r; once handed to raft the restore runs to its end even if ctx ends,
// and RestoreBackup then returns ErrIndeterminate. Errors: *NotLeaderError, ErrUnavailable,
// ErrIndeterminate (ctx ended during raft's restore, or leadership was lost and no leader
// holding the snapshot committed after it in time: it may or may not have taken effect; rerun
// it), ErrNotEmpty, *CellsLostError (ErrCellsLost), fsm.ErrBadSnapshot, ErrClosed,
// ErrNoBackup, r's read errors (wrapped), the disk's. On every error but ErrIndeterminate
// nothing changed.
func (p *Raft) RestoreBackup(ctx context.Context, r io.Reader, opts RestoreOptions) (RestoreResult, error) {
	if _, ok := p.fsm.(*fsm.FSM); !ok {
		return RestoreResult{}, ErrNoBackup
	}
	if p.closed.Load() {
		return RestoreResult{}, ErrClosed
	}
	if !p.IsLeader() {
		return RestoreResult{}, p.notLeader()
	}
	if !opts.Force && opts.AcceptLostCells == nil && !opts.DryRun {
		if err := p.checkEmpty(ctx); err != nil {
			return RestoreResult{}, err
		}
	}
	staged, info, err := p.stageBackup(ctx, r)
	res := RestoreResult{Backup: info, DryRun: opts.DryRun}
	if err != nil {
		return res, err
	}
	cleanup := func() {
		staged.Close()
		os.Remove(staged.Name())
	}
	if opts.DryRun {
		defer cleanup()
		if err := p.ReadIndex(ctx); err != nil {
			return res, err
		}
		res.TargetCells, res.CellsLost, err = p.compareBackup(ctx, staged)
		return res, err
	}
	p.restoreGate.Lock()
	gated := true
	defer func() {
		if gated {
			p.restoreGate.Unlock()
		}
	}()
	st, err := staged.Stat()
	if err == nil && !p.IsLeader() {
		err = p.notLeader()
	}
	if err == nil {
		err = p.barrier(ctx)
	}
	if err == nil {
		res.TargetCells, res.CellsLost, err = p.compareBackup(ctx, staged)
	}
	if err == nil {
		err = allowRestore(opts, res.TargetCells, res.CellsLost)
	}
	if err != nil {
		cleanup()
		return res, err
	}
	index := max(p.raft.LastIndex(), info.Header.Applied.Index) + restoreIndexGap
	h := info.Header
	h.Applied = storage.AppliedState{Index: index + 1, Term: p.raft.CurrentTerm()}
	head, err := fsm.EncodeSnapshotHeader(h)
	if err != nil {
		cleanup()
		return res, err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: index, Term: h.Applied.Term, Size: int64(len(head)) + st.Size()}
	p.log.Warn("restoring a backup: the partition's state is replaced", "snapshot_index", index+1,
		"backup_index", info.Header.Applied.Index, "backup_term", info.Header.Applied.Term, "cells", info.Cells, "bytes", meta.Size,
		"replaced_cells", res.TargetCells, "lost_cells", res.CellsLost)

	done := make(chan error, 1)
	gated = false // the goroutine opens the gate when raft's restore ends
	go func() {
		err := p.raft.Restore(meta, io.MultiReader(bytes.NewReader(head), staged), p.cfg.EnqueueTimeout)
		p.restoreGate.Unlock()
		cleanup() // raft has read the file (or failed)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		return res, fmt.Errorf("%w: restore handed to raft, still running: %w", ErrIndeterminate, ctx.Err())
	}
	if err != nil && errors.Is(err, raft.ErrLeadershipLost) && p.waitPast(ctx, index+1) == nil {
		// The followers were installing the snapshot, not answering heartbeats, for longer
		// than the leader lease: the leader stepped down. They hold the snapshot now, and the
		// leader elected among them committed an entry after it.
		p.log.Warn("the leader stepped down while its followers installed the restored backup; the new term holds it", "snapshot_index", index+1)
		err = nil
	}
	if err != nil {
		return res, p.classifyRestore(err)
	}
	p.log.Info("restored a backup", "snapshot_index", index+1, "cells", info.Cells, "lost_cells", res.CellsLost)
	return res, nil
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
	shards := p.Shards()
	for s := shards.First; s <= shards.Last; s++ {
		id, err := p.cfg.Store.MaxAddedID(ctx, s)
		if err != nil {
			return fmt.Errorf("partition: restore: %w", err)
		}
		if id > 0 {
			return fmt.Errorf("%w: shard %d has cells up to added_id %d (restore with force or accept_lost_cells to replace them; a dry run counts those absent from the backup)", ErrNotEmpty, s, id)
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
	if shards := p.Shards(); h.FirstShard != shards.First || h.LastShard != shards.Last {
		return nil, fsm.BackupInfo{Header: h}, fmt.Errorf("%w: the backup holds shards %d..%d, the partition %d..%d",
			fsm.ErrBadSnapshot, h.FirstShard, h.LastShard, shards.First, shards.Last)
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
