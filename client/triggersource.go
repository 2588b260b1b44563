package client

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/triggers"
	"github.com/schemaless-db/schemaless/wire"
)

// TriggerSource is the triggers.Source of a worker that reaches the cluster over the HTTP API:
// log reads are get_cells_for_shards (ReadLogs) with stored bodies, single cells GetCell, group
// commands GroupCommand (POST /v1/{ds}/groups/{group}/{op}). Calls are retried and failed over
// as every call of the Client is. It is bound to the datastore of the Client it came from and is
// safe for concurrent use. Get one with Client.TriggerSource.
type TriggerSource struct {
	c *Client
}

var _ triggers.Source = (*TriggerSource)(nil)

// TriggerSource returns the triggers.Source of c's datastore (c's Config.Datastore must be set;
// use WithDatastore for another one), for triggers.Config.Source:
//
//	err := triggers.Run(ctx, triggers.Config{Source: cl.TriggerSource(), Group: "billing"}, handle)
//
// It does no I/O.
func (c *Client) TriggerSource() *TriggerSource { return &TriggerSource{c: c} }

// ReadLogs reads req with Client.ReadLogs, asking for stored bodies, at req.Consistency.
// Errors: the client's, and a cell of the answer that does not decode.
func (s *TriggerSource) ReadLogs(ctx context.Context, req triggers.LogRead) ([]triggers.Page, error) {
	in := LogsRequest{Time: req.Time, ColumnKey: req.ColumnKey, Limit: req.Limit, Wait: req.Wait, StoredBodies: true}
	for _, sl := range req.Shards {
		in.Shards = append(in.Shards, wire.ShardLocation{Shard: sl.Shard, Location: sl.Location})
	}
	resp, err := s.c.ReadLogs(ctx, in, WithConsistency(req.Consistency))
	if err != nil {
		return nil, err
	}
	out := make([]triggers.Page, len(resp.Shards))
	for i, p := range resp.Shards {
		out[i] = triggers.Page{Shard: p.Shard, Cells: make([]cells.Cell, 0, len(p.Cells)), NextLocation: p.NextLocation, HighWater: p.HighWater}
		for _, wc := range p.Cells {
			c, err := triggerCell(wc)
			if err != nil {
				return nil, fmt.Errorf("client: shard %d: added_id %d: %w", p.Shard, wc.AddedID, err)
			}
			out[i].Cells = append(out[i].Cells, c)
		}
	}
	return out, nil
}

// GetCell reads the cell at key with Client.GetCell at consistency (ErrNotFound when it is
// missing).
func (s *TriggerSource) GetCell(ctx context.Context, key cells.Key, consistency string) (cells.Cell, error) {
	wc, err := s.c.GetCell(ctx, key, WithConsistency(consistency))
	if err != nil {
		return cells.Cell{}, err
	}
	return triggerCell(wc)
}

// GroupCommand runs cmd with Client.GroupCommand (op cmd.Op, fields in their wire form). A
// parked cell of the result whose row key is not a UUID is left out.
func (s *TriggerSource) GroupCommand(ctx context.Context, group string, cmd consumer.Command) (consumer.Result, error) {
	res, err := s.c.GroupCommand(ctx, group, string(cmd.Op), toWireCommand(cmd))
	if err != nil {
		return consumer.Result{}, err
	}
	return fromWireResult(res), nil
}

// toWireCommand is cmd in the API's form (consumer.Command.Shards is the server's to set).
func toWireCommand(cmd consumer.Command) wire.GroupCommand {
	out := wire.GroupCommand{Worker: cmd.Worker, HaltThreshold: cmd.HaltThreshold, Released: cmd.Released,
		Epoch: cmd.Epoch, IDs: cmd.IDs, All: cmd.All}
	if cmd.SessionTimeout > 0 {
		out.SessionTimeout = cmd.SessionTimeout.String()
	}
	if cmd.Start.Kind != "" {
		out.Start = &wire.GroupStart{Kind: string(cmd.Start.Kind)}
		if !cmd.Start.Time.IsZero() {
			t := cmd.Start.Time.UTC()
			out.Start.Time = &t
		}
	}
	for _, c := range cmd.Commits {
		out.Commits = append(out.Commits, wire.GroupOffset{Shard: c.Shard, Epoch: c.Epoch, Offset: c.Offset})
	}
	if p := cmd.Park; p != nil {
		out.Park = &wire.GroupParked{ID: p.ID, Shard: p.Shard, AddedID: p.AddedID, RowKey: p.RowKey.String(),
			ColumnKey: p.ColumnKey, RefKey: p.RefKey, Error: p.Error, Attempts: p.Attempts}
	}
	return out
}

// fromWireResult is the API's answer to a group command as a consumer.Result.
func fromWireResult(r wire.GroupResult) consumer.Result {
	out := consumer.Result{Generation: r.Generation, Revoke: r.Revoke, Halted: r.Halted, Parked: r.Parked,
		Accepted: r.Accepted, Fenced: r.Fenced, Affected: r.Affected}
	for _, m := range r.Members {
		out.Members = append(out.Members, consumer.Member{ID: m.ID, Expires: m.Expires, Shards: m.Shards})
	}
	for _, l := range r.Assigned {
		out.Assigned = append(out.Assigned, consumer.Lease{Shard: l.Shard, Owner: l.Owner, Epoch: l.Epoch, Offset: l.Offset})
	}
	if r.SessionExpires != nil {
		out.SessionExpires = *r.SessionExpires
	}
	for _, p := range r.Retry {
		rk, err := uuid.Parse(p.RowKey)
		if err != nil {
			continue
		}
		out.Retry = append(out.Retry, consumer.ParkedCell{ID: p.ID, Shard: p.Shard, AddedID: p.AddedID, RowKey: rk,
			ColumnKey: p.ColumnKey, RefKey: p.RefKey, Error: p.Error, Attempts: p.Attempts, Worker: p.Worker,
			ParkedAt: p.ParkedAt, Retry: p.Retry})
	}
	return out
}

// triggerCell turns a cell read over the API into a cells.Cell. Log reads ask for stored
// bodies; a JSON body (a parked cell read with GetCell) is encoded.
func triggerCell(wc wire.Cell) (cells.Cell, error) {
	rk, err := uuid.Parse(wc.RowKey)
	if err != nil {
		return cells.Cell{}, fmt.Errorf("row key %q: %w", wc.RowKey, err)
	}
	body := cells.Body(wc.Stored)
	if body == nil {
		if body, err = cells.EncodeBody(wc.Body); err != nil {
			return cells.Cell{}, err
		}
	}
	return cells.Cell{Key: cells.Key{RowKey: rk, ColumnKey: wc.ColumnKey, RefKey: wc.RefKey}, Body: body, AddedID: wc.AddedID, CreatedAt: wc.CreatedAt}, nil
}
