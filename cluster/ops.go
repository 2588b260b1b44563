package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
)

// GetKey asks for one cell: the exact key, or with Latest the highest ref key of the row key and
// column key (Key.RefKey ignored).
type GetKey struct {
	Key    cells.Key
	Latest bool
}

// ReadResult is the answer for one GetKey: the cell, or Found false.
type ReadResult = partition.GetResult

// PutCells appends cells to datastore ds and returns one result per cell, in order. Cells are
// grouped by partition; each partition's group is one atomic raft entry, but the request as a
// whole is not atomic across partitions. Blocks until every group is applied on its leader, or
// ctx ends.
//
// Errors: ErrUnknownDatastore; partition.ErrUnavailable when nothing was written;
// partition.ErrIndeterminate when some or all cells may have been written (including a request
// where some partitions answered and others did not); *SchemaViolationError when a cell
// violates its column's schema. Retrying is always safe.
func (n *Node) PutCells(ctx context.Context, ds string, cs []cells.Cell) ([]cells.Result, error) {
	res, err := n.Write(ctx, ds, WriteRequest{Cells: cs})
	if err != nil {
		return nil, err
	}
	if res.Violation != nil {
		return nil, &SchemaViolationError{Violation: *res.Violation, Partial: res.Partition == -1 && partlyApplied(res)}
	}
	return res.Cells, nil
}

// combineWriteErrors: nil if every group succeeded; ErrUnavailable only if every group failed
// with nothing written; otherwise indeterminate (part of the request may be stored). A
// definitive error (bad request) wins.
func combineWriteErrors(errs []error) error {
	var failed, unavailable int
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		failed++
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrIndeterminate) {
			return err
		}
		if errors.Is(err, ErrUnavailable) {
			unavailable++
		}
		if first == nil {
			first = err
		}
	}
	switch {
	case failed == 0:
		return nil
	case unavailable == len(errs):
		return first
	case errors.Is(first, ErrIndeterminate):
		return first
	}
	return asClass(ErrIndeterminate, "part of the request was applied", first)
}

// errorClasses are the partition errors that say what happened to a request: not applied
// (ErrUnavailable, a not-leader answer) or maybe applied (ErrIndeterminate). An error the node
// returns is of one class at most.
var errorClasses = []error{ErrUnavailable, ErrIndeterminate, partition.ErrNotLeader}

// ofOtherClass reports whether err is of one of errorClasses other than class.
func ofOtherClass(err, class error) bool {
	for _, c := range errorClasses {
		if c != class && errors.Is(err, c) {
			return true
		}
	}
	return false
}

// asClass returns an error of class (ErrUnavailable or ErrIndeterminate) saying msg, caused by
// cause. cause is wrapped (errors.Is finds its context or store error) unless it is of another
// class (an unavailable answer after an indeterminate one, a not-leader answer, a forwarded
// read lost on its way): then its text alone is kept, so that the error is of one class and
// the API answers it as such.
func asClass(class error, msg string, cause error) error {
	if msg != "" {
		msg += ": "
	}
	if ofOtherClass(cause, class) {
		return fmt.Errorf("%w: %s%s", class, msg, cause)
	}
	return fmt.Errorf("%w: %s%w", class, msg, cause)
}

// putPartition applies w on r's leader (locally or forwarded), retried as callLeader does: a
// retry carries w's ID, so the partition answers a write it already applied with its outcome.
func (n *Node) putPartition(ctx context.Context, ds string, r *route, w command.Write) (command.WriteResult, error) {
	return callLeaderOp(ctx, n, putOp, ds, r, &command.Append{Writes: []command.Write{w}})
}

// callLeader runs an operation on r's leader (locally or forwarded), following leader hints and
// retrying with backoff while no leader answers, until it succeeds, fails definitively, or ctx
// ends. For writes, once an attempt may have applied, a final failure is ErrIndeterminate. A
// partition served here whose leader is not elected (async) answers for itself: its answer is
// returned as it is, with no retry.
func (n *Node) callLeader(ctx context.Context, r *route, write bool,
	local func(context.Context) error, remote func(context.Context, topology.NodeSpec) error) error {
	backoff := n.cfg.RetryBackoff
	maybeApplied := false
	var lastErr error
	for hops := 0; ; {
		target := n.leader(r)
		p := r.local()
		var err error
		switch {
		case target == "":
			err = fmt.Errorf("%w: no leader known", ErrUnavailable)
		case target == n.cfg.NodeID && p != nil:
			err = local(ctx)
			if !p.Elected() {
				return err // nothing to follow or wait for
			}
		default:
			spec, ok := n.nodeSpec(target)
			if !ok {
				r.setHint("")
				err = fmt.Errorf("%w: no address known for leader %q", ErrUnavailable, target)
				break
			}
			err = remote(ctx, spec)
		}
		if err == nil {
			return nil
		}
		lastErr = err
		var nl *partition.NotLeaderError
		switch {
		case errors.As(err, &nl):
			var h *notLeaderHint
			if errors.As(err, &h) && r.local() == nil {
				r.setReplicas(h.replicas)
			}
			if nl.LeaderID != "" && nl.LeaderID != target && hops < 3 {
				r.setHint(nl.LeaderID)
				hops++
				continue // follow the hint at once
			}
			r.setHint("")
		case errors.Is(err, ErrIndeterminate):
			if write {
				maybeApplied = true
			}
			r.setHint("")
		case errors.Is(err, ErrUnavailable):
			if target != n.cfg.NodeID {
				r.setHint("")
				wakeLocal(r)
			}
		default:
			if maybeApplied {
				// An earlier attempt may have applied the write: a later failure (the local
				// replica closing, say) cannot turn that into "not applied".
				return asClass(ErrIndeterminate, "", err)
			}
			return err
		}
		hops = 0
		if ctx.Err() != nil {
			break
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		switch {
		case target == "" && r.local() != nil:
			// No leader yet (a new group, an election): the local replica learns of one as soon
			// as it is elected, so retry then rather than at the end of the backoff.
			waitLeader(ctx, n, r, wait)
		case r.spec.Parent != nil && hosts(r.spec, n.cfg.NodeID) && !localLeaderKnown(r):
			// A split's new partition whose replica here is not open yet (it opens once this
			// node's replica of the parent applied the split) or knows no leader yet: retry as
			// soon as it knows the group's leader, rather than at the end of a backoff that
			// doubles while the split runs.
			pollUntil(ctx, wait, func() bool { return localLeaderKnown(r) })
		default:
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		backoff = min(backoff*2, n.cfg.RetryBackoffMax)
	}
	// The loop ends only when ctx does: the error carries ctx's error too.
	class := ErrUnavailable
	if maybeApplied || errors.Is(lastErr, ErrIndeterminate) && write {
		class = ErrIndeterminate
	}
	err := lastErr
	if !errors.Is(err, class) || ofOtherClass(err, class) {
		err = asClass(class, "", err)
	}
	if ctxErr := ctx.Err(); !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	}
	return err
}

// readRequest is one read against one partition, as forwarded between nodes.
type readRequest struct {
	Datastore   string
	Partition   int
	Consistency Consistency
	Read        partition.ReadRequest
}

// GetCells reads keys from datastore ds with consistency c and returns one result per key, in
// order. The keys of one partition are read in one snapshot of it (partition.GetResult: its
// Partition and AppliedIndex are set); the partitions are read concurrently, each at its own
// index, so keys of two partitions are not read at one point in time. Errors:
// ErrUnknownDatastore, partition.ErrUnavailable.
func (n *Node) GetCells(ctx context.Context, ds string, keys []GetKey, c Consistency) ([]ReadResult, error) {
	return rerouted(ctx, n, func() ([]ReadResult, error) { return n.getCells(ctx, ds, keys, c) })
}

func (n *Node) getCells(ctx context.Context, ds string, keys []GetKey, c Consistency) ([]ReadResult, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	groups := map[*route][]int{}
	var order []*route
	for i, k := range keys {
		r := d.routeOf(cells.ShardOf(k.Key.RowKey, d.spec.Shards))
		if _, ok := groups[r]; !ok {
			order = append(order, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([]ReadResult, len(keys))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for gi, r := range order {
		idx := groups[r]
		get := &partition.GetRead{Keys: make([]partition.GetKey, len(idx))}
		for j, i := range idx {
			get.Keys[j] = partition.GetKey{Shard: cells.ShardOf(keys[i].Key.RowKey, d.spec.Shards), Key: keys[i].Key, Latest: keys[i].Latest}
		}
		req := readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Read: partition.ReadRequest{Get: get}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.read(ctx, r, req)
			if err == nil && len(resp.Get) != len(idx) {
				err = fmt.Errorf("cluster: read answered %d results for %d keys", len(resp.Get), len(idx))
			}
			if err != nil {
				errs[gi] = err
				return
			}
			for j, i := range idx {
				out[i] = resp.Get[j]
				out[i].Partition = r.spec.ID
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// GetRow returns the latest cell of every column of rowKey, by column key.
func (n *Node) GetRow(ctx context.Context, ds string, rowKey uuid.UUID, c Consistency) ([]cells.Cell, error) {
	return n.readRow(ctx, ds, rowKey, c, func(shard int) partition.ReadRequest {
		return partition.ReadRequest{Row: &partition.RowRead{Shard: shard, RowKey: rowKey}}
	})
}

// readRow runs the read req(shard of rowKey) on the partition holding rowKey and returns its
// cells.
func (n *Node) readRow(ctx context.Context, ds string, rowKey uuid.UUID, c Consistency, req func(shard int) partition.ReadRequest) ([]cells.Cell, error) {
	return rerouted(ctx, n, func() ([]cells.Cell, error) {
		d, err := n.datastore(ds)
		if err != nil {
			return nil, err
		}
		shard := cells.ShardOf(rowKey, d.spec.Shards)
		r := d.routeOf(shard)
		resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Read: req(shard)})
		return resp.Cells, err
	})
}

// GetVersions returns the versions of column col of rowKey (partition.VersionsRead): at most
// limit (positive) cells in ref key order, ascending from ref key from (inclusive; nil: the
// lowest) or, with desc, descending from from (inclusive; nil: the highest). Consistency and
// errors as GetRow.
func (n *Node) GetVersions(ctx context.Context, ds string, rowKey uuid.UUID, col string, from *int64, limit int, desc bool, c Consistency) ([]cells.Cell, error) {
	return n.readRow(ctx, ds, rowKey, c, func(shard int) partition.ReadRequest {
		return partition.ReadRequest{Versions: &partition.VersionsRead{Shard: shard, RowKey: rowKey, ColumnKey: col, From: from, Limit: limit, Desc: desc}}
	})
}

// ScanShard returns up to limit cells of shard with added_id > after, in added_id order: a
// ReadLogs of one shard without filter or wait. Errors: ErrUnknownDatastore, ErrBadShard,
// partition.ErrUnavailable.
func (n *Node) ScanShard(ctx context.Context, ds string, shard int, after int64, limit int, c Consistency) ([]cells.Cell, error) {
	pages, err := n.ReadLogs(ctx, ds, LogRead{Shards: []ShardLocation{{Shard: shard, Location: after}}, Limit: limit, Consistency: c})
	if err != nil {
		return nil, err
	}
	return pages[0].Cells, nil
}

// read runs req on r's partition: a stale read on the partition this node serves, or else on
// any replica; a strong read on the leader.
func (n *Node) read(ctx context.Context, r *route, req readRequest) (partition.ReadResult, error) {
	if req.Consistency == Stale {
		if p := r.local(); p != nil {
			return p.Read(ctx, Stale, req.Read)
		}
		return n.readAnyReplica(ctx, r, req)
	}
	if _, bounded := req.Consistency.MaxStaleness(); bounded {
		// This node's replica when it is within the bound, else another that is (the leader
		// always is).
		if p := r.local(); p != nil {
			if resp, err := p.Read(ctx, req.Consistency, req.Read); err == nil || !errors.Is(err, partition.ErrTooStale) {
				return resp, err
			}
		}
		return n.readAnyReplica(ctx, r, req)
	}
	if resp, ok := n.followerRead(ctx, r, req); ok {
		return resp, nil
	}
	var resp partition.ReadResult
	err := n.callLeader(ctx, r, false,
		func(ctx context.Context) (err error) {
			p, err := r.mustLocal()
			if err != nil {
				return err
			}
			resp, err = p.Read(ctx, req.Consistency, req.Read)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) (err error) {
			resp, err = n.forwardRead(ctx, target, req)
			return err
		})
	return resp, err
}

// readAnyReplica forwards a stale read to the replicas in turn until one answers.
func (n *Node) readAnyReplica(ctx context.Context, r *route, req readRequest) (partition.ReadResult, error) {
	var lastErr error
	r.mu.Lock()
	cands := n.candidatesLocked(r)
	r.mu.Unlock()
	for i := 0; i < 2*len(cands) && ctx.Err() == nil; i++ {
		r.mu.Lock()
		id := cands[r.next%len(cands)]
		r.next++
		r.mu.Unlock()
		spec, ok := n.nodeSpec(id)
		if !ok {
			lastErr = fmt.Errorf("no address known for %q", id)
			continue
		}
		resp, err := n.forwardRead(ctx, spec, req)
		if err == nil {
			return resp, nil
		}
		var h *notLeaderHint
		if errors.As(err, &h) {
			r.setReplicas(h.replicas)
		}
		lastErr = err
	}
	switch {
	case lastErr == nil && ctx.Err() != nil:
		lastErr = ctx.Err()
	case lastErr == nil:
		lastErr = errors.New("no replica known")
	}
	return partition.ReadResult{}, asClass(ErrUnavailable, "no replica answered", lastErr)
}

// leaderPoll is how often pollUntil checks its condition.
const leaderPoll = 5 * time.Millisecond

// waitLeader waits up to wait, or until ctx ends, for r (hosted here) to know a leader.
func waitLeader(ctx context.Context, n *Node, r *route, wait time.Duration) {
	pollUntil(ctx, wait, func() bool { return n.leader(r) != "" })
}

// localLeaderKnown reports whether r has a replica here that knows a leader.
func localLeaderKnown(r *route) bool {
	p := r.local()
	if p == nil {
		return false
	}
	id, _ := p.Leader()
	return id != ""
}

// pollUntil checks done every leaderPoll until it holds (true), wait has passed or ctx ends.
func pollUntil(ctx context.Context, wait time.Duration, done func() bool) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		select {
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		case <-tick.C:
			if done() {
				return true
			}
		}
	}
}
