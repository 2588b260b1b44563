package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// ReplicationBackend is replication between clusters (package peering's Replicator): the
// catalog's peers and the progress of their streams.
type ReplicationBackend interface {
	// SetPeer adds or replaces peer cluster name and blocks until this node applied the
	// change or ctx is done. Errors: *cluster.FieldError (400), cluster.ErrNoCatalog (503),
	// ctx's error (504: the change may still be applied).
	SetPeer(ctx context.Context, name string, req wire.ReplicationPeerRequest) (wire.ReplicationPeerStatus, error)
	// DropPeer removes peer cluster name. Errors: cluster.ErrUnknownPeer (404), as SetPeer.
	DropPeer(ctx context.Context, name string) error
	// Status reports every peer and its streams; it blocks for one read of each stream's
	// group and logs.
	Status(ctx context.Context) wire.ReplicationStatus
}

// replicationRoutes registers /v1/admin/replication (GET: every peer and stream) and
// /v1/admin/replication/{peer} (PUT sets a peer, GET shows it, DELETE removes it). Admin
// routes: the admin role, audited. Without a ReplicationBackend they answer 501.
func (s *Server) replicationRoutes() {
	short, long := s.cfg.RequestTimeout, s.cfg.AdminTimeout
	route := func(pattern string, hs handlers) {
		if s.b.Replication == nil {
			hs = unimplemented(hs, wire.CodeUnimplemented, "this server does not replicate between clusters")
		}
		s.routeTimeout(pattern, max(short, long), hs)
	}
	route("/v1/admin/replication", handlers{http.MethodGet: bounded(short, s.replicationStatus)})
	route("/v1/admin/replication/{peer}", handlers{
		http.MethodGet:    bounded(short, s.replicationPeer),
		http.MethodPut:    bounded(long, s.setReplicationPeer),
		http.MethodDelete: bounded(long, s.dropReplicationPeer),
	})
}

func (s *Server) replicationStatus(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.b.Replication.Status(r.Context()))
	return nil
}

// peerName returns the {peer} of the path, or a 400 naming peer.
func peerName(r *http.Request) (string, error) {
	name := r.PathValue("peer")
	if err := cells.ValidateClusterName("peer", name); err != nil {
		return "", invalid("peer", "%q must be 1 to %d bytes of [a-z0-9-], starting with a letter", name, cells.MaxClusterNameLen)
	}
	return name, nil
}

func (s *Server) replicationPeer(w http.ResponseWriter, r *http.Request) error {
	name, err := peerName(r)
	if err != nil {
		return err
	}
	for _, p := range s.b.Replication.Status(r.Context()).Peers {
		if p.Peer == name {
			writeJSON(w, http.StatusOK, p)
			return nil
		}
	}
	return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "peer", msg: "no replication peer " + name}
}

func (s *Server) setReplicationPeer(w http.ResponseWriter, r *http.Request) error {
	name, err := peerName(r)
	if err != nil {
		return err
	}
	var req wire.ReplicationPeerRequest
	if err := adminBody(r, &req); err != nil {
		return err
	}
	res, err := s.b.Replication.SetPeer(r.Context(), name, req)
	if err != nil {
		return datastoreError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) dropReplicationPeer(w http.ResponseWriter, r *http.Request) error {
	name, err := peerName(r)
	if err != nil {
		return err
	}
	err = s.b.Replication.DropPeer(r.Context(), name)
	if errors.Is(err, cluster.ErrUnknownPeer) {
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "peer", msg: err.Error()}
	}
	if err != nil {
		return datastoreError(err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"dropped": name})
	return nil
}
