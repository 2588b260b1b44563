package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plainNode is an httptest server standing for one node: it answers every request with status
// (0: 201 for a PUT, else 200) and records what the plain client sent.
type plainNode struct {
	srv      *httptest.Server
	requests atomic.Int64
	conns    atomic.Int64 // connections opened by clients

	mu   sync.Mutex
	seen []plainRequest
}

// requestsSeen returns a copy of what nd recorded of the requests it got.
func (nd *plainNode) requestsSeen() []plainRequest {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return append([]plainRequest(nil), nd.seen...)
}

// plainRequest is what a plainNode keeps of one request.
type plainRequest struct {
	method, path, query, contentType, auth string
	idempotencyKey                         bool
	protoMajor                             int
	body                                   []byte
}

// newPlainNodes starts a plainNode per status of statuses, closed at the test's end, and returns
// them and their URLs.
func newPlainNodes(t *testing.T, statuses ...int) ([]*plainNode, []string) {
	t.Helper()
	nodes := make([]*plainNode, len(statuses))
	urls := make([]string, len(statuses))
	for i, status := range statuses {
		nd := &plainNode{}
		nd.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, hasKey := r.Header["Idempotency-Key"]
			nd.mu.Lock()
			nd.seen = append(nd.seen, plainRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
				contentType: r.Header.Get("Content-Type"), auth: r.Header.Get("Authorization"),
				idempotencyKey: hasKey, protoMajor: r.ProtoMajor, body: body})
			nd.mu.Unlock()
			nd.requests.Add(1)
			st := status
			if st == 0 {
				st = http.StatusOK
				if r.Method == http.MethodPut {
					st = http.StatusCreated
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(st)
			_, _ = w.Write([]byte(`{"status":"answer of the test node"}`))
		}))
		nd.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				nd.conns.Add(1)
			}
		}
		nd.srv.Start()
		t.Cleanup(nd.srv.Close)
		nodes[i], urls[i] = nd, nd.srv.URL
	}
	return nodes, urls
}

// TestPlainClientSpreads runs put, put-batch and get-latest with the plain client against three
// test nodes and checks that every node gets a fair share of each workload's requests, that
// no request carries an Idempotency-Key, that each has the JSON body a curl user would send and
// the bearer token, and that the requests reuse a few keep-alive HTTP/1.1 connections.
func TestPlainClientSpreads(t *testing.T) {
	const ops, clients = 300, 4
	rows := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	f := Config{Ops: ops, Duration: time.Hour, Batch: 5, ValueSize: 120}
	for _, tc := range []struct{ workload, consistency string }{
		{workloadPut, ""}, {workloadPutBatch, ""}, {workloadGetLatest, client.ConsistencyStale},
	} {
		t.Run(tc.workload, func(t *testing.T) {
			nodes, urls := newPlainNodes(t, 0, 0, 0)
			op, err := loadOpOf(clientPlain, tc.workload, tc.consistency, urls, clientAuth{token: "s3cret"}, clients, rows, f)
			require.NoError(t, err)
			r := runLoad(context.Background(), clients, 0, f, op)
			require.Equal(t, int64(ops), r.Ops, "ops (first error: %s)", r.FirstError)
			assert.Zero(t, r.Errors)

			var total int64
			for i, nd := range nodes {
				n := nd.requests.Load()
				total += n
				// A fair share is 100 of 300; 50 is 6 standard deviations below it.
				assert.GreaterOrEqual(t, n, int64(ops/6), "node %d: requests, of %d", i, ops)
				assert.LessOrEqual(t, nd.conns.Load(), int64(2*clients), "node %d: connections opened for %d requests (keep-alive)", i, n)
				for _, req := range nd.requestsSeen() {
					assert.False(t, req.idempotencyKey, "node %d: %s %s has an Idempotency-Key", i, req.method, req.path)
					assert.Equal(t, "Bearer s3cret", req.auth, "node %d: Authorization", i)
					assert.Equal(t, 1, req.protoMajor, "node %d: HTTP major version", i)
				}
			}
			assert.Equal(t, int64(ops), total, "requests: one per op, none retried")

			req := nodes[0].requestsSeen()[0]
			switch tc.workload {
			case workloadPut:
				assert.Equal(t, http.MethodPut, req.method)
				assert.Regexp(t, `^/v1/trips/cells/[0-9a-f-]{36}/BASE/1$`, req.path)
				assert.Equal(t, "application/json", req.contentType)
				var body map[string]any
				require.NoError(t, json.Unmarshal(req.body, &body), "put body %s", req.body)
				assert.Contains(t, body, "origin")
			case workloadPutBatch:
				assert.Equal(t, http.MethodPost, req.method)
				assert.Equal(t, "/v1/trips/cells", req.path)
				assert.Equal(t, "application/json", req.contentType)
				var body wire.PutCellsRequest
				require.NoError(t, json.Unmarshal(req.body, &body), "put_cells body %s", req.body)
				require.Len(t, body.Cells, f.Batch)
				assert.Equal(t, "BASE", body.Cells[0].ColumnKey)
				assert.Equal(t, json.Number("1"), body.Cells[0].RefKey)
				assert.True(t, json.Valid(body.Cells[0].Body))
			case workloadGetLatest:
				assert.Equal(t, http.MethodGet, req.method)
				assert.Regexp(t, `^/v1/trips/cells/[0-9a-f-]{36}/BASE$`, req.path)
				assert.Equal(t, "consistency=stale", req.query)
				assert.Empty(t, req.body)
			}
		})
	}
}

// TestPlainClientErrors checks that the plain client counts a 5xx answer as an error and does not
// retry it: with one node of three answering 503, about a third of the requests fail, and the
// nodes together get exactly one request per measured op; with every node answering 500, every
// request fails and the first error names the status. Without endpoints there is no client.
func TestPlainClientErrors(t *testing.T) {
	const ops = 150
	f := Config{Ops: ops, Duration: time.Hour, ValueSize: 50}

	nodes, urls := newPlainNodes(t, 0, http.StatusServiceUnavailable, 0)
	op, err := loadOpOf(clientPlain, workloadPut, "", urls, clientAuth{}, 2, nil, f)
	require.NoError(t, err)
	r := runLoad(context.Background(), 2, 0, f, op)
	assert.Equal(t, int64(ops), r.Ops+r.Errors, "ops + errors")
	assert.Equal(t, nodes[1].requests.Load(), r.Errors, "errors: the requests of the node answering 503")
	assert.Greater(t, r.Errors, int64(0))
	assert.Contains(t, r.FirstError, "503")
	assert.Equal(t, int64(ops), nodes[0].requests.Load()+nodes[1].requests.Load()+nodes[2].requests.Load(),
		"requests: one per op, none retried")

	e := http.StatusInternalServerError
	_, down := newPlainNodes(t, e, e, e)
	op, err = loadOpOf(clientPlain, workloadGetLatest, client.ConsistencyStrong, down, clientAuth{}, 2, []uuid.UUID{uuid.New()}, f)
	require.NoError(t, err)
	r = runLoad(context.Background(), 2, 0, f, op)
	assert.Equal(t, int64(0), r.Ops)
	assert.Equal(t, int64(ops), r.Errors)
	assert.Contains(t, r.FirstError, "500 Internal Server Error")
	assert.Contains(t, r.FirstError, "answer of the test node", "first error: the start of the answer's body")

	_, err = loadOpOf(clientPlain, workloadPut, "", nil, clientAuth{}, 2, nil, f)
	assert.Error(t, err, "no endpoints")
}

// TestClientKindsValidate checks --client's validation: go and plain, repeated or not, with the
// workloads that have a plain client; an unknown client, and plain with another workload, are
// refused naming the flag.
func TestClientKindsValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Workloads = []string{workloadPut, workloadPutBatch, workloadGetLatest}
	for _, kinds := range [][]string{nil, {clientGo}, {clientPlain}, {clientGo, clientPlain, clientGo, clientPlain}} {
		c := ok
		c.ClientKinds = kinds
		assert.NoError(t, c.Validate(), "--client %v", kinds)
	}
	c := ok
	c.ClientKinds = []string{clientGo, "curl"}
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--client "curl"`)

	c = ok
	c.ClientKinds = []string{clientPlain}
	c.Workloads = []string{workloadPut, workloadPutIf}
	err = c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--client plain")
	assert.Contains(t, err.Error(), workloadPutIf)

	c.ClientKinds = []string{clientGo}
	assert.NoError(t, c.Validate(), "put-if with the go client")
}

// TestClientColumn checks the table and JSON of the rows: without a client (the default) they
// read as before, no client column and no "client" field; with one, the column follows target
// and a row without a client (a baseline's) shows "-".
func TestClientColumn(t *testing.T) {
	row := Result{Target: targetSQLite, Workload: workloadPut, Clients: 4, Ops: 10, Cells: 10, OpsPerSec: 10, CellsPerSec: 10}
	var b bytes.Buffer
	printTable(&b, []Result{row})
	head, _, _ := strings.Cut(b.String(), "\n")
	assert.Equal(t, []string{"target", "workload", "clients"}, strings.Fields(head)[:3], "default header: %s", head)
	js, err := json.Marshal(row)
	require.NoError(t, err)
	assert.NotContains(t, string(js), `"client"`)

	plain := row
	plain.Client = clientPlain
	raw := Result{Target: baselineRaftRaw, Workload: workloadPut, Clients: 4}
	b.Reset()
	printTable(&b, []Result{plain, raw})
	sc := bufio.NewScanner(&b)
	var lines [][]string
	for sc.Scan() {
		lines = append(lines, strings.Fields(sc.Text()))
	}
	require.Len(t, lines, 3, "table:\n%s", b.String())
	assert.Equal(t, []string{"target", "client", "workload"}, lines[0][:3])
	assert.Equal(t, []string{targetSQLite, clientPlain, workloadPut}, lines[1][:3])
	assert.Equal(t, []string{baselineRaftRaw, "-", workloadPut}, lines[2][:3])
	js, err = json.Marshal(plain)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"client":"plain"`)
	assert.Contains(t, runLine(plain), "clients=4 client=plain:")
}

// TestBaselineRatiosByClient checks that a row's vs noop compares it with the raft-noop row of
// its own client, while vs raw (raft-raw has no HTTP client) compares every client's row with
// the one raft-raw row.
func TestBaselineRatiosByClient(t *testing.T) {
	rs := []Result{
		{Target: targetSQLite, Workload: workloadPut, Client: clientGo, Clients: 8, CellsPerSec: 100},
		{Target: targetSQLite, Workload: workloadPut, Client: clientPlain, Clients: 8, CellsPerSec: 60},
		{Target: targetRaftNoop, Workload: workloadPut, Client: clientGo, Clients: 8, CellsPerSec: 400},
		{Target: targetRaftNoop, Workload: workloadPut, Client: clientPlain, Clients: 8, CellsPerSec: 200},
		{Target: baselineRaftRaw, Workload: workloadPut, Clients: 8, CellsPerSec: 1000},
	}
	setBaselineRatios(rs)
	assert.InDelta(t, 0.25, rs[0].VsRaftNoop, 1e-9, "go vs noop go")
	assert.InDelta(t, 0.30, rs[1].VsRaftNoop, 1e-9, "plain vs noop plain")
	assert.InDelta(t, 0.10, rs[0].VsRaftRaw, 1e-9, "go vs raw")
	assert.InDelta(t, 0.06, rs[1].VsRaftRaw, 1e-9, "plain vs raw")
	assert.InDelta(t, 0.20, rs[3].VsRaftRaw, 1e-9, "noop plain vs raw")
}

// TestBenchPlainSQLite runs `schemaless bench --target sqlite --workload put,get-latest --client
// go,plain` for a few ops with --json, and checks that each client gives a row per workload,
// in order, with no error and its CPU measured. It asserts no speed.
func TestBenchPlainSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := DefaultConfig()
	f.Workloads = []string{workloadPut, workloadGetLatest}
	f.ClientKinds = []string{clientGo, clientPlain}
	f.Clients, f.Ops, f.Warmup, f.Rows, f.ValueSize = []int{2}, 40, 100*time.Millisecond, 50, 100
	f.Shards, f.Partitions, f.JSON = 8, 2, true
	var stdout, stderr bytes.Buffer
	require.NoError(t, Run(ctx, f, &stdout, &stderr), "stderr:\n%s", stderr.String())

	var rows []Result
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var r Result
		require.NoError(t, dec.Decode(&r))
		t.Logf("%+v", r)
		rows = append(rows, r)
	}
	require.Len(t, rows, 4, "rows: put and get-latest, each with go then plain")
	want := [][2]string{{workloadPut, clientGo}, {workloadPut, clientPlain}, {workloadGetLatest, clientGo}, {workloadGetLatest, clientPlain}}
	for i, r := range rows {
		assert.Equal(t, targetSQLite, r.Target, "row %d", i)
		assert.Equal(t, want[i], [2]string{r.Workload, r.Client}, "row %d: workload and client", i)
		assert.Equal(t, int64(f.Ops), r.Ops, "row %d: ops (first error: %s)", i, r.FirstError)
		assert.Zero(t, r.Errors, "row %d: errors", i)
		assert.Greater(t, r.CPUSeconds, 0.0, "row %d: CPU measured", i)
	}
}
