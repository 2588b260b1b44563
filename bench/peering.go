package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// PeerLatencyConfig configures MeasurePeerLatency: two clusters that replicate both ways
// (package peering), each reached by its own client of one datastore.
type PeerLatencyConfig struct {
	// A and B are clients of the two clusters' datastore; AName and BName the clusters' names.
	A, B         *client.Client
	AName, BName string
	// Shards is the datastore's shard count (the logs tailed).
	Shards int
	// Rate is the cells per second written into each cluster, Duration how long.
	Rate     int
	Duration time.Duration
	// Batch is the cells of one put_cells (default 1): Rate/Batch requests a second into
	// each cluster, each cell's latency counted from its request's answer.
	Batch int
	// Settle bounds the wait, after the writes, for the last cells to arrive. Default 30s.
	Settle time.Duration
}

// PeerLatencyResult is one direction of MeasurePeerLatency: the cells written at the origin,
// those seen at the peer, and the latency from the origin's acknowledgement to the cell in the
// peer's shard log (readable there), in milliseconds.
type PeerLatencyResult struct {
	From, To            string
	Written, Arrived    int
	P50, P90, P99, PMax float64
	OutOfOrder          int
}

// MeasurePeerLatency writes cfg.Rate cells per second into each cluster for cfg.Duration
// (put_cells of cfg.Batch cells, open loop) and tails the other cluster's shard logs (one long-polling batch
// read) for them: a cell's latency is the time from its acknowledgement at its origin to the
// read that returned it from the peer, so it includes up to one long poll's answer and one
// HTTP round trip of this process to the peer. It also counts cells of one origin shard that
// arrive in another order than their origin's added_ids. It blocks for the duration and the
// settling.
func MeasurePeerLatency(ctx context.Context, cfg PeerLatencyConfig) ([]PeerLatencyResult, error) {
	if cfg.Settle == 0 {
		cfg.Settle = 30 * time.Second
	}
	type dir struct {
		from, to   *client.Client
		res        PeerLatencyResult
		mu         sync.Mutex
		acked      map[uuid.UUID]time.Time
		early      map[uuid.UUID]time.Time // seen at the peer before its acknowledgement was recorded
		addedID    map[uuid.UUID]int64
		lat        []float64
		lastOrigin map[int]int64 // per shard, the origin added_id of the last arrival
	}
	dirs := []*dir{
		{from: cfg.A, to: cfg.B, res: PeerLatencyResult{From: cfg.AName, To: cfg.BName}},
		{from: cfg.B, to: cfg.A, res: PeerLatencyResult{From: cfg.BName, To: cfg.AName}},
	}
	tctx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	var tails sync.WaitGroup
	for _, d := range dirs {
		d.acked, d.early, d.addedID, d.lastOrigin = map[uuid.UUID]time.Time{}, map[uuid.UUID]time.Time{}, map[uuid.UUID]int64{}, map[int]int64{}
		// Start the tail at each shard's high water now: older cells are not measured.
		locs := make([]wire.ShardLocation, cfg.Shards)
		for s := range locs {
			p, err := d.to.ShardCells(ctx, s, 0, 1)
			if err != nil {
				return nil, fmt.Errorf("bench: high water of %s shard %d: %w", d.res.To, s, err)
			}
			locs[s] = wire.ShardLocation{Shard: s, Location: p.HighWater}
		}
		tails.Add(1)
		go func() {
			defer tails.Done()
			for tctx.Err() == nil {
				ans, err := d.to.ReadLogs(tctx, client.LogsRequest{Shards: locs, Limit: 1000, Wait: time.Second}, client.WithConsistency(client.ConsistencyStale))
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				now := time.Now()
				for i, p := range ans.Shards {
					for _, c := range p.Cells {
						if c.Origin != d.res.From {
							continue
						}
						rk, err := uuid.Parse(c.RowKey)
						if err != nil {
							continue
						}
						d.mu.Lock()
						if at, ok := d.acked[rk]; ok {
							d.lat = append(d.lat, float64(now.Sub(at).Microseconds())/1000)
							d.res.Arrived++
							if id := d.addedID[rk]; id < d.lastOrigin[p.Shard] {
								d.res.OutOfOrder++
							} else {
								d.lastOrigin[p.Shard] = id
							}
							delete(d.acked, rk)
						} else {
							d.early[rk] = now
						}
						d.mu.Unlock()
					}
					if p.NextLocation > locs[i].Location {
						locs[i].Location = p.NextLocation
					}
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for _, d := range dirs {
		writers.Add(1)
		go func() {
			defer writers.Done()
			batch := max(cfg.Batch, 1)
			interval := time.Second * time.Duration(batch) / time.Duration(max(cfg.Rate, 1))
			end := time.Now().Add(cfg.Duration)
			var inflight sync.WaitGroup
			for next := time.Now(); next.Before(end) && ctx.Err() == nil; next = next.Add(interval) {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				inflight.Add(1)
				go func() {
					defer inflight.Done()
					ws := make([]client.CellWrite, batch)
					for i := range ws {
						ws[i] = client.CellWrite{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{"bench":"peering"}`)}
					}
					res, err := d.from.PutCells(ctx, ws)
					if err != nil || len(res) != len(ws) {
						return
					}
					now := time.Now()
					d.mu.Lock()
					for i, w := range ws {
						k := w.Key
						d.res.Written++
						if _, ok := d.early[k.RowKey]; ok {
							// It reached the peer before this goroutine recorded its answer.
							d.lat = append(d.lat, 0)
							d.res.Arrived++
							delete(d.early, k.RowKey)
						} else {
							d.acked[k.RowKey], d.addedID[k.RowKey] = now, res[i].AddedID
						}
					}
					d.mu.Unlock()
				}()
			}
			inflight.Wait()
		}()
	}
	writers.Wait()
	deadline := time.Now().Add(cfg.Settle)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		left := 0
		for _, d := range dirs {
			d.mu.Lock()
			left += len(d.acked)
			d.mu.Unlock()
		}
		if left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopTail()
	tails.Wait()
	out := make([]PeerLatencyResult, len(dirs))
	for i, d := range dirs {
		slices.Sort(d.lat)
		d.res.P50, d.res.P90, d.res.P99, d.res.PMax = nearestRank(d.lat, 0.5), nearestRank(d.lat, 0.9), nearestRank(d.lat, 0.99), nearestRank(d.lat, 1)
		out[i] = d.res
	}
	return out, ctx.Err()
}

// nearestRank returns the q-quantile of sorted xs (nearest rank), 0 for none.
func nearestRank(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// MeasureStreamThroughput measures one peer stream's throughput: it writes n cells into the
// cluster of from (put_cells of 500, its streams to peer stopped by dropping the peer), then
// sets the peer again with req and times until the stream's lag is 0, from GET
// /v1/admin/replication of from. It returns cells per second of the backlog's drain. from must
// list peer already (its settings are req).
func MeasureStreamThroughput(ctx context.Context, from *client.Client, peer string, req wire.ReplicationPeerRequest, n int) (float64, time.Duration, error) {
	if err := from.DropReplicationPeer(ctx, peer); err != nil {
		return 0, 0, fmt.Errorf("bench: drop peer %s: %w", peer, err)
	}
	time.Sleep(3 * time.Second) // every node's replicator stops the peer's streams (its Poll)
	for i := 0; i < n; i += 500 {
		var batch []client.CellWrite
		for j := i; j < min(n, i+500); j++ {
			batch = append(batch, client.CellWrite{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1},
				Body: json.RawMessage(`{"bench":"stream","origin":"LAX","destination":"SFO","fare":123.45}`)})
		}
		if _, err := from.PutCells(ctx, batch); err != nil {
			return 0, 0, fmt.Errorf("bench: backlog: %w", err)
		}
	}
	start := time.Now()
	if _, err := from.SetReplicationPeer(ctx, peer, req); err != nil {
		return 0, 0, fmt.Errorf("bench: set peer %s: %w", peer, err)
	}
	seen := int64(0) // the largest lag seen: the backlog must show before it drains
	for ctx.Err() == nil {
		st, err := from.Replication(ctx)
		if err == nil && len(st.Peers) > 0 {
			var lag int64
			valid := false
			for _, p := range st.Peers {
				if p.Peer == peer {
					valid = len(p.Streams) > 0
					for _, s := range p.Streams {
						lag += s.LagCells
						valid = valid && s.Error == "" && len(s.Shards) > 0
					}
				}
			}
			if !valid {
				time.Sleep(50 * time.Millisecond)
				continue // a status whose progress could not be read says nothing of the lag
			}
			seen = max(seen, lag)
			if lag == 0 {
				took := time.Since(start)
				if seen < int64(n)/2 {
					return 0, took, fmt.Errorf("bench: the stream never showed the backlog (largest lag %d of %d cells): it was not stopped while the backlog was written", seen, n)
				}
				return float64(n) / took.Seconds(), took, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, 0, ctx.Err()
}

// PeeringConfig configures RunPeering: two clusters that replicate both ways.
type PeeringConfig struct {
	Latency PeerLatencyConfig
	// Backlog is the cells MeasureStreamThroughput writes for the throughput of the stream
	// from A to B (0: not measured).
	Backlog int
	// CPUPIDs are the node processes of both clusters, whose CPU each phase reports.
	CPUPIDs []int
}

// RunPeering measures end-to-end latency both ways at Latency.Rate and then the throughput of
// the stream from A to B draining Backlog cells, and prints one line per figure to out with
// the CPU seconds of this process and CPUPIDs per cell. It blocks for both phases.
func RunPeering(ctx context.Context, cfg PeeringConfig, out io.Writer) error {
	span := cpuSpan{m: cpuMeter{pids: cfg.CPUPIDs}}
	span.begin()
	res, err := MeasurePeerLatency(ctx, cfg.Latency)
	if err != nil {
		return err
	}
	all, nodes := span.end()
	written := 0
	for _, r := range res {
		written += r.Written
	}
	for _, r := range res {
		fmt.Fprintf(out, "latency %s->%s: %d cells at %d/s in put_cells of %d, %d arrived, %d out of origin order; ms p50 %.1f p90 %.1f p99 %.1f max %.1f\n",
			r.From, r.To, r.Written, cfg.Latency.Rate, max(cfg.Latency.Batch, 1), r.Arrived, r.OutOfOrder, r.P50, r.P90, r.P99, r.PMax)
	}
	if written > 0 {
		fmt.Fprintf(out, "latency phase CPU: %.1f s in all (%.1f s node processes), %.0f µs per cell written\n", all, nodes, all/float64(written)*1e6)
	}
	if cfg.Backlog == 0 {
		return nil
	}
	st, err := cfg.Latency.A.Replication(ctx)
	if err != nil {
		return err
	}
	var req wire.ReplicationPeerRequest
	for _, p := range st.Peers {
		if p.Peer == cfg.Latency.BName {
			if p.Token || p.TLS {
				return fmt.Errorf("bench: peer %s has credentials this benchmark cannot set again", p.Peer)
			}
			req = wire.ReplicationPeerRequest{Endpoints: p.Endpoints, Datastores: p.Datastores}
		}
	}
	if len(req.Endpoints) == 0 {
		return fmt.Errorf("bench: %s lists no peer %s", cfg.Latency.AName, cfg.Latency.BName)
	}
	span.begin()
	rate, took, err := MeasureStreamThroughput(ctx, cfg.Latency.A, cfg.Latency.BName, req, cfg.Backlog)
	if err != nil {
		return err
	}
	all, nodes = span.end()
	fmt.Fprintf(out, "stream %s->%s: %d cells of backlog in %.2f s, %.0f cells/s; CPU %.1f s in all (%.1f s node processes, writing the backlog included), %.0f µs per cell\n",
		cfg.Latency.AName, cfg.Latency.BName, cfg.Backlog, took.Seconds(), rate, all, nodes, all/float64(cfg.Backlog)*1e6)
	return nil
}
