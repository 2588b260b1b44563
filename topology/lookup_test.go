package topology

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAsyncDatastores(t *testing.T) {
	t.Parallel()
	top, err := Parse(strings.NewReader(`nodes:
  - {id: n1, raft_addr: "127.0.0.1:1", http_addr: "127.0.0.1:2"}
datastores:
  - name: trips
    mode: async
    shards: 4
    storage_clusters:
      - {name: c0, master: "u@tcp(127.0.0.1:3306)/", minions: []}
      - {name: c1, master: "u@tcp(127.0.0.1:3307)/", minions: []}
  - name: users
    shards: 4
  - name: rides
    mode: async
    shards: 4
    storage_clusters:
      - {name: c0, master: "u@tcp(127.0.0.1:3308)/", minions: []}
    unsafe_no_buffered_writes: true
`))
	require.NoError(t, err)
	all, err := top.AsyncDatastores("")
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "trips", all[0].Name)
	assert.Equal(t, "rides", all[1].Name)
	one, err := top.AsyncDatastores("rides")
	require.NoError(t, err)
	assert.Same(t, all[1], one[0], "a pointer into the topology")

	_, err = top.AsyncDatastores("cars")
	assert.ErrorIs(t, err, ErrNoDatastore)
	assert.EqualError(t, err, `topology: no such datastore "cars" (it has: trips, users, rides)`)
	_, err = top.AsyncDatastores("users")
	assert.ErrorIs(t, err, ErrNotAsync)
	assert.ErrorContains(t, err, "users is in mode raft")

	raftOnly := &Topology{Datastores: []DatastoreSpec{{Name: "users", Mode: ModeRaft}}}
	_, err = raftOnly.AsyncDatastores("")
	assert.ErrorIs(t, err, ErrNoDatastore, "no async datastore")
	assert.EqualError(t, err, "topology: no such datastore in mode async")

	c, err := all[0].FindStorageCluster("c1")
	require.NoError(t, err)
	assert.Equal(t, "c1", c.Name)
	_, err = all[0].FindStorageCluster("c9")
	assert.ErrorIs(t, err, ErrNoStorageCluster)
	assert.EqualError(t, err, `topology: no such storage cluster "c9" in datastore trips (it has: c0, c1)`)
}
