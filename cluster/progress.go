package cluster

import (
	"context"
	"time"

	"github.com/schemaless-db/schemaless/consumer"
)

// ShardProgress is how far a consumer group is in one shard's log.
type ShardProgress struct {
	Shard int
	// Owner and Epoch are the shard's lease ("" when unowned).
	Owner string
	Epoch uint64
	// Offset is the committed offset (added_id of the last cell handled); -1: none yet.
	Offset int64
	// HighWater is the shard's highest added_id.
	HighWater int64
	// LagCells is HighWater minus the offset (at least 0): the cells not yet handled, counting
	// every column.
	LagCells int64
	// LagSeconds is the age of the first cell not yet handled; 0 when caught up.
	LagSeconds float64
}

// GroupProgress is a consumer group's coordinator state with each shard's lag.
type GroupProgress struct {
	Status consumer.Status
	Shards []ShardProgress
	// LagCells sums the shards' lags; LagSeconds is the largest.
	LagCells   int64
	LagSeconds float64
}

// GroupProgress reads group's state (consistency c) and measures each shard's lag from its
// committed offset (LogProgress). Errors as GroupStatus and ReadLogs; ErrUnknownGroup when the
// group does not exist.
func (n *Node) GroupProgress(ctx context.Context, ds, group string, c Consistency) (GroupProgress, error) {
	st, err := n.GroupStatus(ctx, ds, group, c)
	if err != nil {
		return GroupProgress{}, err
	}
	p, err := n.LogProgress(ctx, ds, st.Leases)
	p.Status = st
	return p, err
}

// LogProgress measures how far the leases' offsets are in every shard's log of ds, reading one
// cell after each offset from any replica. A shard without a lease, or whose lease has no
// committed offset, lags by its whole log (Offset -1). Status is left empty. Errors:
// ErrUnknownDatastore and those of ReadLogs.
func (n *Node) LogProgress(ctx context.Context, ds string, leases []consumer.Lease) (GroupProgress, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return GroupProgress{}, err
	}
	byShard := map[int]consumer.Lease{}
	for _, l := range leases {
		byShard[l.Shard] = l
	}
	read := LogRead{Limit: 1, Consistency: Stale}
	for shard := 0; shard < d.spec.Shards; shard++ {
		off := int64(0)
		if l, ok := byShard[shard]; ok && l.Offset > 0 {
			off = l.Offset
		}
		read.Shards = append(read.Shards, ShardLocation{Shard: shard, Location: off})
	}
	pages, err := n.ReadLogs(ctx, ds, read)
	if err != nil {
		return GroupProgress{}, err
	}
	now := time.Now()
	var out GroupProgress
	for i, p := range pages {
		l, ok := byShard[p.Shard]
		if !ok {
			l = consumer.Lease{Shard: p.Shard, Offset: -1}
		}
		sp := ShardProgress{Shard: p.Shard, Owner: l.Owner, Epoch: l.Epoch, Offset: l.Offset, HighWater: p.HighWater}
		sp.LagCells = max(p.HighWater-read.Shards[i].Location, 0)
		if len(p.Cells) > 0 {
			sp.LagSeconds = max(now.Sub(p.Cells[0].CreatedAt).Seconds(), 0)
		}
		out.LagCells += sp.LagCells
		out.LagSeconds = max(out.LagSeconds, sp.LagSeconds)
		out.Shards = append(out.Shards, sp)
	}
	return out, nil
}
