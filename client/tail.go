package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/wire"
)

// Defaults of TailOptions.
const (
	// DefaultTailLimit is TailOptions.Limit when it is 0: cells read per shard per poll.
	DefaultTailLimit = 100
	// DefaultTailWait is TailOptions.Wait when it is 0: the long poll of each read.
	DefaultTailWait = 5 * time.Second
)

// TailOptions say which cells Tail follows and from where.
type TailOptions struct {
	// Shards are the shards to follow; empty means every shard of the datastore (its shard
	// count from Cluster).
	Shards []int
	// Earliest starts every shard at the start of its log. Otherwise a shard starts at its end
	// (only cells written from then on), unless Since is set.
	Earliest bool
	// Since, when not zero, starts every shard at its first cell created at or after it.
	Since time.Time
	// ColumnKey, when set, keeps only the cells of that column (and the tombstones of erased
	// rows, see LogRequest).
	ColumnKey string
	// Limit bounds the cells read per shard per poll (0: DefaultTailLimit); Wait is the long
	// poll of each read (0: DefaultTailWait).
	Limit int
	Wait  time.Duration
}

// Tail follows the shard logs of the client's datastore and calls fn with each cell as it
// lands, and its shard: the cells of one shard in added_id order, shards interleaved. It
// long-polls every shard in one request (ReadLogs with opts: a stale read may trail the leader
// by a few entries and never skips a cell), joins no consumer group and commits nothing. It
// runs until fn returns an error (returned as is), a read fails (its error), or ctx ends
// (ctx's error). fn is called from Tail's goroutine, one cell at a time.
func (c *Client) Tail(ctx context.Context, o TailOptions, fn func(shard int, cell wire.Cell) error, opts ...ReadOption) error {
	if o.Limit == 0 {
		o.Limit = DefaultTailLimit
	}
	if o.Wait == 0 {
		o.Wait = DefaultTailWait
	}
	shards := o.Shards
	if len(shards) == 0 {
		n, err := c.shardCount(ctx)
		if err != nil {
			return err
		}
		for s := 0; s < n; s++ {
			shards = append(shards, s)
		}
	}
	locs := make([]wire.ShardLocation, len(shards))
	for i, s := range shards {
		locs[i] = wire.ShardLocation{Shard: s}
	}
	from := o.Since // the first read starts at this time (zero: at locs)
	if from.IsZero() && !o.Earliest {
		// The end of each log: the shard's high water, the last added_id stored.
		resp, err := c.ReadLogs(ctx, LogsRequest{Shards: locs, Limit: 1}, opts...)
		if err != nil {
			return err
		}
		for i, p := range resp.Shards {
			locs[i].Location = max(p.HighWater, 0)
		}
	}
	for {
		req := LogsRequest{Shards: locs, Time: from, ColumnKey: o.ColumnKey, Limit: o.Limit, Wait: o.Wait}
		if !from.IsZero() {
			// The first read by time answers at once, so that later reads go on by location.
			req.Wait = 0
		}
		resp, err := c.ReadLogs(ctx, req, opts...)
		if err != nil {
			return err
		}
		from = time.Time{}
		for i, p := range resp.Shards {
			for _, cell := range p.Cells {
				if err := fn(p.Shard, cell); err != nil {
					return err
				}
			}
			locs[i].Location = p.NextLocation
		}
	}
}

// shardCount returns the shard count of the client's datastore, from the cluster status.
func (c *Client) shardCount(ctx context.Context) (int, error) {
	st, err := c.Cluster(ctx)
	if err != nil {
		return 0, err
	}
	var names []string
	for _, d := range st.Datastores {
		if d.Name == c.Datastore() {
			return d.Shards, nil
		}
		names = append(names, d.Name)
	}
	return 0, fmt.Errorf("client: datastore %q is not in the cluster (datastores: %s): %w", c.Datastore(), strings.Join(names, ", "), ErrNotFound)
}
