package bench

// The raft-raw baseline: hashicorp/raft alone, the consensus library's own speed on this
// machine. Three raft servers in this process, one group, each with a raft log of the
// datastore's format (--raft-log-store, opened by partition.OpenLogStore; with the node log each
// server has its own raftlog.Store, as each is a node) behind raft's log
// cache of the partitions' size, the node transport of package transport with the
// partitions' network transport settings, and the partitions' raft timeouts; the state
// machine does nothing. A put is one Apply of a body of --value-size bytes on the leader,
// waited for; a put-batch one Apply of --batch such bodies in one entry (the datastore makes
// one raft entry per partition of a batch). No HTTP, no JSON, no cell encoding, no SQL.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/transport"
)

// Values of --baseline and the target of the raft-raw baseline's rows.
const baselineRaftRaw = "raft-raw"

// rawRaftApplyTimeout bounds one Apply of the raft-raw baseline.
const rawRaftApplyTimeout = 10 * time.Second

// rawRaft is the raft-raw baseline's group of three servers; its runs are sequential.
type rawRaft struct {
	dir     string
	servers []*rawServer
}

// rawServer is one server of the raft-raw group.
type rawServer struct {
	mux      *transport.Mux
	trans    *raft.NetworkTransport
	raft     *raft.Raft
	closeLog func() error
}

// rawFSM is the raft-raw baseline's state machine: it keeps nothing.
type rawFSM struct{}

// Apply does nothing.
func (rawFSM) Apply(*raft.Log) interface{} { return nil }

// Snapshot returns an empty snapshot.
func (rawFSM) Snapshot() (raft.FSMSnapshot, error) { return rawSnapshot{}, nil }

// Restore reads nothing.
func (rawFSM) Restore(rc io.ReadCloser) error { return rc.Close() }

// Persist writes nothing.
func (rawSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }

// Release does nothing.
func (rawSnapshot) Release() {}

// rawSnapshot is rawFSM's empty snapshot.
type rawSnapshot struct{}

// startRawRaft starts the group in a new temporary directory, with logStore's format, and waits
// (up to a minute, or ctx) for a leader. The caller must Close it, which removes the directory.
func startRawRaft(ctx context.Context, logStore string, logger *slog.Logger) (_ *rawRaft, err error) {
	dir, err := os.MkdirTemp("", "schemaless-raft-raw-")
	if err != nil {
		return nil, err
	}
	g := &rawRaft{dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, g.Close())
		}
	}()
	pd := partition.DefaultConfig()
	var peers []raft.Server
	for i := range 3 {
		tc := transport.DefaultConfig()
		tc.BindAddr = "127.0.0.1:0"
		tc.Logger = logger
		mux, err := transport.New(tc)
		if err != nil {
			return nil, err
		}
		s := &rawServer{mux: mux}
		g.servers = append(g.servers, s)
		layer, err := mux.RaftLayer("raw/0")
		if err != nil {
			return nil, err
		}
		s.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: layer, MaxPool: 4, Timeout: 10 * time.Second, MaxRPCsInFlight: 1, // as cluster's replicas
			Logger: hclogslog.New(logger, "raft-net"),
		})
		peers = append(peers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: s.trans.LocalAddr()})
	}
	for i, s := range g.servers {
		sdir := filepath.Join(dir, string(peers[i].ID))
		// Each server is a node of its own: with the node log, its own store.
		var nodeLog *raftlog.Store
		if logStore == partition.LogStoreNode {
			o := raftlog.DefaultOptions()
			o.Logger = logger
			if nodeLog, err = raftlog.Open(filepath.Join(sdir, "raftlog"), o); err != nil {
				return nil, err
			}
		}
		store, stable, closeLog, err := partition.OpenLogStore(sdir, logStore, nodeLog, "raw/0")
		if err != nil {
			if nodeLog != nil {
				err = errors.Join(err, nodeLog.Close())
			}
			return nil, err
		}
		s.closeLog = closeLog
		if nodeLog != nil {
			s.closeLog = func() error { return errors.Join(closeLog(), nodeLog.Close()) }
		}
		logs, err := raft.NewLogCache(pd.LogCacheEntries, store)
		if err != nil {
			return nil, err
		}
		snaps, err := raft.NewFileSnapshotStoreWithLogger(sdir, pd.SnapshotRetain, hclogslog.New(logger, "raft"))
		if err != nil {
			return nil, err
		}
		pc := pd
		pc.NodeID = string(peers[i].ID)
		rc := partition.RaftConfig(pc, hclogslog.New(logger, "raft"))
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, s.trans, raft.Configuration{Servers: peers}); err != nil {
			return nil, fmt.Errorf("raft-raw: bootstrap: %w", err)
		}
		if s.raft, err = raft.NewRaft(rc, rawFSM{}, logs, stable, snaps, s.trans); err != nil {
			return nil, fmt.Errorf("raft-raw: %w", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for g.leader() == nil {
		if sleepCtx(wctx, 10*time.Millisecond) != nil {
			return nil, fmt.Errorf("raft-raw: no leader within a minute: %w", wctx.Err())
		}
	}
	return g, nil
}

// leader returns the group's leader, or nil while there is none.
func (g *rawRaft) leader() *raft.Raft {
	for _, s := range g.servers {
		if s.raft != nil && s.raft.State() == raft.Leader {
			return s.raft
		}
	}
	return nil
}

// Name is raft-raw.
func (g *rawRaft) Name() string { return baselineRaftRaw }

// Endpoints is nil: the baseline has no HTTP API.
func (g *rawRaft) Endpoints() []string { return nil }

// Close shuts the servers down and removes the group's directory.
func (g *rawRaft) Close() error {
	var errs []error
	for _, s := range g.servers {
		if s.raft != nil {
			errs = append(errs, s.raft.Shutdown().Error())
		}
		if s.trans != nil {
			errs = append(errs, s.trans.Close())
		}
		errs = append(errs, s.mux.Close())
		if s.closeLog != nil {
			errs = append(errs, s.closeLog())
		}
	}
	errs = append(errs, os.RemoveAll(g.dir))
	return errors.Join(errs...)
}

// run runs workload with n clients at rate (0: closed loop) like the targets' runs (runLoad):
// each request is one Apply on the current leader of 1 body (put) or f.Batch bodies (put-batch)
// in one entry, answered when committed and applied.
func (g *rawRaft) run(ctx context.Context, workload string, n, rate int, f Config) Result {
	cells := 1
	if workload == workloadPutBatch {
		cells = f.Batch
	}
	r := runLoad(ctx, n, rate, f, func(ctx context.Context, rng *rand.Rand) (int, error) {
		data := make([]byte, 0, cells*(f.ValueSize+1))
		for range cells {
			data = append(data, benchBody(rng, f.ValueSize)...)
		}
		l := g.leader()
		if l == nil {
			return cells, errors.New("raft-raw: no leader")
		}
		return cells, l.Apply(data, rawRaftApplyTimeout).Error()
	})
	r.Target, r.Workload = baselineRaftRaw, workload
	return r
}
