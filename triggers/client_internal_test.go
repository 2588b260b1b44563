package triggers

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/stretchr/testify/assert"
)

// ClientSource sends a consumer.Command in the API's wire form and reads the answer back into
// a consumer.Result, field by field.
func TestClientSourceWireForms(t *testing.T) {
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
