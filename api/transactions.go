package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/wire"
)

// idempotencyKey returns the request's Idempotency-Key header ("" when absent): 1 to
// cluster.MaxIdempotencyKeyBytes printable ASCII bytes.
func idempotencyKey(r *http.Request) (string, *httpError) {
	vs := r.Header.Values(wire.HeaderIdempotencyKey)
	if len(vs) == 0 {
		return "", nil
	}
	field := "header " + wire.HeaderIdempotencyKey
	if len(vs) > 1 {
		return "", invalid(field, "given %d times", len(vs))
	}
	k := vs[0]
	if k == "" || len(k) > cluster.MaxIdempotencyKeyBytes {
		return "", invalid(field, "%d bytes, want 1 to %d", len(k), cluster.MaxIdempotencyKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", invalid(field, "byte %d is not printable ASCII", i)
		}
	}
	return k, nil
}

// refKeyJSON is the JSON of a latest ref key: the number, or null.
func refKeyJSON(ref int64, found bool) []byte {
	if !found {
		return []byte("null")
	}
	return []byte(strconv.FormatInt(ref, 10))
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

// writeBackend runs req and answers a refusal or an error itself (false); on true the caller
// answers the applied write.
func (s *Server) writeBackend(w http.ResponseWriter, r *http.Request, ds string, req cluster.WriteRequest, where string) (cluster.WriteResponse, bool) {
	res, err := s.backend.Write(r.Context(), ds, req)
	if err != nil {
		if errors.Is(err, cluster.ErrCrossPartition) {
			writeError(w, &httpError{status: http.StatusBadRequest, code: wire.CodeCrossPartition, field: where, msg: err.Error()})
			return res, false
		}
		if errors.Is(err, cluster.ErrBadWrite) {
			writeError(w, &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, msg: err.Error()})
			return res, false
		}
		s.fail(w, r, err)
		return res, false
	}
	if res.Replayed {
		w.Header().Set(wire.HeaderReplayed, "true")
	}
	keys := make([]cells.Key, len(req.Cells))
	for i, c := range req.Cells {
		keys[i] = c.Key
	}
	if he := refusal(&res, where, keys); he != nil {
		writeError(w, he)
		return res, false
	}
	return res, true
}

// ifLatest parses put_cell's if_latest_ref_key query parameter into a condition on k's column
// (nil: absent).
func ifLatest(r *http.Request, k cells.Key) (*cluster.Condition, *httpError) {
	q := r.URL.Query()
	vs, ok := q["if_latest_ref_key"]
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

// transaction serves POST /v1/{ds}/transactions: conditions and writes on rows of one
// partition, applied all or nothing (see wire.TransactionRequest and docs/api.md).
func (s *Server) transaction(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	key, he := idempotencyKey(r)
	if he != nil {
		writeError(w, he)
		return
	}
	raw, he := readBody(r, s.cfg.MaxRequestBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	conds, cs, he := decodeTransaction(raw, &s.cfg)
	if he != nil {
		writeError(w, he)
		return
	}
	req := cluster.WriteRequest{Atomic: true, IdempotencyKey: key, Cells: cs, Conditions: conds}
	s.hintLeader(w, ds, req.Cells[0].RowKey)
	res, ok := s.writeBackend(w, r, ds, req, "writes")
	if !ok {
		return
	}
	out := wire.TransactionResponse{Committed: true, Partition: res.Partition, Results: make([]wire.PutResult, len(req.Cells))}
	for i, c := range req.Cells {
		out.Results[i] = putResult(c.Key, res.Cells[i])
	}
	writeJSON(w, http.StatusOK, out)
}

// rowKeys answers GET /v1/{ds}/row_keys?near=ROW&count=N: N (default 1, at most
// MaxRowKeysNear) new random row keys in ROW's shard. A random key lands in a given shard with
// probability 1/shards, so each costs about shards hashes (4096: tens of microseconds).
func (s *Server) rowKeys(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	spec, err := s.backend.Datastore(ds)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	near, err := cells.ParseRowKey(q.Get("near"))
	if err != nil {
		writeError(w, invalid("near", "%v", err))
		return
	}
	count := 1
	if v := q.Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxRowKeysNear {
			writeError(w, invalid("count", "%q must be an integer from 1 to %d", v, MaxRowKeysNear))
			return
		}
		count = n
	}
	shard := cells.ShardOf(near, spec.Shards)
	out := wire.RowKeysResponse{Shard: shard, Partition: -1, RowKeys: make([]string, 0, count)}
	for _, p := range spec.Partitions {
		if p.Shards().Contains(shard) {
			out.Partition = p.ID
		}
	}
	for len(out.RowKeys) < count {
		if k := uuid.New(); cells.ShardOf(k, spec.Shards) == shard {
			out.RowKeys = append(out.RowKeys, k.String())
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// MaxRowKeysNear bounds the count of one row_keys request.
const MaxRowKeysNear = 100
