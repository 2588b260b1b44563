package peering_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/delayproxy"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/watchdog"
	"github.com/schemaless-db/schemaless/wire"
)

// link is the proxies through which one cluster's replicators reach the other's nodes.
type link struct {
	addrs, targets []string
	delay          time.Duration
	proxies        []*delayproxy.Proxy
}

func newLink(t *testing.T, to *localcluster.Cluster, delay time.Duration) *link {
	t.Helper()
	l := &link{delay: delay}
	for i := 0; i < to.Len(); i++ {
		p, err := delayproxy.Start("127.0.0.1:0", to.Spec(i).HTTPAddr, delay)
		require.NoError(t, err)
		l.addrs, l.targets, l.proxies = append(l.addrs, p.Addr()), append(l.targets, to.Spec(i).HTTPAddr), append(l.proxies, p)
	}
	t.Cleanup(l.cut)
	return l
}

func (l *link) endpoints() []string {
	var out []string
	for _, a := range l.addrs {
		out = append(out, "http://"+a)
	}
	return out
}

// cut closes the proxies: connections through them end, new ones are refused.
func (l *link) cut() {
	for _, p := range l.proxies {
		p.Close()
	}
}

// heal starts the proxies again on their addresses.
func (l *link) heal(t *testing.T) {
	for i, a := range l.addrs {
		p, err := delayproxy.Start(a, l.targets[i], l.delay)
		require.NoError(t, err, "proxy on %s again", a)
		l.proxies[i] = p
	}
}

// TestReplicationUnderFaults writes on both clusters while a node of each is killed (its
// process gone as its peers see it) and restarted, and the link between the clusters is cut for
// a few seconds each way: afterwards every acknowledged cell is in the other cluster, each
// shard's cells of each origin in the order of its origin's log, and both clusters hold the
// same cells. The replicators' shards move off the killed nodes (their group leases) and the
// streams resume after the cut from their committed offsets.
func TestReplicationUnderFaults(t *testing.T) {
	t.Parallel()
	watchdog.Start(t, 6*time.Minute) // a hang ends with the stacks, not with make test's 45 minutes
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	east, west := startCluster(t, "east"), startCluster(t, "west")
	ec, wc := clientOf(t, east), clientOf(t, west)
	toWest, toEast := newLink(t, west, 5*time.Millisecond), newLink(t, east, 5*time.Millisecond)
	ctx := context.Background()
	_, err := ec.SetReplicationPeer(ctx, "west", wire.ReplicationPeerRequest{Endpoints: toWest.endpoints(), Datastores: []string{"trips"}})
	require.NoError(t, err)
	_, err = wc.SetReplicationPeer(ctx, "east", wire.ReplicationPeerRequest{Endpoints: toEast.endpoints(), Datastores: []string{"trips"}})
	require.NoError(t, err)

	var mu sync.Mutex
	acked := map[string][]cells.Key{}
	wctx, stopWriting := context.WithCancel(ctx)
	var writers sync.WaitGroup
	for name, cl := range map[string]*client.Client{"east": ec, "west": wc} {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; wctx.Err() == nil; i++ {
				var batch []client.CellWrite
				for j := 0; j < 10; j++ {
					batch = append(batch, client.CellWrite{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1},
						Body: json.RawMessage(fmt.Sprintf(`{"from":%q,"i":%d}`, name, i*10+j))})
				}
				if _, err := cl.PutCells(wctx, batch); err == nil {
					mu.Lock()
					for _, w := range batch {
						acked[name] = append(acked[name], w.Key)
					}
					mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	pause := func(d time.Duration) { time.Sleep(d + time.Duration(rng.Int64N(int64(time.Second)))) }
	kill := func(c *localcluster.Cluster, name string) {
		i := rng.IntN(c.Len())
		t.Logf("kill %s node %d", name, i+1)
		require.NoError(t, c.StopNode(i))
		pause(4 * time.Second) // past the group's session timeout (3s): its shards move
		t.Logf("restart %s node %d", name, i+1)
		require.NoError(t, c.StartNode(ctx, i))
	}
	pause(2 * time.Second)
	kill(east, "east")
	pause(time.Second)
	t.Log("cut the link both ways")
	toWest.cut()
	toEast.cut()
	pause(4 * time.Second)
	t.Log("heal the link")
	toWest.heal(t)
	toEast.heal(t)
	pause(time.Second)
	kill(west, "west")
	pause(2 * time.Second)
	stopWriting()
	writers.Wait()
	mu.Lock()
	t.Logf("acknowledged: %d cells written in east, %d in west", len(acked["east"]), len(acked["west"]))
	require.NotEmpty(t, acked["east"])
	require.NotEmpty(t, acked["west"])
	mu.Unlock()

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, pair := range []struct {
			to     *client.Client
			origin string
		}{{wc, "east"}, {ec, "west"}} {
			mu.Lock()
			keys := acked[pair.origin]
			mu.Unlock()
			for i := 0; i < len(keys); i += 500 {
				var gk []client.GetKey
				for _, k := range keys[i:min(i+500, len(keys))] {
					gk = append(gk, client.GetKey{RowKey: k.RowKey, ColumnKey: k.ColumnKey, RefKey: k.RefKey})
				}
				res, err := pair.to.GetCells(ctx, gk)
				if !assert.NoError(ct, err) {
					return
				}
				assert.Zero(ct, len(res.Missing), "cells from %s missing (the first: %v)", pair.origin, res.Missing[:min(3, len(res.Missing))])
			}
		}
	}, 90*time.Second, time.Second, "every acknowledged cell reaches the other cluster")

	// Order per shard and origin, and the same cells on both sides.
	el, wl := shardLog(t, ec), shardLog(t, wc)
	for s := 0; s < shards; s++ {
		keysOf := func(log []wire.Cell, origin string) []string {
			var out []string
			for _, c := range log {
				if c.Origin == origin {
					out = append(out, c.RowKey)
				}
			}
			return out
		}
		assert.Equal(t, keysOf(el[s], ""), keysOf(wl[s], "east"), "shard %d: east's cells in west, in east's order, once each", s)
		assert.Equal(t, keysOf(wl[s], ""), keysOf(el[s], "west"), "shard %d: west's cells in east, in west's order, once each", s)
		assert.Equal(t, len(el[s]), len(wl[s]), "shard %d: both clusters hold the same number of cells", s)
	}
	for name, cl := range map[string]*client.Client{"east": ec, "west": wc} {
		st, err := cl.Replication(ctx)
		require.NoError(t, err)
		for _, p := range st.Peers {
			for _, s := range p.Streams {
				assert.Zero(t, s.Parked, "%s: parked cells", name)
				assert.False(t, s.Halted, "%s: halted", name)
			}
		}
	}
}
