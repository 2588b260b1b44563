package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/topology"
)

// The node RPC's request shapes, as the nodes encode them: the leader operations' array
// (cluster/leaderop.go) and the other RPCs' MessagePack maps by field name.
type (
	leaderRPC struct {
		_msgpack      struct{} `msgpack:",as_array"`
		Version       int
		Datastore     string
		Partition     int
		TimeoutMicros int64
		Command       []byte
	}
	readRequest struct {
		Datastore   string
		Partition   int
		Consistency cluster.Consistency
		Read        partition.ReadRequest
	}
	readRPC struct {
		TimeoutMicros int64
		Request       readRequest
	}
	adminRaftRPC struct {
		Datastore     string
		Partition     int
		Op            string
		Node          string
		Addr          string
		TimeoutMicros int64
	}
	adminHostRPC struct {
		Datastore string
		Partition int
		Op        string
	}
	readIndexRPC struct {
		Datastore     string
		Partition     int
		TimeoutMicros int64
	}
	precopyRPC struct {
		Datastore     string
		Partition     int
		Right         int
		TimeoutMicros int64
	}
)

// rpcClient speaks to the node RPC as another node does, or as anyone who reaches the raft port:
// each connection opens with the transport's header for node-to-node HTTP ("SH").
var rpcClient = &http.Client{Transport: &http.Transport{
	Proxy: nil,
	DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Write([]byte("SH")); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	},
}}

// postRPC sends body (MessagePack-encoded unless it is []byte) to path on the node RPC at addr
// and returns the status and the answer's body.
func postRPC(t *testing.T, addr, path string, body any) (int, string) {
	t.Helper()
	status, msg, err := tryRPC(addr, path, body)
	require.NoError(t, err, "POST %s to %s", path, addr)
	return status, msg
}

// tryRPC is postRPC returning its error, for conditions polled by require.Eventually.
func tryRPC(addr, path string, body any) (int, string, error) {
	data, ok := body.([]byte)
	if !ok {
		var err error
		if data, err = msgpack.Marshal(body); err != nil {
			return 0, "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(data))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/msgpack")
	res, err := rpcClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// clusterState is what a hostile request must not change: every shard's cells, the consumer
// groups, the column schemas, the index catalog and each partition's raft configuration.
type clusterState struct {
	cells   map[int][]cells.Cell
	groups  []string
	schemas []schemas.Version
	catalog *indexes.Catalog
	configs []cluster.PartitionConfig
}

func stateOf(t *testing.T, n *cluster.Node, spec *topology.DatastoreSpec) clusterState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	st := clusterState{cells: map[int][]cells.Cell{}}
	for shard := 0; shard < spec.Shards; shard++ {
		cs, err := n.ScanShard(ctx, ds, shard, 0, 1000, cluster.Strong)
		require.NoError(t, err, "ScanShard(%d)", shard)
		st.cells[shard] = cs
	}
	var err error
	st.groups, err = n.Groups(ctx, ds, cluster.Strong)
	require.NoError(t, err, "Groups")
	st.schemas, err = n.Schemas(ctx, ds, "", cluster.Strong)
	require.NoError(t, err, "Schemas")
	st.catalog, err = n.Catalog(ctx, ds, cluster.Strong)
	require.NoError(t, err, "Catalog")
	for _, p := range spec.Partitions {
		cfg, err := n.PartitionConfig(ctx, ds, p.ID)
		require.NoError(t, err, "PartitionConfig(%d)", p.ID)
		cfg.Term, cfg.CommitIndex, cfg.LastIndex, cfg.Leader = 0, 0, 0, ""
		st.configs = append(st.configs, cfg)
	}
	return st
}

// rowIn returns a row key of partition p of spec and another of the other partition.
func rowIn(t *testing.T, spec *topology.DatastoreSpec, p int) (row, other uuid.UUID) {
	t.Helper()
	rows := rowsPerPartition(t, spec, t.Name(), 1)
	return rows[p][0], rows[1-p][0]
}

// Every node RPC refuses, with 400 naming the field, what the public API would refuse, and does
// nothing (issue 19, item 4): each hostile request goes to partition 0's leader, the node that
// would apply it, and the cluster's state is compared before and after.
func TestNodeRPCRefusesHostileRequests(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	spec := &c.Topology.Datastores[0]
	li := c.LeaderOf(0)
	n, addr := c.Node(li), c.Spec(li).RaftAddr
	row, other := rowIn(t, spec, 0)
	shard := cells.ShardOf(row, spec.Shards)
	putAll(t, n, nil, []cells.Cell{newCell(t, row, "BASE", 1, `{"fare":10}`)})
	before := stateOf(t, n, spec)
	body, err := cells.EncodeBody([]byte(`{"fare":11}`))
	require.NoError(t, err)
	second := 1 * time.Second.Microseconds()
	op := func(ds string, pid int, c command.Command) leaderRPC {
		data, err := command.Encode(c)
		require.NoError(t, err, "encode %T", c)
		return leaderRPC{Version: 1, Datastore: ds, Partition: pid, TimeoutMicros: second, Command: data}
	}
	put := func(ds string, pid int, row uuid.UUID, shard int, col string, ref int64, b cells.Body) leaderRPC {
		return op(ds, pid, &command.Append{Writes: []command.Write{{Cells: []command.Cell{{Shard: shard, Key: cells.Key{RowKey: row, ColumnKey: col, RefKey: ref}, Body: b}}}}})
	}
	read := func(c cluster.Consistency, r partition.ReadRequest) readRPC {
		return readRPC{TimeoutMicros: second, Request: readRequest{Datastore: ds, Partition: 0, Consistency: c, Read: r}}
	}
	log := func(lr partition.LogRead) readRPC { return read(cluster.Strong, partition.ReadRequest{Log: &lr}) }
	group := "billing"
	for i := 0; !spec.Partitions[0].Shards().Contains(cluster.CoordinatorShard(group, spec.Shards)); i++ {
		group = fmt.Sprintf("billing%d", i) // a group partition 0 coordinates
	}
	other0 := "billing"
	for i := 0; spec.Partitions[0].Shards().Contains(cluster.CoordinatorShard(other0, spec.Shards)); i++ {
		other0 = fmt.Sprintf("billing%d", i) // a group partition 0 does not coordinate
	}
	hbIn := func(group string, pid int, mod func(*consumer.Command)) leaderRPC {
		cmd := consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", Shards: spec.Shards, SessionTimeout: time.Second}
		mod(&cmd)
		return op(ds, pid, &command.Group{Group: group, Cmd: cmd})
	}
	hb := func(mod func(*consumer.Command)) leaderRPC { return hbIn(group, 0, mod) }
	index := func(cmd command.Index) leaderRPC { return op(ds, 0, &cmd) }
	fields := []indexes.Field{{Name: "city", Type: indexes.TypeString, Column: "BASE"}}
	schema := func(col string, version int, text string) leaderRPC {
		return op(ds, 0, &command.Schema{Column: col, Version: version, Text: []byte(text)})
	}
	raftOp := func(op, node, addr string) adminRaftRPC {
		return adminRaftRPC{Datastore: ds, Partition: 0, Op: op, Node: node, Addr: addr, TimeoutMicros: second}
	}
	cases := []struct {
		name, path string
		req        any
		field      string // named in the refusal
	}{
		{"put: column with a path and SQL", "/internal/v1/put", put(ds, 0, row, shard, "../../BAD COLUMN; DROP TABLE", 1, body), "column"},
		{"put: negative ref key", "/internal/v1/put", put(ds, 0, row, shard, "BASE", -5, body), "ref_key"},
		{"put: body not zlib", "/internal/v1/put", put(ds, 0, row, shard, "BASE", 2, cells.Body("not zlib")), "body"},
		{"put: shard outside the partition", "/internal/v1/put", put(ds, 0, other, cells.ShardOf(other, spec.Shards), "BASE", 2, body), "shard"},
		{"put: unknown datastore", "/internal/v1/put", put("nope", 0, row, shard, "BASE", 2, body), "datastore"},
		{"put: negative partition", "/internal/v1/put", put(ds, -1, row, shard, "BASE", 2, body), "partition"},
		{"put: not MessagePack", "/internal/v1/put", []byte("\xc1 not msgpack"), "put"},
		{"put: a layout of another version", "/internal/v1/put", func() leaderRPC { r := put(ds, 0, row, shard, "BASE", 2, body); r.Version = 9; return r }(), "version"},
		{"put: two writes", "/internal/v1/put", op(ds, 0, &command.Append{Writes: make([]command.Write, 2)}), "command"},
		{"put: bad origin", "/internal/v1/put", op(ds, 0, &command.Append{Writes: []command.Write{{Cells: []command.Cell{{Shard: shard,
			Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 2}, Body: body}}, Origin: "West/../"}}}), "origin"},

		{"read: unknown consistency", "/internal/v1/read", read("linearish", partition.ReadRequest{Get: &partition.GetRead{Keys: []partition.GetKey{{Shard: shard, Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}}}}}), "consistency"},
		{"read: a bound of hours", "/internal/v1/read", read("stale<=7200000000000", partition.ReadRequest{Get: &partition.GetRead{Keys: []partition.GetKey{{Shard: shard, Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}}}}}), "consistency"},
		{"read index: unknown datastore", "/internal/v1/readindex", readIndexRPC{Datastore: "nope", Partition: 0, TimeoutMicros: second}, "datastore"},
		{"read index: negative partition", "/internal/v1/readindex", readIndexRPC{Datastore: ds, Partition: -1, TimeoutMicros: second}, "partition"},
		{"pre-copy: unknown datastore", "/internal/v1/precopy", precopyRPC{Datastore: "nope", Partition: 0, Right: 9, TimeoutMicros: second}, "datastore"},
		{"pre-copy: negative partition", "/internal/v1/precopy", precopyRPC{Datastore: ds, Partition: -1, Right: 9, TimeoutMicros: second}, "partition"},
		{"pre-copy: the parent itself", "/internal/v1/precopy", precopyRPC{Datastore: ds, Partition: 0, Right: 0, TimeoutMicros: second}, "right"},
		{"pre-copy: no such split", "/internal/v1/precopy", precopyRPC{Datastore: ds, Partition: 0, Right: 1, TimeoutMicros: second}, "right"},
		{"read: bad column", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Get: &partition.GetRead{Keys: []partition.GetKey{{Shard: shard, Key: cells.Key{RowKey: row, ColumnKey: "../../BAD COLUMN; DROP TABLE"}}}}}), "get.keys[0]"},
		{"read: negative ref key", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Get: &partition.GetRead{Keys: []partition.GetKey{{Shard: shard, Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: -5}}}}}), "get.keys[0]"},
		{"read: key of another partition", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Row: &partition.RowRead{Shard: cells.ShardOf(other, spec.Shards), RowKey: other}}), "row.shard"},
		{"read: two kinds", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Groups: &partition.GroupsRead{}, Catalog: &partition.CatalogRead{}}), "read"},
		{"read: log limit not positive", "/internal/v1/read", log(partition.LogRead{Shards: []partition.ShardLocation{{Shard: shard}}, Limit: -1}), "log.limit"},
		{"read: log page too large", "/internal/v1/read", log(partition.LogRead{Shards: []partition.ShardLocation{{Shard: shard}}, Limit: 1 << 30}), "log.limit"},
		{"read: log negative wait", "/internal/v1/read", log(partition.LogRead{Shards: []partition.ShardLocation{{Shard: shard}}, Limit: 1, Wait: -time.Second}), "log.wait"},
		{"read: log shard outside", "/internal/v1/read", log(partition.LogRead{Shards: []partition.ShardLocation{{Shard: spec.Shards + 3}}, Limit: 1}), "log.shards[0]"},
		{"read: log shard twice", "/internal/v1/read", log(partition.LogRead{Shards: []partition.ShardLocation{{Shard: shard}, {Shard: shard}}, Limit: 1}), "log.shards[1]"},
		{"read: log negative location", "/internal/v1/read", log(partition.LogRead{Shards: []partition.ShardLocation{{Shard: shard, Location: -5}}, Limit: 1}), "location"},
		{"read: log bad column", "/internal/v1/read", log(partition.LogRead{Shards: []partition.ShardLocation{{Shard: shard}}, Limit: 1, ColumnKey: "A B"}), "log.column_key"},
		{"read: versions limit", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Versions: &partition.VersionsRead{Shard: shard, RowKey: row, ColumnKey: "BASE", Limit: 0}}), "versions.limit"},
		{"read: index table", "/internal/v1/read", read(cluster.Stale, partition.ReadRequest{IndexStats: &partition.IndexStatsRead{Table: "x; DROP TABLE cells", Fields: fields}}), "table"},
		{"read: schema check that does not compile", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{SchemaCheck: &partition.SchemaCheckRead{Column: "BASE", Text: []byte(`{"minimum":"x"}`)}}), "schema_check.text"},
		{"read: bad group name", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Group: &partition.GroupRead{Group: "../etc"}}), "group: group name"},
		{"read: group of another shard count", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Group: &partition.GroupRead{Group: group, Shards: spec.Shards * 2}}), "group.shards"},
		{"read: group coordinated elsewhere", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Group: &partition.GroupRead{Group: other0, Shards: spec.Shards}}), "partition"},
		{"read: groups of another shard count", "/internal/v1/read", read(cluster.Strong, partition.ReadRequest{Groups: &partition.GroupsRead{Shards: spec.Shards + 1}}), "groups.shards"},

		{"group: bad name", "/internal/v1/group", hbIn("../../x", 0, func(*consumer.Command) {}), "group: group name"},
		{"group: not its coordinator", "/internal/v1/group", hbIn(group, 1, func(*consumer.Command) {}), "partition"},
		{"group: shard count not the datastore's", "/internal/v1/group#422", hb(func(c *consumer.Command) { c.Shards = 1 << 30 }), "shards"},
		{"group: unknown op", "/internal/v1/group#422", hb(func(c *consumer.Command) { c.Op = "explode" }), "op"},
		{"group: no worker", "/internal/v1/group#422", hb(func(c *consumer.Command) { c.Worker = "" }), "worker"},
		{"group: commit of a shard outside", "/internal/v1/group#422", hb(func(c *consumer.Command) { c.Commits = []consumer.Offset{{Shard: -5}} }), "commits[0].shard"},
		{"group: negative offset", "/internal/v1/group#422", hb(func(c *consumer.Command) { c.Commits = []consumer.Offset{{Shard: 1, Offset: -5}} }), "commits[0].offset"},

		{"index: not an index command", "/internal/v1/index", leaderRPC{Version: 1, Datastore: ds, TimeoutMicros: second, Command: []byte("not zlib, not msgpack")}, "command"},
		{"index: catalog name", "/internal/v1/index", index(command.Index{Op: command.IndexCatalog, Catalog: indexes.Command{Op: indexes.OpDrop, Name: "../x", Version: 1}}), "catalog.name"},
		{"index: catalog version", "/internal/v1/index", index(command.Index{Op: command.IndexCatalog, Catalog: indexes.Command{Op: indexes.OpReady, Name: "trips_by_city", Version: -5}}), "catalog.version"},
		{"index: catalog definition", "/internal/v1/index", index(command.Index{Op: command.IndexCatalog, Catalog: indexes.Command{Op: indexes.OpDefine, Name: "t", Definition: indexes.Definition{Table: "t"}}}), "catalog.definition"},
		{"index: upsert into a bad table", "/internal/v1/index", index(command.Index{Op: command.IndexUpsert, Table: "cells; DROP TABLE cells", Fields: fields}), "table"},
		{"index: upsert with a bad field", "/internal/v1/index", index(command.Index{Op: command.IndexUpsert, Table: "t_v1", Fields: []indexes.Field{{Name: "a b", Type: indexes.TypeString, Column: "BASE"}}}), "fields[0].name"},
		{"index: entry outside the partition", "/internal/v1/index", index(command.Index{Op: command.IndexUpsert, Table: "t_v1", Fields: fields,
			Entries: []command.IndexEntry{{Shard: int32(spec.Partitions[1].FirstShard), RowKey: row, Values: []any{"x"}, Refs: map[string]int64{"BASE": 1}}}}), "entries[0].shard"},
		{"index: entry ref key", "/internal/v1/index", index(command.Index{Op: command.IndexUpsert, Table: "t_v1", Fields: fields,
			Entries: []command.IndexEntry{{Shard: int32(shard), RowKey: row, Values: []any{"x"}, Refs: map[string]int64{"BASE": -5}}}}), "entries[0].refs"},
		{"index: drop a bad table", "/internal/v1/index", index(command.Index{Op: command.IndexDrop, Table: "../../etc"}), "table"},

		{"schema: bad column", "/internal/v1/schema", schema("../../BAD COLUMN; DROP TABLE", 1, `{}`), "column"},
		{"schema: version 0", "/internal/v1/schema", schema("BASE", 0, `{}`), "version"},
		{"schema: does not compile", "/internal/v1/schema", schema("BASE", 1, `{"minimum":"x"}`), "text"},
		{"schema: unknown datastore", "/internal/v1/schema", op("nope", 0, &command.Schema{Column: "BASE", Version: 1, Text: []byte(`{}`)}), "datastore"},

		{"erase: not an erase command", "/internal/v1/erase", index(command.Index{Op: command.IndexDrop, Table: "t_v1"}), "command"},
		{"erase: shard not the row's", "/internal/v1/erase", op(ds, 0, &command.Erase{Shard: int32(shard) + 1, RowKey: row}), "row_key"},
		{"erase: row of another partition", "/internal/v1/erase", op(ds, 0, &command.Erase{Shard: int32(cells.ShardOf(other, spec.Shards)), RowKey: other}), "row_key"},
		{"erase: negative partition", "/internal/v1/erase", op(ds, -1, &command.Erase{Shard: int32(shard), RowKey: row}), "partition"},

		{"admin raft: unknown op", "/internal/v1/admin/raft", raftOp("explode", "", ""), "op"},
		{"admin raft: bad node id", "/internal/v1/admin/raft", raftOp("add_voter", "../../x", "127.0.0.1:1"), "node"},
		{"admin raft: bad address", "/internal/v1/admin/raft", raftOp("add_nonvoter", "n9", "nowhere"), "addr"},
		{"admin raft: remove nobody", "/internal/v1/admin/raft", raftOp("remove", "", ""), "node"},
		{"admin raft: unknown datastore", "/internal/v1/admin/raft", adminRaftRPC{Datastore: "nope", Op: "config"}, "datastore"},
		{"admin raft: negative partition", "/internal/v1/admin/raft", adminRaftRPC{Datastore: ds, Partition: -1, Op: "config"}, "partition"},

		{"admin host: unknown op", "/internal/v1/admin/host", adminHostRPC{ds, 0, "destroy"}, "op"},
		{"admin host: unknown datastore", "/internal/v1/admin/host", adminHostRPC{"nope", 0, "unhost"}, "datastore"},
		{"admin host: negative partition", "/internal/v1/admin/host", adminHostRPC{ds, -1, "unhost"}, "partition"},
		{"admin status: not MessagePack", "/internal/v1/admin/status", []byte("\xc1"), "admin"},
	}
	for _, tc := range cases {
		path, want := tc.path, http.StatusBadRequest
		if p, ok := strings.CutSuffix(path, "#422"); ok {
			path, want = p, http.StatusUnprocessableEntity // a group command, refused as the coordinator refuses it
		}
		status, msg := postRPC(t, addr, path, tc.req)
		if assert.Equal(t, want, status, "%s: got %d %q, want %d", tc.name, status, msg, want) {
			assert.Contains(t, msg, tc.field, "%s: the refusal names the field", tc.name)
		}
	}
	after := stateOf(t, n, spec)
	assert.Equal(t, before, after, "the hostile requests changed the cluster")
	hosts := false
	for _, r := range n.Replicas() {
		hosts = hosts || r.Datastore == ds && r.Partition == 0 && r.Local
	}
	assert.True(t, hosts, "the leader still hosts partition 0")

	// What the API sends still passes: a write and a read of partition 0, forwarded as nodes do.
	res, err := c.Node((li+1)%3).PutCells(context.Background(), ds, []cells.Cell{newCell(t, row, "BASE", 2, `{"fare":12}`)})
	require.NoError(t, err, "a forwarded write")
	assert.Equal(t, cells.StatusCreated, res[0].Status, "a forwarded write")
}
