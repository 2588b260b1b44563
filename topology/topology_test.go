package topology_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/topology"
)

// threeNodes is the nodes section shared by the YAML cases below.
const threeNodes = `nodes:
  - {id: n1, raft_addr: 127.0.0.1:7171, http_addr: 127.0.0.1:7071}
  - {id: n2, raft_addr: 127.0.0.1:7172, http_addr: 127.0.0.1:7072}
  - {id: n3, raft_addr: 127.0.0.1:7173, http_addr: 127.0.0.1:7073}
`

func parse(t *testing.T, text string) (*topology.Topology, error) {
	t.Helper()
	return topology.Parse(strings.NewReader(text))
}

func mustParse(t *testing.T, text string) *topology.Topology {
	t.Helper()
	top, err := parse(t, text)
	require.NoError(t, err, "Parse:\n%s", text)
	return top
}

func TestParseTopologyDefaults(t *testing.T) {
	t.Parallel()
	top := mustParse(t, threeNodes+`datastores:
  - {name: trips, shards: 64, partition_count: 4}
  - {name: users, shards: 8}
`)
	require.Len(t, top.Nodes, 3, "nodes")
	all := []string{"n1", "n2", "n3"}
	trips, ok := top.Datastore("trips")
	require.True(t, ok, `Datastore("trips"): got not found, want found`)
	assert.Equal(t, topology.ModeRaft, trips.Mode, "trips mode: want the default")
	assert.Equal(t, 4, trips.PartitionCount, "trips partition_count")
	want := []topology.PartitionSpec{
		{ID: 0, FirstShard: 0, LastShard: 15, Replicas: all},
		{ID: 1, FirstShard: 16, LastShard: 31, Replicas: all},
		{ID: 2, FirstShard: 32, LastShard: 47, Replicas: all},
		{ID: 3, FirstShard: 48, LastShard: 63, Replicas: all},
	}
	assert.Equal(t, want, trips.Partitions, "trips partitions")
	users, _ := top.Datastore("users")
	wantUsers := []topology.PartitionSpec{{ID: 0, FirstShard: 0, LastShard: 7, Replicas: all}}
	assert.Equal(t, 1, users.PartitionCount, "users partition_count (omitted)")
	assert.Equal(t, wantUsers, users.Partitions, "users partitions (partition_count omitted)")
	// Each generated partition owns its replica list: changing one must not change another.
	trips.Partitions[0].Replicas[0] = "changed"
	assert.Equal(t, "n1", trips.Partitions[1].Replicas[0],
		"partitions share a replica slice: partition 1 replica 0 after editing partition 0")
	_, ok = top.Datastore("nope")
	assert.False(t, ok, `Datastore("nope"): got found, want not found`)
	n2, ok := top.Node("n2")
	if assert.True(t, ok, `Node("n2"): got not found`) {
		assert.Equal(t, "127.0.0.1:7172", n2.RaftAddr, `Node("n2") raft address`)
		assert.Equal(t, "127.0.0.1:7072", n2.HTTPAddr, `Node("n2") HTTP address`)
	}
	_, ok = top.Node("n9")
	assert.False(t, ok, `Node("n9"): got found, want not found`)
}

func TestParseTopologyReplicasAndExplicitPartitions(t *testing.T) {
	t.Parallel()
	top := mustParse(t, threeNodes+`datastores:
  - name: trips
    mode: raft
    shards: 16
    partition_count: 2
    replicas: [n3, n1]
  - name: users
    shards: 16
    partitions:
      - {id: 7, first_shard: 10, last_shard: 15, replicas: [n2]}
      - {id: 3, first_shard: 0, last_shard: 9, replicas: [n1, n2, n3]}
`)
	trips, _ := top.Datastore("trips")
	want := []topology.PartitionSpec{
		{ID: 0, FirstShard: 0, LastShard: 7, Replicas: []string{"n3", "n1"}},
		{ID: 1, FirstShard: 8, LastShard: 15, Replicas: []string{"n3", "n1"}},
	}
	assert.Equal(t, want, trips.Partitions, "trips with replicas [n3, n1]")
	users, _ := top.Datastore("users")
	wantUsers := []topology.PartitionSpec{ // sorted by first shard, ids kept
		{ID: 3, FirstShard: 0, LastShard: 9, Replicas: []string{"n1", "n2", "n3"}},
		{ID: 7, FirstShard: 10, LastShard: 15, Replicas: []string{"n2"}},
	}
	assert.Equal(t, wantUsers, users.Partitions, "users explicit partitions")
	assert.Equal(t, 2, users.PartitionCount, "users explicit partitions: partition_count")
	for shard, wantID := range map[int]int{0: 3, 9: 3, 10: 7, 15: 7} {
		if p := users.PartitionOf(shard); assert.NotNil(t, p, "users PartitionOf(%d)", shard) {
			assert.Equal(t, wantID, p.ID, "users PartitionOf(%d): partition", shard)
		}
	}
	// Normalizing a normalized topology changes nothing (nodes are given normalized topologies).
	before := cloneTopology(top)
	require.NoError(t, top.Normalize(), "second Normalize")
	assert.Equal(t, before, top, "second Normalize changed the topology")
}

func cloneTopology(t *topology.Topology) *topology.Topology {
	c := &topology.Topology{Nodes: append([]topology.NodeSpec(nil), t.Nodes...)}
	for _, d := range t.Datastores {
		dc := d
		dc.Replicas = append([]string(nil), d.Replicas...)
		dc.Partitions = nil
		for _, p := range d.Partitions {
			p.Replicas = append([]string(nil), p.Replicas...)
			dc.Partitions = append(dc.Partitions, p)
		}
		c.Datastores = append(c.Datastores, dc)
	}
	return c
}

func TestParseTopologyAsync(t *testing.T) {
	t.Parallel()
	top := mustParse(t, `nodes:
  - {id: n1, raft_addr: "127.0.0.1:7170", http_addr: "127.0.0.1:7070"}
datastores:
  - name: rides
    mode: async
    shards: 8
    storage_clusters:
      - {name: c1, master: "s@tcp(10.0.0.1:3306)/", minions: ["s@tcp(10.0.0.2:3306)/"]}
      - {name: c2, master: "s@tcp(10.0.1.1:3306)/"}
`)
	d, _ := top.Datastore("rides")
	require.Equal(t, 1, d.BufferClusters, "async default buffer_clusters")
	require.Equal(t, "sl", d.MySQLPrefix, "async default mysql_prefix")
	require.False(t, d.UnsafeNoBufferedWrites, "async default unsafe_no_buffered_writes")
	require.Len(t, d.Partitions, 2, "async partitions: one per storage cluster")
	require.Equal(t, "c1", d.Partitions[0].Cluster, "async partition 0 cluster")
	require.Equal(t, "c2", d.Partitions[1].Cluster, "async partition 1 cluster")
	require.Equal(t, 3, d.Partitions[0].LastShard, "async partition 0 last shard")
	require.Empty(t, d.Partitions[0].Replicas, "async partition 0 replicas")
	c, ok := d.StorageCluster("c1")
	require.True(t, ok, `StorageCluster("c1"): got not found`)
	require.Equal(t, []string{"s@tcp(10.0.0.1:3306)/", "s@tcp(10.0.0.2:3306)/"}, c.Members(), "storage cluster c1 members: master first")
}

func TestPartitionOf(t *testing.T) {
	t.Parallel()
	top := mustParse(t, threeNodes+`datastores: [{name: trips, shards: 64, partition_count: 4}]`)
	d, _ := top.Datastore("trips")
	cases := []struct{ shard, want int }{
		{0, 0}, {15, 0}, {16, 1}, {31, 1}, {32, 2}, {47, 2}, {48, 3}, {63, 3},
	}
	for _, tc := range cases {
		p := d.PartitionOf(tc.shard)
		if !assert.NotNil(t, p, "PartitionOf(%d)", tc.shard) || !assert.Equal(t, tc.want, p.ID, "PartitionOf(%d): partition", tc.shard) {
			continue
		}
		assert.True(t, p.Shards().Contains(tc.shard), "PartitionOf(%d) = partition %d whose range %+v does not contain it", tc.shard, p.ID, p.Shards())
	}
	assert.Nil(t, d.PartitionOf(64), "PartitionOf(64) past the last shard")
}

// Every shard count and partition count splits into contiguous ranges covering every shard
// once, whose sizes differ by at most one.
func TestNormalizeSplitsEvenly(t *testing.T) {
	t.Parallel()
	for shards := 1; shards <= 40; shards++ {
		for count := 1; count <= shards; count++ {
			top := &topology.Topology{
				Nodes:      []topology.NodeSpec{{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}},
				Datastores: []topology.DatastoreSpec{{Name: "d", Shards: shards, PartitionCount: count}},
			}
			require.NoError(t, top.Normalize(), "shards %d count %d", shards, count)
			ps := top.Datastores[0].Partitions
			require.Len(t, ps, count, "shards %d count %d: partitions", shards, count)
			next, lo, hi := 0, shards, 0
			for i, p := range ps {
				require.True(t, p.ID == i && p.FirstShard == next && p.LastShard >= p.FirstShard,
					"shards %d count %d: partition %d is %+v, want id %d starting at %d", shards, count, i, p, i, next)
				size := p.LastShard - p.FirstShard + 1
				lo, hi = min(lo, size), max(hi, size)
				next = p.LastShard + 1
			}
			require.True(t, next == shards && hi-lo <= 1,
				"shards %d count %d: got cover 0..%d and sizes %d..%d, want 0..%d and sizes within 1",
				shards, count, next-1, lo, hi, shards-1)
			for s := 0; s < shards; s++ {
				p := top.Datastores[0].PartitionOf(s)
				require.True(t, p != nil && p.Shards().Contains(s), "shards %d count %d: PartitionOf(%d) got %+v", shards, count, s, p)
			}
		}
	}
}

func TestParseTopologyErrors(t *testing.T) {
	t.Parallel()
	ds := func(body string) string { return threeNodes + "datastores:\n" + body }
	cases := []struct {
		name string
		yaml string
		want []string // substrings of the error, each naming the offending field
	}{
		{"no nodes", `datastores: [{name: trips, shards: 4}]`, []string{"no nodes"}},
		{"bad node id", `nodes: [{id: N-1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}]`,
			[]string{`nodes[0].id "N-1"`}},
		{"empty node id", `nodes: [{raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}]`,
			[]string{`nodes[0].id ""`}},
		{"node id too long", `nodes: [{id: ` + strings.Repeat("a", 33) + `, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}]`,
			[]string{`nodes[0].id`}},
		{"duplicate node id", `nodes:
  - {id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}
  - {id: n1, raft_addr: "127.0.0.1:3", http_addr: "127.0.0.1:4"}`,
			[]string{`nodes[1].id "n1" is used twice`}},
		{"duplicate raft address", `nodes:
  - {id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}
  - {id: n2, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:4"}`,
			[]string{`nodes[1].raft_addr "127.0.0.1:1" is also nodes[0].raft_addr`}},
		{"http address of another node's raft address", `nodes:
  - {id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}
  - {id: n2, raft_addr: "127.0.0.1:3", http_addr: "127.0.0.1:1"}`,
			[]string{`nodes[1].http_addr "127.0.0.1:1" is also nodes[0].raft_addr`}},
		{"one address for both ports", `nodes: [{id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:1"}]`,
			[]string{`nodes[0].`, `"127.0.0.1:1" is also nodes[0].`}},
		{"raft address without port", `nodes: [{id: n1, raft_addr: localhost, http_addr: "127.0.0.1:2"}]`,
			[]string{`nodes[0].raft_addr "localhost" is not host:port`}},
		{"http address missing", `nodes: [{id: n1, raft_addr: "127.0.0.1:1"}]`,
			[]string{`nodes[0].http_addr "" is not host:port`}},
		{"bad datastore name", ds(`  - {name: Trips, shards: 4}`), []string{`datastores[0].name "Trips"`}},
		{"datastore name with a dash", ds(`  - {name: my-trips, shards: 4}`), []string{`datastores[0].name "my-trips"`}},
		{"duplicate datastore", ds("  - {name: trips, shards: 4}\n  - {name: trips, shards: 8}"),
			[]string{`datastores[1].name "trips" is used twice`}},
		{"async without storage clusters", ds(`  - {name: trips, mode: async, shards: 4}`),
			[]string{`datastores[0].storage_clusters: an async datastore needs at least one storage cluster`}},
		{"async with one cluster and buffered writes", ds(`  - {name: trips, mode: async, shards: 4, storage_clusters: [{name: c1, master: "u@tcp(h:1)/"}]}`),
			[]string{`datastores[0]: buffered writes need a second storage cluster`}},
		{"async buffer_clusters too many", ds(`  - {name: trips, mode: async, shards: 4, buffer_clusters: 2, storage_clusters: [{name: c1, master: "u@tcp(h:1)/"}, {name: c2, master: "u@tcp(h:2)/"}]}`),
			[]string{`datastores[0].buffer_clusters 2 must be in 1..1`}},
		{"async with replicas", ds(`  - {name: trips, mode: async, shards: 4, replicas: [n1], unsafe_no_buffered_writes: true, storage_clusters: [{name: c1, master: "u@tcp(h:1)/"}]}`),
			[]string{`datastores[0].replicas are for mode raft`}},
		{"async bad DSN and duplicate member", ds(`  - {name: trips, mode: async, shards: 4, storage_clusters: [{name: c1, master: "u@tcp(h:1)/", minions: ["no/dsn?x", "u@tcp(h:1)/"]}, {name: c2, master: "u@tcp(h:2)/"}]}`),
			[]string{`datastores[0].storage_clusters[0].minions[0]`, `datastores[0].storage_clusters[0].minions[1] is also datastores[0].storage_clusters[0].master`}},
		{"async partition on an unknown cluster", ds(`  - {name: trips, mode: async, shards: 4, unsafe_no_buffered_writes: true, storage_clusters: [{name: c1, master: "u@tcp(h:1)/"}], partitions: [{id: 0, first_shard: 0, last_shard: 3, cluster: c9}]}`),
			[]string{`datastores[0].partitions[id 0]: cluster "c9" is not one of storage_clusters`}},
		{"async fields on a raft datastore", ds(`  - {name: trips, shards: 4, buffer_clusters: 1}`),
			[]string{`datastores[0]: storage_clusters, buffer_clusters, unsafe_no_buffered_writes and mysql_prefix are for mode async`}},
		{"unknown mode", ds(`  - {name: trips, mode: paxos, shards: 4}`),
			[]string{`datastores[0].mode "paxos"`}},
		{"zero shards", ds(`  - {name: trips}`), []string{fmt.Sprintf("datastores[0].shards 0 must be in 1..%d", topology.MaxShards)}},
		{"negative shards", ds(`  - {name: trips, shards: -4}`), []string{"datastores[0].shards -4"}},
		{"too many shards", ds(fmt.Sprintf(`  - {name: trips, shards: %d}`, topology.MaxShards+1)),
			[]string{fmt.Sprintf("datastores[0].shards %d must be in 1..%d", topology.MaxShards+1, topology.MaxShards)}},
		{"partition_count above shards", ds(`  - {name: trips, shards: 4, partition_count: 5}`),
			[]string{"datastores[0].partition_count 5 must be in 1..shards (4)"}},
		{"negative partition_count", ds(`  - {name: trips, shards: 4, partition_count: -1}`),
			[]string{"datastores[0].partition_count -1"}},
		{"partition_count disagrees with the list", ds(`  - name: trips
    shards: 8
    partition_count: 3
    partitions:
      - {id: 0, first_shard: 0, last_shard: 3, replicas: [n1]}
      - {id: 1, first_shard: 4, last_shard: 7, replicas: [n1]}`),
			[]string{"datastores[0]: partition_count 3 disagrees with 2 partitions"}},
		{"gap between partitions", ds(`  - name: trips
    shards: 8
    partitions:
      - {id: 0, first_shard: 0, last_shard: 3, replicas: [n1]}
      - {id: 1, first_shard: 5, last_shard: 7, replicas: [n1]}`),
			[]string{"datastores[0].partitions[id 1]: shards 5..7"}},
		{"overlapping partitions", ds(`  - name: trips
    shards: 8
    partitions:
      - {id: 0, first_shard: 0, last_shard: 4, replicas: [n1]}
      - {id: 1, first_shard: 3, last_shard: 7, replicas: [n1]}`),
			[]string{"datastores[0].partitions[id 1]: shards 3..7"}},
		{"partition past the last shard", ds(`  - name: trips
    shards: 8
    partitions:
      - {id: 0, first_shard: 0, last_shard: 3, replicas: [n1]}
      - {id: 1, first_shard: 4, last_shard: 8, replicas: [n1]}`),
			[]string{"datastores[0].partitions[id 1]: shards 4..8"}},
		{"partition not starting at 0", ds(`  - name: trips
    shards: 8
    partitions: [{id: 0, first_shard: 1, last_shard: 7, replicas: [n1]}]`),
			[]string{"datastores[0].partitions[id 0]: shards 1..7"}},
		{"partition with last before first", ds(`  - name: trips
    shards: 8
    partitions:
      - {id: 0, first_shard: 0, last_shard: 3, replicas: [n1]}
      - {id: 1, first_shard: 4, last_shard: 2, replicas: [n1]}`),
			[]string{"datastores[0].partitions[id 1]: shards 4..2"}},
		{"partitions stop short", ds(`  - name: trips
    shards: 8
    partitions: [{id: 0, first_shard: 0, last_shard: 5, replicas: [n1]}]`),
			[]string{"datastores[0]: partitions cover shards 0..5 of 0..7"}},
		{"duplicate partition id", ds(`  - name: trips
    shards: 8
    partitions:
      - {id: 0, first_shard: 0, last_shard: 3, replicas: [n1]}
      - {id: 0, first_shard: 4, last_shard: 7, replicas: [n1]}`),
			[]string{"datastores[0].partitions[id 0]: id used twice"}},
		{"partition without replicas", ds(`  - name: trips
    shards: 8
    partitions: [{id: 0, first_shard: 0, last_shard: 7}]`),
			[]string{"datastores[0].partitions[id 0]: no replicas"}},
		{"unknown replica", ds(`  - name: trips
    shards: 8
    partitions: [{id: 0, first_shard: 0, last_shard: 7, replicas: [n1, n9]}]`),
			[]string{`datastores[0].partitions[id 0]: replica "n9" is not a node`}},
		{"unknown replica in the datastore's replicas", ds(`  - {name: trips, shards: 8, partition_count: 2, replicas: [n1, n9]}`),
			[]string{`datastores[0].partitions[id 0]: replica "n9" is not a node`, `datastores[0].partitions[id 1]: replica "n9" is not a node`}},
		{"duplicate replica", ds(`  - name: trips
    shards: 8
    partitions: [{id: 0, first_shard: 0, last_shard: 7, replicas: [n1, n2, n1]}]`),
			[]string{`datastores[0].partitions[id 0]: replica "n1" listed twice`}},
		{"unknown field in a node", `nodes: [{id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2", grpc_addr: "127.0.0.1:3"}]`,
			[]string{"grpc_addr"}},
		{"unknown field in a datastore", ds(`  - {name: trips, shards: 8, shard_count: 8}`), []string{"shard_count"}},
		{"unknown top-level field", threeNodes + "clusters: []\n", []string{"clusters"}},
		{"unknown field in a partition", ds(`  - name: trips
    shards: 8
    partitions: [{id: 0, first: 0, last_shard: 7, replicas: [n1]}]`), []string{"first"}},
		{"not YAML", "nodes: [", []string{"topology"}},
		// Every violation is reported, not only the first.
		{"every violation", `nodes:
  - {id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}
  - {id: BAD, raft_addr: nowhere, http_addr: "127.0.0.1:2"}
datastores:
  - {name: trips, mode: paxos, shards: 0}
  - {name: users, shards: 4, partition_count: 9}
  - {name: users, shards: 4, replicas: [n7]}`,
			[]string{`nodes[1].id "BAD"`, `nodes[1].raft_addr "nowhere"`, `nodes[1].http_addr "127.0.0.1:2" is also nodes[0].http_addr`,
				`datastores[0].mode "paxos"`, "datastores[0].shards 0", "datastores[1].partition_count 9",
				`datastores[2].name "users" is used twice`, `datastores[2].partitions[id 0]: replica "n7" is not a node`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			top, err := parse(t, tc.yaml)
			require.Error(t, err, "ParseTopology: got %+v, want an error mentioning %q", top, tc.want)
			assert.Nil(t, top, "ParseTopology: topology returned with the error")
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "topology: "), "error %q: want the prefix %q", msg, "topology: ")
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w, "error: want it to mention %q", w)
			}
		})
	}
}

// A raft or HTTP address must have a port another node can dial. net.SplitHostPort accepts
// "host:" (empty port) and any port text, so these slip through Normalize today; a node
// configured so listens on a random port and advertises an address nobody can reach.
func TestParseTopologyRejectsUnusablePorts(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:-1"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			text := `nodes: [{id: n1, raft_addr: "` + addr + `", http_addr: "127.0.0.1:2"}]`
			_, err := parse(t, text)
			require.ErrorContains(t, err, "nodes[0].raft_addr", "raft_addr %q: want an error naming nodes[0].raft_addr", addr)
		})
	}
}

func TestLoadTopology(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "topology.yaml")
	require.NoError(t, os.WriteFile(path, []byte(threeNodes+"datastores: [{name: trips, shards: 4}]\n"), 0o644))
	top, err := topology.Load(path)
	require.NoError(t, err, "LoadTopology")
	d, ok := top.Datastore("trips")
	require.True(t, ok, `LoadTopology: Datastore("trips") not found`)
	require.Len(t, d.Partitions, 1, "LoadTopology: partitions of trips")
	require.Equal(t, 3, d.Partitions[0].LastShard, "LoadTopology: trips partition 0 last shard: want 0..3")
	_, err = topology.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist, "LoadTopology(missing file)")
}

// TestZones: a node's zone and a datastore's leader zone must match ZonePattern; valid ones
// load as written.
func TestZones(t *testing.T) {
	good := topology.Topology{Nodes: []topology.NodeSpec{{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", Zone: "us-east-1a"}},
		Datastores: []topology.DatastoreSpec{{Name: "trips", Shards: 4, LeaderZone: "us-east-1a"}}}
	require.NoError(t, good.Normalize())
	assert.Equal(t, "us-east-1a", good.Nodes[0].Zone)
	assert.Equal(t, "us-east-1a", good.Datastores[0].LeaderZone)

	bad := topology.Topology{Nodes: []topology.NodeSpec{{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", Zone: "Zone A"}},
		Datastores: []topology.DatastoreSpec{{Name: "trips", Shards: 4, LeaderZone: "-b"}}}
	err := bad.Normalize()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `nodes[0].zone "Zone A" must match`)
	assert.Contains(t, err.Error(), `datastores[0].leader_zone "-b" must match`)
}
