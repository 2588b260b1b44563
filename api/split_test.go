package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

const splitPath = "/v1/admin/partitions/trips/2/split"

// TestSplitPartition: a split reaches the cluster with its datastore, partition and at_shard
// (an empty body, {} and null: 0, the middle) and is answered 200 with the cluster's answer.
func TestSplitPartition(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		want int
	}{
		{``, 0},
		{`{}`, 0},
		{`{"at_shard":null}`, 0},
		{`{"at_shard":0}`, 0},
		{`{"at_shard":6}`, 6},
		{` {"at_shard": 5} `, 5},
	} {
		cb := &catalogBackend{}
		srv := catalogServer(t, cb, api.Config{})
		w := serveDS(srv, http.MethodPost, splitPath, c.body)
		require.Equal(t, http.StatusOK, w.Code, "POST %q: status (body %s)", c.body, w.Body)
		assert.Equal(t, []splitCall{{"trips", 2, c.want}}, cb.splits, "POST %q: the cluster's call", c.body)
		var got wire.SplitResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got), "POST %q: the answer %q", c.body, w.Body)
		want, _ := (&catalogBackend{}).SplitPartition(context.Background(), "trips", 2, wire.SplitRequest{AtShard: c.want})
		assert.Equal(t, want, got, "POST %q: the answer", c.body)
	}
	// The answer's field names, as docs/api.md gives them.
	srv := catalogServer(t, &catalogBackend{}, api.Config{})
	w := serveDS(srv, http.MethodPost, splitPath, `{"at_shard":6}`)
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"generation":9,"ready":true,"took_ms":12,
		"left":{"id":2,"first_shard":0,"last_shard":5,"replicas":["n1","n2","n3"],"generation":9,"parent":-1},
		"right":{"id":9,"first_shard":6,"last_shard":7,"replicas":["n1","n2","n3"],"generation":9,"parent":2}}`, w.Body.String())
}

// TestSplitRefused: a split the API can judge alone (a bad partition in the path, a body that
// is not a SplitRequest, a negative or non-integer at_shard) is answered 400 invalid_argument
// naming its field, and never reaches the cluster.
func TestSplitRefused(t *testing.T) {
	t.Parallel()
	cb := &catalogBackend{}
	srv := catalogServer(t, cb, api.Config{})
	for _, c := range []struct{ path, body, field string }{
		{splitPath, `{"at_shard":"4"}`, "at_shard"},
		{splitPath, `{"at_shard":4.5}`, "at_shard"},
		{splitPath, `{"at_shard":4.0}`, "at_shard"},
		{splitPath, `{"at_shard":true}`, "at_shard"},
		{splitPath, `{"at_shard":-1}`, "at_shard"},
		{splitPath, `{"at_shard":99999999999999999999}`, "at_shard"},
		{splitPath, `{"at":4}`, "body"},
		{splitPath, `{"at_shard":4`, "body"},
		{splitPath, `{"at_shard":4} {}`, "body"},
		{splitPath, `[4]`, "body"},
		{"/v1/admin/partitions/trips/x/split", ``, "partition"},
		{"/v1/admin/partitions/trips/-1/split", ``, "partition"},
	} {
		w := serveDS(srv, http.MethodPost, c.path, c.body)
		if !assert.Equal(t, http.StatusBadRequest, w.Code, "POST %s %s: status (body %s)", c.path, c.body, w.Body) {
			continue
		}
		e := dsErrorOf(t, w)
		assert.Equal(t, wire.CodeInvalidArgument, e.Code, "POST %s %s: code", c.path, c.body)
		assert.Equal(t, c.field, e.Field, "POST %s %s: field (message %q)", c.path, c.body, e.Message)
	}
	assert.Empty(t, cb.splits, "a refused split reaches the cluster")
}

// TestSplitErrors: the cluster's errors are answered with their status, code and field: a
// refused at_shard 400 naming it, an unknown datastore or partition 404 naming it, an async
// datastore 400 naming datastore, a refusal 409, no catalog leader 503 with Retry-After (even
// when it wraps the context's error), and every failure after which the split may have been
// decided 504 indeterminate, never 503 (a split sent again is another split).
func TestSplitErrors(t *testing.T) {
	t.Parallel()
	checkCatalogErrors(t, splitPath, `{"at_shard":4}`, []catalogErrorCase{
		{&cluster.FieldError{Field: "at_shard", Msg: "9: want 1 to 7"}, 400, wire.CodeInvalidArgument, "at_shard"},
		{fmt.Errorf("cluster: split: %w", &cluster.FieldError{Field: "at_shard", Msg: "partition 2 holds one shard"}), 400, wire.CodeInvalidArgument, "at_shard"},
		{fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, "trips"), 404, wire.CodeNotFound, "datastore"},
		{fmt.Errorf("%w: no partition 2 in %q", cluster.ErrBadShard, "trips"), 404, wire.CodeNotFound, "partition"},
		{fmt.Errorf("%w: trips is async", cluster.ErrAsyncDatastore), 400, wire.CodeInvalidArgument, "datastore"},
		{fmt.Errorf("%w: splitting needs the pebble store", cluster.ErrRefused), 409, wire.CodeConflict, ""},
		{cluster.ErrNoCatalog, 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("%w: %w", cluster.ErrNoCatalog, context.DeadlineExceeded), 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("%w: split: answer lost", cluster.ErrIndeterminate), 504, wire.CodeIndeterminate, ""},
		{fmt.Errorf("%w: catalog generation 9 not applied here yet: %w", cluster.ErrUnavailable, context.DeadlineExceeded), 504, wire.CodeIndeterminate, ""},
		{fmt.Errorf("%w: partition 2 has no leader", cluster.ErrUnavailable), 504, wire.CodeIndeterminate, ""},
		{context.DeadlineExceeded, 504, wire.CodeIndeterminate, ""},
		{context.Canceled, 504, wire.CodeIndeterminate, ""},
		{fmt.Errorf("disk on fire"), 500, wire.CodeInternal, ""},
	}, func(c catalogErrorCase, cb *catalogBackend, _ wire.ErrorDetail) {
		assert.Len(t, cb.splits, 1, "split with %v: calls of SplitPartition", c.err)
	})
}

// TestSplitWithoutCatalog: without a CatalogBackend the split answers 501 unimplemented (an
// AdminBackend does not serve it); other methods answer 405 with Allow.
func TestSplitWithoutCatalog(t *testing.T) {
	t.Parallel()
	checkCatalogChange(t, splitPath, `{"at_shard":4}`)
}

// TestSplitNeedsAdmin: with authentication, a split needs the admin role (a reader or a writer
// gets 403, no credentials 401, the cluster not called), and it is audited.
func TestSplitNeedsAdmin(t *testing.T) {
	t.Parallel()
	checkNeedsAdmin(t, splitPath, `{"at_shard":4}`, func(cb *catalogBackend) int { return len(cb.splits) })
}
