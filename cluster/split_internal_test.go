package cluster

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/topology"
)

// A node asked to run a request on a partition it does not know (a merge retired it between
// the check of the request's route and its run) refuses it as out of range, with the header
// that makes the sender re-route it by a newer catalog: the split benchmark saw a write fail
// with 400 when a merge landed in between.
func TestHostedReplicaRetiredPartition(t *testing.T) {
	spec := &topology.DatastoreSpec{Name: "trips", Mode: topology.ModeRaft, Shards: 8}
	n := &Node{}
	n.view.Store(&nodeView{byName: map[string]*datastore{"trips": {spec: spec}}, top: &topology.Topology{}})
	w := httptest.NewRecorder()
	assert.Nil(t, n.hostedReplica(w, "trips", 14), "no replica of a partition the node does not know")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, shardOutOfRangeKind, w.Header().Get(errorKindHeader), "the sender re-routes it")
	assert.Contains(t, w.Body.String(), "no partition 14")
}

// A request for a partition that a merge retired (the catalog gave its ID and lists it no
// more) is refused as out of range at once; one for a partition the catalog has not made yet
// (a split's new partition that the sender knows first) is refused only after rpcRoute's wait
// for the catalog to bring it. Every write sent to a merge's right partition during its freeze
// waited out that wait (1 s) before.
func TestRPCRouteRetiredPartition(t *testing.T) {
	spec := &topology.DatastoreSpec{Name: "trips", Mode: topology.ModeRaft, Shards: 8,
		Partitions: []topology.PartitionSpec{{ID: 0, FirstShard: 0, LastShard: 3}, {ID: 2, FirstShard: 4, LastShard: 7}}}
	n := &Node{}
	n.view.Store(&nodeView{byName: map[string]*datastore{"trips": {spec: spec, partitions: []*route{{spec: &spec.Partitions[0]}, {spec: &spec.Partitions[1]}}}},
		top: &topology.Topology{}})
	n.cat.cur.Store(&catalog.Catalog{Generation: 4, Datastores: map[string]*catalog.Datastore{"trips": {Name: "trips", Shards: 8, NextID: 3,
		Partitions: []catalog.Partition{{ID: 0, Shards: cells.ShardRange{First: 0, Last: 3}}, {ID: 2, Shards: cells.ShardRange{First: 4, Last: 7}}}}}})
	n.cat.applied = make(chan struct{}) // a catalog change would close it: none comes

	r, err := n.rpcRoute("trips", 2)
	require.NoError(t, err)
	assert.Equal(t, 2, r.spec.ID, "a partition the catalog lists")

	began := time.Now()
	_, err = n.rpcRoute("trips", 1)
	retired := time.Since(began)
	assert.ErrorIs(t, err, command.ErrShardOutOfRange, "partition 1, merged away")
	assert.Less(t, retired, 500*time.Millisecond, "a retired partition is refused without the wait for a split's")

	began = time.Now()
	_, err = n.rpcRoute("trips", 3)
	unborn := time.Since(began)
	assert.ErrorIs(t, err, command.ErrShardOutOfRange, "partition 3, not made yet")
	assert.GreaterOrEqual(t, unborn, 900*time.Millisecond, "a partition not made yet is waited for")
}

// fakeCampaigner is a replica whose elections the test runs: Campaign starts one (a term with
// two vote requests on their way) and counts it.
type fakeCampaigner struct {
	mu      sync.Mutex
	calls   int
	term    uint64
	pending int
	leader  string
}

func (f *fakeCampaigner) Campaign() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.term++
	f.pending = 2
	return nil
}

func (f *fakeCampaigner) Leader() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, ""
}

func (f *fakeCampaigner) Votes() (uint64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term, f.pending
}

func (f *fakeCampaigner) set(fn func(f *fakeCampaigner)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeCampaigner) campaigns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// The first election of a split's new group is started again once the one before has all its
// answers without a leader, and not while a vote request is on its way: a retry every 20 to
// 80 ms cut slow elections short (each vote is a synced write on a loaded disk).
func TestCampaignWaitsForVotes(t *testing.T) {
	n := &Node{log: slog.New(slog.DiscardHandler)}
	f := &fakeCampaigner{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.campaign(f, 7)
	}()
	require.Eventually(t, func() bool { return f.campaigns() == 1 }, time.Second, time.Millisecond, "the first election starts at once")
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 1, f.campaigns(), "no new election while its votes are on their way")

	f.set(func(f *fakeCampaigner) { f.pending = 0 }) // the votes failed: the voters are not open
	require.Eventually(t, func() bool { return f.campaigns() == 2 }, time.Second, time.Millisecond, "a new election once the last one has its answers")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 2, f.campaigns(), "and again none while its votes are on their way")

	f.set(func(f *fakeCampaigner) { f.pending, f.leader = 0, "n1" })
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("the campaign goes on with a leader elected")
	}
	assert.Equal(t, 2, f.campaigns(), "no election once a leader is known")

	// Votes that never come back (a voter that hangs) are given up after campaignStale.
	f2 := &fakeCampaigner{}
	go n.campaign(f2, 8)
	require.Eventually(t, func() bool { return f2.campaigns() == 2 }, 3*campaignStale, 5*time.Millisecond, "a new election after campaignStale")
	f2.set(func(f *fakeCampaigner) { f.leader = "n2" })
}
