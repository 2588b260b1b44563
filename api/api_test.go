package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// suite runs the whole API suite against a 3-node cluster on each engine.
func TestAPI(t *testing.T) {
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{Engine: engine,
				API: api.Config{MaxCellBodyBytes: 4096, MaxRequestBytes: 64 << 10, MaxBatchCells: 10}})
			s := &session{t: t, c: c}
			t.Run("put_cell", s.testPutCell)
			t.Run("put_cells", s.testPutCells)
			t.Run("reads", s.testReads)
			t.Run("batch_get", s.testBatchGet)
			t.Run("shard_log", s.testShardLog)
			t.Run("rejected", s.testRejected)
			t.Run("status", s.testStatus)
		})
	}
}

type session struct {
	t *testing.T
	c *clustertest.Cluster
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request to node i (round robin over the nodes when i < 0).
func (s *session) do(t *testing.T, node int, method, path, body string) answer {
	t.Helper()
	if node < 0 {
		node = int(time.Now().UnixNano() % 3)
	}
	req, err := http.NewRequest(method, s.c.URL(node)+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

func (a answer) expect(t *testing.T, status int) answer {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d; body %s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	return a
}

// expectError checks an error answer's status, code and field.
func (a answer) expectError(t *testing.T, status int, code, field string) {
	t.Helper()
	a.expect(t, status)
	var e wire.ErrorBody
	a.decode(t, &e)
	if e.Error.Code != code || e.Error.Field != field || e.Error.Message == "" {
		t.Fatalf("error %+v, want code %q field %q and a message", e.Error, code, field)
	}
}

func row(i int) string { return uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint("api", i))).String() }

func (s *session) testPutCell(t *testing.T) {
	r := row(1)
	path := "/v1/trips/cells/" + r + "/BASE/1"
	var res wire.PutResult
	s.do(t, 0, "PUT", path, `{"fare": 10, "city": "SF"}`).expect(t, 201).decode(t, &res)
	if res.Status != "created" || res.RowKey != r || res.ColumnKey != "BASE" || res.RefKey != 1 || res.AddedID < 1 {
		t.Fatalf("created: %+v", res)
	}
	var again wire.PutResult
	s.do(t, 1, "PUT", path, `{"city":"SF","fare":10.0}`).expect(t, 200).decode(t, &again)
	if again.Status != "exists" || again.AddedID != res.AddedID {
		t.Fatalf("same body again: %+v, want exists with added_id %d", again, res.AddedID)
	}
	s.do(t, 2, "PUT", path, `{"fare": 11}`).expectError(t, 409, "conflict", "")
	// The conflicting write changed nothing.
	var c wire.Cell
	s.do(t, 2, "GET", path, "").expect(t, 200).decode(t, &c)
	if string(c.Body) != `{"city":"SF","fare":10}` {
		t.Fatalf("body after conflict %s", c.Body)
	}
}

func (s *session) testPutCells(t *testing.T) {
	cells := []string{}
	for i := 0; i < 6; i++ {
		cells = append(cells, fmt.Sprintf(`{"row_key":%q,"column_key":"BASE","ref_key":%d,"body":{"i":%d}}`, row(100+i), i, i))
	}
	cells = append(cells, fmt.Sprintf(`{"row_key":%q,"column_key":"BASE","ref_key":0,"body":{"i":0}}`, row(100)))   // same: exists
	cells = append(cells, fmt.Sprintf(`{"row_key":%q,"column_key":"BASE","ref_key":1,"body":{"i":"x"}}`, row(101))) // conflict
	var res wire.PutCellsResponse
	s.do(t, -1, "POST", "/v1/trips/cells", `{"cells":[`+strings.Join(cells, ",")+`]}`).expect(t, 200).decode(t, &res)
	want := []string{"created", "created", "created", "created", "created", "created", "exists", "conflict"}
	if len(res.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(res.Results), len(want))
	}
	for i, r := range res.Results {
		if r.Status != want[i] {
			t.Errorf("cell %d: status %s, want %s", i, r.Status, want[i])
		}
	}
	if res.Results[6].AddedID != res.Results[0].AddedID || res.Results[0].RowKey != row(100) || res.Results[5].RefKey != 5 {
		t.Errorf("results don't match the request: %+v", res.Results)
	}
	var empty wire.PutCellsResponse
	s.do(t, -1, "POST", "/v1/trips/cells", `{"cells":[]}`).expect(t, 200).decode(t, &empty)
	if len(empty.Results) != 0 {
		t.Errorf("empty batch: %+v", empty)
	}
}

func (s *session) testReads(t *testing.T) {
	r := row(2)
	for ref, body := range map[int]string{1: `{"v":1}`, 5: `{"v":5}`, 3: `{"v":3}`} {
		s.do(t, 0, "PUT", fmt.Sprintf("/v1/trips/cells/%s/STATUS/%d", r, ref), body).expect(t, 201)
	}
	s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/BASE/7", `{"b":true}`).expect(t, 201)
	for node := 0; node < 3; node++ {
		for _, q := range []string{"", "?consistency=strong", "?consistency=stale"} {
			var latest wire.Cell
			a := s.do(t, node, "GET", "/v1/trips/cells/"+r+"/STATUS"+q, "")
			if q == "?consistency=stale" && a.status == 404 {
				continue // a stale replica may not have applied it yet
			}
			a.expect(t, 200).decode(t, &latest)
			if latest.RefKey != 5 || string(latest.Body) != `{"v":5}` || latest.CreatedAt.Location() != time.UTC || latest.CreatedAt.IsZero() {
				t.Fatalf("node %d latest%s: %+v, want ref 5", node, q, latest)
			}
			var one wire.Cell
			s.do(t, node, "GET", "/v1/trips/cells/"+r+"/STATUS/3"+q, "").expect(t, 200).decode(t, &one)
			if one.RefKey != 3 || string(one.Body) != `{"v":3}` {
				t.Fatalf("node %d get_cell: %+v", node, one)
			}
		}
		var rowCells wire.CellsResponse
		s.do(t, node, "GET", "/v1/trips/cells/"+r, "").expect(t, 200).decode(t, &rowCells)
		if len(rowCells.Cells) != 2 || rowCells.Cells[0].ColumnKey != "BASE" || rowCells.Cells[1].ColumnKey != "STATUS" || rowCells.Cells[1].RefKey != 5 {
			t.Fatalf("row: %+v, want BASE/7 and STATUS/5", rowCells.Cells)
		}
	}
	s.do(t, 1, "GET", "/v1/trips/cells/"+r+"/STATUS/4", "").expectError(t, 404, "not_found", "")
	s.do(t, 1, "GET", "/v1/trips/cells/"+r+"/NOPE", "").expectError(t, 404, "not_found", "")
	var none wire.CellsResponse
	s.do(t, 1, "GET", "/v1/trips/cells/"+row(999), "").expect(t, 200).decode(t, &none)
	if len(none.Cells) != 0 {
		t.Fatalf("row never written: %+v", none)
	}
}

func (s *session) testBatchGet(t *testing.T) {
	r := row(3)
	s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/A/1", `{"a":1}`).expect(t, 201)
	s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/A/2", `{"a":2}`).expect(t, 201)
	req := fmt.Sprintf(`{"keys":[{"row_key":%q,"column_key":"A","ref_key":1},{"row_key":%q,"column_key":"A"},{"row_key":%q,"column_key":"A","ref_key":9},{"row_key":%q,"column_key":"B"}]}`, r, r, r, row(4))
	var res wire.GetCellsResponse
	s.do(t, 2, "POST", "/v1/trips/cells/get", req).expect(t, 200).decode(t, &res)
	if len(res.Cells) != 2 || res.Cells[0].RefKey != 1 || res.Cells[1].RefKey != 2 {
		t.Fatalf("cells %+v, want A/1 then A/2 (latest)", res.Cells)
	}
	if len(res.Missing) != 2 || res.Missing[0].RefKey == nil || *res.Missing[0].RefKey != "9" || res.Missing[1].RowKey != row(4) || res.Missing[1].RefKey != nil {
		t.Fatalf("missing %+v", res.Missing)
	}
}

func (s *session) testShardLog(t *testing.T) {
	var total int
	for shard := 0; shard < 16; shard++ {
		after, prev := int64(0), int64(0)
		for {
			var res wire.ShardCellsResponse
			s.do(t, shard%3, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=%d&limit=2", shard, after), "").expect(t, 200).decode(t, &res)
			for _, c := range res.Cells {
				if c.AddedID <= prev {
					t.Fatalf("shard %d: added_id %d after %d", shard, c.AddedID, prev)
				}
				prev = c.AddedID
			}
			total += len(res.Cells)
			if len(res.Cells) == 0 {
				if res.NextLocation != after {
					t.Fatalf("empty page: next_location %d, want %d", res.NextLocation, after)
				}
				break
			}
			if res.NextLocation != prev {
				t.Fatalf("next_location %d, want the last added_id %d", res.NextLocation, prev)
			}
			after = res.NextLocation
		}
	}
	if total == 0 {
		t.Fatal("the shard logs are empty")
	}
}

// cellCount counts every cell through the shard logs (strong reads).
func (s *session) cellCount(t *testing.T) int {
	n := 0
	for shard := 0; shard < 16; shard++ {
		var res wire.ShardCellsResponse
		s.do(t, 0, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?limit=1000", shard), "").expect(t, 200).decode(t, &res)
		n += len(res.Cells)
	}
	return n
}

// Every rejected request answers the right 4xx naming the field, and writes nothing.
func (s *session) testRejected(t *testing.T) {
	r := row(5)
	good := fmt.Sprintf(`{"row_key":%q,"column_key":"BASE","ref_key":1,"body":{"ok":true}}`, r)
	batch := func(bad string) string { return `{"cells":[` + good + `,` + bad + `]}` }
	big := `{"x":"` + strings.Repeat("y", 5000) + `"}`
	var many []string
	for i := 0; i < 11; i++ {
		many = append(many, good)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"row key not a UUID", "PUT", "/v1/trips/cells/not-a-uuid/BASE/1", `{}`, 400, "invalid_argument", "row_key"},
		{"row key without hyphens", "PUT", "/v1/trips/cells/" + strings.ReplaceAll(r, "-", "") + "/BASE/1", `{}`, 400, "invalid_argument", "row_key"},
		{"column key with a dash", "PUT", "/v1/trips/cells/" + r + "/BA-SE/1", `{}`, 400, "invalid_argument", "column_key"},
		{"column key too long", "PUT", "/v1/trips/cells/" + r + "/" + strings.Repeat("C", 65) + "/1", `{}`, 400, "invalid_argument", "column_key"},
		{"negative ref key", "PUT", "/v1/trips/cells/" + r + "/BASE/-1", `{}`, 400, "invalid_argument", "ref_key"},
		{"fractional ref key", "PUT", "/v1/trips/cells/" + r + "/BASE/1.5", `{}`, 400, "invalid_argument", "ref_key"},
		{"ref key overflows", "PUT", "/v1/trips/cells/" + r + "/BASE/9223372036854775808", `{}`, 400, "invalid_argument", "ref_key"},
		{"body an array", "PUT", "/v1/trips/cells/" + r + "/BASE/1", `[1,2]`, 400, "invalid_argument", "body"},
		{"body not JSON", "PUT", "/v1/trips/cells/" + r + "/BASE/1", `{"a":`, 400, "invalid_argument", "body"},
		{"body empty", "PUT", "/v1/trips/cells/" + r + "/BASE/1", ``, 400, "invalid_argument", "body"},
		{"body too large", "PUT", "/v1/trips/cells/" + r + "/BASE/1", big, 413, "too_large", "body"},
		{"unknown datastore", "PUT", "/v1/nope/cells/" + r + "/BASE/1", `{}`, 404, "not_found", ""},
		{"unknown route", "GET", "/v2/whatever", ``, 404, "not_found", ""},
		{"method", "DELETE", "/v1/trips/cells/" + r + "/BASE/1", ``, 405, "method_not_allowed", ""},
		{"batch: bad row key at 1", "POST", "/v1/trips/cells", batch(`{"row_key":"x","column_key":"BASE","ref_key":1,"body":{}}`), 400, "invalid_argument", "cells[1].row_key"},
		{"batch: bad column at 1", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"","ref_key":1,"body":{}}`, row(6))), 400, "invalid_argument", "cells[1].column_key"},
		{"batch: quoted ref key", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"A","ref_key":"1","body":{}}`, row(6))), 400, "invalid_argument", "cells[1].ref_key"},
		{"batch: fractional ref key", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"A","ref_key":1.5,"body":{}}`, row(6))), 400, "invalid_argument", "cells[1].ref_key"},
		{"batch: missing ref key", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"A","body":{}}`, row(6))), 400, "invalid_argument", "cells[1].ref_key"},
		{"batch: body a string", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"A","ref_key":1,"body":"s"}`, row(6))), 400, "invalid_argument", "cells[1].body"},
		{"batch: body missing", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"A","ref_key":1}`, row(6))), 400, "invalid_argument", "cells[1].body"},
		{"batch: unknown field", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"A","ref_key":1,"body":{},"extra":1}`, row(6))), 400, "invalid_argument", "body"},
		{"batch: cell body too large", "POST", "/v1/trips/cells", batch(fmt.Sprintf(`{"row_key":%q,"column_key":"A","ref_key":1,"body":%s}`, row(6), big)), 413, "too_large", "cells[1].body"},
		{"batch: too many cells", "POST", "/v1/trips/cells", `{"cells":[` + strings.Join(many, ",") + `]}`, 413, "too_large", "cells"},
		{"batch: request too large", "POST", "/v1/trips/cells", `{"cells":[` + strings.Repeat(" ", 70<<10) + `]}`, 413, "too_large", "body"},
		{"batch: no cells", "POST", "/v1/trips/cells", `{}`, 400, "invalid_argument", "cells"},
		{"batch: not an object", "POST", "/v1/trips/cells", `[]`, 400, "invalid_argument", "body"},
		{"batch: trailing data", "POST", "/v1/trips/cells", `{"cells":[]} {}`, 400, "invalid_argument", "body"},
		{"get: bad consistency", "GET", "/v1/trips/cells/" + r + "/BASE?consistency=eventual", ``, 400, "invalid_argument", "consistency"},
		{"get: bad ref key", "GET", "/v1/trips/cells/" + r + "/BASE/x", ``, 400, "invalid_argument", "ref_key"},
		{"get: bad row key", "GET", "/v1/trips/cells/123", ``, 400, "invalid_argument", "row_key"},
		{"batch get: bad key at 0", "POST", "/v1/trips/cells/get", `{"keys":[{"row_key":"x","column_key":"A"}]}`, 400, "invalid_argument", "keys[0].row_key"},
		{"batch get: too many", "POST", "/v1/trips/cells/get", `{"keys":[` + strings.Repeat(fmt.Sprintf(`{"row_key":%q,"column_key":"A"},`, r), 10) + fmt.Sprintf(`{"row_key":%q,"column_key":"A"}`, r) + `]}`, 413, "too_large", "keys"},
		{"shard: out of range", "GET", "/v1/trips/shards/16/cells", ``, 400, "invalid_argument", "shard"},
		{"shard: negative", "GET", "/v1/trips/shards/-1/cells", ``, 400, "invalid_argument", "shard"},
		{"shard: bad location", "GET", "/v1/trips/shards/0/cells?location=-3", ``, 400, "invalid_argument", "location"},
		{"shard: bad limit", "GET", "/v1/trips/shards/0/cells?limit=0", ``, 400, "invalid_argument", "limit"},
		{"shard: limit too large", "GET", "/v1/trips/shards/0/cells?limit=1001", ``, 400, "invalid_argument", "limit"},
	}
	before := s.cellCount(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.do(t, -1, tc.method, tc.path, tc.body).expectError(t, tc.status, tc.code, tc.field)
		})
	}
	if after := s.cellCount(t); after != before {
		t.Fatalf("rejected requests wrote %d cells", after-before)
	}
	// The good cell of the rejected batches was never written either.
	s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/BASE/1", "").expectError(t, 404, "not_found", "")
}

func (s *session) testStatus(t *testing.T) {
	for node := 0; node < 3; node++ {
		s.do(t, node, "GET", "/healthz", "").expect(t, 200)
		s.do(t, node, "GET", "/readyz", "").expect(t, 200)
		s.do(t, node, "GET", "/readyz?datastore=trips", "").expect(t, 200)
		var st wire.ClusterStatus
		s.do(t, node, "GET", "/v1/cluster", "").expect(t, 200).decode(t, &st)
		if st.Node != fmt.Sprintf("n%d", node+1) || len(st.Nodes) != 3 || len(st.Datastores) != 1 {
			t.Fatalf("node %d status: %+v", node, st)
		}
		ds := st.Datastores[0]
		if ds.Name != "trips" || ds.Mode != s.c.Topology.Datastores[0].Mode || ds.Shards != 16 || len(ds.Partitions) != 2 {
			t.Fatalf("datastore %+v", ds)
		}
		for _, p := range ds.Partitions {
			if ds.Mode == "async" {
				roles := map[string]int{}
				for _, m := range p.Members {
					roles[m.Role]++
				}
				if p.Cluster == "" || p.Master == "" || roles["master"] != 1 || roles["minion"] != 2 {
					t.Fatalf("async partition %+v", p)
				}
				continue
			}
			if !p.Local || p.Leader == "" || p.AppliedIndex == 0 || p.CommitIndex < p.AppliedIndex {
				t.Fatalf("partition %+v", p)
			}
		}
	}
}
