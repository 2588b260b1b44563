package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readyBackend answers readiness as told; the readiness routes use nothing else of a node
// (the embedded nil NodeBackend panics if they did).
type readyBackend struct {
	api.NodeBackend
	ready      error
	datastores map[string]error // by name: nil when ready
}

func (b readyBackend) ID() string { return "n1" }

func (b readyBackend) Topology() *topology.Topology {
	t := &topology.Topology{}
	for _, name := range []string{"flights", "trips"} {
		t.Datastores = append(t.Datastores, topology.DatastoreSpec{Name: name})
	}
	return t
}

func (b readyBackend) Ready() error { return b.ready }

func (b readyBackend) DatastoreReady(name string) error {
	err, ok := b.datastores[name]
	if !ok {
		return fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, name)
	}
	return err
}

// getReady sends GET path to a server over b and decodes the answer's JSON into v.
func getReady(t *testing.T, b readyBackend, path string, v any) *http.Response {
	t.Helper()
	srv, err := api.NewServer(api.Backends{Node: b}, api.Config{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	res, err := http.Get(hs.URL + path)
	require.NoError(t, err)
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "the answer to GET %s decodes into %T", path, v)
	return res
}

// TestReadyz: /readyz answers the node's readiness with each datastore's in the body;
// /readyz?datastore=NAME answers one datastore's.
func TestReadyz(t *testing.T) {
	t.Parallel()
	noMaster := errors.New("flights: storage cluster c0 has no master")
	asyncDown := readyBackend{datastores: map[string]error{"trips": nil, "flights": noMaster}}

	t.Run("node ready, an async datastore without master", func(t *testing.T) {
		t.Parallel()
		var got wire.Readiness
		res := getReady(t, asyncDown, "/readyz", &got)
		assert.Equal(t, http.StatusOK, res.StatusCode, "status")
		assert.Equal(t, wire.Readiness{Status: "ready", Node: "n1", Datastores: map[string]wire.DatastoreReadiness{
			"trips":   {Ready: true},
			"flights": {Error: noMaster.Error()},
		}}, got, "the node's readiness, with each datastore's")
	})
	t.Run("a ready datastore", func(t *testing.T) {
		t.Parallel()
		var got wire.Readiness
		res := getReady(t, asyncDown, "/readyz?datastore=trips", &got)
		assert.Equal(t, http.StatusOK, res.StatusCode, "status")
		assert.Equal(t, wire.Readiness{Status: "ready", Node: "n1", Datastore: "trips"}, got, "the datastore's readiness")
	})
	t.Run("a datastore not ready", func(t *testing.T) {
		t.Parallel()
		var got wire.ErrorBody
		res := getReady(t, asyncDown, "/readyz?datastore=flights", &got)
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "status")
		assert.Equal(t, "1", res.Header.Get("Retry-After"), "Retry-After")
		assert.Equal(t, wire.ErrorDetail{Code: wire.CodeUnavailable, Message: "not ready: " + noMaster.Error()}, got.Error, "the error")
	})
	t.Run("an unknown datastore", func(t *testing.T) {
		t.Parallel()
		var got wire.ErrorBody
		res := getReady(t, asyncDown, "/readyz?datastore=nope", &got)
		assert.Equal(t, http.StatusNotFound, res.StatusCode, "status")
		assert.Equal(t, wire.CodeNotFound, got.Error.Code, "error code")
		assert.Equal(t, "datastore", got.Error.Field, "error field")
		assert.Contains(t, got.Error.Message, `"nope"`, "error message: the datastore asked")
	})
	t.Run("node not ready", func(t *testing.T) {
		t.Parallel()
		noLeader := errors.New("trips/0 has no leader")
		b := readyBackend{ready: noLeader, datastores: map[string]error{"trips": noLeader, "flights": nil}}
		var got wire.NotReady
		res := getReady(t, b, "/readyz", &got)
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "status")
		assert.Equal(t, "1", res.Header.Get("Retry-After"), "Retry-After")
		assert.Equal(t, wire.NotReady{
			Error: wire.ErrorDetail{Code: wire.CodeUnavailable, Message: "not ready: " + noLeader.Error()},
			Datastores: map[string]wire.DatastoreReadiness{
				"trips":   {Error: noLeader.Error()},
				"flights": {Ready: true},
			}}, got, "the node's error, with each datastore's readiness")
	})
}
