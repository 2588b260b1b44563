package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// The reads of cells (CellReader): get_cell, get_cell_latest, the row read, the versions of a
// column and the batch get.

// Response headers of leader routing (see LeaderHinter and package client).
const (
	// HeaderShards carries the datastore's shard count.
	HeaderShards = "Schemaless-Shards"
	// HeaderLeader carries the HTTP base URL of the leader of the request's row's partition.
	HeaderLeader = "Schemaless-Leader"
)

// hintLeader sets HeaderShards and HeaderLeader on a single-row write or strong read, so that
// a client can send the row's next such request straight to its partition's leader instead
// of having it forwarded. Headers only; the request is served wherever it arrives. Without a
// LeaderHinter it sets none.
func (s *Server) hintLeader(w http.ResponseWriter, ds string, row uuid.UUID) {
	if s.b.Leader == nil {
		return
	}
	shards, url := s.b.Leader.LeaderHint(ds, row)
	if shards <= 0 {
		return
	}
	w.Header().Set(HeaderShards, strconv.Itoa(shards))
	if url != "" {
		w.Header().Set(HeaderLeader, url)
	}
}

func toAPICell(c cells.Cell) (wire.Cell, error) {
	body, err := c.Body.JSON()
	if err != nil {
		return wire.Cell{}, fmt.Errorf("api: cell %s: %w", c.Key, err)
	}
	return wire.Cell{
		RowKey: c.RowKey.String(), ColumnKey: c.ColumnKey, RefKey: c.RefKey,
		Body: body, AddedID: c.AddedID, CreatedAt: c.CreatedAt.UTC(), Erased: c.Key.IsTombstone(), Origin: c.Origin,
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

func (s *Server) getCell(w http.ResponseWriter, r *http.Request) error { return s.getOne(w, r, false) }

func (s *Server) getCellLatest(w http.ResponseWriter, r *http.Request) error {
	return s.getOne(w, r, true)
}

// getOne serves get_cell and get_cell_latest.
func (s *Server) getOne(w http.ResponseWriter, r *http.Request, latest bool) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	var ref *string
	if !latest {
		v := r.PathValue("ref")
		ref = &v
	}
	k, he := parseKey("", r.PathValue("row"), r.PathValue("col"), ref)
	if he != nil {
		return he
	}
	c, he := s.rowConsistency(w, r, q.ds, k.RowKey)
	if he != nil {
		return he
	}
	res, err := s.b.Reads.GetCells(r.Context(), q.ds, []cluster.GetKey{{Key: k, Latest: latest}}, c)
	if err != nil {
		return err
	}
	if !res[0].Found {
		what := "cell " + k.String()
		if latest {
			what = "no cell in " + k.RowKey.String() + "/" + k.ColumnKey
		}
		return notFound("%s", what)
	}
	out, err := toAPICell(res[0].Cell)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// rowConsistency reads the consistency parameter of a read of one row and sets the leader hint
// of a strong read (see hintLeader).
func (s *Server) rowConsistency(w http.ResponseWriter, r *http.Request, ds string, rowKey uuid.UUID) (cluster.Consistency, *httpError) {
	c, he := consistency(r)
	if he != nil {
		return "", he
	}
	if c == cluster.Strong {
		s.hintLeader(w, ds, rowKey)
	}
	return c, nil
}

func (s *Server) getRow(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	rk, err := cells.ParseRowKey(r.PathValue("row"))
	if err != nil {
		return fieldError("", err)
	}
	c, he := consistency(r)
	if he != nil {
		return he
	}
	cs, err := s.b.Reads.GetRow(r.Context(), q.ds, rk, c)
	if err != nil {
		return err
	}
	out, err := toAPICells(cs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.CellsResponse{Cells: out})
	return nil
}

// getVersions answers GET /v1/{ds}/cells/{row}/{col}/versions?from_ref_key=&limit=&order=: a
// page of the column's cells in ref key order (asc, the default, or desc) from from_ref_key
// (inclusive; absent: the first in that order), at most limit (default DefaultScanLimit, at
// most MaxScanLimit), with next_ref_key for the next page. An unknown column answers an empty
// page, not 404: a column has no existence apart from its cells.
func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	k, he := parseKey("", r.PathValue("row"), r.PathValue("col"), nil)
	if he != nil {
		return he
	}
	query := r.URL.Query()
	var from *int64
	if v := query.Get("from_ref_key"); v != "" {
		f, he := parseRefKey("from_ref_key", v)
		if he != nil {
			return he
		}
		from = &f
	}
	limit, he := s.parseLimit("limit", query.Get("limit"))
	if he != nil {
		return he
	}
	desc := false
	switch o := query.Get("order"); o {
	case "", "asc":
	case "desc":
		desc = true
	default:
		return invalid("order", "%q must be asc or desc", o)
	}
	c, he := s.rowConsistency(w, r, q.ds, k.RowKey)
	if he != nil {
		return he
	}
	// One more than the page: the extra cell's ref key is where the next page starts.
	cs, err := s.b.Reads.GetVersions(r.Context(), q.ds, k.RowKey, k.ColumnKey, from, limit+1, desc, c)
	if err != nil {
		return err
	}
	var next *int64
	if len(cs) > limit {
		n := cs[limit].RefKey
		next, cs = &n, cs[:limit]
	}
	out, err := toAPICells(cs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.VersionsResponse{Cells: out, NextRefKey: next})
	return nil
}

// getCells serves the batch get: POST /v1/{ds}/cells/get.
func (s *Server) getCells(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{maxBody: s.cfg.MaxRequestBytes})
	if err != nil {
		return err
	}
	c, he := consistency(r)
	if he != nil {
		return he
	}
	raw, err := q.body()
	if err != nil {
		return err
	}
	keys, given, he := decodeGetCells(raw, &s.cfg)
	if he != nil {
		return he
	}
	res, err := s.b.Reads.GetCells(r.Context(), q.ds, keys, c)
	if err != nil {
		return err
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
			return err
		}
		out.Cells = append(out.Cells, ac)
	}
	slices.SortFunc(out.Snapshots, func(a, b wire.Snapshot) int { return a.Partition - b.Partition })
	writeJSON(w, http.StatusOK, out)
	return nil
}
