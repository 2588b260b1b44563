package triggers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker whose Source is in-process (maintainer.Source over a node) and one over the HTTP
// API (client.Client.TriggerSource) share a group: every BASE cell is delivered in per-shard order,
// the shards are split between them, and their commits reach every shard's last cell.
func TestInProcessAndHTTPSources(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	rec := newRecorder()
	cfgA := baseConfig(t, nil, "mixed", "in-process")
	cfgA.Source = maintainer.NewSource(c.Cluster.Node(0), "trips")
	stopA := runWorker(t, cfgA, rec.handler("in-process"))
	before := write(t, cl, "BASE", 200, nil)
	other := write(t, cl, "STATUS", 30, nil)
	require.Eventually(t, func() bool { return len(rec.missing(before)) == 0 }, 60*time.Second, tick,
		"the in-process worker delivers the first 200 cells")

	cfgB := baseConfig(t, nil, "mixed", "http")
	cfgB.Source = cl.TriggerSource()
	stopB := runWorker(t, cfgB, rec.handler("http"))
	after := write(t, cl, "BASE", 200, nil)
	all := append(before, after...)
	require.Eventually(t, func() bool { return len(rec.missing(all)) == 0 }, 60*time.Second, tick, "every BASE cell delivered")
	require.Eventually(t, func() bool {
		st, err := cl.GroupStatus(context.Background(), "mixed")
		return err == nil && len(st.Members) == 2 && st.Members[0].Shards == shards/2 && st.Members[1].Shards == shards/2
	}, 40*time.Second, tick, "a balanced group of both workers")
	more := write(t, cl, "BASE", 100, nil)
	all = append(all, more...)
	require.Eventually(t, func() bool { return len(rec.missing(all)) == 0 }, 60*time.Second, tick, "the last cells delivered")

	assert.NoError(t, stopA(), "in-process worker: Run")
	assert.NoError(t, stopB(), "http worker: Run")
	rec.checkOrder(t)
	rec.mu.Lock()
	byWorker := map[string]int{}
	for _, d := range rec.calls {
		byWorker[d.worker]++
	}
	for _, o := range other {
		assert.Zero(t, rec.seen[o.key], "STATUS cell %s delivered to a BASE group", o.key)
	}
	rec.mu.Unlock()
	assert.Positive(t, byWorker["http"], "cells delivered by the http worker")
	assert.Positive(t, byWorker["in-process"], "cells delivered by the in-process worker")

	st, err := cl.GroupStatus(context.Background(), "mixed")
	require.NoError(t, err)
	lastBase := map[int]int64{}
	for _, w := range all {
		lastBase[w.shard] = max(lastBase[w.shard], w.addedID)
	}
	for _, s := range st.Shards {
		assert.GreaterOrEqual(t, s.Offset, lastBase[s.Shard], "shard %d: committed offset", s.Shard)
	}
	assert.Empty(t, st.Members, "members after both workers left")
}

// Over the in-process Source, failing cells are parked with their error and the shard moves
// on; an operator's retry redelivers them (read with Source.GetCell) and resolves them.
func TestInProcessSourceParksAndRetries(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	ctx := context.Background()
	rec := newRecorder()
	var mu sync.Mutex
	fixed := false
	h := func(ctx context.Context, cell cells.Cell) error {
		obj, err := cell.Body.Object()
		if err != nil {
			return err
		}
		mu.Lock()
		ok := fixed
		mu.Unlock()
		if obj["fail"] == true && !ok {
			return fmt.Errorf("cannot bill cell %v", obj["i"])
		}
		return rec.handler("a")(ctx, cell)
	}
	cfg := baseConfig(t, nil, "inproc-park", "a")
	cfg.Source = maintainer.NewSource(c.Cluster.Node(1), "trips")
	cfg.MaxAttempts, cfg.HaltThreshold = 2, 10
	stop := runWorker(t, cfg, h)
	ws := write(t, cl, "BASE", 40, func(i int) bool { return i == 3 || i == 17 })
	var good []written
	for i, w := range ws {
		if i != 3 && i != 17 {
			good = append(good, w)
		}
	}
	require.Eventually(t, func() bool { return len(rec.missing(good)) == 0 }, 60*time.Second, tick, "the good cells delivered")
	var st wire.GroupStatus
	require.Eventually(t, func() bool {
		var err error
		st, err = cl.GroupStatus(ctx, "inproc-park")
		return err == nil && len(st.Parked) == 2
	}, 20*time.Second, tick, "2 parked cells")
	for _, p := range st.Parked {
		assert.Equal(t, 2, p.Attempts, "parked cell %+v: attempts", p)
		assert.Contains(t, p.Error, "cannot bill", "parked cell %+v: want the handler's error", p)
		assert.Equal(t, "a", p.Worker, "parked cell %+v: worker", p)
	}
	mu.Lock()
	fixed = true
	mu.Unlock()
	res, err := cl.GroupCommand(ctx, "inproc-park", client.GroupRetry, wire.GroupCommand{All: true})
	require.NoError(t, err, "retry all")
	require.EqualValues(t, 2, res.Affected, "retry all: parked cells marked")
	require.Eventually(t, func() bool { return len(rec.missing(ws)) == 0 }, 40*time.Second, tick, "the retried cells delivered")
	require.Eventually(t, func() bool {
		st, err := cl.GroupStatus(ctx, "inproc-park")
		return err == nil && len(st.Parked) == 0
	}, 20*time.Second, tick, "no parked cell left")
	assert.NoError(t, stop(), "Run")
}
