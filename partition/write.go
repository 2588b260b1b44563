package partition

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/indexes"
)

// proposal is one Put call waiting to be grouped into a raft entry.
type proposal struct {
	write command.Write
	cells int
	bytes int
	done  chan proposalResult // buffered, receives exactly one result
}

type proposalResult struct {
	result command.WriteResult
	err    error
}

// Put applies one write (cells to append, with its idempotency key, conditions and atomicity:
// command.Write) to the partition and returns its outcome. It must be called on the leader (else
// *NotLeaderError, nothing done). It blocks until the entry holding the write is committed and
// applied on this replica, or ctx ends. A write with no cells answers a zero result at once.
//
// Errors: *NotLeaderError and ErrUnavailable mean nothing was written; ErrIndeterminate means the
// write may or may not be applied (ctx ended or leadership was lost after proposing); fsm errors
// (command.ErrShardOutOfRange) are returned as they are. Every outcome is safe to retry, and a
// write with an ID retried within command.RequestWindow answers its first outcome.
func (p *Raft) Put(ctx context.Context, w command.Write) (command.WriteResult, error) {
	if p.closed.Load() {
		return command.WriteResult{}, ErrClosed
	}
	if !p.IsLeader() {
		return command.WriteResult{}, p.notLeader()
	}
	if len(w.Cells) == 0 {
		return command.WriteResult{}, nil
	}
	// A write naming a shard the partition no longer holds (a split moved it) is refused here,
	// before it could share a raft entry, which the state machine refuses whole, with others.
	one := &command.Append{Writes: []command.Write{w}}
	if err := one.CheckShards(p.Shards()); err != nil {
		return command.WriteResult{}, err
	}
	if err := one.Validate(); err != nil {
		return command.WriteResult{}, err
	}
	for _, c := range w.Cells {
		p.load.add(c.Shard, 1)
	}
	pr := &proposal{write: w, cells: len(w.Cells), done: make(chan proposalResult, 1)}
	for _, c := range w.Cells {
		pr.bytes += len(c.Body) + len(c.Key.ColumnKey) + 32
	}
	pr.bytes += 64 * len(w.Conditions)
	select {
	case p.queue <- pr:
	case <-ctx.Done():
		return command.WriteResult{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	default:
		return command.WriteResult{}, fmt.Errorf("%w: write queue full", ErrUnavailable)
	}
	select {
	case r := <-pr.done:
		return r.result, r.err
	case <-ctx.Done():
		return command.WriteResult{}, fmt.Errorf("%w: %w", ErrIndeterminate, ctx.Err())
	}
}

// batchLoop takes an in-flight slot, then the next proposal and every proposal already queued
// behind it (up to the batch limits), proposes them as one raft entry, and hands the future to a
// waiter goroutine that frees the slot. While all slots are taken, proposals accumulate.
func (p *Raft) batchLoop() {
	defer p.wg.Done()
	var held *proposal // a proposal that did not fit in the previous batch
	for {
		select {
		case p.slots <- struct{}{}:
		case <-p.stop:
			p.failQueued(held)
			return
		}
		batch := make([]*proposal, 0, 8)
		n, size := 0, 0
		if held != nil {
			batch, n, size, held = append(batch, held), held.cells, held.bytes, nil
		} else {
			select {
			case pr := <-p.queue:
				batch, n, size = append(batch, pr), pr.cells, pr.bytes
			case <-p.stop:
				<-p.slots
				p.failQueued(nil)
				return
			}
		}
	drain:
		for n < p.cfg.MaxBatchCells && size < p.cfg.MaxBatchBytes {
			select {
			case pr := <-p.queue:
				if n+pr.cells > p.cfg.MaxBatchCells || size+pr.bytes > p.cfg.MaxBatchBytes {
					held = pr
					break drain
				}
				batch = append(batch, pr)
				n += pr.cells
				size += pr.bytes
			default:
				break drain
			}
		}
		p.propose(batch, n)
	}
}

// failQueued answers every proposal still queued with ErrClosed (none was proposed).
func (p *Raft) failQueued(held *proposal) {
	if held != nil {
		held.done <- proposalResult{err: ErrClosed}
	}
	for {
		select {
		case pr := <-p.queue:
			pr.done <- proposalResult{err: ErrClosed}
		default:
			return
		}
	}
}

func (p *Raft) propose(batch []*proposal, n int) {
	cmd := command.Append{CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Writes: make([]command.Write, len(batch))}
	for i, pr := range batch {
		cmd.Writes[i] = pr.write
	}
	release := func(err error) {
		for _, pr := range batch {
			pr.done <- proposalResult{err: err}
		}
		<-p.slots
	}
	data, err := command.Encode(&cmd)
	if err != nil {
		release(err)
		return
	}
	committed := p.metrics.proposed(n, len(batch))
	// A restore counting the partition's cells holds the gate: the batch waits, and lands
	// after the restored state (RestoreBackup).
	p.restoreGate.RLock()
	future := p.raft.Apply(data, p.cfg.EnqueueTimeout)
	p.restoreGate.RUnlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		results, err := fsm.ResultOf[[]command.WriteResult](future)
		if err == nil && len(results) != len(batch) {
			err = fmt.Errorf("%w: %d results for %d writes", fsm.ErrUnexpectedResponse, len(results), len(batch))
		}
		if err != nil {
			release(p.classify(err))
			return
		}
		committed()
		for i, pr := range batch {
			pr.done <- proposalResult{result: results[i]}
		}
		<-p.slots
	}()
}

// classify maps raft's apply errors to the partition's.
func (p *Raft) classify(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return p.notLeader() // rejected before it was appended
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", ErrUnavailable, err) // rejected before it was appended
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, fsm.ErrFailed):
		return fmt.Errorf("%w: %w", ErrIndeterminate, err)
	}
	return err
}

// ApplyGroup proposes one consumer-group command to the group's coordinator state, which this
// partition holds, and returns the coordinator's result. It must be called on the leader (else
// *NotLeaderError). It blocks until the entry is applied on this replica or ctx ends. Group
// commands are few (heartbeats, commits) and are not grouped with cell writes.
//
// Errors: *NotLeaderError and ErrUnavailable (nothing applied); ErrIndeterminate (ctx ended or
// leadership was lost after proposing: the command may be applied; every group command is safe
// to retry, commits are fenced and never move an offset backward); consumer.ErrBadCommand
// wrapped, for a command the coordinator refused (nothing changed).
func (p *Raft) ApplyGroup(ctx context.Context, group string, cmd consumer.Command) (consumer.Result, error) {
	var res consumer.Result
	err := p.applyOne(ctx, func(now time.Time) ([]byte, error) {
		return command.Encode(&command.Group{Group: group, CreatedAt: now, Cmd: cmd})
	}, func(f raft.ApplyFuture) (err error) {
		res, err = fsm.ResultOf[consumer.Result](f)
		return err
	}, consumer.ErrBadCommand)
	if err != nil {
		return consumer.Result{}, err // res may still be written by the abandoned wait
	}
	return res, nil
}

// ApplyIndex proposes one index command (an upsert of index entries into tables of this
// partition, a drop of an index table, or a catalog command on the catalog this partition
// holds) and returns its result. It must be called on the leader (else *NotLeaderError) and
// blocks until the entry is applied on this replica or ctx ends. The entry's CreatedAt is set
// here, from the leader's clock.
//
// Errors: *NotLeaderError and ErrUnavailable (nothing applied); ErrIndeterminate (maybe applied:
// every index command is safe to retry, upserts merge by ref key); indexes.ErrBadCommand or
// indexes.ErrNotFound wrapped, for a catalog command refused (nothing changed).
func (p *Raft) ApplyIndex(ctx context.Context, cmd command.Index) (command.IndexResult, error) {
	var res command.IndexResult
	err := p.applyOne(ctx, func(now time.Time) ([]byte, error) {
		cmd.CreatedAt = now
		if cmd.Op == command.IndexCatalog {
			cmd.Catalog.Now = now
		}
		return command.Encode(&cmd)
	}, func(f raft.ApplyFuture) (err error) {
		res, err = fsm.ResultOf[command.IndexResult](f)
		return err
	}, indexes.ErrBadCommand, indexes.ErrNotFound, indexes.ErrNotReady)
	if err != nil {
		return command.IndexResult{}, err // res may still be written by the abandoned wait
	}
	return res, nil
}

// applyOne proposes one entry built by encode (given the leader's clock) and reads its outcome
// with result. Errors matching one of refused are the state machine's answers and returned as
// they are; others are classified (ErrUnavailable, ErrIndeterminate).
func (p *Raft) applyOne(ctx context.Context, encode func(now time.Time) ([]byte, error), result func(raft.ApplyFuture) error, refused ...error) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if !p.IsLeader() {
		return p.notLeader()
	}
	data, err := encode(time.Now().UTC().Truncate(time.Microsecond))
	if err != nil {
		return err
	}
	timeout := p.cfg.EnqueueTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	future := p.raft.Apply(data, timeout)
	done := make(chan error, 1)
	go func() { done <- result(future) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrIndeterminate, ctx.Err())
	}
	if err != nil {
		for _, r := range refused {
			if errors.Is(err, r) {
				return err
			}
		}
		return p.classify(err)
	}
	return nil
}
