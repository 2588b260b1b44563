package examples

import (
	"context"
	"sync/atomic"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// Writes of concurrent handlers are sent together (CellBatcher): up to BatchSenders put_cells
// requests in flight, each of up to BatchMaxCells cells.
const (
	BatchSenders  = 2
	BatchMaxCells = 200
)

// CellBatcher coalesces the cell writes of concurrent handlers into put_cells requests. A raft
// commit costs about the same for one cell as for a hundred (see BENCHMARKS.md: put_cell at 64
// clients 1,250 cells/s, put_cells of 100 7,800), and each handler writes one cell at a time, so
// the writes of the shards being delivered at once are sent together: a free sender takes every
// write waiting, up to BatchMaxCells, and answers each from its own result. Safe for concurrent
// use; its senders stop when the context given to NewCellBatcher ends.
type CellBatcher struct {
	cl   *client.Client
	reqs chan *batchedWrite

	batches, cells atomic.Int64 // put_cells requests sent and their cells
}

type batchedWrite struct {
	w    client.CellWrite
	done chan batchedResult // buffered: the sender never blocks on it
}

type batchedResult struct {
	res wire.PutResult
	err error
}

// NewCellBatcher starts BatchSenders senders writing through cl until ctx ends.
func NewCellBatcher(ctx context.Context, cl *client.Client) *CellBatcher {
	b := &CellBatcher{cl: cl, reqs: make(chan *batchedWrite)}
	for i := 0; i < BatchSenders; i++ {
		go b.send(ctx)
	}
	return b
}

// Put writes one cell in the next batch and returns its result (Status created, exists or
// conflict) or the batch's error (see client.PutCells). It blocks until the batch is answered or
// ctx ends; a write whose caller gave up may still be applied, which is harmless for the
// idempotent writes of the triggers.
func (b *CellBatcher) Put(ctx context.Context, w client.CellWrite) (wire.PutResult, error) {
	bw := &batchedWrite{w: w, done: make(chan batchedResult, 1)}
	select {
	case b.reqs <- bw:
	case <-ctx.Done():
		return wire.PutResult{}, ctx.Err()
	}
	select {
	case r := <-bw.done:
		return r.res, r.err
	case <-ctx.Done():
		return wire.PutResult{}, ctx.Err()
	}
}

// Sent returns the put_cells requests sent so far and the cells they held.
func (b *CellBatcher) Sent() (requests, cells int64) { return b.batches.Load(), b.cells.Load() }

// PutPage writes ws in one put_cells request of its own, beside the batched writes (a page
// handler's cells, of one shard, so of one partition: one raft entry), and returns its results
// or its error as client.PutCells does. The request counts in Sent. It blocks until answered or
// ctx ends.
func (b *CellBatcher) PutPage(ctx context.Context, ws []client.CellWrite) ([]wire.PutResult, error) {
	b.batches.Add(1)
	b.cells.Add(int64(len(ws)))
	return b.cl.PutCells(ctx, ws)
}

func (b *CellBatcher) send(ctx context.Context) {
	for {
		var batch []*batchedWrite
		select {
		case bw := <-b.reqs:
			batch = append(batch, bw)
		case <-ctx.Done():
			return
		}
	drain:
		for len(batch) < BatchMaxCells {
			select {
			case bw := <-b.reqs:
				batch = append(batch, bw)
			default:
				break drain
			}
		}
		ws := make([]client.CellWrite, len(batch))
		for i, bw := range batch {
			ws[i] = bw.w
		}
		b.batches.Add(1)
		b.cells.Add(int64(len(ws)))
		res, err := b.cl.PutCells(ctx, ws)
		for i, bw := range batch {
			if err != nil {
				bw.done <- batchedResult{err: err}
			} else {
				bw.done <- batchedResult{res: res[i]}
			}
		}
	}
}
