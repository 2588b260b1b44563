package partition

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Follower reads (the Raft dissertation §6.4: a follower asks the leader for its read index and
// serves the read once its own state machine has applied that far) and reads with bounded
// staleness (a replica serves a read when its store reflects every write acknowledged up to
// the bound ago, measured by its last read index from the leader and when it asked for it).

// ErrTooStale: a bounded stale read that this replica cannot serve within its bound (its
// leader did not answer in time, or its store did not apply that far in time). Nothing was
// read; another replica, or the leader, may serve it. It wraps ErrUnavailable.
var ErrTooStale = fmt.Errorf("%w: replica too stale for the read's bound", ErrUnavailable)

// knownIndex is the last read index a follower learned from its leader and the time just
// before it asked: its store, once it applied index, reflects every write acknowledged before
// at.
type knownIndex struct {
	mu    sync.Mutex
	index uint64
	at    time.Time
}

func (k *knownIndex) get() (uint64, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.index, k.at
}

// note records a read index learned at at, unless a later one is known.
func (k *knownIndex) note(index uint64, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if at.After(k.at) {
		k.index, k.at = index, at
	}
}

// LeaderReadIndex returns, on the leader, an index such that a replica whose state machine has
// applied it reflects every write acknowledged before the call: a read index (ReadIndex), then
// the leader's applied index (at or above it, so that raft's no-op entries, which no state
// machine counts, need no special case). Errors: ReadIndex's.
func (p *Raft) LeaderReadIndex(ctx context.Context) (uint64, error) {
	if err := p.ReadIndex(ctx); err != nil {
		return 0, err
	}
	return p.fsm.Applied().Index, nil
}

// FollowerReadIndex returns once this follower's store reflects every write acknowledged before
// it was called: it asks the leader (Config.LeaderReadIndex) and waits until its state machine
// applied that far. Errors: *NotLeaderError without Config.LeaderReadIndex; the leader's
// errors; ErrUnavailable when ctx ends first.
func (p *Raft) FollowerReadIndex(ctx context.Context) error {
	fetch := p.cfg.LeaderReadIndex
	if fetch == nil {
		return p.notLeader()
	}
	at := time.Now()
	index, err := fetch(ctx)
	if err != nil {
		return err
	}
	p.known.note(index, at)
	if err := p.fsm.WaitApplied(ctx, index); err != nil {
		return fmt.Errorf("%w: waiting for apply of read index %d: %w", ErrUnavailable, index, err)
	}
	return nil
}

// BoundedReady returns once this replica's store reflects every write acknowledged before
// maxStaleness ago: the leader after a read index; a follower once it applied a read index
// from its leader asked for within the bound. A follower asks its leader again when its last
// read index is older than half the bound (and still serves from that one, if within the bound,
// when the leader does not answer). Errors: ErrTooStale (no Config.LeaderReadIndex, no read
// index within the bound, or the store not applied that far in time; nothing read), ReadIndex's
// on the leader.
func (p *Raft) BoundedReady(ctx context.Context, maxStaleness time.Duration) error {
	if p.IsLeader() {
		return p.ReadIndex(ctx)
	}
	index, at := p.known.get()
	if fetch := p.cfg.LeaderReadIndex; fetch != nil && (at.IsZero() || time.Since(at) > maxStaleness/2) {
		now := time.Now()
		deadline := now.Add(maxStaleness)
		if !at.IsZero() {
			deadline = at.Add(maxStaleness) // the cached one's end: after it, nothing to serve from
		}
		if deadline.Before(now.Add(maxStaleness / 2)) {
			deadline = now.Add(maxStaleness / 2)
		}
		fctx, cancel := context.WithDeadline(ctx, deadline)
		got, err := fetch(fctx)
		cancel()
		if err == nil {
			p.known.note(got, now)
			index, at = p.known.get()
		}
	}
	if at.IsZero() || time.Since(at) > maxStaleness {
		return fmt.Errorf("%w: no read index from the leader within %s", ErrTooStale, maxStaleness)
	}
	wctx, cancel := context.WithDeadline(ctx, at.Add(maxStaleness))
	defer cancel()
	if err := p.fsm.WaitApplied(wctx, index); err != nil {
		return fmt.Errorf("%w: applied %d of read index %d within %s: %w", ErrTooStale, p.fsm.Applied().Index, index, maxStaleness, err)
	}
	return nil
}

// readReady makes this replica ready to serve a read of consistency c (Read).
func (p *Raft) readReady(ctx context.Context, c Consistency) error {
	if d, ok := c.MaxStaleness(); ok {
		return p.BoundedReady(ctx, d)
	}
	switch c {
	case Stale:
		return nil
	case Strong, "":
		if !p.IsLeader() && p.cfg.LeaderReadIndex != nil && (p.cfg.FollowerStrongReads || p.IsLearner()) {
			return p.FollowerReadIndex(ctx)
		}
		return p.ReadIndex(ctx)
	}
	return fmt.Errorf("%w: consistency %q", ErrBadRead, c)
}

// IsLearner reports whether this replica is a nonvoter of its group's latest configuration
// (a learner, or a voter being added that has not been promoted yet).
func (p *Raft) IsLearner() bool {
	for _, srv := range p.raft.GetConfiguration().Configuration().Servers {
		if string(srv.ID) == p.cfg.NodeID {
			return srv.Suffrage == raft.Nonvoter
		}
	}
	return false
}
