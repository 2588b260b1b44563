package api_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// rowIn returns a row key of shard (of 16), the i-th such key of a seed.
func rowIn(shard, i int, seed string) string {
	for n := 0; ; n++ {
		u := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint(seed, i, n)))
		if cells.ShardOf(u, 16) == shard {
			return u.String()
		}
	}
}

// The log read's options: column filter, timestamp location, long poll and the batch form; and
// the consumer-group routes with their errors. Parallel: the cluster is the test's own, and the
// long polls' bounds (at least the wait; within 10s of a write) hold under load.
func TestLogAndGroups(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	s := &session{c: c}
	const shard = 5
	for i := 0; i < 3; i++ {
		r := rowIn(shard, i, "log")
		s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/A/1", `{"a":1}`).expect(t, 201)
		s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/B/1", `{"b":1}`).expect(t, 201)
	}
	mark := time.Now().UTC()
	// Time passing is what the timestamp read tells apart: the late cell is written well after
	// the mark, the others before it.
	time.Sleep(20 * time.Millisecond)
	late := rowIn(shard, 9, "log")
	s.do(t, 0, "PUT", "/v1/trips/cells/"+late+"/A/1", `{"a":2}`).expect(t, 201)

	t.Run("column filter", func(t *testing.T) {
		var res wire.ShardCellsResponse
		s.do(t, 1, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?column_key=B&limit=10", shard), "").expect(t, 200).decode(t, &res)
		require.Len(t, res.Cells, 3, "B cells")
		for _, c := range res.Cells {
			assert.Equal(t, "B", c.ColumnKey, "column of a cell from a B filter")
		}
		assert.Equal(t, int64(7), res.NextLocation, "next_location: past the filtered A cells")
		assert.Equal(t, int64(7), res.HighWater, "high_water")
	})
	t.Run("timestamp", func(t *testing.T) {
		var res wire.ShardCellsResponse
		q := url.Values{"location_type": {"timestamp"}, "location": {mark.Format(time.RFC3339Nano)}}
		s.do(t, 2, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?%s", shard, q.Encode()), "").expect(t, 200).decode(t, &res)
		require.Len(t, res.Cells, 1, "cells after the mark: only the one written after it (%+v)", res.Cells)
		assert.Equal(t, late, res.Cells[0].RowKey, "the cell written after the mark")
	})
	t.Run("long poll", func(t *testing.T) {
		// No cell arrives: the read waits its whole wait, then answers empty.
		start := time.Now()
		var res wire.ShardCellsResponse
		s.do(t, 0, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=7&wait=300ms&consistency=stale", shard), "").expect(t, 200).decode(t, &res)
		require.Empty(t, res.Cells, "a long poll with no new cell")
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "a long poll with no new cell answers after its whole wait")
		// A cell arrives during the wait: the read answers with it at once.
		written := make(chan error, 1)
		go func() {
			// Time passing is what is tested: the cell must arrive while the read waits, not
			// before it starts.
			time.Sleep(200 * time.Millisecond)
			a, err := s.tryDo(2, "PUT", "/v1/trips/cells/"+rowIn(shard, 20, "log")+"/A/1", `{"a":3}`)
			if err == nil {
				err = a.check(201)
			}
			written <- err
		}()
		start = time.Now()
		s.do(t, 1, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=7&wait=20s", shard), "").expect(t, 200).decode(t, &res)
		d := time.Since(start)
		require.NoError(t, <-written, "the write during the long poll")
		require.Len(t, res.Cells, 1, "a long poll during which a cell arrives: the new cell (%+v)", res.Cells)
		require.Equal(t, int64(8), res.Cells[0].AddedID, "added_id of the new cell")
		assert.LessOrEqual(t, d, 10*time.Second, "long poll answered soon after the write")
	})
	t.Run("batch", func(t *testing.T) {
		var res wire.ShardsCellsResponse
		body := fmt.Sprintf(`{"shards":[{"shard":%d,"location":0},{"shard":0,"location":0}],"column_key":"A","limit":2,"wait":"1s"}`, shard)
		s.do(t, 2, "POST", "/v1/trips/shards/cells", body).expect(t, 200).decode(t, &res)
		require.Len(t, res.Shards, 2, "pages of shards %d and 0 (%+v)", shard, res.Shards)
		require.Equal(t, []int{shard, 0}, []int{res.Shards[0].Shard, res.Shards[1].Shard}, "pages of shards %d and 0, in order", shard)
		if assert.Len(t, res.Shards[0].Cells, 2, "shard %d page: 2 A cells (%+v)", shard, res.Shards[0]) {
			assert.Equal(t, res.Shards[0].Cells[1].AddedID, res.Shards[0].NextLocation, "shard %d page: next_location at the last cell", shard)
		}
		// The same read, stale and bounded at 1s, through every node: the same page (the cells
		// were acknowledged more than 1s before).
		time.Sleep(time.Second)
		for node := range 3 {
			var b wire.ShardsCellsResponse
			body := fmt.Sprintf(`{"shards":[{"shard":%d,"location":0}],"column_key":"A","limit":2,"consistency":"stale","max_staleness":"1s"}`, shard)
			s.do(t, node, "POST", "/v1/trips/shards/cells", body).expect(t, 200).decode(t, &b)
			require.Len(t, b.Shards, 1)
			assert.Equal(t, res.Shards[0].Cells, b.Shards[0].Cells, "node %d: the page of a read bounded at 1s", node)
		}
		// Stored bodies: the stored form instead of JSON, the same value.
		var st wire.ShardsCellsResponse
		body = fmt.Sprintf(`{"shards":[{"shard":%d,"location":0}],"column_key":"A","limit":2,"body_encoding":"stored"}`, shard)
		s.do(t, 1, "POST", "/v1/trips/shards/cells", body).expect(t, 200).decode(t, &st)
		require.Len(t, st.Shards, 1, "stored bodies: the page of shard %d", shard)
		require.Len(t, st.Shards[0].Cells, len(res.Shards[0].Cells), "stored bodies: the cells of the JSON page")
		for i, c := range st.Shards[0].Cells {
			assert.Nil(t, c.Body, "stored cell %d: no JSON body", i)
			js, err := cells.Body(c.Stored).JSON()
			if assert.NoError(t, err, "stored cell %d: the stored body decodes", i) {
				assert.Equal(t, string(res.Shards[0].Cells[i].Body), string(js), "stored cell %d: the value of the JSON body", i)
			}
		}
	})
	t.Run("batch across partitions", func(t *testing.T) {
		// Shards 5 and 12 are in different partitions and both have cells: a long poll answers
		// both, not just the partition that answered first.
		s.do(t, 0, "PUT", "/v1/trips/cells/"+rowIn(12, 0, "log")+"/A/1", `{"a":12}`).expect(t, 201)
		for round := 0; round < 5; round++ {
			var res wire.ShardsCellsResponse
			s.do(t, round%3, "POST", "/v1/trips/shards/cells", fmt.Sprintf(`{"shards":[{"shard":%d},{"shard":12}],"wait":"2s"}`, shard)).expect(t, 200).decode(t, &res)
			for _, p := range res.Shards {
				require.NotEmpty(t, p.Cells, "round %d: shard %d page, its cells (%+v)", round, p.Shard, p)
				require.Positive(t, p.HighWater, "round %d: shard %d page, its high water (%+v)", round, p.Shard, p)
			}
		}
	})
	t.Run("groups", func(t *testing.T) {
		var hb wire.GroupResult
		s.do(t, 0, "POST", "/v1/trips/groups/g1/heartbeat", `{"worker":"w1","session_timeout":"10s"}`).expect(t, 200).decode(t, &hb)
		require.Len(t, hb.Assigned, 16, "heartbeat of the only worker: all 16 shards assigned (%+v)", hb)
		require.Len(t, hb.Members, 1, "heartbeat of the only worker: members (%+v)", hb)
		require.NotNil(t, hb.SessionExpires, "heartbeat of the only worker: a session expiry (%+v)", hb)
		l := hb.Assigned[shard]
		var cm wire.GroupResult
		s.do(t, 1, "POST", "/v1/trips/groups/g1/commit", fmt.Sprintf(`{"worker":"w1","commits":[{"shard":%d,"epoch":%d,"offset":3},{"shard":%d,"epoch":%d,"offset":4}]}`, shard, l.Epoch, shard, l.Epoch+1)).expect(t, 200).decode(t, &cm)
		require.Equal(t, []bool{true, false}, cm.Accepted, "commits at the lease's epoch and a wrong one: accepted")
		var st wire.GroupStatus
		s.do(t, 2, "GET", "/v1/trips/groups/g1", "").expect(t, 200).decode(t, &st)
		require.Greater(t, len(st.Shards), shard, "group status: shards (%+v)", st)
		sh := st.Shards[shard]
		assert.Equal(t, int64(3), sh.Offset, "status of shard %d: offset (%+v)", shard, sh)
		assert.Equal(t, "w1", sh.Owner, "status of shard %d: owner (%+v)", shard, sh)
		assert.GreaterOrEqual(t, sh.HighWater, int64(8), "status of shard %d: high water (%+v)", shard, sh)
		assert.Equal(t, sh.HighWater-3, sh.LagCells, "status of shard %d: lag, high_water-3 (%+v)", shard, sh)
		assert.Positive(t, sh.LagSeconds, "status of shard %d: an age (%+v)", shard, sh)
		var list wire.GroupsResponse
		s.do(t, 0, "GET", "/v1/trips/groups", "").expect(t, 200).decode(t, &list)
		assert.Equal(t, []string{"g1"}, list.Groups, "groups")
		var lv wire.GroupResult
		s.do(t, 0, "POST", "/v1/trips/groups/g1/leave", `{"worker":"w1"}`).expect(t, 200).decode(t, &lv)
		assert.Empty(t, lv.Members, "members after leave")
	})
	t.Run("rejected", func(t *testing.T) {
		cases := []struct {
			name, method, path, body string
			status                   int
			code, field              string
		}{
			{"bad location type", "GET", "/v1/trips/shards/0/cells?location_type=offset", ``, 400, "invalid_argument", "location_type"},
			{"timestamp without time", "GET", "/v1/trips/shards/0/cells?location_type=timestamp", ``, 400, "invalid_argument", "location"},
			{"bad timestamp", "GET", "/v1/trips/shards/0/cells?location_type=timestamp&location=yesterday", ``, 400, "invalid_argument", "location"},
			{"bad column filter", "GET", "/v1/trips/shards/0/cells?column_key=a-b", ``, 400, "invalid_argument", "column_key"},
			{"bad wait", "GET", "/v1/trips/shards/0/cells?wait=soon", ``, 400, "invalid_argument", "wait"},
			{"wait too long", "GET", "/v1/trips/shards/0/cells?wait=1h", ``, 400, "invalid_argument", "wait"},
			{"batch: no shards", "POST", "/v1/trips/shards/cells", `{}`, 400, "invalid_argument", "shards"},
			{"batch: shard out of range", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":16}]}`, 400, "invalid_argument", "shards[0].shard"},
			{"batch: shard twice", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1},{"shard":1}]}`, 400, "invalid_argument", "shards[1].shard"},
			{"batch: negative location", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1,"location":-1}]}`, 400, "invalid_argument", "shards[0].location"},
			{"batch: bad limit", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1}],"limit":5000}`, 400, "invalid_argument", "limit"},
			{"batch: bad body encoding", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1}],"body_encoding":"xml"}`, 400, "invalid_argument", "body_encoding"},
			{"batch: a bound on a strong read", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1}],"max_staleness":"1s"}`, 400, "invalid_argument", "max_staleness"},
			{"batch: a bound of two hours", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1}],"consistency":"stale","max_staleness":"2h"}`, 400, "invalid_argument", "max_staleness"},
			{"a bound that is no duration", "GET", "/v1/trips/shards/0/cells?consistency=stale&max_staleness=soon", ``, 400, "invalid_argument", "max_staleness"},
			{"bad body encoding", "GET", "/v1/trips/shards/0/cells?body_encoding=xml", ``, 400, "invalid_argument", "body_encoding"},
			{"batch: unknown field", "POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1}],"after":3}`, 400, "invalid_argument", "body"},
			{"group: bad name", "POST", "/v1/trips/groups/bad%20name/heartbeat", `{"worker":"w"}`, 400, "invalid_argument", "group"},
			{"group: unknown op", "POST", "/v1/trips/groups/g/explode", `{}`, 404, "not_found", ""},
			{"group: no worker", "POST", "/v1/trips/groups/g/heartbeat", `{}`, 400, "invalid_argument", "worker"},
			{"group: bad session", "POST", "/v1/trips/groups/g/heartbeat", `{"worker":"w","session_timeout":"forever"}`, 400, "invalid_argument", "session_timeout"},
			{"group: bad start", "POST", "/v1/trips/groups/g/heartbeat", `{"worker":"w","start":{"kind":"middle"}}`, 400, "invalid_argument", "start.kind"},
			{"group: commit shard", "POST", "/v1/trips/groups/g/commit", `{"worker":"w","commits":[{"shard":99,"epoch":1,"offset":1}]}`, 400, "invalid_argument", "commits[0].shard"},
			{"group: park nothing", "POST", "/v1/trips/groups/g/park", `{"worker":"w","epoch":1}`, 400, "invalid_argument", "park"},
			{"group: park bad row", "POST", "/v1/trips/groups/g/park", `{"worker":"w","epoch":1,"park":{"shard":1,"row_key":"x"}}`, 400, "invalid_argument", "park.row_key"},
			{"group: retry nothing", "POST", "/v1/trips/groups/g/retry", `{}`, 400, "invalid_argument", "ids"},
			{"group: unknown status", "GET", "/v1/trips/groups/never", ``, 404, "not_found", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s.do(t, -1, tc.method, tc.path, tc.body).expectError(t, tc.status, tc.code, tc.field)
			})
		}
		// Nothing was created by the refused group commands.
		var list wire.GroupsResponse
		s.do(t, 0, "GET", "/v1/trips/groups", "").expect(t, 200).decode(t, &list)
		for _, g := range list.Groups {
			assert.Equal(t, "g1", g, "a group: a refused command created none")
		}
	})
}
