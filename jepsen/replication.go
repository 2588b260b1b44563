package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// The replication workload's names: the run's cluster is LocalClusterName, the one the
// workload starts beside it PeerClusterName, and its datastore ReplicationDatastore.
const (
	LocalClusterName     = "east"
	PeerClusterName      = "west"
	ReplicationDatastore = "replication"
	// PeerIPOffset places the peer cluster's nodes: its first node's address is the run's
	// FirstIP plus this in the last byte (127.0.0.2 gives 127.0.0.102, .103, ...), its ports
	// the run's.
	PeerIPOffset = 100
	// ClusterCut is the kind of the workload's own fault: every link between the two
	// clusters' nodes cut, both ways.
	ClusterCut = "partition-clusters"
)

// ReplicationWorkload checks replication between two clusters (docs/operations.md, "Two
// datacenters"), as Herb's continuous checker did: it starts a second 3-node cluster, west,
// beside the run's cluster, east, connects them both ways (PUT /v1/admin/replication on each),
// writes new cells on both (put_cells of 1 to MaxBatch cells to one cluster, drawn per call),
// and checks at the end (CheckReplication) that every acknowledged cell reached the other
// cluster with its body and its origin, each shard's cells in their origin's order, none
// lost, none twice, and that the two clusters hold the same cells.
//
// Faults: the run's nemeses act on east; the worker nemeses (kill-worker, pause-worker) act on
// west's nodes, which are the workload's processes; and when the run's nemeses include a
// partition, the workload cuts every link between the clusters for CutFor at a time (its own
// fault, ClusterCut), with CutEvery on average between cuts, until the quiet period.
type ReplicationWorkload struct {
	// MaxBatch is the most cells of one put_cells.
	MaxBatch int
	// CutFor is how long each cut between the clusters lasts (at most a quarter of the
	// faults' time); CutEvery the mean time between two.
	CutFor, CutEvery time.Duration

	seq          atomic.Int64
	mu           sync.Mutex
	local, peer  *Cluster
	peerClients  []*client.Client
	log          *slog.Logger
	net          *Net
	stopFaults   context.CancelFunc
	faultsDone   chan struct{}
	cuts         []Fault
	settleErrors []string
}

var (
	_ ProcessWorkload = (*ReplicationWorkload)(nil)
	_ SetupWorkload   = (*ReplicationWorkload)(nil)
	_ BusyWorkload    = (*ReplicationWorkload)(nil)
)

// NewReplicationWorkload returns the workload with batches of up to 5 cells and 30 s cuts
// every 40 s on average.
func NewReplicationWorkload() *ReplicationWorkload {
	return &ReplicationWorkload{MaxBatch: 5, CutFor: 30 * time.Second, CutEvery: 40 * time.Second}
}

// Name implements Workload.
func (w *ReplicationWorkload) Name() string { return "replication" }

// Datastores implements Workload: datastore "replication", 16 shards in 2 partitions, on both
// clusters.
func (w *ReplicationWorkload) Datastores() []topology.DatastoreSpec {
	return []topology.DatastoreSpec{{Name: ReplicationDatastore, Mode: topology.ModeRaft, Shards: 16, PartitionCount: 2}}
}

// BusyDatastores implements BusyWorkload: the streams' consumer groups keep writing their
// leases to the datastore.
func (w *ReplicationWorkload) BusyDatastores() []string { return []string{ReplicationDatastore} }

// peerConfig is the peer cluster's configuration: the run's cluster's, PeerIPOffset further,
// named PeerClusterName, in dir/west.
func peerConfig(local ClusterConfig, dir string) (ClusterConfig, error) {
	ip := net.ParseIP(local.FirstIP).To4()
	if ip == nil || int(ip[3])+PeerIPOffset+local.Nodes > 254 {
		return ClusterConfig{}, fmt.Errorf("jepsen: replication: first IP %q leaves no room for the peer cluster %d addresses further", local.FirstIP, PeerIPOffset)
	}
	cfg := local
	cfg.FirstIP = net.IPv4(ip[0], ip[1], ip[2], ip[3]+PeerIPOffset).String()
	cfg.Dir = filepath.Join(dir, PeerClusterName)
	cfg.ClusterName = PeerClusterName
	cfg.Datastores = (&ReplicationWorkload{}).Datastores()
	if cfg.MySQLPrefix != "" {
		cfg.MySQLPrefix += "w"
	}
	return cfg, os.MkdirAll(cfg.Dir, 0o755)
}

// Start implements ProcessWorkload: it starts the peer cluster (see peerConfig) and waits
// until every node is ready.
func (w *ReplicationWorkload) Start(ctx context.Context, env *StartEnv) error {
	cfg, err := peerConfig(env.Cluster.cfg, env.Dir)
	if err != nil {
		return err
	}
	peer, err := StartCluster(ctx, cfg)
	if err != nil {
		return fmt.Errorf("jepsen: replication: start cluster %s: %w", PeerClusterName, err)
	}
	var clients []*client.Client
	for _, n := range peer.Nodes {
		cc := peer.ClientConfig()
		cc.Endpoints = []string{n.URL()}
		for _, o := range peer.Nodes {
			if o != n {
				cc.Endpoints = append(cc.Endpoints, o.URL())
			}
		}
		cc.RequestTimeout = env.RequestTimeout
		cl, err := client.New(cc)
		if err != nil {
			peer.Stop()
			return err
		}
		clients = append(clients, cl)
	}
	w.mu.Lock()
	w.peer, w.peerClients, w.log = peer, clients, env.Logger
	w.mu.Unlock()
	env.Logger.Info("jepsen: replication: peer cluster ready", "cluster", PeerClusterName, "first_ip", cfg.FirstIP)
	return nil
}

// Setup implements SetupWorkload: each cluster names the other as its peer for datastore
// "replication" (with the other's CA and admin token on secure runs), and the cuts between
// the clusters start when the run's nemeses include a partition.
func (w *ReplicationWorkload) Setup(ctx context.Context, env *StartEnv) error {
	local, peer := env.Cluster, w.peer
	w.local = env.Cluster
	for _, side := range []struct {
		from, to *Cluster
		name     string
	}{{local, peer, PeerClusterName}, {peer, local, LocalClusterName}} {
		req := wire.ReplicationPeerRequest{Datastores: []string{ReplicationDatastore}}
		for _, n := range side.to.Nodes {
			req.Endpoints = append(req.Endpoints, n.URL())
		}
		if side.to.Secure() {
			ca, err := os.ReadFile(side.to.CAFile())
			if err != nil {
				return err
			}
			req.CACert, req.Token = string(ca), side.to.ClientConfig().Token
		}
		cl, err := side.from.everyNodeClient("", 10*time.Second)
		if err != nil {
			return err
		}
		if _, err := cl.SetReplicationPeer(ctx, side.name, req); err != nil {
			return fmt.Errorf("jepsen: replication: set peer %s: %w", side.name, err)
		}
	}
	if !slices.ContainsFunc(env.Nemeses, NeedsNet) || env.FaultsFor <= 0 {
		return nil
	}
	w.net = NewNet(env.Chain + "X")
	if err := w.net.Setup(ctx); err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(context.Background(), env.FaultsFor)
	w.stopFaults, w.faultsDone = cancel, make(chan struct{})
	go w.cutLoop(fctx, env.History, rand.New(rand.NewPCG(env.Seed, 0x5e9)))
	return nil
}

// cutLoop waits CutEvery on average ([1/2, 3/2], at most a third of the faults' time left),
// cuts every link between the two clusters for CutFor (at most a quarter of the faults' time),
// and again, until ctx ends; then heals.
func (w *ReplicationWorkload) cutLoop(ctx context.Context, h *History, rng *rand.Rand) {
	defer close(w.faultsDone)
	defer w.net.Heal(context.Background())
	hold := w.CutFor
	if dl, ok := ctx.Deadline(); ok {
		hold = min(hold, time.Until(dl)/4)
	}
	var east, west []string
	for _, n := range w.peer.Nodes {
		west = append(west, n.IP)
	}
	for _, n := range w.local.Nodes {
		east = append(east, n.IP)
	}
	for {
		wait := w.CutEvery/2 + time.Duration(rng.Int64N(int64(w.CutEvery)+1))
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)/3) // a short run gets its cuts too
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		f := Fault{Kind: ClusterCut, Detail: fmt.Sprintf("%v | %v", east, west), Start: h.Now()}
		if err := w.net.Cut(ctx, Components(east, west)); err != nil {
			w.log.Warn("jepsen: replication: cut between the clusters", "error", err)
			continue
		}
		w.log.Info("jepsen: replication: links between the clusters cut", "for", hold)
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
		err := w.net.Heal(context.Background())
		f.End = h.Now()
		w.mu.Lock()
		w.cuts = append(w.cuts, f)
		w.mu.Unlock()
		if err != nil {
			w.log.Warn("jepsen: replication: heal the cut between the clusters", "error", err)
		}
		w.log.Info("jepsen: replication: links between the clusters healed")
	}
}

// Step implements Workload: one put_cells of new cells to east (the worker's node first) or
// to west (the node of the worker's number first), half the time each. A cell's body names
// its cluster ("o"), which the checker reads its origin from.
func (w *ReplicationWorkload) Step(ctx context.Context, wk *Worker) {
	origin, cw, node := LocalClusterName, wk, wk.Node.ID
	if wk.Rand.IntN(2) == 1 {
		w.mu.Lock()
		i := wk.Process % len(w.peerClients)
		pw := *wk
		pw.Client = w.peerClients[i]
		node = PeerClusterName + "/" + w.peer.Nodes[i].ID
		w.mu.Unlock()
		origin, cw = PeerClusterName, &pw
	}
	n := 1 + wk.Rand.IntN(w.MaxBatch)
	writes := make([]client.CellWrite, n)
	ops := make([]Op, n)
	for i := range writes {
		seq := w.seq.Add(1)
		row := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d-%s-%d-%d", wk.Seed, origin, wk.Process, seq))
		body := fmt.Sprintf(`{"o":%q,"s":%d,"v":%d}`, origin, seq, wk.Rand.Int64N(1<<40))
		writes[i] = client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "R", RefKey: 1}, Body: json.RawMessage(body)}
		ops[i] = Op{Process: wk.Process, Node: node, Workload: "replication", F: "put", RowKey: row.String(), ColumnKey: "R", RefKey: 1, Body: body}
	}
	putAndRecord(ctx, cw, ReplicationDatastore, writes, ops)
}

// Processes implements ProcessWorkload: west's nodes, for the worker nemeses.
func (w *ReplicationWorkload) Processes() Processes { return peerNodes{w} }

// Settle implements ProcessWorkload: the cuts end, every west node runs, and the streams both
// ways drain (replicationDrained), then west's replicas converge. What fails is reported by
// Check.
func (w *ReplicationWorkload) Settle(ctx context.Context, _ int64) {
	w.endFaults()
	if err := (peerNodes{w}).Heal(); err != nil {
		w.addSettleError("restart west's nodes: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := w.peer.procs.WaitReady(ctx); err != nil {
		w.addSettleError("west's nodes ready again: " + err.Error())
	}
	if err := replicationDrained(ctx, w.local, w.peer); err != nil {
		w.addSettleError(err.Error())
	}
	if err := w.peer.WaitConverged(ctx, ReplicationDatastore); err != nil {
		w.addSettleError("west's replicas converge: " + err.Error())
	}
}

// replicationDrained waits until the streams of both clusters have handled every cell of
// their shards (lag 0, every shard's offset at its high water) twice in a row, 2 s apart: the
// second look covers cells that arrived from the other cluster meanwhile.
func replicationDrained(ctx context.Context, clusters ...*Cluster) error {
	var cls []*client.Client
	for _, c := range clusters {
		cl, err := c.everyNodeClient("", 10*time.Second)
		if err != nil {
			return err
		}
		cls = append(cls, cl)
	}
	var last string
	calm := 0
	for calm < 2 {
		busy := ""
		for _, cl := range cls {
			st, err := cl.Replication(ctx)
			if err != nil {
				busy = err.Error()
				break
			}
			if b := streamsBusy(st); b != "" {
				busy = b
				break
			}
		}
		if busy == "" {
			calm++
		} else {
			calm, last = 0, busy
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the streams between the clusters did not drain: %s", last)
		case <-time.After(2 * time.Second):
		}
	}
	return nil
}

// streamsBusy says why st's streams have not drained, or "".
func streamsBusy(st wire.ReplicationStatus) string {
	if len(st.Peers) == 0 {
		return st.Cluster + ": no peer"
	}
	for _, p := range st.Peers {
		for _, s := range p.Streams {
			if s.Error != "" || s.Halted || s.LagCells > 0 {
				return fmt.Sprintf("%s to %s: lag %d cells, halted %v, error %q, last error %q", st.Cluster, p.Peer, s.LagCells, s.Halted, s.Error, s.LastError)
			}
			for _, sh := range s.Shards {
				if sh.Offset < sh.HighWater {
					return fmt.Sprintf("%s to %s: shard %d at %d of %d", st.Cluster, p.Peer, sh.Shard, sh.Offset, sh.HighWater)
				}
			}
		}
	}
	return ""
}

func (w *ReplicationWorkload) addSettleError(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.settleErrors = append(w.settleErrors, s)
}

// endFaults stops the cuts between the clusters and waits for the last to heal.
func (w *ReplicationWorkload) endFaults() {
	w.mu.Lock()
	stop, done := w.stopFaults, w.faultsDone
	w.stopFaults = nil
	w.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Stop implements ProcessWorkload and SetupWorkload: the cuts end, their chain goes, and the
// peer cluster stops. Safe to call more than once.
func (w *ReplicationWorkload) Stop() {
	w.endFaults()
	w.mu.Lock()
	n, peer := w.net, w.peer
	w.net, w.peer = nil, nil
	w.mu.Unlock()
	if n != nil {
		_ = n.Teardown(context.Background())
	}
	if peer != nil {
		peer.Stop()
	}
}

// Check implements Workload: CheckReplication over every replica of both clusters.
func (w *ReplicationWorkload) Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	v := Verdict{Workload: "replication", Valid: "yes"}
	w.mu.Lock()
	peer, cuts, problems := w.peer, slices.Clone(w.cuts), slices.Clone(w.settleErrors)
	w.mu.Unlock()
	v.Violations = append(v.Violations, problems...)
	if peer == nil {
		v.Valid, v.Violations = "no", append(v.Violations, "no peer cluster")
		return v
	}
	east, err := env.Cluster.ReadBack(ctx, ReplicationDatastore)
	if err == nil {
		var west map[string][]StoredCell
		if west, err = peer.ReadBack(ctx, ReplicationDatastore); err == nil {
			res := CheckReplication(ops, map[string]ClusterCells{
				LocalClusterName: {Cells: east, Replicas: env.Cluster.ShardReplicas(ReplicationDatastore)},
				PeerClusterName:  {Cells: west, Replicas: peer.ShardReplicas(ReplicationDatastore)}})
			res.Cuts = cuts
			v.Details = res
			v.Violations = append(v.Violations, res.Problems...)
		}
	}
	if err != nil {
		v.Violations = append(v.Violations, "reading back datastore replication: "+err.Error())
	}
	if len(v.Violations) > 0 {
		v.Valid = "no"
	}
	return v
}

// peerNodes are the peer cluster's nodes as the worker nemeses' processes.
type peerNodes struct{ w *ReplicationWorkload }

func (p peerNodes) pick(rng *rand.Rand) (*Node, error) {
	p.w.mu.Lock()
	peer := p.w.peer
	p.w.mu.Unlock()
	if peer == nil {
		return nil, errors.New("jepsen: replication: no peer cluster")
	}
	var live []*Node
	for _, n := range peer.Nodes {
		if n.Running() && !n.Paused() {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return nil, errors.New("jepsen: replication: no running node in the peer cluster")
	}
	return live[rng.IntN(len(live))], nil
}

// Kill implements Processes: kill -9 a running west node; it restarts with its data.
func (p peerNodes) Kill(rng *rand.Rand) (string, string, func() error, error) {
	n, err := p.pick(rng)
	if err != nil {
		return "", "", nil, err
	}
	if err := n.Kill(); err != nil {
		return "", "", nil, err
	}
	return PeerClusterName + "/" + n.ID, "kill -9 of a node of the peer cluster", n.Start, nil
}

// Pause implements Processes: SIGSTOP a running west node.
func (p peerNodes) Pause(rng *rand.Rand) (string, string, func() error, error) {
	n, err := p.pick(rng)
	if err != nil {
		return "", "", nil, err
	}
	if err := n.Pause(); err != nil {
		return "", "", nil, err
	}
	return PeerClusterName + "/" + n.ID, "SIGSTOP of a node of the peer cluster", n.Resume, nil
}

// Heal implements Processes: every west node runs, unpaused.
func (p peerNodes) Heal() error {
	p.w.mu.Lock()
	peer := p.w.peer
	p.w.mu.Unlock()
	if peer == nil {
		return nil
	}
	var errs []error
	for _, n := range peer.Nodes {
		switch {
		case n.Paused():
			errs = append(errs, n.Resume())
		case !n.Running():
			errs = append(errs, n.Start())
		}
	}
	return errors.Join(errs...)
}

// Timescale implements Processes: a node's election and lease timeouts are under a second;
// 5 s lets a killed node's streams move to the others before it returns.
func (p peerNodes) Timescale() time.Duration { return 5 * time.Second }

// bodyOrigin is the cluster a body of the workload names as its writer's ("o"), or "".
func bodyOrigin(body string) string {
	var b struct {
		O string `json:"o"`
	}
	_ = json.Unmarshal([]byte(body), &b)
	return b.O
}
