package peering

import (
	"context"
	"errors"
	"time"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// SetPeer adds or changes peer cluster name in the catalog (cluster.Node.SetPeer); every
// node's replicator starts its streams within Config.Poll. It returns the peer as Status
// shows it. Errors as cluster.Node.SetPeer.
func (r *Replicator) SetPeer(ctx context.Context, name string, req wire.ReplicationPeerRequest) (wire.ReplicationPeerStatus, error) {
	gen, err := r.cfg.Backend.SetPeer(ctx, name, req)
	if err != nil {
		return wire.ReplicationPeerStatus{}, err
	}
	return peerInfo(cluster.Peer{Name: name, ReplicationPeerRequest: req}, gen), nil
}

// DropPeer removes peer cluster name from the catalog (cluster.Node.DropPeer); every node's
// replicator stops its streams within Config.Poll. Errors as cluster.Node.DropPeer.
func (r *Replicator) DropPeer(ctx context.Context, name string) error {
	_, err := r.cfg.Backend.DropPeer(ctx, name)
	return err
}

func peerInfo(p cluster.Peer, gen uint64) wire.ReplicationPeerStatus {
	return wire.ReplicationPeerStatus{Peer: p.Name, Endpoints: p.Endpoints, Datastores: p.Datastores, Token: p.Token != "",
		TLS: p.CACert != "" || p.ClientCert != "", Generation: gen, Streams: []wire.ReplicationStreamStatus{}}
}

// Status reports every peer of the catalog and the progress of each of its streams (see
// wire.ReplicationStreamStatus). A stream whose progress cannot be read has its Error set;
// the others are still reported. It blocks for one read of each stream's group and shard
// logs.
func (r *Replicator) Status(ctx context.Context) wire.ReplicationStatus {
	out := wire.ReplicationStatus{Cluster: r.cfg.Backend.ClusterName(), Peers: []wire.ReplicationPeerStatus{}}
	peers, gen := r.cfg.Backend.Peers()
	for _, p := range peers {
		ps := peerInfo(p, gen)
		for _, ds := range p.Datastores {
			ps.Streams = append(ps.Streams, r.streamStatus(ctx, p.Name, ds))
		}
		out.Peers = append(out.Peers, ps)
	}
	return out
}

// streamStatus reports one stream: its group's progress, and this node's figures.
func (r *Replicator) streamStatus(ctx context.Context, peer, ds string) wire.ReplicationStreamStatus {
	ss := wire.ReplicationStreamStatus{Datastore: ds, Group: GroupName(peer), Shards: []wire.ReplicationShardStatus{}}
	prog, err := r.cfg.Backend.GroupProgress(ctx, ds, ss.Group, cluster.Stale)
	if errors.Is(err, cluster.ErrUnknownGroup) {
		// No worker joined yet: every shard lags by its whole log.
		prog, err = r.cfg.Backend.LogProgress(ctx, ds, nil)
	}
	if err != nil {
		ss.Error = err.Error()
	}
	ss.LagCells, ss.LagSeconds = prog.LagCells, prog.LagSeconds
	ss.Parked, ss.Halted = len(prog.Status.Parked), prog.Status.Halted
	for _, sp := range prog.Shards {
		ss.Shards = append(ss.Shards, wire.ReplicationShardStatus{Shard: sp.Shard, Owner: sp.Owner, Offset: sp.Offset,
			HighWater: sp.HighWater, LagCells: sp.LagCells, LagSeconds: sp.LagSeconds})
	}
	r.mu.Lock()
	st := r.streams[streamKey{peer, ds}]
	r.mu.Unlock()
	if st != nil {
		st.mu.Lock()
		ss.Rate, ss.Sent, ss.LastError, ss.SchemaError = st.rate, st.sent, st.lastErr, st.schemaErr
		if st.lastErr != "" {
			at := st.lastErrAt
			ss.LastErrorAt = &at
		}
		st.mu.Unlock()
	}
	return ss
}

// sample measures each running stream's rate: how far its committed offsets moved, summed
// over its shards, since the last sample.
func (r *Replicator) sample(ctx context.Context) {
	r.mu.Lock()
	keys := make([]streamKey, 0, len(r.streams))
	for k := range r.streams {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	for _, k := range keys {
		sctx, cancel := context.WithTimeout(ctx, r.cfg.SampleInterval)
		s, err := r.cfg.Backend.GroupStatus(sctx, k.ds, GroupName(k.peer), cluster.Stale)
		cancel()
		if err != nil {
			continue
		}
		var sum int64
		for _, l := range s.Leases {
			if l.Offset > 0 {
				sum += l.Offset
			}
		}
		now := time.Now()
		r.mu.Lock()
		st := r.streams[k]
		r.mu.Unlock()
		if st == nil {
			continue
		}
		st.mu.Lock()
		if !st.sampleAt.IsZero() {
			if dt := now.Sub(st.sampleAt).Seconds(); dt > 0 && sum >= st.sampleSum {
				st.rate = float64(sum-st.sampleSum) / dt
			}
		}
		st.sampleSum, st.sampleAt = sum, now
		st.mu.Unlock()
	}
}
