package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// errEnough stops a test's tail.
var errEnough = errors.New("enough cells")

// tailed is a cell Tail delivered, with its shard.
type tailed struct {
	shard int
	cell  wire.Cell
}

// tailUntil runs Tail with o until fn has seen n cells (or 30 s pass), and returns them.
func tailUntil(t *testing.T, cl *client.Client, o client.TailOptions, n int) []tailed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []tailed
	err := cl.Tail(ctx, o, func(shard int, c wire.Cell) error {
		got = append(got, tailed{shard, c})
		if len(got) >= n {
			return errEnough
		}
		return nil
	}, client.WithConsistency(client.ConsistencyStrong))
	require.ErrorIs(t, err, errEnough, "Tail: got %d cells, want %d", len(got), n)
	return got
}

// Tail follows the shard logs: the whole logs from the earliest, one column only, from a time,
// and from the end; fn's error and ctx end it.
func TestTail(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := itClient(t, c.URLs(), func(cfg *client.Config) { cfg.RequestTimeout = 10 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(i int, col string) {
		t.Helper()
		_, err := cl.PutCell(ctx, itRow(t, i), col, 1, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
		require.NoError(t, err, "put %d/%s", i, col)
	}
	for i := range 6 {
		put(i, "BASE")
		put(i, "OTHER")
	}

	// From the earliest, BASE only: the six BASE cells, in added_id order within each shard.
	got := tailUntil(t, cl, client.TailOptions{Earliest: true, ColumnKey: "BASE", Wait: 100 * time.Millisecond}, 6)
	rows := map[string]bool{}
	last := map[int]int64{}
	for _, g := range got {
		assert.Equal(t, "BASE", g.cell.ColumnKey, "column filter: %+v", g.cell)
		assert.Greater(t, g.cell.AddedID, last[g.shard], "shard %d: added_id order", g.shard)
		last[g.shard] = g.cell.AddedID
		rows[g.cell.RowKey] = true
	}
	for i := range 6 {
		assert.True(t, rows[itRow(t, i).String()], "row %d delivered", i)
	}

	// From a time: only what was created at or after it.
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	time.Sleep(20 * time.Millisecond)
	put(100, "BASE")
	got = tailUntil(t, cl, client.TailOptions{Since: since, ColumnKey: "BASE"}, 1)
	assert.Equal(t, itRow(t, 100).String(), got[0].cell.RowKey, "the first BASE cell created after %s", since)

	// From the end (the default): nothing written before the tail started, whatever is
	// written after. New cells go in until the tail sees one.
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	seen := make(chan wire.Cell, 1)
	done := make(chan error, 1)
	go func() {
		done <- cl.Tail(tctx, client.TailOptions{Shards: []int{0, 1, 2, 3, 4, 5, 6, 7}, Wait: 200 * time.Millisecond}, func(_ int, c wire.Cell) error {
			select {
			case seen <- c:
			default:
			}
			return nil
		})
	}()
	var first wire.Cell
	i := 200
	require.Eventually(t, func() bool {
		select {
		case first = <-seen:
			return true
		default:
			put(i, "BASE")
			i++
			return false
		}
	}, 20*time.Second, 100*time.Millisecond, "the tail from the end sees a new cell")
	var body struct{ I int }
	require.NoError(t, json.Unmarshal(first.Body, &body), "body %s", first.Body)
	assert.True(t, first.ColumnKey == "BASE" && body.I >= 200,
		"the tail from the end delivered %s/%s %s, want a cell written after it started", first.RowKey, first.ColumnKey, first.Body)
	tcancel()
	assert.ErrorIs(t, <-done, context.Canceled, "Tail ends with ctx")

	sts, err := cl.GroupStatuses(ctx)
	require.NoError(t, err, "GroupStatuses")
	assert.Empty(t, sts, "no group yet")

	// A datastore the cluster does not have, with every shard asked for.
	other := cl.WithDatastore("nope")
	err = other.Tail(ctx, client.TailOptions{}, func(int, wire.Cell) error { return nil })
	assert.ErrorIs(t, err, client.ErrNotFound)
	assert.ErrorContains(t, err, `datastore "nope" is not in the cluster (datastores: trips)`)
}
