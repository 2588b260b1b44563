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

const mergePath = "/v1/admin/partitions/trips/merge"

// TestMergePartitions: a merge reaches the cluster with its datastore, left and right, and is
// answered 200 with the cluster's answer, in the field names docs/api.md gives.
func TestMergePartitions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body        string
		left, right int
	}{
		{`{"left":2,"right":3}`, 2, 3},
		{` {"right": 1, "left": 0} `, 0, 1},
		{`{"left":7,"right":4}`, 7, 4}, // the cluster judges adjacency
	} {
		cb := &catalogBackend{}
		srv := catalogServer(t, cb, api.Config{})
		w := serveDS(srv, http.MethodPost, mergePath, c.body)
		require.Equal(t, http.StatusOK, w.Code, "POST %q: status (body %s)", c.body, w.Body)
		assert.Equal(t, []mergeCall{{"trips", c.left, c.right}}, cb.merges, "POST %q: the cluster's call", c.body)
		var got wire.MergeResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got), "POST %q: the answer %q", c.body, w.Body)
		want, _ := (&catalogBackend{}).MergePartitions(context.Background(), "trips", c.left, c.right)
		assert.Equal(t, want, got, "POST %q: the answer", c.body)
	}
	srv := catalogServer(t, &catalogBackend{}, api.Config{})
	w := serveDS(srv, http.MethodPost, mergePath, `{"left":2,"right":3}`)
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"generation":10,"took_ms":30,"pause_ms":4,
		"merged":{"id":2,"first_shard":0,"last_shard":7,"replicas":["n1","n2","n3"],"generation":10,"parent":-1}}`, w.Body.String())
}

// TestMergeRefused: a merge the API can judge alone (a body that is not a MergeRequest, a
// partition missing, negative or not a whole number, the same partition twice) is answered 400
// invalid_argument naming its field, and never reaches the cluster.
func TestMergeRefused(t *testing.T) {
	t.Parallel()
	cb := &catalogBackend{}
	srv := catalogServer(t, cb, api.Config{})
	for _, c := range []struct{ body, field string }{
		{``, "right"},
		{`{}`, "right"},
		{`null`, "right"},
		{`{"left":2}`, "right"},
		{`{"left":2,"right":null}`, "right"},
		{`{"right":3}`, "left"},
		{`{"left":null,"right":3}`, "left"},
		{`{"left":-1,"right":3}`, "left"},
		{`{"left":2,"right":-3}`, "right"},
		{`{"left":-1,"right":-1}`, "left"},
		{`{"left":2,"right":2}`, "right"},
		{`{"left":0,"right":0}`, "right"},
		{`{"left":"2","right":3}`, "left"},
		{`{"left":2,"right":3.5}`, "right"},
		{`{"left":2,"right":3.0}`, "right"},
		{`{"left":2,"right":true}`, "right"},
		{`{"left":2,"right":99999999999999999999}`, "right"},
		{`{"left":2,"right":3,"at_shard":4}`, "body"},
		{`{"left":2,"right":3`, "body"},
		{`{"left":2,"right":3} {}`, "body"},
		{`[2,3]`, "body"},
	} {
		w := serveDS(srv, http.MethodPost, mergePath, c.body)
		if !assert.Equal(t, http.StatusBadRequest, w.Code, "POST %s: status (body %s)", c.body, w.Body) {
			continue
		}
		e := dsErrorOf(t, w)
		assert.Equal(t, wire.CodeInvalidArgument, e.Code, "POST %s: code", c.body)
		assert.Equal(t, c.field, e.Field, "POST %s: field (message %q)", c.body, e.Message)
	}
	assert.Empty(t, cb.merges, "a refused merge reaches the cluster")
}

// TestMergeErrors: the cluster's errors are answered with their status, code and field: a
// refused left or right 400 naming it, an unknown datastore or partition 404 naming it, an
// async datastore 400 naming datastore, a refusal 409, no catalog leader or another
// unavailability 503 with Retry-After (nothing merged, even when it wraps the context's
// error), and every failure after which the merge may have been decided 504 indeterminate.
func TestMergeErrors(t *testing.T) {
	t.Parallel()
	checkCatalogErrors(t, mergePath, `{"left":2,"right":3}`, []catalogErrorCase{
		{&cluster.FieldError{Field: "right", Msg: "partition 3 does not follow partition 2"}, 400, wire.CodeInvalidArgument, "right"},
		{fmt.Errorf("cluster: merge: %w", &cluster.FieldError{Field: "left", Msg: "partition 2 is frozen"}), 400, wire.CodeInvalidArgument, "left"},
		{fmt.Errorf("%w: %q", cluster.ErrUnknownDatastore, "trips"), 404, wire.CodeNotFound, "datastore"},
		{fmt.Errorf("%w: no partition 3 in %q", cluster.ErrBadShard, "trips"), 404, wire.CodeNotFound, "partition"},
		{fmt.Errorf("%w: trips is async", cluster.ErrAsyncDatastore), 400, wire.CodeInvalidArgument, "datastore"},
		{fmt.Errorf("%w: merging needs the pebble store", cluster.ErrRefused), 409, wire.CodeConflict, ""},
		{cluster.ErrNoCatalog, 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("%w: %w", cluster.ErrNoCatalog, context.DeadlineExceeded), 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("%w: partition 3 has no leader", cluster.ErrUnavailable), 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("%w: partition 3 has no leader: %w", cluster.ErrUnavailable, context.DeadlineExceeded), 503, wire.CodeUnavailable, ""},
		{fmt.Errorf("%w: merge: answer lost", cluster.ErrIndeterminate), 504, wire.CodeIndeterminate, ""},
		{fmt.Errorf("%w: merge: %w", cluster.ErrIndeterminate, context.DeadlineExceeded), 504, wire.CodeIndeterminate, ""},
		{fmt.Errorf("cluster: merge: %w", cluster.ErrClosed), 504, wire.CodeIndeterminate, ""},
		{context.DeadlineExceeded, 504, wire.CodeIndeterminate, ""},
		{context.Canceled, 504, wire.CodeIndeterminate, ""},
		{fmt.Errorf("disk on fire"), 500, wire.CodeInternal, ""},
	}, func(c catalogErrorCase, cb *catalogBackend, e wire.ErrorDetail) {
		if c.status == http.StatusGatewayTimeout {
			assert.Contains(t, e.Message, "the merge may have been decided", "merge with %v: message", c.err)
		}
		assert.Equal(t, []mergeCall{{"trips", 2, 3}}, cb.merges, "merge with %v: calls of MergePartitions", c.err)
	})
}

// TestMergeWithoutCatalog: without a CatalogBackend the merge answers 501 unimplemented (an
// AdminBackend does not serve it); other methods answer 405 with Allow.
func TestMergeWithoutCatalog(t *testing.T) {
	t.Parallel()
	checkCatalogChange(t, mergePath, `{"left":2,"right":3}`)
}

// TestMergePaths: the merge's path, without a partition segment, meets none of the partition
// routes: a datastore named "merge" keeps its split, a partition named "merge" is refused by
// the split as before, and the merge path with a trailing slash or a further segment is no
// merge.
func TestMergePaths(t *testing.T) {
	t.Parallel()
	cb := &catalogBackend{}
	srv := catalogServer(t, cb, api.Config{})

	w := serveDS(srv, http.MethodPost, "/v1/admin/partitions/merge/merge", `{"left":0,"right":1}`)
	require.Equal(t, http.StatusOK, w.Code, "the merge of datastore merge: status (body %s)", w.Body)
	w = serveDS(srv, http.MethodPost, "/v1/admin/partitions/merge/2/split", `{"at_shard":4}`)
	require.Equal(t, http.StatusOK, w.Code, "a split of datastore merge: status (body %s)", w.Body)
	assert.Equal(t, []splitCall{{"merge", 2, 4}}, cb.splits, "a split of datastore merge")
	assert.Equal(t, []mergeCall{{"merge", 0, 1}}, cb.merges, "the merge of datastore merge")

	for _, c := range []struct {
		path   string
		status int
		field  string
	}{
		{"/v1/admin/partitions/trips/merge/split", http.StatusBadRequest, "partition"}, // the split of partition "merge"
		{mergePath + "/", http.StatusBadRequest, "path"},
		{"/v1/admin/partitions/trips//merge", http.StatusBadRequest, "path"},
		{mergePath + "/2", http.StatusNotFound, ""},
		{"/v1/admin/partitions/merge", http.StatusNotFound, ""},
	} {
		w := serveDS(srv, http.MethodPost, c.path, `{"left":0,"right":1}`)
		assert.Equal(t, c.status, w.Code, "POST %s: status (body %s)", c.path, w.Body)
		assert.Equal(t, c.field, dsErrorOf(t, w).Field, "POST %s: field", c.path)
	}
	assert.Len(t, cb.merges, 1, "no other path merged")
}

// TestMergeNeedsAdmin: with authentication, a merge needs the admin role (a reader or a writer
// gets 403, no credentials 401, the cluster not called), and it is audited, answered 200 or
// refused 400.
func TestMergeNeedsAdmin(t *testing.T) {
	t.Parallel()
	srv, audit, bearer := checkNeedsAdmin(t, mergePath, `{"left":2,"right":3}`, func(cb *catalogBackend) int { return len(cb.merges) })
	w := serveDS(srv, http.MethodPost, mergePath, `{"left":2,"right":2}`, bearer("admin")...)
	require.Equal(t, http.StatusBadRequest, w.Code, "POST as admin, the same partition twice: status (body %s)", w.Body)
	log := audit.String()
	for _, want := range []string{
		`event=admin principal=adminer method=POST path=` + mergePath + ` query="" remote=192.0.2.1 status=400`,
		`event=refused principal=writeer method=POST path=` + mergePath,
		`event=refused principal=- method=POST path=` + mergePath + ` remote=192.0.2.1 status=401`,
	} {
		assert.Contains(t, log, want, "the audit log")
	}
}
