package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// rawGet sends "GET target HTTP/1.1" on a new connection to hs, the request line written by
// hand so that the target reaches the server exactly as given, and reads the answer.
func rawGet(t *testing.T, hs *httptest.Server, target string) (*http.Response, wire.ErrorBody) {
	t.Helper()
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n", target)
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "GET %s: an answer", target)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var eb wire.ErrorBody
	if res.StatusCode >= 400 {
		require.NoError(t, json.Unmarshal(b, &eb), "GET %s: the error body %q", target, b)
	}
	return res, eb
}

// TestDotSegments: a path with a "." or ".." segment, as sent or percent-encoded, or with an
// empty segment, is refused before routing with 400 invalid_argument naming path, on every
// path the API serves, /v1/ or not: never a redirect to the cleaned path (http.ServeMux's
// answer, which sent GET /../../../../etc/passwd to /etc/passwd).
func TestDotSegments(t *testing.T) {
	t.Parallel()
	srv, err := api.NewServer((&limitsBackend{}).backends(), api.Config{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	for _, target := range []string{
		"/../../../../etc/passwd",
		"/./healthz",
		"/healthz/.",
		"/healthz/..",
		"/console/..",
		"/console/./",
		"/metrics/../healthz",
		"/%2e%2e/%2e%2e/etc/passwd",
		"/%2E./etc/passwd",
		"/healthz/%2e",
		"/v1/../healthz",
		"/v1/trips/%2e%2e/trips/row_keys",
		"//etc/passwd",
		"/healthz//",
	} {
		res, eb := rawGet(t, hs, target)
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, "GET %s: status", target)
		assert.Empty(t, res.Header.Get("Location"), "GET %s: no redirect", target)
		assert.Equal(t, wire.CodeInvalidArgument, eb.Error.Code, "GET %s: code", target)
		assert.Equal(t, "path", eb.Error.Field, "GET %s: field", target)
	}
	for _, target := range []string{"/healthz", "/console", "/console/", "/readyz"} {
		res, _ := rawGet(t, hs, target)
		assert.Equal(t, http.StatusOK, res.StatusCode, "GET %s: status", target)
	}
	res, eb := rawGet(t, hs, "/etc/passwd")
	assert.Equal(t, http.StatusNotFound, res.StatusCode, "GET /etc/passwd: status")
	assert.Equal(t, wire.CodeNotFound, eb.Error.Code, "GET /etc/passwd: code")
}

// TestDotSegmentsHandMade: a request built in the process (not parsed from the wire) whose
// URL.Path holds dot segments is refused the same way: the check reads the URL, not the
// request line.
func TestDotSegmentsHandMade(t *testing.T) {
	t.Parallel()
	srv, err := api.NewServer((&limitsBackend{}).backends(), api.Config{})
	require.NoError(t, err)
	for _, path := range []string{"/../etc/passwd", "/healthz/..", "/v1/trips/./row_keys"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.Path, r.URL.RawPath = path, ""
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		assert.Equal(t, http.StatusBadRequest, w.Code, "%s: status", path)
		var eb wire.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &eb), "%s: the error body %q", path, w.Body.Bytes())
		assert.Equal(t, "path", eb.Error.Field, "%s: field", path)
	}
}

// failingBackend is a node with one datastore, "trips", whose reads and writes fail with err.
type failingBackend struct {
	*limitsBackend
	err error
}

func (b failingBackend) GetCells(context.Context, string, []cluster.GetKey, cluster.Consistency) ([]cluster.ReadResult, error) {
	return nil, b.err
}

func (b failingBackend) GetRow(context.Context, string, uuid.UUID, cluster.Consistency) ([]cells.Cell, error) {
	return nil, b.err
}

func (b failingBackend) GetVersions(context.Context, string, uuid.UUID, string, *int64, int, bool, cluster.Consistency) ([]cells.Cell, error) {
	return nil, b.err
}

func (b failingBackend) Write(context.Context, string, cluster.WriteRequest) (cluster.WriteResponse, error) {
	return cluster.WriteResponse{}, b.err
}

// TestHandlerErrors: the error a handler returns is answered in the API's shape: a node
// unavailable 503 with Retry-After, a write of unknown outcome 504, any other failure 500
// internal, which alone is logged.
func TestHandlerErrors(t *testing.T) {
	t.Parallel()
	row := uuid.NewString()
	for _, c := range []struct {
		err                   error
		method, path, body    string
		status                int
		code, retryAfter, log string
	}{
		{cluster.ErrUnavailable, http.MethodGet, "/v1/trips/cells/" + row + "/BASE/1", "", 503, wire.CodeUnavailable, "1", ""},
		{cluster.ErrIndeterminate, http.MethodPut, "/v1/trips/cells/" + row + "/BASE/1", `{"a":1}`, 504, wire.CodeIndeterminate, "", ""},
		{errors.New("disk on fire"), http.MethodGet, "/v1/trips/cells/" + row, "", 500, wire.CodeInternal, "", "disk on fire"},
		{cluster.ErrUnknownDatastore, http.MethodGet, "/v1/trips/cells/" + row + "/BASE", "", 404, wire.CodeNotFound, "", ""},
	} {
		var logs bytes.Buffer
		srv, err := api.NewServer(api.Backends{Node: &limitsBackend{}, Reads: failingBackend{&limitsBackend{}, c.err}, Writes: failingBackend{&limitsBackend{}, c.err}},
			api.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(c.method, c.path, bytes.NewReader([]byte(c.body))))
		assert.Equal(t, c.status, w.Code, "%s %s with %v: status", c.method, c.path, c.err)
		var eb wire.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &eb), "the error body %q", w.Body.Bytes())
		assert.Equal(t, c.code, eb.Error.Code, "%v: code", c.err)
		assert.Equal(t, c.retryAfter, w.Header().Get("Retry-After"), "%v: Retry-After", c.err)
		if c.log == "" {
			assert.Empty(t, logs.String(), "%v: nothing logged", c.err)
		} else {
			assert.Contains(t, logs.String(), c.log, "%v: logged", c.err)
		}
	}
}

// TestMissingParts: a server without a part of the node leaves its routes out (404, or 405
// where another part serves the path), and answers 501 on the admin, backup and schema routes;
// the node itself is required.
func TestMissingParts(t *testing.T) {
	t.Parallel()
	_, err := api.NewServer(api.Backends{}, api.Config{})
	require.Error(t, err, "a server without Backends.Node")
	b := &limitsBackend{}
	srv, err := api.NewServer(api.Backends{Node: b, Writes: b}, api.Config{})
	require.NoError(t, err)
	row := uuid.NewString()
	for _, c := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/v1/trips/cells/" + row + "/BASE/1", 405, wire.CodeMethod, "PUT"},
		{http.MethodGet, "/v1/trips/cells/" + row, 405, wire.CodeMethod, "DELETE"},
		{http.MethodGet, "/v1/trips/cells/" + row + "/BASE", 404, wire.CodeNotFound, ""},
		{http.MethodGet, "/v1/trips/shards/0/cells", 404, wire.CodeNotFound, ""},
		{http.MethodGet, "/v1/trips/groups", 404, wire.CodeNotFound, ""},
		{http.MethodGet, "/v1/trips/indexes", 404, wire.CodeNotFound, ""},
		{http.MethodGet, "/v1/trips/schemas", 501, wire.CodeUnimplemented, ""},
		{http.MethodPut, "/v1/trips/schemas/BASE", 501, wire.CodeUnimplemented, ""},
		{http.MethodGet, "/v1/admin/nodes", 501, wire.CodeInternal, ""},
		{http.MethodGet, "/v1/admin/backup/trips/0", 501, wire.CodeUnimplemented, ""},
		{http.MethodDelete, "/v1/admin/nodes", 405, wire.CodeMethod, "GET"},
	} {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		assert.Equal(t, c.status, w.Code, "%s %s: status", c.method, c.path)
		var eb wire.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &eb), "%s %s: the error body %q", c.method, c.path, w.Body.Bytes())
		assert.Equal(t, c.code, eb.Error.Code, "%s %s: code", c.method, c.path)
		assert.Equal(t, c.allow, w.Header().Get("Allow"), "%s %s: Allow", c.method, c.path)
	}
}
