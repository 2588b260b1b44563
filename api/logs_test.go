package api_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/clustertest"
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
// the consumer-group routes with their errors.
func TestLogAndGroups(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	s := &session{t: t, c: c}
	const shard = 5
	for i := 0; i < 3; i++ {
		r := rowIn(shard, i, "log")
		s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/A/1", `{"a":1}`).expect(t, 201)
		s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/B/1", `{"b":1}`).expect(t, 201)
	}
	mark := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	late := rowIn(shard, 9, "log")
	s.do(t, 0, "PUT", "/v1/trips/cells/"+late+"/A/1", `{"a":2}`).expect(t, 201)

	t.Run("column filter", func(t *testing.T) {
		var res wire.ShardCellsResponse
		s.do(t, 1, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?column_key=B&limit=10", shard), "").expect(t, 200).decode(t, &res)
		if len(res.Cells) != 3 {
			t.Fatalf("got %d B cells, want 3", len(res.Cells))
		}
		for _, c := range res.Cells {
			if c.ColumnKey != "B" {
				t.Errorf("got a %s cell from a B filter", c.ColumnKey)
			}
		}
		if res.HighWater != 7 || res.NextLocation != 7 {
			t.Errorf("got next_location %d high_water %d, want 7 and 7 (past the filtered A cells)", res.NextLocation, res.HighWater)
		}
	})
	t.Run("timestamp", func(t *testing.T) {
		var res wire.ShardCellsResponse
		q := url.Values{"location_type": {"timestamp"}, "location": {mark.Format(time.RFC3339Nano)}}
		s.do(t, 2, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?%s", shard, q.Encode()), "").expect(t, 200).decode(t, &res)
		if len(res.Cells) != 1 || res.Cells[0].RowKey != late {
			t.Fatalf("got %+v, want only the cell written after the mark", res.Cells)
		}
	})
	t.Run("long poll", func(t *testing.T) {
		// No cell arrives: the read waits its whole wait, then answers empty.
		start := time.Now()
		var res wire.ShardCellsResponse
		s.do(t, 0, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=7&wait=300ms&consistency=stale", shard), "").expect(t, 200).decode(t, &res)
		if len(res.Cells) != 0 || time.Since(start) < 300*time.Millisecond {
			t.Fatalf("got %d cells after %s, want none after at least 300ms", len(res.Cells), time.Since(start))
		}
		// A cell arrives during the wait: the read answers with it at once.
		go func() {
			time.Sleep(200 * time.Millisecond)
			s.do(t, 2, "PUT", "/v1/trips/cells/"+rowIn(shard, 20, "log")+"/A/1", `{"a":3}`)
		}()
		start = time.Now()
		s.do(t, 1, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=7&wait=20s", shard), "").expect(t, 200).decode(t, &res)
		if len(res.Cells) != 1 || res.Cells[0].AddedID != 8 {
			t.Fatalf("got %+v, want the new cell (added_id 8)", res.Cells)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("long poll answered after %s, want soon after the write", d)
		}
	})
	t.Run("batch", func(t *testing.T) {
		var res wire.ShardsCellsResponse
		body := fmt.Sprintf(`{"shards":[{"shard":%d,"location":0},{"shard":0,"location":0}],"column_key":"A","limit":2,"wait":"1s"}`, shard)
		s.do(t, 2, "POST", "/v1/trips/shards/cells", body).expect(t, 200).decode(t, &res)
		if len(res.Shards) != 2 || res.Shards[0].Shard != shard || res.Shards[1].Shard != 0 {
			t.Fatalf("got %+v, want pages of shards %d and 0 in order", res.Shards, shard)
		}
		if len(res.Shards[0].Cells) != 2 || res.Shards[0].NextLocation != res.Shards[0].Cells[1].AddedID {
			t.Errorf("shard %d page: got %+v, want 2 A cells and next_location at the last", shard, res.Shards[0])
		}
		// Stored bodies: the stored form instead of JSON, the same value.
		var st wire.ShardsCellsResponse
		body = fmt.Sprintf(`{"shards":[{"shard":%d,"location":0}],"column_key":"A","limit":2,"body_encoding":"stored"}`, shard)
		s.do(t, 1, "POST", "/v1/trips/shards/cells", body).expect(t, 200).decode(t, &st)
		for i, c := range st.Shards[0].Cells {
			js, err := cells.Body(c.Stored).JSON()
			if c.Body != nil || err != nil || string(js) != string(res.Shards[0].Cells[i].Body) {
				t.Errorf("stored cell %d: got body %s stored as %s (%v), want no body and %s", i, c.Body, js, err, res.Shards[0].Cells[i].Body)
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
				if len(p.Cells) == 0 || p.HighWater < 1 {
					t.Fatalf("round %d: shard %d page %+v, want its cells and high water", round, p.Shard, p)
				}
			}
		}
	})
	t.Run("groups", func(t *testing.T) {
		var hb wire.GroupResult
		s.do(t, 0, "POST", "/v1/trips/groups/g1/heartbeat", `{"worker":"w1","session_timeout":"10s"}`).expect(t, 200).decode(t, &hb)
		if len(hb.Assigned) != 16 || len(hb.Members) != 1 || hb.SessionExpires == nil {
			t.Fatalf("heartbeat of the only worker: got %+v, want all 16 shards", hb)
		}
		l := hb.Assigned[shard]
		var cm wire.GroupResult
		s.do(t, 1, "POST", "/v1/trips/groups/g1/commit", fmt.Sprintf(`{"worker":"w1","commits":[{"shard":%d,"epoch":%d,"offset":3},{"shard":%d,"epoch":%d,"offset":4}]}`, shard, l.Epoch, shard, l.Epoch+1)).expect(t, 200).decode(t, &cm)
		if len(cm.Accepted) != 2 || !cm.Accepted[0] || cm.Accepted[1] {
			t.Fatalf("commits at the lease's epoch and a wrong one: got accepted %v, want [true false]", cm.Accepted)
		}
		var st wire.GroupStatus
		s.do(t, 2, "GET", "/v1/trips/groups/g1", "").expect(t, 200).decode(t, &st)
		sh := st.Shards[shard]
		if sh.Offset != 3 || sh.Owner != "w1" || sh.HighWater < 8 || sh.LagCells != sh.HighWater-3 || sh.LagSeconds <= 0 {
			t.Errorf("status of shard %d: got %+v, want offset 3, owner w1, lag high_water-3 and an age", shard, sh)
		}
		var list wire.GroupsResponse
		s.do(t, 0, "GET", "/v1/trips/groups", "").expect(t, 200).decode(t, &list)
		if len(list.Groups) != 1 || list.Groups[0] != "g1" {
			t.Errorf("groups: got %v, want [g1]", list.Groups)
		}
		var lv wire.GroupResult
		s.do(t, 0, "POST", "/v1/trips/groups/g1/leave", `{"worker":"w1"}`).expect(t, 200).decode(t, &lv)
		if len(lv.Members) != 0 {
			t.Errorf("after leave: got members %+v, want none", lv.Members)
		}
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
			if g != "g1" {
				t.Errorf("a refused command created group %q", g)
			}
		}
	})
}
