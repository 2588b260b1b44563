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
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/internal/clustertest"
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

func TestConsole(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Indexes: true, Gossip: true})
	consoleFixture(t, c)

	t.Run("served", func(t *testing.T) {
		for i := range 3 {
			for _, path := range []string{"/console", "/console/"} {
				res, body := consoleGet(t, c.URL(i)+path)
				if res.StatusCode != http.StatusOK {
					t.Fatalf("GET %s on node %d: got status %d, want 200", path, i, res.StatusCode)
				}
				for h, want := range map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"} {
					if got := res.Header.Get(h); got != want {
						t.Fatalf("GET %s: got %s %q, want %q", path, h, got, want)
					}
				}
				if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'sha256-") {
					t.Fatalf("GET %s: got Content-Security-Policy %q, want default-src 'none' and a script hash", path, csp)
				}
				for _, want := range []string{"<script>", `data-testid="error-banner"`, "/v1/cluster", "/v1/admin/nodes"} {
					if !bytes.Contains(body, []byte(want)) {
						t.Fatalf("GET %s: the page does not contain %q", path, want)
					}
				}
				// No external resource: the machine running the console may have no internet.
				if m := regexp.MustCompile(`(?i)(src|href)=["']?(https?:)?//`).Find(body); m != nil {
					t.Fatalf("GET %s: the page loads an external resource: %s", path, m)
				}
			}
		}
		res, _ := consoleGet(t, c.URL(0)+"/console/nothing")
		if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /console/nothing: got %d %s, want the API's 404 JSON", res.StatusCode, res.Header.Get("Content-Type"))
		}
	})

	chrome := consoleChromiumPath(t)

	t.Run("rendered", func(t *testing.T) {
		const node = 1
		before := consoleCluster(t, c.URL(node))
		dom := consoleDOM(t, chrome, c.URL(node)+"/console")
		after := consoleCluster(t, c.URL(node))

		if state := consoleAttr(dom, "error-banner", "data-state"); state != "ok" {
			t.Errorf("error banner: got data-state %q, want ok; banner says %q", state, consoleTexts(dom, "error"))
		}
		if got, want := consoleTexts(dom, "self-node"), []string{before.Node}; !slices.Equal(got, want) {
			t.Errorf("served by: got %q, want %q", got, want)
		}
		var nodes []string
		for _, n := range before.Nodes {
			nodes = append(nodes, n.ID)
		}
		sort.Strings(nodes)
		if got := consoleSorted(consoleTexts(dom, "node-id")); !slices.Equal(got, nodes) {
			t.Errorf("node ids: got %q, want %q", got, nodes)
		}
		// Leaders: as /v1/cluster reported them just before or just after the page loaded (a
		// leader may change meanwhile; on this quiet cluster it does not).
		gotLeaders := consoleSorted(consoleTexts(dom, "partition-leader"))
		if want1, want2 := consoleLeaders(t, before), consoleLeaders(t, after); !slices.Equal(gotLeaders, want1) && !slices.Equal(gotLeaders, want2) {
			t.Errorf("partition leaders: got %q, want %q (from /v1/cluster)", gotLeaders, want1)
		}
		for testid, want := range map[string]string{"datastore-name": consoleDatastore, "index-name": consoleIndex, "group-name": consoleGroup} {
			if got := consoleTexts(dom, testid); !slices.Contains(got, want) {
				t.Errorf("%s: got %q, want %q among them", testid, got, want)
			}
		}
		// The group's member and lag (the member committed nothing: every cell is lag).
		if row := consoleRow(dom, "data-group", consoleGroup); !strings.Contains(row, "w1") || !strings.Contains(row, fmt.Sprint(consoleCells)) {
			t.Errorf("group row: got %s, want member w1 and lag %d", row, consoleCells)
		}
		for _, sec := range []string{"section-nodes", "section-partitions"} {
			if src := consoleAttr(dom, sec, "data-source"); src != "admin" {
				t.Errorf("%s: got data-source %q, want admin (/v1/admin/*)", sec, src)
			}
		}
		// Gossip sees every node alive; every partition shows its 3 replicas, all reachable.
		states := regexp.MustCompile(`data-testid="node-row"[^>]*data-state="([a-z]+)"`).FindAllStringSubmatch(dom, -1)
		if len(states) != len(nodes) {
			t.Errorf("node rows with a state: got %d, want %d", len(states), len(nodes))
		}
		for _, m := range states {
			if m[1] != "alive" {
				t.Errorf("node state %q, want alive", m[1])
			}
		}
		rows := regexp.MustCompile(`<tr [^>]*data-testid="replica-row"[^>]*>`).FindAllString(dom, -1)
		if want := 3 * len(before.Datastores[0].Partitions); len(rows) != want {
			t.Errorf("replica rows: got %d, want %d (3 per partition)", len(rows), want)
		}
		for _, r := range rows {
			if strings.Contains(r, "hl-bad") {
				t.Errorf("a replica is shown unreachable: %s", r)
			}
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "console.png")
		consoleChromium(t, chrome, fmt.Sprintf("--window-size=%d,%d", consoleWidth, consoleHeight), "--screenshot="+path, c.URL(0)+"/console")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("chromium wrote no screenshot: %v", err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("screenshot: not a PNG: %v", err)
		}
		if got := img.Bounds().Size(); got != image.Pt(consoleWidth, consoleHeight) {
			t.Fatalf("screenshot: got size %v, want %dx%d", got, consoleWidth, consoleHeight)
		}
		if n := consoleColours(img, 64); n < 16 {
			t.Fatalf("screenshot: got %d distinct colours, want a rendered page (at least 16)", n)
		}
		if dst := os.Getenv("CONSOLE_SCREENSHOT"); dst != "" {
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
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
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
		})
		dom := consoleDOM(t, chrome, srv.URL+"/console")
		if state := consoleAttr(dom, "error-banner", "data-state"); state != "error" {
			t.Fatalf("error banner: got data-state %q, want error", state)
		}
		errs := strings.Join(consoleTexts(dom, "error"), "\n")
		if !strings.Contains(errs, "/v1/cluster") || !strings.Contains(errs, "unreachable") {
			t.Fatalf("error banner: got %q, want /v1/cluster unreachable", errs)
		}
		if !strings.Contains(dom, "No data yet.") {
			t.Fatalf("sections: want the placeholder %q instead of nothing", "No data yet.")
		}
	})

	t.Run("admin_shapes", func(t *testing.T) {
		// A stand-in API in the shapes of /v1/admin/nodes and /v1/admin/partitions, with a
		// lagging replica, an unreachable one, and a node id that is markup: it must show as
		// text, never become an element.
		const evil = `n3<img id="injected" src="x">`
		answers := map[string]any{
			"/v1/cluster": wire.ClusterStatus{Node: "n1", Nodes: []wire.NodeStatus{{ID: "n1"}, {ID: "n2"}, {ID: evil}},
				Datastores: []wire.DatastoreStatus{{Name: "trips", Mode: "raft", Shards: 8, Partitions: []wire.PartitionStatus{
					{ID: 0, LastShard: 7, Replicas: []string{"n1", "n2", evil}, Leader: "n1", Local: true}}}}},
			"/v1/admin/nodes": map[string]any{"self": "n1", "nodes": []map[string]any{
				{"id": "n1", "http_addr": "127.0.0.1:1", "raft_addr": "127.0.0.1:2", "state": "alive",
					"replicas": []map[string]any{{"datastore": "trips", "partition": 0, "leader": true, "applied_index": 5000}}},
				{"id": "n2", "state": "suspect", "replicas": []map[string]any{{"datastore": "trips", "partition": 0, "applied_index": 2000}}},
				{"id": evil, "state": "dead", "replicas": []map[string]any{}},
			}},
			"/v1/admin/partitions": map[string]any{"partitions": []map[string]any{{"datastore": "trips", "partition": 0, "mode": "raft",
				"first_shard": 0, "last_shard": 7, "leader": "n1", "term": 3, "commit_index": 5000, "replicas": []map[string]any{
					{"node": "n1", "suffrage": "voter", "state": "Leader", "applied_index": 5000, "last_index": 5000, "lag": 0, "reachable": true},
					{"node": "n2", "suffrage": "voter", "state": "Follower", "applied_index": 2000, "last_index": 5000, "lag": 3000, "reachable": true},
					{"node": evil, "suffrage": "voter", "lag": 0, "reachable": false, "error": "connection refused"},
				}}}},
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
		if state := consoleAttr(dom, "error-banner", "data-state"); state != "ok" {
			t.Errorf("error banner: got data-state %q, want ok; banner says %q", state, consoleTexts(dom, "error"))
		}
		for _, sec := range []string{"section-nodes", "section-partitions"} {
			if src := consoleAttr(dom, sec, "data-source"); src != "admin" {
				t.Errorf("%s: got data-source %q, want admin", sec, src)
			}
		}
		// The page has no image of its own: an <img> element can only come from an API value.
		if strings.Contains(dom, "<img") {
			t.Fatalf("a node id became an element: the page does not escape API values")
		}
		if got, want := consoleTexts(dom, "node-id"), []string{"n1", "n2", evil}; !slices.Equal(got, want) {
			t.Errorf("node ids: got %q, want %q", got, want)
		}
		if got, want := consoleTexts(dom, "node-leaders"), []string{"1", "0", "0"}; !slices.Equal(got, want) {
			t.Errorf("leaders per node: got %q, want %q", got, want)
		}
		// Replica rows in order n1 (caught up), n2 (lag 3000: highlighted), evil (unreachable).
		rows := regexp.MustCompile(`<tr [^>]*data-testid="replica-row"[^>]*>`).FindAllString(dom, -1)
		if len(rows) != 3 {
			t.Fatalf("replica rows: got %d %q, want 3", len(rows), rows)
		}
		for i, want := range []string{`class="first"`, `class="hl-warn"`, `class="hl-bad"`} {
			if !strings.Contains(rows[i], want) {
				t.Errorf("replica row %d: got %s, want %s", i, rows[i], want)
			}
		}
		if got := consoleTexts(dom, "replica-lag"); !slices.Equal(got, []string{"0", "3,000", "0"}) {
			t.Errorf("replica lags: got %q, want [0 3,000 0]", got)
		}
	})

	t.Run("api_fails_after_load", func(t *testing.T) {
		// The first refresh goes through to node 0; from the second on, every API request
		// answers 503. The page must keep the data it has and say what failed.
		target, err := url.Parse(c.URL(0))
		if err != nil {
			t.Fatal(err)
		}
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
		if n := clusterReads.Load(); n < 2 {
			t.Fatalf("the page read /v1/cluster %d times, want it to refresh", n)
		}
		if state := consoleAttr(dom, "error-banner", "data-state"); state != "error" {
			t.Fatalf("error banner: got data-state %q, want error", state)
		}
		if errs := strings.Join(consoleTexts(dom, "error"), "\n"); !strings.Contains(errs, "injected fault") {
			t.Fatalf("error banner: got %q, want the injected fault", errs)
		}
		if got := consoleTexts(dom, "node-id"); len(got) != 3 {
			t.Fatalf("node ids after the fault: got %q, want the 3 loaded before it", got)
		}
		if got := consoleTexts(dom, "group-name"); !slices.Contains(got, consoleGroup) {
			t.Fatalf("groups after the fault: got %q, want %q kept", got, consoleGroup)
		}
	})
}

// consoleFixture writes cells, defines an index (and waits up to 30s for it to be ready) and
// joins a member to a consumer group that starts at the earliest cell and commits nothing.
func consoleFixture(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	var req wire.PutCellsRequest
	drivers := []string{"alice", "bob", "carol"}
	for i := range consoleCells {
		body, _ := json.Marshal(map[string]any{"driver": drivers[i%len(drivers)], "fare": 5 + i})
		req.Cells = append(req.Cells, wire.PutCell{RowKey: uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint("console", i))).String(),
			ColumnKey: "BASE", RefKey: "1", Body: body})
	}
	b, _ := json.Marshal(req)
	consoleDo(t, c.URL(0), "POST", "/v1/trips/cells", string(b), http.StatusOK)
	consoleDo(t, c.URL(1), "POST", "/v1/trips/indexes", consoleIndexYAML, http.StatusCreated)
	consoleDo(t, c.URL(2), "POST", "/v1/trips/groups/"+consoleGroup+"/heartbeat",
		`{"worker":"w1","session_timeout":"5m","start":{"kind":"earliest"}}`, http.StatusOK)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list wire.IndexesResponse
		if err := json.Unmarshal(consoleDo(t, c.URL(0), "GET", "/v1/trips/indexes", "", http.StatusOK), &list); err != nil {
			t.Fatal(err)
		}
		ready := false
		for _, ix := range list.Indexes {
			ready = ready || ix.Name == consoleIndex && ix.Alias > 0
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("index %s not ready after 30s: the console shows it building", consoleIndex)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// consoleDo sends a request, retrying 503s for up to 20s, and fails t unless the answer has
// status want. It returns the body.
func consoleDo(t *testing.T, base, method, path, body string, want int) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if res.StatusCode != want {
			t.Fatalf("%s %s: got status %d, want %d; body %s", method, path, res.StatusCode, want, b)
		}
		return b
	}
}

func consoleGet(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

func consoleCluster(t *testing.T, base string) wire.ClusterStatus {
	t.Helper()
	var st wire.ClusterStatus
	if err := json.Unmarshal(consoleDo(t, base, "GET", "/v1/cluster", "", http.StatusOK), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// consoleLeaders returns the sorted leaders of the raft partitions of st, failing t when one
// has none.
func consoleLeaders(t *testing.T, st wire.ClusterStatus) []string {
	t.Helper()
	var out []string
	for _, d := range st.Datastores {
		for _, p := range d.Partitions {
			if p.Leader == "" {
				t.Fatalf("/v1/cluster: partition %s/%d has no leader", d.Name, p.ID)
			}
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
		t.Fatal("chromium is not installed (.ci/run installs it)")
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
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, consoleTail(stderr.String(), 4000))
	}
	t.Logf("chromium %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

// consoleDOM returns the DOM of the page at u after its scripts ran, as HTML.
func consoleDOM(t *testing.T, chrome, u string) string {
	t.Helper()
	dom := string(consoleChromium(t, chrome, "--dump-dom", u))
	if !strings.Contains(dom, `data-testid="error-banner"`) {
		t.Fatalf("chromium --dump-dom %s: no console in %q", u, consoleTail(dom, 2000))
	}
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
