package maintainer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

const ds = "trips"

// definition of a two-column index: shard field "city" and "fare" from BASE, "driver" from
// STATUS.
func definition(t *testing.T, name string) indexes.Definition {
	t.Helper()
	d, err := indexes.ParseDefinition([]byte(fmt.Sprintf(`table: %s
column_defs:
  - column_key: BASE
    fields:
      - {field: city, type: string}
      - {field: fare, type: int}
  - column_key: STATUS
    fields:
      - {field: driver, type: UUID}
`, name)))
	require.NoError(t, err)
	return d
}

// written is what the test wrote to one row: its cells in write order.
type written struct {
	row   uuid.UUID
	cells []cells.Cell
}

// expected computes the index entries of rows by brute force: the shard field from the row's
// first BASE cell, every other field from the newest cell (by ref key) of its column; the
// violation flag when a BASE cell carries another city.
func expected(t *testing.T, d indexes.Definition, rows []written) map[uuid.UUID]indexes.Entry {
	fields := d.Fields()
	out := map[uuid.UUID]indexes.Entry{}
	for _, w := range rows {
		var first *cells.Cell
		newest := map[string]cells.Cell{}
		for i := range w.cells {
			c := w.cells[i]
			if c.ColumnKey == "BASE" && first == nil {
				first = &w.cells[i]
			}
			if n, ok := newest[c.ColumnKey]; !ok || c.RefKey > n.RefKey {
				newest[c.ColumnKey] = c
			}
		}
		if first == nil {
			continue
		}
		e := indexes.Entry{RowKey: w.row, Values: make([]any, len(fields)), Refs: map[string]int64{}}
		obj := func(c cells.Cell) map[string]any {
			o, err := c.Body.Object()
			require.NoError(t, err)
			return o
		}
		fv, _ := indexes.Extract(fields, "BASE", obj(*first))
		e.Values[0] = fv[0]
		for col, c := range newest {
			vals, _ := indexes.Extract(fields, col, obj(c))
			for i, v := range vals {
				if i != 0 {
					e.Values[i] = v
				}
			}
			e.Refs[col] = c.RefKey
		}
		for _, c := range w.cells {
			if c.ColumnKey == "BASE" {
				if v, _ := indexes.Extract(fields, "BASE", obj(c)); v[0] != e.Values[0] {
					e.Violation = 1 // any non-zero value
				}
			}
		}
		out[w.row] = e
	}
	return out
}

// readIndex reads every entry of index name (its alias) for the shard values given.
func readIndex(t *testing.T, n *cluster.Node, name string, values []string) (map[uuid.UUID]indexes.Entry, map[uuid.UUID]int) {
	t.Helper()
	ctx := context.Background()
	cat, err := n.Catalog(ctx, ds, cluster.Strong)
	require.NoError(t, err)
	v, err := cat.Resolve(name, 0)
	require.NoError(t, err)
	spec, _ := n.Datastore(ds)
	fields := v.Definition.Fields()
	table := indexes.TableName(name, v.Version)
	out := map[uuid.UUID]indexes.Entry{}
	count := map[uuid.UUID]int{}
	seen := map[string]bool{}
	for _, sv := range values {
		if seen[sv] {
			continue
		}
		seen[sv] = true
		q := indexes.Query{ShardValue: sv, Limit: 7}
		for {
			plan, err := indexes.Compile(v.Definition, q, spec.Shards, indexes.DefaultLimits())
			require.NoError(t, err)
			es, err := n.QueryIndex(ctx, ds, table, fields, plan, cluster.Strong)
			require.NoError(t, err)
			for _, e := range es {
				out[e.RowKey] = e
				count[e.RowKey]++
			}
			if len(es) < plan.Limit {
				break
			}
			q.Cursor = indexes.NextCursor(plan, es[len(es)-1])
		}
	}
	return out, count
}

// compare fails t with the differences between got and want (violations compared as flags).
func compare(t *testing.T, what string, got, want map[uuid.UUID]indexes.Entry, count map[uuid.UUID]int) {
	t.Helper()
	bad := 0
	for rk, w := range want {
		g, ok := got[rk]
		switch {
		case !ok:
			assert.Failf(t, "missing entry", "%s: row %s has no entry", what, rk)
		case !reflect.DeepEqual(g.Values, w.Values) || !reflect.DeepEqual(g.Refs, w.Refs) || (g.Violation != 0) != (w.Violation != 0):
			assert.Failf(t, "wrong entry", "%s: row %s: entry %+v, want %+v", what, rk, g, w)
		case count[rk] != 1:
			assert.Failf(t, "entry read more than once", "%s: row %s read %d times, want once", what, rk, count[rk])
		default:
			continue
		}
		bad++
		require.LessOrEqual(t, bad, 10, "%s: too many differences", what)
	}
	for rk := range got {
		_, ok := want[rk]
		assert.True(t, ok, "%s: entry for row %s, which was never written", what, rk)
	}
}

var cities = []string{"ORD", "ORD", "ORD", "ATL", "SFO", "JFK"}

// writeRows writes n rows of random cells through node 0 and returns them. Cells of a row are
// written one after the other, so the first BASE cell written is the first appended.
func writeRows(t *testing.T, c *clustertest.Cluster, rng *rand.Rand, n int) []written {
	t.Helper()
	ctx := context.Background()
	node := c.Cluster.Node(0)
	var rows []written
	for i := 0; i < n; i++ {
		w := written{row: uuid.New()}
		city := cities[rng.IntN(len(cities))]
		nb := 1 + rng.IntN(3)
		for ref := 1; ref <= nb; ref++ {
			cty := city
			if ref > 1 && rng.IntN(10) == 0 {
				cty = cities[rng.IntN(len(cities))] // a shard-field change: a violation
			}
			body := fmt.Sprintf(`{"city":%q,"fare":%d}`, cty, rng.IntN(500))
			if rng.IntN(20) == 0 {
				body = fmt.Sprintf(`{"city":%q,"fare":"not a number"}`, cty)
			}
			w.cells = append(w.cells, mkCell(t, w.row, "BASE", int64(ref), body))
		}
		for ref := 1; ref <= rng.IntN(3); ref++ {
			w.cells = append(w.cells, mkCell(t, w.row, "STATUS", int64(ref), fmt.Sprintf(`{"driver":%q}`, uuid.New())))
		}
		// A STATUS cell may come before the row's first BASE cell.
		if len(w.cells) > 1 && w.cells[len(w.cells)-1].ColumnKey == "STATUS" && rng.IntN(3) == 0 {
			last := w.cells[len(w.cells)-1]
			copy(w.cells[1:], w.cells[:len(w.cells)-1])
			w.cells[0] = last
		}
		for _, cl := range w.cells {
			res, err := node.PutCells(ctx, ds, []cells.Cell{cl})
			require.NoError(t, err, "put %s", cl.Key)
			// exists: a node retried the write after a leader change made its first attempt's
			// outcome unknown, and that attempt had stored it.
			require.Contains(t, []cells.Status{cells.StatusCreated, cells.StatusExists}, res[0].Status, "put %s: %v", cl.Key, res)
		}
		rows = append(rows, w)
	}
	return rows
}

func mkCell(t *testing.T, row uuid.UUID, col string, ref int64, body string) cells.Cell {
	t.Helper()
	b, err := cells.EncodeBody([]byte(body))
	require.NoError(t, err)
	return cells.Cell{Key: cells.Key{RowKey: row, ColumnKey: col, RefKey: ref}, Body: b}
}

// define defines d (its first version starts building).
func define(t *testing.T, n *cluster.Node, d indexes.Definition) {
	t.Helper()
	_, err := n.CatalogApply(context.Background(), ds, indexes.Command{Op: indexes.OpDefine, Name: d.Table, Definition: d})
	require.NoError(t, err)
}

// waitCaughtUp waits until version 1 of index name is ready and its group has handled every
// shard's log.
func waitCaughtUp(t *testing.T, n *cluster.Node, name string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cat, err := n.Catalog(ctx, ds, cluster.Strong)
		require.NoError(c, err)
		v, err := cat.Resolve(name, 0)
		require.NoError(c, err, "index %s has no ready version", name)
		p, err := n.GroupProgress(ctx, ds, indexes.GroupName(name, v.Version), cluster.Stale)
		require.NoError(c, err)
		assert.Zero(c, p.LagCells, "index %s: cells not handled yet", name)
	}, timeout, 100*time.Millisecond, "index %s caught up", name)
}

// An index defined before the writes (built incrementally) and one defined after them (a
// backfill from offset 0) hold exactly the entries a brute-force computation gives; a
// shard-field change keeps the entry on its first shard value, counted as a violation.
func TestBackfillEqualsIncremental(t *testing.T) {
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) {
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			c := clustertest.Start(t, clustertest.Options{Engine: engine, Indexes: true})
			n := c.Cluster.Node(0)
			incr := definition(t, "incremental")
			define(t, n, incr)
			rows := writeRows(t, c, rng, 150)
			back := definition(t, "backfill")
			define(t, n, back)
			rows = append(rows, writeRows(t, c, rng, 50)...)
			waitCaughtUp(t, n, "incremental", 60*time.Second)
			waitCaughtUp(t, n, "backfill", 60*time.Second)
			want := expected(t, incr, rows)
			got, count := readIndex(t, n, "incremental", cities)
			compare(t, "incremental", got, want, count)
			got, count = readIndex(t, c.Cluster.Node(1), "backfill", cities)
			compare(t, "backfill", got, want, count)
			var violations int64
			for _, e := range want {
				if e.Violation != 0 {
					violations++
				}
			}
			st, err := n.IndexTableStats(context.Background(), ds, indexes.TableName("backfill", 1), back.Fields())
			require.NoError(t, err)
			assert.Equal(t, int64(len(want)), st.Entries, "entries of the backfilled index")
			assert.Equal(t, violations, st.Violations, "violations of the backfilled index")
		})
	}
}

// crashingBackend applies only part of some upserts and then crashes its maintainer (cancels
// it) before the page's offset is committed: the next owner handles the page again.
type crashingBackend struct {
	maintainer.Backend
	calls   *atomic.Int64 // shared by a node's incarnations, so each makes progress between crashes
	crashes atomic.Int64
	crash   func()
}

func (b *crashingBackend) PutIndexEntries(ctx context.Context, ds, table string, fields []indexes.Field, es []command.IndexEntry) (int, error) {
	if b.calls.Add(1)%3 == 0 && len(es) > 0 {
		// Half of the page's entries (none of a page of one) are applied, then the crash: every
		// third call crashes, so the pages of 120 rows make enough crashes whatever their sizes.
		n := 0
		if half := es[:len(es)/2]; len(half) > 0 {
			var err error
			if n, err = b.Backend.PutIndexEntries(ctx, ds, table, fields, half); err != nil {
				return n, err
			}
		}
		b.crashes.Add(1)
		b.crash()
		return n, errors.New("crashed mid-batch")
	}
	return b.Backend.PutIndexEntries(ctx, ds, table, fields, es)
}

// Maintainers that crash in the middle of a page's upserts (half applied, offset not
// committed) and restart still build exactly the brute-force index: the page is handled again
// and merges are idempotent. The workers read and commit in-process (the maintainer's default
// Source) and, in the second run, over the HTTP API (client.TriggerSource).
func TestCrashMidBatch(t *testing.T) {
	sources := []struct {
		name string
		// source returns the Config.Source of the maintainers of node i; nil: the default.
		source func(c *clustertest.Cluster, i int) func(ds string) triggers.Source
	}{
		{"in-process", func(*clustertest.Cluster, int) func(string) triggers.Source { return nil }},
		{"http", func(c *clustertest.Cluster, i int) func(string) triggers.Source {
			urls := c.URLs()
			endpoints := append([]string{urls[i]}, append(append([]string(nil), urls[:i]...), urls[i+1:]...)...)
			cl, err := client.New(client.Config{Endpoints: endpoints, BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
			require.NoError(t, err)
			return func(ds string) triggers.Source { return cl.WithDatastore(ds).TriggerSource() }
		}},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			testCrashMidBatch(t, rand.New(rand.NewPCG(uint64(seed), 2)), src.source)
		})
	}
}

func testCrashMidBatch(t *testing.T, rng *rand.Rand, source func(c *clustertest.Cluster, i int) func(ds string) triggers.Source) {
	c := clustertest.Start(t, clustertest.Options{})
	n := c.Cluster.Node(0)
	d := definition(t, "crashy")
	define(t, n, d)
	rows := writeRows(t, c, rng, 120)
	sources := make([]func(ds string) triggers.Source, 3)
	for i := range sources {
		sources[i] = source(c, i)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var crashes atomic.Int64
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var calls atomic.Int64
			for ctx.Err() == nil {
				mctx, cancel := context.WithCancel(ctx)
				be := &crashingBackend{Backend: c.Cluster.Node(i), calls: &calls, crash: cancel}
				err := maintainer.Run(mctx, maintainer.Config{Backend: be, Source: sources[i], Datastores: []string{ds},
					Worker: fmt.Sprintf("crashy-%d", i), PollInterval: 100 * time.Millisecond, BatchSize: 16, SessionTimeout: time.Second})
				assert.NoError(t, err, "maintainer.Run")
				cancel()
				crashes.Add(be.crashes.Load())
			}
		}()
	}
	assert.Eventually(t, func() bool { return crashes.Load() >= 2 }, 90*time.Second, 100*time.Millisecond, "2 crashes mid-batch")
	stop()
	wg.Wait()
	require.GreaterOrEqual(t, crashes.Load(), int64(2), "crashes mid-batch")
	// Finish with well-behaved maintainers.
	for i := 0; i < 3; i++ {
		mctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = maintainer.Run(mctx, maintainer.Config{Backend: c.Cluster.Node(i), Source: sources[i], Datastores: []string{ds},
				Worker: fmt.Sprintf("good-%d", i), PollInterval: 100 * time.Millisecond})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	waitCaughtUp(t, n, "crashy", 90*time.Second)
	t.Logf("%d crashes mid-batch", crashes.Load())
	got, count := readIndex(t, n, "crashy", cities)
	compare(t, "after crashes", got, expected(t, d, rows), count)
	assert.Len(t, got, len(rows), "entries, one per row")
}
