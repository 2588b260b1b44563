package maintainer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/triggers"
)

// Errors of the maintainer and its Source.
var (
	// ErrInvalidConfig: a Config field is missing or out of range (the message names it).
	ErrInvalidConfig = errors.New("maintainer: invalid config")
	// ErrCellNotFound: Source.GetCell found no cell at the key.
	ErrCellNotFound = errors.New("maintainer: cell not found")
	// ErrBadConsistency: a read asked for a consistency other than triggers.ConsistencyStrong and
	// triggers.ConsistencyStale.
	ErrBadConsistency = errors.New("maintainer: consistency must be strong or stale")
)

// SourceTimeout bounds one call of a Source (plus a log read's wait), as the HTTP API's
// request timeout bounds a request: within it the cluster node retries leader changes and
// forwards, after it the worker retries the call.
const SourceTimeout = 10 * time.Second

// SourceBackend is what a Source needs of this process's cluster node (*cluster.Node). Every
// method may be called from several goroutines at once.
type SourceBackend interface {
	ReadLogs(ctx context.Context, ds string, req cluster.LogRead) ([]cluster.LogPage, error)
	GetCells(ctx context.Context, ds string, keys []cluster.GetKey, c cluster.Consistency) ([]cluster.ReadResult, error)
	GroupApply(ctx context.Context, ds, group string, cmd consumer.Command) (consumer.Result, error)
}

// Source is the triggers.Source of one datastore over this process's cluster node: a worker's
// log reads, cell reads and group commands are the node's own calls, routed to the partition
// (or its leader) and forwarded by the cluster as the HTTP API's are, with no HTTP between the
// worker and its node. Each call is bounded by SourceTimeout plus a log read's wait. It is safe
// for concurrent use.
type Source struct {
	be SourceBackend
	ds string
}

var _ triggers.Source = (*Source)(nil)

// NewSource returns the Source of datastore ds over be. It does no I/O: an unknown datastore
// fails every call (cluster.ErrUnknownDatastore).
func NewSource(be SourceBackend, ds string) *Source { return &Source{be: be, ds: ds} }

// consistencyOf maps a triggers consistency to the cluster's.
func consistencyOf(c string) (cluster.Consistency, error) {
	switch c {
	case triggers.ConsistencyStrong:
		return cluster.Strong, nil
	case triggers.ConsistencyStale:
		return cluster.Stale, nil
	}
	return "", fmt.Errorf("%w: got %q", ErrBadConsistency, c)
}

// ReadLogs reads req with the node's ReadLogs (a Time starts a timestamp read). Errors: the
// node's (cluster.ErrBadShard, partition.ErrUnavailable, ...), ErrBadConsistency, ctx's.
func (s *Source) ReadLogs(ctx context.Context, req triggers.LogRead) ([]triggers.Page, error) {
	c, err := consistencyOf(req.Consistency)
	if err != nil {
		return nil, err
	}
	in := cluster.LogRead{LocationType: cluster.LocationAddedID, ColumnKey: req.ColumnKey, Limit: req.Limit, Wait: req.Wait, Consistency: c}
	if !req.Time.IsZero() {
		in.LocationType, in.Time = cluster.LocationTimestamp, req.Time.UTC()
	}
	in.Shards = make([]cluster.ShardLocation, len(req.Shards))
	for i, sl := range req.Shards {
		in.Shards[i] = cluster.ShardLocation{Shard: sl.Shard, Location: sl.Location}
	}
	ctx, cancel := context.WithTimeout(ctx, SourceTimeout+max(req.Wait, 0))
	defer cancel()
	pages, err := s.be.ReadLogs(ctx, s.ds, in)
	if err != nil {
		return nil, err
	}
	out := make([]triggers.Page, len(pages))
	for i, p := range pages {
		out[i] = triggers.Page{Shard: p.Shard, Cells: p.Cells, NextLocation: p.NextLocation, HighWater: p.HighWater}
	}
	return out, nil
}

// GetCell reads the cell at key with the node's GetCells. Errors: ErrCellNotFound, the node's,
// ErrBadConsistency, ctx's.
func (s *Source) GetCell(ctx context.Context, key cells.Key, consistency string) (cells.Cell, error) {
	c, err := consistencyOf(consistency)
	if err != nil {
		return cells.Cell{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, SourceTimeout)
	defer cancel()
	res, err := s.be.GetCells(ctx, s.ds, []cluster.GetKey{{Key: key}}, c)
	if err != nil {
		return cells.Cell{}, err
	}
	if len(res) != 1 || !res[0].Found {
		return cells.Cell{}, fmt.Errorf("%w: %s", ErrCellNotFound, key)
	}
	return res[0].Cell, nil
}

// GroupCommand applies cmd to group's coordinator with the node's GroupApply. Errors: the
// node's (consumer.ErrBadCommand, partition.ErrIndeterminate, partition.ErrUnavailable, ...),
// ctx's.
func (s *Source) GroupCommand(ctx context.Context, group string, cmd consumer.Command) (consumer.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, SourceTimeout)
	defer cancel()
	return s.be.GroupApply(ctx, s.ds, group, cmd)
}
