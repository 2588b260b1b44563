package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// datastoreRoutes registers the catalog's endpoints (/v1/admin/datastores): list, show, create
// and drop datastores at run time; and /v1/admin/catalog/voters, which moves the catalog's
// votes to other nodes. Creating and dropping are bounded by Config.AdminTimeout
// (a creation waits for its partitions' leaders), reading by RequestTimeout. Without a
// CatalogBackend they answer 501. They are admin routes (auth.go: /v1/admin/ needs the admin
// role, and every request is audited).
func (s *Server) datastoreRoutes() {
	short, long := s.cfg.RequestTimeout, s.cfg.AdminTimeout
	route := func(pattern string, hs handlers) {
		if s.b.Catalog == nil {
			hs = unimplemented(hs, wire.CodeUnimplemented, "this server has no datastore catalog")
		}
		// One bound per pattern: the longer, which bounded narrows for the reads.
		s.routeTimeout(pattern, max(short, long), hs)
	}
	route("/v1/admin/datastores", handlers{
		http.MethodGet:  bounded(short, s.listDatastores),
		http.MethodPost: bounded(long, s.createDatastore),
	})
	route("/v1/admin/datastores/{name}", handlers{
		http.MethodGet:    bounded(short, s.getDatastore),
		http.MethodPatch:  bounded(long, s.setDatastoreSettings),
		http.MethodDelete: bounded(long, s.dropDatastore),
	})
	route("/v1/admin/catalog/voters", handlers{http.MethodPost: bounded(long, s.moveCatalogVoters)})
}

// moveCatalogVoters serves POST /v1/admin/catalog/voters: the catalog's votes move to the
// nodes of a wire.CatalogVotersRequest (CatalogBackend.MoveCatalogVoters).
func (s *Server) moveCatalogVoters(w http.ResponseWriter, r *http.Request) error {
	var req wire.CatalogVotersRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	if len(req.Voters) == 0 {
		return invalid("voters", "is required: the ids of the nodes to hold the catalog's votes")
	}
	res, err := s.b.Catalog.MoveCatalogVoters(r.Context(), req.Voters)
	if err != nil {
		return datastoreError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// bounded returns h with its request's context bounded by timeout as well.
func bounded(timeout time.Duration, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		return h(w, r.WithContext(ctx))
	}
}

// datastoreError maps the catalog operations' errors to answers: a *cluster.FieldError is a 400
// naming its field, an existing datastore a 409 conflict naming name, an unknown one a 404
// naming datastore, ErrNoCatalog (an ErrUnavailable: nothing done) a 503 even when it wraps
// ctx's error, ctx's error otherwise a 504 indeterminate (the change may have been applied:
// GET /v1/admin/datastores tells), the rest as backendError maps it.
func datastoreError(err error) *httpError {
	var fe *cluster.FieldError
	switch {
	case errors.As(err, &fe):
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: fe.Field, msg: err.Error()}
	case errors.Is(err, cluster.ErrDatastoreExists):
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict, field: "name", msg: err.Error()}
	case errors.Is(err, cluster.ErrUnknownDatastore):
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "datastore", msg: err.Error()}
	case errors.Is(err, cluster.ErrUnavailable):
		return &httpError{status: http.StatusServiceUnavailable, code: wire.CodeUnavailable, msg: err.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &httpError{status: http.StatusGatewayTimeout, code: wire.CodeIndeterminate,
			msg: err.Error() + " (the change may still be applied: list the datastores to know)"}
	}
	return backendError(err)
}

// createOptions checks a creation request and returns the cluster's options. It checks what
// needs no cluster state (the name's syntax, the mode, the ranges of shards, partitions and
// replicas, the shape of replicas); the cluster checks the rest. replicas is req.Replicas as
// the body has it (see decodeReplicas).
func createOptions(req wire.CreateDatastoreRequest, replicas json.RawMessage) (cluster.CreateDatastoreOptions, *httpError) {
	o := cluster.CreateDatastoreOptions{Name: req.Name, Mode: req.Mode, Shards: req.Shards, Partitions: req.Partitions,
		BufferClusters: req.BufferClusters, MySQLPrefix: req.MySQLPrefix, UnsafeNoBufferedWrites: req.UnsafeNoBufferedWrites,
		SplitLoad: req.SplitLoad, SplitSize: req.SplitSize, LeaderZone: req.LeaderZone}
	switch {
	case req.Name == "":
		return o, invalid("name", "is required")
	case !cells.ValidDatastoreName(req.Name):
		return o, invalid("name", "%q must match [a-z][a-z0-9_]{0,%d}", req.Name, cells.MaxDatastoreNameLen-1)
	case req.Mode != "" && req.Mode != topology.ModeRaft && req.Mode != topology.ModeAsync:
		return o, invalid("mode", "%q must be %s or %s", req.Mode, topology.ModeRaft, topology.ModeAsync)
	case req.Shards == 0:
		return o, invalid("shards", "is required: the number of shards, 1 to %d, fixed forever", cells.MaxShards)
	case req.Shards < 0 || req.Shards > cells.MaxShards:
		return o, invalid("shards", "%d must be in 1..%d", req.Shards, cells.MaxShards)
	case req.Partitions < 0 || req.Partitions > req.Shards:
		return o, invalid("partitions", "%d must be in 1..%d (at most one per shard; absent or 0: 1)", req.Partitions, req.Shards)
	case req.BufferClusters < 0:
		return o, invalid("buffer_clusters", "%d must not be negative", req.BufferClusters)
	case req.LeaderZone != "" && !topology.ZonePattern.MatchString(req.LeaderZone):
		return o, invalid("leader_zone", "%q must match %s", req.LeaderZone, topology.ZonePattern)
	case req.LeaderZone != "" && req.Mode == topology.ModeAsync:
		return o, invalid("leader_zone", "an async datastore has no raft leaders: its partitions live on its storage_clusters")
	}
	var he *httpError
	if o.ReplicaCount, o.Replicas, he = decodeReplicas(replicas); he != nil {
		return o, he
	}
	if req.Mode == topology.ModeAsync && (o.ReplicaCount > 0 || o.Replicas != nil) {
		return o, invalid("replicas", "an async datastore has no replicas: its partitions live on its storage_clusters")
	}
	for _, c := range req.StorageClusters {
		o.StorageClusters = append(o.StorageClusters, topology.StorageClusterSpec{Name: c.Name, Master: c.Master, Minions: c.Minions})
	}
	return o, nil
}

// decodeReplicas reads the replicas of a creation request: absent or null (count 0 and no
// list: the cluster's default), a count of 1 to catalog.MaxReplicas, or a non-empty list of
// distinct node ids. Anything else is a 400 naming replicas.
func decodeReplicas(raw json.RawMessage) (int, []string, *httpError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil, nil
	}
	switch raw[0] {
	case '[':
		var nodes []string
		if err := json.Unmarshal(raw, &nodes); err != nil {
			return 0, nil, invalid("replicas", "%s is not a list of node ids (strings)", raw)
		}
		if len(nodes) == 0 || len(nodes) > catalog.MaxReplicas {
			return 0, nil, invalid("replicas", "%d node ids, want 1 to %d (omit replicas for the default)", len(nodes), catalog.MaxReplicas)
		}
		for i, n := range nodes {
			if n == "" {
				return 0, nil, invalid("replicas", "node id %d is empty", i)
			}
			if slices.Contains(nodes[:i], n) {
				return 0, nil, invalid("replicas", "node %q is listed twice", n)
			}
		}
		return 0, nodes, nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.Atoi(string(raw))
		if err != nil || n < 1 || n > catalog.MaxReplicas {
			return 0, nil, invalid("replicas", "%s is not a replica count: want a whole number from 1 to %d", raw, catalog.MaxReplicas)
		}
		return n, nil, nil
	}
	return 0, nil, invalid("replicas", "%s is neither a replica count (1 to %d) nor a list of node ids", raw, catalog.MaxReplicas)
}

func (s *Server) createDatastore(w http.ResponseWriter, r *http.Request) error {
	b, he := readBody(r, maxAdminBody, "body")
	if he != nil {
		return he
	}
	var req wire.CreateDatastoreRequest
	if err := decodeBody(b, &req, false); err != nil {
		return err
	}
	// Replicas again, as the body has it: a count must be the integer literal it is (1, not
	// 1.0, which req.Replicas cannot tell apart).
	var raw struct {
		Replicas json.RawMessage `json:"replicas"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return invalid("body", "%v", err)
	}
	o, he := createOptions(req, raw.Replicas)
	if he != nil {
		return he
	}
	res, err := s.b.Catalog.CreateDatastore(r.Context(), o)
	if err != nil {
		return datastoreError(err)
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}

func (s *Server) dropDatastore(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	q := r.URL.Query()
	switch confirm := q.Get("confirm"); {
	case len(q["confirm"]) > 1:
		return invalid("confirm", "given %d times", len(q["confirm"]))
	case confirm == "":
		return invalid("confirm", "is required: ?confirm= must name the datastore again (%q)", name)
	case confirm != name:
		return invalid("confirm", "%q does not name the datastore %q", confirm, name)
	}
	res, err := s.b.Catalog.DropDatastore(r.Context(), name, q.Get("confirm"))
	if err != nil {
		return datastoreError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// setDatastoreSettings serves PATCH /v1/admin/datastores/{name}: the settings of a
// wire.DatastoreSettingsRequest (leader zone, split thresholds) change
// (CatalogBackend.SetDatastoreSettings).
func (s *Server) setDatastoreSettings(w http.ResponseWriter, r *http.Request) error {
	var req wire.DatastoreSettingsRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	res, err := s.b.Catalog.SetDatastoreSettings(r.Context(), r.PathValue("name"), req)
	if err != nil {
		return datastoreError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listDatastores(w http.ResponseWriter, r *http.Request) error {
	res := s.b.Catalog.CatalogDatastores()
	if res.Datastores == nil {
		res.Datastores = []wire.DatastoreInfo{}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getDatastore(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	res := s.b.Catalog.CatalogDatastores()
	i := slices.IndexFunc(res.Datastores, func(d wire.DatastoreInfo) bool { return d.Name == name })
	if i < 0 {
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "datastore",
			msg: "no datastore " + strconv.Quote(name) + " in the catalog"}
	}
	writeJSON(w, http.StatusOK, res.Datastores[i])
	return nil
}
