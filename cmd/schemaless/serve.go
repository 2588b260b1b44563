package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/node"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/peering"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/spf13/cobra"
)

type serveFlags struct {
	// splitLoad and splitLoadWindow set load-based splitting (cluster.AutoSplitConfig).
	splitLoad       float64
	splitLoadWindow time.Duration
	// splitSize sets size-based splitting (cluster.AutoSplitConfig.Size), in MiB.
	splitSize int64
	// mergeAfter sets automatic merges (cluster.AutoSplitConfig.MergeAfter).
	mergeAfter  time.Duration
	logs        logFlags
	config      string
	nodeID      string
	dataDir     string
	mysqlDSN    string
	mysqlPrefix string
	// store is --store; storeSet whether it was given (--mysql implies mysql unless it was).
	store         string
	storeSet      bool
	pebbleCache   int
	pebbleMemTbl  int
	bind          string
	apiCfg        api.Config
	heartbeat     time.Duration
	quiesceAfter  time.Duration
	election      time.Duration
	leaderLease   time.Duration
	snapThreshold uint64
	snapInterval  time.Duration
	trailingLogs  uint64
	batchCells    int
	inflight      int
	sqliteSync    string
	sqliteCache   int
	sqliteRCache  int
	sqliteWAL     int
	sqliteReaders int
	hbFastPath    bool
	commitNotify  bool
	commitTimeout time.Duration
	replDepth     int
	logStore      string
	indexPoll     time.Duration
	adminAddr     string
	raftAddr      string
	httpAddr      string
	gossipAddr    string
	gossipBind    string
	zone          string
	clusterName   string
	join          []string
	sec           securityFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one node of a cluster",
		Long: `Run one node: it hosts the node's partition replicas (from --config), serves the HTTP API on the
node's http_addr and raft plus node-to-node traffic on its raft_addr. Cells are stored in an
embedded store under --data-dir (--store: pebble, the default, or sqlite), or in MySQL/MariaDB
with --mysql. With --store pebble, a node whose --data-dir holds an SQLite store (sqlite/, from
an earlier --store sqlite) migrates it: each partition is copied into pebble when the node
first opens it, and its files are then moved to sqlite.migrated/, which may be deleted
afterwards. SIGINT or SIGTERM stops it cleanly.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.storeSet = cmd.Flags().Changed("store")
			return runServe(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	f.logs.register(cmd)
	f.sec.register(cmd)
	d := api.DefaultConfig()
	pd := partition.DefaultConfig()
	fl.StringVar(&f.config, "config", "", "topology file (YAML; see docs/operations.md) (required)")
	fl.StringVar(&f.nodeID, "node-id", "", "this node's id in the topology (required)")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory for raft logs, snapshots and the embedded store (pebble/ or sqlite/) (required)")
	fl.StringVar(&f.store, "store", storage.EnginePebble, "where cells are stored: pebble (one embedded pebble store per node, <data-dir>/pebble; an existing <data-dir>/sqlite is migrated into it: each partition is copied when the node first opens it, then its files are moved to <data-dir>/sqlite.migrated), sqlite (one embedded SQLite file per partition, <data-dir>/sqlite) or mysql (the server of --mysql, which implies it)")
	fl.StringVar(&f.mysqlDSN, "mysql", "", "store cells in this MySQL/MariaDB server (go-sql-driver DSN, e.g. root@tcp(127.0.0.1:3306)/) instead of the embedded store; implies --store mysql")
	fl.StringVar(&f.mysqlPrefix, "mysql-prefix", "", "prefix of this node's MySQL database names (default sl_<node-id>)")
	fl.StringVar(&f.bind, "bind", "", "listen address of the raft transport (default the node's raft_addr)")
	fl.Int64Var(&f.apiCfg.MaxCellBodyBytes, "max-body-bytes", d.MaxCellBodyBytes, "largest cell body, in bytes of JSON")
	fl.Int64Var(&f.apiCfg.MaxRequestBytes, "max-request-bytes", d.MaxRequestBytes, "largest request body, in bytes")
	fl.IntVar(&f.apiCfg.MaxBatchCells, "max-batch-cells", d.MaxBatchCells, "most cells in one put_cells request or keys in one batch get")
	fl.DurationVar(&f.apiCfg.RequestTimeout, "request-timeout", d.RequestTimeout, "time limit of one API request; a write still running answers 504 indeterminate")
	fl.DurationVar(&f.apiCfg.MaxWait, "max-wait", d.MaxWait, "longest wait a long-polling log read may ask for (get_cells_for_shard wait=)")
	fl.DurationVar(&f.apiCfg.BodyReadTimeout, "body-read-timeout", d.BodyReadTimeout, "time limit to receive a request's body; later answers 408 and closes the connection (a restore: time limit between reads; negative: none)")
	fl.IntVar(&f.apiCfg.MaxInflightPerConn, "max-inflight-per-conn", d.MaxInflightPerConn, "most API requests in flight on one connection (HTTP/2); more answer 429 with Retry-After (negative: no limit)")
	fl.IntVar(&f.apiCfg.MaxInflightPerPrincipal, "max-inflight-per-principal", d.MaxInflightPerPrincipal, "most API requests in flight for one client: its authenticated principal with --principals-file (or the topology's principals file), else its IP address; more answer 429 with Retry-After (negative: no limit; /healthz and /readyz are never refused)")
	fl.Int64Var(&f.apiCfg.MaxIndexRequestBytes, "max-index-request-bytes", d.MaxIndexRequestBytes, "largest body of an index definition, alias or query request, in bytes")
	fl.IntVar(&f.apiCfg.DefaultIndexLimit, "default-index-limit", d.DefaultIndexLimit, "page size of an index query without a limit")
	fl.IntVar(&f.apiCfg.MaxIndexLimit, "max-index-limit", d.MaxIndexLimit, "largest limit of an index query")
	fl.IntVar(&f.apiCfg.MaxIndexConds, "max-index-conds", d.MaxIndexConds, "most conditions (where) in an index query")
	fl.IntVar(&f.apiCfg.MaxTransactionConditions, "max-transaction-conditions", d.MaxTransactionConditions, "most conditions in one transaction (at most 100)")
	fl.IntVar(&f.apiCfg.MaxIndexInValues, "max-index-in-values", d.MaxIndexInValues, "most values of one 'in' condition of an index query")
	fl.IntVar(&f.apiCfg.MaxIndexColumns, "max-index-columns", d.MaxIndexColumns, "most columns whose latest cells an index query fetches")
	fl.DurationVar(&f.apiCfg.IndexCatalogTTL, "index-catalog-ttl", d.IndexCatalogTTL, "how long a node reuses its read of the index catalog to resolve queries (negative: read it for every query)")
	fl.DurationVar(&f.indexPoll, "index-poll-interval", node.DefaultConfig().Maintainer.PollInterval, "how often the index maintainer reads the index catalog (starts builds, marks versions ready, finishes drops)")
	fl.Float64Var(&f.splitLoad, "split-load", 2500, "load-based splitting: a raft partition this node leads splits when it serves more than this many requests per second (cells written, keys and rows read) for --split-load-window, at the shard that best halves its load; 0 turns it off (a datastore's split_load overrides it)")
	fl.DurationVar(&f.splitLoadWindow, "split-load-window", 10*time.Second, "load-based splitting: how long a partition's load must stay above --split-load")
	fl.Int64Var(&f.splitSize, "split-size", 512, "size-based splitting: a raft partition this node leads splits when its cells and shard logs take more than this many MiB on disk (the store's estimate, read every 10s), at the shard that best halves its size; 0 turns it off (a datastore's split_size, in bytes, overrides it)")
	fl.DurationVar(&f.mergeAfter, "merge-after", 10*time.Minute, "automatic merges: a raft partition made by a load- or size-based split at least this long ago merges back into its left neighbour once both have had no request for this long (they quiesced, see --quiesce-after) and take less than half of --split-size together; splits an operator made and a datastore's first partitions never merge on their own; 0 turns it off")
	fl.DurationVar(&f.heartbeat, "heartbeat-timeout", pd.HeartbeatTimeout, "raft heartbeat timeout")
	fl.DurationVar(&f.election, "election-timeout", pd.ElectionTimeout, "raft election timeout")
	fl.DurationVar(&f.quiesceAfter, "quiesce-after", 2*time.Second, "a raft partition with no requests for this long, its followers caught up, quiesces: no heartbeats or timers until its next request; its followers then elect a new leader only when gossip reports the leader's node down (0: never quiesce; needs gossip)")
	fl.DurationVar(&f.commitTimeout, "commit-timeout", pd.CommitTimeout, "raft commit tick: a partition's leader sends a follower that may lack its commit index an AppendEntries every commit-timeout to twice that, so followers apply a write that long after the leader at most (hashicorp/raft's default is 50ms)")
	fl.DurationVar(&f.leaderLease, "leader-lease-timeout", pd.LeaderLeaseTimeout, "raft leader lease timeout")
	fl.Uint64Var(&f.snapThreshold, "snapshot-threshold", pd.SnapshotThreshold, "raft log entries between snapshots")
	fl.DurationVar(&f.snapInterval, "snapshot-interval", pd.SnapshotInterval, "how often raft checks whether to snapshot (randomized between 1x and 2x)")
	fl.Uint64Var(&f.trailingLogs, "trailing-logs", pd.TrailingLogs, "raft log entries kept after a snapshot; a follower further behind catches up by snapshot")
	fl.IntVar(&f.batchCells, "max-entry-cells", pd.MaxBatchCells, "most cells grouped into one raft entry")
	fl.IntVar(&f.inflight, "max-inflight", pd.MaxInflight, "raft entries in flight per partition before requests are grouped")
	fl.StringVar(&f.logStore, "raft-log-store", pd.LogStore, "raft log format: auto (a replica keeps the format its directory holds, a new one gets "+partition.AutoLogStoreForNewReplica+"), node (one pebble store per node, <data-dir>/raftlog, holding every replica's log: appends of all partitions share fsyncs), wal (hashicorp/raft-wal per replica, one fdatasync per append) or bolt (raft-boltdb per replica, two fdatasync per append, the log mapped in memory); with node, wal or bolt, a replica directory in another format refuses to start")
	fl.IntVar(&f.replDepth, "replication-depth", peering.DefaultPipelineDepth, "pages of one shard a stream to a peer cluster has on their way at once (1 to 64): the peer applies them in their order, so a page need not wait for the round trip of the one before it; 1 sends a shard's next page only once the peer answered")
	fl.BoolVar(&f.commitNotify, "raft-commit-notify", false, "a raft partition's leader sends its followers each new commit index at once, not at the next entries or commit tick: stale and follower reads and the streams between clusters see a write a few ms sooner, for 4 to 12% more CPU per write")
	fl.BoolVar(&f.hbFastPath, "raft-heartbeat-fast-path", false, "let raft handle heartbeats beside its main loop, as hashicorp/raft does by default; UNSAFE: exposes hashicorp/raft issue 695 (logs can diverge after a partition heals)")
	fl.IntVar(&f.pebbleCache, "pebble-cache-mib", storage.DefaultPebbleCacheMiB, "with --store pebble: pebble's block cache, shared by every partition of the node, in MiB (at least 8)")
	fl.IntVar(&f.pebbleMemTbl, "pebble-memtable-mib", storage.DefaultPebbleMemTableMiB, "with --store pebble: size of one pebble memtable, in MiB (4 to 1024); pebble keeps up to four before writes wait for their flushes")
	fl.StringVar(&f.sqliteSync, "sqlite-synchronous", "NORMAL", "SQLite PRAGMA synchronous: NORMAL (the raft log covers power loss) or FULL")
	fl.IntVar(&f.sqliteCache, "sqlite-cache-kib", storage.DefaultSQLiteCacheKiB, "SQLite page cache of each partition's write connection, in KiB (at least 64); outside Go's heap, and a 4 KiB page takes an 8 KiB slot")
	fl.IntVar(&f.sqliteWAL, "sqlite-wal-checkpoint-pages", storage.DefaultSQLiteWALCheckpointPages, "SQLite PRAGMA wal_autocheckpoint of each partition (at least 100): WAL pages that start a checkpoint; more means fewer checkpoints and fsyncs and a larger WAL file (up to about this many 4 KiB pages per partition)")
	fl.IntVar(&f.sqliteRCache, "sqlite-read-cache-kib", storage.DefaultSQLiteReadCacheKiB, "SQLite page cache of each read connection, in KiB (at least 64)")
	fl.IntVar(&f.sqliteReaders, "sqlite-read-conns", storage.DefaultSQLiteReadConns, "SQLite read connections per partition (at least 1)")
	fl.StringVar(&f.raftAddr, "raft-addr", "", "this node's raft address, for a node joining a running cluster that is not in --config's nodes (with --http-addr)")
	fl.StringVar(&f.httpAddr, "http-addr", "", "this node's HTTP API address, for a node that is not in --config's nodes")
	fl.StringVar(&f.gossipAddr, "gossip-addr", "", "host:port this node gossips membership on (TCP and UDP; default the topology's gossip_addr; none: no gossip)")
	fl.StringVar(&f.clusterName, "cluster-name", "", "the cluster's name among clusters that replicate to each other (1 to 32 of [a-z0-9-], starting with a letter; every node of a cluster the same; default the topology's cluster_name)")
	fl.StringVar(&f.zone, "zone", "", "the node's zone (failure domain: a datacenter's zone, a rack), announced by gossip; placement keeps each partition's voters in distinct zones (default the topology's zone; none: no zone)")
	fl.StringVar(&f.gossipBind, "gossip-bind", "", "listen address of the gossip (default --gossip-addr)")
	fl.StringSliceVar(&f.join, "join", nil, "gossip addresses of running nodes to join through (default the topology's other nodes' gossip_addr)")
	fl.StringVar(&f.adminAddr, "admin-addr", "", "host:port of an admin listener serving /metrics and net/http/pprof's /debug/pprof/ (default none)")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagRequired("node-id")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

func runServe(ctx context.Context, f serveFlags) error {
	logger, err := f.logs.logger(os.Stderr)
	if err != nil {
		return err
	}
	routeLibraryLogs(logger)
	if f.indexPoll < 0 {
		return fmt.Errorf("--index-poll-interval %s: must not be negative", f.indexPoll)
	}
	if f.quiesceAfter < 0 {
		return fmt.Errorf("--quiesce-after %s: must not be negative (0: never quiesce)", f.quiesceAfter)
	}
	if f.mergeAfter < 0 {
		return fmt.Errorf("--merge-after %s: must not be negative (0: off)", f.mergeAfter)
	}
	if f.splitSize < 0 || f.splitSize > 1<<30 {
		return fmt.Errorf("--split-size %d: want 0 (off) to %d MiB", f.splitSize, 1<<30)
	}
	if f.replDepth < 1 || f.replDepth > 64 {
		return fmt.Errorf("--replication-depth %d: want 1 to 64", f.replDepth)
	}
	engine, err := f.engine()
	if err != nil {
		return err
	}
	if err := f.checkStoreTuning(); err != nil {
		return err
	}
	top, err := topology.Load(f.config)
	if err != nil {
		return err
	}
	self, inTopology := top.Node(f.nodeID)
	var selfOverride *topology.NodeSpec
	switch {
	case !inTopology && (f.raftAddr == "" || f.httpAddr == ""):
		return fmt.Errorf("--node-id %q is not in %s: give --raft-addr and --http-addr to join a running cluster", f.nodeID, f.config)
	case !inTopology:
		self = topology.NodeSpec{ID: f.nodeID, RaftAddr: f.raftAddr, HTTPAddr: f.httpAddr, GossipAddr: f.gossipAddr}
		selfOverride = &self
	case f.gossipAddr != "" && f.gossipAddr != self.GossipAddr:
		self.GossipAddr = f.gossipAddr
		selfOverride = &self
	}
	if f.zone != "" && f.zone != self.Zone {
		if !topology.ZonePattern.MatchString(f.zone) {
			return fmt.Errorf("--zone %q must match %s", f.zone, topology.ZonePattern)
		}
		self.Zone = f.zone
		selfOverride = &self
	}
	if f.clusterName != "" {
		if err := cells.ValidateClusterName("--cluster-name", f.clusterName); err != nil {
			return fmt.Errorf("--cluster-name %q: want 1 to %d bytes of [a-z0-9-], starting with a letter", f.clusterName, cells.MaxClusterNameLen)
		}
	}
	if selfOverride != nil && selfOverride.GossipAddr == "" && len(f.join) > 0 {
		return fmt.Errorf("--join needs --gossip-addr")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sec, err := f.sec.load(ctx, top.Security.For(f.nodeID), logger)
	if err != nil {
		return err
	}
	defer sec.Close()
	raftListen, gossipListen := f.bind, f.gossipBind
	if raftListen == "" {
		raftListen = self.RaftAddr
	}
	if gossipListen == "" {
		gossipListen = self.GossipAddr
	}
	if err := checkExposure(sec, f.sec.insecure, [][2]string{{"http_addr", self.HTTPAddr}, {"raft_addr", raftListen},
		{"admin", f.adminAddr}, {"gossip", gossipListen}}); err != nil {
		return err
	}

	store, err := f.openStore(ctx, engine, logger)
	if err != nil {
		return err
	}
	defer store.Close()

	pc := partition.DefaultConfig()
	pc.HeartbeatTimeout, pc.ElectionTimeout, pc.LeaderLeaseTimeout = f.heartbeat, f.election, f.leaderLease
	pc.SnapshotThreshold, pc.MaxBatchCells, pc.MaxInflight = f.snapThreshold, f.batchCells, f.inflight
	pc.HeartbeatFastPath = f.hbFastPath
	pc.CommitNotify = f.commitNotify
	pc.CommitTimeout = f.commitTimeout
	pc.QuiesceAfter = f.quiesceAfter
	pc.LogStore = f.logStore
	pc.SnapshotInterval, pc.TrailingLogs = f.snapInterval, f.trailingLogs
	// /metrics, on the API's address and --admin-addr: the process's series here, the node's
	// (store, replicas, FSM, API, index maintainer) registered by node.Start.
	registry := prometheus.NewRegistry()
	if err := node.RegisterProcessMetrics(registry); err != nil {
		return err
	}
	cfg := node.DefaultConfig()
	c := &cfg.Cluster
	c.NodeID, c.Topology, c.DataDir, c.Store, c.Partition = f.nodeID, top, f.dataDir, store, pc
	c.BindAddr, c.Self, c.Join, c.GossipBindAddr = f.bind, selfOverride, f.join, f.gossipBind
	c.ClusterName = f.clusterName
	c.AutoSplit = cluster.AutoSplitConfig{Load: f.splitLoad, Window: f.splitLoadWindow, Size: f.splitSize << 20, MergeAfter: f.mergeAfter}
	cfg.Maintainer.PollInterval = f.indexPoll
	cfg.Replication.Triggers.PipelineDepth = f.replDepth
	cfg.API, cfg.AdminAddr, cfg.Registry, cfg.Logger = f.apiCfg, f.adminAddr, registry, logger
	cfg.TLS, cfg.Auth, cfg.Audit, c.GossipKeys = sec.Certs, sec.Auth, sec.Audit, sec.GossipKeys
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "node", f.nodeID)
		// The maintainer leaves its groups, the leaderships move, the API drains: node.Shutdown.
		if err := n.Shutdown(context.Background()); err != nil {
			logger.Warn("shutdown", "error", err)
		}
		return nil
	case err := <-n.Failed():
		// The store failed and a replica stopped applying (or the API's listener failed): stop
		// the node so a restart replays the log (never serve from a replica that may have
		// diverged).
		if errors.Is(err, node.ErrFatal) {
			logger.Error("fatal storage failure, stopping", "error", err)
		}
		_ = n.Close()
		return err
	}
}

// engine returns the store --store, --mysql and whether --store was given select:
// storage.EnginePebble, EngineSQLite or EngineMySQL. --mysql alone selects mysql; --mysql with
// --store given as anything else, --store mysql without --mysql and an unknown --store are
// errors naming the flags.
func (f serveFlags) engine() (string, error) {
	if f.mysqlDSN != "" {
		if f.storeSet && f.store != storage.EngineMySQL {
			return "", fmt.Errorf("--store %s with --mysql: --mysql stores cells in MySQL/MariaDB; drop --mysql, or give --store mysql (or no --store)", f.store)
		}
		return storage.EngineMySQL, nil
	}
	switch f.store {
	case storage.EnginePebble, storage.EngineSQLite:
		return f.store, nil
	case storage.EngineMySQL:
		return "", errors.New("--store mysql needs --mysql DSN")
	default:
		return "", fmt.Errorf("--store %q: want %s, %s or %s", f.store, storage.EnginePebble, storage.EngineSQLite, storage.EngineMySQL)
	}
}

// checkStoreTuning reports the first --pebble-* or --sqlite-* flag out of range (whichever
// store is used).
func (f serveFlags) checkStoreTuning() error {
	switch {
	case f.pebbleCache < 8:
		return fmt.Errorf("--pebble-cache-mib %d: want at least 8", f.pebbleCache)
	case f.pebbleMemTbl < 4 || f.pebbleMemTbl > 1024:
		return fmt.Errorf("--pebble-memtable-mib %d: want 4 to 1024", f.pebbleMemTbl)
	case f.sqliteCache < 64:
		return fmt.Errorf("--sqlite-cache-kib %d: want at least 64", f.sqliteCache)
	case f.sqliteRCache < 64:
		return fmt.Errorf("--sqlite-read-cache-kib %d: want at least 64", f.sqliteRCache)
	case f.sqliteWAL < 100:
		return fmt.Errorf("--sqlite-wal-checkpoint-pages %d: want at least 100", f.sqliteWAL)
	case f.sqliteReaders < 1:
		return fmt.Errorf("--sqlite-read-conns %d: want at least 1", f.sqliteReaders)
	}
	return nil
}

// openStore opens the node's store of engine (see engine).
func (f serveFlags) openStore(ctx context.Context, engine string, logger *slog.Logger) (*storage.Store, error) {
	switch engine {
	case storage.EngineMySQL:
		prefix := f.mysqlPrefix
		if prefix == "" {
			prefix = storage.NodePrefix(f.nodeID)
		}
		return storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: f.mysqlDSN, Prefix: prefix})
	case storage.EngineSQLite:
		return storage.OpenSQLite(ctx, storage.SQLiteConfig{Dir: filepath.Join(f.dataDir, "sqlite"), Synchronous: f.sqliteSync,
			CacheKiB: f.sqliteCache, ReadCacheKiB: f.sqliteRCache, ReadConns: f.sqliteReaders, WALCheckpointPages: f.sqliteWAL})
	}
	cfg, err := f.pebbleConfig(logger)
	if err != nil {
		return nil, err
	}
	return storage.OpenPebble(ctx, cfg)
}

// pebbleConfig is the store of --store pebble: <data-dir>/pebble, migrating <data-dir>/sqlite
// when that directory exists (storage.PebbleConfig.MigrateSQLiteDir).
func (f serveFlags) pebbleConfig(logger *slog.Logger) (storage.PebbleConfig, error) {
	cfg := storage.PebbleConfig{Dir: filepath.Join(f.dataDir, "pebble"), CacheMiB: f.pebbleCache, MemTableMiB: f.pebbleMemTbl,
		Logger: logger.With("component", "pebble")}
	sqliteDir := filepath.Join(f.dataDir, "sqlite")
	switch fi, err := os.Stat(sqliteDir); {
	case err == nil && fi.IsDir():
		cfg.MigrateSQLiteDir = sqliteDir
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return storage.PebbleConfig{}, fmt.Errorf("--data-dir: %w", err)
	}
	return cfg, nil
}

// routeLibraryLogs sends what libraries log outside the loggers serve passes them to logger,
// so that --log-format and --log-level apply to every line: the standard library's log package
// (slog.SetDefault) and go-sql-driver/mysql's connection errors.
func routeLibraryLogs(logger *slog.Logger) {
	slog.SetDefault(logger)
	storage.SetDriverLogger(logger.With("component", "mysql"))
}
