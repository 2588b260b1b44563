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
func (s *Server) eraseRow(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	rk, err := cells.ParseRowKey(r.PathValue("row"))
	if err != nil {
		return fieldError("", err)
	}
	s.hintLeader(w, q.ds, rk)
	res, err := s.b.Writes.EraseRow(r.Context(), q.ds, rk)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.EraseResult{RowKey: rk.String(), Erased: res.Erased, AddedID: res.AddedID})
	return nil
}
