package client

import (
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
)

// Response headers of leader routing, set by the server on single-row writes and strong reads
// (api.HeaderShards and api.HeaderLeader).
const (
	headerShards = "Schemaless-Shards"
	headerLeader = "Schemaless-Leader"
)

// leaderRoutes is what a client learned of where rows' leader-only requests go: per datastore,
// its shard count and, per shard, the endpoint that leads the shard's partition (index into
// endpoints.urls, plus one; 0 when unknown). Learned from answers; never needed for
// correctness: a request sent to a node that does not lead is forwarded by that node.
type leaderRoutes struct {
	mu  sync.Mutex
	ds  map[string]*shardLeaders
	eps map[string]int // endpoint host[:port][/prefix] -> index
}

type shardLeaders struct {
	leader []atomic.Int32 // by shard
}

func newLeaderRoutes(urls []string) *leaderRoutes {
	lr := &leaderRoutes{ds: map[string]*shardLeaders{}, eps: map[string]int{}}
	for i, u := range urls {
		if k, ok := endpointKey(u); ok {
			lr.eps[k] = i
		}
	}
	return lr
}

// endpointKey is the comparable form of a base URL: host:port and path, scheme ignored.
func endpointKey(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "", false
	}
	host := p.Host
	if p.Port() == "" {
		if p.Scheme == "https" {
			host += ":443"
		} else {
			host += ":80"
		}
	}
	return host + p.Path, true
}

// preferred returns the endpoint to try first for row of ds, or -1 when none is known.
func (lr *leaderRoutes) preferred(ds string, row uuid.UUID) int {
	lr.mu.Lock()
	sl := lr.ds[ds]
	lr.mu.Unlock()
	if sl == nil {
		return -1
	}
	return int(sl.leader[cells.ShardOf(row, len(sl.leader))].Load()) - 1
}

// learn records the routing headers of an answer about row of ds.
func (lr *leaderRoutes) learn(ds string, row uuid.UUID, h http.Header) {
	shards, err := strconv.Atoi(h.Get(headerShards))
	if err != nil || shards <= 0 || shards > 1<<20 {
		return
	}
	lr.mu.Lock()
	sl := lr.ds[ds]
	if sl == nil || len(sl.leader) != shards {
		sl = &shardLeaders{leader: make([]atomic.Int32, shards)}
		lr.ds[ds] = sl
	}
	lr.mu.Unlock()
	ep := -1
	if l := h.Get(headerLeader); l != "" {
		if k, ok := endpointKey(l); ok {
			if i, ok := lr.eps[k]; ok {
				ep = i
			}
		}
	}
	sl.leader[cells.ShardOf(row, shards)].Store(int32(ep + 1))
}

// forget drops what is known of row's leader (after a failed attempt on it).
func (lr *leaderRoutes) forget(ds string, row uuid.UUID, ep int) {
	lr.mu.Lock()
	sl := lr.ds[ds]
	lr.mu.Unlock()
	if sl != nil {
		sl.leader[cells.ShardOf(row, len(sl.leader))].CompareAndSwap(int32(ep+1), 0)
	}
}
