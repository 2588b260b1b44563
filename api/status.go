package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// The node's own routes (NodeBackend): GET /healthz, GET /readyz and GET /v1/cluster.

// healthz answers GET /healthz: 200 while the process serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "node": s.b.Node.ID()})
	return nil
}

// readyz answers the node's readiness, with each datastore's, or, with ?datastore=NAME, that
// datastore's alone (see docs/api.md).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if q := r.URL.Query(); q.Has("datastore") {
		return s.datastoreReadyz(w, q.Get("datastore"))
	}
	all := map[string]wire.DatastoreReadiness{}
	for _, d := range s.b.Node.Topology().Datastores {
		dr := wire.DatastoreReadiness{Ready: true}
		if err := s.b.Node.DatastoreReady(d.Name); err != nil {
			dr = wire.DatastoreReadiness{Error: err.Error()}
		}
		all[d.Name] = dr
	}
	if err := s.b.Node.Ready(); err != nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, wire.NotReady{Error: wire.ErrorDetail{Code: wire.CodeUnavailable, Message: "not ready: " + err.Error()},
			Datastores: all})
		return nil
	}
	writeJSON(w, http.StatusOK, wire.Readiness{Status: "ready", Node: s.b.Node.ID(), Datastores: all})
	return nil
}

// datastoreReadyz answers GET /readyz?datastore=NAME.
func (s *Server) datastoreReadyz(w http.ResponseWriter, name string) error {
	err := s.b.Node.DatastoreReady(name)
	switch {
	case errors.Is(err, cluster.ErrUnknownDatastore):
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "datastore", msg: fmt.Sprintf("datastore: unknown datastore %q", name)}
	case err != nil:
		return &httpError{status: http.StatusServiceUnavailable, code: wire.CodeUnavailable, msg: "not ready: " + err.Error()}
	}
	writeJSON(w, http.StatusOK, wire.Readiness{Status: "ready", Node: s.b.Node.ID(), Datastore: name})
	return nil
}

// clusterStatus answers GET /v1/cluster: the topology with what this node knows of each
// partition.
func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) error {
	t := s.b.Node.Topology()
	out := wire.ClusterStatus{Node: s.b.Node.ID()}
	for _, n := range t.Nodes {
		out.Nodes = append(out.Nodes, wire.NodeStatus{ID: n.ID, HTTPAddr: n.HTTPAddr, RaftAddr: n.RaftAddr})
	}
	reps := map[string]map[int]cluster.ReplicaStatus{}
	for _, rs := range s.b.Node.Replicas() {
		if reps[rs.Datastore] == nil {
			reps[rs.Datastore] = map[int]cluster.ReplicaStatus{}
		}
		reps[rs.Datastore][rs.Partition] = rs
	}
	for _, d := range t.Datastores {
		dst := wire.DatastoreStatus{Name: d.Name, Mode: d.Mode, Shards: d.Shards}
		for _, p := range d.Partitions {
			rs := reps[d.Name][p.ID]
			dst.Partitions = append(dst.Partitions, wire.PartitionStatus{
				ID: p.ID, FirstShard: p.FirstShard, LastShard: p.LastShard, Replicas: p.Replicas,
				Leader: rs.Leader, Local: rs.Local, State: rs.State, Term: rs.Term,
				CommitIndex: rs.CommitIndex, AppliedIndex: rs.AppliedIndex, LastIndex: rs.LastIndex,
				Quiesced: rs.Quiesced,
			})
			if a := rs.Async; a != nil {
				ps := &dst.Partitions[len(dst.Partitions)-1]
				ps.Cluster, ps.BufferDepth, ps.Reaped, ps.Replayed, ps.ReaperConflicts = a.Cluster, a.BufferDepth, a.Reaped, a.Replayed, a.Conflicts
				if !a.BufferOldest.IsZero() {
					ps.BufferOldestSeconds = time.Since(a.BufferOldest).Seconds()
				}
				for _, m := range a.Members {
					if m.Role == "master" {
						ps.Master = m.Addr
					}
					ps.Members = append(ps.Members, wire.StorageMemberStatus{Addr: m.Addr, Role: m.Role, Breaker: m.Breaker,
						ReadOnly: m.Probe.ReadOnly, GTIDPosition: m.Probe.GTIDCurrentPos, SecondsBehind: m.Probe.SecondsBehind, Error: m.Err})
				}
			}
		}
		out.Datastores = append(out.Datastores, dst)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
