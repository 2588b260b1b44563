package api

import (
	"errors"
	"net/http"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/wire"
)

// eraseRow answers DELETE /v1/{ds}/cells/{row}: every cell of the row is erased on every
// replica (the cells deleted from the SQL tables, a tombstone appended to the row's shard log,
// the row's index entries deleted by the maintainers after), and the answer is 200 with
// wire.EraseResult. Erasing is idempotent: a row with no cell answers "erased": 0. A bad row
// key is 400 naming row_key. It is a write: 503 when nothing was erased (no leader; in async
// mode a storage cluster without a master: an erasure is never buffered), 504 when it may
// have been; retrying is always safe. ?origin=C is a replicator's erasure from cluster C (the
// replicator or admin role; 400 naming origin for a bad name or this cluster's own).
func (s *Server) eraseRow(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	rk, err := cells.ParseRowKey(r.PathValue("row"))
	if err != nil {
		return fieldError("", err)
	}
	origin := r.URL.Query().Get("origin")
	if origin != "" {
		if err := cells.ValidateClusterName("origin", origin); err != nil {
			return invalid("origin", "%q must be 1 to %d bytes of [a-z0-9-], starting with a letter", origin, cells.MaxClusterNameLen)
		}
		if s.cfg.Auth != nil && !security.PrincipalFrom(r.Context()).Allows(security.RoleReplicator, q.ds) {
			return &httpError{status: http.StatusForbidden, code: security.CodeForbidden, field: "origin",
				msg: "only a principal with the replicator or admin role may erase with an origin; nothing was erased"}
		}
	}
	s.hintLeader(w, q.ds, rk)
	res, err := s.b.Writes.EraseRowFrom(r.Context(), q.ds, rk, origin)
	if errors.Is(err, cluster.ErrBadWrite) {
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: "origin", msg: err.Error()}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.EraseResult{RowKey: rk.String(), Erased: res.Erased, AddedID: res.AddedID})
	return nil
}
