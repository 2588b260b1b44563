package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// maxAdminBody bounds the JSON body of an admin request.
const maxAdminBody = 64 << 10

// adminRoutes registers the cluster administration endpoints (/v1/admin/...): membership,
// voters, leadership, placement, the split of a partition and the merge of two. Changes may
// take minutes (a replica catching up): they are bounded by Config.AdminTimeout, not
// RequestTimeout. Without an AdminBackend they answer 501, except the split and the merge,
// which need the CatalogBackend (split.go, merge.go).
func (s *Server) adminRoutes() {
	long := s.cfg.AdminTimeout
	route := func(pattern string, timeout time.Duration, hs handlers) {
		if s.b.Admin == nil {
			hs = unimplemented(hs, wire.CodeInternal, "this backend has no admin operations")
		}
		s.routeTimeout(pattern, timeout, hs)
	}
	route("/v1/admin/nodes", s.cfg.RequestTimeout, handlers{http.MethodGet: s.adminNodes})
	route("/v1/admin/partitions", s.cfg.RequestTimeout, handlers{http.MethodGet: s.adminPartitions})
	route("/v1/admin/partitions/{ds}/{partition}/voters", long, handlers{http.MethodPost: s.adminAddVoter})
	route("/v1/admin/partitions/{ds}/{partition}/voters/{node}", long, handlers{http.MethodDelete: s.adminRemoveVoter})
	route("/v1/admin/partitions/{ds}/{partition}/learners", long, handlers{http.MethodPost: s.adminAddLearner})
	route("/v1/admin/partitions/{ds}/{partition}/learners/{node}", long, handlers{http.MethodDelete: s.adminRemoveLearner})
	route("/v1/admin/partitions/{ds}/{partition}/leader", long, handlers{http.MethodPost: s.adminTransfer})
	route("/v1/admin/partitions/{ds}/{partition}/move", long, handlers{http.MethodPost: s.adminMove})
	// A split and a merge change the catalog: the CatalogBackend serves them (split.go,
	// merge.go), not the AdminBackend.
	s.routeTimeout("/v1/admin/partitions/{ds}/{partition}/split", long, s.catalogChange(s.adminSplit))
	s.routeTimeout("/v1/admin/partitions/{ds}/merge", long, s.catalogChange(s.adminMerge))
	s.routeTimeout("/v1/admin/partitions/{ds}/{partition}/cluster", long, s.catalogChange(s.adminMoveToCluster))
	route("/v1/admin/rebalance", long, handlers{http.MethodPost: s.adminRebalance})
	route("/v1/admin/nodes/{node}/drain", long, handlers{http.MethodPost: s.adminDrain})
}

// adminError maps the admin operations' errors to answers.
func adminError(err error) *httpError {
	switch {
	case errors.Is(err, cluster.ErrUnknownNode):
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "node", msg: err.Error()}
	case errors.Is(err, cluster.ErrRefused):
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error()}
	case errors.Is(err, cluster.ErrAsyncDatastore):
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: "datastore", msg: err.Error()}
	}
	return backendError(err)
}

// adminPartition parses {ds} and {partition} of the path.
func adminPartition(r *http.Request) (string, int, *httpError) {
	ds := r.PathValue("ds")
	pid, err := strconv.Atoi(r.PathValue("partition"))
	if err != nil || pid < 0 {
		return "", 0, invalid("partition", "%q is not a partition number", r.PathValue("partition"))
	}
	return ds, pid, nil
}

// adminBody decodes an optional JSON body into v (an empty body leaves v as it is).
func adminBody(r *http.Request, v any) error {
	b, he := readBody(r, maxAdminBody, "body")
	if he != nil {
		return he
	}
	return decodeBody(b, v, true)
}

func (s *Server) adminNodes(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, wire.NodesResponse{Self: s.b.Node.ID(), Nodes: wireMembers(s.b.Admin.Members())})
	return nil
}

func (s *Server) adminPartitions(w http.ResponseWriter, r *http.Request) error {
	reps, err := s.b.Admin.PartitionReports(r.Context(), r.URL.Query().Get("datastore"))
	if err != nil {
		return adminError(err)
	}
	writeJSON(w, http.StatusOK, wire.PartitionsResponse{Partitions: reps})
	return nil
}

// answerConfig writes the partition's configuration after a change.
func (s *Server) answerConfig(w http.ResponseWriter, r *http.Request, ds string, pid int) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	cfg, err := s.b.Admin.PartitionConfig(ctx, ds, pid)
	if err != nil {
		return adminError(err)
	}
	writeJSON(w, http.StatusOK, cfg)
	return nil
}

func (s *Server) adminAddVoter(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	node, err := nodeBody(r, "the node to add")
	if err != nil {
		return err
	}
	if err := s.b.Admin.AddVoter(r.Context(), ds, pid, node); err != nil {
		return adminError(err)
	}
	return s.answerConfig(w, r, ds, pid)
}

func (s *Server) adminRemoveVoter(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	if err := s.b.Admin.RemoveVoter(r.Context(), ds, pid, r.PathValue("node")); err != nil {
		return adminError(err)
	}
	return s.answerConfig(w, r, ds, pid)
}

// nodeBody reads a wire.NodeRequest body whose node is required (what: what it names, for
// the 400).
func nodeBody(r *http.Request, what string) (string, error) {
	var req wire.NodeRequest
	if err := adminBody(r, &req); err != nil {
		return "", err
	}
	if req.Node == "" {
		return "", invalid("node", "is required: %s", what)
	}
	return req.Node, nil
}

// adminAddLearner serves POST /v1/admin/partitions/{ds}/{partition}/learners: the node of a
// wire.NodeRequest becomes a learner (a permanent nonvoter) of the partition; the answer is
// the configuration after it.
func (s *Server) adminAddLearner(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	node, err := nodeBody(r, "the node to hold the learner")
	if err != nil {
		return err
	}
	cfg, err := s.b.Admin.AddLearner(r.Context(), ds, pid, node)
	if err != nil {
		return adminError(err)
	}
	writeJSON(w, http.StatusOK, cfg)
	return nil
}

// adminRemoveLearner serves DELETE /v1/admin/partitions/{ds}/{partition}/learners/{node}.
func (s *Server) adminRemoveLearner(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	cfg, err := s.b.Admin.RemoveLearner(r.Context(), ds, pid, r.PathValue("node"))
	if err != nil {
		return adminError(err)
	}
	writeJSON(w, http.StatusOK, cfg)
	return nil
}

func (s *Server) adminTransfer(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	var req wire.NodeRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	if _, err := s.b.Admin.TransferLeadership(r.Context(), ds, pid, req.Node); err != nil {
		return adminError(err)
	}
	return s.answerConfig(w, r, ds, pid)
}

func (s *Server) adminMove(w http.ResponseWriter, r *http.Request) error {
	ds, pid, he := adminPartition(r)
	if he != nil {
		return he
	}
	var req wire.MoveRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	switch {
	case req.From == "":
		return invalid("from", "is required")
	case req.To == "":
		return invalid("to", "is required")
	}
	if err := s.b.Admin.MoveReplica(r.Context(), ds, pid, req.From, req.To); err != nil {
		return adminError(err)
	}
	return s.answerConfig(w, r, ds, pid)
}

func (s *Server) adminRebalance(w http.ResponseWriter, r *http.Request) error {
	var req wire.RebalanceRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	rep, err := s.b.Admin.Rebalance(r.Context(), cluster.RebalanceOptions{Datastore: req.Datastore, Nodes: req.Nodes, Exclude: req.Exclude, DryRun: req.DryRun})
	if err != nil {
		return adminError(err)
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (s *Server) adminDrain(w http.ResponseWriter, r *http.Request) error {
	var req wire.DrainRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	rep, err := s.b.Admin.Drain(r.Context(), r.PathValue("node"), req.DryRun)
	if err != nil {
		return adminError(err)
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}
