package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/membership"
	"github.com/schemaless-db/schemaless/wire"
)

// sameJSON checks that the node's value and its wire form encode to the same bytes, and that
// the wire form decodes back to itself.
func sameJSON[W any](t *testing.T, what string, node any, w W) {
	t.Helper()
	want, err := json.Marshal(node)
	require.NoError(t, err)
	got, err := json.Marshal(w)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got), "%s: wire JSON differs from the node's", what)
	assert.Equal(t, string(want), string(got), "%s: wire JSON differs from the node's in field order", what)
	var back W
	require.NoError(t, json.Unmarshal(got, &back))
	again, err := json.Marshal(back)
	require.NoError(t, err)
	assert.Equal(t, string(got), string(again), "%s: wire JSON does not survive a round trip", what)
}

func TestWireAdminShapes(t *testing.T) {
	t.Parallel()
	cfg := cluster.PartitionConfig{Datastore: "trips", Partition: 1, Leader: "n2", Term: 3, CommitIndex: 40, LastIndex: 41,
		Servers: []cluster.RaftServer{{Node: "n1", Addr: "127.0.0.1:1", Suffrage: "voter"}, {Node: "n4", Addr: "127.0.0.1:4", Suffrage: "nonvoter"}}}
	members := []cluster.Member{
		{ID: "n1", HTTPAddr: "h1", RaftAddr: "r1", GossipAddr: "g1", Version: "dev", State: "alive",
			Replicas:  []membership.Replica{{Datastore: "trips", Partition: 0, Leader: true, AppliedIndex: 9}},
			UpdatedAt: time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.UTC)},
		{ID: "n2", HTTPAddr: "h2", RaftAddr: "r2", State: "unknown"},
		{ID: "n3", State: "dead", Replicas: []membership.Replica{}},
	}
	for _, tc := range []struct {
		what string
		node any
		wire any
	}{
		{"nodes", struct {
			Self  string           `json:"self"`
			Nodes []cluster.Member `json:"nodes"`
		}{"n1", members}, wire.NodesResponse{Self: "n1", Nodes: wireMembers(members)}},
		{"no nodes", []cluster.Member(nil), wireMembers(nil)},
	} {
		t.Run(tc.what, func(t *testing.T) {
			want, err := json.Marshal(tc.node)
			require.NoError(t, err)
			got, err := json.Marshal(tc.wire)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
		})
	}
	sameJSON(t, "members", members, wireMembers(members))
	assert.Equal(t, []string{"n1"}, cfg.Voters())
}

func TestWireRestoreResult(t *testing.T) {
	t.Parallel()
	info := fsm.BackupInfo{Cells: 10, KVs: 2, IndexEntries: 3, Bytes: 999,
		Shards: []fsm.ShardInfo{{Shard: 0, MaxAddedID: 7, Cells: 4}, {Shard: 1, MaxAddedID: 9, Cells: 6}}}
	info.Header.Version, info.Header.FirstShard, info.Header.LastShard = 3, 0, 1
	info.Header.Applied.Index, info.Header.Applied.Term = 18, 2
	got, err := json.Marshal(restoreResult("trips", 0, cluster.RestoreResult{Backup: info, DryRun: true, TargetCells: 12, CellsLost: 5}))
	require.NoError(t, err)
	assert.JSONEq(t, `{"datastore":"trips","partition":0,"dry_run":true,"target_cells":12,"cells_lost":5,"snapshot_version":3,"first_shard":0,"last_shard":1,
		"applied_index":18,"applied_term":2,"cells":10,"kv_rows":2,"index_entries":3,"bytes":999,
		"shards":[{"shard":0,"max_added_id":7,"cells":4},{"shard":1,"max_added_id":9,"cells":6}]}`, string(got))
}
