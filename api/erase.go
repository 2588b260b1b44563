package api

import (
	"net/http"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// eraseRow answers DELETE /v1/{ds}/cells/{row}: every cell of the row is erased on every
// replica (the cells deleted from the SQL tables, a tombstone appended to the row's shard log,
// the row's index entries deleted by the maintainers after), and the answer is 200 with
// wire.EraseResult. Erasing is idempotent: a row with no cell answers "erased": 0. A bad row
// key is 400 naming row_key. It is a write: 503 when nothing was erased (no leader; in async
// mode a storage cluster without a master: an erasure is never buffered), 504 when it may
// have been; retrying is always safe.
func (s *Server) eraseRow(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	rk, err := cells.ParseRowKey(r.PathValue("row"))
	if err != nil {
		writeError(w, fieldError("", err))
		return
	}
	s.hintLeader(w, ds, rk)
	res, err := s.backend.EraseRow(r.Context(), ds, rk)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.EraseResult{RowKey: rk.String(), Erased: res.Erased, AddedID: res.AddedID})
}
