package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// The datastores of the mixed cluster: raft and async in the same nodes, as `schemaless dev
// --mode mixed` names them.
const (
	mixedRaft  = "trips"
	mixedAsync = "rides"
)

// failFast bounds a strong read of an async partition whose storage cluster has no master:
// the node answers from what its probes found, without waiting for the request's deadline
// (10 s).
const failFast = 2 * time.Second

// TestMixedAsyncMasterDown runs one raft and one async datastore in the same three nodes, as
// operators run both modes in one cluster: "trips" in raft mode on the nodes' SQLite stores,
// "rides" in async mode on two storage clusters (c0, c1) of a master and a minion each, real
// mariadbd servers. It kills c0's master (SIGKILL) and checks what docs/operations.md says of
// an async outage: every node stays ready (/readyz 200) and so does trips, whose writes
// (put_cell, put_cells through every node) are acknowledged and read back, strong and stale,
// from every node; rides alone is unready (/readyz?datastore=rides 503, naming c0), its strong
// reads of c0's partition fail fast with the retryable 503, its stale reads are served by c0's
// minion, its c1 partition serves strong reads, a write to c0's partition is buffered (on c1's
// master), and a write to c1's partition, whose only buffer cluster is c0, is unavailable. A
// promotion of the minion (as `schemaless admin promote` does) makes rides ready again, the
// buffered write readable and the refused one possible.
func TestMixedAsyncMasterDown(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	ctx := context.Background()
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	set, err := mariadb.StartReplicated(sctx, mariadb.ReplicatedOptions{Minions: 1})
	cancel()
	require.NoError(t, err, "start 2 storage clusters of a master and a minion")
	t.Cleanup(func() { _ = set.Close() })
	t.Logf("storage clusters set up in %v", time.Since(start))

	pc := partition.DefaultConfig()
	pc.HeartbeatTimeout, pc.ElectionTimeout, pc.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
	logger := slog.New(slog.NewTextHandler(clustertest.NewTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	lc, err := localcluster.Start(ctx, localcluster.Options{Dir: t.TempDir(), Shards: 8, Partitions: 2, Partition: pc,
		Datastores: []localcluster.DatastoreOptions{{Name: mixedAsync, Async: &localcluster.AsyncOptions{
			Clusters: topology.StorageClustersOf(set.DSNs()), Prefix: "sl",
			Cluster:   partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond, BreakerTimeout: time.Second},
			Partition: partition.AsyncConfig{ReapInterval: 100 * time.Millisecond, ReplayAfter: 500 * time.Millisecond},
		}}},
		Logger:  logger,
		OnFatal: func(node string, err error) { t.Errorf("node %s: fatal storage error: %v", node, err) },
	})
	require.NoError(t, err, "start 3 nodes serving %s (raft) and %s (async)", mixedRaft, mixedAsync)
	t.Cleanup(func() { _ = lc.Close() }) // before the servers stop
	urls := lc.URLs()
	ridesSpec, ok := lc.Topology.Datastore(mixedAsync)
	require.True(t, ok)
	require.Equal(t, "c0", ridesSpec.Partitions[0].Cluster, "rides partition 0's storage cluster")
	require.Equal(t, "c1", ridesSpec.Partitions[1].Cluster, "rides partition 1's storage cluster")
	for _, u := range urls {
		for _, ds := range []string{mixedRaft, mixedAsync} {
			r := get(t, u+"/readyz?datastore="+ds)
			require.Equal(t, http.StatusOK, r.code, "%s/readyz?datastore=%s before the kill: %s", u, ds, r.body)
		}
	}

	// rides cells on both storage clusters, on their minions before the kill.
	onC0 := rowsOf(t, ridesSpec, 0, "c0", 2)
	onC1 := rowsOf(t, ridesSpec, 1, "c1", 2)
	ridesCells := []testCell{{onC0[0], `{"rider":"before","on":"c0"}`}, {onC1[0], `{"rider":"before","on":"c1"}`}}
	r := send(t, http.MethodPost, urls[0]+"/v1/rides/cells", putCellsBody(ridesCells))
	require.Equal(t, http.StatusOK, r.code, "put_cells to rides: %s", r.body)
	requireStatuses(t, r.body, wire.StatusCreated, len(ridesCells), "put_cells to rides")
	for c := range 2 {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		require.NoError(t, set.WaitCaughtUp(wctx, c), "c%d's minion catches up", c)
		cancel()
	}

	// Kill c0's master.
	master := set.Instance(0, 0)
	require.NoError(t, syscall.Kill(master.Pid(), syscall.SIGKILL), "SIGKILL c0's master (pid %d)", master.Pid())
	select {
	case <-master.Done():
	case <-time.After(10 * time.Second):
		require.FailNow(t, "c0's master still running 10s after SIGKILL")
	}
	killed := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, u := range urls {
			r, err := call(http.MethodGet, u+"/readyz?datastore="+mixedAsync, "")
			require.NoError(c, err)
			assert.Equal(c, http.StatusServiceUnavailable, r.code, "%s/readyz?datastore=rides after c0's master died: %s", u, r.body)
		}
	}, 10*time.Second, 50*time.Millisecond, "every node sees that c0 has no master")
	t.Logf("every node saw c0 without master %v after the kill", time.Since(killed))

	checkReadiness := func(when string) {
		t.Helper()
		for _, u := range urls {
			r := get(t, u+"/readyz")
			if assert.Equal(t, http.StatusOK, r.code, "%s/readyz %s: want the node ready: %s", u, when, r.body) {
				var rd wire.Readiness
				require.NoError(t, json.Unmarshal([]byte(r.body), &rd), "%s/readyz: %s", u, r.body)
				assert.True(t, rd.Datastores[mixedRaft].Ready, "%s/readyz %s: trips ready in %s", u, when, r.body)
				assert.False(t, rd.Datastores[mixedAsync].Ready, "%s/readyz %s: rides unready in %s", u, when, r.body)
				assert.Equal(t, "rides: storage cluster c0 has no master", rd.Datastores[mixedAsync].Error, "%s/readyz %s: rides' reason", u, when)
			}
			r = get(t, u+"/readyz?datastore="+mixedRaft)
			assert.Equal(t, http.StatusOK, r.code, "%s/readyz?datastore=trips %s: %s", u, when, r.body)
			assert.JSONEq(t, fmt.Sprintf(`{"status":"ready","node":"n%d","datastore":"trips"}`, slices.Index(urls, u)+1), r.body,
				"%s/readyz?datastore=trips %s", u, when)
			r = get(t, u+"/readyz?datastore="+mixedAsync)
			assert.Equal(t, http.StatusServiceUnavailable, r.code, "%s/readyz?datastore=rides %s: %s", u, when, r.body)
			assert.Equal(t, "1", r.header.Get("Retry-After"), "%s/readyz?datastore=rides %s: Retry-After", u, when)
			assert.JSONEq(t, `{"error":{"code":"unavailable","message":"not ready: rides: storage cluster c0 has no master"}}`, r.body,
				"%s/readyz?datastore=rides %s", u, when)
		}
	}
	checkReadiness("with c0's master down")

	// trips takes writes through every node, put_cell and put_cells, and reads them back.
	tripsSpec, _ := lc.Topology.Datastore(mixedRaft)
	var trips []testCell
	for i, u := range urls {
		one := testCell{rowsOf(t, tripsSpec, i%2, fmt.Sprint("put_cell", i), 1)[0], fmt.Sprintf(`{"via":%d,"op":"put_cell"}`, i)}
		r := send(t, http.MethodPut, u+"/v1/trips/cells/"+one.row.String()+"/BASE/1", one.body)
		assert.Equal(t, http.StatusCreated, r.code, "put_cell to trips through %s: %s", u, r.body)
		batch := []testCell{
			{rowsOf(t, tripsSpec, 0, fmt.Sprint("put_cells", i), 1)[0], fmt.Sprintf(`{"via":%d,"op":"put_cells","p":0}`, i)},
			{rowsOf(t, tripsSpec, 1, fmt.Sprint("put_cells", i), 1)[0], fmt.Sprintf(`{"via":%d,"op":"put_cells","p":1}`, i)},
		}
		r = send(t, http.MethodPost, u+"/v1/trips/cells", putCellsBody(batch))
		assert.Equal(t, http.StatusOK, r.code, "put_cells to trips through %s: %s", u, r.body)
		requireStatuses(t, r.body, wire.StatusCreated, len(batch), "put_cells to trips through "+u)
		trips = append(append(trips, one), batch...)
	}
	for _, u := range urls {
		r := send(t, http.MethodPost, u+"/v1/trips/cells/get", getCellsBody(trips))
		require.Equal(t, http.StatusOK, r.code, "strong batch get of trips through %s: %s", u, r.body)
		assertCells(t, r.body, trips, "strong read of trips through "+u)
		// A follower's replica may trail its leader by the entries not yet applied there.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			r, err := call(http.MethodPost, u+"/v1/trips/cells/get?consistency=stale", getCellsBody(trips))
			require.NoError(c, err)
			require.Equal(c, http.StatusOK, r.code, "stale batch get of trips through %s: %s", u, r.body)
			assertCells(c, r.body, trips, "stale read of trips through "+u)
		}, 5*time.Second, 50*time.Millisecond, "stale reads of trips through %s", u)
	}

	// rides: strong reads of c0's partition fail fast and retryably; stale reads are served by
	// c0's minion; c1's partition serves strong reads; a write to c0's partition is buffered.
	for _, u := range urls {
		path := u + "/v1/rides/cells/" + onC0[0].String() + "/BASE/1"
		began := time.Now()
		r := get(t, path)
		took := time.Since(began)
		assert.Equal(t, http.StatusServiceUnavailable, r.code, "strong read of rides on c0 through %s: %s", u, r.body)
		assert.Equal(t, "1", r.header.Get("Retry-After"), "strong read of rides on c0 through %s: Retry-After", u)
		assert.Contains(t, r.body, `"code":"unavailable"`, "strong read of rides on c0 through %s", u)
		assert.Contains(t, r.body, "no master of storage cluster c0", "strong read of rides on c0 through %s", u)
		assert.Less(t, took, failFast, "strong read of rides on c0 through %s: want it to fail fast", u)
		r = get(t, path+"?consistency=stale")
		assert.Equal(t, http.StatusOK, r.code, "stale read of rides on c0 through %s: %s", u, r.body)
		assertCells(t, `{"cells":[`+r.body+`]}`, ridesCells[:1], "stale read of rides on c0 through "+u)
		r = get(t, u+"/v1/rides/cells/"+onC1[0].String()+"/BASE/1")
		assert.Equal(t, http.StatusOK, r.code, "strong read of rides on c1 through %s: %s", u, r.body)
	}
	buffered := testCell{onC0[1], `{"rider":"during","on":"c0"}`}
	r = send(t, http.MethodPut, urls[1]+"/v1/rides/cells/"+buffered.row.String()+"/BASE/1", buffered.body)
	assert.Equal(t, http.StatusAccepted, r.code, "put_cell to rides on c0 with its master down: %s", r.body)
	assert.Contains(t, r.body, `"status":"buffered"`, "put_cell to rides on c0 with its master down")
	r = send(t, http.MethodPut, urls[2]+"/v1/rides/cells/"+onC1[1].String()+"/BASE/1", `{"rider":"during","on":"c1"}`)
	assert.Equal(t, http.StatusServiceUnavailable, r.code, "put_cell to rides on c1, its buffer cluster c0 without master: %s", r.body)
	assert.Contains(t, r.body, "no buffer cluster took the write", "put_cell to rides on c1, its buffer cluster c0 without master")
	checkReadiness("after the writes and reads")

	// Promote c0's minion: rides is ready again on every node, and the buffered cell is replayed.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pr, err := replication.Promote(pctx, []string{set.AdminDSN(0, 0), set.AdminDSN(0, 1)}, replication.PromoteOptions{ReplUser: set.User()})
	require.NoError(t, err, "promote c0's minion")
	require.Equal(t, set.AdminDSN(0, 1), pr.NewMaster, "the promoted member")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, u := range urls {
			r, err := call(http.MethodGet, u+"/readyz?datastore="+mixedAsync, "")
			require.NoError(c, err)
			assert.Equal(c, http.StatusOK, r.code, "%s/readyz?datastore=rides after the promotion: %s", u, r.body)
		}
	}, 10*time.Second, 50*time.Millisecond, "every node sees c0's new master")
	// The write refused during the outage is taken again, once a node sees c0's new master as
	// the buffer cluster.
	retried := testCell{onC1[1], `{"rider":"during","on":"c1"}`}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := call(http.MethodPut, urls[2]+"/v1/rides/cells/"+retried.row.String()+"/BASE/1", retried.body)
		require.NoError(c, err)
		assert.Equal(c, http.StatusCreated, r.code, "put_cell to rides on c1 after the promotion: %s", r.body)
	}, 10*time.Second, 100*time.Millisecond, "a write to c1's partition, buffered on c0's new master, is created")
	want := slices.Concat(ridesCells, []testCell{buffered, retried})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, u := range urls {
			r, err := call(http.MethodPost, u+"/v1/rides/cells/get", getCellsBody(want))
			require.NoError(c, err)
			require.Equal(c, http.StatusOK, r.code, "strong batch get of rides through %s: %s", u, r.body)
			assertCells(c, r.body, want, "strong read of rides through "+u+" after the promotion")
		}
	}, 30*time.Second, 100*time.Millisecond, "rides' cells, the buffered one replayed, strongly readable after the promotion")
	for _, u := range urls {
		assert.Equal(t, http.StatusOK, get(t, u+"/readyz").code, "%s/readyz after the promotion", u)
	}
	t.Logf("whole test: %v", time.Since(start))
}

// testCell is a cell of column BASE, ref key 1.
type testCell struct {
	row  uuid.UUID
	body string
}

// rowsOf returns n row keys, derived from seed, whose shards are in partition p of d.
func rowsOf(t *testing.T, d *topology.DatastoreSpec, p int, seed string, n int) []uuid.UUID {
	t.Helper()
	var out []uuid.UUID
	for i := 0; len(out) < n; i++ {
		require.Less(t, i, 10000, "no row of partition %d of %s", p, d.Name)
		u := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint(d.Name, seed, i)))
		if d.Partitions[p].Shards().Contains(cells.ShardOf(u, d.Shards)) {
			out = append(out, u)
		}
	}
	return out
}

func putCellsBody(cs []testCell) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf(`{"row_key":%q,"column_key":"BASE","ref_key":1,"body":%s}`, c.row, c.body)
	}
	return `{"cells":[` + strings.Join(parts, ",") + `]}`
}

func getCellsBody(cs []testCell) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf(`{"row_key":%q,"column_key":"BASE","ref_key":1}`, c.row)
	}
	return `{"keys":[` + strings.Join(parts, ",") + `]}`
}

// requireStatuses checks that a put_cells answer holds n results, each with status want.
func requireStatuses(t require.TestingT, body, want string, n int, what string) {
	var res wire.PutCellsResponse
	require.NoError(t, json.Unmarshal([]byte(body), &res), "%s: %s", what, body)
	require.Len(t, res.Results, n, "%s: results", what)
	for i, r := range res.Results {
		assert.Equal(t, want, r.Status, "%s: cell %d", what, i)
	}
}

// assertCells checks that a batch get answer holds want, in order, each with its body.
func assertCells(t require.TestingT, body string, want []testCell, what string) {
	var res wire.GetCellsResponse
	require.NoError(t, json.Unmarshal([]byte(body), &res), "%s: %s", what, body)
	require.Empty(t, res.Missing, "%s: missing cells", what)
	require.Len(t, res.Cells, len(want), "%s: cells", what)
	for i, c := range res.Cells {
		assert.Equal(t, want[i].row.String(), c.RowKey, "%s: cell %d", what, i)
		assert.JSONEq(t, want[i].body, string(c.Body), "%s: body of cell %d", what, i)
	}
}

// reply is an HTTP answer.
type reply struct {
	code   int
	header http.Header
	body   string
}

// call sends a request with body (none when empty) and returns the answer.
func call(method, url, body string) (reply, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// send is call that fails t on a transport error.
func send(t *testing.T, method, url, body string) reply {
	t.Helper()
	r, err := call(method, url, body)
	require.NoError(t, err, "%s %s", method, url)
	return r
}

func get(t *testing.T, url string) reply {
	t.Helper()
	return send(t, http.MethodGet, url, "")
}
