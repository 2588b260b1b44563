package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/topology"
)

// TestDevMixedTopology: `dev --mode mixed` writes a topology with trips in raft mode,
// replicated on every node, beside rides in async mode on the 2 storage clusters of the
// MariaDB servers dev starts (partition i on c(i mod 2)), and the other modes keep theirs.
func TestDevMixedTopology(t *testing.T) {
	t.Parallel()
	f := devFlags{nodes: 3, host: "127.0.0.1", httpPort: 7070, raftPort: 7170, shards: 64, partitions: 4, mariadbPort: 7400}

	f.mode = devModeMixed
	top := f.topology()
	require.NoError(t, top.Normalize(), "the mixed topology")
	require.Len(t, top.Datastores, 2, "datastores of --mode mixed")
	trips, rides := top.Datastores[0], top.Datastores[1]
	assert.Equal(t, "trips", trips.Name)
	assert.Equal(t, topology.ModeRaft, trips.Mode, "trips' mode")
	assert.Empty(t, trips.StorageClusters, "trips' storage clusters")
	for _, p := range trips.Partitions {
		assert.Equal(t, []string{"n1", "n2", "n3"}, p.Replicas, "replicas of trips/%d", p.ID)
	}
	assert.Equal(t, devMixedAsync, rides.Name)
	assert.Equal(t, topology.ModeAsync, rides.Mode, "rides' mode")
	assert.Equal(t, 64, rides.Shards, "rides' shards")
	require.Len(t, rides.Partitions, 4, "rides' partitions")
	for _, p := range rides.Partitions {
		assert.Empty(t, p.Replicas, "replicas of rides/%d: every node serves it", p.ID)
		assert.Equal(t, []string{"c0", "c1"}[p.ID%2], p.Cluster, "storage cluster of rides/%d", p.ID)
	}
	require.Len(t, rides.StorageClusters, 2, "rides' storage clusters")
	assert.Equal(t, topology.StorageClusterSpec{Name: "c0", Master: "schemaless@tcp(127.0.0.1:7400)/",
		Minions: []string{"schemaless@tcp(127.0.0.1:7401)/", "schemaless@tcp(127.0.0.1:7402)/"}}, rides.StorageClusters[0])
	assert.Equal(t, "schemaless@tcp(127.0.0.1:7403)/", rides.StorageClusters[1].Master, "c1's master")
	assert.Equal(t, 1, rides.BufferClusters, "rides' buffer clusters")

	f.mode = topology.ModeAsync
	top = f.topology()
	require.Len(t, top.Datastores, 1, "datastores of --mode async")
	assert.Equal(t, "trips", top.Datastores[0].Name)
	assert.Equal(t, topology.ModeAsync, top.Datastores[0].Mode, "trips' mode in --mode async")

	f.mode = topology.ModeRaft
	top = f.topology()
	require.Len(t, top.Datastores, 1, "datastores of --mode raft")
	assert.Equal(t, topology.ModeRaft, top.Datastores[0].Mode, "trips' mode in --mode raft")
}

// TestDevModeErrors: dev refuses an unknown mode and --mysql in --mode async, and takes
// --mysql in --mode mixed (trips' cells), before it starts anything.
func TestDevModeErrors(t *testing.T) {
	t.Parallel()
	f := devFlags{nodes: 3, mariadbPort: 0, mode: "both"}
	assert.EqualError(t, runDev(context.Background(), f), `--mode "both": want raft, async or mixed`)
	f.mode, f.mysqlDSN = topology.ModeAsync, "root@tcp(127.0.0.1:3306)/"
	assert.ErrorContains(t, runDev(context.Background(), f), "--mysql is for --mode raft")
	f.mode = devModeMixed
	assert.ErrorContains(t, runDev(context.Background(), f), "--mariadb-port 0: want 1..",
		"--mode mixed with --mysql: want it past the --mysql check, refused on its port")
}

// devMixedTestFlights is how many flights TestDevMixed imports into trips, and so into rides.
const devMixedTestFlights = 200

// TestDevMixed runs `schemaless dev --mode mixed` as a process, as an operator would: the
// banner names both datastores and the storage clusters of rides, the import goes into trips
// and a slice of it into rides, both read back; then, with c0's master killed, rides alone is
// unready while every node and trips stay ready and trips takes writes through every node.
// TestMixedAsyncMasterDown (package node) checks the outage in depth; this test checks the
// command.
func TestDevMixed(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	bin := buildSchemaless(t)
	dir := filepath.Join(t.TempDir(), "dev")
	t.Cleanup(func() { logNodeLogs(t, dir) })
	flights, err := filepath.Abs("../../testdata/flights-100k.csv.gz")
	require.NoError(t, err)
	airports, _ := filepath.Abs("../../testdata/airports.csv")
	base := freePortRange(t, 15)
	httpPort, raftPort, dbPort, gossipPort := base, base+3, base+6, base+12
	t.Logf("ports %d-%d", base, base+14)
	p := startDev(t, bin, "dev", "--mode", "mixed", "--fresh", "--data-dir", dir, "--http-port", strconv.Itoa(httpPort),
		"--raft-port", strconv.Itoa(raftPort), "--gossip-port", strconv.Itoa(gossipPort), "--mariadb-port", strconv.Itoa(dbPort),
		"--log-level", "warn", "--triggers=false", "--indexes=false",
		"--import", flights, "--airports", airports, "--limit", strconv.Itoa(devMixedTestFlights), "--quiet")
	ready := p.waitLine("ready: ", 3*time.Minute)
	assert.Contains(t, ready, "store pebble and mariadb, datastore trips (raft, 64 shards, 4 partitions), "+
		"datastore rides (async, 64 shards, 4 partitions on 2 storage clusters)", "ready line: want both datastores")
	db := func(c, m int) string { return "127.0.0.1:" + strconv.Itoa(dbPort+c*3+m) }
	p.waitLine(fmt.Sprintf("  c0 (partitions 0,2): master %s, minions %s %s", db(0, 0), db(0, 1), db(0, 2)), 5*time.Second)
	p.waitLine("fail over: bin/schemaless admin promote --topology "+filepath.Join(dir, "topology.yaml")+" --datastore rides --cluster c0", 5*time.Second)
	p.waitLine("serving; Ctrl-C to stop", 3*time.Minute)
	out := p.output()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "rides: ") {
			t.Log(l)
		}
	}
	n := strconv.Itoa(devMixedTestFlights)
	for _, want := range []string{
		"imported " + n + " flights", "read back " + n + " cells (strong)",
		"rides: imported " + n + " flights", "(" + n + " created, 0 exists, 0 conflicts)",
		"rides: read back " + n + " cells (strong)", "rides: read back " + n + " cells (stale)",
		"  kill -9 $(cat " + filepath.Join(dir, "mariadb", "c0-m0", "mysqld.pid") + ")",
	} {
		assert.Contains(t, out, want, "dev output: want %q", want)
	}

	pidText, err := os.ReadFile(filepath.Join(dir, "mariadb", "c0-m0", "mysqld.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	require.NoError(t, err, "c0's master pid %q", pidText)
	require.Contains(t, mariadbdsUnder(t, dir), pid, "c0's master pid: want a mariadbd of %s", dir)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	p.waitLine("mariadb c0-m0 ("+db(0, 0)+") exited", 10*time.Second)
	api := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(httpPort+i) }
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for i := range 3 {
			resp, err := http.Get(api(i) + "/readyz?datastore=rides")
			require.NoError(c, err)
			resp.Body.Close()
			assert.Equal(c, http.StatusServiceUnavailable, resp.StatusCode, "node %d: /readyz?datastore=rides", i)
		}
	}, 10*time.Second, 50*time.Millisecond, "every node sees c0 without master")
	for i := range 3 {
		code, body := httpGet(t, api(i)+"/readyz")
		assert.Equal(t, http.StatusOK, code, "node %d: /readyz with rides' c0 down: %s", i, body)
		assert.Contains(t, body, `"rides":{"ready":false,"error":"rides: storage cluster c0 has no master"}`, "node %d: /readyz", i)
		code, body = httpGet(t, api(i)+"/readyz?datastore=trips")
		assert.Equal(t, http.StatusOK, code, "node %d: /readyz?datastore=trips: %s", i, body)
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("devmixed", i))).String()
		req, err := http.NewRequest(http.MethodPut, api(i)+"/v1/trips/cells/"+row+"/NOTE/1", strings.NewReader(`{"rides":"down"}`))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "PUT to trips through node %d", i)
		resp.Body.Close()
		assert.Equal(t, http.StatusCreated, resp.StatusCode, "PUT to trips through node %d with rides' c0 down", i)
		code, body = httpGet(t, api((i+1)%3)+"/v1/trips/cells/"+row+"/NOTE/1")
		assert.Equal(t, http.StatusOK, code, "GET from trips through node %d: %s", (i+1)%3, body)
	}
	p.interrupt(60 * time.Second)
	require.Empty(t, mariadbdsUnder(t, dir), "mariadbd processes still running after dev stopped")
}
