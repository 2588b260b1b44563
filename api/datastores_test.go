package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// catalogBackend is a CatalogBackend that records the calls it gets and answers err, or a
// fixed answer naming what it was asked.
type catalogBackend struct {
	err     error
	catalog wire.DatastoresResponse

	mu      sync.Mutex
	creates []cluster.CreateDatastoreOptions
	drops   [][2]string // name, confirm
	splits  []splitCall
	merges  []mergeCall
	sets    []settingsCall
}

// settingsCall is one call of SetDatastoreSettings.
type settingsCall struct {
	name string
	req  wire.DatastoreSettingsRequest
}

func (b *catalogBackend) SetDatastoreSettings(_ context.Context, name string, req wire.DatastoreSettingsRequest) (wire.DatastoreSettingsResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sets = append(b.sets, settingsCall{name, req})
	if b.err != nil {
		return wire.DatastoreSettingsResponse{}, b.err
	}
	info := wire.DatastoreInfo{Name: name, Mode: "raft"}
	if req.LeaderZone != nil {
		info.LeaderZone = *req.LeaderZone
	}
	return wire.DatastoreSettingsResponse{Generation: 9, Datastore: info}, nil
}

// splitCall is one call of SplitPartition.
type splitCall struct {
	ds           string
	pid, atShard int
}

// mergeCall is one call of MergePartitions.
type mergeCall struct {
	ds          string
	left, right int
}

func (b *catalogBackend) CreateDatastore(_ context.Context, o cluster.CreateDatastoreOptions) (wire.CreateDatastoreResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.creates = append(b.creates, o)
	if b.err != nil {
		return wire.CreateDatastoreResponse{}, b.err
	}
	return wire.CreateDatastoreResponse{Generation: 7, Ready: true, Datastore: wire.DatastoreInfo{Name: o.Name, Mode: "raft",
		Shards: o.Shards, Created: 7, Partitions: []wire.CatalogPartition{{ID: 0, LastShard: o.Shards - 1, Replicas: o.Replicas, Generation: 7, Parent: -1}}}}, nil
}

func (b *catalogBackend) DropDatastore(_ context.Context, name, confirm string) (wire.DropDatastoreResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drops = append(b.drops, [2]string{name, confirm})
	if b.err != nil {
		return wire.DropDatastoreResponse{}, b.err
	}
	return wire.DropDatastoreResponse{Generation: 8, Dropped: name}, nil
}

func (b *catalogBackend) CatalogDatastores() wire.DatastoresResponse { return b.catalog }

// SplitPartition answers a split of pid's range 0..7 at atShard (0: 4) into pid and 9.
func (b *catalogBackend) SplitPartition(_ context.Context, ds string, pid int, req wire.SplitRequest) (wire.SplitResponse, error) {
	atShard := req.AtShard
	b.mu.Lock()
	defer b.mu.Unlock()
	b.splits = append(b.splits, splitCall{ds, pid, atShard})
	if b.err != nil {
		return wire.SplitResponse{}, b.err
	}
	if atShard == 0 {
		atShard = 4
	}
	return wire.SplitResponse{Generation: 9, Ready: true, TookMillis: 12,
		Left:  wire.CatalogPartition{ID: pid, LastShard: atShard - 1, Replicas: []string{"n1", "n2", "n3"}, Generation: 9, Parent: -1},
		Right: wire.CatalogPartition{ID: 9, FirstShard: atShard, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}, Generation: 9, Parent: pid}}, nil
}

// MergePartitions answers a merge of left (shards 0..3) and right (4..7) into left.
func (b *catalogBackend) MergePartitions(_ context.Context, ds string, left, right int) (wire.MergeResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.merges = append(b.merges, mergeCall{ds, left, right})
	if b.err != nil {
		return wire.MergeResponse{}, b.err
	}
	return wire.MergeResponse{Generation: 10, TookMillis: 30, PauseMillis: 4,
		Merged: wire.CatalogPartition{ID: left, LastShard: 7, Replicas: []string{"n1", "n2", "n3"}, Generation: 10, Parent: -1}}, nil
}

// calls returns how many creates and drops b got.
func (b *catalogBackend) calls() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.creates), len(b.drops)
}

// catalogServer is a server with cb as its catalog (nil: none) and cfg.
func catalogServer(t *testing.T, cb *catalogBackend, cfg api.Config) *api.Server {
	t.Helper()
	b := api.Backends{Node: &limitsBackend{}}
	if cb != nil {
		b.Catalog = cb
	}
	srv, err := api.NewServer(b, cfg)
	require.NoError(t, err)
	return srv
}

// serveDS sends method path with body (none when "") to srv and returns the answer.
func serveDS(srv http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return w
}

// dsErrorOf decodes w's error body.
func dsErrorOf(t *testing.T, w *httptest.ResponseRecorder) wire.ErrorDetail {
	t.Helper()
	var eb wire.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &eb), "the error body %q", w.Body.Bytes())
	return eb.Error
}

// TestDatastoreCreateRefused: a creation request the API can judge alone is answered 400
// invalid_argument naming its field, and never reaches the cluster.
func TestDatastoreCreateRefused(t *testing.T) {
	t.Parallel()
	cb := &catalogBackend{}
	srv := catalogServer(t, cb, api.Config{})
	for _, c := range []struct{ body, field string }{
		{``, "body"},
		{`{"name":"t","shards":8`, "body"},
		{`{"name":"t","shards":8,"replica_count":3}`, "body"},
		{`{"name":"t","shards":8} {}`, "body"},
		{`{"shards":8}`, "name"},
		{`{"name":"Trips","shards":8}`, "name"},
		{`{"name":"t","shards":"8"}`, "shards"},
		{`{"name":"t"}`, "shards"},
		{`{"name":"t","shards":-1}`, "shards"},
		{`{"name":"t","shards":10001}`, "shards"},
		{`{"name":"t","shards":8,"partitions":9}`, "partitions"},
		{`{"name":"t","shards":8,"partitions":-1}`, "partitions"},
		{`{"name":"t","shards":8,"mode":"paxos"}`, "mode"},
		{`{"name":"t","shards":8,"replicas":"3"}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":true}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":{"count":3}}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":0}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":-3}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":10}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":2.5}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":3.0}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":3e0}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":[]}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":[1,2,3]}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":["n1",""]}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":["n1","n2","n1"]}`, "replicas"},
		{`{"name":"t","shards":8,"replicas":["n1","n2","n3","n4","n5","n6","n7","n8","n9","n10"]}`, "replicas"},
		{`{"name":"t","shards":8,"mode":"async","replicas":3,"storage_clusters":[{"name":"c0","master":"u@tcp(h)/"}]}`, "replicas"},
		{`{"name":"t","shards":8,"leader_zone":"Zone A"}`, "leader_zone"},
		{`{"name":"t","shards":8,"mode":"async","leader_zone":"a","storage_clusters":[{"name":"c0","master":"u@tcp(h)/"}]}`, "leader_zone"},
	} {
		w := serveDS(srv, http.MethodPost, "/v1/admin/datastores", c.body)
		if !assert.Equal(t, http.StatusBadRequest, w.Code, "POST %s: status (body %s)", c.body, w.Body) {
			continue
		}
		e := dsErrorOf(t, w)
		assert.Equal(t, wire.CodeInvalidArgument, e.Code, "POST %s: code", c.body)
		assert.Equal(t, c.field, e.Field, "POST %s: field (message %q)", c.body, e.Message)
	}
	creates, _ := cb.calls()
	assert.Zero(t, creates, "a refused request reaches the cluster")
}

// TestDatastoreCreate: a valid request reaches the cluster as its options (replicas absent: no
// count, no list; a count; a list; an async datastore's storage clusters) and is answered 201
// with the cluster's answer.
func TestDatastoreCreate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		want cluster.CreateDatastoreOptions
	}{
		{`{"name":"trips","shards":8}`, cluster.CreateDatastoreOptions{Name: "trips", Shards: 8}},
		{`{"name":"trips","shards":8,"replicas":null}`, cluster.CreateDatastoreOptions{Name: "trips", Shards: 8}},
		{`{"name":"trips","mode":"raft","shards":8,"partitions":4,"replicas":3}`,
			cluster.CreateDatastoreOptions{Name: "trips", Mode: "raft", Shards: 8, Partitions: 4, ReplicaCount: 3}},
		{`{"name":"trips","shards":8,"replicas":["n1","n2","n3"]}`,
			cluster.CreateDatastoreOptions{Name: "trips", Shards: 8, Replicas: []string{"n1", "n2", "n3"}}},
		{`{"name":"users","mode":"async","shards":16,"partitions":2,"storage_clusters":[{"name":"c0","master":"u@tcp(a)/","minions":["u@tcp(b)/"]},{"name":"c1","master":"u@tcp(c)/"}],"buffer_clusters":1,"mysql_prefix":"sl_","unsafe_no_buffered_writes":true}`,
			cluster.CreateDatastoreOptions{Name: "users", Mode: "async", Shards: 16, Partitions: 2,
				StorageClusters: []topology.StorageClusterSpec{{Name: "c0", Master: "u@tcp(a)/", Minions: []string{"u@tcp(b)/"}}, {Name: "c1", Master: "u@tcp(c)/"}},
				BufferClusters:  1, MySQLPrefix: "sl_", UnsafeNoBufferedWrites: true}},
	} {
		cb := &catalogBackend{}
		srv := catalogServer(t, cb, api.Config{})
		w := serveDS(srv, http.MethodPost, "/v1/admin/datastores", c.body)
		require.Equal(t, http.StatusCreated, w.Code, "POST %s: status (body %s)", c.body, w.Body)
		require.Len(t, cb.creates, 1, "POST %s: calls of CreateDatastore", c.body)
		assert.Equal(t, c.want, cb.creates[0], "POST %s: the options", c.body)
		var got wire.CreateDatastoreResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got), "POST %s: the answer %q", c.body, w.Body)
		want, _ := (&catalogBackend{}).CreateDatastore(context.Background(), c.want)
		assert.Equal(t, want, got, "POST %s: the answer", c.body)
	}
}

// TestDatastoreErrors: the cluster's errors are answered with their status, code and field: a
// refused field 400 naming it, an existing datastore 409, an unknown one 404, no catalog
// leader 503 with Retry-After (even when it wraps the context's error), the request's time out
// 504 indeterminate (the change may be applied), anything else 500.
func TestDatastoreErrors(t *testing.T) {
	t.Parallel()
	const create, drop = `{"name":"trips","shards":8}`, "/v1/admin/datastores/trips?confirm=trips"
	for _, c := range []struct {
		err          error
		method, path string
		status       int
		code, field  string
	}{
		{&cluster.FieldError{Field: "replicas", Msg: `unknown node "n9"`}, http.MethodPost, "", 400, wire.CodeInvalidArgument, "replicas"},
		{fmt.Errorf("cluster: create: %w", &cluster.FieldError{Field: "storage_clusters", Msg: "required"}), http.MethodPost, "", 400, wire.CodeInvalidArgument, "storage_clusters"},
		{&cluster.FieldError{Field: "confirm", Msg: "must name the datastore"}, http.MethodDelete, "", 400, wire.CodeInvalidArgument, "confirm"},
		{fmt.Errorf("%w: %q", cluster.ErrDatastoreExists, "trips"), http.MethodPost, "", 409, wire.CodeConflict, "name"},
		{fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, "trips"), http.MethodDelete, "", 404, wire.CodeNotFound, "datastore"},
		{cluster.ErrNoCatalog, http.MethodPost, "", 503, wire.CodeUnavailable, ""},
		{cluster.ErrNoCatalog, http.MethodDelete, "", 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("%w: %w", cluster.ErrNoCatalog, context.DeadlineExceeded), http.MethodPost, "", 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("cluster: create: %w", context.Canceled), http.MethodPost, "", 504, wire.CodeIndeterminate, ""},
		{context.DeadlineExceeded, http.MethodPost, "", 504, wire.CodeIndeterminate, ""},
		{fmt.Errorf("disk on fire"), http.MethodDelete, "", 500, wire.CodeInternal, ""},
	} {
		srv := catalogServer(t, &catalogBackend{err: c.err}, api.Config{Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
		var w *httptest.ResponseRecorder
		if c.method == http.MethodPost {
			w = serveDS(srv, c.method, "/v1/admin/datastores", create)
		} else {
			w = serveDS(srv, c.method, drop, "")
		}
		require.Equal(t, c.status, w.Code, "%s with %v: status (body %s)", c.method, c.err, w.Body)
		e := dsErrorOf(t, w)
		assert.Equal(t, c.code, e.Code, "%s with %v: code", c.method, c.err)
		assert.Equal(t, c.field, e.Field, "%s with %v: field", c.method, c.err)
		if c.status == http.StatusServiceUnavailable {
			assert.Equal(t, "1", w.Header().Get("Retry-After"), "%s with %v: Retry-After", c.method, c.err)
		}
	}
}

// TestDatastoreDrop: a drop needs ?confirm= naming the datastore again (400 field confirm, the
// cluster not called), and answers the cluster's answer.
func TestDatastoreDrop(t *testing.T) {
	t.Parallel()
	cb := &catalogBackend{}
	srv := catalogServer(t, cb, api.Config{})
	for _, path := range []string{
		"/v1/admin/datastores/trips",
		"/v1/admin/datastores/trips?confirm=",
		"/v1/admin/datastores/trips?confirm=users",
		"/v1/admin/datastores/trips?confirm=trips&confirm=trips",
	} {
		w := serveDS(srv, http.MethodDelete, path, "")
		require.Equal(t, http.StatusBadRequest, w.Code, "DELETE %s: status (body %s)", path, w.Body)
		e := dsErrorOf(t, w)
		assert.Equal(t, wire.CodeInvalidArgument, e.Code, "DELETE %s: code", path)
		assert.Equal(t, "confirm", e.Field, "DELETE %s: field", path)
	}
	_, drops := cb.calls()
	require.Zero(t, drops, "a refused drop reaches the cluster")

	w := serveDS(srv, http.MethodDelete, "/v1/admin/datastores/trips?confirm=trips", "")
	require.Equal(t, http.StatusOK, w.Code, "DELETE: status (body %s)", w.Body)
	var got wire.DropDatastoreResponse
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got), "DELETE: the answer %q", w.Body)
	assert.Equal(t, wire.DropDatastoreResponse{Generation: 8, Dropped: "trips"}, got, "DELETE: the answer")
	assert.Equal(t, [][2]string{{"trips", "trips"}}, cb.drops, "DELETE: the cluster's call (name, confirm)")
}

// TestDatastoreList: GET lists the catalog (an empty one as [], not null) and shows one
// datastore, or answers 404 naming datastore.
func TestDatastoreList(t *testing.T) {
	t.Parallel()
	srv := catalogServer(t, &catalogBackend{}, api.Config{})
	w := serveDS(srv, http.MethodGet, "/v1/admin/datastores", "")
	require.Equal(t, http.StatusOK, w.Code, "GET of an empty catalog: status")
	assert.JSONEq(t, `{"generation":0,"datastores":[]}`, w.Body.String(), "GET of an empty catalog")

	info := wire.DatastoreInfo{Name: "trips", Mode: "raft", Shards: 8, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Partitions: []wire.CatalogPartition{{ID: 0, LastShard: 3, Replicas: []string{"n1"}, Parent: -1}, {ID: 1, FirstShard: 4, LastShard: 7, Replicas: []string{"n2"}, Generation: 3, Parent: 0}},
		History:    []wire.CatalogEvent{{Op: "split", Generation: 3, Left: 0, Right: 1, AtShard: 4}}}
	cat := wire.DatastoresResponse{Generation: 3, Datastores: []wire.DatastoreInfo{{Name: "alpha", Mode: "async", Shards: 1}, info}}
	srv = catalogServer(t, &catalogBackend{catalog: cat}, api.Config{})
	w = serveDS(srv, http.MethodGet, "/v1/admin/datastores", "")
	require.Equal(t, http.StatusOK, w.Code, "GET: status")
	var list wire.DatastoresResponse
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list), "GET: the answer %q", w.Body)
	assert.Equal(t, cat, list, "GET: the catalog")

	w = serveDS(srv, http.MethodGet, "/v1/admin/datastores/trips", "")
	require.Equal(t, http.StatusOK, w.Code, "GET trips: status")
	var one wire.DatastoreInfo
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &one), "GET trips: the answer %q", w.Body)
	assert.Equal(t, info, one, "GET trips")

	w = serveDS(srv, http.MethodGet, "/v1/admin/datastores/nope", "")
	require.Equal(t, http.StatusNotFound, w.Code, "GET nope: status")
	e := dsErrorOf(t, w)
	assert.Equal(t, wire.CodeNotFound, e.Code, "GET nope: code")
	assert.Equal(t, "datastore", e.Field, "GET nope: field")
}

// TestDatastoreRoutesWithoutCatalog: without a CatalogBackend every datastore route answers 501
// unimplemented, and other methods 405 with Allow.
func TestDatastoreRoutesWithoutCatalog(t *testing.T) {
	t.Parallel()
	srv := catalogServer(t, nil, api.Config{})
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/admin/datastores", ""},
		{http.MethodPost, "/v1/admin/datastores", `{"name":"t","shards":1}`},
		{http.MethodGet, "/v1/admin/datastores/t", ""},
		{http.MethodDelete, "/v1/admin/datastores/t?confirm=t", ""},
	} {
		w := serveDS(srv, c.method, c.path, c.body)
		assert.Equal(t, http.StatusNotImplemented, w.Code, "%s %s: status", c.method, c.path)
		assert.Equal(t, wire.CodeUnimplemented, dsErrorOf(t, w).Code, "%s %s: code", c.method, c.path)
	}
	srv = catalogServer(t, &catalogBackend{}, api.Config{})
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPut, "/v1/admin/datastores", "GET, POST"},
		{http.MethodPost, "/v1/admin/datastores/t", "DELETE, GET, PATCH"},
	} {
		w := serveDS(srv, c.method, c.path, "")
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code, "%s %s: status", c.method, c.path)
		assert.Equal(t, c.allow, w.Header().Get("Allow"), "%s %s: Allow", c.method, c.path)
	}
}

// TestDatastoreRoutesNeedAdmin: with authentication, the datastore routes need the admin role
// (a reader or a writer gets 403, even to list) and every admin request is audited.
func TestDatastoreRoutesNeedAdmin(t *testing.T) {
	t.Parallel()
	cb := &catalogBackend{}
	srv, audit, bearer := catalogServerWithAuth(t, cb)
	for _, role := range []string{"read", "write"} {
		for _, c := range []struct{ method, path, body string }{
			{http.MethodGet, "/v1/admin/datastores", ""},
			{http.MethodGet, "/v1/admin/datastores/t", ""},
			{http.MethodPost, "/v1/admin/datastores", `{"name":"t","shards":1}`},
			{http.MethodDelete, "/v1/admin/datastores/t?confirm=t", ""},
		} {
			w := serveDS(srv, c.method, c.path, c.body, bearer(role)...)
			assert.Equal(t, http.StatusForbidden, w.Code, "%s %s as %ser: status", c.method, c.path, role)
		}
	}
	w := serveDS(srv, http.MethodPost, "/v1/admin/datastores", `{"name":"t","shards":1}`)
	assert.Equal(t, http.StatusUnauthorized, w.Code, "POST without credentials: status")
	creates, drops := cb.calls()
	require.Zero(t, creates+drops, "a refused request reaches the cluster")

	w = serveDS(srv, http.MethodPost, "/v1/admin/datastores", `{"name":"t","shards":1}`, bearer("admin")...)
	require.Equal(t, http.StatusCreated, w.Code, "POST as admin: status (body %s)", w.Body)
	w = serveDS(srv, http.MethodDelete, "/v1/admin/datastores/t?confirm=t", "", bearer("admin")...)
	require.Equal(t, http.StatusOK, w.Code, "DELETE as admin: status (body %s)", w.Body)
	log := audit.String()
	for _, want := range []string{
		`event=admin principal=adminer method=POST path=/v1/admin/datastores query="" remote=192.0.2.1 status=201`,
		`event=admin principal=adminer method=DELETE path=/v1/admin/datastores/t query="confirm=t" remote=192.0.2.1 status=200`,
		`event=refused principal=reader method=GET path=/v1/admin/datastores`,
	} {
		assert.Contains(t, log, want, "the audit log")
	}
}

// catalogServerWithAuth is a server with cb as its catalog and one principal per role read,
// write and admin, named after it (reader, writeer, adminer). It returns the server, its audit log, and the
// header (name, value) that authenticates as role.
func catalogServerWithAuth(t *testing.T, cb *catalogBackend) (*api.Server, *syncBuffer, func(role string) []string) {
	t.Helper()
	tokens := map[string]string{}
	var pf security.PrincipalsFile
	for _, role := range []string{"read", "write", "admin"} {
		tok, digest := security.NewToken()
		tokens[role] = tok
		pf.Principals = append(pf.Principals, security.PrincipalEntry{Name: role + "er", TokenSHA256: digest, Roles: []string{role}})
	}
	data, err := pf.Marshal()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "principals.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	auth, err := security.LoadAuthenticator(path, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	require.NoError(t, err)
	audit := &syncBuffer{}
	srv := catalogServer(t, cb, api.Config{Auth: auth, Audit: security.NewAuditor(slog.New(slog.NewTextHandler(audit, nil)))})
	return srv, audit, func(role string) []string { return []string{"Authorization", "Bearer " + tokens[role]} }
}

// catalogErrorCase is an error of the cluster and the answer it must get.
type catalogErrorCase struct {
	err         error
	status      int
	code, field string
}

// checkCatalogErrors sends POST path with body to a server whose catalog answers each case's
// error, and checks the answer's status, code, field and, for a 503, Retry-After; check then
// checks the rest: the calls cb got, the message of e.
func checkCatalogErrors(t *testing.T, path, body string, cases []catalogErrorCase, check func(c catalogErrorCase, cb *catalogBackend, e wire.ErrorDetail)) {
	t.Helper()
	for _, c := range cases {
		cb := &catalogBackend{err: c.err}
		srv := catalogServer(t, cb, api.Config{Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
		w := serveDS(srv, http.MethodPost, path, body)
		require.Equal(t, c.status, w.Code, "POST %s with %v: status (body %s)", path, c.err, w.Body)
		e := dsErrorOf(t, w)
		assert.Equal(t, c.code, e.Code, "POST %s with %v: code", path, c.err)
		assert.Equal(t, c.field, e.Field, "POST %s with %v: field", path, c.err)
		if c.status == http.StatusServiceUnavailable {
			assert.Equal(t, "1", w.Header().Get("Retry-After"), "POST %s with %v: Retry-After", path, c.err)
		}
		check(c, cb, e)
	}
}

// checkCatalogChange checks the route of a catalog change, POST path with body: without a
// CatalogBackend it answers 501 unimplemented (an AdminBackend does not serve it); other
// methods answer 405 with Allow.
func checkCatalogChange(t *testing.T, path, body string) {
	t.Helper()
	srv := catalogServer(t, nil, api.Config{})
	w := serveDS(srv, http.MethodPost, path, body)
	assert.Equal(t, http.StatusNotImplemented, w.Code, "POST %s: status", path)
	assert.Equal(t, wire.CodeUnimplemented, dsErrorOf(t, w).Code, "POST %s: code", path)

	srv = catalogServer(t, &catalogBackend{}, api.Config{})
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		w := serveDS(srv, m, path, "")
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code, "%s %s: status", m, path)
		assert.Equal(t, http.MethodPost, w.Header().Get("Allow"), "%s %s: Allow", m, path)
	}
}

// checkNeedsAdmin checks, with authentication, that POST path with body needs the admin role:
// a reader or a writer gets 403 and no credentials 401, none reaching the cluster (calls(cb)
// stays 0); an admin gets 200; the audit log has the admin's request and the reader's
// refusal. It returns the server, its audit log and its bearer, for more checks.
func checkNeedsAdmin(t *testing.T, path, body string, calls func(cb *catalogBackend) int) (*api.Server, *syncBuffer, func(role string) []string) {
	t.Helper()
	cb := &catalogBackend{}
	srv, audit, bearer := catalogServerWithAuth(t, cb)
	for _, role := range []string{"read", "write"} {
		w := serveDS(srv, http.MethodPost, path, body, bearer(role)...)
		assert.Equal(t, http.StatusForbidden, w.Code, "POST %s as %ser: status", path, role)
	}
	w := serveDS(srv, http.MethodPost, path, body)
	assert.Equal(t, http.StatusUnauthorized, w.Code, "POST %s without credentials: status", path)
	require.Zero(t, calls(cb), "a refused POST %s reaches the cluster", path)

	w = serveDS(srv, http.MethodPost, path, body, bearer("admin")...)
	require.Equal(t, http.StatusOK, w.Code, "POST %s as admin: status (body %s)", path, w.Body)
	require.Equal(t, 1, calls(cb), "POST %s as admin reaches the cluster", path)
	log := audit.String()
	for _, want := range []string{
		`event=admin principal=adminer method=POST path=` + path + ` query="" remote=192.0.2.1 status=200`,
		`event=refused principal=reader method=POST path=` + path,
	} {
		assert.Contains(t, log, want, "the audit log")
	}
	return srv, audit, bearer
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// MoveToCluster is not used here.
func (b *catalogBackend) MoveToCluster(context.Context, string, int, wire.ClusterMoveRequest) (wire.ClusterMoveResponse, error) {
	return wire.ClusterMoveResponse{}, errors.New("no storage clusters here")
}

// MoveCatalogVoters is not used here.
func (b *catalogBackend) MoveCatalogVoters(context.Context, []string) (wire.CatalogVotersResponse, error) {
	return wire.CatalogVotersResponse{}, errors.New("no catalog group here")
}

// TestDatastoreSettings: PATCH /v1/admin/datastores/{name} hands the settings given to the
// backend (absent ones nil) and answers 200 with its answer; a body that is not the request's
// JSON is a 400 that reaches no backend, and the backend's refusals map as for a creation.
func TestDatastoreSettings(t *testing.T) {
	b := &catalogBackend{}
	srv := catalogServer(t, b, api.Config{})
	resp := serveDS(srv, http.MethodPatch, "/v1/admin/datastores/trips", `{"leader_zone":"b","split_load":-1}`)
	require.Equal(t, http.StatusOK, resp.Code, resp.Body.String())
	var got wire.DatastoreSettingsResponse
	require.NoError(t, json.Unmarshal(resp.Body.Bytes(), &got))
	assert.Equal(t, "b", got.Datastore.LeaderZone)
	require.Len(t, b.sets, 1)
	assert.Equal(t, "trips", b.sets[0].name)
	if assert.NotNil(t, b.sets[0].req.LeaderZone) && assert.NotNil(t, b.sets[0].req.SplitLoad) {
		assert.Equal(t, "b", *b.sets[0].req.LeaderZone)
		assert.Equal(t, -1.0, *b.sets[0].req.SplitLoad)
	}
	assert.Nil(t, b.sets[0].req.SplitSize, "split_size absent: unchanged")

	resp = serveDS(srv, http.MethodPatch, "/v1/admin/datastores/trips", `{"leader_zone": 3}`)
	assert.Equal(t, http.StatusBadRequest, resp.Code, resp.Body.String())
	assert.Len(t, b.sets, 1, "a malformed body reaches no backend")

	b.err = &cluster.FieldError{Field: "leader_zone", Msg: `"B!" must match`}
	resp = serveDS(srv, http.MethodPatch, "/v1/admin/datastores/trips", `{"leader_zone":"B!"}`)
	assert.Equal(t, http.StatusBadRequest, resp.Code)
	assert.Equal(t, "leader_zone", dsErrorOf(t, resp).Field)
	b.err = fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, "nope")
	resp = serveDS(srv, http.MethodPatch, "/v1/admin/datastores/nope", `{"leader_zone":"b"}`)
	assert.Equal(t, http.StatusNotFound, resp.Code)
}
