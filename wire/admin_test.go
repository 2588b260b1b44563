package wire_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

// roundTrip decodes text (an answer as the server writes it) into a W, strictly, and checks
// that encoding it again gives text back, byte for byte.
func roundTrip[W any](t *testing.T, text string) W {
	t.Helper()
	var v W
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "decode %s", text)
	got, err := json.Marshal(v)
	require.NoError(t, err)
	assert.Equal(t, text, string(got), "re-encoded %T", v)
	return v
}

// The texts are the answers of docs/api.md, "Admin endpoints" and "Backup and restore", as the
// server encodes them (one line, no spaces).
func TestWireAdminRoundTrip(t *testing.T) {
	t.Parallel()
	nodes := roundTrip[wire.NodesResponse](t, `{"self":"n1","nodes":[`+
		`{"id":"n1","http_addr":"127.0.0.1:30752","raft_addr":"127.0.0.1:27216","version":"dev","state":"alive",`+
		`"replicas":[{"datastore":"trips","partition":0,"leader":false,"applied_index":26},`+
		`{"datastore":"trips","partition":1,"leader":true,"applied_index":27}],"updated_at":"0001-01-01T00:00:00Z"},`+
		`{"id":"n2","http_addr":"127.0.0.1:23133","raft_addr":"127.0.0.1:28153","gossip_addr":"127.0.0.1:7270","state":"unknown",`+
		`"replicas":null,"updated_at":"2026-11-23T10:00:00.123456789Z"}]}`)
	require.Len(t, nodes.Nodes, 2)
	assert.True(t, nodes.Nodes[0].Replicas[1].Leader)
	assert.Nil(t, nodes.Nodes[1].Replicas)

	parts := roundTrip[wire.PartitionsResponse](t, `{"partitions":[{"datastore":"trips","partition":0,"leader":"n2","term":3,`+
		`"commit_index":34,"last_index":34,"servers":[{"node":"n2","addr":"127.0.0.1:30490","suffrage":"voter"},`+
		`{"node":"n1","addr":"127.0.0.1:22631","suffrage":"nonvoter"}],"mode":"raft","first_shard":0,"last_shard":7,`+
		`"replicas":[{"node":"n2","suffrage":"voter","state":"Leader","applied_index":34,"last_index":34,"lag":0,"reachable":true},`+
		`{"node":"n1","suffrage":"nonvoter","state":"","applied_index":0,"last_index":0,"lag":34,"reachable":false,"error":"timeout"}]},`+
		`{"datastore":"flights","partition":0,"leader":"","term":0,"commit_index":0,"last_index":0,"servers":null,`+
		`"mode":"async","first_shard":0,"last_shard":3,"cluster":"c0","replicas":null},`+
		`{"datastore":"trips","partition":1,"leader":"","term":0,"commit_index":0,"last_index":0,"servers":null,`+
		`"mode":"raft","first_shard":8,"last_shard":15,"replicas":[{"node":"n1","suffrage":"","state":"","applied_index":0,`+
		`"last_index":0,"lag":0,"reachable":false,"error":"configuration unknown"}],"error":"no leader"}]}`)
	require.Len(t, parts.Partitions, 3)
	assert.Equal(t, []string{"n2"}, parts.Partitions[0].Voters())
	assert.Equal(t, "c0", parts.Partitions[1].Cluster)

	roundTrip[wire.PartitionConfig](t, `{"datastore":"trips","partition":0,"leader":"n3","term":4,"commit_index":40,`+
		`"last_index":40,"servers":[{"node":"n3","addr":"a3","suffrage":"voter"}]}`)
	rep := roundTrip[wire.RebalanceReport](t, `{"nodes":["n2","n3","n1"],"replicas_before":{"n1":2,"n2":2,"n3":1},`+
		`"replicas_after":{"n1":1,"n2":2,"n3":2},"leaders_before":{"n1":0,"n2":2,"n3":0},"leaders_after":{"n1":0,"n2":1,"n3":1},`+
		`"moves":[{"datastore":"trips","partition":0,"from":"n1","to":"n3"}],`+
		`"transfers":[{"datastore":"trips","partition":0,"from":"n2","to":"n3"}],"duration_seconds":0,"dry_run":true}`)
	assert.Equal(t, wire.Move{Datastore: "trips", Partition: 0, From: "n1", To: "n3"}, rep.Moves[0])
	roundTrip[wire.RebalanceReport](t, `{"nodes":null,"replicas_before":null,"replicas_after":null,"leaders_before":null,`+
		`"leaders_after":null,"moves":null,"transfers":null,"duration_seconds":1.5}`)

	roundTrip[wire.NodeRequest](t, `{"node":"n4"}`)
	roundTrip[wire.MoveRequest](t, `{"from":"n1","to":"n4"}`)
	roundTrip[wire.DrainRequest](t, `{"dry_run":true}`)
	roundTrip[wire.RebalanceRequest](t, `{"datastore":"trips","nodes":["n1","n2"],"exclude":["n3"],"dry_run":true}`)
	roundTrip[wire.RebalanceRequest](t, `{}`)
	roundTrip[wire.RestoreResult](t, `{"datastore":"trips","partition":0,"dry_run":false,"target_cells":0,"cells_lost":0,"snapshot_version":3,"first_shard":0,"last_shard":7,`+
		`"applied_index":18,"applied_term":2,"cells":1050,"kv_rows":1,"index_entries":0,"bytes":97572,`+
		`"shards":[{"shard":0,"max_added_id":157,"cells":157}]}`)
}

func TestWireVoters(t *testing.T) {
	t.Parallel()
	assert.Nil(t, wire.PartitionConfig{}.Voters(), "no servers")
	c := wire.PartitionConfig{Servers: []wire.RaftServer{{Node: "a", Suffrage: wire.SuffrageNonvoter},
		{Node: "b", Suffrage: wire.SuffrageVoter}, {Node: "c", Suffrage: wire.SuffrageVoter}}}
	assert.Equal(t, []string{"b", "c"}, c.Voters())
}
