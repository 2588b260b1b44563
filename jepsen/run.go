package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// Config is one harness run. Use DefaultConfig and change what differs.
type Config struct {
	// Binary is the schemaless executable the nodes run.
	Binary string
	// OutDir receives one directory per run, named after the start time and the seed.
	OutDir string
	// Nodes is 3 or 5.
	Nodes int
	// FirstIP, HTTPPort and RaftPort place the nodes (see ClusterConfig).
	FirstIP            string
	HTTPPort, RaftPort int
	// Chain names the iptables chain of the network faults; runs at the same time need
	// different chains (and different addresses).
	Chain string
	// Store is every node's store (serve --store): "pebble" (DefaultConfig's), "sqlite", or
	// "mysql" with MySQLDSN. In async mode the nodes hold none of the datastores' cells.
	Store string
	// MySQLDSN is the MySQL/MariaDB server of Store "mysql" (and only then set). The run's
	// databases are dropped at the end unless Keep is set.
	MySQLDSN string
	// Keep leaves the MySQL databases in place after the run (node data directories always stay
	// in the run's directory).
	Keep bool
	// Workloads names the workloads to run (keys of Workloads).
	Workloads []string
	// WorkersPerNode is the number of client processes per node and workload.
	WorkersPerNode int
	// Consistency of the cells workload's reads: "strong" (linearizable, the default) or
	// "stale" (which the checker must catch under partitions).
	Consistency string
	// FailOver lets a worker's client try other nodes when its own does not answer.
	FailOver bool
	// OpTimeout bounds one operation; RequestTimeout one HTTP attempt of it. Short, so that
	// faults produce indeterminate outcomes rather than long waits.
	OpTimeout, RequestTimeout time.Duration
	// Duration is the whole traffic phase, Quiet its fault-free end: faults stop at
	// Duration-Quiet, everything is healed, and traffic goes on until Duration.
	Duration, Quiet time.Duration
	// Nemesis schedules the faults; Kinds empty means none (NemesisConfig.Kinds nil is all:
	// set Nemesis.Kinds to AllNemeses explicitly).
	Nemesis NemesisConfig
	// ServeArgs are extra `schemaless serve` flags (raft timeouts).
	ServeArgs []string
	// Secure runs the nodes with TLS (mutual TLS between nodes), bearer tokens and gossip
	// encryption, from a development bundle under the run's directory (ClusterConfig.Secure);
	// every client of the harness trusts its CA and sends the admin token. In async mode the
	// storage servers stay plaintext.
	Secure bool
	// Snapshots makes the nodes snapshot often and keep few log entries after a snapshot
	// (SnapshotArgs), so that a node that was down or cut off catches up by InstallSnapshot and
	// the FSM's Snapshot and Restore run under faults.
	Snapshots bool
	// ConvergeTimeout bounds the wait for replicas to agree after the traffic stops.
	ConvergeTimeout time.Duration
	// CheckTimeout bounds the linearizability search (0: none).
	CheckTimeout time.Duration
	// Seed drives every random choice of the harness (keys, operations, faults, their timing).
	Seed uint64
	// Mode is the datastores' mode: "raft" (the default) or "async": the harness then starts
	// StorageClusters MariaDB storage clusters (a master and StorageMinions minions each, with
	// GTID replication) and makes every workload's datastores async datastores on them (see
	// Storage); only AsyncWorkloads run there.
	Mode string
	// UnsafeNoBufferedWrites (async mode) turns the datastores' buffered writes off
	// (unsafe_no_buffered_writes: true), to show what they protect against: a failover then
	// loses the writes the old master acknowledged that no minion received.
	UnsafeNoBufferedWrites bool
	// StorageFirstIP is the loopback address of the first storage server (async mode); the
	// others follow (see StorageConfig). It must not collide with the nodes' addresses.
	StorageFirstIP string
	// Logger receives progress; Out the printed summary.
	Logger *slog.Logger
	Out    io.Writer
}

// SnapshotArgs are the serve flags of Config.Snapshots: a snapshot every 256 entries (checked
// every 2 to 4 s), 64 entries kept after it.
var SnapshotArgs = []string{"--snapshot-threshold", "256", "--snapshot-interval", "2s", "--trailing-logs", "64"}

// DefaultConfig is a 3-node run on pebble stores of 2 minutes with every nemesis and the
// workloads cells, durability and triggers.
func DefaultConfig() Config {
	return Config{
		Binary: "schemaless", OutDir: ".data/jepsen", Nodes: 3, Store: storage.EnginePebble,
		FirstIP: "127.0.0.2", HTTPPort: 17070, RaftPort: 17170, Chain: "SLJEPSEN",
		Workloads: []string{"cells", "durability", "triggers"}, WorkersPerNode: 2, Consistency: "strong", FailOver: true,
		OpTimeout: 3 * time.Second, RequestTimeout: time.Second,
		Duration: 2 * time.Minute, Quiet: 15 * time.Second,
		Nemesis: NemesisConfig{Kinds: AllNemeses, Interval: 4 * time.Second, FaultDuration: 5 * time.Second, CombineProbability: 0.2},
		ServeArgs: []string{"--heartbeat-timeout", "500ms", "--election-timeout", "500ms",
			"--leader-lease-timeout", "250ms", "--request-timeout", "2s"},
		Snapshots: true, ConvergeTimeout: 2 * time.Minute, CheckTimeout: 5 * time.Minute,
		Seed: uint64(time.Now().UnixNano()), Mode: topology.ModeRaft, StorageFirstIP: "127.0.1.2", Logger: slog.Default(), Out: os.Stdout,
	}
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("jepsen: "+format, args...)) }
	if c.Nodes != 3 && c.Nodes != 5 {
		bad("nodes %d: want 3 or 5", c.Nodes)
	}
	switch c.Store {
	case storage.EnginePebble, storage.EngineSQLite:
		if c.MySQLDSN != "" {
			bad("store %s with a MySQL DSN: the DSN is for store mysql", c.Store)
		}
	case storage.EngineMySQL:
		if c.MySQLDSN == "" {
			bad("store mysql needs a MySQL DSN")
		}
	default:
		bad("store %q: want pebble, sqlite or mysql", c.Store)
	}
	if len(c.Workloads) == 0 {
		bad("no workload")
	}
	for _, w := range c.Workloads {
		if Workloads[w] == nil {
			bad("unknown workload %q", w)
		}
	}
	async := c.Mode == topology.ModeAsync
	if c.Mode != topology.ModeRaft && !async {
		bad("mode %q: want %s or %s", c.Mode, topology.ModeRaft, topology.ModeAsync)
	}
	for _, k := range c.Nemesis.Kinds {
		switch {
		case IsStorageNemesis(k) && !async:
			bad("nemesis %q acts on the storage clusters of --mode async", k)
		case IsMembershipNemesis(k) && async:
			bad("nemesis %q changes raft configurations: raft mode only", k)
		case !slices.Contains(AllNemeses, k) && !IsStorageNemesis(k) && !IsMembershipNemesis(k) && !IsCapacityNemesis(k):
			bad("unknown nemesis %q (know %s, %s, %s; in async mode also %s)", k, strings.Join(AllNemeses, ", "),
				strings.Join(MembershipNemeses, ", "), strings.Join(CapacityNemeses, ", "), strings.Join(AsyncNemeses, ", "))
		}
	}
	if async {
		for _, w := range c.Workloads {
			if !slices.Contains(AsyncWorkloads, w) {
				bad("workload %q does not run in async mode (%s do)", w, strings.Join(AsyncWorkloads, ", "))
			}
		}
		if c.MySQLDSN != "" {
			bad("async mode starts its own storage clusters: no MySQL store for the nodes")
		}
		if net.ParseIP(c.StorageFirstIP).To4() == nil {
			bad("storage first IP %q is not an IPv4 address", c.StorageFirstIP)
		}
	} else if c.UnsafeNoBufferedWrites {
		bad("unsafe_no_buffered_writes is for async mode")
	}
	// Worker nemeses alone need a workload with processes (with others, they are dropped).
	if len(c.Nemesis.Kinds) > 0 && !slices.ContainsFunc(c.Nemesis.Kinds, func(k string) bool { return !IsWorkerNemesis(k) }) &&
		!slices.ContainsFunc(c.Workloads, func(w string) bool {
			if Workloads[w] == nil {
				return false
			}
			_, ok := Workloads[w]().(ProcessWorkload)
			return ok
		}) {
		bad("nemeses %s need a workload with processes (triggers)", strings.Join(c.Nemesis.Kinds, ", "))
	}
	if c.Consistency != client.ConsistencyStrong && c.Consistency != client.ConsistencyStale {
		bad("consistency %q: want strong or stale", c.Consistency)
	}
	if c.Chain == "" || len(c.Chain) > 28 {
		bad("iptables chain %q: want 1 to 28 characters", c.Chain)
	}
	if slices.Contains(c.Workloads, "replication") {
		if len(c.Chain) > 27 {
			bad("iptables chain %q: the replication workload's cuts use it with a suffix: want at most 27 characters", c.Chain)
		}
		if ip := net.ParseIP(c.FirstIP).To4(); ip != nil && int(ip[3])+PeerIPOffset+c.Nodes > 254 {
			bad("first IP %s: the replication workload's peer cluster starts %d addresses further: want a last byte of at most %d", c.FirstIP, PeerIPOffset, 254-PeerIPOffset-c.Nodes)
		}
	}
	if c.WorkersPerNode < 1 {
		bad("workers per node %d: want at least 1", c.WorkersPerNode)
	}
	if c.Duration <= 0 || c.Quiet < 0 || c.Quiet >= c.Duration {
		bad("duration %s and quiet %s: want 0 <= quiet < duration", c.Duration, c.Quiet)
	}
	if c.OpTimeout <= 0 || c.RequestTimeout <= 0 {
		bad("timeouts must be positive")
	}
	if len(c.Nemesis.Kinds) > 0 && (c.Nemesis.Interval <= 0 || c.Nemesis.FaultDuration <= 0) {
		bad("nemesis interval and fault duration must be positive")
	}
	return errors.Join(errs...)
}

// Summary is a run's verdict, written to summary.json and printed.
type Summary struct {
	Dir  string `json:"dir"`
	Seed uint64 `json:"seed"`
	// Mode is the datastores' mode, raft or async; Unsafe is Config.UnsafeNoBufferedWrites;
	// Secure is Config.Secure (the nodes ran with TLS, tokens and encrypted gossip).
	Mode        string   `json:"mode"`
	Unsafe      bool     `json:"unsafe_no_buffered_writes,omitempty"`
	Store       string   `json:"store"`
	Nodes       int      `json:"nodes"`
	Consistency string   `json:"consistency"`
	Snapshots   bool     `json:"snapshots"`
	Secure      bool     `json:"secure"`
	Seconds     float64  `json:"seconds"`
	Nemeses     []string `json:"nemeses"`
	// Ops counts operations by workload, function and outcome ("cells put ok": 12).
	Ops map[string]int `json:"ops"`
	// Faults counts fault windows by kind.
	Faults map[string]int `json:"faults"`
	// Membership counts the membership nemeses' admin calls by operation and outcome
	// ("remove-voter ok": 3, "add-voter failed": 1); nil when none ran. See AdminOp.
	Membership map[string]int `json:"membership,omitempty"`
	// Partitions counts each datastore's partitions at the end, as the checks saw them
	// (the catalog's map); nil when no split happened.
	Partitions map[string]int `json:"partitions,omitempty"`
	// Verdicts are the workloads' results.
	Verdicts []Verdict `json:"verdicts"`
	// Linearizable is the cells workload's linearizability: "yes", "no", "unknown" or "" (not
	// run).
	Linearizable string `json:"linearizable"`
	// Lost, Unexpected, Corrupted and Duplicated count the durability workload's problem cells
	// (per replica; in async mode Lost counts distinct cells).
	Lost       int `json:"lost"`
	Unexpected int `json:"unexpected"`
	Corrupted  int `json:"corrupted"`
	Duplicated int `json:"duplicated"`
	// Async holds the figures of an async run (nil in raft mode).
	Async *AsyncSummary `json:"async,omitempty"`
	// Violations lists every violation found, one line each.
	Violations []string `json:"violations"`
	// Valid is true when no violation was found and every check could decide.
	Valid bool `json:"valid"`
}

// Run starts a cluster, runs the workloads while the nemesis injects faults, heals, checks and
// reports into a new directory under cfg.OutDir. It returns the summary (Valid false on any
// violation or undecided check) and an error only when the harness itself could not run.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	start := time.Now().UTC()
	dir := filepath.Join(cfg.OutDir, fmt.Sprintf("%s-seed%d", start.Format("20060102T150405Z"), cfg.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dir, _ = filepath.Abs(dir)
	store := cfg.Store
	async := cfg.Mode == topology.ModeAsync
	if async {
		store = "async"
		if cfg.UnsafeNoBufferedWrites {
			store = "async, UNSAFE: no buffered writes"
		}
	}
	log.Info("jepsen: run", "dir", dir, "seed", cfg.Seed, "mode", cfg.Mode, "store", store, "nodes", cfg.Nodes, "secure", cfg.Secure, "duration", cfg.Duration, "snapshots", cfg.Snapshots,
		"nemeses", cfg.Nemesis.Kinds, "workloads", cfg.Workloads, "consistency", cfg.Consistency)

	var net *Net
	if slices.ContainsFunc(cfg.Nemesis.Kinds, NeedsNet) {
		net = NewNet(cfg.Chain)
		if err := net.Setup(ctx); err != nil {
			return nil, err
		}
		defer net.Teardown(context.Background())
	}

	workloads := make([]Workload, len(cfg.Workloads))
	cc := ClusterConfig{Binary: cfg.Binary, Dir: dir, Nodes: cfg.Nodes, FirstIP: cfg.FirstIP, HTTPPort: cfg.HTTPPort,
		RaftPort: cfg.RaftPort, Store: cfg.Store, MySQLDSN: cfg.MySQLDSN, MySQLPrefix: fmt.Sprintf("jp%06d", cfg.Seed%1000000), ServeArgs: cfg.ServeArgs,
		Secure: cfg.Secure}
	if cfg.Snapshots {
		cc.ServeArgs = append(slices.Clone(cfg.ServeArgs), SnapshotArgs...)
	}
	if slices.Contains(cfg.Workloads, "replication") {
		cc.ClusterName = LocalClusterName
	}
	for i, name := range cfg.Workloads {
		workloads[i] = Workloads[name]()
		cc.Datastores = append(cc.Datastores, workloads[i].Datastores()...)
	}
	if cfg.MySQLDSN != "" && !cfg.Keep {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := storage.DropMySQLPrefix(ctx, cfg.MySQLDSN, cc.MySQLPrefix); err != nil {
				log.Warn("jepsen: drop the run's databases", "prefix", cc.MySQLPrefix, "error", err)
			}
		}()
	}
	var st *Storage
	if async {
		startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		var err error
		st, err = StartStorage(startCtx, StorageConfig{Dir: filepath.Join(dir, "mysql"), FirstIP: cfg.StorageFirstIP,
			Links: slices.ContainsFunc(cfg.Nemesis.Kinds, NeedsLinks), Chain: cfg.Chain, Logger: log})
		cancel()
		if err != nil {
			return nil, err
		}
		defer st.Close() // after the nodes stop (deferred later)
		for i := range cc.Datastores {
			cc.Datastores[i] = st.Datastore(cc.Datastores[i], cfg.UnsafeNoBufferedWrites)
		}
		log.Info("jepsen: storage clusters ready", "clusters", StorageClusters, "minions", StorageMinions, "first", cfg.StorageFirstIP)
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := StartCluster(startCtx, cc)
	cancel()
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	log.Info("jepsen: cluster ready", "nodes", len(c.Nodes), "secure", c.Secure())

	histFile, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer histFile.Close()
	nemFile, err := os.Create(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		return nil, err
	}
	defer nemFile.Close()
	h := NewHistory(histFile)

	// Workloads with processes of their own start them now; the first one's are the worker
	// nemeses' targets.
	startEnv := &StartEnv{Cluster: c, Binary: cfg.Binary, Dir: dir, History: h, RequestTimeout: cfg.RequestTimeout, Seed: cfg.Seed,
		Nemeses: cfg.Nemesis.Kinds, FaultsFor: cfg.Duration - cfg.Quiet, Chain: cfg.Chain, Logger: log}
	var procs Processes
	for _, wl := range workloads {
		pw, ok := wl.(ProcessWorkload)
		if !ok {
			continue
		}
		defer pw.Stop()
		startCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := pw.Start(startCtx, startEnv)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("jepsen: start the processes of workload %s: %w", wl.Name(), err)
		}
		if procs == nil {
			procs = pw.Processes()
		}
	}

	for _, wl := range workloads {
		sw, ok := wl.(SetupWorkload)
		if !ok {
			continue
		}
		defer sw.Stop()
		setupCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := sw.Setup(setupCtx, startEnv)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("jepsen: set up workload %s: %w", wl.Name(), err)
		}
	}

	// Traffic until Duration; faults until Duration-Quiet, then heal.
	trafficCtx, stopTraffic := context.WithTimeout(ctx, cfg.Duration)
	defer stopTraffic()
	var wg sync.WaitGroup
	process := 0
	for _, wl := range workloads {
		for _, node := range c.Nodes {
			for k := 0; k < cfg.WorkersPerNode; k++ {
				wk, err := newWorker(cfg, c, node, process, h)
				if err != nil {
					return nil, err
				}
				process++
				wg.Add(1)
				go func() {
					defer wg.Done()
					for trafficCtx.Err() == nil {
						wl.Step(trafficCtx, wk)
					}
				}()
			}
		}
	}
	nem := NewNemesis(cfg.Nemesis, c, net, h, cfg.Seed, nemFile, log)
	if procs != nil {
		nem.SetProcesses(procs)
	}
	if st != nil {
		nem.SetStorage(st)
	}
	for _, wl := range workloads {
		if nw, ok := wl.(NoSplitWorkload); ok {
			nem.SetNoSplit(nw.NoSplitDatastores()...)
		}
	}
	if len(cfg.Nemesis.Kinds) > 0 {
		faultCtx, stopFaults := context.WithTimeout(ctx, cfg.Duration-cfg.Quiet)
		nem.Run(faultCtx)
		stopFaults()
	} else {
		<-trafficCtx.Done()
	}
	wg.Wait()
	end := h.Now()
	if err := h.Flush(); err != nil {
		return nil, fmt.Errorf("jepsen: write history: %w", err)
	}
	ops := h.Ops()
	faults := nem.Faults()
	log.Info("jepsen: traffic stopped", "ops", len(ops), "faults", len(faults))

	sum := &Summary{Dir: dir, Seed: cfg.Seed, Mode: cfg.Mode, Unsafe: cfg.UnsafeNoBufferedWrites, Store: store, Nodes: cfg.Nodes, Consistency: cfg.Consistency, Snapshots: cfg.Snapshots,
		Secure: cfg.Secure, Seconds: float64(end) / 1e9, Nemeses: cfg.Nemesis.Kinds, Ops: map[string]int{}, Faults: map[string]int{}}
	for _, o := range ops {
		sum.Ops[fmt.Sprintf("%s %s %s", o.Workload, o.F, o.Outcome)]++
	}
	for _, f := range faults {
		sum.Faults[f.Kind]++
	}
	for _, op := range nem.AdminOps() {
		if sum.Membership == nil {
			sum.Membership = map[string]int{}
		}
		outcome := "ok"
		if !op.OK {
			outcome = "failed"
		}
		sum.Membership[op.Op+" "+outcome]++
	}

	// Heal is done; let the workloads' processes finish and stop, wait for every replica to
	// agree, then check.
	for _, wl := range workloads {
		if pw, ok := wl.(ProcessWorkload); ok {
			pw.Settle(ctx, end)
		}
	}
	convCtx, cancel := context.WithTimeout(ctx, cfg.ConvergeTimeout)
	var busy []string
	for _, wl := range workloads {
		if bw, ok := wl.(BusyWorkload); ok {
			busy = append(busy, bw.BusyDatastores()...)
		}
	}
	var convErr error
	if st != nil {
		convErr = st.WaitQuiet(convCtx, c, asyncDatastores(c.Topology()))
		if convErr == nil && sum.Faults[Split]+sum.Faults[Merge] > 0 {
			// The checks read each partition's shards from its storage cluster: learn the
			// partitions the splits and merges left (raft mode learns them in WaitConverged).
			convErr = c.refreshPartitions(convCtx)
		}
	} else {
		convErr = c.WaitConverged(convCtx, busy...)
	}
	cancel()
	if convErr != nil {
		sum.Violations = append(sum.Violations, convErr.Error())
	}
	if sum.Faults[Split]+sum.Faults[Merge] > 0 {
		sum.Partitions = map[string]int{}
		for _, d := range c.Topology().Datastores {
			sum.Partitions[d.Name] = len(d.Partitions)
		}
	}
	env := &CheckEnv{Cluster: c, Dir: dir, End: end, Faults: faults, CheckTimeout: cfg.CheckTimeout, History: h, Storage: st}
	if st != nil {
		sum.Async = &AsyncSummary{Failovers: st.Failovers(), Out: st.Out()}
	}
	for _, wl := range workloads {
		v := wl.Check(ctx, env, ops)
		sum.Verdicts = append(sum.Verdicts, v)
		for _, line := range v.Violations {
			sum.Violations = append(sum.Violations, wl.Name()+": "+line)
		}
		if v.Valid == "unknown" {
			sum.Violations = append(sum.Violations, wl.Name()+": the check could not decide in time")
		}
		switch d := v.Details.(type) {
		case DurabilityResult:
			sum.Lost, sum.Unexpected, sum.Corrupted, sum.Duplicated = len(d.Lost), len(d.Unexpected), len(d.Corrupted), len(d.Duplicated)
		case AsyncDurabilityResult:
			sum.Lost, sum.Unexpected, sum.Corrupted, sum.Duplicated = d.LostKeys, len(d.Unexpected), len(d.Corrupted), len(d.Duplicated)
			if sum.Async != nil {
				sum.Async.Durability = &d
			}
		case AsyncCellsResult:
			if sum.Async != nil {
				sum.Async.Cells = &d
			}
		case map[string]any:
			if lin, ok := d["linearizability"].(LinResult); ok {
				sum.Linearizable = lin.Result
			}
		}
	}
	sum.Valid = len(sum.Violations) == 0
	if err := WritePlot(filepath.Join(dir, "latency.png"), ops, faults, end); err != nil {
		log.Warn("jepsen: plot", "error", err)
	}
	if err := writeJSON(filepath.Join(dir, "summary.json"), sum); err != nil {
		return sum, err
	}
	if cfg.Out != nil {
		sum.Print(cfg.Out)
	}
	return sum, nil
}

func newWorker(cfg Config, c *Cluster, node *Node, process int, h *History) (*Worker, error) {
	cc := c.ClientConfig()
	cc.Endpoints = []string{node.URL()}
	if cfg.FailOver {
		for _, o := range c.Nodes {
			if o != node {
				cc.Endpoints = append(cc.Endpoints, o.URL())
			}
		}
	}
	cc.RequestTimeout = cfg.RequestTimeout
	cc.MaxAttempts = 3
	cc.BackoffBase = 20 * time.Millisecond
	cc.BackoffMax = 200 * time.Millisecond
	cl, err := client.New(cc)
	if err != nil {
		return nil, err
	}
	seed := cfg.Seed + uint64(process)*0x9e3779b97f4a7c15
	return &Worker{Process: process, Node: node, Client: cl, Rand: rand.New(rand.NewPCG(seed, uint64(process))),
		History: h, OpTimeout: cfg.OpTimeout, Consistency: cfg.Consistency, Seed: cfg.Seed, Async: cfg.Mode == topology.ModeAsync}, nil
}

// Print writes the summary for people.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "\njepsen run %s\n", s.Dir)
	if s.Async != nil {
		fmt.Fprintf(w, "  seed %d, %d nodes, mode %s, %.0fs, reads strong and stale\n", s.Seed, s.Nodes, s.Store, s.Seconds)
	} else {
		fmt.Fprintf(w, "  seed %d, %d nodes, store %s, %.0fs, reads %s, frequent snapshots %v\n", s.Seed, s.Nodes, s.Store, s.Seconds, s.Consistency, s.Snapshots)
	}
	if s.Secure {
		fmt.Fprintf(w, "  security: on (TLS on the API and between nodes, bearer tokens, encrypted gossip)\n")
	} else {
		fmt.Fprintf(w, "  security: off (plain HTTP, no tokens)\n")
	}
	fmt.Fprintf(w, "  faults:")
	for _, k := range slices.Sorted(maps.Keys(s.Faults)) {
		fmt.Fprintf(w, " %s %d", k, s.Faults[k])
	}
	fmt.Fprintln(w)
	if len(s.Membership) > 0 {
		var calls []string
		for _, k := range slices.Sorted(maps.Keys(s.Membership)) {
			calls = append(calls, fmt.Sprintf("%s %d", k, s.Membership[k]))
		}
		fmt.Fprintf(w, "  membership admin calls: %s\n", strings.Join(calls, ", "))
	}
	if len(s.Partitions) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(s.Partitions)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.Partitions[k]))
		}
		fmt.Fprintf(w, "  partitions after the splits and merges: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "  operations:\n")
	for _, k := range slices.Sorted(maps.Keys(s.Ops)) {
		fmt.Fprintf(w, "    %-28s %7d\n", k, s.Ops[k])
	}
	if s.Linearizable != "" {
		fmt.Fprintf(w, "  linearizable: %s\n", s.Linearizable)
	}
	for _, v := range s.Verdicts {
		switch d := v.Details.(type) {
		case DurabilityResult:
			fmt.Fprintf(w, "  durability: %d acknowledged, %d indeterminate (%d stored), %d failed; lost %d, unexpected %d, corrupted %d, duplicated %d, diverged shards %d\n",
				d.Acknowledged, d.Indeterminate, d.Recovered, d.Failed, len(d.Lost), len(d.Unexpected), len(d.Corrupted), len(d.Duplicated), len(d.Diverged))
		case TriggersResult:
			fmt.Fprintf(w, "  triggers: %d acknowledged, %d indeterminate (%d delivered), %d failed, %d of other columns; %d deliveries by %d worker incarnations, %d duplicates; lost %d, unexpected %d, order violations %d, skipped %d, commits lost %d of %d accepted; %d lease changes (%d rewinds); caught up in %.1fs\n",
				d.Acknowledged, d.Indeterminate, d.Recovered, d.Failed, d.OtherWritten, d.Delivered, d.Incarnations, d.Duplicates,
				len(d.Lost), len(d.Unexpected), len(d.OrderViolations), len(d.Skipped), len(d.LostCommits), d.Commits, d.LeaseChanges, d.Rewinds, d.CatchUpSeconds)
		case CasResult:
			fmt.Fprintf(w, "  cas: linearizable %s (%d operations, %d registers, %.1fs); %d reads, conditional writes: %d written, %d refused (412), %d conflicts, %d unavailable, %d indeterminate\n",
				d.Linearizability.Result, d.Linearizability.Operations, d.Linearizability.Registers, d.Linearizability.Seconds,
				d.Reads, d.Written, d.Refused, d.Conflicts, d.Unavailable, d.Unknown)
			if d.Excused != nil {
				fmt.Fprintf(w, "  cas in failover windows (excused): linearizable %s (%d registers)\n", d.Excused.Result, d.Excused.Registers)
			}
			if b := d.Bounded; b != nil {
				fmt.Fprintf(w, "  cas reads bounded at %s: %d answered, %d refused; stale %d, invented %d\n", b.Bound, b.Reads, b.Refused, len(b.Stale), len(b.Invented))
			}
		case BankResult:
			fmt.Fprintf(w, "  bank: %d accounts, total %d; %d reads; %d transfers: %d committed (%.0f%%), %d refused (412, %.0f%%), %d conflicts, %d unavailable, %d indeterminate, %d invalid; %d final versions; bad reads %d, invented %d, torn %d, stale %d, lost updates %d, bad answers %d, final %d\n",
				d.Accounts, d.Total, d.Reads, d.Transfers, d.Committed, 100*d.CommitRate, d.Refused, 100*d.RefusedRate, d.Conflicts, d.Unavailable, d.Unknown, d.Invalid,
				d.FinalVersions, d.BadReads.Count, d.Invented.Count, d.Torn.Count, d.Stale.Count, d.LostUpdates.Count, d.BadAnswers.Count, d.Final.Count)
			if d.Excused.Count > 0 {
				fmt.Fprintf(w, "  bank, excused by failovers: %d problems, first: %s\n", d.Excused.Count, d.Excused.Examples[0])
			}
		case IndexResult:
			fmt.Fprintf(w, "  index: %d rows, %d acknowledged cells, %d indeterminate, %d failed, %d changing k; %d entries (%d marked), %d stored rows; %d queries (%d entries), %d query errors; lost %d, stale %d, unexpected %d, invented %d, duplicated %d, misplaced %d, wrong marks %d, diverged %d; highest lag %d cells, caught up in %.1fs (bound %.0fs)\n",
				d.Rows, d.Acknowledged, d.Indeterminate, d.Failed, d.KChanges, d.Entries, d.Marked, d.StoredRows, d.Queries, d.QueryEntries, d.QueryErrors,
				len(d.Lost), len(d.Stale), len(d.Unexpected), len(d.Invented), len(d.Duplicated), len(d.Misplaced), len(d.Marks), len(d.Diverged),
				d.MaxLagCells, d.CatchUpSeconds, d.BoundSeconds)
		}
	}
	if s.Async != nil {
		s.Async.print(w, s.Unsafe)
	}
	if s.Valid {
		fmt.Fprintf(w, "  verdict: valid, no violation found\n")
		return
	}
	fmt.Fprintf(w, "  verdict: INVALID, %d violations:\n", len(s.Violations))
	for _, v := range s.Violations {
		fmt.Fprintf(w, "    - %s\n", v)
	}
}
