package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// testErase: DELETE /v1/trips/cells/{row} erases every cell of the row; every read of the row
// answers not found afterwards on every node, the shard log holds a tombstone in its place
// (also through a column filter and with stored bodies), erasing again or an unknown row
// erases nothing, and the row can be written again. Run by TestAPI on each engine and mode.
func (s *session) testErase(t *testing.T) {
	r := row(60)
	rk := uuid.MustParse(r)
	shard := cells.ShardOf(rk, s.c.Topology.Datastores[0].Shards)
	for _, c := range []string{"BASE/1", "BASE/2", "STATUS/1"} {
		s.doRetry(t, 0, "PUT", "/v1/trips/cells/"+r+"/"+c, `{"fare":12}`).expect(t, 201)
	}
	s.doRetry(t, 0, "PUT", "/v1/trips/cells/"+row(61)+"/BASE/1", `{"other":true}`).expect(t, 201)
	var before wire.ShardCellsResponse
	s.do(t, 0, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?limit=1", shard), "").expect(t, 200).decode(t, &before)

	var res wire.EraseResult
	s.doRetry(t, 1, "DELETE", "/v1/trips/cells/"+r, "").expect(t, 200).decode(t, &res)
	require.Equal(t, r, res.RowKey, "erase: row key (%+v)", res)
	require.Equal(t, 3, res.Erased, "erase: cells erased (%+v)", res)
	require.Greater(t, res.AddedID, before.HighWater, "erase: the tombstone's added_id, after the shard's cells (%+v)", res)

	for node := 0; node < 3; node++ {
		var rowCells wire.CellsResponse
		s.do(t, node, "GET", "/v1/trips/cells/"+r, "").expect(t, 200).decode(t, &rowCells)
		assert.Empty(t, rowCells.Cells, "node %d: row read after the erasure", node)
		s.do(t, node, "GET", "/v1/trips/cells/"+r+"/BASE/1", "").expectError(t, 404, "not_found", "")
		s.do(t, node, "GET", "/v1/trips/cells/"+r+"/STATUS", "").expectError(t, 404, "not_found", "")
		var vs wire.VersionsResponse
		s.do(t, node, "GET", "/v1/trips/cells/"+r+"/BASE/versions", "").expect(t, 200).decode(t, &vs)
		assert.Empty(t, vs.Cells, "node %d: versions after the erasure", node)
		var got wire.GetCellsResponse
		s.do(t, node, "POST", "/v1/trips/cells/get", fmt.Sprintf(`{"keys":[{"row_key":%q,"column_key":"BASE"},{"row_key":%q,"column_key":"BASE","ref_key":2},{"row_key":%q,"column_key":"BASE"}]}`, r, r, row(61))).
			expect(t, 200).decode(t, &got)
		assert.Len(t, got.Missing, 2, "node %d: batch get after the erasure: the erased keys are missing (%+v)", node, got)
		require.Len(t, got.Cells, 1, "node %d: batch get after the erasure: the other row's cell (%+v)", node, got)
		assert.Equal(t, row(61), got.Cells[0].RowKey, "node %d: batch get: the other row's cell", node)
		// A stale read may lag; it catches up with the erasure as it does with writes.
		require.Eventually(t, func() bool {
			a, err := s.tryDo(node, "GET", "/v1/trips/cells/"+r+"/BASE?consistency=stale", "")
			return err == nil && a.status == 404
		}, 10*time.Second, 20*time.Millisecond, "node %d: stale get_cell_latest after the erasure, want 404", node)
	}

	// The shard log: the tombstone in place of the cells, through a column filter too, with
	// JSON or stored bodies.
	var log wire.ShardCellsResponse
	s.do(t, 2, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=%d", shard, before.HighWater), "").expect(t, 200).decode(t, &log)
	var ts *wire.Cell
	for i, c := range log.Cells {
		require.False(t, c.RowKey == r && !c.Erased, "shard log after the erasure: a cell of the erased row: %+v", c)
		if c.Erased {
			ts = &log.Cells[i]
		}
	}
	require.NotNil(t, ts, "shard log after the erasure: a tombstone (%+v)", log.Cells)
	assert.Equal(t, wire.Cell{RowKey: r, ColumnKey: wire.TombstoneColumn, RefKey: res.AddedID, Body: []byte("{}"), AddedID: res.AddedID,
		CreatedAt: ts.CreatedAt, Erased: true}, *ts, "the tombstone")
	assert.False(t, ts.CreatedAt.IsZero(), "the tombstone's created_at")
	var filtered wire.ShardCellsResponse
	s.do(t, 0, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=%d&column_key=NOPE", shard, before.HighWater), "").expect(t, 200).decode(t, &filtered)
	require.Len(t, filtered.Cells, 1, "log read of column NOPE: the tombstone (%+v)", filtered.Cells)
	assert.True(t, filtered.Cells[0].Erased && filtered.Cells[0].AddedID == res.AddedID, "log read of column NOPE: %+v, want the tombstone", filtered.Cells[0])
	var stored wire.ShardCellsResponse
	s.do(t, 0, "GET", fmt.Sprintf("/v1/trips/shards/%d/cells?location=%d&column_key=BASE&body_encoding=stored", shard, res.AddedID-1), "").expect(t, 200).decode(t, &stored)
	require.NotEmpty(t, stored.Cells, "stored log read from the tombstone")
	assert.True(t, stored.Cells[0].Erased && stored.Cells[0].Stored != nil && stored.Cells[0].Body == nil, "stored log read: %+v, want the tombstone, erased, with a stored body", stored.Cells[0])

	// Idempotent: again, or a row never written.
	var again wire.EraseResult
	s.doRetry(t, 2, "DELETE", "/v1/trips/cells/"+r, "").expect(t, 200).decode(t, &again)
	assert.Equal(t, wire.EraseResult{RowKey: r, Erased: 0, AddedID: 0}, again, "erase again")
	var never wire.EraseResult
	s.doRetry(t, 0, "DELETE", "/v1/trips/cells/"+row(62), "").expect(t, 200).decode(t, &never)
	assert.Equal(t, wire.EraseResult{RowKey: row(62), Erased: 0, AddedID: 0}, never, "erase a row never written")

	// Refusals.
	s.do(t, 0, "DELETE", "/v1/trips/cells/not-a-uuid", "").expectError(t, 400, "invalid_argument", "row_key")
	s.do(t, 0, "DELETE", "/v1/nope/cells/"+r, "").expectError(t, 404, "not_found", "")
	s.do(t, 0, "DELETE", "/v1/trips/cells/"+r+"/BASE", "").expectError(t, 405, "method_not_allowed", "")

	// A later write of an erased key is a new cell, which a later erasure erases.
	var put wire.PutResult
	s.doRetry(t, 0, "PUT", "/v1/trips/cells/"+r+"/BASE/1", `{"fare":13}`).expect(t, 201).decode(t, &put)
	assert.Greater(t, put.AddedID, res.AddedID, "a write after the erasure: added_id after the tombstone (%+v)", put)
	var c wire.Cell
	s.do(t, 1, "GET", "/v1/trips/cells/"+r+"/BASE/1", "").expect(t, 200).decode(t, &c)
	assert.Equal(t, `{"fare":13}`, string(c.Body), "the cell written after the erasure")
	var second wire.EraseResult
	s.doRetry(t, 1, "DELETE", "/v1/trips/cells/"+r, "").expect(t, 200).decode(t, &second)
	assert.Equal(t, 1, second.Erased, "second erasure: the new cell (%+v)", second)
	assert.Greater(t, second.AddedID, put.AddedID, "second erasure: a new tombstone (%+v)", second)
}
