package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// Schemas of the schema tests: v1 wants a non-negative integer distance, v2 also an origin.
const (
	apiSchemaV1 = `{"type":"object","required":["distance"],"properties":{"distance":{"type":"integer","minimum":0}}}`
	apiSchemaV2 = `{"type":"object","required":["distance","origin"],"properties":{"distance":{"type":"integer","minimum":0},"origin":{"type":"string"}}}`
)

// schemaRows returns n row keys of the test, alternately on the datastore's first and last
// partition (so that a batch of them spans partitions).
func (s *session) schemaRows(t *testing.T, prefix string, n int) []string {
	t.Helper()
	ds := s.c.Topology.Datastores[0]
	first, last := ds.Partitions[0], ds.Partitions[len(ds.Partitions)-1]
	require.NotEqual(t, first.ID, last.ID, "the test needs two partitions")
	var out []string
	for i := 0; len(out) < n; i++ {
		u := uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint(prefix, i)))
		shard := cells.ShardOf(u, ds.Shards)
		want := first
		if len(out)%2 == 1 {
			want = last
		}
		if shard >= want.FirstShard && shard <= want.LastShard {
			out = append(out, u.String())
		}
	}
	return out
}

// putCellsBody is a put_cells request of column col, one cell (ref key 1) per row and body.
func putCellsBody(col string, rows, bodies []string) string {
	var cs []string
	for i := range rows {
		cs = append(cs, fmt.Sprintf(`{"row_key":%q,"column_key":%q,"ref_key":1,"body":%s}`, rows[i], col, bodies[i]))
	}
	return `{"cells":[` + strings.Join(cs, ",") + `]}`
}

// schemaViolationOf checks a 400 schema_violation answer and returns its violation.
func schemaViolationOf(t *testing.T, a answer, field string) wire.SchemaViolation {
	t.Helper()
	a.expectError(t, http.StatusBadRequest, wire.CodeSchemaViolation, field)
	var e wire.ErrorBody
	a.decode(t, &e)
	require.NotNil(t, e.Error.Violation, "violation details (%s)", a.body)
	return *e.Error.Violation
}

// testSchemas registers, lists and evolves a column's schema, and checks that writes are
// validated (put_cell, and a put_cells spanning partitions that writes nothing), that bad
// schemas and parameters are refused naming the problem, and what a dry run counts.
func (s *session) testSchemas(t *testing.T) {
	const col = "SCHEMA_T"
	base := "/v1/trips/schemas/" + col

	var none wire.SchemaVersions
	s.doRetry(t, 0, "GET", base, "").expect(t, 200).decode(t, &none)
	assert.Equal(t, wire.SchemaVersions{Column: col, Versions: []wire.SchemaVersion{}}, none, "no schema yet")

	// Refusals name the problem, and register nothing.
	s.do(t, 0, "PUT", base, `{"type":"object","properties":{"distance":{"minimum":"x"}}}`).expectError(t, 400, "invalid_argument", "body")
	a := s.do(t, 1, "PUT", base, `{"minimum":"x"}`)
	a.expectError(t, 400, "invalid_argument", "body")
	assert.Contains(t, string(a.body), "/minimum", "names the bad keyword")
	s.do(t, 1, "PUT", base, `{"type":`).expectError(t, 400, "invalid_argument", "body")
	s.do(t, 1, "PUT", base, `{"$ref":"https://example.com/s.json"}`).expectError(t, 400, "invalid_argument", "body")
	s.do(t, 1, "PUT", "/v1/trips/schemas/bad-col", apiSchemaV1).expectError(t, 400, "invalid_argument", "column_key")
	s.do(t, 1, "PUT", base+"?dry_run=yes", apiSchemaV1).expectError(t, 400, "invalid_argument", "dry_run")
	s.do(t, 1, "PUT", base+"?partition=0", apiSchemaV1).expectError(t, 400, "invalid_argument", "partition")
	s.do(t, 1, "PUT", base+"?dry_run=true&partition=99", apiSchemaV1).expectError(t, 400, "invalid_argument", "partition")
	s.do(t, 1, "PUT", "/v1/nope/schemas/"+col, apiSchemaV1).expectError(t, 404, "not_found", "")
	s.do(t, 1, "DELETE", base, "").expectError(t, 405, "method_not_allowed", "")

	// Cells written before any schema: rows 0 and 1 valid, row 2 invalid, row 3 invalid then
	// valid (its latest is valid), row 4 valid then invalid.
	rows := s.schemaRows(t, "schema-before", 5)
	var put wire.PutCellsResponse
	s.doRetry(t, 2, "POST", "/v1/trips/cells", putCellsBody(col, rows, []string{`{"distance":1}`, `{"distance":2}`, `{"distance":-3}`, `{"distance":-4}`, `{"distance":5}`})).expect(t, 200).decode(t, &put)
	s.doRetry(t, 2, "PUT", "/v1/trips/cells/"+rows[3]+"/"+col+"/2", `{"distance":4}`).expect(t, 201)
	s.doRetry(t, 2, "PUT", "/v1/trips/cells/"+rows[4]+"/"+col+"/2", `{"distance":-5}`).expect(t, 201)

	// A dry run counts the latest cells the schema rejects, and registers nothing.
	var dry wire.SchemaResult
	s.doRetry(t, 0, "PUT", base+"?dry_run=true", apiSchemaV1).expect(t, 200).decode(t, &dry)
	require.NotNil(t, dry.DryRun, "dry run findings (%+v)", dry)
	assert.Equal(t, wire.SchemaDryRun, dry.Status, "status")
	assert.Equal(t, 1, dry.Version, "the version it would get")
	ds := s.c.Topology.Datastores[0]
	assert.Len(t, dry.DryRun.Partitions, len(ds.Partitions), "every partition read")
	// Replicas read by the dry run may trail the writes: wait for the counts.
	var stop error
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var d wire.SchemaResult
		if !s.poll(c, &stop, 1, "PUT", base+"?dry_run=true", apiSchemaV1, 200, &d) {
			return
		}
		assert.Equal(c, int64(5), d.DryRun.Rows, "rows with a cell of the column")
		assert.Equal(c, int64(2), d.DryRun.Rejected, "latest cells rejected: rows 2 and 4")
		got := map[string]wire.SchemaRejection{}
		for _, e := range d.DryRun.Examples {
			got[e.RowKey] = e
		}
		assert.Equal(c, wire.SchemaRejection{RowKey: rows[4], RefKey: 2, Pointer: "/distance", Message: "minimum: got -5, want 0"}, got[rows[4]], "row 4: its latest cell")
		assert.Contains(c, got, rows[2], "row 2")
	}, 20*time.Second, 200*time.Millisecond, "dry run counts")
	require.NoError(t, stop)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var sum int64
		for _, p := range ds.Partitions {
			var d wire.SchemaResult
			if !s.poll(c, &stop, 2, "PUT", fmt.Sprintf("%s?dry_run=true&partition=%d", base, p.ID), apiSchemaV1, 200, &d) {
				return
			}
			assert.Equal(c, []int{p.ID}, d.DryRun.Partitions, "one partition")
			sum += d.DryRun.Rejected
		}
		assert.Equal(c, int64(2), sum, "per-partition dry runs add up")
	}, 20*time.Second, 200*time.Millisecond, "per-partition dry runs")
	require.NoError(t, stop)
	s.doRetry(t, 1, "GET", base, "").expect(t, 200).decode(t, &none)
	assert.Empty(t, none.Versions, "a dry run registers nothing")

	// Register version 1; the same text (white space aside) again is exists.
	var reg wire.SchemaResult
	s.doRetry(t, 0, "PUT", base, apiSchemaV1).expect(t, 201).decode(t, &reg)
	assert.Equal(t, wire.SchemaResult{Column: col, Version: 1, Status: wire.SchemaCreated}, reg, "registered")
	s.doRetry(t, 1, "PUT", base, "\n "+strings.ReplaceAll(apiSchemaV1, ":", ": ")+"\n").expect(t, 200).decode(t, &reg)
	assert.Equal(t, wire.SchemaResult{Column: col, Version: 1, Status: wire.SchemaExists}, reg, "the same again")

	// put_cell: a violating cell is refused with the pointer and version; nothing written.
	fresh := s.schemaRows(t, "schema-after", 4)
	v := schemaViolationOf(t, s.doRetry(t, 0, "PUT", "/v1/trips/cells/"+fresh[0]+"/"+col+"/1", `{"distance":-1}`), "body/distance")
	assert.Equal(t, wire.SchemaViolation{Cell: 0, Column: col, Version: 1, Pointer: "/distance", Message: "minimum: got -1, want 0"}, v, "violation")
	s.doRetry(t, 0, "GET", "/v1/trips/cells/"+fresh[0]+"/"+col+"/1", "").expectError(t, 404, "not_found", "")
	v = schemaViolationOf(t, s.doRetry(t, 0, "PUT", "/v1/trips/cells/"+fresh[0]+"/"+col+"/1", `{"other":1}`), "body/distance")
	assert.Equal(t, "/distance", v.Pointer, "a missing required field points at it")
	// A column with no schema is not checked.
	s.doRetry(t, 0, "PUT", "/v1/trips/cells/"+fresh[0]+"/OTHER_T/1", `{"distance":-1}`).expect(t, 201)

	// put_cells spanning both partitions, one violating cell: nothing of it is written.
	// Through the node that registered: its check knows the schema at once.
	bodies := []string{`{"distance":1}`, `{"distance":2}`, `{"distance":"far"}`, `{"distance":4}`}
	v = schemaViolationOf(t, s.doRetry(t, 0, "POST", "/v1/trips/cells", putCellsBody(col, fresh, bodies)), "cells[2].body/distance")
	assert.Equal(t, wire.SchemaViolation{Cell: 2, Column: col, Version: 1, Pointer: "/distance", Message: "got string, want integer"}, v, "violation of the batch")
	for _, r := range fresh {
		s.doRetry(t, 1, "GET", "/v1/trips/cells/"+r+"/"+col+"/1", "").expectError(t, 404, "not_found", "")
	}
	// Through the other nodes too, once their copy of the schemas is refreshed (a second).
	tries := 0
	for node := 1; node <= 2; node++ {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			tries++ // new rows each try: a try before the refresh may write cells of a partition
			batch := s.schemaRows(t, fmt.Sprintf("schema-node-%d-", tries), 4)
			a, err := s.tryDo(node, "POST", "/v1/trips/cells", putCellsBody(col, batch, bodies))
			if !assert.NoError(c, err) {
				return
			}
			assert.Equal(c, http.StatusBadRequest, a.status, "node %d: %s", node, a.body)
			assert.NotContains(c, string(a.body), "may have been written", "node %d: refused before any partition applied its part", node)
		}, 20*time.Second, 300*time.Millisecond, "node %d refuses the batch whole", node)
	}

	// A transaction with a violating write writes nothing.
	near := s.rowsNear(t, 2)
	txn := fmt.Sprintf(`{"conditions":[],"writes":[{"row_key":%q,"column_key":%q,"ref_key":1,"body":{"distance":1}},{"row_key":%q,"column_key":%q,"ref_key":1,"body":{"distance":-2}}]}`,
		near[0], col, near[1], col)
	v = schemaViolationOf(t, s.doRetry(t, 0, "POST", "/v1/trips/transactions", txn), "writes[1].body/distance")
	assert.Equal(t, 1, v.Cell, "the transaction's second write")
	s.doRetry(t, 1, "GET", "/v1/trips/cells/"+near[0]+"/"+col+"/1", "").expectError(t, 404, "not_found", "")

	// Version 2 replaces version 1 for the next writes; existing cells are not rechecked.
	s.doRetry(t, 2, "PUT", base, apiSchemaV2).expect(t, 201).decode(t, &reg)
	assert.Equal(t, 2, reg.Version, "version 2")
	v = schemaViolationOf(t, s.doRetry(t, 2, "PUT", "/v1/trips/cells/"+fresh[1]+"/"+col+"/1", `{"distance":1}`), "body/origin")
	assert.Equal(t, wire.SchemaViolation{Cell: 0, Column: col, Version: 2, Pointer: "/origin", Message: "missing property 'origin'"}, v, "checked against version 2")
	s.doRetry(t, 1, "PUT", "/v1/trips/cells/"+fresh[1]+"/"+col+"/1", `{"distance":1,"origin":"SFO"}`).expect(t, 201)
	var old wire.Cell
	s.doRetry(t, 1, "GET", "/v1/trips/cells/"+rows[2]+"/"+col+"/1", "").expect(t, 200).decode(t, &old)
	assert.JSONEq(t, `{"distance":-3}`, string(old.Body), "a cell written before the schema stays")

	var list wire.SchemaVersions
	s.doRetry(t, 1, "GET", base, "").expect(t, 200).decode(t, &list)
	require.Len(t, list.Versions, 2, "versions (%+v)", list)
	for i, want := range []string{apiSchemaV1, apiSchemaV2} {
		got := list.Versions[i]
		assert.Equal(t, i+1, got.Version, "version %d", i+1)
		assert.Equal(t, col, got.Column, "column of version %d", i+1)
		assert.JSONEq(t, want, string(got.Schema), "text of version %d", i+1)
		assert.False(t, got.CreatedAt.IsZero(), "created_at of version %d", i+1)
	}
	assert.False(t, list.Versions[1].CreatedAt.Before(list.Versions[0].CreatedAt), "created_at ascending")
	var all wire.SchemaVersions
	s.doRetry(t, 2, "GET", "/v1/trips/schemas?consistency=stale", "").expect(t, 200)
	s.doRetry(t, 2, "GET", "/v1/trips/schemas", "").expect(t, 200).decode(t, &all)
	latest := map[string]int{}
	for _, sv := range all.Versions {
		latest[sv.Column] = sv.Version
	}
	assert.Equal(t, 2, latest[col], "the list gives each column's latest version (%+v)", all)

	// Two registrations of different texts at once: they never both get one version.
	const col2 = "SCHEMA_RACE"
	texts := []string{`{"type":"object","title":"a"}`, `{"type":"object","title":"b"}`}
	results := make([]answer, len(texts))
	var wg sync.WaitGroup
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = s.tryDo(i, "PUT", "/v1/trips/schemas/"+col2, texts[i])
		}()
	}
	wg.Wait()
	versions := map[int]string{}
	for i, a := range results {
		switch a.status {
		case http.StatusCreated:
			var r wire.SchemaResult
			a.decode(t, &r)
			_, dup := versions[r.Version]
			assert.False(t, dup, "two registrations won version %d", r.Version)
			versions[r.Version] = texts[i]
		case http.StatusConflict, http.StatusServiceUnavailable:
		default:
			t.Errorf("registration %d: got %d %s", i, a.status, a.body)
		}
	}
	s.doRetry(t, 0, "GET", "/v1/trips/schemas/"+col2, "").expect(t, 200).decode(t, &list)
	for _, sv := range list.Versions {
		if want, ok := versions[sv.Version]; ok {
			assert.JSONEq(t, want, string(sv.Schema), "version %d holds the text of the registration that won it", sv.Version)
		}
	}
}
