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
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// Consistency of a read.
type Consistency string

// Read consistencies.
const (
	// Strong reads are linearizable: served by the partition leader after a read index.
	Strong Consistency = "strong"
	// Stale reads are served by any replica and may miss recent writes.
	Stale Consistency = "stale"
)

// GetKey asks for one cell: the exact key, or with Latest the highest ref key of the row key and
// column key (Key.RefKey ignored).
type GetKey struct {
	Key    cells.Key
	Latest bool
}

// ReadResult is the answer for one GetKey: the cell, or Found false.
type ReadResult struct {
	Cell  cells.Cell
	Found bool
}

// PutCells appends cells to datastore ds and returns one result per cell, in order. Cells are
// grouped by partition; each partition's group is one atomic raft entry, but the request as a
// whole is not atomic across partitions. Blocks until every group is applied on its leader, or
// ctx ends.
//
// Errors: ErrUnknownDatastore; partition.ErrUnavailable when nothing was written;
// partition.ErrIndeterminate when some or all cells may have been written (including a request
// where some partitions answered and others did not). Retrying is always safe.
func (n *Node) PutCells(ctx context.Context, ds string, cs []cells.Cell) ([]cells.Result, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	groups := map[*route][]int{}
	var order []*route
	for i, c := range cs {
		r := d.routeOf(cells.ShardOf(c.RowKey, d.spec.Shards))
		if _, ok := groups[r]; !ok {
			order = append(order, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([]cells.Result, len(cs))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for gi, r := range order {
		idx := groups[r]
		cmd := make([]fsm.CommandCell, len(idx))
		for j, i := range idx {
			cmd[j] = fsm.CommandCell{Shard: cells.ShardOf(cs[i].RowKey, d.spec.Shards), Key: cs[i].Key, Body: cs[i].Body}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.putPartition(ctx, ds, r, cmd)
			if err != nil {
				errs[gi] = err
				return
			}
			for j, i := range idx {
				out[i] = res[j]
			}
		}()
	}
	wg.Wait()
	return out, combineWriteErrors(errs)
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
		if !errors.Is(err, partition.ErrUnavailable) && !errors.Is(err, partition.ErrIndeterminate) {
			return err
		}
		if errors.Is(err, partition.ErrUnavailable) {
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
	case errors.Is(first, partition.ErrIndeterminate):
		return first
	}
	return fmt.Errorf("%w: part of the request was applied: %v", partition.ErrIndeterminate, first)
}

func (n *Node) putPartition(ctx context.Context, ds string, r *route, cmd []fsm.CommandCell) ([]cells.Result, error) {
	var res []cells.Result
	err := n.callLeader(ctx, r, true,
		func(ctx context.Context) (err error) {
			if r.async != nil {
				res, err = r.async.Put(ctx, cmd)
				return err
			}
			p, err := r.mustLocal()
			if err != nil {
				return err
			}
			res, err = p.Put(ctx, cmd)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) (err error) {
			res, err = n.forwardPut(ctx, target, ds, r.spec.ID, cmd)
			return err
		})
	return res, err
}

// callLeader runs an operation on r's leader (locally or forwarded), following leader hints and
// retrying with backoff while no leader answers, until it succeeds, fails definitively, or ctx
// ends. For writes, once an attempt may have applied, a final failure is ErrIndeterminate.
func (n *Node) callLeader(ctx context.Context, r *route, write bool,
	local func(context.Context) error, remote func(context.Context, topology.NodeSpec) error) error {
	if r.async != nil {
		return local(ctx) // every node writes the master itself; the partition knows the outcome
	}
	backoff := n.cfg.RetryBackoff
	maybeApplied := false
	var lastErr error
	for hops := 0; ; {
		target := n.leader(r)
		var err error
		switch {
		case target == "":
			err = fmt.Errorf("%w: no leader known", partition.ErrUnavailable)
		case target == n.cfg.NodeID && r.local() != nil:
			err = local(ctx)
		default:
			spec, ok := n.nodeSpec(target)
			if !ok {
				r.setHint("")
				err = fmt.Errorf("%w: no address known for leader %q", partition.ErrUnavailable, target)
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
		case errors.Is(err, partition.ErrIndeterminate):
			if write {
				maybeApplied = true
			}
			r.setHint("")
		case errors.Is(err, partition.ErrUnavailable):
			if target != n.cfg.NodeID {
				r.setHint("")
			}
		default:
			if maybeApplied {
				// An earlier attempt may have applied the write: a later failure (the local
				// replica closing, say) cannot turn that into "not applied".
				return fmt.Errorf("%w: %v", partition.ErrIndeterminate, err)
			}
			return err
		}
		hops = 0
		if ctx.Err() != nil {
			break
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		if ctx.Err() != nil {
			break
		}
		backoff = min(backoff*2, n.cfg.RetryBackoffMax)
	}
	if maybeApplied || errors.Is(lastErr, partition.ErrIndeterminate) && write {
		return fmt.Errorf("%w: %v", partition.ErrIndeterminate, lastErr)
	}
	if errors.Is(lastErr, partition.ErrUnavailable) {
		return lastErr
	}
	return fmt.Errorf("%w: %v", partition.ErrUnavailable, lastErr)
}

// readRequest is one read against one partition.
type readRequest struct {
	Datastore   string
	Partition   int
	Consistency Consistency
	Op          string // "get", "row", "log", "group" or "groups"
	Keys        []GetKey
	RowKey      uuid.UUID
	Log         logRequest
	Group       string
	Index       *indexRead
}

type readResponse struct {
	Results []ReadResult
	Cells   []cells.Cell
	Pages   []LogPage
	Status  *consumer.Status
	Groups  []string
	Entries []packedEntry
	Catalog []byte
	Stats   IndexStats
}

// GetCells reads keys from datastore ds with consistency c and returns one result per key, in
// order. Errors: ErrUnknownDatastore, partition.ErrUnavailable.
func (n *Node) GetCells(ctx context.Context, ds string, keys []GetKey, c Consistency) ([]ReadResult, error) {
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
		req := readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Op: "get", Keys: make([]GetKey, len(idx))}
		for j, i := range idx {
			req.Keys[j] = keys[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.read(ctx, d, r, req)
			if err == nil && len(resp.Results) != len(idx) {
				err = fmt.Errorf("cluster: read answered %d results for %d keys", len(resp.Results), len(idx))
			}
			if err != nil {
				errs[gi] = err
				return
			}
			for j, i := range idx {
				out[i] = resp.Results[j]
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// GetRow returns the latest cell of every column of rowKey, by column key.
func (n *Node) GetRow(ctx context.Context, ds string, rowKey uuid.UUID, c Consistency) ([]cells.Cell, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	r := d.routeOf(cells.ShardOf(rowKey, d.spec.Shards))
	resp, err := n.read(ctx, d, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Op: "row", RowKey: rowKey})
	return resp.Cells, err
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

func (n *Node) read(ctx context.Context, d *datastore, r *route, req readRequest) (readResponse, error) {
	var resp readResponse
	if r.async != nil {
		err := r.async.Read(ctx, req.Consistency != Stale, func(st *storage.PartitionStore) (err error) {
			resp, err = n.readFrom(ctx, r, st, req)
			return err
		})
		return resp, err
	}
	if req.Consistency == Stale {
		if r.local() != nil {
			return n.readLocal(ctx, r, req)
		}
		return n.readAnyReplica(ctx, r, req)
	}
	err := n.callLeader(ctx, r, false,
		func(ctx context.Context) (err error) {
			resp, err = n.readLocal(ctx, r, req)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) (err error) {
			resp, err = n.forwardRead(ctx, target, req)
			return err
		})
	return resp, err
}

// readAnyReplica forwards a stale read to the replicas in turn until one answers.
func (n *Node) readAnyReplica(ctx context.Context, r *route, req readRequest) (readResponse, error) {
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
	return readResponse{}, fmt.Errorf("%w: no replica answered: %v", partition.ErrUnavailable, lastErr)
}

// readLocal serves req from this node's replica, after a read index for strong reads.
func (n *Node) readLocal(ctx context.Context, r *route, req readRequest) (readResponse, error) {
	p := r.local()
	if p == nil {
		return readResponse{}, &partition.NotLeaderError{}
	}
	if err := p.FSM().Failed(); err != nil {
		return readResponse{}, fmt.Errorf("%w: replica stopped: %v", partition.ErrUnavailable, err)
	}
	if req.Consistency != Stale {
		if err := p.ReadIndex(ctx); err != nil {
			return readResponse{}, err
		}
	}
	return n.readFrom(ctx, r, p.Store(), req)
}

// readFrom serves req from st, the partition's store on this node (raft) or on a member of its
// storage cluster (async).
func (n *Node) readFrom(ctx context.Context, r *route, st *storage.PartitionStore, req readRequest) (readResponse, error) {
	shards := r.spec.Shards()
	var resp readResponse
	switch req.Op {
	case "get":
		resp.Results = make([]ReadResult, len(req.Keys))
		for i, k := range req.Keys {
			shard := cells.ShardOf(k.Key.RowKey, n.shardCount(req.Datastore))
			if !shards.Contains(shard) {
				return readResponse{}, fmt.Errorf("%w: key %s is not in partition %d", ErrBadShard, k.Key, r.spec.ID)
			}
			var c cells.Cell
			var err error
			if k.Latest {
				c, err = st.GetLatest(ctx, shard, k.Key.RowKey, k.Key.ColumnKey)
			} else {
				c, err = st.GetCell(ctx, shard, k.Key)
			}
			switch {
			case err == nil:
				resp.Results[i] = ReadResult{Cell: c, Found: true}
			case errors.Is(err, storage.ErrNotFound):
			default:
				return readResponse{}, fmt.Errorf("cluster: read %s: %w", k.Key, err)
			}
		}
	case "row":
		shard := cells.ShardOf(req.RowKey, n.shardCount(req.Datastore))
		cs, err := st.GetRow(ctx, shard, req.RowKey)
		if err != nil {
			return readResponse{}, fmt.Errorf("cluster: read row %s: %w", req.RowKey, err)
		}
		resp.Cells = cs
	case "log":
		pages, err := n.readLog(ctx, r, st, req.Log)
		if err != nil {
			return readResponse{}, err
		}
		resp.Pages = pages
	case "group", "groups":
		return readGroup(ctx, st, req)
	case "catalog", "first", "index", "indexstats":
		return n.readIndex(ctx, r, st, req)
	default:
		return readResponse{}, fmt.Errorf("cluster: unknown read op %q", req.Op)
	}
	return resp, nil
}

func (n *Node) shardCount(ds string) int {
	return n.datastores[ds].spec.Shards
}
