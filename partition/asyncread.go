package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

// readOn runs fn on the partition's read store on member m of cluster c, through m's circuit
// breaker, then checks that the copy it read is the partition's (CheckFence): if the
// placement on m names another cluster, the error wraps ErrUnavailable and storage.ErrMoved,
// and what fn read must be dropped. With master (a strong read), it checks too that m is still
// writable after the read (storage CheckMaster): if m was fenced since the last probe (a node
// paused through a failover still takes the old master for the master), the error wraps
// ErrUnavailable and storage.ErrNotMaster, what fn read is dropped, and c probes its members
// at once.
func (a *Async) readOn(ctx context.Context, c *StorageCluster, m *member, master bool, fn func(*storage.PartitionStore) error) error {
	var refused error // kept out of the circuit breaker: the member answered
	err := m.run(func() error {
		st, err := m.readStore(ctx, c)
		if err != nil {
			return err
		}
		ps, err := a.partitionStore(ctx, c, st, m, false)
		if err != nil {
			return err
		}
		ferr := fn(ps)
		// After the read: if the placement did not name another cluster yet, the read
		// happened before the switch, when this copy was the partition's. (A read that
		// failed on a dropped copy is retried elsewhere too.)
		check := ps.CheckFence
		if master {
			check = ps.CheckMaster
		}
		if err := check(ctx); errors.Is(err, storage.ErrMoved) || errors.Is(err, storage.ErrNotMaster) {
			refused = err
			return nil
		} else if err != nil && ferr == nil {
			return err
		}
		if master && ferr == nil {
			return a.checkRange(ctx, ps)
		}
		return ferr
	})
	if errors.Is(refused, storage.ErrNotMaster) {
		c.probeSoon()
	}
	if refused != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, m.name, refused)
	}
	return err
}

// checkRange refuses a strong read made by a node that serves the partition with a range the
// master says it no longer holds all of (a split in place this node's catalog has not shown
// it yet, SplitAsync): the right half's shards may have moved to another cluster since, and
// what was read must be dropped. The error wraps command.ErrShardOutOfRange, so the node routes
// the read again by a newer catalog. One KV read on the master, after the read.
func (a *Async) checkRange(ctx context.Context, ps *storage.PartitionStore) error {
	r, ok, err := fsm.ReadRange(ctx, ps)
	if err != nil {
		return err
	}
	if mine := a.Shards(); ok && (!r.Contains(mine.First) || !r.Contains(mine.Last)) {
		return fmt.Errorf("%w: partition %d holds shards %d..%d on its master, this node serves it as %d..%d (a split it has not learned of)",
			command.ErrShardOutOfRange, a.cfg.Partition, r.First, r.Last, mine.First, mine.Last)
	}
	return nil
}

// Read runs req against the partition's tables with consistency c: Strong on the primary
// master (read-your-writes on the master's latest), Stale on a minion (another minion, then
// the master, if one fails). A long-polling log read re-reads every 50 ms. Errors: ErrBadRead;
// ErrUnavailable (no master, or its circuit breaker is open, or the partition still moved:
// retryable, nothing to wait for within the request); command.ErrShardOutOfRange; the store's
// errors, wrapped.
func (a *Async) Read(ctx context.Context, c Consistency, req ReadRequest) (ReadResult, error) {
	if err := req.check(); err != nil {
		return ReadResult{}, err
	}
	var res ReadResult
	err := a.readWith(ctx, c != Stale, func(st *storage.PartitionStore) (err error) {
		res, err = query(ctx, st, a.Shards(), a, req)
		return err
	})
	if err != nil {
		return ReadResult{}, err
	}
	// The meta table's applied index of an async store counts the coordinator's own commands,
	// not a log every write goes through: a batch get's snapshot has no index to name.
	for i := range res.Get {
		res.Get[i].AppliedIndex = 0
	}
	return res, nil
}

// readWith runs fn on the partition's store on the primary master (strong) or on a minion
// (stale; another minion, then the master, if one fails). Each attempt goes through the
// member's circuit breaker. A read of a copy that moved away is dropped and retried on the
// primary the placement names, for up to MovedWait. fn may run more than once. Errors:
// ErrUnavailable (no master, or its breaker is open, or still moved: retryable), or fn's.
func (a *Async) readWith(ctx context.Context, strong bool, fn func(*storage.PartitionStore) error) error {
	retry := a.movedRetry()
	for {
		pl := a.placement()
		err := a.readFrom(ctx, pl.primary, strong, fn)
		if !errors.Is(err, storage.ErrMoved) || !retry.again(ctx, pl) {
			return err
		}
	}
}

// readFrom is one attempt of readWith on cluster c.
func (a *Async) readFrom(ctx context.Context, c *StorageCluster, strong bool, fn func(*storage.PartitionStore) error) error {
	var candidates []*member
	if !strong {
		ms, err := c.minionMembers(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		candidates = ms
	}
	if _, m, err := c.masterMember(ctx); err == nil {
		candidates = append(candidates, m)
	} else if strong || len(candidates) == 0 {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var lastErr error
	for _, m := range candidates {
		err := a.readOn(ctx, c, m, strong, fn)
		if err == nil {
			return nil
		}
		lastErr = err
		// A minion may lag behind its master's placement: the master, last, has the word.
		if strong || ctx.Err() != nil {
			break
		}
	}
	if errors.Is(lastErr, ErrUnavailable) {
		return lastErr
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, lastErr)
}

// AppliedChanged returns a channel closed after a short while (50ms): long polls of an async
// partition re-read their shards at that pace, since other nodes write the master too.
func (a *Async) AppliedChanged() <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(ch) })
	return ch
}

// HighWater always reports false: another node may have written the shard since.
func (a *Async) HighWater(int) (int64, bool) { return 0, false }

// AsyncStatus is what the partition reports of itself.
type AsyncStatus struct {
	// Cluster is the storage cluster holding the partition, as its placement names it;
	// PlacementEpoch the epoch of that placement (0: the topology's).
	Cluster        string
	PlacementEpoch int64
	Members        []MemberStatus
	// BufferDepth is how many of the partition's cells the buffer clusters held at the last
	// reaper pass, BufferOldest when the oldest of them was buffered (zero when none).
	BufferDepth  int64
	BufferOldest time.Time
	// Reaped, Replayed and Conflicts count the reaper's work since the node started: buffer
	// rows deleted, cells replayed into the primary master, and buffered cells dropped
	// because the primary holds their key with another body.
	Reaped, Replayed, Conflicts int64
	// Moved counts the writes and reads a copy refused as moved since the node started (each
	// retried on the cluster the placement names): a move's switch, or a stale placement.
	Moved int64
}

// Status returns the partition's state (Status.Async).
func (a *Async) Status() Status {
	pl := a.placement()
	s := AsyncStatus{Cluster: pl.primary.Name(), PlacementEpoch: pl.epoch, Members: pl.primary.Status(),
		BufferDepth: a.depth.Load(), Reaped: a.reaped.Load(), Replayed: a.replayed.Load(), Conflicts: a.conflicts.Load(),
		Moved: a.moved.Load()}
	if o := a.oldest.Load(); o > 0 {
		s.BufferOldest = time.UnixMicro(o).UTC()
	}
	return Status{Async: &s}
}

// Leader returns AsyncConfig.NodeID: every node serves the partition against its storage
// cluster's master, so a leader-only request (a write, a strong read, a group or index
// command) is served by the node that received it. addr is "".
func (a *Async) Leader() (id, addr string) { return a.cfg.NodeID, "" }

// Elected reports false: the partition has no elected leader (its master changes only by an
// operator's promotion), so its answers are final for the request that got them.
func (a *Async) Elected() bool { return false }

// Backup refuses with ErrNotRaft: an async partition is backed up with MySQL's tools on its
// storage clusters.
func (a *Async) Backup(context.Context, io.Writer) (fsm.BackupInfo, error) {
	return fsm.BackupInfo{}, a.notRaft("backup")
}

// RestoreBackup refuses with ErrNotRaft, reading nothing from its reader: an async partition
// is restored with MySQL's tools on its storage clusters.
// A dry run is refused the same way.
func (a *Async) RestoreBackup(context.Context, io.Reader, RestoreOptions) (RestoreResult, error) {
	return RestoreResult{}, a.notRaft("restore")
}

func (a *Async) notRaft(op string) error {
	return fmt.Errorf("%w: %s of async datastores: use MySQL tools on the storage clusters (datastore %s)", ErrNotRaft, op, a.cfg.Datastore)
}
