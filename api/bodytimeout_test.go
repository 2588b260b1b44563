package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// limitsBackend serves the routes of the body timeout and limit tests: one datastore "trips"
// of 8 shards; writes are created unless their context ended (then its error, as a node
// answers); log reads wait their Wait, the context's end or the release of hold. The embedded
// nil interfaces panic on anything else.
type limitsBackend struct {
	api.NodeBackend
	api.CellWriter
	api.LogReader
	hold     chan struct{} // closed: waiting log reads answer at once; nil: never
	polling  atomic.Int64  // log reads waiting
	ctxEnded atomic.Int64  // log reads whose context ended before their wait
}

func (b *limitsBackend) ID() string { return "n1" }

// backends are the parts of a node b serves.
func (b *limitsBackend) backends() api.Backends { return api.Backends{Node: b, Writes: b, Logs: b} }

func (b *limitsBackend) Datastore(name string) (*topology.DatastoreSpec, error) {
	if name != "trips" {
		return nil, fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, name)
	}
	return &topology.DatastoreSpec{Name: name, Shards: 8}, nil
}

func (b *limitsBackend) Write(ctx context.Context, _ string, req cluster.WriteRequest) (cluster.WriteResponse, error) {
	if err := ctx.Err(); err != nil {
		return cluster.WriteResponse{}, err
	}
	var res cluster.WriteResponse
	res.Cells = make([]cells.Result, len(req.Cells))
	for i := range res.Cells {
		res.Cells[i] = cells.Result{Status: cells.StatusCreated, AddedID: int64(i + 1)}
	}
	return res, nil
}

func (b *limitsBackend) ReadLogs(ctx context.Context, _ string, req cluster.LogRead) ([]cluster.LogPage, error) {
	b.polling.Add(1)
	defer b.polling.Add(-1)
	select {
	case <-time.After(req.Wait):
	case <-b.hold:
	case <-ctx.Done():
		b.ctxEnded.Add(1)
		return nil, ctx.Err()
	}
	return make([]cluster.LogPage, len(req.Shards)), nil
}

// startServer serves the API over b with cfg on a real TCP listener, as package node does
// (api.ConnContext on the http.Server, no ReadTimeout), after applying opts to the server.
func startServer(t *testing.T, b *limitsBackend, cfg api.Config, opts ...func(*http.Server)) *httptest.Server {
	t.Helper()
	srv, err := api.NewServer(b.backends(), cfg)
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.ConnContext = api.ConnContext
	hs.Config.ReadHeaderTimeout = 10 * time.Second
	for _, o := range opts {
		o(hs.Config)
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return hs
}

// trickle sends a request head declaring body on a new connection to hs, then the body's first
// `first` bytes at once and one more byte every `every` (until the body is complete or the
// connection fails). It returns the connection, whose reads time out after 10 s.
func trickle(t *testing.T, hs *httptest.Server, method, path, body string, first int, every time.Duration) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	contentLength := len(body)
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, contentLength)
	_, err = io.WriteString(conn, head+body[:first])
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for i := first; i < contentLength; i++ {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
				return
			}
		}
	}()
	return conn
}

// readAnswer reads one response from conn and its body.
func readAnswer(t *testing.T, conn net.Conn) (*http.Response, []byte) {
	t.Helper()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "an answer before the connection's 10 s read deadline")
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, b
}

// expectClosed checks that the server closed conn: a read ends (EOF or reset) before the 10 s
// read deadline instead of timing out.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if err != nil && assert.ErrorAs(t, err, &ne, "reading after the answer") {
		assert.False(t, ne.Timeout(), "the connection is closed by the server, not left open: got a timeout")
	}
}

// TestBodyReadTimeoutTrickle: a body trickled at one byte per second to any route holds the
// connection no longer than BodyReadTimeout (500ms): put_cells, which reads its body, answers
// 408 request_timeout; routes that never read it (an unknown route, /healthz) answer as they
// do, and the connection is closed.
func TestBodyReadTimeoutTrickle(t *testing.T) {
	hs := startServer(t, &limitsBackend{}, api.Config{BodyReadTimeout: 500 * time.Millisecond})
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/v1/trips/cells", http.StatusRequestTimeout},
		{"POST", "/v1/trips/transactions", http.StatusRequestTimeout},
		{"POST", "/no/such/route", http.StatusNotFound},
		{"GET", "/healthz", http.StatusOK},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			start := time.Now()
			conn := trickle(t, hs, tc.method, tc.path, `{"cells":[`+strings.Repeat(" ", 88)+`]}`, 5, time.Second)
			res, body := readAnswer(t, conn)
			elapsed := time.Since(start)
			assert.Equal(t, tc.status, res.StatusCode, "status (body %s)", body)
			assert.Less(t, elapsed, 4*time.Second, "answered within about the body read timeout (500ms), not after the 90 s the body takes")
			assert.True(t, res.Close, "Connection: close (headers %v)", res.Header)
			if tc.status == http.StatusRequestTimeout {
				var eb wire.ErrorBody
				require.NoError(t, json.Unmarshal(body, &eb), "an error envelope: %s", body)
				assert.Equal(t, wire.CodeRequestTimeout, eb.Error.Code, "code (%s)", body)
				assert.Equal(t, "body", eb.Error.Field, "field (%s)", body)
			}
			expectClosed(t, conn)
		})
	}
}

// TestBodyReadTimeoutSlowSmallBody: a 16-byte body taking longer than both BodyReadTimeout and
// RequestTimeout answers 408 request_timeout, not the 503 of a request that ran out of time
// after its body arrived.
func TestBodyReadTimeoutSlowSmallBody(t *testing.T) {
	reg := prometheus.NewRegistry()
	hs := startServer(t, &limitsBackend{}, api.Config{BodyReadTimeout: 500 * time.Millisecond, RequestTimeout: time.Second, Registerer: reg})
	row := uuid.NewString()
	path := "/v1/trips/cells/" + row + "/BASE/1"
	sent := `{"fare":1234567}` // 16 bytes, a valid cell body; 14 of them over 1.7 s
	require.Len(t, sent, 16)
	conn := trickle(t, hs, "PUT", path, sent, 2, 120*time.Millisecond)
	res, body := readAnswer(t, conn)
	assert.Equal(t, http.StatusRequestTimeout, res.StatusCode, "status (body %s)", body)
	var eb wire.ErrorBody
	require.NoError(t, json.Unmarshal(body, &eb), "an error envelope: %s", body)
	assert.Equal(t, wire.CodeRequestTimeout, eb.Error.Code, "code (%s)", body)
	assert.Empty(t, res.Header.Get("Retry-After"), "no Retry-After on a 408")
	assert.True(t, res.Close, "Connection: close")
	expectClosed(t, conn)
	assert.Equal(t, 1.0, refused(t, reg, "body_read_timeout"), "schemaless_http_requests_refused_total{reason=body_read_timeout}")
}

// TestBodyReadTimeoutLongPoll: long polls outlast BodyReadTimeout on one keep-alive connection:
// a GET (no body) and a POST whose body arrived at once both wait their whole wait, their
// contexts intact, and a normal write with a body still succeeds on the same connection.
func TestBodyReadTimeoutLongPoll(t *testing.T) {
	b := &limitsBackend{}
	var conns atomic.Int64
	hs := startServer(t, b, api.Config{BodyReadTimeout: 300 * time.Millisecond}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
	})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	const wait = 1200 * time.Millisecond
	do := func(method, path, body string) (*http.Response, time.Duration) {
		start := time.Now()
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		res, err := client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res, time.Since(start)
	}
	res, _ := do("PUT", "/v1/trips/cells/"+uuid.NewString()+"/BASE/1", `{"fare":10}`)
	assert.Equal(t, http.StatusCreated, res.StatusCode, "put_cell with a body sent at once")
	res, took := do("POST", "/v1/trips/shards/cells", `{"shards":[{"shard":1,"location":0}],"wait":"1200ms"}`)
	assert.Equal(t, http.StatusOK, res.StatusCode, "batch long poll with a body")
	assert.GreaterOrEqual(t, took, wait, "the batch long poll waited its wait")
	res, took = do("GET", "/v1/trips/shards/1/cells?wait=1200ms", "")
	assert.Equal(t, http.StatusOK, res.StatusCode, "long poll GET")
	assert.GreaterOrEqual(t, took, wait, "the long poll GET waited its wait")
	assert.Zero(t, b.ctxEnded.Load(), "log reads whose context ended early")
	assert.Equal(t, int64(1), conns.Load(), "connections: every request on one keep-alive connection")
}
