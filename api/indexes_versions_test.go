package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/wire"
)

// The life of index versions (see indexes_test.go): a write after the build, a build held
// with the maintainers stopped, and a second version switched to while rows are written and
// the alias queried.

// testIndexWriteAfterReady writes a row once the index is ready and waits until a query finds it.
func (s *session) testIndexWriteAfterReady(t *testing.T, def indexes.Definition) {
	row := uuid.New()
	body := map[string]any{"driver": "bob", "delay": 999, "date": "2001-01-05T10:00:00.25Z", "city_uuid": cities[1]}
	s.putCells(t, []wire.PutCell{putCell(t, row, "BASE", 1, body)})
	start := time.Now()
	q := queryBody(t, indexes.Query{ShardValue: "bob", Where: []indexes.Cond{{Field: "delay", Op: ">=", Value: json.Number("999")}}, Columns: []string{"BASE"}})
	// Every answer must be a 200 with at most the new row; anything else ends the wait (stop).
	// The condition runs in one goroutine at a time; found and stop are read only after
	// EventuallyWithT returns, once that goroutine has ended.
	var (
		found wire.IndexEntry
		stop  error
	)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var res wire.IndexQueryResult
		if !s.poll(c, &stop, int(time.Since(start)/time.Second)%3, "POST", "/v1/trips/indexes/trip_index/query", q, 200, &res) {
			return
		}
		if len(res.Entries) > 1 {
			stop = fmt.Errorf("query: got %d entries, want at most the new row: %+v", len(res.Entries), res.Entries)
			return
		}
		if assert.Len(c, res.Entries, 1, "entries: the new row") {
			found = res.Entries[0]
		}
	}, 20*time.Second, 100*time.Millisecond, "a row written after the index was ready is found by a query")
	require.NoError(t, stop)
	t.Logf("a write after ready was found by a query after %s", time.Since(start).Round(time.Millisecond))
	want := map[string]any{"driver": "bob", "city_uuid": cities[1], "delay": json.Number("999"), "fare": nil,
		"date": "2001-01-05T10:00:00.25Z", "paid": nil, "status": nil}
	assert.Equal(t, row.String(), found.RowKey, "the new row: row key")
	assert.Equal(t, want, found.Fields, "the new row: fields")
	assert.Equal(t, int64(1), found.Cells["BASE"].RefKey, "the new row: its BASE cell (%+v)", found.Cells)
}

// testIndexBuilding holds a version in state building (the maintainers stopped) and checks the
// refusals and the progress of a build not started.
func (s *session) testIndexBuilding(t *testing.T) {
	for i := 0; i < 3; i++ {
		s.c.StopMaintainer(i)
	}
	defer func() {
		for i := 0; i < 3; i++ {
			s.c.StartMaintainer(i)
		}
	}()
	def := "table: held\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: driver, type: string}\n      - {field: delay, type: int}\n"
	var res wire.IndexDefineResult
	s.doRetry(t, 0, "POST", "/v1/trips/indexes", def).expect(t, 201).decode(t, &res)
	st := s.indexStatus(t, 1, "held")
	v, _ := findVersion(st, res.Version)
	// A build not started: building, nothing handled of a positive total, no worker, 16 shards at -1.
	require.Zero(t, st.Alias, "a build not started: alias")
	require.Equal(t, wire.IndexBuilding, v.State, "a build not started: state (%+v)", v)
	require.Less(t, v.Progress, 1.0, "a build not started: progress (%+v)", v)
	require.Zero(t, v.HandledCells, "a build not started: handled cells (%+v)", v)
	require.NotZero(t, v.TotalCells, "a build not started: total cells (%+v)", v)
	require.Equal(t, v.TotalCells, v.LagCells, "a build not started: lag, every cell (%+v)", v)
	require.Zero(t, v.Workers, "a build not started: workers (%+v)", v)
	require.Len(t, v.Shards, 16, "a build not started: shards (%+v)", v)
	require.Equal(t, int64(-1), v.Shards[0].Offset, "a build not started: offset of shard 0 (%+v)", v)
	s.doRetry(t, 1, "POST", "/v1/trips/indexes/held/alias", `{"version":1}`).expectError(t, 409, wire.CodeConflict, "")
	a := s.doRetry(t, 2, "POST", "/v1/trips/indexes/held/query", `{"shard_value":"alice"}`)
	a.expectError(t, 409, wire.CodeConflict, "")
	assert.Contains(t, string(a.body), "building", "query of a building index: a message naming the state building")
	s.doRetry(t, 0, "POST", "/v1/trips/indexes/held/query", `{"shard_value":"alice","version":1}`).expectError(t, 409, wire.CodeConflict, "")
	// Dropping it while no maintainer runs: the API drops the tables itself.
	var drop wire.IndexDropResult
	s.doRetry(t, 1, "DELETE", "/v1/trips/indexes/held/versions/1", "").expect(t, 200).decode(t, &drop)
	assert.Equal(t, wire.IndexDropped, drop.State, "drop: state (%+v)", drop)
	st = s.indexStatus(t, 2, "held")
	v, _ = findVersion(st, 1)
	assert.Equal(t, wire.IndexDropped, v.State, "after the drop: state (%+v)", v)
	assert.NotNil(t, v.DroppedAt, "after the drop: a dropped_at (%+v)", v)
	assert.Zero(t, st.Alias, "after the drop: alias")
	s.doRetry(t, 0, "POST", "/v1/trips/indexes/held/query", `{"shard_value":"alice","version":1}`).expectError(t, 404, wire.CodeNotFound, "")
	a = s.doRetry(t, 0, "POST", "/v1/trips/indexes/held/alias", `{"version":1}`)
	a.expectError(t, 409, wire.CodeConflict, "")
	assert.Contains(t, string(a.body), "dropped", "alias to a dropped version: a message naming the state dropped")
	// A dropped number is never reused.
	s.doRetry(t, 0, "POST", "/v1/trips/indexes", def).expect(t, 201).decode(t, &res)
	assert.Equal(t, 2, res.Version, "define after a drop: version")
	s.doRetry(t, 0, "DELETE", "/v1/trips/indexes/held/versions/2", "").expect(t, 200)
}

// requestFailures collects the failed requests of the writer and the reader of
// testIndexNewVersion; it is the assert.TestingT of the writer's retries. Safe for concurrent
// use.
type requestFailures struct {
	mu   sync.Mutex
	list []string
}

// Errorf records a failure.
func (f *requestFailures) Errorf(format string, args ...any) {
	f.mu.Lock()
	f.list = append(f.list, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// testIndexNewVersion builds version 2 of trip_index beside version 1, switches the alias to it
// and drops version 1, while a writer writes rows and a reader queries the alias at a steady
// pace.
func (s *session) testIndexNewVersion(t *testing.T, def1 indexes.Definition) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var (
		written  []uuid.UUID // by the writer; read once it has ended
		failures requestFailures
		asked    atomic.Int64 // queries sent by the reader, whatever their answer
		queries  atomic.Int64 // queries answered 200
		// unavailable counts 503 answers (no leader for a moment on a loaded machine), which
		// the reader retries; any other failure fails the test.
		unavailable atomic.Int64
		versions    sync.Map
	)
	wg.Add(2)
	go func() { // writer: a row of driver carol every 20ms
		defer wg.Done()
		pace := time.NewTicker(20 * time.Millisecond)
		defer pace.Stop()
		for i := 0; ; i++ {
			row := uuid.New()
			b, _ := json.Marshal(map[string]any{"driver": "carol", "delay": 500 + i, "reason": "weather"})
			body, _ := json.Marshal(wire.PutCellsRequest{Cells: []wire.PutCell{{RowKey: row.String(), ColumnKey: "BASE", RefKey: "1", Body: b}}})
			// A 503 or 504 (no leader for a moment) is sent again, to the next node: the write
			// is idempotent. The condition runs in one goroutine at a time; a and err are read
			// only when EventuallyWithT succeeded, once that goroutine has ended.
			var (
				a     answer
				err   error
				tries int
			)
			if !assert.EventuallyWithT(&failures, func(c *assert.CollectT) {
				a, err = s.tryDo((i+tries)%3, "POST", "/v1/trips/cells", string(body))
				tries++
				if err == nil {
					assert.NotContains(c, []int{503, 504}, a.status, "write %d: %s", i, a.body)
				}
			}, 15*time.Second, 100*time.Millisecond, "write %d: an answer other than 503 or 504 within 15s", i) {
				return
			}
			if err != nil || a.status != 200 {
				failures.Errorf("write %d: %v %d %s", i, err, a.status, a.body)
				return
			}
			written = append(written, row)
			select {
			case <-ctx.Done():
				return
			case <-pace.C:
			}
		}
	}()
	go func() { // reader: the alias, every 10ms
		defer wg.Done()
		pace := time.NewTicker(10 * time.Millisecond)
		defer pace.Stop()
		for i := 0; ; i++ {
			a, err := s.tryDo(i%3, "POST", "/v1/trips/indexes/trip_index/query", `{"shard_value":"carol","where":[{"field":"delay","op":">=","value":500}],"limit":1000}`)
			asked.Add(1)
			var res wire.IndexQueryResult
			switch {
			case err == nil && a.status == 503:
				unavailable.Add(1) // a partition without a leader for a moment: not the switch's doing
			case err != nil || a.status != 200:
				failures.Errorf("query %d: %v %d %s", i, err, a.status, a.body)
			default:
				if err := json.Unmarshal(a.body, &res); err != nil {
					failures.Errorf("query %d: %v", i, err)
					break
				}
				versions.Store(res.Version, true)
				queries.Add(1)
			}
			select {
			case <-ctx.Done():
				return
			case <-pace.C:
			}
		}
	}()
	stopTraffic := func() {
		cancel()
		wg.Wait()
	}
	defer stopTraffic()

	var res wire.IndexDefineResult
	s.doRetry(t, 0, "POST", "/v1/trips/indexes", tripIndexV2YAML).expect(t, 201).decode(t, &res)
	require.Equal(t, 2, res.Version, "define version 2 (%+v)", res)
	s.waitCaughtUp(t, "trip_index", 2, -1)
	require.Equal(t, 1, s.indexStatus(t, 1, "trip_index").Alias, "alias after version 2 is ready: still 1")
	// The alias target cannot be dropped while version 2 lives.
	s.doRetry(t, 2, "DELETE", "/v1/trips/indexes/trip_index/versions/1", "").expectError(t, 409, wire.CodeConflict, "")
	var al wire.IndexAliasResult
	s.doRetry(t, 1, "POST", "/v1/trips/indexes/trip_index/alias", `{"version":2}`).expect(t, 200).decode(t, &al)
	require.Equal(t, 2, al.Alias, "alias (%+v)", al)

	// Queries move to version 2 on every node within the life of its cached catalog
	// (api.Config.IndexCatalogTTL); version 1 is dropped once every node answers with version 2.
	// A transport error or an answer that does not decode ends a wait (stop); the condition runs
	// in one goroutine at a time and stop is read only after EventuallyWithT returns.
	var stop error
	one := queryBody(t, indexes.Query{ShardValue: "carol", Limit: 1})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for node := range 3 {
			a, err := s.tryDo(node, "POST", "/v1/trips/indexes/trip_index/query", one)
			if err != nil {
				stop = err
				return
			}
			if !assert.Equal(c, 200, a.status, "node %d: status; body %s", node, a.body) {
				continue
			}
			var r wire.IndexQueryResult
			if stop = a.unmarshal(&r); stop != nil {
				return
			}
			assert.Equal(c, 2, r.Version, "node %d: the version that answers the alias", node)
		}
	}, 5*time.Second, 50*time.Millisecond, "queries of the alias answered by version 2 on every node 5s after the alias switch")
	require.NoError(t, stop)
	var drop wire.IndexDropResult
	s.doRetry(t, 0, "DELETE", "/v1/trips/indexes/trip_index/versions/1", "").expect(t, 200).decode(t, &drop)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var st wire.IndexStatus
		if !s.poll(c, &stop, -1, "GET", "/v1/trips/indexes/trip_index", "", 200, &st) {
			return
		}
		v, _ := findVersion(st, 1)
		assert.Equal(c, wire.IndexDropped, v.State, "version 1 (%+v)", v)
	}, 20*time.Second, 100*time.Millisecond, "version 1 dropped within 20s of the drop")
	require.NoError(t, stop)
	// The dropped version's tables are gone: they count nothing, once node 0's replicas applied
	// the drop (the status above may come from another node).
	if n := s.c.Node(0); n != nil {
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			st, err := n.IndexTableStats(context.Background(), "trips", indexes.TableName("trip_index", 1), def1.Fields())
			assert.NoError(c, err, "stats of the dropped version's tables")
			assert.Equal(c, cluster.IndexStats{}, st, "stats of the dropped version's tables: want nothing")
		}, 10*time.Second, 50*time.Millisecond, "node 0 drops the dropped version's tables")
	}
	// The reader goes on after the drop: 10 more queries of the alias.
	after := asked.Load()
	require.Eventually(t, func() bool { return asked.Load() >= after+10 }, 10*time.Second, 10*time.Millisecond,
		"the reader queries the alias after the drop")
	stopTraffic()
	require.Empty(t, failures.list, "failed requests during the switch")
	_, saw1 := versions.Load(1)
	_, saw2 := versions.Load(2)
	t.Logf("%d queries (and %d answers 503, retried) and %d writes during the switch", queries.Load(), unavailable.Load(), len(written))
	require.True(t, saw1, "the reader saw version 1 (in %d queries)", queries.Load())
	require.True(t, saw2, "the reader saw version 2 (in %d queries)", queries.Load())
	require.GreaterOrEqual(t, queries.Load(), int64(10), "queries answered during the switch")

	// Every row written during the switch is in version 2, with its new field.
	want := map[string]bool{}
	for _, r := range written {
		want[r.String()] = true
	}
	weather := queryBody(t, indexes.Query{ShardValue: "carol", Where: []indexes.Cond{{Field: "reason", Op: "=", Value: "weather"}},
		Fields: []string{"reason"}, Limit: 1000})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var res wire.IndexQueryResult
		if !s.poll(c, &stop, -1, "POST", "/v1/trips/indexes/trip_index/query", weather, 200, &res) {
			return
		}
		got := map[string]bool{}
		for _, e := range res.Entries {
			got[e.RowKey] = true
		}
		assert.Equal(c, want, got, "rows of version 2 with reason weather")
	}, 30*time.Second, 100*time.Millisecond, "version 2 has the %d rows written during the switch", len(want))
	require.NoError(t, stop)
}
