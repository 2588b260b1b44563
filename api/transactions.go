package api

import (
	"net/http"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// transaction serves POST /v1/{ds}/transactions: conditions and writes on rows of one
// partition, applied all or nothing (see wire.TransactionRequest and docs/api.md).
func (s *Server) transaction(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{idempotencyKey: true, maxBody: s.cfg.MaxRequestBytes})
	if err != nil {
		return err
	}
	raw, err := q.body()
	if err != nil {
		return err
	}
	conds, cs, he := decodeTransaction(raw, &s.cfg)
	if he != nil {
		return he
	}
	req := cluster.WriteRequest{Atomic: true, IdempotencyKey: q.idempotencyKey, Cells: cs, Conditions: conds}
	s.hintLeader(w, q.ds, req.Cells[0].RowKey)
	res, err := s.writeBackend(w, r, q.ds, req, "writes")
	if err != nil {
		return err
	}
	out := wire.TransactionResponse{Committed: true, Partition: res.Partition, Results: make([]wire.PutResult, len(req.Cells))}
	for i, c := range req.Cells {
		out.Results[i] = putResult(c.Key, res.Cells[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
