package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/wire"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// TestAPI runs the whole API suite against a 3-node cluster on each engine. Parallel, one
// engine beside the other: each cluster has its own ports, directories and database prefix.
func TestAPI(t *testing.T) {
	t.Parallel()
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			c := clustertest.Start(t, clustertest.Options{Engine: engine,
				API: api.Config{MaxCellBodyBytes: 4096, MaxRequestBytes: 64 << 10, MaxBatchCells: 10}})
			s := &session{c: c}
			t.Run("put_cell", s.testPutCell)
			t.Run("put_cells", s.testPutCells)
			t.Run("reads", s.testReads)
			t.Run("batch_get", s.testBatchGet)
			t.Run("versions", s.testVersions)
			t.Run("conditional", s.testConditional)
			t.Run("idempotency", s.testIdempotency)
			t.Run("transactions", s.testTransactions)
			t.Run("row_keys", s.testRowKeys)
			t.Run("strict", s.testStrict)
			t.Run("shard_log", s.testShardLog)
			t.Run("rejected", s.testRejected)
			t.Run("status", s.testStatus)
			t.Run("erase", s.testErase)
			t.Run("schemas", s.testSchemas)
			t.Run("ordered", s.testOrdered)
		})
	}
}

func row(i int) string { return uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint("api", i))).String() }

func (s *session) testPutCell(t *testing.T) {
	r := row(1)
	path := "/v1/trips/cells/" + r + "/BASE/1"
	var res wire.PutResult
	s.do(t, 0, "PUT", path, `{"fare": 10, "city": "SF"}`).expect(t, 201).decode(t, &res)
	require.Positive(t, res.AddedID, "created: added_id (%+v)", res)
	assert.Equal(t, wire.PutResult{RowKey: r, ColumnKey: "BASE", RefKey: 1, Status: "created", AddedID: res.AddedID}, res, "created")
	var again wire.PutResult
	s.do(t, 1, "PUT", path, `{"city":"SF","fare":10.0}`).expect(t, 200).decode(t, &again)
	assert.Equal(t, "exists", again.Status, "same body again: status (%+v)", again)
	assert.Equal(t, res.AddedID, again.AddedID, "same body again: added_id of the first write (%+v)", again)
	s.do(t, 2, "PUT", path, `{"fare": 11}`).expectError(t, 409, "conflict", "")
	// The conflicting write changed nothing.
	var c wire.Cell
	s.do(t, 2, "GET", path, "").expect(t, 200).decode(t, &c)
	assert.Equal(t, `{"city":"SF","fare":10}`, string(c.Body), "body after the conflict")
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
	require.Len(t, res.Results, len(want), "one result per cell")
	var got []string
	for _, r := range res.Results {
		got = append(got, r.Status)
	}
	assert.Equal(t, want, got, "statuses of the cells, in request order")
	assert.Equal(t, res.Results[0].AddedID, res.Results[6].AddedID, "the cell that exists: the added_id of cell 0 (%+v)", res.Results)
	assert.Equal(t, row(100), res.Results[0].RowKey, "row key of cell 0 (%+v)", res.Results)
	assert.Equal(t, int64(5), res.Results[5].RefKey, "ref key of cell 5 (%+v)", res.Results)
	var empty wire.PutCellsResponse
	s.do(t, -1, "POST", "/v1/trips/cells", `{"cells":[]}`).expect(t, 200).decode(t, &empty)
	assert.Empty(t, empty.Results, "empty batch")
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
			if q == "?consistency=stale" {
				// A stale read may miss recent writes: wait until this replica applied all four.
				require.Eventually(t, func() bool {
					a, err := s.tryDo(node, "GET", "/v1/trips/cells/"+r+"/BASE/7"+q, "")
					return err == nil && a.status == 200
				}, 10*time.Second, 10*time.Millisecond, "node %d never applied the writes", node)
			}
			s.do(t, node, "GET", "/v1/trips/cells/"+r+"/STATUS"+q, "").expect(t, 200).decode(t, &latest)
			require.Equal(t, int64(5), latest.RefKey, "node %d latest%s: ref key (%+v)", node, q, latest)
			require.Equal(t, `{"v":5}`, string(latest.Body), "node %d latest%s: body", node, q)
			require.False(t, latest.CreatedAt.IsZero(), "node %d latest%s: a created_at (%+v)", node, q, latest)
			require.Equal(t, time.UTC, latest.CreatedAt.Location(), "node %d latest%s: created_at in UTC", node, q)
			var one wire.Cell
			s.do(t, node, "GET", "/v1/trips/cells/"+r+"/STATUS/3"+q, "").expect(t, 200).decode(t, &one)
			require.Equal(t, int64(3), one.RefKey, "node %d get_cell%s: ref key (%+v)", node, q, one)
			require.Equal(t, `{"v":3}`, string(one.Body), "node %d get_cell%s: body", node, q)
		}
		var rowCells wire.CellsResponse
		s.do(t, node, "GET", "/v1/trips/cells/"+r, "").expect(t, 200).decode(t, &rowCells)
		require.Len(t, rowCells.Cells, 2, "node %d row: BASE/7 and STATUS/5 (%+v)", node, rowCells.Cells)
		require.Equal(t, []string{"BASE/7", "STATUS/5"}, []string{cellName(rowCells.Cells[0]), cellName(rowCells.Cells[1])}, "node %d row: the latest cell of each column", node)
	}
	// A read bounded at 100ms, 150ms after the writes: every node reflects all of them.
	time.Sleep(150 * time.Millisecond)
	for node := 0; node < 3; node++ {
		var latest wire.Cell
		s.do(t, node, "GET", "/v1/trips/cells/"+r+"/STATUS?consistency=stale&max_staleness=100ms", "").expect(t, 200).decode(t, &latest)
		require.Equal(t, int64(5), latest.RefKey, "node %d latest, bounded at 100ms: ref key (%+v)", node, latest)
	}
	for _, q := range []string{"?max_staleness=2s", "?consistency=strong&max_staleness=2s", "?consistency=stale&max_staleness=0s",
		"?consistency=stale&max_staleness=2", "?consistency=stale&max_staleness=2h", "?consistency=stale&max_staleness=-1s"} {
		s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/STATUS"+q, "").expectError(t, 400, "invalid_argument", "max_staleness")
	}
	s.do(t, 1, "GET", "/v1/trips/cells/"+r+"/STATUS/4", "").expectError(t, 404, "not_found", "")
	s.do(t, 1, "GET", "/v1/trips/cells/"+r+"/NOPE", "").expectError(t, 404, "not_found", "")
	var none wire.CellsResponse
	s.do(t, 1, "GET", "/v1/trips/cells/"+row(999), "").expect(t, 200).decode(t, &none)
	assert.Empty(t, none.Cells, "row never written")
}

// cellName is a cell's column and ref key, as COLUMN/REF.
func cellName(c wire.Cell) string { return fmt.Sprintf("%s/%d", c.ColumnKey, c.RefKey) }

func (s *session) testBatchGet(t *testing.T) {
	r := row(3)
	s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/A/1", `{"a":1}`).expect(t, 201)
	s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/A/2", `{"a":2}`).expect(t, 201)
	req := fmt.Sprintf(`{"keys":[{"row_key":%q,"column_key":"A","ref_key":1},{"row_key":%q,"column_key":"A"},{"row_key":%q,"column_key":"A","ref_key":9},{"row_key":%q,"column_key":"B"}]}`, r, r, r, row(4))
	var res wire.GetCellsResponse
	s.do(t, 2, "POST", "/v1/trips/cells/get", req).expect(t, 200).decode(t, &res)
	require.Len(t, res.Cells, 2, "cells found (%+v)", res.Cells)
	assert.Equal(t, []string{"A/1", "A/2"}, []string{cellName(res.Cells[0]), cellName(res.Cells[1])}, "cells found: A/1 then A/2 (latest)")
	nine := json.Number("9")
	assert.Equal(t, []wire.GetKey{{RowKey: r, ColumnKey: "A", RefKey: &nine}, {RowKey: row(4), ColumnKey: "B"}}, res.Missing,
		"missing keys: A/9, and B (latest) of a row never written")
	// One snapshot per partition read, by partition: the partitions of row(3) and row(4).
	ds := s.c.Topology.Datastores[0]
	want := map[int]bool{}
	for _, rk := range []string{r, row(4)} {
		shard := cells.ShardOf(uuid.MustParse(rk), ds.Shards)
		for _, p := range ds.Partitions {
			if p.Shards().Contains(shard) {
				want[p.ID] = true
			}
		}
	}
	require.Len(t, res.Snapshots, len(want), "snapshots (%+v)", res.Snapshots)
	for i, sn := range res.Snapshots {
		assert.True(t, want[sn.Partition], "snapshot of partition %d, which holds none of the keys", sn.Partition)
		if i > 0 {
			assert.Less(t, res.Snapshots[i-1].Partition, sn.Partition, "snapshots by partition")
		}
		if ds.Mode == "async" {
			assert.Zero(t, sn.AppliedIndex, "async mode has no raft index")
		} else {
			assert.Positive(t, sn.AppliedIndex, "partition %d: the raft index of the snapshot", sn.Partition)
		}
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
				require.Greater(t, c.AddedID, prev, "shard %d: added_id after %d", shard, prev)
				prev = c.AddedID
			}
			total += len(res.Cells)
			if len(res.Cells) == 0 {
				require.Equal(t, after, res.NextLocation, "shard %d: next_location of an empty page", shard)
				break
			}
			require.Equal(t, prev, res.NextLocation, "shard %d: next_location, want the last added_id", shard)
			after = res.NextLocation
		}
	}
	assert.NotZero(t, total, "cells in the shard logs")
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
		{"versions: bad limit", "GET", "/v1/trips/cells/" + r + "/BASE/versions?limit=0", ``, 400, "invalid_argument", "limit"},
		{"versions: limit too large", "GET", "/v1/trips/cells/" + r + "/BASE/versions?limit=1001", ``, 400, "invalid_argument", "limit"},
		{"versions: bad order", "GET", "/v1/trips/cells/" + r + "/BASE/versions?order=sideways", ``, 400, "invalid_argument", "order"},
		{"versions: negative from", "GET", "/v1/trips/cells/" + r + "/BASE/versions?from_ref_key=-1", ``, 400, "invalid_argument", "from_ref_key"},
		{"versions: bad from", "GET", "/v1/trips/cells/" + r + "/BASE/versions?from_ref_key=x", ``, 400, "invalid_argument", "from_ref_key"},
		{"versions: bad column", "GET", "/v1/trips/cells/" + r + "/BA-SE/versions", ``, 400, "invalid_argument", "column_key"},
		{"versions: bad row key", "GET", "/v1/trips/cells/nope/BASE/versions", ``, 400, "invalid_argument", "row_key"},
		{"versions: method", "PUT", "/v1/trips/cells/" + r + "/BASE/versions", `{}`, 405, "method_not_allowed", ""},
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
	assert.Equal(t, before, s.cellCount(t), "cells after the rejected requests: they wrote nothing")
	// The good cell of the rejected batches was never written either.
	s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/BASE/1", "").expectError(t, 404, "not_found", "")
}

// testVersions writes five versions of a column and reads them back in pages, ascending and
// descending, from every node (two of three forward to the leader).
func (s *session) testVersions(t *testing.T) {
	r := row(40)
	refs := []int64{1, 2, 3, 5, 8}
	for _, ref := range refs {
		s.do(t, int(ref)%3, "PUT", fmt.Sprintf("/v1/trips/cells/%s/STATUS/%d", r, ref), fmt.Sprintf(`{"v":%d}`, ref)).expect(t, 201)
	}
	s.do(t, 0, "PUT", "/v1/trips/cells/"+r+"/OTHER/4", `{"v":4}`).expect(t, 201)
	page := func(node int, query string) ([]int64, *int64) {
		t.Helper()
		var resp wire.VersionsResponse
		s.do(t, node, "GET", "/v1/trips/cells/"+r+"/STATUS/versions"+query, "").expect(t, 200).decode(t, &resp)
		var got []int64
		for _, c := range resp.Cells {
			require.Equal(t, "STATUS", c.ColumnKey, "%s: a cell of another column", query)
			assert.JSONEq(t, fmt.Sprintf(`{"v":%d}`, c.RefKey), string(c.Body), "%s: body of ref key %d", query, c.RefKey)
			got = append(got, c.RefKey)
		}
		return got, resp.NextRefKey
	}
	ptr := func(v int64) *int64 { return &v }
	cases := []struct {
		query string
		want  []int64
		next  *int64
	}{
		{"", refs, nil},
		{"?limit=5", refs, nil},
		{"?limit=2", []int64{1, 2}, ptr(3)},
		{"?limit=2&from_ref_key=3", []int64{3, 5}, ptr(8)},
		{"?limit=2&from_ref_key=4", []int64{5, 8}, nil},
		{"?from_ref_key=9", nil, nil},
		{"?order=desc&limit=2", []int64{8, 5}, ptr(3)},
		{"?order=desc&from_ref_key=4", []int64{3, 2, 1}, nil},
		{"?order=asc&consistency=strong&limit=4", []int64{1, 2, 3, 5}, ptr(8)},
	}
	for _, tc := range cases {
		for node := 0; node < 3; node++ {
			got, next := page(node, tc.query)
			assert.Equal(t, tc.want, got, "node %d %q: ref keys", node, tc.query)
			assert.Equal(t, tc.next, next, "node %d %q: next_ref_key", node, tc.query)
		}
	}
	var empty wire.VersionsResponse
	body := s.do(t, 1, "GET", "/v1/trips/cells/"+r+"/NONE/versions", "").expect(t, 200)
	body.decode(t, &empty)
	assert.Empty(t, empty.Cells, "a column without cells")
	assert.Nil(t, empty.NextRefKey)
	assert.Contains(t, string(body.body), `"cells":[]`, "an empty page is an empty array, not null")
}

func (s *session) testStatus(t *testing.T) {
	for node := 0; node < 3; node++ {
		s.do(t, node, "GET", "/healthz", "").expect(t, 200)
		s.do(t, node, "GET", "/readyz", "").expect(t, 200)
		s.do(t, node, "GET", "/readyz?datastore=trips", "").expect(t, 200)
		var st wire.ClusterStatus
		s.do(t, node, "GET", "/v1/cluster", "").expect(t, 200).decode(t, &st)
		require.Equal(t, fmt.Sprintf("n%d", node+1), st.Node, "node %d status: the node's id (%+v)", node, st)
		require.Len(t, st.Nodes, 3, "node %d status: nodes (%+v)", node, st)
		require.Len(t, st.Datastores, 1, "node %d status: datastores (%+v)", node, st)
		ds := st.Datastores[0]
		require.Equal(t, "trips", ds.Name, "datastore name (%+v)", ds)
		require.Equal(t, s.c.Topology.Datastores[0].Mode, ds.Mode, "datastore mode (%+v)", ds)
		require.Equal(t, 16, ds.Shards, "datastore shards (%+v)", ds)
		require.Len(t, ds.Partitions, 2, "datastore partitions (%+v)", ds)
		for _, p := range ds.Partitions {
			if ds.Mode == "async" {
				roles := map[string]int{}
				for _, m := range p.Members {
					roles[m.Role]++
				}
				assert.NotEmpty(t, p.Cluster, "async partition %d: its storage cluster (%+v)", p.ID, p)
				assert.NotEmpty(t, p.Master, "async partition %d: its master (%+v)", p.ID, p)
				assert.Equal(t, 1, roles["master"], "async partition %d: members that are master (%+v)", p.ID, p)
				assert.Equal(t, 2, roles["minion"], "async partition %d: members that are minions (%+v)", p.ID, p)
				continue
			}
			assert.True(t, p.Local, "partition %d: local (%+v)", p.ID, p)
			assert.NotEmpty(t, p.Leader, "partition %d: a leader (%+v)", p.ID, p)
			assert.NotZero(t, p.AppliedIndex, "partition %d: applied index (%+v)", p.ID, p)
			assert.GreaterOrEqual(t, p.CommitIndex, p.AppliedIndex, "partition %d: commit index at least the applied index (%+v)", p.ID, p)
		}
	}
}
