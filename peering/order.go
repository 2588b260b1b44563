package peering

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
)

// Ordered pages in flight. A stream may have up to Config.Triggers.PipelineDepth pages of a
// shard on their way to the peer at once (triggers.Config.PipelineDepth): a page no longer
// waits for the round trip of the one before it. Their order at the peer is kept by chaining
// the requests (wire.PutOrder): each page's put_cells names the shard as its stream, the
// added_id of its last local cell as its seq, and the seq of the page before it as its after,
// so that the peer's node applies it only after that one. The page before may have been sent
// to another node (the peer's leader moved) or be lost on its way: the peer then refuses the
// page (out_of_order), which waits here until the page before it was answered and is sent
// again at the head of the chain (without after). A page that erases a row is sent only after
// the pages before it were answered, as every page was before (erasures are not chained).

// link is a page of a shard registered by onPage, in the shard's order. seq is the order.seq
// of its last put_cells, which the next page names as its after: 0 when the page ends with an
// erasure (the next page then waits for it to be answered). ok is set before done is closed:
// every request of the page was answered by the peer (applied, or with conflicts).
type link struct {
	prev  *link // nil once this page ended, or when no page was before it
	shard int
	seq   int64
	tomb  bool // the page erases a row
	done  chan struct{}
	ok    bool
}

// errUnsent is the answer of a page whose predecessor was not answered (the stream lost the
// shard or stopped): the page was not sent at the head of the chain, and the worker delivers
// it again after its predecessor.
var errUnsent = errors.New("peering: the page before was not sent; sending again after it")

// chains holds each shard's last registered page.
type chains struct {
	mu   sync.Mutex
	last map[int]*link
}

// onPage is the stream's triggers.Config.OnPage: it registers the page cs of shard after the
// shard's last page, and returns its link (nil when the page sends nothing: no local cell).
func (s *sender) onPage(shard int, cs []cells.Cell) any {
	l := &link{shard: shard, done: make(chan struct{})}
	sends := false
	for _, c := range cs {
		if c.Origin != "" {
			continue
		}
		sends = true
		if c.Key.IsTombstone() {
			l.tomb, l.seq = true, 0
		} else {
			l.seq = c.AddedID
		}
	}
	if !sends {
		return nil
	}
	s.chains.mu.Lock()
	defer s.chains.mu.Unlock()
	if s.chains.last == nil {
		s.chains.last = map[int]*link{}
	}
	l.prev = s.chains.last[shard]
	s.chains.last[shard] = l
	return l
}

// end records the outcome of l's page (err: the page handler's) and unlinks it; a page ends
// once, later calls do nothing.
func (s *sender) end(l *link, err error) {
	var conflict *conflictError
	s.chains.mu.Lock()
	defer s.chains.mu.Unlock()
	select {
	case <-l.done:
		return
	default:
	}
	l.ok = err == nil || errors.As(err, &conflict)
	l.prev = nil
	if s.chains.last[l.shard] == l {
		delete(s.chains.last, l.shard)
	}
	close(l.done)
}

// onPageEnd is the stream's triggers.Config.OnPageEnd: a page whose handler never ran (the
// shard lost first) ends unanswered.
func (s *sender) onPageEnd(token any) {
	if l, ok := token.(*link); ok {
		s.end(l, errUnsent)
	}
}

// predecessor returns l's page before it while that one has not ended, nil when it has (and
// was answered), or errUnsent when it ended unanswered.
func (s *sender) predecessor(l *link) (*link, error) {
	s.chains.mu.Lock()
	prev := l.prev
	s.chains.mu.Unlock()
	if prev == nil {
		return nil, nil
	}
	select {
	case <-prev.done:
		if !prev.ok {
			return nil, errUnsent
		}
		return nil, nil
	default:
		return prev, nil
	}
}

// waitPredecessor waits until l's page before it ended; errUnsent when it was not answered,
// ctx's error when ctx ends first.
func (s *sender) waitPredecessor(ctx context.Context, l *link) error {
	prev, err := s.predecessor(l)
	if prev == nil || err != nil {
		return err
	}
	select {
	case <-prev.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !prev.ok {
		return errUnsent
	}
	return nil
}

// putChained sends cws, the local cells of l's page (a page with no erasure) of shard, chained
// after the page before it when that one is still on its way, else at the head of the chain;
// a refused or failed chained request is sent again at the head once the page before was
// answered. Errors as put's, and errUnsent.
func (s *sender) putChained(ctx context.Context, shard int, l *link, cws []client.CellWrite) error {
	prev, err := s.predecessor(l)
	if err != nil {
		return err
	}
	if prev != nil && prev.seq == 0 { // it ends with an erasure, which is not chained
		if err := s.waitPredecessor(ctx, l); err != nil {
			return err
		}
		prev = nil
	}
	stream := strconv.Itoa(shard)
	if prev != nil {
		res, err := s.send(ctx, cws, client.WithOrder(stream, l.seq, prev.seq))
		if err == nil {
			return s.answered(cws, res)
		}
		s.errs.Inc()
		if err := s.waitPredecessor(ctx, l); err != nil {
			return err
		}
	}
	return s.put(ctx, cws, client.WithOrder(stream, l.seq, 0))
}
