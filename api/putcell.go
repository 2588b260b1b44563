package api

import (
	"fmt"
	"net/http"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// putCell serves put_cell: PUT /v1/{ds}/cells/{row}/{col}/{ref}[?if_latest_ref_key=N|none]
// with the cell's JSON body. It answers 201 created, 200 exists (the same body is stored),
// 202 buffered (async mode, master down), 409 conflict (another body is stored at the key),
// 412 when the condition does not hold; see docs/api.md.
func (s *Server) putCell(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{idempotencyKey: true, maxBody: s.cfg.MaxCellBodyBytes})
	if err != nil {
		return err
	}
	ref := r.PathValue("ref")
	k, he := parseKey("", r.PathValue("row"), r.PathValue("col"), &ref)
	if he != nil {
		return he
	}
	text, err := q.body()
	if err != nil {
		return err
	}
	body, err := cells.EncodeBody(text)
	if err != nil {
		return fieldError("", err)
	}
	cond, he := ifLatest(r, k)
	if he != nil {
		return he
	}
	req := cluster.WriteRequest{Cells: []cells.Cell{{Key: k, Body: body}}, IdempotencyKey: q.idempotencyKey}
	if cond != nil {
		req.Conditions = []cluster.Condition{*cond}
	}
	s.hintLeader(w, q.ds, k.RowKey)
	wr, err := s.writeBackend(w, r, q.ds, req, "")
	if err != nil {
		return err
	}
	res := wr.Cells[0]
	out := putResult(k, res)
	switch res.Status {
	case cells.StatusCreated:
		writeJSON(w, http.StatusCreated, out)
	case cells.StatusExists:
		writeJSON(w, http.StatusOK, out)
	case cells.StatusBuffered:
		writeJSON(w, http.StatusAccepted, out)
	default:
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict,
			msg: fmt.Sprintf("cell %s exists with another body (added_id %d); cells are immutable, write a higher ref_key", k, res.AddedID)}
	}
	return nil
}

// ifLatest parses put_cell's if_latest_ref_key query parameter into a condition on k's column
// (nil: absent).
func ifLatest(r *http.Request, k cells.Key) (*cluster.Condition, *httpError) {
	vs, ok := r.URL.Query()["if_latest_ref_key"]
	if !ok {
		return nil, nil
	}
	if len(vs) != 1 {
		return nil, invalid("if_latest_ref_key", "given %d times", len(vs))
	}
	c := &cluster.Condition{RowKey: k.RowKey, ColumnKey: k.ColumnKey}
	if vs[0] == "none" {
		c.None = true
		return c, nil
	}
	ref, he := parseRefKey("if_latest_ref_key", vs[0])
	if he != nil {
		he.msg += ` (or "none")`
		return nil, he
	}
	c.LatestRefKey = ref
	return c, nil
}
