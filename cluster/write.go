package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
)

// ErrCrossPartition: an atomic write (a transaction or a conditional write) names rows of more
// than one partition; nothing was written. The message names the rows and their partitions.
var ErrCrossPartition = errors.New("cluster: rows of more than one partition")

// ErrBadWrite: a write request the node refuses before sending it (too many conditions, an
// idempotency key too long); nothing was written.
var ErrBadWrite = errors.New("cluster: bad write request")

// Limits of a write request that the node enforces itself (the API enforces the body and batch
// limits before).
const (
	// MaxConditions bounds the conditions of one transaction.
	MaxConditions = 100
	// MaxIdempotencyKeyBytes bounds a client's idempotency key.
	MaxIdempotencyKeyBytes = 128
)

// idempotencyNamespace is the UUID namespace of the request IDs made from clients' keys.
var idempotencyNamespace = uuid.MustParse("9d6c1f3a-5f0e-4c1e-9a57-2f0c3b6b8e41")

// Condition is one compare part of a transaction: the column's latest ref key must be
// LatestRefKey, or, with None, the column must have no cell.
type Condition struct {
	RowKey       uuid.UUID
	ColumnKey    string
	LatestRefKey int64
	None         bool
}

// WriteRequest is one client write: cells to append and what the client asks of them.
//
// With no Conditions and Atomic false the cells may span partitions; each partition applies
// its share as one write (all of a partition's cells in one raft entry), and the request as a
// whole is not atomic. With Conditions or Atomic every row (of cells and conditions) must be
// in one partition (else ErrCrossPartition), and the partition applies the request all or
// nothing, linearizably, when every condition holds at apply time.
//
// IdempotencyKey names the request (1 to MaxIdempotencyKeyBytes bytes; "" lets the node make
// one for its own retries): a request with a key that a partition applied within
// command.RequestWindow is answered with its first outcome.
//
// Origin, for a request carrying cells from another cluster (replication between clusters),
// names that cluster: every cell the request creates stores it (cells.Cell.Origin), so that
// this cluster does not send them on. "" for a client's own write.
type WriteRequest struct {
	Cells          []cells.Cell
	Conditions     []Condition
	Atomic         bool
	IdempotencyKey string
	Origin         string
}

// WriteResponse is the outcome of a WriteRequest: the outcome of its writes as one
// command.WriteResult (one result per cell of the request when it was applied, or why it was
// refused: Failed, Conflict, Violation, KeyReused; nothing written; Replayed when a partition
// answered a recorded outcome) and Partition, the partition of an atomic request (-1
// otherwise).
type WriteResponse struct {
	command.WriteResult
	Partition int
}

// requestID returns the ID under which every partition records its share of a request of
// datastore ds: the client's key itself when it is a UUID (the Go client sends time-ordered
// UUIDv7 keys), a UUIDv5 of the datastore and key otherwise, or, with no key, a new UUIDv7
// (the same for every retry of this call). Time-ordered IDs land at the end of the requests
// table's primary key, so recording them dirties few pages. The ID names no partition: a
// split copies a record into both halves and a merge joins the records of one ID, and a retry
// finds its record wherever its shards went (command.Record.Answer).
func requestID(ds string, key string) uuid.UUID {
	if key == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return uuid.New()
		}
		return id
	}
	if len(key) == 36 {
		if id, err := uuid.Parse(key); err == nil {
			return id
		}
	}
	return uuid.NewSHA1(idempotencyNamespace, []byte(ds+"\x00"+key))
}

// Write applies req to datastore ds (see WriteRequest). It blocks until every partition's share
// is applied on its leader, or ctx ends.
//
// Errors: ErrUnknownDatastore; ErrCrossPartition; ErrBadWrite for a request the node
// refuses before sending (too many conditions, a key too long); partition.ErrUnavailable when
// nothing was written; partition.ErrIndeterminate when some or all of it may have been
// applied. A refusal by the partition (a condition, a conflict of an atomic request, a schema,
// a reused key) is not an error: see WriteResponse.
func (n *Node) Write(ctx context.Context, ds string, req WriteRequest) (WriteResponse, error) {
	return n.write(ctx, ds, req, 1)
}

// write is Write's attempt-th try: a share refused as out of range goes again (rerouted).
func (n *Node) write(ctx context.Context, ds string, req WriteRequest, attempt int) (WriteResponse, error) {
	gen := n.catalogGeneration() // before the routes are read: a refusal waits for a newer one
	d, err := n.datastore(ds)
	if err != nil {
		return WriteResponse{}, err
	}
	if len(req.IdempotencyKey) > MaxIdempotencyKeyBytes {
		return WriteResponse{}, fmt.Errorf("%w: idempotency key of %d bytes, at most %d", ErrBadWrite, len(req.IdempotencyKey), MaxIdempotencyKeyBytes)
	}
	if len(req.Conditions) > MaxConditions {
		return WriteResponse{}, fmt.Errorf("%w: %d conditions, at most %d", ErrBadWrite, len(req.Conditions), MaxConditions)
	}
	if req.Origin != "" {
		if err := cells.ValidateClusterName("origin", req.Origin); err != nil {
			return WriteResponse{}, fmt.Errorf("%w: %w", ErrBadWrite, err)
		}
		if req.Origin == n.cfg.ClusterName {
			return WriteResponse{}, fmt.Errorf("%w: origin: %q is this cluster's own name", ErrBadWrite, req.Origin)
		}
	}
	// A write replicated from another cluster was checked there (see fsm's validateWrite).
	if req.Origin == "" {
		if v := n.checkSchemas(ctx, d, req.Cells); v != nil {
			return WriteResponse{WriteResult: command.WriteResult{Violation: v}, Partition: -1}, nil // nothing sent: nothing written
		}
	}
	if len(req.Conditions) > 0 || req.Atomic {
		// Refused whole as out of range (a split moved a row's shard), it applied nothing:
		// it goes again by the newer catalog.
		return rerouted(ctx, n, func() (WriteResponse, error) {
			d, err := n.datastore(ds)
			if err != nil {
				return WriteResponse{}, err
			}
			return n.writeAtomic(ctx, d, req)
		})
	}
	groups := map[*route][]int{}
	var order []*route
	fellBack := map[*route]bool{} // a share holding shards of a split child sent to its parent
	for i, c := range req.Cells {
		shard := cells.ShardOf(c.RowKey, d.spec.Shards)
		r, fb := n.splitFallback(d, d.routeOf(shard), shard)
		if _, ok := groups[r]; !ok {
			order = append(order, r)
		}
		groups[r] = append(groups[r], i)
		fellBack[r] = fellBack[r] || fb
	}
	out := WriteResponse{WriteResult: command.WriteResult{Cells: make([]cells.Result, len(req.Cells))}, Partition: -1}
	results := make([]command.WriteResult, len(order))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	began := time.Now()
	id := requestID(ds, req.IdempotencyKey) // every partition records its share under it
	for gi, r := range order {
		idx := groups[r]
		w := command.Write{ID: id, Cells: make([]command.Cell, len(idx)), Origin: req.Origin}
		for j, i := range idx {
			c := req.Cells[i]
			w.Cells[j] = command.Cell{Shard: cells.ShardOf(c.RowKey, d.spec.Shards), Key: c.Key, Body: c.Body}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[gi], errs[gi] = n.putPartition(ctx, ds, r, w)
		}()
	}
	wg.Wait()
	for gi, r := range order {
		if errs[gi] == nil || !errors.Is(errs[gi], command.ErrShardOutOfRange) || attempt >= rerouteAttempts {
			continue
		}
		// The partition split or merged and refused this share, applying none of it: the
		// share goes again, by the newer catalog, in the order of its cells. A share sent to
		// a split's parent (splitFallback) goes at once: the parent applied the split, so its
		// children take their shards from now on.
		sub := WriteRequest{IdempotencyKey: req.IdempotencyKey, Origin: req.Origin, Cells: make([]cells.Cell, len(groups[r]))}
		shards := make([]int, len(groups[r]))
		for j, i := range groups[r] {
			sub.Cells[j] = req.Cells[i]
			shards[j] = cells.ShardOf(req.Cells[i].RowKey, d.spec.Shards)
		}
		if fellBack[r] {
			settleSplitChildren(d, r.spec.ID, shards)
		} else if !n.awaitReroute(ctx, gen, attempt) {
			continue
		}
		refused := time.Now()
		resp, err := n.write(ctx, ds, sub, attempt+1)
		results[gi], errs[gi] = resp.WriteResult, err
		if fellBack[r] {
			n.log.Debug("a moved shard's write sent to the split's new partition", "datastore", ds, "parent", r.spec.ID,
				"parent_ms", ms(refused.Sub(began)), "new_partition_ms", ms(time.Since(refused)), "error", err)
		}
	}
	if err := combineWriteErrors(errs); err != nil {
		return WriteResponse{}, err
	}
	for gi, r := range order {
		res := results[gi]
		out.Replayed = out.Replayed || res.Replayed
		if !res.Applied() {
			// A share refused by its partition (a reused key, a schema): report it; other
			// partitions' shares may be applied.
			out.KeyReused = out.KeyReused || res.KeyReused
			if res.Violation != nil && (out.Violation == nil || out.Violation.Cell < 0) {
				// A replayed share may report a violation without a cell (-1): the violating
				// cell went to another partition, which names it.
				d.schemas.invalidate(res.Violation)
				v := *res.Violation
				if v.Cell >= 0 && v.Cell < len(groups[r]) {
					v.Cell = groups[r][v.Cell]
				} else {
					v.Cell = -1
				}
				out.Violation = &v
			}
			continue
		}
		for j, i := range groups[r] {
			out.Cells[i] = res.Cells[j]
		}
	}
	return out, nil
}

// writeAtomic applies an atomic request on its one partition.
func (n *Node) writeAtomic(ctx context.Context, d *datastore, req WriteRequest) (WriteResponse, error) {
	type where struct {
		row string
		pid int
	}
	var (
		r     *route
		seen  []where
		cross bool
	)
	note := func(row uuid.UUID) int {
		shard := cells.ShardOf(row, d.spec.Shards)
		rr := d.routeOf(shard)
		if r == nil {
			r = rr
		} else if rr != r {
			cross = true
		}
		seen = append(seen, where{row.String(), rr.spec.ID})
		return shard
	}
	w := command.Write{Atomic: true, Cells: make([]command.Cell, len(req.Cells)), Origin: req.Origin}
	for i, c := range req.Cells {
		w.Cells[i] = command.Cell{Shard: note(c.RowKey), Key: c.Key, Body: c.Body}
	}
	for _, c := range req.Conditions {
		w.Conditions = append(w.Conditions, command.Condition{Shard: note(c.RowKey), RowKey: c.RowKey, ColumnKey: c.ColumnKey,
			LatestRefKey: c.LatestRefKey, None: c.None})
	}
	if r == nil {
		return WriteResponse{Partition: -1}, nil
	}
	if cross {
		byPart := map[int][]string{}
		for _, s := range seen {
			if !slices.Contains(byPart[s.pid], s.row) {
				byPart[s.pid] = append(byPart[s.pid], s.row)
			}
		}
		pids := make([]int, 0, len(byPart))
		for p := range byPart {
			pids = append(pids, p)
		}
		sort.Ints(pids)
		parts := make([]string, len(pids))
		for i, p := range pids {
			parts[i] = fmt.Sprintf("partition %d: %s", p, strings.Join(byPart[p], ", "))
		}
		return WriteResponse{}, fmt.Errorf("%w: %s", ErrCrossPartition, strings.Join(parts, "; "))
	}
	w.ID = requestID(d.spec.Name, req.IdempotencyKey)
	if len(w.Cells) == 0 {
		return WriteResponse{Partition: r.spec.ID}, nil
	}
	to, fellBack := n.splitFallback(d, r, w.Cells[0].Shard)
	began := time.Now()
	res, err := n.putPartition(ctx, d.spec.Name, to, w)
	if fellBack && err != nil && errors.Is(err, command.ErrShardOutOfRange) {
		// The split's parent applied the split and refused the request, applying nothing: r
		// takes its shards now.
		refused := time.Now()
		r.settled.Store(true)
		to = r
		res, err = n.putPartition(ctx, d.spec.Name, r, w)
		n.log.Debug("a moved shard's write sent to the split's new partition", "datastore", d.spec.Name, "partition", r.spec.ID,
			"parent_ms", ms(refused.Sub(began)), "new_partition_ms", ms(time.Since(refused)), "error", err)
	}
	if err != nil {
		return WriteResponse{}, err
	}
	if res.Violation != nil {
		d.schemas.invalidate(res.Violation)
	}
	return WriteResponse{WriteResult: res, Partition: to.spec.ID}, nil
}
