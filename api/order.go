package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/wire"
)

// The chains of ordered put_cells requests (wire.PutOrder): a replicator between clusters
// sends a shard's next page before the one before it was answered, and the receiving node
// applies each only after its predecessor. This is each node's memory: a chain starts again
// with a request without after.

// orderArrivalWait is how long a chained request waits for its predecessor to arrive at the
// node (two requests sent one after the other can arrive in either order on two connections)
// before it is refused as out of order.
const orderArrivalWait = 250 * time.Millisecond

// orderChainIdle is how long a chain with nothing in flight is kept after its last request;
// maxOrderChains is the number of chains above which idle ones are forgotten.
const (
	orderChainIdle = 10 * time.Minute
	maxOrderChains = 4096
)

// orderChains holds the node's chains by key (origin, datastore and stream).
type orderChains struct {
	mu sync.Mutex
	m  map[string]*orderChain
}

// orderChain is one stream's chain: done is the highest seq applied here (every request
// before it in the stream was applied first), inflight the requests being applied by seq,
// each with a channel closed when it ends, and changed a channel closed (and replaced) at
// every end.
type orderChain struct {
	done     int64
	inflight map[int64]chan struct{}
	changed  chan struct{}
	used     time.Time
}

// chain returns key's chain, made if new (forgetting idle chains past maxOrderChains). The
// caller holds mu.
func (o *orderChains) chain(key string, now time.Time) *orderChain {
	if o.m == nil {
		o.m = map[string]*orderChain{}
	}
	c := o.m[key]
	if c == nil {
		if len(o.m) >= maxOrderChains {
			for k, old := range o.m {
				if len(old.inflight) == 0 && now.Sub(old.used) > orderChainIdle {
					delete(o.m, k)
				}
			}
		}
		c = &orderChain{inflight: map[int64]chan struct{}{}, changed: make(chan struct{})}
		o.m[key] = c
	}
	c.used = now
	return c
}

// begin waits until the request (seq, after) of chain key may be applied: at once without
// after (0), else once the chain's done reached after, waiting while the request with seq
// after is at the node (applied or waiting for its own predecessor) and up to
// orderArrivalWait for it to arrive. A request of the same seq at the node (a retry) is
// waited for first. It returns the function to call when the request ended (applied: whether
// it was), or the 409 out_of_order refusal, or ctx's error.
func (o *orderChains) begin(ctx context.Context, key string, seq, after int64) (func(applied bool), error) {
	deadline := time.Now().Add(orderArrivalWait)
	o.mu.Lock()
	c := o.chain(key, time.Now())
	for {
		ch, dup := c.inflight[seq]
		if !dup {
			break
		}
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		o.mu.Lock()
	}
	mine := make(chan struct{})
	c.inflight[seq] = mine
	c.signal()
	end := func(applied bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if applied && seq > c.done {
			c.done = seq
		}
		delete(c.inflight, seq)
		close(mine)
		c.signal()
		c.used = time.Now()
	}
	waitedFor := false
	for after > 0 && c.done < after {
		var wait <-chan struct{}
		var expired <-chan time.Time
		if ch, ok := c.inflight[after]; ok {
			wait, waitedFor = ch, true
		} else if waitedFor || !time.Now().Before(deadline) {
			why := "it was not received by this node"
			if waitedFor {
				why = "it ended without being applied"
			}
			o.mu.Unlock()
			end(false)
			return nil, outOfOrder(after, why)
		} else {
			wait = c.changed
			timer := time.NewTimer(time.Until(deadline))
			defer timer.Stop()
			expired = timer.C
		}
		o.mu.Unlock()
		select {
		case <-wait:
		case <-expired:
		case <-ctx.Done():
			end(false)
			return nil, ctx.Err()
		}
		o.mu.Lock()
	}
	o.mu.Unlock()
	return end, nil
}

// signal wakes the requests waiting for a change of the chain. The caller holds mu.
func (c *orderChain) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// outOfOrder is the refusal of a request chained to the request after, which the node has not
// applied (why).
func outOfOrder(after int64, why string) *httpError {
	return &httpError{status: http.StatusConflict, code: wire.CodeOutOfOrder, field: "order.after",
		msg: "the request follows the stream's request " + strconv.FormatInt(after, 10) + ", which this node has not applied (" + why +
			"); nothing was written: send it again once that one was answered, without order.after"}
}
