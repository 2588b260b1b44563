package client

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TriggerSource sends a consumer.Command in the API's wire form and reads the answer back into
// a consumer.Result, field by field.
func TestTriggerSourceWireForms(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	rk := uuid.MustParse("0d6e7a3c-4a5b-4c1e-9b7f-6f8e2d1c0b3a")
	cmd := consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", Shards: 16, SessionTimeout: 3 * time.Second, HaltThreshold: 7,
		Start: consumer.Start{Kind: consumer.StartTimestamp, Time: at}, Released: []int{2, 5},
		Commits: []consumer.Offset{{Shard: 1, Epoch: 4, Offset: 99}}, Epoch: 3, IDs: []uint64{8}, All: true,
		Park: &consumer.ParkedCell{ID: 2, Shard: 1, AddedID: 40, RowKey: rk, ColumnKey: "BASE", RefKey: 6, Error: "boom", Attempts: 5}}
	atUTC := at.UTC()
	assert.Equal(t, wire.GroupCommand{Worker: "w1", SessionTimeout: "3s", HaltThreshold: 7,
		Start: &wire.GroupStart{Kind: "timestamp", Time: &atUTC}, Released: []int{2, 5},
		Commits: []wire.GroupOffset{{Shard: 1, Epoch: 4, Offset: 99}}, Epoch: 3, IDs: []uint64{8}, All: true,
		Park: &wire.GroupParked{ID: 2, Shard: 1, AddedID: 40, RowKey: rk.String(), ColumnKey: "BASE", RefKey: 6, Error: "boom", Attempts: 5},
	}, toWireCommand(cmd), "a heartbeat carrying every field")
	assert.Equal(t, wire.GroupCommand{Worker: "w1"}, toWireCommand(consumer.Command{Op: consumer.OpLeave, Worker: "w1"}),
		"a leave: no session timeout, no start")

	res := wire.GroupResult{Generation: 9, Members: []wire.GroupMember{{ID: "w1", Expires: at, Shards: 8}},
		Assigned: []wire.GroupLease{{Shard: 1, Owner: "w1", Epoch: 4, Offset: -1}}, Revoke: []int{3}, SessionExpires: &at,
		Halted: true, Parked: 2, Accepted: []bool{true, false}, Fenced: true, Affected: 1,
		Retry: []wire.GroupParked{{ID: 2, Shard: 1, AddedID: 40, RowKey: rk.String(), ColumnKey: "BASE", RefKey: 6, Error: "boom",
			Attempts: 5, Worker: "w1", ParkedAt: at, Retry: true}, {ID: 3, RowKey: "not a uuid"}}}
	assert.Equal(t, consumer.Result{Generation: 9, Members: []consumer.Member{{ID: "w1", Expires: at, Shards: 8}},
		Assigned: []consumer.Lease{{Shard: 1, Owner: "w1", Epoch: 4, Offset: -1}}, Revoke: []int{3}, SessionExpires: at,
		Halted: true, Parked: 2, Accepted: []bool{true, false}, Fenced: true, Affected: 1,
		Retry: []consumer.ParkedCell{{ID: 2, Shard: 1, AddedID: 40, RowKey: rk, ColumnKey: "BASE", RefKey: 6, Error: "boom",
			Attempts: 5, Worker: "w1", ParkedAt: at, Retry: true}}}, fromWireResult(res),
		"every field; the parked cell whose row key is no UUID left out")
}

// A cell read over the API becomes a cells.Cell with its body in stored form, whether it came
// stored (log reads) or as JSON (GetCell); a row key that is no UUID is an error.
func TestTriggerSourceCells(t *testing.T) {
	t.Parallel()
	rk := uuid.MustParse("0d6e7a3c-4a5b-4c1e-9b7f-6f8e2d1c0b3a")
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	body, err := cells.EncodeBody([]byte(`{"fare":12}`))
	require.NoError(t, err, "encode body")
	want := cells.Cell{Key: cells.Key{RowKey: rk, ColumnKey: "BASE", RefKey: 3}, Body: body, AddedID: 41, CreatedAt: at}

	got, err := triggerCell(wire.Cell{RowKey: rk.String(), ColumnKey: "BASE", RefKey: 3, Stored: body, AddedID: 41, CreatedAt: at})
	require.NoError(t, err, "stored body")
	assert.Equal(t, want, got, "a cell with a stored body")

	got, err = triggerCell(wire.Cell{RowKey: rk.String(), ColumnKey: "BASE", RefKey: 3, Body: json.RawMessage(`{"fare":12}`), AddedID: 41, CreatedAt: at})
	require.NoError(t, err, "JSON body")
	obj, err := got.Body.Object()
	require.NoError(t, err, "decode the encoded body")
	assert.Equal(t, map[string]any{"fare": int64(12)}, obj, "a JSON body, encoded")
	got.Body = body
	assert.Equal(t, want, got, "a cell with a JSON body, apart from the body")

	_, err = triggerCell(wire.Cell{RowKey: "not a uuid", ColumnKey: "BASE", Body: json.RawMessage(`{}`)})
	assert.ErrorContains(t, err, `row key "not a uuid"`, "a row key that is no UUID")
}
