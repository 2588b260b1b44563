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

// AdminBackend is what the admin endpoints need of a node (*cluster.Node). A backend without
// it answers them 501.
type AdminBackend interface {
	Members() []cluster.Member
	PartitionReports(ctx context.Context, ds string) ([]cluster.PartitionReport, error)
	AddVoter(ctx context.Context, ds string, pid int, node string) error
	RemoveVoter(ctx context.Context, ds string, pid int, node string) error
	TransferLeadership(ctx context.Context, ds string, pid int, to string) (string, error)
	MoveReplica(ctx context.Context, ds string, pid int, from, to string) error
	Rebalance(ctx context.Context, opts cluster.RebalanceOptions) (cluster.RebalanceReport, error)
	Drain(ctx context.Context, node string, dryRun bool) (cluster.RebalanceReport, error)
	PartitionConfig(ctx context.Context, ds string, pid int) (cluster.PartitionConfig, error)
}

var _ AdminBackend = (*cluster.Node)(nil)

// maxAdminBody bounds the JSON body of an admin request.
const maxAdminBody = 64 << 10

// adminRoutes registers the cluster administration endpoints (/v1/admin/...): membership,
// voters, leadership, placement. Changes may take minutes (a replica catching up): they are
// bounded by Config.AdminTimeout, not RequestTimeout.
func (s *Server) adminRoutes() {
	long := s.cfg.AdminTimeout
	s.route("/v1/admin/nodes", map[string]http.HandlerFunc{http.MethodGet: s.adminNodes})
	s.routeTimeout("/v1/admin/partitions", s.cfg.RequestTimeout, map[string]http.HandlerFunc{http.MethodGet: s.adminPartitions})
	s.routeTimeout("/v1/admin/partitions/{ds}/{partition}/voters", long, map[string]http.HandlerFunc{http.MethodPost: s.adminAddVoter})
	s.routeTimeout("/v1/admin/partitions/{ds}/{partition}/voters/{node}", long, map[string]http.HandlerFunc{http.MethodDelete: s.adminRemoveVoter})
	s.routeTimeout("/v1/admin/partitions/{ds}/{partition}/leader", long, map[string]http.HandlerFunc{http.MethodPost: s.adminTransfer})
	s.routeTimeout("/v1/admin/partitions/{ds}/{partition}/move", long, map[string]http.HandlerFunc{http.MethodPost: s.adminMove})
	s.routeTimeout("/v1/admin/rebalance", long, map[string]http.HandlerFunc{http.MethodPost: s.adminRebalance})
	s.routeTimeout("/v1/admin/nodes/{node}/drain", long, map[string]http.HandlerFunc{http.MethodPost: s.adminDrain})
}

func (s *Server) admin(w http.ResponseWriter) (AdminBackend, bool) {
	ab, ok := s.backend.(AdminBackend)
	if !ok {
		writeError(w, &httpError{status: http.StatusNotImplemented, code: wire.CodeInternal, msg: "this backend has no admin operations"})
	}
	return ab, ok
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
func adminBody(r *http.Request, v any) *httpError {
	b, he := readBody(r, maxAdminBody, "body")
	if he != nil {
		return he
	}
	if len(b) == 0 {
		return nil
	}
	return decodeStrict(b, v)
}

func (s *Server) adminNodes(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, wire.NodesResponse{Self: s.backend.ID(), Nodes: wireMembers(ab.Members())})
}

func (s *Server) adminPartitions(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	reps, err := ab.PartitionReports(r.Context(), r.URL.Query().Get("datastore"))
	if err != nil {
		writeError(w, adminError(err))
		return
	}
	writeJSON(w, http.StatusOK, wire.PartitionsResponse{Partitions: wirePartitionReports(reps)})
}

// answerConfig writes the partition's configuration after a change.
func (s *Server) answerConfig(w http.ResponseWriter, r *http.Request, ab AdminBackend, ds string, pid int) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	cfg, err := ab.PartitionConfig(ctx, ds, pid)
	if err != nil {
		writeError(w, adminError(err))
		return
	}
	writeJSON(w, http.StatusOK, wirePartitionConfig(cfg))
}

func (s *Server) adminAddVoter(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	ds, pid, he := adminPartition(r)
	if he == nil {
		var req wire.NodeRequest
		if he = adminBody(r, &req); he == nil && req.Node == "" {
			he = invalid("node", "is required")
		}
		if he == nil {
			if err := ab.AddVoter(r.Context(), ds, pid, req.Node); err != nil {
				he = adminError(err)
			}
		}
	}
	if he != nil {
		writeError(w, he)
		return
	}
	s.answerConfig(w, r, ab, ds, pid)
}

func (s *Server) adminRemoveVoter(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	ds, pid, he := adminPartition(r)
	if he == nil {
		if err := ab.RemoveVoter(r.Context(), ds, pid, r.PathValue("node")); err != nil {
			he = adminError(err)
		}
	}
	if he != nil {
		writeError(w, he)
		return
	}
	s.answerConfig(w, r, ab, ds, pid)
}

func (s *Server) adminTransfer(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	ds, pid, he := adminPartition(r)
	if he == nil {
		var req wire.NodeRequest
		if he = adminBody(r, &req); he == nil {
			if _, err := ab.TransferLeadership(r.Context(), ds, pid, req.Node); err != nil {
				he = adminError(err)
			}
		}
	}
	if he != nil {
		writeError(w, he)
		return
	}
	s.answerConfig(w, r, ab, ds, pid)
}

func (s *Server) adminMove(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	ds, pid, he := adminPartition(r)
	if he == nil {
		var req wire.MoveRequest
		he = adminBody(r, &req)
		switch {
		case he != nil:
		case req.From == "":
			he = invalid("from", "is required")
		case req.To == "":
			he = invalid("to", "is required")
		default:
			if err := ab.MoveReplica(r.Context(), ds, pid, req.From, req.To); err != nil {
				he = adminError(err)
			}
		}
	}
	if he != nil {
		writeError(w, he)
		return
	}
	s.answerConfig(w, r, ab, ds, pid)
}

func (s *Server) adminRebalance(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	var req wire.RebalanceRequest
	if he := adminBody(r, &req); he != nil {
		writeError(w, he)
		return
	}
	rep, err := ab.Rebalance(r.Context(), cluster.RebalanceOptions{Datastore: req.Datastore, Nodes: req.Nodes, Exclude: req.Exclude, DryRun: req.DryRun})
	if err != nil {
		writeError(w, adminError(err))
		return
	}
	writeJSON(w, http.StatusOK, wireRebalanceReport(rep))
}

func (s *Server) adminDrain(w http.ResponseWriter, r *http.Request) {
	ab, ok := s.admin(w)
	if !ok {
		return
	}
	var req wire.DrainRequest
	if he := adminBody(r, &req); he != nil {
		writeError(w, he)
		return
	}
	rep, err := ab.Drain(r.Context(), r.PathValue("node"), req.DryRun)
	if err != nil {
		writeError(w, adminError(err))
		return
	}
	writeJSON(w, http.StatusOK, wireRebalanceReport(rep))
}
