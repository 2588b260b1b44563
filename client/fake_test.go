package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// This file is a small in-memory double of the cluster's HTTP API (the routes of package api),
// enough to exercise the client: several fake nodes share one store, record the requests they
// get, and can be told to misbehave.

const (
	testDatastore = "trips"
	testShards    = 8
)

// fakeStore is the data of the fake cluster: one datastore of testShards shards.
type fakeStore struct {
	mu      sync.Mutex
	cells   map[cells.Key]*storedCell
	nextAdd int64 // added_id counter shared by all shards: increasing within each shard too
}

type storedCell struct {
	cell wire.Cell
	body cells.Body
}

func newFakeStore() *fakeStore { return &fakeStore{cells: map[cells.Key]*storedCell{}} }

// put stores a cell unless its key exists, and returns the status and the stored cell's added_id.
func (s *fakeStore) put(k cells.Key, text json.RawMessage, body cells.Body) (string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.cells[k]; ok {
		same, err := cells.SameBody(old.body, body)
		if err == nil && same {
			return wire.StatusExists, old.cell.AddedID
		}
		return wire.StatusConflict, old.cell.AddedID
	}
	s.nextAdd++
	s.cells[k] = &storedCell{
		cell: wire.Cell{RowKey: k.RowKey.String(), ColumnKey: k.ColumnKey, RefKey: k.RefKey,
			Body: append(json.RawMessage(nil), text...), AddedID: s.nextAdd,
			CreatedAt: time.Now().UTC().Truncate(time.Microsecond)},
		body: body,
	}
	return wire.StatusCreated, s.nextAdd
}

func (s *fakeStore) get(k cells.Key) (wire.Cell, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cells[k]
	if !ok {
		return wire.Cell{}, false
	}
	return c.cell, true
}

func (s *fakeStore) latest(row uuid.UUID, col string) (wire.Cell, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *storedCell
	for k, c := range s.cells {
		if k.RowKey == row && k.ColumnKey == col && (best == nil || k.RefKey > best.cell.RefKey) {
			best = c
		}
	}
	if best == nil {
		return wire.Cell{}, false
	}
	return best.cell, true
}

func (s *fakeStore) row(row uuid.UUID) []wire.Cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	latest := map[string]wire.Cell{}
	for k, c := range s.cells {
		if k.RowKey == row {
			if l, ok := latest[k.ColumnKey]; !ok || k.RefKey > l.RefKey {
				latest[k.ColumnKey] = c.cell
			}
		}
	}
	out := []wire.Cell{}
	for _, c := range latest {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ColumnKey < out[j].ColumnKey })
	return out
}

func (s *fakeStore) shard(shard int, after int64, limit int) []wire.Cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []wire.Cell{}
	for k, c := range s.cells {
		if cells.ShardOf(k.RowKey, testShards) == shard && c.cell.AddedID > after {
			out = append(out, c.cell)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AddedID < out[j].AddedID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// recorded is one request as a fake node saw it.
type recorded struct {
	Method, Path, RawQuery string
	Body                   []byte
	Header                 http.Header
}

// fakeNode is one node of the fake cluster.
type fakeNode struct {
	t     *testing.T
	store *fakeStore
	srv   *httptest.Server
	hits  atomic.Int64

	mu    sync.Mutex
	reqs  []recorded
	fault http.HandlerFunc // when set, answers every request instead of the API
}

// newFakeNode starts a node over store; it is closed when the test ends.
func newFakeNode(t *testing.T, store *fakeStore) *fakeNode {
	t.Helper()
	n := &fakeNode{t: t, store: store}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/{ds}/cells/{row}/{col}/{ref}", n.putCell)
	mux.HandleFunc("POST /v1/{ds}/cells", n.putCells)
	mux.HandleFunc("GET /v1/{ds}/cells/{row}/{col}/{ref}", n.getCell)
	mux.HandleFunc("GET /v1/{ds}/cells/{row}/{col}", n.getLatest)
	mux.HandleFunc("GET /v1/{ds}/cells/{row}", n.getRow)
	mux.HandleFunc("POST /v1/{ds}/cells/get", n.getCells)
	mux.HandleFunc("GET /v1/{ds}/shards/{shard}/cells", n.shardCells)
	mux.HandleFunc("GET /v1/cluster", n.cluster)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ready")) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no route "+r.URL.Path, "")
	})
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		n.mu.Lock()
		n.reqs = append(n.reqs, recorded{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
			Body: body, Header: r.Header.Clone()})
		fault := n.fault
		n.mu.Unlock()
		if fault != nil {
			fault(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *fakeNode) URL() string { return n.srv.URL }

func (n *fakeNode) setFault(f http.HandlerFunc) {
	n.mu.Lock()
	n.fault = f
	n.mu.Unlock()
}

func (n *fakeNode) requests() []recorded {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]recorded(nil), n.reqs...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg, field string) {
	writeJSON(w, status, wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg, Field: field}})
}

// fieldError answers 400 for a validation error of the cells package, with prefix before its field.
func fieldError(w http.ResponseWriter, prefix string, err error) {
	var fe *cells.FieldError
	field := ""
	if errors.As(err, &fe) {
		field = prefix + fe.Field
	}
	writeError(w, http.StatusBadRequest, wire.CodeInvalidArgument, err.Error(), field)
}

// checkDatastore answers 404 for an unknown datastore and reports whether ds is known.
func checkDatastore(w http.ResponseWriter, r *http.Request) bool {
	if ds := r.PathValue("ds"); ds != testDatastore {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no datastore "+ds, "")
		return false
	}
	return true
}

// checkConsistency answers 400 for a consistency other than strong, stale or none.
func checkConsistency(w http.ResponseWriter, r *http.Request) bool {
	switch r.URL.Query().Get("consistency") {
	case "", "strong", "stale":
		return true
	}
	writeError(w, http.StatusBadRequest, wire.CodeInvalidArgument, "bad consistency", "consistency")
	return false
}

// parseKey parses the key of a path; ref is "" for the latest cell.
func parseKey(row, col, ref string) (cells.Key, error) {
	rk, err := cells.ParseRowKey(row)
	if err != nil {
		return cells.Key{}, err
	}
	k := cells.Key{RowKey: rk, ColumnKey: col}
	if ref != "" {
		v, err := strconv.ParseInt(ref, 10, 64)
		if err != nil || v < 0 {
			return cells.Key{}, &cells.FieldError{Field: "ref_key", Err: cells.ErrInvalidRefKey}
		}
		k.RefKey = v
	}
	if err := cells.ValidateColumnKey(col); err != nil {
		return cells.Key{}, err
	}
	return k, nil
}

func (n *fakeNode) putCell(w http.ResponseWriter, r *http.Request) {
	if !checkDatastore(w, r) {
		return
	}
	k, err := parseKey(r.PathValue("row"), r.PathValue("col"), r.PathValue("ref"))
	if err != nil {
		fieldError(w, "", err)
		return
	}
	text, _ := io.ReadAll(r.Body)
	body, err := cells.EncodeBody(text)
	if err != nil {
		fieldError(w, "", err)
		return
	}
	status, added := n.store.put(k, text, body)
	res := wire.PutResult{RowKey: k.RowKey.String(), ColumnKey: k.ColumnKey, RefKey: k.RefKey, Status: status, AddedID: added}
	switch status {
	case wire.StatusCreated:
		writeJSON(w, http.StatusCreated, res)
	case wire.StatusExists:
		writeJSON(w, http.StatusOK, res)
	default:
		writeError(w, http.StatusConflict, wire.CodeConflict, "cell "+k.String()+" holds another body", "")
	}
}

func (n *fakeNode) putCells(w http.ResponseWriter, r *http.Request) {
	if !checkDatastore(w, r) {
		return
	}
	var req wire.PutCellsRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalidArgument, err.Error(), "")
		return
	}
	type parsed struct {
		k    cells.Key
		text json.RawMessage
		body cells.Body
	}
	ps := make([]parsed, len(req.Cells))
	for i, c := range req.Cells {
		prefix := "cells[" + strconv.Itoa(i) + "]."
		k, err := parseKey(c.RowKey, c.ColumnKey, c.RefKey.String())
		if err != nil {
			fieldError(w, prefix, err)
			return
		}
		body, err := cells.EncodeBody(c.Body)
		if err != nil {
			fieldError(w, prefix, err)
			return
		}
		ps[i] = parsed{k, c.Body, body}
	}
	resp := wire.PutCellsResponse{Results: make([]wire.PutResult, len(ps))}
	for i, p := range ps {
		status, added := n.store.put(p.k, p.text, p.body)
		resp.Results[i] = wire.PutResult{RowKey: p.k.RowKey.String(), ColumnKey: p.k.ColumnKey,
			RefKey: p.k.RefKey, Status: status, AddedID: added}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (n *fakeNode) getCell(w http.ResponseWriter, r *http.Request) {
	if !checkDatastore(w, r) || !checkConsistency(w, r) {
		return
	}
	k, err := parseKey(r.PathValue("row"), r.PathValue("col"), r.PathValue("ref"))
	if err != nil {
		fieldError(w, "", err)
		return
	}
	c, ok := n.store.get(k)
	if !ok {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no cell "+k.String(), "")
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (n *fakeNode) getLatest(w http.ResponseWriter, r *http.Request) {
	if !checkDatastore(w, r) || !checkConsistency(w, r) {
		return
	}
	k, err := parseKey(r.PathValue("row"), r.PathValue("col"), "")
	if err != nil {
		fieldError(w, "", err)
		return
	}
	c, ok := n.store.latest(k.RowKey, k.ColumnKey)
	if !ok {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no cell", "")
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (n *fakeNode) getRow(w http.ResponseWriter, r *http.Request) {
	if !checkDatastore(w, r) || !checkConsistency(w, r) {
		return
	}
	row, err := cells.ParseRowKey(r.PathValue("row"))
	if err != nil {
		fieldError(w, "", err)
		return
	}
	writeJSON(w, http.StatusOK, wire.CellsResponse{Cells: n.store.row(row)})
}

func (n *fakeNode) getCells(w http.ResponseWriter, r *http.Request) {
	if !checkDatastore(w, r) || !checkConsistency(w, r) {
		return
	}
	var req wire.GetCellsRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalidArgument, err.Error(), "")
		return
	}
	resp := wire.GetCellsResponse{Cells: []wire.Cell{}, Missing: []wire.GetKey{}}
	for i, gk := range req.Keys {
		ref := ""
		if gk.RefKey != nil {
			ref = gk.RefKey.String()
		}
		k, err := parseKey(gk.RowKey, gk.ColumnKey, ref)
		if err != nil {
			fieldError(w, "keys["+strconv.Itoa(i)+"].", err)
			return
		}
		var c wire.Cell
		var ok bool
		if gk.RefKey == nil {
			c, ok = n.store.latest(k.RowKey, k.ColumnKey)
		} else {
			c, ok = n.store.get(k)
		}
		if ok {
			resp.Cells = append(resp.Cells, c)
		} else {
			resp.Missing = append(resp.Missing, gk)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (n *fakeNode) shardCells(w http.ResponseWriter, r *http.Request) {
	if !checkDatastore(w, r) || !checkConsistency(w, r) {
		return
	}
	shard, err := strconv.Atoi(r.PathValue("shard"))
	if err != nil || shard < 0 || shard >= testShards {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no shard", "")
		return
	}
	q := r.URL.Query()
	after, err := strconv.ParseInt(q.Get("location"), 10, 64)
	if q.Get("location") == "" {
		after, err = 0, nil
	}
	if err != nil || after < 0 {
		writeError(w, http.StatusBadRequest, wire.CodeInvalidArgument, "bad location", "location")
		return
	}
	limit := 100
	if s := q.Get("limit"); s != "" {
		limit, err = strconv.Atoi(s)
		if err != nil || limit <= 0 {
			writeError(w, http.StatusBadRequest, wire.CodeInvalidArgument, "bad limit", "limit")
			return
		}
	}
	cs := n.store.shard(shard, after, limit)
	next := after
	if len(cs) > 0 {
		next = cs[len(cs)-1].AddedID
	}
	writeJSON(w, http.StatusOK, wire.ShardCellsResponse{Cells: cs, NextLocation: next})
}

func (n *fakeNode) cluster(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.ClusterStatus{
		Node:  n.srv.URL,
		Nodes: []wire.NodeStatus{{ID: "n1", HTTPAddr: n.srv.Listener.Addr().String()}},
		Datastores: []wire.DatastoreStatus{{Name: testDatastore, Mode: "raft", Shards: testShards,
			Partitions: []wire.PartitionStatus{{ID: 0, FirstShard: 0, LastShard: testShards - 1}}}},
	})
}
