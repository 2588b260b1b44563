package jepsen

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Nemesis kinds. Each starts a fault, holds it, and ends it.
const (
	KillRandom      = "kill-random"      // kill -9 a random node, then restart it
	KillLeader      = "kill-leader"      // kill -9 the leader of a random partition, then restart it
	KillAll         = "kill-all"         // kill -9 every running node at once, then restart them all
	PauseRandom     = "pause-random"     // SIGSTOP a random node, then SIGCONT
	PauseLeader     = "pause-leader"     // SIGSTOP the leader of a random partition, then SIGCONT
	PartitionOne    = "partition-one"    // isolate a random node
	PartitionLeader = "partition-leader" // isolate the leader of a random partition
	PartitionHalves = "partition-halves" // split the nodes into two random halves
	PartitionRing   = "partition-ring"   // majorities ring: each node sees a different majority
	PartitionBridge = "partition-bridge" // two sides joined by one node that sees both
	KillWorker      = "kill-worker"      // kill -9 a random trigger worker, then start it again
	PauseWorker     = "pause-worker"     // SIGSTOP a random trigger worker, then SIGCONT
)

// AllNemeses lists every nemesis kind, in a fixed order. The worker nemeses act on the
// processes of a workload that runs some (the triggers workload); without one, Run drops them.
var AllNemeses = []string{KillRandom, KillLeader, KillAll, PauseRandom, PauseLeader, PartitionOne, PartitionLeader,
	PartitionHalves, PartitionRing, PartitionBridge, KillWorker, PauseWorker}

// ParseNemeses reads a comma-separated list of nemesis kinds, as --nemesis takes it: "none"
// or "" is no nemesis, "all" stands for AllNemeses (AllAsyncNemeses when async), "membership"
// for MembershipNemeses, "capacity" for CapacityNemeses (split), and any other word for itself
// (Run checks the kinds).
func ParseNemeses(list string, async bool) []string {
	var kinds []string
	if list == "none" || list == "" {
		return nil
	}
	for _, k := range strings.Split(list, ",") {
		switch k {
		case "all":
			if async {
				kinds = append(kinds, AllAsyncNemeses...)
			} else {
				kinds = append(kinds, AllNemeses...)
			}
		case "membership":
			kinds = append(kinds, MembershipNemeses...)
		case "capacity":
			kinds = append(kinds, CapacityNemeses...)
		default:
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// NeedsNet reports whether kind cuts links (and so needs iptables).
func NeedsNet(kind string) bool { return strings.HasPrefix(kind, "partition-") }

// IsWorkerNemesis reports whether kind acts on a workload's processes (Processes) rather than
// on the cluster.
func IsWorkerNemesis(kind string) bool { return kind == KillWorker || kind == PauseWorker }

// Processes are the client-side processes a workload runs beside the cluster (the trigger
// workers of the triggers workload), which the worker nemeses kill and pause. Every method is
// safe for concurrent use.
type Processes interface {
	// Kill sends SIGKILL to a running, unpaused process drawn with rng and waits for it to
	// exit. It returns the process's name, a description for the nemesis log, and the function
	// that starts it again (a new incarnation; whether it keeps its identity is drawn with rng).
	Kill(rng *rand.Rand) (name, detail string, restart func() error, err error)
	// Pause sends SIGSTOP to a running, unpaused process drawn with rng. It returns the
	// process's name, a description, and the function that sends SIGCONT.
	Pause(rng *rand.Rand) (name, detail string, resume func() error, err error)
	// Heal resumes every paused process and starts every process that is not running.
	Heal() error
	// Timescale is how long the processes take to notice that a peer is gone (a trigger
	// worker's session timeout). The worker nemeses hold their faults for multiples of it:
	// kill-worker restarts after [0, 2) timescales, pause-worker resumes after [1/2, 5/2), so
	// some pauses outlast the session and the paused worker's leases move while it sleeps.
	Timescale() time.Duration
}

// NemesisConfig schedules faults.
type NemesisConfig struct {
	// Kinds are the nemeses to draw from (AllNemeses when empty).
	Kinds []string
	// Interval is the mean time between the end of one fault and the start of the next; each
	// wait is drawn uniformly from [Interval/2, 3*Interval/2].
	Interval time.Duration
	// FaultDuration is the mean time a fault is held, drawn like Interval. It should exceed the
	// election timeout, so that paused and cut-off leaders are replaced.
	FaultDuration time.Duration
	// CombineProbability is the chance that a fault is two nemeses at once: a process fault
	// (kill or pause) together with a network partition.
	CombineProbability float64
}

// Nemesis injects faults into a cluster on a schedule and logs every start and end (JSON lines,
// times on the history's clock and the wall clock).
type Nemesis struct {
	cfg   NemesisConfig
	c     *Cluster
	net   *Net
	procs Processes
	// storage is the async mode's storage clusters (nil in raft mode).
	storage *Storage
	h       *History
	rng     *rand.Rand
	log     *slog.Logger
	mu      sync.Mutex
	w       io.Writer
	faults  []Fault
	// mem is the state of the membership nemeses (membership.go).
	mem *membership
	// split is the state of the split nemesis (split.go).
	split *splitState
}

// NewNemesis returns a nemesis for c. net may be nil when no kind needs it. Every fault start
// and end is written to w as a JSON line and logged to log.
func NewNemesis(cfg NemesisConfig, c *Cluster, net *Net, h *History, seed uint64, w io.Writer, log *slog.Logger) *Nemesis {
	if len(cfg.Kinds) == 0 {
		cfg.Kinds = AllNemeses
	}
	return &Nemesis{cfg: cfg, c: c, net: net, h: h, rng: rand.New(rand.NewPCG(seed, seed^0x6e656d)), w: w, log: log,
		mem: newMembership(seed, c.HTTPClient()), split: newSplitState(seed)}
}

// SetProcesses gives the worker nemeses their targets. Call it before Run; without it the
// worker kinds are dropped from the schedule.
func (n *Nemesis) SetProcesses(p Processes) { n.procs = p }

// Faults returns the faults started so far (an unfinished one has End 0).
func (n *Nemesis) Faults() []Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Fault(nil), n.faults...)
}

func (n *Nemesis) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(n.rng.Int64N(int64(d)+1))
}

// Run injects faults until ctx ends, then ends the current fault and heals everything (see
// Heal). It returns when the cluster is healed.
//
// A fault is one kind drawn from Kinds or, with probability CombineProbability, one kind of
// each class present among membership changes (MembershipNemeses), node faults (kill, pause),
// network faults (partition-*), worker faults (kill-worker, pause-worker), storage faults
// (async mode) and capacity changes (split); the membership change starts first and, held as
// long as the others, ends last; a split starts last, under the others, and ends at once.
// Without worker, membership and capacity kinds the draws are those of earlier versions, so a
// seed gives the same schedule.
//
// The worker nemeses are dropped when no workload runs processes; the storage nemeses in raft
// mode. The split nemesis runs on every store and in both modes (splitDatastores).
func (n *Nemesis) Run(ctx context.Context) {
	defer n.Heal(context.Background())
	kinds := n.cfg.Kinds
	if n.procs == nil {
		kinds = slices.DeleteFunc(slices.Clone(kinds), IsWorkerNemesis)
		if len(kinds) < len(n.cfg.Kinds) {
			n.log.Info("nemesis: no workload runs processes; worker nemeses dropped")
		}
	}
	if n.storage == nil {
		if k := dropStorageKinds(kinds); len(k) < len(kinds) {
			kinds = k
			n.log.Info("nemesis: no storage clusters (raft mode); storage nemeses dropped")
		}
	}
	if len(kinds) == 0 {
		<-ctx.Done()
		return
	}
	var members, nodes, nets, workers, stores, capacity []string
	for _, k := range kinds {
		switch {
		case IsMembershipNemesis(k):
			members = append(members, k)
		case NeedsNet(k):
			nets = append(nets, k)
		case IsWorkerNemesis(k):
			workers = append(workers, k)
		case IsStorageNemesis(k):
			stores = append(stores, k)
		case IsCapacityNemesis(k):
			capacity = append(capacity, k)
		default:
			nodes = append(nodes, k)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.jitter(n.cfg.Interval)):
		}
		fault := []string{kinds[n.rng.IntN(len(kinds))]}
		if n.rng.Float64() < n.cfg.CombineProbability {
			var classes [][]string
			for _, cl := range [][]string{members, nodes, nets, workers, stores, capacity} {
				if len(cl) > 0 {
					classes = append(classes, cl)
				}
			}
			if len(classes) >= 2 {
				fault = fault[:0]
				for _, cl := range classes {
					fault = append(fault, cl[n.rng.IntN(len(cl))])
				}
			}
		}
		type ending struct {
			hold time.Duration // 0: the fault's drawn duration
			end  func()
		}
		var ends []ending
		for _, k := range fault {
			end, hold, err := n.start(ctx, k)
			if err != nil {
				n.log.Warn("nemesis: fault failed to start", "kind", k, "error", err)
				continue
			}
			ends = append(ends, ending{hold, end})
		}
		d := n.jitter(n.cfg.FaultDuration)
		// End each part after its own hold, the latest started first among equal holds.
		slices.Reverse(ends)
		for i := range ends {
			if ends[i].hold == 0 {
				ends[i].hold = d
			}
		}
		slices.SortStableFunc(ends, func(a, b ending) int { return cmp.Compare(a.hold, b.hold) })
		began := time.Now()
		for _, e := range ends {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(began.Add(e.hold))):
			}
			e.end()
		}
	}
}

// Heal ends every fault still in force: resumes paused nodes, restarts killed ones, drops
// every iptables rule, in async mode restarts killed storage servers and resumes paused
// replication (Storage.Heal), and brings every partition a membership nemesis changed back to
// the voters it must have (healMembership: at most 2 minutes).
func (n *Nemesis) Heal(ctx context.Context) {
	if n.net != nil {
		if err := n.net.Heal(ctx); err != nil {
			n.log.Warn("nemesis: heal network", "error", err)
		}
	}
	for _, node := range n.c.Nodes {
		_ = node.Resume()
		if !node.Running() {
			if err := node.Start(); err != nil {
				n.log.Warn("nemesis: restart", "node", node.ID, "error", err)
			}
		}
	}
	detail := "every node running and resumed, every link restored"
	if n.storage != nil {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := n.storage.Heal(sctx); err != nil {
			n.log.Warn("nemesis: heal storage clusters", "error", err)
		}
		cancel()
		detail += ", every storage server running, every paused replication resumed"
	}
	if n.procs != nil {
		if err := n.procs.Heal(); err != nil {
			n.log.Warn("nemesis: heal worker processes", "error", err)
		}
		detail += ", every worker process running and resumed"
	}
	detail += n.healMembership(ctx)
	n.event("heal", Fault{Kind: "heal", Detail: detail}, n.h.Now())
}

// event records a fault start or end.
func (n *Nemesis) event(what string, f Fault, at int64) {
	rec := struct {
		Time  string `json:"time"`
		At    int64  `json:"at"`
		Event string `json:"event"`
		Fault
	}{time.Now().UTC().Format(time.RFC3339Nano), at, what, f}
	b, _ := json.Marshal(rec)
	n.mu.Lock()
	if n.w != nil {
		_, _ = n.w.Write(append(b, '\n'))
	}
	n.mu.Unlock()
	n.log.Info("nemesis "+what, "kind", f.Kind, "nodes", f.Nodes, "detail", f.Detail, "at", time.Duration(at).Round(time.Millisecond))
}

// begin records the start of f and returns a function recording its end.
func (n *Nemesis) begin(f Fault) func() { return n.beginAt(f, n.h.Now()) }

// beginAt records the start of f at start (the history's clock), which may be past: a fault
// whose start took time (an admin call) starts when it was asked for.
func (n *Nemesis) beginAt(f Fault, start int64) func() {
	f.Start = start
	n.mu.Lock()
	n.faults = append(n.faults, f)
	i := len(n.faults) - 1
	n.mu.Unlock()
	n.event("start", f, f.Start)
	return func() {
		end := n.h.Now()
		n.mu.Lock()
		n.faults[i].End = end
		f = n.faults[i]
		n.mu.Unlock()
		n.event("end", f, end)
	}
}

// target picks a random running node, or the leader of a random partition (a random node when
// no leader is known).
func (n *Nemesis) target(ctx context.Context, leader bool) (*Node, string) {
	if leader {
		ls := n.c.Leaders(ctx)
		if len(ls) > 0 {
			l := ls[n.rng.IntN(len(ls))]
			if node := n.c.Node(l.Leader); node != nil && node.Running() {
				return node, fmt.Sprintf("leader of %s/%d (term %d)", l.Datastore, l.Partition, l.Term)
			}
		}
	}
	var live []*Node
	for _, node := range n.c.Nodes {
		if node.Running() {
			live = append(live, node)
		}
	}
	if len(live) == 0 {
		return nil, ""
	}
	return live[n.rng.IntN(len(live))], "random node"
}

func (n *Nemesis) ips() ([]string, map[string]string) {
	ips := make([]string, len(n.c.Nodes))
	ids := map[string]string{}
	for i, node := range n.c.Nodes {
		ips[i] = node.IP
		ids[node.IP] = node.ID
	}
	return ips, ids
}

// start starts one fault of kind and returns the function that ends it and how long to hold it
// (0: the fault's drawn duration).
func (n *Nemesis) start(ctx context.Context, kind string) (func(), time.Duration, error) {
	if IsWorkerNemesis(kind) {
		return n.startWorkerFault(kind)
	}
	if IsMembershipNemesis(kind) {
		return n.startMembershipFault(ctx, kind)
	}
	if IsCapacityNemesis(kind) {
		return n.startSplit(ctx)
	}
	if IsStorageNemesis(kind) {
		end, err := n.startStorageFault(ctx, kind)
		return end, 0, err
	}
	end, err := n.startClusterFault(ctx, kind)
	return end, 0, err
}

// startWorkerFault kills or pauses one of the workload's processes, held for a random multiple
// of their timescale (see Processes.Timescale).
func (n *Nemesis) startWorkerFault(kind string) (func(), time.Duration, error) {
	if n.procs == nil {
		return nil, 0, fmt.Errorf("%s: no workload runs worker processes", kind)
	}
	scale := int64(n.procs.Timescale())
	var name, detail string
	var undo func() error
	var err error
	var hold time.Duration
	if kind == KillWorker {
		name, detail, undo, err = n.procs.Kill(n.rng)
		hold = time.Duration(n.rng.Int64N(2*scale + 1))
	} else {
		name, detail, undo, err = n.procs.Pause(n.rng)
		hold = time.Duration(scale/2 + n.rng.Int64N(2*scale+1))
	}
	if err != nil {
		return nil, 0, err
	}
	end := n.begin(Fault{Kind: kind, Nodes: []string{name}, Detail: fmt.Sprintf("%s, held %s", detail, hold.Round(time.Millisecond))})
	return func() {
		if err := undo(); err != nil {
			n.log.Warn("nemesis: end worker fault", "kind", kind, "worker", name, "error", err)
		}
		end()
	}, max(hold, time.Millisecond), nil
}

// killAll sends SIGKILL to every running node at once (a power cut of the whole cluster: what
// no node fsynced is gone everywhere) and returns the function that starts them all again.
func (n *Nemesis) killAll() (func(), error) {
	var nodes []*Node
	var ids []string
	for _, node := range n.c.Nodes {
		if node.Running() {
			nodes = append(nodes, node)
			ids = append(ids, node.ID)
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no running node")
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() { errs[i] = node.Kill() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		n.log.Warn("nemesis: kill-all", "error", err)
	}
	end := n.begin(Fault{Kind: KillAll, Nodes: ids, Detail: fmt.Sprintf("%d nodes killed at once", len(nodes))})
	return func() {
		for _, node := range nodes {
			if err := node.Start(); err != nil {
				n.log.Warn("nemesis: restart", "node", node.ID, "error", err)
			}
		}
		end()
	}, nil
}

// startClusterFault starts one fault of kind on the cluster's nodes or links and returns the
// function that ends it.
func (n *Nemesis) startClusterFault(ctx context.Context, kind string) (func(), error) {
	switch kind {
	case KillAll:
		return n.killAll()
	case KillRandom, KillLeader, PauseRandom, PauseLeader:
		node, why := n.target(ctx, kind == KillLeader || kind == PauseLeader)
		if node == nil {
			return nil, fmt.Errorf("no running node")
		}
		f := Fault{Kind: kind, Nodes: []string{node.ID}, Detail: why}
		if strings.HasPrefix(kind, "kill") {
			if err := node.Kill(); err != nil {
				return nil, err
			}
			end := n.begin(f)
			return func() {
				if err := node.Start(); err != nil {
					n.log.Warn("nemesis: restart", "node", node.ID, "error", err)
				}
				end()
			}, nil
		}
		if err := node.Pause(); err != nil {
			return nil, err
		}
		end := n.begin(f)
		return func() {
			_ = node.Resume()
			end()
		}, nil
	}
	if n.net == nil {
		return nil, fmt.Errorf("%s needs iptables", kind)
	}
	ips, ids := n.ips()
	name := func(list []string) []string {
		out := make([]string, len(list))
		for i, ip := range list {
			out[i] = ids[ip]
		}
		return out
	}
	var g Grudge
	var f Fault
	switch kind {
	case PartitionOne, PartitionLeader:
		node, why := n.target(ctx, kind == PartitionLeader)
		if node == nil {
			return nil, fmt.Errorf("no running node")
		}
		rest := slices.DeleteFunc(slices.Clone(ips), func(ip string) bool { return ip == node.IP })
		g = Components([]string{node.IP}, rest)
		f = Fault{Kind: kind, Nodes: []string{node.ID}, Detail: fmt.Sprintf("%s isolated (%s)", node.ID, why)}
	case PartitionHalves:
		shuffled := slices.Clone(ips)
		n.rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		half := len(shuffled) / 2
		a, b := shuffled[:half], shuffled[half:]
		g = Components(a, b)
		f = Fault{Kind: kind, Nodes: name(a), Detail: fmt.Sprintf("%v | %v", name(a), name(b))}
	case PartitionRing:
		shuffled := slices.Clone(ips)
		n.rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		g = MajoritiesRing(shuffled)
		f = Fault{Kind: kind, Nodes: name(shuffled), Detail: "ring " + strings.Join(name(shuffled), " -> ")}
	case PartitionBridge:
		shuffled := slices.Clone(ips)
		n.rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		var bridge string
		g, bridge = Bridge(shuffled)
		mid := len(shuffled) / 2
		f = Fault{Kind: kind, Nodes: []string{ids[bridge]},
			Detail: fmt.Sprintf("%v | bridge %s | %v", name(shuffled[:mid]), ids[bridge], name(shuffled[mid+1:]))}
	default:
		return nil, fmt.Errorf("unknown nemesis %q", kind)
	}
	if err := n.net.Cut(ctx, g); err != nil {
		_ = n.net.Heal(context.Background())
		return nil, err
	}
	end := n.begin(f)
	return func() {
		if err := n.net.Heal(context.Background()); err != nil {
			n.log.Warn("nemesis: heal network", "error", err)
		}
		end()
	}, nil
}
