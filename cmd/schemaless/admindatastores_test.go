package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// fakeCatalog is an api.CatalogBackend over a map: it creates raft datastores of one
// partition per requested partition on the nodes asked (or n1..nR), and drops them.
type fakeCatalog struct {
	mu      sync.Mutex
	gen     uint64
	ds      []wire.DatastoreInfo
	creates []cluster.CreateDatastoreOptions
}

func (c *fakeCatalog) CreateDatastore(_ context.Context, o cluster.CreateDatastoreOptions) (wire.CreateDatastoreResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creates = append(c.creates, o)
	for _, d := range c.ds {
		if d.Name == o.Name {
			return wire.CreateDatastoreResponse{}, fmt.Errorf("%w: %q", cluster.ErrDatastoreExists, o.Name)
		}
	}
	if o.Shards > 64 {
		return wire.CreateDatastoreResponse{}, &cluster.FieldError{Field: "shards", Msg: "too many for this test"}
	}
	nodes, count := o.Replicas, o.ReplicaCount
	if count == 0 {
		count = 3
	}
	for i := 1; len(o.Replicas) == 0 && i <= count; i++ {
		nodes = append(nodes, fmt.Sprintf("n%d", i))
	}
	c.gen++
	d := wire.DatastoreInfo{Name: o.Name, Mode: "raft", Shards: o.Shards, Created: c.gen, CreatedAt: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	parts := max(o.Partitions, 1)
	for i := 0; i < parts; i++ {
		d.Partitions = append(d.Partitions, wire.CatalogPartition{ID: i, FirstShard: i * o.Shards / parts, LastShard: (i+1)*o.Shards/parts - 1,
			Replicas: nodes, Generation: c.gen, Parent: -1})
	}
	c.ds = append(c.ds, d)
	return wire.CreateDatastoreResponse{Generation: c.gen, Datastore: d, Ready: o.Partitions < 4}, nil
}

func (c *fakeCatalog) DropDatastore(_ context.Context, name, confirm string) (wire.DropDatastoreResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, d := range c.ds {
		if d.Name == name {
			c.ds = append(c.ds[:i], c.ds[i+1:]...)
			c.gen++
			return wire.DropDatastoreResponse{Generation: c.gen, Dropped: name}, nil
		}
	}
	return wire.DropDatastoreResponse{}, fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, name)
}

// partition returns datastore ds and the index of its partition pid, or the cluster's error for
// an unknown datastore or partition. c.mu must be held.
func (c *fakeCatalog) partition(ds string, pid int) (*wire.DatastoreInfo, int, error) {
	di := slices.IndexFunc(c.ds, func(d wire.DatastoreInfo) bool { return d.Name == ds })
	if di < 0 {
		return nil, 0, fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, ds)
	}
	d := &c.ds[di]
	pi := slices.IndexFunc(d.Partitions, func(p wire.CatalogPartition) bool { return p.ID == pid })
	if pi < 0 {
		return nil, 0, fmt.Errorf("%w: no partition %d in %q", cluster.ErrBadShard, pid, ds)
	}
	return d, pi, nil
}

// SplitPartition splits partition pid of datastore ds at atShard (0: the middle), the right
// half a new partition with the next id, refusing what the cluster refuses.
func (c *fakeCatalog) SplitPartition(_ context.Context, ds string, pid int, req wire.SplitRequest) (wire.SplitResponse, error) {
	atShard := req.AtShard
	c.mu.Lock()
	defer c.mu.Unlock()
	d, pi, err := c.partition(ds, pid)
	if err != nil {
		return wire.SplitResponse{}, err
	}
	left := d.Partitions[pi]
	if atShard == 0 {
		atShard = left.FirstShard + (left.LastShard-left.FirstShard+1)/2
	}
	if atShard <= left.FirstShard || atShard > left.LastShard {
		return wire.SplitResponse{}, &cluster.FieldError{Field: "at_shard", Msg: fmt.Sprintf("%d: want %d to %d", atShard, left.FirstShard+1, left.LastShard)}
	}
	c.gen++
	next := 0
	for _, p := range d.Partitions {
		next = max(next, p.ID+1)
	}
	right := wire.CatalogPartition{ID: next, FirstShard: atShard, LastShard: left.LastShard, Replicas: left.Replicas, Generation: c.gen, Parent: pid}
	left.LastShard, left.Generation = atShard-1, c.gen
	d.Partitions[pi] = left
	d.Partitions = append(d.Partitions, right)
	d.History = append(d.History, wire.CatalogEvent{Op: "split", Generation: c.gen, At: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC),
		Left: pid, Right: next, AtShard: atShard})
	return wire.SplitResponse{Generation: c.gen, Left: left, Right: right, Ready: atShard%2 == 0, TookMillis: 1234}, nil
}

// MergePartitions merges partition right of datastore ds into left, refusing what the cluster
// refuses: an unknown datastore or partition, right not after left or on other replicas.
func (c *fakeCatalog) MergePartitions(_ context.Context, ds string, left, right int) (wire.MergeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, li, err := c.partition(ds, left)
	if err != nil {
		return wire.MergeResponse{}, err
	}
	_, ri, err := c.partition(ds, right)
	if err != nil {
		return wire.MergeResponse{}, err
	}
	switch {
	case d.Partitions[ri].FirstShard != d.Partitions[li].LastShard+1:
		return wire.MergeResponse{}, &cluster.FieldError{Field: "right", Msg: fmt.Sprintf("partition %d does not follow partition %d", right, left)}
	case !slices.Equal(d.Partitions[ri].Replicas, d.Partitions[li].Replicas):
		return wire.MergeResponse{}, &cluster.FieldError{Field: "right", Msg: fmt.Sprintf("partition %d is not on the replicas of partition %d", right, left)}
	}
	c.gen++
	merged := d.Partitions[li]
	merged.LastShard, merged.Generation = d.Partitions[ri].LastShard, c.gen
	d.Partitions[li] = merged
	d.Partitions = slices.Delete(d.Partitions, ri, ri+1)
	d.History = append(d.History, wire.CatalogEvent{Op: "merge", Generation: c.gen, At: time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC),
		Left: left, Right: right})
	return wire.MergeResponse{Generation: c.gen, Merged: merged, TookMillis: 1234, PauseMillis: 56}, nil
}

// SetDatastoreSettings sets the leader zone and split thresholds req gives of datastore name,
// refusing an unknown datastore.
func (c *fakeCatalog) SetDatastoreSettings(_ context.Context, name string, req wire.DatastoreSettingsRequest) (wire.DatastoreSettingsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.ds {
		if c.ds[i].Name != name {
			continue
		}
		if req.LeaderZone != nil {
			c.ds[i].LeaderZone = *req.LeaderZone
		}
		if req.SplitLoad != nil {
			c.ds[i].SplitLoad = *req.SplitLoad
		}
		if req.SplitSize != nil {
			c.ds[i].SplitSize = *req.SplitSize
		}
		c.gen++
		return wire.DatastoreSettingsResponse{Generation: c.gen, Datastore: c.ds[i]}, nil
	}
	return wire.DatastoreSettingsResponse{}, fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, name)
}

func (c *fakeCatalog) CatalogDatastores() wire.DatastoresResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	return wire.DatastoresResponse{Generation: c.gen, Datastores: append([]wire.DatastoreInfo(nil), c.ds...)}
}

// catalogEndpoints serves package api over cat and returns the endpoints of the admin commands:
// a dead one first (the commands pass over it), then that server.
func catalogEndpoints(t *testing.T, cat *fakeCatalog) string {
	t.Helper()
	srv, err := api.NewServer(api.Backends{Node: struct{ api.NodeBackend }{}, Catalog: cat}, api.Config{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return deadEndpoint(t) + "," + hs.URL
}

// TestAdminDatastoreCommands drives datastores, create-datastore and drop-datastore against
// package api's server over a fake catalog with one imported datastore: the requests they
// send, their tables, --json, and their errors (flags checked before sending; the API's
// message and field).
func TestAdminDatastoreCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat := &fakeCatalog{gen: 1, ds: []wire.DatastoreInfo{{Name: "trips", Mode: "raft", Shards: 8, Partitions: []wire.CatalogPartition{
		{ID: 0, LastShard: 3, Replicas: []string{"n1", "n2", "n3"}, Learners: []string{"n4", "n5"}, Parent: -1},
		{ID: 1, FirstShard: 4, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}, Generation: 1, Parent: 0}},
		History: []wire.CatalogEvent{{Op: "split", Generation: 1, At: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC), Left: 0, Right: 1, AtShard: 4}}}}}
	eps := catalogEndpoints(t, cat)
	run := adminRunner(ctx, t, eps)

	out := run("datastores")
	assert.Contains(t, out, "catalog generation 1: 1 datastore\n")
	assert.True(t, hasLine(out, "NAME", "MODE", "SHARDS", "PARTITIONS", "CREATED", "CREATED", "AT"), "admin datastores: the header in\n%s", out)
	assert.True(t, hasLine(out, "trips", "raft", "8", "2", "0", "(topology)", "-"), "admin datastores: trips, imported, in\n%s", out)

	out = run("create-datastore", "--name", "users", "--shards", "16", "--partitions", "2", "--replicas", "2")
	assert.Contains(t, out, "created datastore users at catalog generation 2 (")
	assert.Contains(t, out, "ready: its partitions have leaders")
	assert.True(t, hasLine(out, "1", "8-15", "n1,n2", "2", "-"), "create-datastore: partition 1 in\n%s", out)
	out = run("create-datastore", "--name", "events", "--shards", "8", "--partitions", "4", "--replica-nodes", "n2,n3")
	assert.Contains(t, out, "not ready yet")
	var created wire.CreateDatastoreResponse
	require.NoError(t, json.Unmarshal([]byte(run("create-datastore", "--name", "logs", "--shards", "4", "--json")), &created))
	assert.Equal(t, "logs", created.Datastore.Name, "create-datastore --json")
	assert.Equal(t, []cluster.CreateDatastoreOptions{
		{Name: "users", Mode: "raft", Shards: 16, Partitions: 2, ReplicaCount: 2},
		{Name: "events", Mode: "raft", Shards: 8, Partitions: 4, Replicas: []string{"n2", "n3"}},
		{Name: "logs", Mode: "raft", Shards: 4},
	}, cat.creates, "the creations the catalog got")

	out = run("datastores", "--detail")
	assert.Contains(t, out, "catalog generation 4: 4 datastores\n")
	assert.True(t, hasLine(out, "users", "raft", "16", "2", "2", "2026-11-23T10:00:00Z"), "admin datastores: users in\n%s", out)
	assert.True(t, hasLine(out, "1", "4-7", "n1,n2,n3", "1", "0"), "admin datastores --detail: trips/1, split from 0, in\n%s", out)
	assert.True(t, hasLine(out, "0", "0-3", "n1,n2,n3", "(learners", "n4,n5)", "0", "-"), "admin datastores --detail: trips/0 with its learners, in\n%s", out)
	assert.Contains(t, out, "2026-11-22T09:00:00Z  generation 1  0 split at shard 4 into 0 and 1", "admin datastores --detail: trips' split")
	var list wire.DatastoresResponse
	require.NoError(t, json.Unmarshal([]byte(run("datastores", "--json")), &list))
	assert.Len(t, list.Datastores, 4, "admin datastores --json")

	assert.Equal(t, "dropped datastore logs at catalog generation 5\n", run("drop-datastore", "--name", "logs", "--confirm", "logs"))
	var dropped wire.DropDatastoreResponse
	require.NoError(t, json.Unmarshal([]byte(run("drop-datastore", "--name", "events", "--confirm", "events", "--json")), &dropped))
	assert.Equal(t, wire.DropDatastoreResponse{Generation: 6, Dropped: "events"}, dropped)

	checkAdminErrors(ctx, t, eps, []adminErrorCase{
		{[]string{"create-datastore", "--shards", "8"}, []string{"--name is required"}},
		{[]string{"create-datastore", "--name", "x"}, []string{"--shards is required"}},
		{[]string{"create-datastore", "--name", "x", "--shards", "8", "--replicas", "3", "--replica-nodes", "n1"}, []string{"exclude each other"}},
		{[]string{"create-datastore", "--name", "x", "--shards", "8", "--mode", "async"}, []string{`--mode "async"`, "POST /v1/admin/datastores"}},
		{[]string{"create-datastore", "--name", "users", "--shards", "8"}, []string{"409", "conflict", "datastore exists", `field "name"`}},
		{[]string{"create-datastore", "--name", "x", "--shards", "100"}, []string{"400", "too many for this test", `field "shards"`}},
		{[]string{"create-datastore", "--name", "x", "--shards", "8", "--replicas", "12"}, []string{"400", `field "replicas"`}},
		{[]string{"create-datastore", "--name", "X", "--shards", "8"}, []string{"400", `field "name"`}},
		{[]string{"drop-datastore", "--name", "users"}, []string{"--confirm is required", "--confirm users"}},
		{[]string{"drop-datastore", "--name", "users", "--confirm", "user"}, []string{`--confirm "user" does not name the datastore "users"`}},
		{[]string{"drop-datastore", "--name", "nope", "--confirm", "nope"}, []string{"404", `"nope"`, `field "datastore"`}},
	})
	assert.Len(t, cat.CatalogDatastores().Datastores, 2, "the refused commands changed nothing: trips and users remain")

	assert.Equal(t, "datastore users at catalog generation 7: leader zone b, split load off, split size the nodes'\n",
		run("datastore-settings", "--name", "users", "--leader-zone", "b", "--split-load", "-1"))
	assert.Equal(t, "datastore users at catalog generation 8: leader zone none, split load off, split size 1.048576e+06 bytes\n",
		run("datastore-settings", "--name", "users", "--leader-zone", "", "--split-size", "1048576"))
	checkAdminErrors(ctx, t, eps, []adminErrorCase{
		{[]string{"datastore-settings", "--name", "users"}, []string{"give --leader-zone, --split-load or --split-size"}},
		{[]string{"datastore-settings", "--leader-zone", "b"}, []string{"--name is required"}},
		{[]string{"datastore-settings", "--name", "nope", "--leader-zone", "b"}, []string{"404", `"nope"`, `field "datastore"`}},
	})
}

// TestAdminSplitCommand drives admin split against package api's server over a fake catalog
// with a datastore of 8 shards in one partition: the split it sends (the middle by default),
// the halves it prints, --json, and its errors (flags checked before sending; the API's
// message and field).
func TestAdminSplitCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat := &fakeCatalog{gen: 1, ds: []wire.DatastoreInfo{{Name: "trips", Mode: "raft", Shards: 8, Partitions: []wire.CatalogPartition{
		{ID: 0, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}, Parent: -1}}}}}
	eps := catalogEndpoints(t, cat)
	run := adminRunner(ctx, t, eps)

	out := run("split", "--datastore", "trips", "--partition", "0")
	assert.Contains(t, out, "split trips/0 at shard 4 at catalog generation 2 in 1.234s; ready: the new partition has a leader\n")
	assert.True(t, hasLine(out, "HALF", "ID", "SHARDS", "REPLICAS", "GENERATION", "PARENT"), "admin split: the header in\n%s", out)
	assert.True(t, hasLine(out, "left", "0", "0-3", "n1,n2,n3", "2", "-"), "admin split: the left half in\n%s", out)
	assert.True(t, hasLine(out, "right", "1", "4-7", "n1,n2,n3", "2", "0"), "admin split: the right half in\n%s", out)

	out = run("split", "--datastore", "trips", "--partition", "1", "--at-shard", "7")
	assert.Contains(t, out, "split trips/1 at shard 7 at catalog generation 3 in 1.234s; not ready yet")
	assert.True(t, hasLine(out, "right", "2", "7-7", "n1,n2,n3", "3", "1"), "admin split --at-shard 7: the right half in\n%s", out)

	var res wire.SplitResponse
	require.NoError(t, json.Unmarshal([]byte(run("split", "--datastore", "trips", "--partition", "0", "--json")), &res))
	assert.Equal(t, wire.CatalogPartition{ID: 3, FirstShard: 2, LastShard: 3, Replicas: []string{"n1", "n2", "n3"}, Generation: 4, Parent: 0}, res.Right, "admin split --json")

	out = run("datastores", "--detail")
	assert.Contains(t, out, "2026-11-24T08:00:00Z  generation 3  1 split at shard 7 into 1 and 2", "admin datastores --detail after the splits")

	checkAdminErrors(ctx, t, eps, []adminErrorCase{
		{[]string{"split", "--partition", "0"}, []string{"--datastore is required"}},
		{[]string{"split", "--datastore", "trips"}, []string{"--partition is required"}},
		{[]string{"split", "--datastore", "trips", "--partition", "0", "--at-shard", "-2"}, []string{"--at-shard -2"}},
		{[]string{"split", "--datastore", "trips", "--partition", "0", "--at-shard", "5"}, []string{"400", "5: want 1 to 1", `field "at_shard"`}},
		{[]string{"split", "--datastore", "trips", "--partition", "2"}, []string{"400", `field "at_shard"`}},
		{[]string{"split", "--datastore", "trips", "--partition", "9"}, []string{"404", "no partition 9", `field "partition"`}},
		{[]string{"split", "--datastore", "nope", "--partition", "0"}, []string{"404", `"nope"`, `field "datastore"`}},
	})
	assert.Equal(t, uint64(4), cat.CatalogDatastores().Generation, "the refused commands changed nothing")
}

// TestAdminMergeCommand drives admin merge against package api's server over a fake catalog
// with a datastore of 8 shards in four partitions, the last on other replicas: the merge it
// sends, the partition it prints, --json, the history afterwards, and its errors (flags
// checked before sending; the API's message and field).
func TestAdminMergeCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := []string{"n1", "n2", "n3"}
	cat := &fakeCatalog{gen: 1, ds: []wire.DatastoreInfo{{Name: "trips", Mode: "raft", Shards: 8, Partitions: []wire.CatalogPartition{
		{ID: 0, LastShard: 1, Replicas: nodes, Parent: -1},
		{ID: 1, FirstShard: 2, LastShard: 3, Replicas: nodes, Parent: 0},
		{ID: 2, FirstShard: 4, LastShard: 5, Replicas: nodes, Parent: 0},
		{ID: 3, FirstShard: 6, LastShard: 7, Replicas: []string{"n2", "n3", "n4"}, Parent: 2}}}}}
	eps := catalogEndpoints(t, cat)
	run := adminRunner(ctx, t, eps)

	out := run("merge", "--datastore", "trips", "--left", "0", "--right", "1")
	assert.Contains(t, out, "merged trips/1 into trips/0 at catalog generation 2 in 1.234s; writes to the merged shards paused 56ms\n")
	assert.True(t, hasLine(out, "ID", "SHARDS", "REPLICAS", "GENERATION"), "admin merge: the header in\n%s", out)
	assert.True(t, hasLine(out, "0", "0-3", "n1,n2,n3", "2"), "admin merge: the merged partition in\n%s", out)

	var res wire.MergeResponse
	require.NoError(t, json.Unmarshal([]byte(run("merge", "--datastore", "trips", "--left", "0", "--right", "2", "--json")), &res))
	assert.Equal(t, wire.MergeResponse{Generation: 3, TookMillis: 1234, PauseMillis: 56,
		Merged: wire.CatalogPartition{ID: 0, LastShard: 5, Replicas: nodes, Generation: 3, Parent: -1}}, res, "admin merge --json")

	out = run("datastores", "--detail")
	assert.Contains(t, out, "2026-11-25T08:00:00Z  generation 2  0 and 1 merged into 0", "admin datastores --detail after the merges")
	assert.Contains(t, out, "2026-11-25T08:00:00Z  generation 3  0 and 2 merged into 0", "admin datastores --detail after the merges")

	checkAdminErrors(ctx, t, eps, []adminErrorCase{
		{[]string{"merge", "--left", "0", "--right", "3"}, []string{"--datastore is required"}},
		{[]string{"merge", "--datastore", "trips", "--right", "3"}, []string{"--left is required"}},
		{[]string{"merge", "--datastore", "trips", "--left", "0"}, []string{"--right is required"}},
		{[]string{"merge", "--datastore", "trips", "--left", "-1", "--right", "3"}, []string{"--left -1 --right 3"}},
		{[]string{"merge", "--datastore", "trips", "--left", "3", "--right", "3"}, []string{"both 3"}},
		{[]string{"merge", "--datastore", "trips", "--left", "0", "--right", "3"}, []string{"400", "not on the replicas of partition 0", `field "right"`}},
		{[]string{"merge", "--datastore", "trips", "--left", "3", "--right", "0"}, []string{"400", "does not follow", `field "right"`}},
		{[]string{"merge", "--datastore", "trips", "--left", "0", "--right", "1"}, []string{"404", "no partition 1", `field "partition"`}},
		{[]string{"merge", "--datastore", "nope", "--left", "0", "--right", "1"}, []string{"404", `"nope"`, `field "datastore"`}},
	})
	assert.Equal(t, uint64(3), cat.CatalogDatastores().Generation, "the refused commands changed nothing")
}

// MoveToCluster is not used here.
func (c *fakeCatalog) MoveToCluster(context.Context, string, int, wire.ClusterMoveRequest) (wire.ClusterMoveResponse, error) {
	return wire.ClusterMoveResponse{}, errors.New("no storage clusters here")
}

// MoveCatalogVoters is not used here.
func (c *fakeCatalog) MoveCatalogVoters(context.Context, []string) (wire.CatalogVotersResponse, error) {
	return wire.CatalogVotersResponse{}, errors.New("no catalog group here")
}
