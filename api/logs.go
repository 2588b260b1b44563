package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// parseWait reads a long poll's wait: a Go duration ("500ms") or an integer of milliseconds,
// from 0 to MaxWait.
func (s *Server) parseWait(field, v string) (time.Duration, *httpError) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		ms, err2 := strconv.ParseInt(v, 10, 64)
		if err2 != nil {
			return 0, invalid(field, "%q is not a duration (\"500ms\", \"2s\") or a number of milliseconds", v)
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d < 0 || d > s.cfg.MaxWait {
		return 0, invalid(field, "%s must be between 0 and %s", d, s.cfg.MaxWait)
	}
	return d, nil
}

// parseLimit reads a per-shard limit in 1..MaxScanLimit, DefaultScanLimit when empty.
func (s *Server) parseLimit(field, v string) (int, *httpError) {
	if v == "" {
		return s.cfg.DefaultScanLimit, nil
	}
	l, err := strconv.Atoi(v)
	if err != nil || l < 1 || l > s.cfg.MaxScanLimit {
		return 0, invalid(field, "%q must be an integer in 1..%d", v, s.cfg.MaxScanLimit)
	}
	return l, nil
}

// parseColumnFilter checks a column key filter ("" keeps every column).
func parseColumnFilter(field, v string) *httpError {
	if v == "" {
		return nil
	}
	if err := cells.ValidateColumnKey(v); err != nil {
		var fe *cells.FieldError
		if errors.As(err, &fe) {
			err = fe.Err
		}
		return invalid(field, "%v", err)
	}
	return nil
}

// parseTime reads an RFC 3339 time or an integer of Unix milliseconds.
func parseTime(field, v string) (time.Time, *httpError) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, invalid(field, "%q is neither an RFC 3339 time nor Unix milliseconds", v)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// parseBodyEncoding reads a log read's body encoding: true for stored bodies.
func parseBodyEncoding(field, v string) (bool, *httpError) {
	switch v {
	case "", wire.BodyJSON:
		return false, nil
	case wire.BodyStored:
		return true, nil
	}
	return false, invalid(field, "%q must be json or stored", v)
}

func toShardPage(p cluster.LogPage, stored bool) (wire.ShardCellsResponse, error) {
	cs := make([]wire.Cell, len(p.Cells))
	for i, c := range p.Cells {
		if !stored {
			var err error
			if cs[i], err = toAPICell(c); err != nil {
				return wire.ShardCellsResponse{}, err
			}
			continue
		}
		cs[i] = wire.Cell{RowKey: c.RowKey.String(), ColumnKey: c.ColumnKey, RefKey: c.RefKey,
			Stored: c.Body, AddedID: c.AddedID, CreatedAt: c.CreatedAt.UTC(), Erased: c.Key.IsTombstone(), Origin: c.Origin}
	}
	return wire.ShardCellsResponse{Shard: p.Shard, Cells: cs, NextLocation: p.NextLocation, HighWater: p.HighWater}, nil
}

// shardCells serves get_cells_for_shard: GET /v1/{ds}/shards/{shard}/cells?location=&
// location_type=&column_key=&limit=&wait=&consistency=.
func (s *Server) shardCells(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	shards := q.spec.Shards
	shardText := r.PathValue("shard")
	shard, err := strconv.Atoi(shardText)
	if err != nil || shard < 0 || shard >= shards || shardText[0] < '0' || shardText[0] > '9' {
		return invalid("shard", "%q is not a shard of %s (0..%d)", shardText, q.ds, shards-1)
	}
	query := r.URL.Query()
	req := cluster.LogRead{LocationType: cluster.LocationAddedID}
	switch lt := query.Get("location_type"); lt {
	case "", cluster.LocationAddedID:
	case cluster.LocationTimestamp:
		req.LocationType = lt
	default:
		return invalid("location_type", "%q must be added_id or timestamp", lt)
	}
	var (
		loc int64
		he  *httpError
	)
	if v := query.Get("location"); v != "" {
		if req.LocationType == cluster.LocationTimestamp {
			req.Time, he = parseTime("location", v)
		} else {
			loc, he = parseRefKey("location", v)
		}
		if he != nil {
			return he
		}
	} else if req.LocationType == cluster.LocationTimestamp {
		return invalid("location", "a timestamp location is required with location_type=timestamp")
	}
	req.Shards = []cluster.ShardLocation{{Shard: shard, Location: loc}}
	if req.Limit, he = s.parseLimit("limit", query.Get("limit")); he != nil {
		return he
	}
	req.ColumnKey = query.Get("column_key")
	if he = parseColumnFilter("column_key", req.ColumnKey); he != nil {
		return he
	}
	if req.Wait, he = s.parseWait("wait", query.Get("wait")); he != nil {
		return he
	}
	if req.Consistency, he = consistency(r); he != nil {
		return he
	}
	stored, he := parseBodyEncoding("body_encoding", query.Get("body_encoding"))
	if he != nil {
		return he
	}
	pages, err := s.b.Logs.ReadLogs(r.Context(), q.ds, req)
	if err != nil {
		return err
	}
	out, err := toShardPage(pages[0], stored)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// shardsCells serves the batch form: POST /v1/{ds}/shards/cells.
func (s *Server) shardsCells(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{maxBody: s.cfg.MaxRequestBytes})
	if err != nil {
		return err
	}
	var in wire.ShardsCellsRequest
	if err := q.decode(&in, false); err != nil {
		return err
	}
	shards := q.spec.Shards
	if len(in.Shards) == 0 {
		return invalid("shards", "at least one shard is required")
	}
	if len(in.Shards) > shards {
		return tooLarge("shards", "%d shards, the datastore has %d", len(in.Shards), shards)
	}
	req := cluster.LogRead{LocationType: cluster.LocationAddedID}
	seen := make(map[int]bool, len(in.Shards))
	for i, sl := range in.Shards {
		if sl.Shard < 0 || sl.Shard >= shards {
			return invalid("shards["+strconv.Itoa(i)+"].shard", "%d is not a shard of %s (0..%d)", sl.Shard, q.ds, shards-1)
		}
		if seen[sl.Shard] {
			return invalid("shards["+strconv.Itoa(i)+"].shard", "shard %d is given twice", sl.Shard)
		}
		seen[sl.Shard] = true
		if sl.Location < 0 {
			return invalid("shards["+strconv.Itoa(i)+"].location", "%d is negative", sl.Location)
		}
		req.Shards = append(req.Shards, cluster.ShardLocation{Shard: sl.Shard, Location: sl.Location})
	}
	switch in.LocationType {
	case "", cluster.LocationAddedID:
	case cluster.LocationTimestamp:
		if in.Time == nil {
			return invalid("time", "required with location_type timestamp")
		}
		req.LocationType, req.Time = in.LocationType, in.Time.UTC()
	default:
		return invalid("location_type", "%q must be added_id or timestamp", in.LocationType)
	}
	req.Limit = s.cfg.DefaultScanLimit
	if in.Limit != 0 {
		if in.Limit < 1 || in.Limit > s.cfg.MaxScanLimit {
			return invalid("limit", "%d must be in 1..%d", in.Limit, s.cfg.MaxScanLimit)
		}
		req.Limit = in.Limit
	}
	req.ColumnKey = in.ColumnKey
	if he := parseColumnFilter("column_key", in.ColumnKey); he != nil {
		return he
	}
	var he *httpError
	if req.Wait, he = s.parseWait("wait", in.Wait); he != nil {
		return he
	}
	if req.Consistency, he = consistencyOf(in.Consistency, in.MaxStaleness); he != nil {
		return he
	}
	stored, he := parseBodyEncoding("body_encoding", in.BodyEncoding)
	if he != nil {
		return he
	}
	pages, err := s.b.Logs.ReadLogs(r.Context(), q.ds, req)
	if err != nil {
		return err
	}
	out := wire.ShardsCellsResponse{Shards: make([]wire.ShardCellsResponse, len(pages))}
	for i, p := range pages {
		if out.Shards[i], err = toShardPage(p, stored); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
