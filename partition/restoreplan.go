package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
)

// ErrCellsLost: a restore would remove cells of the partition that the backup does not hold
// (cells written after the backup, or never in it), and the caller did not name their number
// (RestoreOptions.AcceptLostCells), or named another one; nothing changed. The error is a
// *CellsLostError, which carries the count.
var ErrCellsLost = errors.New("partition: the restore would drop cells absent from the backup")

// CellsLostError is the refusal of a restore whose CellsLost, counted under the restore's write
// gate, is not the number the caller accepted. It unwraps to ErrCellsLost.
type CellsLostError struct {
	// Lost is the number of cells of the partition whose key is absent from the backup.
	Lost int64
	// Accepted is RestoreOptions.AcceptLostCells (nil: not given).
	Accepted *int64
}

func (e *CellsLostError) Error() string {
	if e.Accepted == nil {
		return fmt.Sprintf("%s: %d cells of the partition are not in the backup and would be lost (accept_lost_cells=%d restores anyway; dry_run=true reports them)", ErrCellsLost, e.Lost, e.Lost)
	}
	return fmt.Sprintf("%s: %d cells of the partition are not in the backup and would be lost, not the %d accepted (nothing changed; accept_lost_cells=%d restores anyway)", ErrCellsLost, e.Lost, *e.Accepted, e.Lost)
}

func (e *CellsLostError) Unwrap() error { return ErrCellsLost }

// RestoreResult is the outcome of RestoreBackup: the backup as read, and how it compared with
// the partition's cells (the comparison a dry run reports, or the one the restore was allowed
// by).
type RestoreResult struct {
	// Backup describes the stream read (its header names the source cluster's applied index).
	Backup fsm.BackupInfo
	// DryRun is true when nothing was changed (RestoreOptions.DryRun).
	DryRun bool
	// TargetCells is the number of cells the partition held when compared: for a restore,
	// under the write gate just before raft's restore, so exactly the cells it replaced.
	TargetCells int64
	// CellsLost is the number of those cells whose key (shard, row key, column, ref key) is
	// absent from the backup: the cells the restore removed (or, in a dry run, would remove).
	// A cell whose key the backup holds counts as kept even if its body or added_id differ.
	CellsLost int64
}

// compareBackup counts the partition's cells (TargetCells) and those of them whose key is
// absent from the staged backup records in f (CellsLost), reading the partition through one
// read view of its store. It reads f from its start and leaves it at its start. Memory: the keys
// of one shard of the backup at a time (the stream holds cells shard by shard).
func (p *Raft) compareBackup(ctx context.Context, f *os.File) (target, lost int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, fmt.Errorf("partition: restore: %w", err)
	}
	tx, err := p.cfg.Store.BeginSnapshot(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("partition: restore: compare with the backup: %w", err)
	}
	defer tx.Close()
	next, cur := p.cfg.Shards.First, -1
	keys := map[cells.Key]struct{}{}
	// compareUpTo scans the partition's shards next..upTo-1; keys are those of shard cur.
	compareUpTo := func(upTo int) error {
		for ; next < upTo; next++ {
			var backup map[cells.Key]struct{}
			if next == cur {
				backup = keys
			}
			err := tx.ScanShard(ctx, next, func(c cells.Cell) error {
				target++
				if _, ok := backup[c.Key]; !ok {
					lost++
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("partition: restore: compare shard %d with the backup: %w", next, err)
			}
		}
		return nil
	}
	err = fsm.ScanSnapshotCellKeys(f, func(shard int, k cells.Key) error {
		if shard != cur {
			if err := compareUpTo(shard); err != nil {
				return err
			}
			clear(keys)
			cur = shard
		}
		keys[k] = struct{}{}
		return nil
	})
	if err == nil {
		err = compareUpTo(p.cfg.Shards.Last + 1)
	}
	if err != nil {
		return 0, 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, fmt.Errorf("partition: restore: %w", err)
	}
	return target, lost, nil
}

// allowRestore decides, from the comparison made under the write gate, whether the restore may
// replace the partition: see RestoreOptions.
func allowRestore(opts RestoreOptions, target, lost int64) error {
	if opts.AcceptLostCells != nil && *opts.AcceptLostCells != lost || opts.AcceptLostCells == nil && lost > 0 {
		return &CellsLostError{Lost: lost, Accepted: opts.AcceptLostCells}
	}
	if target > 0 && !opts.Force && opts.AcceptLostCells == nil {
		return fmt.Errorf("%w: %d cells, every one of them in the backup (restore with force, or accept_lost_cells=0, to replace them)", ErrNotEmpty, target)
	}
	return nil
}

// barrier waits until every entry appended before it is applied to the FSM (raft.Barrier), or
// ctx ends.
func (p *Raft) barrier(ctx context.Context) error {
	f := p.raft.Barrier(p.cfg.EnqueueTimeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		switch {
		case err == nil:
			return nil
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			return p.notLeader()
		}
		return fmt.Errorf("%w: restore: waiting for the log to be applied: %w", ErrUnavailable, err)
	case <-ctx.Done():
		return fmt.Errorf("%w: restore: waiting for the log to be applied: %w", ErrUnavailable, ctx.Err())
	}
}
