package api

import (
	"net/http"

	"github.com/schemaless-db/schemaless/wire"
)

// Merging two raft partitions: POST /v1/admin/partitions/{ds}/merge (registered by
// adminRoutes, beside the split, served by the CatalogBackend: 501 without one). The body, a
// wire.MergeRequest, names both partitions; the answer is a wire.MergeResponse. The path has no
// partition segment: no other route has five segments under /v1/admin/partitions/, so it
// meets no {partition} pattern, and a datastore named "merge" still has its partitions' routes
// (/v1/admin/partitions/merge/{p}/split, ...).

// mergeError maps the errors of a merge to answers (partitionChangeError): a
// *cluster.FieldError is a 400 naming its field (right, or left: not adjacent, not on the same
// replicas), cluster.ErrUnavailable (cluster.ErrNoCatalog among them) a 503, nothing merged,
// and cluster.ErrIndeterminate, cluster.ErrClosed and ctx's error a 504 indeterminate: the
// merge may have been decided, and then the cluster completes it. A merge sent again after it
// was decided is refused, the right partition gone (404 naming partition, or 400 or 409): GET
// /v1/admin/datastores tells whether it happened.
func mergeError(err error) *httpError {
	return partitionChangeError(err, "merge", true)
}

// mergeBody is a wire.MergeRequest as sent, telling an absent (or null) field from 0.
type mergeBody struct {
	Left  *int `json:"left"`
	Right *int `json:"right"`
}

// check checks a merge's body: both partitions given, neither negative, not the same.
// It returns the 400 naming the field at fault (right when both are absent or they are the
// same), or nil.
func (b mergeBody) check() (wire.MergeRequest, *httpError) {
	switch {
	case b.Right == nil:
		return wire.MergeRequest{}, invalid("right", "is required: the partition to merge into left, its left neighbour")
	case b.Left == nil:
		return wire.MergeRequest{}, invalid("left", "is required: the partition that takes right's shards and keeps its id")
	case *b.Left < 0:
		return wire.MergeRequest{}, invalid("left", "%d is not a partition number", *b.Left)
	case *b.Right < 0:
		return wire.MergeRequest{}, invalid("right", "%d is not a partition number", *b.Right)
	case *b.Left == *b.Right:
		return wire.MergeRequest{}, invalid("right", "%d is left too: merge two partitions", *b.Right)
	}
	return wire.MergeRequest{Left: *b.Left, Right: *b.Right}, nil
}

func (s *Server) adminMerge(w http.ResponseWriter, r *http.Request) error {
	var body mergeBody
	if err := adminBody(r, &body); err != nil {
		return err
	}
	req, he := body.check()
	if he != nil {
		return he
	}
	res, err := s.b.Catalog.MergePartitions(r.Context(), r.PathValue("ds"), req.Left, req.Right)
	if err != nil {
		return mergeError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
