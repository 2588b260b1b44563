package peering_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/watchdog"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/peering"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/wire"
)

const shards = 8

// startCluster starts a 3-node cluster named name (none when ""), with replicators that look
// at the catalog and the logs often.
func startCluster(t *testing.T, name string) *localcluster.Cluster {
	t.Helper()
	pc := partition.DefaultConfig()
	pc.HeartbeatTimeout, pc.ElectionTimeout, pc.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
	tc := triggers.DefaultConfig()
	tc.PollWait, tc.SessionTimeout, tc.Backoff, tc.BackoffMax, tc.MaxAttempts, tc.HaltThreshold = 200*time.Millisecond, 3*time.Second, 20*time.Millisecond, 100*time.Millisecond, 2, 5
	c, err := localcluster.Start(context.Background(), localcluster.Options{Dir: t.TempDir(), Nodes: 3, Shards: shards, Partitions: 2,
		Partition: pc, ClusterName: name, Replication: peering.Config{Poll: 100 * time.Millisecond, SampleInterval: time.Second, SchemaInterval: 200 * time.Millisecond, Triggers: tc},
		OnFatal: func(node string, err error) { t.Errorf("%s node %s: %v", name, node, err) }})
	require.NoError(t, err, "start cluster %q", name)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func clientOf(t *testing.T, c *localcluster.Cluster) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.Datastore = c.URLs(), "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err)
	return cl
}

// written is a cell a test wrote, and where.
type written struct {
	key  cells.Key
	body string
}

// write puts n cells of new rows through cl, tagged with tag, and returns them.
func write(t *testing.T, cl *client.Client, tag string, n int) []written {
	t.Helper()
	var out []written
	for i := 0; i < n; i += 20 {
		var batch []client.CellWrite
		for j := i; j < min(n, i+20); j++ {
			w := written{key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, body: fmt.Sprintf(`{"from":%q,"i":%d}`, tag, j)}
			batch = append(batch, client.CellWrite{Key: w.key, Body: json.RawMessage(w.body)})
			out = append(out, w)
		}
		res, err := cl.PutCells(context.Background(), batch)
		require.NoError(t, err, "put cells in %s", tag)
		for _, r := range res {
			require.Equal(t, wire.StatusCreated, r.Status)
		}
	}
	return out
}

// shardLog reads the whole log of every shard through cl.
func shardLog(t require.TestingT, cl *client.Client) map[int][]wire.Cell {
	out := map[int][]wire.Cell{}
	for s := 0; s < shards; s++ {
		var after int64
		for {
			p, err := cl.ShardCells(context.Background(), s, after, 1000)
			require.NoError(t, err, "log of shard %d", s)
			out[s] = append(out[s], p.Cells...)
			if len(p.Cells) == 0 || p.NextLocation >= p.HighWater {
				break
			}
			after = p.NextLocation
		}
	}
	return out
}

// TestReplicationBothWays: two clusters, east and west, each listing the other as a peer,
// written on both sides before and while they replicate. Every cell reaches the other cluster
// with its body and its origin, cells of one shard in their order at the origin, none sent
// back (a cell's origin keeps it from going on), and a key written with two bodies is parked
// without holding the stream back. The status shows the streams caught up.
func TestReplicationBothWays(t *testing.T) {
	t.Parallel()
	watchdog.Start(t, 6*time.Minute) // a hang ends with the stacks, not with make test's 45 minutes
	east, west := startCluster(t, "east"), startCluster(t, "west")
	ec, wc := clientOf(t, east), clientOf(t, west)
	ctx := context.Background()

	fromEast := write(t, ec, "east", 120)
	fromWest := write(t, wc, "west", 80)
	// The same key with two bodies, one per cluster: a conflict each side parks.
	both := cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}
	_, err := ec.PutCells(ctx, []client.CellWrite{{Key: both, Body: json.RawMessage(`{"from":"east"}`)}})
	require.NoError(t, err)
	_, err = wc.PutCells(ctx, []client.CellWrite{{Key: both, Body: json.RawMessage(`{"from":"west"}`)}})
	require.NoError(t, err)

	_, err = ec.SetReplicationPeer(ctx, "west", wire.ReplicationPeerRequest{Endpoints: west.URLs(), Datastores: []string{"trips"}})
	require.NoError(t, err, "east lists west")
	_, err = wc.SetReplicationPeer(ctx, "east", wire.ReplicationPeerRequest{Endpoints: east.URLs(), Datastores: []string{"trips"}})
	require.NoError(t, err, "west lists east")
	fromEast = append(fromEast, write(t, ec, "east", 100)...)
	fromWest = append(fromWest, write(t, wc, "west", 60)...)

	arrived := func(ct *assert.CollectT, to *client.Client, ws []written, origin string) {
		for _, w := range ws {
			c, err := to.GetCell(ctx, w.key)
			if !assert.NoError(ct, err, "%s from %s", w.key, origin) {
				return
			}
			assert.JSONEq(ct, w.body, string(c.Body))
			assert.Equal(ct, origin, c.Origin, "origin of %s", w.key)
		}
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		arrived(ct, wc, fromEast, "east")
		arrived(ct, ec, fromWest, "west")
	}, 60*time.Second, 200*time.Millisecond, "every cell reaches the other cluster")

	// At its origin a cell has no origin; the conflicting key keeps each side's own body.
	for _, w := range fromEast[:5] {
		c, err := ec.GetCell(ctx, w.key)
		require.NoError(t, err)
		assert.Empty(t, c.Origin, "a cell at its origin")
	}
	for cl, want := range map[*client.Client]string{ec: "east", wc: "west"} {
		c, err := cl.GetCell(ctx, both)
		require.NoError(t, err)
		assert.JSONEq(t, fmt.Sprintf(`{"from":%q}`, want), string(c.Body), "the conflicting key keeps its own body")
		assert.Empty(t, c.Origin)
	}

	// Order and no loops: per shard, the cells of each origin appear in the other cluster in
	// their order at the origin, each once.
	for _, pair := range []struct {
		from, to *client.Client
		origin   string
	}{{ec, wc, "east"}, {wc, ec, "west"}} {
		src, dst := shardLog(t, pair.from), shardLog(t, pair.to)
		for s := 0; s < shards; s++ {
			var want, got []string
			for _, c := range src[s] {
				if c.Origin == "" && c.RowKey != both.RowKey.String() {
					want = append(want, c.RowKey)
				}
			}
			for _, c := range dst[s] {
				if c.Origin == pair.origin {
					got = append(got, c.RowKey)
				}
			}
			assert.Equal(t, want, got, "shard %d: cells from %s in the peer, in origin order, once each", s, pair.origin)
		}
	}

	// The status: both peers, each stream caught up but for the parked conflict.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		st, err := ec.Replication(ctx)
		require.NoError(ct, err)
		assert.Equal(ct, "east", st.Cluster)
		require.Len(ct, st.Peers, 1)
		p := st.Peers[0]
		assert.Equal(ct, "west", p.Peer)
		require.Len(ct, p.Streams, 1)
		s := p.Streams[0]
		assert.Equal(ct, "_replication.west", s.Group)
		assert.Empty(ct, s.Error)
		assert.Zero(ct, s.LagCells, "lag")
		assert.Equal(ct, 1, s.Parked, "the conflicting key is parked")
		assert.Len(ct, s.Shards, shards)
	}, 30*time.Second, 200*time.Millisecond)

	// An erasure in east erases the row in west too; west's tombstone carries east as its
	// origin, and the erasure does not come back to east.
	gone := fromEast[0].key
	_, err = ec.EraseRow(ctx, gone.RowKey)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := wc.GetCell(ctx, gone)
		return errors.Is(err, client.ErrNotFound)
	}, 30*time.Second, 100*time.Millisecond, "the row erased in east is erased in west")
	tombstones := func(cl *client.Client) []wire.Cell {
		var out []wire.Cell
		for _, c := range shardLog(t, cl)[cells.ShardOf(gone.RowKey, shards)] {
			if c.Erased && c.RowKey == gone.RowKey.String() {
				out = append(out, c)
			}
		}
		return out
	}
	if ts := tombstones(wc); assert.Len(t, ts, 1, "west's tombstones of the row") {
		assert.Equal(t, "east", ts[0].Origin)
	}
	time.Sleep(time.Second) // west's stream has had time to send it back, if it would
	if ts := tombstones(ec); assert.Len(t, ts, 1, "east's tombstones of the row: the erasure did not come back") {
		assert.Empty(t, ts[0].Origin)
	}

	// Dropping the peer stops the stream: a later cell stays in east.
	require.NoError(t, ec.DropReplicationPeer(ctx, "west"))
	time.Sleep(500 * time.Millisecond) // the replicators' Poll is 100ms
	late := write(t, ec, "east", 1)[0]
	assert.Never(t, func() bool {
		_, err := wc.GetCell(ctx, late.key)
		return err == nil
	}, 2*time.Second, 200*time.Millisecond, "a cell written after the drop reached west")
	err = ec.DropReplicationPeer(ctx, "west")
	assert.True(t, errors.Is(err, client.ErrNotFound), "drop of an unknown peer: %v", err)
}

// TestPeerValidation: a peer is refused with a 400 naming the field when this cluster has no
// name, when it names this cluster, and for bad endpoints, datastores and credentials; and
// a cell's origin is refused when it names this cluster or is malformed. Nothing is changed.
func TestPeerValidation(t *testing.T) {
	t.Parallel()
	watchdog.Start(t, 6*time.Minute) // a hang ends with the stacks, not with make test's 45 minutes
	named, unnamed := startCluster(t, "east"), startCluster(t, "")
	nc, uc := clientOf(t, named), clientOf(t, unnamed)
	ctx := context.Background()
	good := wire.ReplicationPeerRequest{Endpoints: []string{"http://127.0.0.1:1"}, Datastores: []string{"trips"}}
	field := func(err error) string {
		var ae *client.APIError
		if errors.As(err, &ae) {
			return ae.Field
		}
		return "(not a client.APIError: " + fmt.Sprint(err) + ")"
	}
	_, err := uc.SetReplicationPeer(ctx, "west", good)
	require.ErrorIs(t, err, client.ErrInvalidArgument, "a cluster with no name")
	assert.Equal(t, "cluster", field(err))
	for _, tc := range []struct {
		name, peer, field string
		mod               func(*wire.ReplicationPeerRequest)
	}{
		{"own name", "east", "peer", func(*wire.ReplicationPeerRequest) {}},
		{"no endpoint", "west", "endpoints", func(r *wire.ReplicationPeerRequest) { r.Endpoints = nil }},
		{"endpoint with a path", "west", "endpoints[0]", func(r *wire.ReplicationPeerRequest) { r.Endpoints = []string{"http://h:1/x"} }},
		{"endpoint neither URL nor host:port", "west", "endpoints[0]", func(r *wire.ReplicationPeerRequest) { r.Endpoints = []string{"nohost"} }},
		{"unknown datastore", "west", "datastores[0]", func(r *wire.ReplicationPeerRequest) { r.Datastores = []string{"nope"} }},
		{"token with a space", "west", "token", func(r *wire.ReplicationPeerRequest) { r.Token = "a b" }},
		{"CA not PEM", "west", "ca_cert", func(r *wire.ReplicationPeerRequest) { r.CACert = "not pem" }},
		{"certificate without its key", "west", "client_cert", func(r *wire.ReplicationPeerRequest) { r.ClientCert = "x" }},
	} {
		req := good
		tc.mod(&req)
		_, err := nc.SetReplicationPeer(ctx, tc.peer, req)
		require.ErrorIs(t, err, client.ErrInvalidArgument, tc.name)
		assert.Equal(t, tc.field, field(err), tc.name)
	}
	st, err := nc.Replication(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Peers, "no refused peer was listed")

	k := cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}
	for origin, want := range map[string]string{"east": "own name", "West": "malformed"} {
		_, err := nc.PutCells(ctx, []client.CellWrite{{Key: k, Body: json.RawMessage(`{}`)}}, client.WithOrigin(origin))
		require.ErrorIs(t, err, client.ErrInvalidArgument, "origin %q (%s)", origin, want)
	}
	_, err = nc.GetCell(ctx, k)
	require.ErrorIs(t, err, client.ErrNotFound, "a refused write wrote nothing")
	_, err = nc.EraseRow(ctx, k.RowKey, client.WithOrigin("east"))
	require.ErrorIs(t, err, client.ErrInvalidArgument, "an erasure whose origin is this cluster")
	assert.Equal(t, "origin", field(err))
	res, err := nc.PutCells(ctx, []client.CellWrite{{Key: k, Body: json.RawMessage(`{}`)}}, client.WithOrigin("west"))
	require.NoError(t, err, "an origin from elsewhere")
	require.Equal(t, wire.StatusCreated, res[0].Status)
	c, err := nc.GetCell(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, "west", c.Origin)
}
