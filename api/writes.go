package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/wire"
)

// The writes of cells (CellWriter): put_cells here, put_cell in putcell.go, transactions in
// transactions.go; all go through writeBackend.

// putCells serves POST /v1/{ds}/cells: cells of any rows, each applied on its own partition
// (see wire.PutCellsRequest and docs/api.md).
func (s *Server) putCells(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{idempotencyKey: true, maxBody: s.cfg.MaxRequestBytes})
	if err != nil {
		return err
	}
	raw, err := q.body()
	if err != nil {
		return err
	}
	cs, origin, order, he := decodePutCells(raw, &s.cfg)
	if he != nil {
		return he
	}
	if origin != "" && s.cfg.Auth != nil && !security.PrincipalFrom(r.Context()).Allows(security.RoleReplicator, q.ds) {
		return &httpError{status: http.StatusForbidden, code: security.CodeForbidden, field: "origin",
			msg: "only a principal with the replicator or admin role may write cells with an origin; nothing was written"}
	}
	applied := false
	if order != nil {
		end, err := s.orders.begin(r.Context(), origin+"\x00"+q.ds+"\x00"+order.Stream, order.Seq, order.After)
		if err != nil {
			return err
		}
		defer func() { end(applied) }()
	}
	wr, err := s.writeBackend(w, r, q.ds, cluster.WriteRequest{Cells: cs, IdempotencyKey: q.idempotencyKey, Origin: origin}, "cells")
	if err != nil {
		return err
	}
	applied = true
	out := wire.PutCellsResponse{Results: make([]wire.PutResult, len(cs))}
	for i, c := range cs {
		out.Results[i] = putResult(c.Key, wr.Cells[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func putResult(k cells.Key, r cells.Result) wire.PutResult {
	return wire.PutResult{RowKey: k.RowKey.String(), ColumnKey: k.ColumnKey, RefKey: k.RefKey, Status: r.Status.String(), AddedID: r.AddedID}
}

// writeBackend runs req and returns the answer to a refusal (an *httpError: an idempotency key
// reused, a schema violation, a failed condition, a conflict, rows of several partitions in an
// atomic write, a write the node refuses as bad) or the node's error. On nil the caller
// answers the applied write. where names the cells in messages ("cells" for put_cells,
// "writes" for a transaction, "" for put_cell's one cell).
func (s *Server) writeBackend(w http.ResponseWriter, r *http.Request, ds string, req cluster.WriteRequest, where string) (cluster.WriteResponse, error) {
	res, err := s.b.Writes.Write(r.Context(), ds, req)
	switch {
	case errors.Is(err, cluster.ErrCrossPartition):
		return res, &httpError{status: http.StatusBadRequest, code: wire.CodeCrossPartition, field: where, msg: err.Error()}
	case errors.Is(err, cluster.ErrBadWrite):
		return res, &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, msg: err.Error()}
	case err != nil:
		return res, err
	}
	if res.Replayed {
		w.Header().Set(wire.HeaderReplayed, "true")
	}
	keys := make([]cells.Key, len(req.Cells))
	for i, c := range req.Cells {
		keys[i] = c.Key
	}
	if he := refusal(&res, where, keys); he != nil {
		return res, he
	}
	return res, nil
}

// refusal returns the answer to a write its partition refused (nil when it was applied).
// where names the cells in messages ("cells" for put_cells, "writes" for a transaction, ""
// for put_cell's one cell).
func refusal(res *cluster.WriteResponse, where string, keys []cells.Key) *httpError {
	name := func(i int) string {
		if where == "" {
			return "cell"
		}
		return fmt.Sprintf("%s[%d]", where, i)
	}
	switch {
	case res.KeyReused:
		msg := "the idempotency key was used for a different request within the last " + command.RequestWindow.String() + "; nothing was written"
		if where == "cells" {
			msg = "the idempotency key was used for a different request within the last " + command.RequestWindow.String() +
				"; nothing was written in the partitions that had recorded it (cells of other partitions may have been written)"
		}
		return &httpError{status: http.StatusUnprocessableEntity, code: wire.CodeIdempotencyKeyReused, field: "header " + wire.HeaderIdempotencyKey, msg: msg}
	case res.Violation != nil:
		return schemaViolation(*res.Violation, where, where == "cells" && anyResult(res.Cells))
	case len(res.Failed) > 0:
		e := &httpError{status: http.StatusPreconditionFailed, code: wire.CodePreconditionFailed}
		var parts []string
		for _, f := range res.Failed {
			wf := wire.ConditionFailure{Index: f.Index}
			latest := "none"
			if f.Found {
				ref := f.LatestRefKey
				wf.LatestRefKey = &ref
				latest = strconv.FormatInt(ref, 10)
			}
			e.failed = append(e.failed, wf)
			parts = append(parts, fmt.Sprintf("condition %d (latest ref key %s)", f.Index, latest))
		}
		e.latest = refKeyJSON(res.Failed[0].LatestRefKey, res.Failed[0].Found)
		e.msg = "precondition failed: " + strings.Join(parts, ", ") + "; nothing was written"
		return e
	case res.Conflict:
		e := &httpError{status: http.StatusConflict, code: wire.CodeConflict}
		var parts []string
		for i, c := range res.Cells {
			if c.Status == cells.StatusConflict {
				e.conflicts = append(e.conflicts, i)
				parts = append(parts, fmt.Sprintf("%s (%s, added_id %d)", name(i), keys[i], c.AddedID))
			}
		}
		e.msg = "cells exist with another body: " + strings.Join(parts, ", ") + "; cells are immutable, nothing was written"
		return e
	}
	return nil
}

// refKeyJSON is the JSON of a latest ref key: the number, or null.
func refKeyJSON(ref int64, found bool) []byte {
	if !found {
		return []byte("null")
	}
	return []byte(strconv.FormatInt(ref, 10))
}
