package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// LogRequest is a read of one shard's log (get_cells_for_shard).
type LogRequest struct {
	// Shard to read.
	Shard int
	// Location: the cells after this added_id are returned (0: from the start).
	Location int64
	// Time, when not zero, starts the read at the first cell created at or after it instead
	// of Location (location_type=timestamp).
	Time time.Time
	// ColumnKey, when set, keeps only the cells of that column, and the tombstones of erased
	// rows (wire.Cell.Erased), which a reader of any column must see.
	ColumnKey string
	// Limit bounds the cells returned; 0 lets the server choose (100).
	Limit int
	// Wait, when positive, long-polls: with no cell to return the server waits until one
	// arrives or Wait passes (at most the server's MaxWait, 30s by default).
	Wait time.Duration
	// StoredBodies asks for bodies in stored form (wire.Cell.Stored, see cells.Body) instead
	// of JSON: cheaper for both sides when the reader wants cells.Cell.
	StoredBodies bool
}

// ShardCells reads up to limit cells of shard after the added_id after, in added_id order
// (get_cells_for_shard). It is ReadLog without filters or waiting.
func (c *Client) ShardCells(ctx context.Context, shard int, after int64, limit int,
	opts ...ReadOption) (wire.ShardCellsResponse, error) {
	return c.ReadLog(ctx, LogRequest{Shard: shard, Location: after, Limit: limit}, opts...)
}

// ReadLog reads one shard's log (GET /v1/{ds}/shards/{shard}/cells): cells in added_id order,
// the location to read on from (NextLocation) and the shard's HighWater. It blocks up to
// req.Wait for a cell to arrive, retries as a read and fails like GetCell; ErrBadResponse for
// cells out of order, at or before the location, or more than the limit.
func (c *Client) ReadLog(ctx context.Context, req LogRequest, opts ...ReadOption) (wire.ShardCellsResponse, error) {
	const op = "get_cells_for_shard"
	if err := c.checkDatastore(op); err != nil {
		return wire.ShardCellsResponse{}, err
	}
	if err := checkLogRequest(op, req.Shard, req.Location, req.Limit, req.ColumnKey, req.Wait); err != nil {
		return wire.ShardCellsResponse{}, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.ShardCellsResponse{}, err
	}
	if req.Time.IsZero() {
		q.Set("location", strconv.FormatInt(req.Location, 10))
	} else {
		q.Set("location_type", "timestamp")
		q.Set("location", req.Time.UTC().Format(time.RFC3339Nano))
	}
	setLogQuery(q, req.ColumnKey, req.Limit, req.Wait)
	if req.StoredBodies {
		q.Set("body_encoding", wire.BodyStored)
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK}, extra: req.Wait,
		path: c.dsPath("shards", strconv.Itoa(req.Shard), "cells"),
	})
	if err != nil {
		return wire.ShardCellsResponse{}, err
	}
	var resp wire.ShardCellsResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.ShardCellsResponse{}, err
	}
	after := req.Location
	if !req.Time.IsZero() {
		after = -1
	}
	if err := checkPage(op, ans, &resp, after, req.Limit); err != nil {
		return wire.ShardCellsResponse{}, err
	}
	return resp, nil
}

// LogsRequest is a batch read of several shards' logs (POST /v1/{ds}/shards/cells).
type LogsRequest struct {
	// Shards and the location to read after in each.
	Shards []wire.ShardLocation
	// Time, ColumnKey, Limit (per shard), Wait and StoredBodies as in LogRequest. A long poll
	// answers as soon as any shard has cells.
	Time         time.Time
	ColumnKey    string
	Limit        int
	Wait         time.Duration
	StoredBodies bool
}

// ReadLogs reads several shards' logs in one call and returns one page per shard, in request
// order. It blocks up to req.Wait for a cell to arrive in any of them, retries as a read and
// fails like ReadLog.
func (c *Client) ReadLogs(ctx context.Context, req LogsRequest, opts ...ReadOption) (wire.ShardsCellsResponse, error) {
	const op = "get_cells_for_shards"
	if err := c.checkDatastore(op); err != nil {
		return wire.ShardsCellsResponse{}, err
	}
	for _, sl := range req.Shards {
		if err := checkLogRequest(op, sl.Shard, sl.Location, req.Limit, req.ColumnKey, req.Wait); err != nil {
			return wire.ShardsCellsResponse{}, err
		}
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.ShardsCellsResponse{}, err
	}
	in := wire.ShardsCellsRequest{Shards: req.Shards, ColumnKey: req.ColumnKey, Limit: req.Limit, Consistency: q.Get("consistency")}
	if req.Wait > 0 {
		in.Wait = req.Wait.String()
	}
	if req.StoredBodies {
		in.BodyEncoding = wire.BodyStored
	}
	if !req.Time.IsZero() {
		t := req.Time.UTC()
		in.LocationType, in.Time = "timestamp", &t
	}
	body, err := json.Marshal(in)
	if err != nil {
		return wire.ShardsCellsResponse{}, err
	}
	ans, err := c.do(ctx, &request{
		op: op, method: http.MethodPost, body: body, ok: []int{http.StatusOK}, extra: req.Wait,
		path: c.dsPath("shards", "cells"),
	})
	if err != nil {
		return wire.ShardsCellsResponse{}, err
	}
	var resp wire.ShardsCellsResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.ShardsCellsResponse{}, err
	}
	if len(resp.Shards) != len(req.Shards) {
		return wire.ShardsCellsResponse{}, badResponse(op, ans, "%d pages for %d shards", len(resp.Shards), len(req.Shards))
	}
	for i := range resp.Shards {
		if resp.Shards[i].Shard != req.Shards[i].Shard {
			return wire.ShardsCellsResponse{}, badResponse(op, ans, "page %d is of shard %d, want %d", i, resp.Shards[i].Shard, req.Shards[i].Shard)
		}
		after := req.Shards[i].Location
		if !req.Time.IsZero() {
			after = -1
		}
		if err := checkPage(op, ans, &resp.Shards[i], after, req.Limit); err != nil {
			return wire.ShardsCellsResponse{}, err
		}
	}
	return resp, nil
}

func checkLogRequest(op string, shard int, location int64, limit int, column string, wait time.Duration) error {
	switch {
	case shard < 0:
		return invalid(op, "", &cells.FieldError{Field: "shard", Err: errNegative})
	case location < 0:
		return invalid(op, "", &cells.FieldError{Field: "location", Err: errNegative})
	case limit < 0:
		return invalid(op, "", &cells.FieldError{Field: "limit", Err: errNegative})
	case wait < 0:
		return invalid(op, "", &cells.FieldError{Field: "wait", Err: errNegative})
	}
	if column != "" {
		if err := cells.ValidateColumnKey(column); err != nil {
			return invalid(op, "", err)
		}
	}
	return nil
}

func setLogQuery(q url.Values, column string, limit int, wait time.Duration) {
	if column != "" {
		q.Set("column_key", column)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
}

// checkPage checks one page of a log read: cells in increasing added_id order after after (-1:
// no bound), at most limit (when positive), and a next location not before the last cell.
func checkPage(op string, ans answer, p *wire.ShardCellsResponse, after int64, limit int) error {
	if limit > 0 && len(p.Cells) > limit {
		return badResponse(op, ans, "%d cells, limit %d", len(p.Cells), limit)
	}
	prev := after
	for i, cell := range p.Cells {
		if cell.AddedID <= prev {
			return badResponse(op, ans, "cells[%d].added_id %d after %d", i, cell.AddedID, prev)
		}
		prev = cell.AddedID
	}
	if p.NextLocation < prev {
		return badResponse(op, ans, "next_location %d before %d", p.NextLocation, prev)
	}
	if p.Cells == nil {
		p.Cells = []wire.Cell{}
	}
	return nil
}
