package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// fail logs internal errors and writes the answer.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := backendError(err)
	if e.status >= 500 && e.status != http.StatusServiceUnavailable && e.status != http.StatusGatewayTimeout {
		s.cfg.Logger.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	writeError(w, e)
}

// datastore checks the {ds} path value names a datastore.
func (s *Server) datastore(r *http.Request) (string, *httpError) {
	ds := r.PathValue("ds")
	if _, err := s.backend.Datastore(ds); err != nil {
		return "", notFound("unknown datastore %q", ds)
	}
	return ds, nil
}

func parseRefKey(field, s string) (int64, *httpError) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, invalid(field, "%q is not a non-negative integer", s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalid(field, "%q is not a non-negative 64-bit integer", s)
	}
	return v, nil
}

// parseKey validates row key, column key and, when ref != nil, ref key from their text forms.
func parseKey(where, row, col string, ref *string) (cells.Key, *httpError) {
	var k cells.Key
	rk, err := cells.ParseRowKey(row)
	if err != nil {
		return k, fieldError(where, err)
	}
	if err := cells.ValidateColumnKey(col); err != nil {
		return k, fieldError(where, err)
	}
	k.RowKey, k.ColumnKey = rk, col
	if ref != nil {
		field := "ref_key"
		if where != "" {
			field = where + ".ref_key"
		}
		v, he := parseRefKey(field, *ref)
		if he != nil {
			return k, he
		}
		k.RefKey = v
	}
	return k, nil
}

func consistency(r *http.Request) (cluster.Consistency, *httpError) {
	switch c := r.URL.Query().Get("consistency"); c {
	case "", string(cluster.Strong):
		return cluster.Strong, nil
	case string(cluster.Stale):
		return cluster.Stale, nil
	default:
		return "", invalid("consistency", "%q must be strong or stale", c)
	}
}

// readBody reads a JSON request body of at most limit bytes: a declared Content-Length over the
// limit is a 413 naming field at once (nothing read), more bytes than the limit a 413 after
// reading limit+1, and a body that is not valid UTF-8 a 400 naming field.
func readBody(r *http.Request, limit int64, field string) ([]byte, *httpError) {
	if he := tooLargeDeclared(r, limit, field); he != nil {
		return nil, he
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, invalid(field, "reading the request body: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(field, "larger than %d bytes", limit)
	}
	if he := checkUTF8(field, b); he != nil {
		return nil, he
	}
	return b, nil
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and trailing data.
func decodeStrict(b []byte, v any) *httpError {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return invalid(ute.Field, "has type %s, want %s", ute.Value, ute.Type)
		}
		return invalid("body", "%v", err)
	}
	if dec.More() {
		return invalid("body", "data after the JSON value")
	}
	return nil
}

func toAPICell(c cells.Cell) (wire.Cell, error) {
	body, err := c.Body.JSON()
	if err != nil {
		return wire.Cell{}, fmt.Errorf("api: cell %s: %w", c.Key, err)
	}
	return wire.Cell{
		RowKey: c.RowKey.String(), ColumnKey: c.ColumnKey, RefKey: c.RefKey,
		Body: body, AddedID: c.AddedID, CreatedAt: c.CreatedAt.UTC(), Erased: c.Key.IsTombstone(),
	}, nil
}

func toAPICells(cs []cells.Cell) ([]wire.Cell, error) {
	out := make([]wire.Cell, len(cs))
	for i, c := range cs {
		var err error
		if out[i], err = toAPICell(c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func putResult(k cells.Key, r cells.Result) wire.PutResult {
	return wire.PutResult{RowKey: k.RowKey.String(), ColumnKey: k.ColumnKey, RefKey: k.RefKey, Status: r.Status.String(), AddedID: r.AddedID}
}

func (s *Server) putCell(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	ref := r.PathValue("ref")
	k, he := parseKey("", r.PathValue("row"), r.PathValue("col"), &ref)
	if he != nil {
		writeError(w, he)
		return
	}
	text, he := readBody(r, s.cfg.MaxCellBodyBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	body, err := cells.EncodeBody(text)
	if err != nil {
		writeError(w, fieldError("", err))
		return
	}
	key, he := idempotencyKey(r)
	if he != nil {
		writeError(w, he)
		return
	}
	cond, he := ifLatest(r, k)
	if he != nil {
		writeError(w, he)
		return
	}
	req := cluster.WriteRequest{Cells: []cells.Cell{{Key: k, Body: body}}, IdempotencyKey: key}
	if cond != nil {
		req.Conditions = []cluster.Condition{*cond}
	}
	s.hintLeader(w, ds, k.RowKey)
	wr, ok := s.writeBackend(w, r, ds, req, "")
	if !ok {
		return
	}
	res := wr.Cells
	out := putResult(k, res[0])
	switch res[0].Status {
	case cells.StatusCreated:
		writeJSON(w, http.StatusCreated, out)
	case cells.StatusExists:
		writeJSON(w, http.StatusOK, out)
	case cells.StatusBuffered:
		writeJSON(w, http.StatusAccepted, out)
	default:
		writeError(w, &httpError{status: http.StatusConflict, code: wire.CodeConflict,
			msg: fmt.Sprintf("cell %s exists with another body (added_id %d); cells are immutable, write a higher ref_key", k, res[0].AddedID)})
	}
}

func (s *Server) putCells(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	raw, he := readBody(r, s.cfg.MaxRequestBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	cs, he := decodePutCells(raw, &s.cfg)
	if he != nil {
		writeError(w, he)
		return
	}
	key, he := idempotencyKey(r)
	if he != nil {
		writeError(w, he)
		return
	}
	wr, ok := s.writeBackend(w, r, ds, cluster.WriteRequest{Cells: cs, IdempotencyKey: key}, "cells")
	if !ok {
		return
	}
	res := wr.Cells
	out := wire.PutCellsResponse{Results: make([]wire.PutResult, len(cs))}
	for i, c := range cs {
		out.Results[i] = putResult(c.Key, res[i])
	}
	writeJSON(w, http.StatusOK, out)
}

// getOne serves get_cell and get_cell_latest.
func (s *Server) getOne(w http.ResponseWriter, r *http.Request, latest bool) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	var ref *string
	if !latest {
		v := r.PathValue("ref")
		ref = &v
	}
	k, he := parseKey("", r.PathValue("row"), r.PathValue("col"), ref)
	if he != nil {
		writeError(w, he)
		return
	}
	c, ok := s.rowConsistency(w, r, ds, k.RowKey)
	if !ok {
		return
	}
	res, err := s.backend.GetCells(r.Context(), ds, []cluster.GetKey{{Key: k, Latest: latest}}, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !res[0].Found {
		what := "cell " + k.String()
		if latest {
			what = "no cell in " + k.RowKey.String() + "/" + k.ColumnKey
		}
		writeError(w, notFound("%s", what))
		return
	}
	out, err := toAPICell(res[0].Cell)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// Response headers of leader routing (see LeaderHinter and package client).
const (
	// HeaderShards carries the datastore's shard count.
	HeaderShards = "Schemaless-Shards"
	// HeaderLeader carries the HTTP base URL of the leader of the request's row's partition.
	HeaderLeader = "Schemaless-Leader"
)

// LeaderHinter is implemented by a Backend that can tell where a row's leader-only requests
// are best sent (cluster.Node does).
type LeaderHinter interface {
	LeaderHint(ds string, rowKey uuid.UUID) (shards int, url string)
}

// hintLeader sets HeaderShards and HeaderLeader on a single-row write or strong read, so that
// a client can send the row's next such request straight to its partition's leader instead
// of having it forwarded. Headers only; the request is served wherever it arrives.
func (s *Server) hintLeader(w http.ResponseWriter, ds string, row uuid.UUID) {
	h, ok := s.backend.(LeaderHinter)
	if !ok {
		return
	}
	shards, url := h.LeaderHint(ds, row)
	if shards <= 0 {
		return
	}
	w.Header().Set(HeaderShards, strconv.Itoa(shards))
	if url != "" {
		w.Header().Set(HeaderLeader, url)
	}
}

func (s *Server) getCell(w http.ResponseWriter, r *http.Request)       { s.getOne(w, r, false) }
func (s *Server) getCellLatest(w http.ResponseWriter, r *http.Request) { s.getOne(w, r, true) }

func (s *Server) getRow(w http.ResponseWriter, r *http.Request) {
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
	c, he := consistency(r)
	if he != nil {
		writeError(w, he)
		return
	}
	cs, err := s.backend.GetRow(r.Context(), ds, rk, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := toAPICells(cs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.CellsResponse{Cells: out})
}

// rowConsistency reads the consistency parameter of a read of one row, answering 400 when it is
// bad (ok false), and sets the leader hint of a strong read (see hintLeader).
func (s *Server) rowConsistency(w http.ResponseWriter, r *http.Request, ds string, rowKey uuid.UUID) (c cluster.Consistency, ok bool) {
	c, he := consistency(r)
	if he != nil {
		writeError(w, he)
		return "", false
	}
	if c == cluster.Strong {
		s.hintLeader(w, ds, rowKey)
	}
	return c, true
}

// getVersions answers GET /v1/{ds}/cells/{row}/{col}/versions?from_ref_key=&limit=&order=: a
// page of the column's cells in ref key order (asc, the default, or desc) from from_ref_key
// (inclusive; absent: the first in that order), at most limit (default DefaultScanLimit, at
// most MaxScanLimit), with next_ref_key for the next page. An unknown column answers an empty
// page, not 404: a column has no existence apart from its cells.
func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	k, he := parseKey("", r.PathValue("row"), r.PathValue("col"), nil)
	if he != nil {
		writeError(w, he)
		return
	}
	q := r.URL.Query()
	var from *int64
	if v := q.Get("from_ref_key"); v != "" {
		f, he := parseRefKey("from_ref_key", v)
		if he != nil {
			writeError(w, he)
			return
		}
		from = &f
	}
	limit, he := s.parseLimit("limit", q.Get("limit"))
	if he != nil {
		writeError(w, he)
		return
	}
	desc := false
	switch o := q.Get("order"); o {
	case "", "asc":
	case "desc":
		desc = true
	default:
		writeError(w, invalid("order", "%q must be asc or desc", o))
		return
	}
	c, ok := s.rowConsistency(w, r, ds, k.RowKey)
	if !ok {
		return
	}
	// One more than the page: the extra cell's ref key is where the next page starts.
	cs, err := s.backend.GetVersions(r.Context(), ds, k.RowKey, k.ColumnKey, from, limit+1, desc, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var next *int64
	if len(cs) > limit {
		n := cs[limit].RefKey
		next, cs = &n, cs[:limit]
	}
	out, err := toAPICells(cs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.VersionsResponse{Cells: out, NextRefKey: next})
}

func (s *Server) getCells(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	c, he := consistency(r)
	if he != nil {
		writeError(w, he)
		return
	}
	raw, he := readBody(r, s.cfg.MaxRequestBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	keys, given, he := decodeGetCells(raw, &s.cfg)
	if he != nil {
		writeError(w, he)
		return
	}
	res, err := s.backend.GetCells(r.Context(), ds, keys, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.GetCellsResponse{Cells: []wire.Cell{}, Missing: []wire.GetKey{}, Snapshots: []wire.Snapshot{}}
	seen := map[int]bool{}
	for i, rr := range res {
		if !seen[rr.Partition] {
			seen[rr.Partition] = true
			out.Snapshots = append(out.Snapshots, wire.Snapshot{Partition: rr.Partition, AppliedIndex: rr.AppliedIndex})
		}
		if !rr.Found {
			out.Missing = append(out.Missing, given[i])
			continue
		}
		ac, err := toAPICell(rr.Cell)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Cells = append(out.Cells, ac)
	}
	slices.SortFunc(out.Snapshots, func(a, b wire.Snapshot) int { return a.Partition - b.Partition })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "node": s.backend.ID()})
}

// readyz answers the node's readiness, with each datastore's, or, with ?datastore=NAME, that
// datastore's alone (see docs/api.md).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("datastore") {
		s.datastoreReadyz(w, q.Get("datastore"))
		return
	}
	all := map[string]wire.DatastoreReadiness{}
	for _, d := range s.backend.Topology().Datastores {
		dr := wire.DatastoreReadiness{Ready: true}
		if err := s.backend.DatastoreReady(d.Name); err != nil {
			dr = wire.DatastoreReadiness{Error: err.Error()}
		}
		all[d.Name] = dr
	}
	if err := s.backend.Ready(); err != nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, wire.NotReady{Error: wire.ErrorDetail{Code: wire.CodeUnavailable, Message: "not ready: " + err.Error()},
			Datastores: all})
		return
	}
	writeJSON(w, http.StatusOK, wire.Readiness{Status: "ready", Node: s.backend.ID(), Datastores: all})
}

func (s *Server) datastoreReadyz(w http.ResponseWriter, name string) {
	err := s.backend.DatastoreReady(name)
	switch {
	case errors.Is(err, cluster.ErrUnknownDatastore):
		writeError(w, &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, field: "datastore", msg: fmt.Sprintf("datastore: unknown datastore %q", name)})
	case err != nil:
		writeError(w, &httpError{status: http.StatusServiceUnavailable, code: wire.CodeUnavailable, msg: "not ready: " + err.Error()})
	default:
		writeJSON(w, http.StatusOK, wire.Readiness{Status: "ready", Node: s.backend.ID(), Datastore: name})
	}
}

func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) {
	t := s.backend.Topology()
	out := wire.ClusterStatus{Node: s.backend.ID()}
	for _, n := range t.Nodes {
		out.Nodes = append(out.Nodes, wire.NodeStatus{ID: n.ID, HTTPAddr: n.HTTPAddr, RaftAddr: n.RaftAddr})
	}
	reps := map[string]map[int]cluster.ReplicaStatus{}
	for _, rs := range s.backend.Replicas() {
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
}
