package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// Conditional writes, transactions and same-partition row keys through the client.
func TestIntegrationConditionalAndTransactions(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	trip := uuid.New()
	_, err := cl.PutCell(ctx, trip, "STATUS", 1, json.RawMessage(`{"s":"booked"}`), client.IfNoCell())
	require.NoError(t, err, "first status")
	_, err = cl.PutCell(ctx, trip, "STATUS", 2, json.RawMessage(`{"s":"boarded"}`), client.IfNoCell())
	var pe *client.PreconditionError
	require.ErrorAs(t, err, &pe, "if-no-cell on a column with a cell")
	assert.ErrorIs(t, err, client.ErrPreconditionFailed)
	require.Len(t, pe.Failures, 1)
	require.NotNil(t, pe.Failures[0].LatestRefKey)
	assert.Equal(t, int64(1), *pe.Failures[0].LatestRefKey, "the latest ref key the refusal names")
	assert.Equal(t, "condition 0: the column's latest ref key is 1", pe.Conditions())
	res, err := cl.PutCell(ctx, trip, "STATUS", 2, json.RawMessage(`{"s":"boarded"}`), client.IfLatestRefKey(*pe.Failures[0].LatestRefKey))
	require.NoError(t, err, "if-latest with the ref key the refusal named")
	assert.Equal(t, wire.StatusCreated, res.Status)

	// Rows of one partition for a booking: the trip, its payment and its seat.
	near, err := cl.RowKeysNear(ctx, trip, 2)
	require.NoError(t, err)
	payment, seat := near[0], near[1]
	two := int64(2)
	tx, err := cl.Transact(ctx,
		[]client.TxCondition{{RowKey: trip, ColumnKey: "STATUS", LatestRefKey: &two}, {RowKey: seat, ColumnKey: "HOLDER"}},
		[]client.CellWrite{
			{Key: cells.Key{RowKey: trip, ColumnKey: "STATUS", RefKey: 3}, Body: json.RawMessage(`{"s":"paid"}`)},
			{Key: cells.Key{RowKey: payment, ColumnKey: "PAYMENT", RefKey: 1}, Body: json.RawMessage(`{"cents":12900}`)},
			{Key: cells.Key{RowKey: seat, ColumnKey: "HOLDER", RefKey: 1}, Body: json.RawMessage(fmt.Sprintf(`{"trip":%q}`, trip))},
		})
	require.NoError(t, err, "booking transaction")
	assert.True(t, tx.Committed)
	require.Len(t, tx.Results, 3)
	// A second booking of the same seat: the seat has a holder.
	_, err = cl.Transact(ctx, []client.TxCondition{{RowKey: seat, ColumnKey: "HOLDER"}},
		[]client.CellWrite{{Key: cells.Key{RowKey: seat, ColumnKey: "HOLDER", RefKey: 2}, Body: json.RawMessage(`{"trip":"other"}`)}})
	require.ErrorAs(t, err, &pe, "second booking of the seat")
	assert.Equal(t, 0, pe.Failures[0].Index)
	// A write whose key holds another body.
	_, err = cl.Transact(ctx, nil, []client.CellWrite{{Key: cells.Key{RowKey: payment, ColumnKey: "PAYMENT", RefKey: 1}, Body: json.RawMessage(`{"cents":1}`)}})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrConflict)
	assert.Equal(t, []int{0}, ae.Conflicts)
	// Rows of two partitions.
	spec := &c.Topology.Datastores[0]
	partitionOf := func(row uuid.UUID) int {
		shard := cells.ShardOf(row, spec.Shards)
		for _, p := range spec.Partitions {
			if p.Shards().Contains(shard) {
				return p.ID
			}
		}
		return -1
	}
	var other uuid.UUID
	for {
		other = uuid.New()
		if partitionOf(other) != partitionOf(trip) {
			break
		}
	}
	_, err = cl.Transact(ctx, nil, []client.CellWrite{
		{Key: cells.Key{RowKey: trip, ColumnKey: "X", RefKey: 1}, Body: json.RawMessage(`{}`)},
		{Key: cells.Key{RowKey: other, ColumnKey: "X", RefKey: 1}, Body: json.RawMessage(`{}`)}})
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrInvalidArgument)
	assert.Equal(t, wire.CodeCrossPartition, ae.Code)
	_, err = cl.GetCell(ctx, cells.Key{RowKey: trip, ColumnKey: "X", RefKey: 1})
	assert.ErrorIs(t, err, client.ErrNotFound, "the cross-partition transaction wrote nothing")
}

// A write retried with its idempotency key after an indeterminate answer learns what its first
// attempt did: a cell the first attempt stored answers created, never exists.
func TestIntegrationIdempotentRetry(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	healthy := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, err := healthy.Cluster(ctx)
	require.NoError(t, err, "Cluster")
	// Concurrent writers of new cells, all through node 0, while the leaders of the partitions
	// crash: node 0 forwards each write to the leader and, when the leader dies with the write
	// in flight, retries it (with its request ID) on the next leader, which may have applied it.
	via0 := itClient(t, c.URLs()[:1], func(cfg *client.Config) { cfg.NoLeaderRouting = true })
	// The writers end when writeCtx ends: when the crashes are over, or when the test stops
	// early (a failed require), so that no writer outlives the test spinning on an ended
	// context.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[string]int{}
	)
	writeCtx, stopWriters := context.WithCancel(ctx)
	defer func() { stopWriters(); wg.Wait() }()
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for writeCtx.Err() == nil {
				res, err := via0.PutCell(writeCtx, uuid.New(), "BASE", 1, json.RawMessage(`{"w":1}`))
				mu.Lock()
				switch {
				case writeCtx.Err() != nil:
				case err != nil:
					statuses["error"]++
				default:
					statuses[res.Status]++
				}
				mu.Unlock()
			}
		}()
	}
	began := time.Now()
	for round := 0; round < 3; round++ {
		for p := 0; p < 2; p++ {
			l := c.LeaderOf(p)
			if l == 0 {
				// A transfer times out when its target cannot catch up in time on a loaded
				// machine (nothing changed): it is tried again.
				require.EventuallyWithT(t, func(ct *assert.CollectT) {
					if c.LeaderOf(p) == 0 {
						_, err := healthy.TransferLeader(ctx, "trips", p, "")
						assert.NoError(ct, err, "move the leadership of partition %d off node 0", p)
					}
				}, 60*time.Second, 100*time.Millisecond, "move the leadership of partition %d off node 0", p)
				l = c.LeaderOf(p)
			}
			time.Sleep(200 * time.Millisecond)
			c.StopNode(l)
			time.Sleep(time.Second)
			c.StartNode(l)
			c.WaitReady()
			t.Logf("round %d: partition %d's leader, node %d, crashed and back at %v", round, p, l, time.Since(began).Round(time.Millisecond))
		}
	}
	stopWriters()
	wg.Wait()
	t.Logf("new cells written while leaders crashed: %v", statuses)
	assert.Zero(t, statuses[wire.StatusExists], "a brand-new cell answered exists")
	assert.Positive(t, statuses[wire.StatusCreated])

	// Writes with tiny timeouts, retried with their keys on a healthy client.
	var indeterminate []itWrite
	timeouts := []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, 8 * time.Millisecond}
	keys := map[cells.Key]string{}
	for i := 0; i < 6*len(timeouts) || (len(indeterminate) == 0 && i < 400); i++ {
		hasty := itClient(t, c.URLs(), func(cfg *client.Config) {
			cfg.RequestTimeout = timeouts[i%len(timeouts)]
			cfg.MaxAttempts = 1
		})
		w := itWrite{key: cells.Key{RowKey: itRow(t, i), ColumnKey: "BASE", RefKey: 1}, body: fmt.Sprintf(`{"attempt":%d}`, i)}
		keys[w.key] = "retry-" + w.key.String()
		_, err := hasty.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body), client.IdempotencyKey(keys[w.key]))
		if errors.Is(err, client.ErrIndeterminate) {
			indeterminate = append(indeterminate, w)
		}
	}
	require.NotEmpty(t, indeterminate, "no write ended indeterminate: the test could not provoke the case it checks")
	for _, w := range indeterminate {
		res, err := healthy.PutCell(ctx, w.key.RowKey, w.key.ColumnKey, w.key.RefKey, json.RawMessage(w.body), client.IdempotencyKey(keys[w.key]))
		require.NoError(t, err, "retry of indeterminate %s", w.key)
		assert.Equal(t, wire.StatusCreated, res.Status, "retry of indeterminate %s with its key", w.key)
	}
	t.Logf("%d indeterminate writes retried with their keys: all created", len(indeterminate))
}
