//go:build unix

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// The console tests start a 3-node cluster with data, an index and a consumer group, then load
// /console in headless Chromium (its DOM after the page's scripts ran, and a screenshot) and
// check what an operator would see. Chromium is Debian's package: without it the tests skip,
// except in CI (CI=true), which installs it.

const (
	consoleDatastore = "trips"
	consoleIndex     = "console_index"
	consoleGroup     = "console-readers"
	consoleCells     = 40
	// consoleWidth and consoleHeight are the browser window (and screenshot) size in pixels.
	consoleWidth, consoleHeight = 1400, 1100
)

const consoleIndexYAML = `
table: console_index
shard_field: driver
column_defs:
  - column_key: BASE
    fields:
      - { field: driver, type: string }
      - { field: fare, type: float }
`

// TestConsole is not parallel: it checks the page's leaders against /v1/cluster read just before
// and just after the page loads, which holds on a quiet cluster, not beside the elections of
// other tests' clusters; and Chromium takes both cores for seconds.
func TestConsole(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Indexes: true, Gossip: true})
	s := &session{c: c}
	consoleFixture(t, s)

	t.Run("served", func(t *testing.T) {
		for i := range 3 {
			for _, path := range []string{"/console", "/console/"} {
				res, body := consoleGet(t, c.URL(i)+path)
				require.Equal(t, http.StatusOK, res.StatusCode, "GET %s on node %d: status", path, i)
				for h, want := range map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"} {
					require.Equal(t, want, res.Header.Get(h), "GET %s: header %s", path, h)
				}
				csp := res.Header.Get("Content-Security-Policy")
				require.Contains(t, csp, "default-src 'none'", "GET %s: Content-Security-Policy", path)
				require.Contains(t, csp, "script-src 'sha256-", "GET %s: Content-Security-Policy with a script hash", path)
				for _, want := range []string{"<script>", `data-testid="error-banner"`, "/v1/cluster", "/v1/admin/nodes", "/v1/admin/datastores"} {
					require.Contains(t, string(body), want, "GET %s: the page", path)
				}
				// No external resource: the machine running the console may have no internet.
				m := regexp.MustCompile(`(?i)(src|href)=["']?(https?:)?//`).Find(body)
				require.Nil(t, m, "GET %s: the page loads an external resource: %s", path, m)
			}
		}
		res, _ := consoleGet(t, c.URL(0)+"/console/nothing")
		require.Equal(t, http.StatusNotFound, res.StatusCode, "GET /console/nothing: the API's 404")
		require.Equal(t, "application/json", res.Header.Get("Content-Type"), "GET /console/nothing: the API's JSON")
	})

	chrome := consoleChromiumPath(t)

	t.Run("rendered", func(t *testing.T) {
		const node = 1
		// The page shows the catalog this node serves: wait until it has one (the import).
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			var cat wire.DatastoresResponse
			a, err := s.tryDo(node, "GET", "/v1/admin/datastores", "")
			if assert.NoError(ct, err) && assert.NoError(ct, a.unmarshal(&cat)) {
				assert.Positive(ct, cat.Generation, "node %d's catalog generation", node)
			}
		}, 30*time.Second, 50*time.Millisecond, "node %d serves the catalog", node)
		before := consoleCluster(t, s, node)
		dom := consoleDOM(t, chrome, c.URL(node)+"/console")
		after := consoleCluster(t, s, node)

		assert.Equal(t, "ok", consoleAttr(dom, "error-banner", "data-state"), "error banner: data-state; banner says %q", consoleTexts(dom, "error"))
		assert.Equal(t, []string{before.Node}, consoleTexts(dom, "self-node"), "served by")
		var nodes []string
		for _, n := range before.Nodes {
			nodes = append(nodes, n.ID)
		}
		sort.Strings(nodes)
		assert.Equal(t, nodes, consoleSorted(consoleTexts(dom, "node-id")), "node ids")
		// Leaders: as /v1/cluster reported them just before or just after the page loaded (a
		// leader may change meanwhile; on this quiet cluster it does not).
		gotLeaders := consoleSorted(consoleTexts(dom, "partition-leader"))
		if want1, want2 := consoleLeaders(t, before), consoleLeaders(t, after); !slices.Equal(gotLeaders, want2) {
			assert.Equal(t, want1, gotLeaders, "partition leaders, as /v1/cluster reported them before the page loaded (or %q, after)", want2)
		}
		for testid, want := range map[string]string{"datastore-name": consoleDatastore, "index-name": consoleIndex, "group-name": consoleGroup} {
			assert.Contains(t, consoleTexts(dom, testid), want, "%s: the fixture's among them", testid)
		}
		// The group's member and lag (the member committed nothing: every cell is lag).
		row := consoleRow(dom, "data-group", consoleGroup)
		assert.Contains(t, row, "w1", "group row: member w1")
		assert.Contains(t, row, fmt.Sprint(consoleCells), "group row: lag %d", consoleCells)
		for _, sec := range []string{"section-nodes", "section-partitions"} {
			assert.Equal(t, "admin", consoleAttr(dom, sec, "data-source"), "%s: data-source (/v1/admin/*)", sec)
		}
		// The catalog: its generation, and a row per partition of each datastore.
		assert.Equal(t, "catalog", consoleAttr(dom, "section-datastores", "data-source"), "section-datastores: data-source (/v1/admin/datastores)")
		var cat wire.DatastoresResponse
		s.doRetry(t, node, "GET", "/v1/admin/datastores", "").expect(t, http.StatusOK).decode(t, &cat)
		assert.Equal(t, []string{fmt.Sprint(cat.Generation)}, consoleTexts(dom, "catalog-generation"), "catalog generation")
		var catParts int
		for _, d := range cat.Datastores {
			catParts += len(d.Partitions)
		}
		assert.Positive(t, catParts, "/v1/admin/datastores: partitions")
		assert.Len(t, consoleTexts(dom, "catalog-partition-id"), catParts, "catalog partition rows")
		// Gossip sees every node alive; every partition shows its 3 replicas, all reachable.
		states := regexp.MustCompile(`data-testid="node-row"[^>]*data-state="([a-z]+)"`).FindAllStringSubmatch(dom, -1)
		assert.Len(t, states, len(nodes), "node rows with a state")
		for _, m := range states {
			assert.Equal(t, "alive", m[1], "node state")
		}
		rows := regexp.MustCompile(`<tr [^>]*data-testid="replica-row"[^>]*>`).FindAllString(dom, -1)
		assert.Len(t, rows, 3*len(before.Datastores[0].Partitions), "replica rows: 3 per partition")
		for _, r := range rows {
			assert.NotContains(t, r, "hl-bad", "a replica row: shown reachable")
		}
		// The fixture's nodes have no zone: every zone cell says so (admin_shapes shows zones).
		assert.Equal(t, slices.Repeat([]string{"—"}, len(nodes)), consoleTexts(dom, "node-zone"), "node zones: none")
		assert.Equal(t, slices.Repeat([]string{"—"}, len(rows)), consoleTexts(dom, "replica-zone"), "replica zones: none")
		assert.Empty(t, consoleTexts(dom, "catalog-leader-zone"), "catalog: no datastore has a leader zone")
	})

	t.Run("screenshot", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "console.png")
		consoleChromium(t, chrome, fmt.Sprintf("--window-size=%d,%d", consoleWidth, consoleHeight), "--screenshot="+path, c.URL(0)+"/console")
		b, err := os.ReadFile(path)
		require.NoError(t, err, "chromium wrote a screenshot")
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err, "screenshot: a PNG")
		require.Equal(t, image.Pt(consoleWidth, consoleHeight), img.Bounds().Size(), "screenshot: size")
		require.GreaterOrEqual(t, consoleColours(img, 64), 16, "screenshot: distinct colours of a rendered page")
		if dst := os.Getenv("CONSOLE_SCREENSHOT"); dst != "" {
			require.NoError(t, os.WriteFile(dst, b, 0o644))
			t.Logf("screenshot copied to %s", dst)
		}
	})

	// The page must show faults, not a blank page. The page is served by a stand-in whose API
	// fails in two ways.
	_, page := consoleGet(t, c.URL(0)+"/console")

	t.Run("api_unreachable", func(t *testing.T) {
		// Every API request has its connection closed without an answer.
		srv := consoleStandIn(t, page, func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if !assert.NoError(t, err, "hijack") {
				return
			}
			conn.Close()
		})
		dom := consoleDOM(t, chrome, srv.URL+"/console")
		require.Equal(t, "error", consoleAttr(dom, "error-banner", "data-state"), "error banner: data-state")
		errs := strings.Join(consoleTexts(dom, "error"), "\n")
		require.Contains(t, errs, "/v1/cluster", "error banner: /v1/cluster unreachable")
		require.Contains(t, errs, "unreachable", "error banner: /v1/cluster unreachable")
		require.Contains(t, dom, "No data yet.", "sections: the placeholder instead of nothing")
	})

	t.Run("admin_shapes", func(t *testing.T) {
		// A stand-in API in the shapes of /v1/admin/nodes and /v1/admin/partitions, with a
		// lagging replica, an unreachable one, and a node id that is markup: it must show as
		// text, never become an element. Nodes n1 and n2 are in zones a and b, the markup node
		// in none; trips prefers leaders in zone b; partition trips/1 has no replica known.
		const evil = `n3<img id="injected" src="x">`
		answers := map[string]any{
			"/v1/cluster": wire.ClusterStatus{Node: "n1", Nodes: []wire.NodeStatus{{ID: "n1"}, {ID: "n2"}, {ID: evil}},
				Datastores: []wire.DatastoreStatus{{Name: "trips", Mode: "raft", Shards: 8, Partitions: []wire.PartitionStatus{
					{ID: 0, LastShard: 7, Replicas: []string{"n1", "n2", evil}, Leader: "n1", Local: true}}}}},
			"/v1/admin/nodes": map[string]any{"self": "n1", "nodes": []map[string]any{
				{"id": "n1", "http_addr": "127.0.0.1:1", "raft_addr": "127.0.0.1:2", "zone": "a", "state": "alive",
					"replicas": []map[string]any{{"datastore": "trips", "partition": 0, "leader": true, "applied_index": 5000}}},
				{"id": "n2", "zone": "b", "state": "suspect", "replicas": []map[string]any{{"datastore": "trips", "partition": 0, "applied_index": 2000}}},
				{"id": evil, "state": "dead", "replicas": []map[string]any{}},
			}},
			// The servers in another order than the replicas: zones are looked up by node.
			"/v1/admin/partitions": map[string]any{"partitions": []map[string]any{{"datastore": "trips", "partition": 0, "mode": "raft",
				"first_shard": 0, "last_shard": 7, "leader": "n1", "term": 3, "commit_index": 5000, "servers": []map[string]any{
					{"node": evil, "addr": "127.0.0.1:6", "suffrage": "voter"},
					{"node": "n2", "addr": "127.0.0.1:4", "suffrage": "nonvoter", "learner": true, "zone": "b"},
					{"node": "n1", "addr": "127.0.0.1:2", "suffrage": "voter", "zone": "a"},
				}, "replicas": []map[string]any{
					{"node": "n1", "suffrage": "voter", "state": "Leader", "applied_index": 5000, "last_index": 5000, "lag": 0, "reachable": true},
					{"node": "n2", "suffrage": "nonvoter", "state": "Follower", "applied_index": 2000, "last_index": 5000, "lag": 3000, "reachable": true},
					{"node": evil, "suffrage": "voter", "lag": 0, "reachable": false, "error": "connection refused"},
				}}, {"datastore": "trips", "partition": 1, "mode": "raft", "first_shard": 4, "last_shard": 7, "leader": "",
				"error": "no leader within 3s", "replicas": []map[string]any{}}}},
			// The catalog after a split of trips/0 at shard 4, with the markup node among the
			// replicas, and an async datastore.
			"/v1/admin/datastores": wire.DatastoresResponse{Generation: 5, Datastores: []wire.DatastoreInfo{
				{Name: "trips", Mode: "raft", Shards: 8, LeaderZone: "b", Partitions: []wire.CatalogPartition{
					{ID: 1, FirstShard: 4, LastShard: 7, Replicas: []string{"n1", "n2", evil}, Generation: 5, Parent: 0},
					{ID: 0, LastShard: 3, Replicas: []string{"n1", "n2", evil}, Learners: []string{"n4"}, Generation: 5, Parent: -1}},
					History: []wire.CatalogEvent{{Op: "split", Generation: 5, At: time.Date(2026, 11, 24, 8, 30, 0, 0, time.UTC), Left: 0, Right: 1, AtShard: 4}}},
				{Name: "rides", Mode: "async", Shards: 4, Created: 3, CreatedAt: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), StorageClusters: []string{"c0"},
					Partitions: []wire.CatalogPartition{{ID: 0, LastShard: 3, Cluster: "c0", Generation: 3, Parent: -1}}},
			}},
			"/v1/trips/indexes": wire.IndexesResponse{Indexes: []wire.IndexStatus{}},
			"/v1/trips/groups":  wire.GroupsResponse{Groups: []string{}},
		}
		srv := consoleStandIn(t, page, func(w http.ResponseWriter, r *http.Request) {
			a, ok := answers[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(a)
		})
		dom := consoleDOM(t, chrome, srv.URL+"/console")
		assert.Equal(t, "ok", consoleAttr(dom, "error-banner", "data-state"), "error banner: data-state; banner says %q", consoleTexts(dom, "error"))
		for _, sec := range []string{"section-nodes", "section-partitions"} {
			assert.Equal(t, "admin", consoleAttr(dom, sec, "data-source"), "%s: data-source", sec)
		}
		// The page has no image of its own: an <img> element can only come from an API value.
		require.NotContains(t, dom, "<img", "a node id became an element: the page does not escape API values")
		assert.Equal(t, []string{"n1", "n2", evil}, consoleTexts(dom, "node-id"), "node ids")
		assert.Equal(t, []string{"1", "0", "0"}, consoleTexts(dom, "node-leaders"), "leaders per node")
		// Replica rows in order n1 (caught up), n2 (lag 3000: highlighted), evil (unreachable).
		rows := regexp.MustCompile(`<tr [^>]*data-testid="replica-row"[^>]*>`).FindAllString(dom, -1)
		require.Len(t, rows, 3, "replica rows")
		for i, want := range []string{`class="first"`, `class="hl-warn"`, `class="hl-bad"`} {
			assert.Contains(t, rows[i], want, "replica row %d", i)
		}
		assert.Equal(t, []string{"0", "3,000", "0"}, consoleTexts(dom, "replica-lag"), "replica lags")
		// Zones: each node's, each replica's (from its partition's servers), "—" for none.
		assert.Equal(t, []string{"a", "b", "—"}, consoleTexts(dom, "node-zone"), "node zones")
		assert.Equal(t, []string{"n1", "n2", evil}, consoleTexts(dom, "replica-node"), "replica nodes")
		assert.Equal(t, []string{"a", "b", "—"}, consoleTexts(dom, "replica-zone"), "replica zones")
		assert.Equal(t, []string{"voter", "learner", "voter"}, consoleTexts(dom, "replica-suffrage"), "replica suffrages: n2 a learner")
		// Every row of a table has as many cells as its header: the partition with no replica
		// known spans the replica columns.
		for _, id := range []string{"nodes-table", "partitions-table"} {
			cols := consoleColumns(t, dom, id)
			for i, n := range consoleRowCells(t, dom, id) {
				assert.Equal(t, cols, n, "%s: cells of row %d (rowspans and colspans counted)", id, i)
			}
		}
		assert.Equal(t, []string{"leader zone: b"}, consoleTexts(dom, "catalog-leader-zone"), "catalog: trips's leader zone, none for rides")
		trips := regexp.MustCompile(`<tr [^>]*data-testid="datastore-row"[^>]*data-datastore="trips"[^>]*>.*?</tr>`).FindString(dom)
		assert.Contains(t, trips, `data-testid="catalog-leader-zone"`, "catalog: the leader zone in trips's row")
		// The catalog: its generation, the partitions of each datastore by shard, the split.
		assert.Equal(t, "catalog", consoleAttr(dom, "section-datastores", "data-source"), "section-datastores: data-source")
		assert.Equal(t, []string{"5"}, consoleTexts(dom, "catalog-generation"), "catalog generation")
		assert.Equal(t, []string{"trips", "rides"}, consoleTexts(dom, "datastore-name"), "datastore names")
		assert.Equal(t, []string{"0", "1", "0"}, consoleTexts(dom, "catalog-partition-id"), "catalog partitions, by shard")
		assert.Equal(t, []string{"0–3", "4–7", "0–3"}, consoleTexts(dom, "catalog-partition-shards"), "catalog partitions' shards")
		assert.Equal(t, []string{"—", "0", "—"}, consoleTexts(dom, "catalog-partition-parent"), "catalog partitions' parents")
		assert.Equal(t, []string{"n1, n2, " + evil, "n1, n2, " + evil, "c0"}, consoleTexts(dom, "catalog-partition-replicas"), "catalog partitions' replicas")
		assert.Equal(t, []string{"+ learners n4"}, consoleTexts(dom, "catalog-partition-learners"), "catalog partitions' learners: trips/0's")
		assert.Equal(t, []string{"split"}, consoleTexts(dom, "catalog-event-op"), "history")
		assert.Equal(t, []string{"4"}, consoleTexts(dom, "catalog-event-at-shard"), "history: at_shard")
		row := consoleRow(dom, "data-generation", "5")
		assert.Contains(t, row, "2026-11-24 08:30:00 UTC", "history row: its time")
	})

	t.Run("api_fails_after_load", func(t *testing.T) {
		// The first refresh goes through to node 0; from the second on, every API request
		// answers 503. The page must keep the data it has and say what failed.
		target, err := url.Parse(c.URL(0))
		require.NoError(t, err)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var clusterReads atomic.Int32
		srv := consoleStandIn(t, page, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/cluster" {
				clusterReads.Add(1)
			}
			if clusterReads.Load() <= 1 {
				proxy.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"code":"unavailable","message":"injected fault"}}`)
		})
		dom := consoleDOM(t, chrome, srv.URL+"/console")
		require.GreaterOrEqual(t, clusterReads.Load(), int32(2), "reads of /v1/cluster by the page: it refreshes")
		require.Equal(t, "error", consoleAttr(dom, "error-banner", "data-state"), "error banner: data-state")
		require.Contains(t, strings.Join(consoleTexts(dom, "error"), "\n"), "injected fault", "error banner")
		require.Len(t, consoleTexts(dom, "node-id"), 3, "node ids after the fault: the 3 loaded before it")
		require.Contains(t, consoleTexts(dom, "group-name"), consoleGroup, "groups after the fault: kept")
		require.Equal(t, "catalog", consoleAttr(dom, "section-datastores", "data-source"), "the catalog after the fault: kept")
		require.Contains(t, consoleTexts(dom, "datastore-name"), consoleDatastore, "the catalog's datastores after the fault: kept")
	})
}

// consoleFixture writes cells, defines an index and waits up to 60s for it to be ready, and
// joins a member to a consumer group that starts at the earliest cell and commits nothing.
func consoleFixture(t *testing.T, s *session) {
	t.Helper()
	var req wire.PutCellsRequest
	drivers := []string{"alice", "bob", "carol"}
	for i := range consoleCells {
		body, err := json.Marshal(map[string]any{"driver": drivers[i%len(drivers)], "fare": 5 + i})
		require.NoError(t, err)
		req.Cells = append(req.Cells, wire.PutCell{RowKey: uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint("console", i))).String(),
			ColumnKey: "BASE", RefKey: "1", Body: body})
	}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	s.doRetry(t, 0, "POST", "/v1/trips/cells", string(b)).expect(t, http.StatusOK)
	s.doRetry(t, 1, "POST", "/v1/trips/indexes", consoleIndexYAML).expect(t, http.StatusCreated)
	s.doRetry(t, 2, "POST", "/v1/trips/groups/"+consoleGroup+"/heartbeat",
		`{"worker":"w1","session_timeout":"5m","start":{"kind":"earliest"}}`).expect(t, http.StatusOK)
	// The condition runs in one goroutine at a time; stop is read only after EventuallyWithT
	// returns, once that goroutine has ended.
	var stop error
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list wire.IndexesResponse
		if !s.poll(c, &stop, 0, "GET", "/v1/trips/indexes", "", http.StatusOK, &list) {
			return
		}
		i := slices.IndexFunc(list.Indexes, func(ix wire.IndexStatus) bool { return ix.Name == consoleIndex })
		if assert.GreaterOrEqual(c, i, 0, "index %s listed (%+v)", consoleIndex, list) {
			assert.Positive(c, list.Indexes[i].Alias, "index %s: an alias, set when its first version is ready", consoleIndex)
		}
	}, 60*time.Second, 200*time.Millisecond, "index %s ready", consoleIndex)
	require.NoError(t, stop)
}

func consoleGet(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(u)
	require.NoError(t, err, "GET %s", u)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err, "GET %s: read the body", u)
	return res, b
}

// consoleCluster returns /v1/cluster as node answers it.
func consoleCluster(t *testing.T, s *session, node int) wire.ClusterStatus {
	t.Helper()
	var st wire.ClusterStatus
	s.doRetry(t, node, "GET", "/v1/cluster", "").expect(t, http.StatusOK).decode(t, &st)
	return st
}

// consoleLeaders returns the sorted leaders of the raft partitions of st, failing t when one
// has none.
func consoleLeaders(t *testing.T, st wire.ClusterStatus) []string {
	t.Helper()
	var out []string
	for _, d := range st.Datastores {
		for _, p := range d.Partitions {
			require.NotEmpty(t, p.Leader, "/v1/cluster: the leader of partition %s/%d", d.Name, p.ID)
			out = append(out, p.Leader)
		}
	}
	return consoleSorted(out)
}

// consoleStandIn serves page at /console and everything else with api, on a server closed at
// t's cleanup.
func consoleStandIn(t *testing.T, page []byte, api http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(page)
			return
		}
		api(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// consoleChromiumPath returns Debian's headless-capable Chromium, skipping t when it is not installed
// (failing it in CI, which installs it).
func consoleChromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		require.FailNow(t, "chromium is not installed (.ci/run installs it)")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// consoleChromium runs headless Chromium with args for at most 60s, with a profile and HOME of its
// own, and 10s of virtual time for the page's scripts (its refreshes every 2s included). It
// returns Chromium's standard output.
func consoleChromium(t *testing.T, chrome string, args ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--no-default-browser-check", "--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + filepath.Join(dir, "profile"),
		"--virtual-time-budget=10000"}, args...)
	cmd := exec.CommandContext(ctx, chrome, all...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	// Chromium starts helper processes: run it in a process group of its own and end the
	// whole group on timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Run(), "chromium %s\n%s", strings.Join(args, " "), consoleTail(stderr.String(), 4000))
	t.Logf("chromium %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

// consoleDOM returns the DOM of the page at u after its scripts ran, as HTML.
func consoleDOM(t *testing.T, chrome, u string) string {
	t.Helper()
	dom := string(consoleChromium(t, chrome, "--dump-dom", u))
	require.True(t, strings.Contains(dom, `data-testid="error-banner"`), "chromium --dump-dom %s: the console in %q", u, consoleTail(dom, 2000))
	return dom
}

func consoleTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// consoleTexts returns the text of every element of dom with data-testid id whose content is
// text only, in document order.
func consoleTexts(dom, id string) []string {
	re := regexp.MustCompile(`<[a-z0-9]+\s[^>]*\bdata-testid="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(dom, -1) {
		out = append(out, html.UnescapeString(strings.TrimSpace(m[1])))
	}
	return out
}

// consoleAttr returns attribute attr of the first element of dom with data-testid id, or "".
func consoleAttr(dom, id, attr string) string {
	tag := regexp.MustCompile(`<[a-z0-9]+\s[^>]*\bdata-testid="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindString(dom)
	m := regexp.MustCompile(`\s` + regexp.QuoteMeta(attr) + `="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// consoleRow returns the first table row of dom whose attribute attr is value, as HTML.
func consoleRow(dom, attr, value string) string {
	return regexp.MustCompile(`<tr\s[^>]*\b` + regexp.QuoteMeta(attr) + `="` + regexp.QuoteMeta(html.EscapeString(value)) + `"[^>]*>.*?</tr>`).FindString(dom)
}

// consoleTable returns the HTML of the table of dom with data-testid id, failing t when there is
// none.
func consoleTable(t *testing.T, dom, id string) string {
	t.Helper()
	tbl := regexp.MustCompile(`(?s)<table [^>]*data-testid="` + regexp.QuoteMeta(id) + `"[^>]*>.*?</table>`).FindString(dom)
	require.NotEmpty(t, tbl, "table %s", id)
	return tbl
}

// consoleColumns returns the number of header cells of the table of dom with data-testid id.
func consoleColumns(t *testing.T, dom, id string) int {
	t.Helper()
	head := regexp.MustCompile(`(?s)<thead>.*?</thead>`).FindString(consoleTable(t, dom, id))
	return len(regexp.MustCompile(`<th\b`).FindAllString(head, -1))
}

// consoleRowCells returns, for each body row of the table of dom with data-testid id, the
// columns it fills: its cells' colspans, plus those of cells of earlier rows whose rowspan
// reaches it.
func consoleRowCells(t *testing.T, dom, id string) []int {
	t.Helper()
	body := regexp.MustCompile(`(?s)<tbody>.*</tbody>`).FindString(consoleTable(t, dom, id))
	span := func(td, attr string) int {
		if m := regexp.MustCompile(`\s` + attr + `="(\d+)"`).FindStringSubmatch(td); m != nil {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			return n
		}
		return 1
	}
	type carry struct{ cols, rows int }
	var pending []carry
	var out []int
	for _, tr := range regexp.MustCompile(`(?s)<tr\b[^>]*>(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
		n := 0
		var next []carry
		for _, p := range pending {
			n += p.cols
			if p.rows > 1 {
				next = append(next, carry{p.cols, p.rows - 1})
			}
		}
		for _, td := range regexp.MustCompile(`<td\b[^>]*>`).FindAllString(tr[1], -1) {
			cols, rows := span(td, "colspan"), span(td, "rowspan")
			n += cols
			if rows > 1 {
				next = append(next, carry{cols, rows - 1})
			}
		}
		pending = next
		out = append(out, n)
	}
	require.NotEmpty(t, out, "table %s: body rows", id)
	return out
}

func consoleSorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// consoleColours counts the distinct colours of img, stopping at limit.
func consoleColours(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}
