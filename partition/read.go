package partition

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// ReadIndex returns once a read of this replica's store reflects every write acknowledged before
// ReadIndex was called: the read index of the Raft dissertation §6.4. It must be called on the
// leader (else *NotLeaderError). Errors: *NotLeaderError (leadership lost or not held: retry on
// the leader), ErrUnavailable (no quorum answered before ctx ended), ctx.Err() wrapped.
func (p *Raft) ReadIndex(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if !p.IsLeader() {
		return p.notLeader()
	}
	term := p.raft.CurrentTerm()
	// 1. A new leader's commit index may lag entries committed by its predecessor until an
	// entry of its own term (raft appends a no-op on election) is committed.
	if p.readyTerm.Load() != term {
		if err := p.waitOwnTermCommitted(ctx, term); err != nil {
			return err
		}
	}
	// 2. The read index.
	readIndex := p.raft.CommitIndex()
	// 3. Still the leader? A round of heartbeats acknowledged by a quorum. Concurrent callers
	// share heartbeat rounds inside raft.
	if err := p.verifyLeader(ctx); err != nil {
		return err
	}
	if p.raft.CurrentTerm() != term {
		return p.notLeader()
	}
	// 4. Wait until the FSM has applied every command at or below the read index.
	return p.waitApplied(ctx, readIndex)
}

func (p *Raft) verifyLeader(ctx context.Context) error {
	f := p.raft.VerifyLeader()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err == nil {
			return nil
		}
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return p.notLeader()
		}
		return fmt.Errorf("%w: verify leader: %w", ErrUnavailable, err)
	case <-ctx.Done():
		return fmt.Errorf("%w: verify leader: %w", ErrUnavailable, ctx.Err())
	}
}

// waitOwnTermCommitted polls until the entry at the commit index belongs to term.
func (p *Raft) waitOwnTermCommitted(ctx context.Context, term uint64) error {
	for {
		ci := p.raft.CommitIndex()
		var l raft.Log
		if ci > 0 && p.logs.GetLog(ci, &l) == nil && l.Term == term {
			p.readyTerm.Store(term)
			return nil
		}
		if !p.IsLeader() || p.raft.CurrentTerm() != term {
			return p.notLeader()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the first commit of term %d: %w", ErrUnavailable, term, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// waitApplied waits until the FSM reflects every entry at or below index. Entries the FSM never
// sees (raft's no-op and barrier entries) do not count: it waits for the last command or
// configuration entry at or below index, found by scanning the log down from index.
func (p *Raft) waitApplied(ctx context.Context, index uint64) error {
	applied := p.fsm.Applied().Index
	if applied >= index {
		return nil
	}
	target := uint64(0)
	for i := index; i > applied; i-- {
		var l raft.Log
		if err := p.logs.GetLog(i, &l); err != nil {
			break // compacted: covered by a snapshot the FSM holds
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			target = i
			break
		}
	}
	if target == 0 {
		return nil
	}
	if err := p.fsm.WaitApplied(ctx, target); err != nil {
		return fmt.Errorf("%w: waiting for apply of %d: %w", ErrUnavailable, target, err)
	}
	return nil
}

// Read runs req against this replica's tables with consistency c: Strong after a read index
// (ReadIndex on the leader; on a follower FollowerReadIndex when Config.LeaderReadIndex is set,
// else *NotLeaderError), Stale at once, BoundedStale once this replica's store is within the
// bound (BoundedReady: ErrTooStale when it cannot be). A long-polling log read then waits on this
// replica's applied index. Errors: ErrBadRead; ErrUnavailable (the state machine stopped, or
// ReadIndex's); *NotLeaderError and ErrClosed (strong reads); command.ErrShardOutOfRange (a shard
// not in the partition); the store's errors, wrapped.
func (p *Raft) Read(ctx context.Context, c Consistency, req ReadRequest) (ReadResult, error) {
	if err := req.check(); err != nil {
		return ReadResult{}, err
	}
	p.load.countRead(req)
	if err := p.fsm.Failed(); err != nil {
		return ReadResult{}, fmt.Errorf("%w: replica stopped: %w", ErrUnavailable, err)
	}
	if err := p.readReady(ctx, c); err != nil {
		return ReadResult{}, err
	}
	if req.Catalog != nil {
		return p.readCatalog(ctx, req)
	}
	return query(ctx, p.cfg.Store, p.Shards(), p.fsm, req)
}

// catalogRead is a catalog read's answer and the state machine's applied index taken before it.
type catalogRead struct {
	applied uint64
	catalog []byte
}

// readCatalog answers a catalog read. Only an applied entry changes the catalog, so while the
// state machine's applied index stays where it was before the last read, that read's answer
// stands and no SQL runs: every node's index maintainer reads the catalog every second, which on
// an idle node would otherwise be its main SQL work. The index is taken before the read, so a
// cached answer is at least as new as that index, and the next apply makes the next read run.
func (p *Raft) readCatalog(ctx context.Context, req ReadRequest) (ReadResult, error) {
	applied := p.fsm.Applied().Index
	if last := p.catalog.Load(); last != nil && last.applied == applied {
		return ReadResult{Catalog: last.catalog}, nil
	}
	res, err := query(ctx, p.cfg.Store, p.Shards(), p.fsm, req)
	if err != nil {
		return ReadResult{}, err
	}
	p.catalog.Store(&catalogRead{applied: applied, catalog: res.Catalog})
	return res, nil
}
