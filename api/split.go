package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/wire"
)

// Splitting a partition: POST /v1/admin/partitions/{ds}/{partition}/split (registered by
// adminRoutes, beside the other partition changes, served by the CatalogBackend: 501 without
// one). The body, optional, is a wire.SplitRequest; the answer a wire.SplitResponse. Moving an
// async partition to another storage cluster: POST /v1/admin/partitions/{ds}/{partition}/cluster,
// a wire.ClusterMoveRequest answered by a wire.ClusterMoveResponse.

// catalogChange returns the handlers of a route whose POST, h, changes the catalog (the split,
// the merge): 501 unimplemented without a CatalogBackend.
func (s *Server) catalogChange(h handler) handlers {
	hs := handlers{http.MethodPost: h}
	if s.b.Catalog == nil {
		hs = unimplemented(hs, wire.CodeUnimplemented, "this server has no datastore catalog")
	}
	return hs
}

// splitError maps the errors of a split to answers (partitionChangeError): a
// *cluster.FieldError is a 400 naming its field (at_shard), and cluster.ErrUnavailable, unless
// it is cluster.ErrNoCatalog (nothing done: 503, even when it wraps ctx's error), is a 504
// indeterminate, never a 503: it comes from the steps after the catalog decided the split
// (this node not applying its generation in time, the parent without a leader), and the
// cluster then completes the split. A split sent again after it was decided is another split
// (with at_shard absent, of the left half's middle): GET /v1/admin/datastores tells whether it
// happened.
func splitError(err error) *httpError {
	return partitionChangeError(err, "split", false)
}

// partitionChangeError maps the errors of a change of a datastore's partitions in the catalog
// (op: "split" or "merge") to answers: a *cluster.FieldError is a 400 naming its field, an
// unknown datastore a 404 naming datastore, an unknown partition (cluster.ErrBadShard) a 404
// naming partition, an async datastore a 400 naming datastore, a refusal (cluster.ErrRefused:
// a store that cannot change partitions, a catalog that changed meanwhile) a 409, and
// cluster.ErrNoCatalog (an ErrUnavailable: nothing done) a 503 even when it wraps ctx's error.
// With unavailableUndone, any other cluster.ErrUnavailable means nothing was done too (503);
// without, it is a 504 like the rest.
//
// Any other failure to finish (cluster.ErrIndeterminate, cluster.ErrClosed, ctx's error) is a
// 504 indeterminate, never a 503: the change may have been decided, and then the cluster
// completes it. Other errors are backendError's.
func partitionChangeError(err error, op string, unavailableUndone bool) *httpError {
	var fe *cluster.FieldError
	switch {
	case errors.As(err, &fe):
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: fe.Field, msg: err.Error()}
	case errors.Is(err, cluster.ErrUnknownDatastore):
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "datastore", msg: err.Error()}
	case errors.Is(err, cluster.ErrBadShard):
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "partition", msg: err.Error()}
	case errors.Is(err, cluster.ErrAsyncDatastore):
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: "datastore", msg: err.Error()}
	case errors.Is(err, cluster.ErrRefused):
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error()}
	case errors.Is(err, cluster.ErrNoCatalog),
		unavailableUndone && errors.Is(err, cluster.ErrUnavailable) && !errors.Is(err, cluster.ErrIndeterminate):
		return &httpError{status: http.StatusServiceUnavailable, code: wire.CodeUnavailable, msg: err.Error()}
	case errors.Is(err, cluster.ErrIndeterminate), errors.Is(err, cluster.ErrUnavailable), errors.Is(err, cluster.ErrClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &httpError{status: http.StatusGatewayTimeout, code: wire.CodeIndeterminate,
			msg: err.Error() + " (the " + op + " may have been decided, and is then completed by the cluster: list the datastores before sending it again)"}
	}
	return backendError(err)
}

func (s *Server) adminSplit(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	var req wire.SplitRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	if req.AtShard < 0 {
		return invalid("at_shard", "%d must not be negative (absent or 0: the middle of the partition's range)", req.AtShard)
	}
	res, err := s.b.Catalog.SplitPartition(r.Context(), ds, pid, req)
	if err != nil {
		return splitError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) adminMoveToCluster(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	var req wire.ClusterMoveRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	if req.To == "" {
		return invalid("to", "is required: the storage cluster to move the partition to")
	}
	res, err := s.b.Catalog.MoveToCluster(r.Context(), ds, pid, req)
	switch {
	case errors.Is(err, partition.ErrMoveAborted):
		return &httpError{status: http.StatusServiceUnavailable, code: wire.CodeUnavailable, msg: err.Error()}
	case err != nil:
		return partitionChangeError(err, "move", false)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
