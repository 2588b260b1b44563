package cluster

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

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
