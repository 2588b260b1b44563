package cluster

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/topology"
)

// splitAppliedHere: a split's new partition opens once its parent here no longer holds its
// shards; a parent frozen by a merge (an empty range) counts as having applied the split only
// when the new partition's origin is in the store (the jepsen split nemesis found a split
// decided while its parent was frozen, whose new partition opened empty on every node and never
// elected a leader).
func TestSplitAppliedHere(t *testing.T) {
	r := func(first, last int) cells.ShardRange { return cells.ShardRange{First: first, Last: last} }
	right := r(6, 7)
	for _, tc := range []struct {
		what    string
		parent  cells.ShardRange
		origin  bool
		applied bool
	}{
		{"the parent still holds the shards", r(5, 7), false, false},
		{"the parent still holds the shards, origin or not", r(5, 7), true, false},
		{"the parent gave them up", r(5, 5), false, true},
		{"the parent is frozen, the split not applied", r(5, 4), false, false},
		{"the parent is frozen after it applied the split", r(5, 4), true, true},
	} {
		asked := false
		got := splitAppliedHere(tc.parent, right, func() bool { asked = true; return tc.origin })
		assert.Equal(t, tc.applied, got, tc.what)
		assert.Equal(t, tc.parent.Last < tc.parent.First, asked, "%s: the store read only for a frozen parent", tc.what)
	}
}

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
