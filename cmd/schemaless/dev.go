package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/internal/launcher"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/spf13/cobra"
)

type devFlags struct {
	dataDir      string
	nodes        int
	host         string
	httpPort     int
	raftPort     int
	gossipPort   int
	adminPort    int
	logStore     string
	quiesce      string
	splitLoad    string
	commitNotify bool
	commitTick   string
	replDepth    int
	zones        []string
	clusterName  string
	// clusters is 1, or 2 for east and west replicating both ways (devclusters.go), with
	// peerDelay each way between them.
	clusters   int
	peerDelay  time.Duration
	shards     int
	partitions int
	// store is --store, the nodes' embedded store; storeSet whether it was given (refused
	// with --mysql).
	store      string
	storeSet   bool
	mysqlDSN   string
	fresh      bool
	importPath string
	airports   string
	importOpts importFlags
	logLevel   string
	triggers   bool
	indexes    bool
	schema     bool
	// mode is the trips datastore's mode: raft, or async on a replicated MariaDB set that dev
	// starts on ports mariadbPort and up (devasync.go); or mixed: trips in raft mode and rides
	// in async mode on that set (devmixed.go).
	mode        string
	mariadbPort int
	// secure runs the nodes with TLS (mutual between nodes), tokens and gossip encryption
	// from a development bundle under <data-dir>/certs (devsecure.go); sec is that bundle.
	secure bool
	sec    *security.DevBundle
}

func newDevCmd() *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster: 3 node processes, datastore trips in raft (or async) mode, or both modes (mixed)",
		Long: `Run a local cluster in one command: --nodes processes of 'schemaless serve' on --host, HTTP on
ports --http-port, --http-port+1, ..., raft on --raft-port, ..., one datastore 'trips' in raft mode
with --shards shards in --partitions partitions replicated on every node. Cells are stored in
each node's embedded store under --data-dir (--store: pebble, the default, or sqlite; a node
directory holding SQLite data from an earlier run is migrated into pebble, see serve --store),
or in MySQL/MariaDB with --mysql. It prints a line starting with
"ready" when every node serves, optionally imports flights (--import), and runs until Ctrl-C.
Each node logs to <data-dir>/<node>.log. Data persists across runs; --fresh starts empty.

With --triggers (the default) it also runs two consumer groups on the trips' BASE cells, two
workers each, started before the import so they handle cells as they land: "billing" writes a
STATUS cell with the fare (25 USD + 0.11 USD a mile), "delay-compensation" a FARE_ADJUSTMENT
cell with a credit for flights more than 60 minutes late. After an import it waits for both to
catch up, prints their figures and checks every flight's STATUS cell. They log to
<data-dir>/triggers.log; 'schemaless triggers status' shows them.

With --indexes (the default) it defines the index flights_by_origin (the flights sharded on
their origin airport, with date, destination, delay and distance) before the import; the nodes'
built-in maintainers fill it as cells land. After the import it waits until the index has caught
up, runs example queries (such as the flights out of ORD on 2001-01-03 with a delay over 60
minutes) and checks each against a brute-force scan of the imported flights.

With --schema (the default) it registers examples/schemas/trips_base.json as the JSON Schema of
the BASE column before the import: every BASE cell is then validated when written (a missing
airport or a negative distance is refused with 400 schema_violation); 'schemaless schema list'
shows it.

With --mode async the datastore trips is in async mode instead: dev first starts 6 MariaDB
servers (it needs mariadbd and mariadb-install-db installed), 2 storage clusters c0 and c1 of a
master and 2 minions each with GTID row-based asynchronous replication, on ports --mariadb-port to
--mariadb-port+5 of --host (c0: master +0, minions +1 and +2; c1: +3, +4, +5), data under
<data-dir>/mariadb. The datastore user is schemaless (read_only fences it), the admin user root
(no password). Partition i is on cluster c(i mod 2); every node serves every partition, and a
write is buffered on the other cluster's master before its own master takes it. The servers are
children of dev: Ctrl-C stops the nodes, then them; they also die if dev is killed. The import,
the triggers and the index work as in raft mode. The ready banner lists each cluster's current
master and minions and the command that fails a cluster over:

  bin/schemaless admin promote --topology <data-dir>/topology.yaml --datastore trips --cluster c0

(kill the master's mariadbd first to try a failover; 'schemaless admin storage --topology ...'
shows the replication state). Data persists: on a restart over existing data the servers come
back on their data directories, and in each cluster the member that was the master when dev
stopped (the one the minions replicate from, the promoted one after a failover) is made master
again; a fenced old master stays fenced. --fresh deletes everything, servers' data included.

With --mode mixed both modes run in the same nodes, as operators run them side by side: trips
in raft mode, as without --mode, and a second datastore, rides, in async mode on the MariaDB
servers of --mode async (the same ports, clusters, restart and failover; --shards and
--partitions apply to both; --mysql, if given, holds trips' cells). The import, the triggers
and the index run on trips. After an import, the first 1000 flights (fewer with a lower
--limit) also go into rides and are read back, strong and stale, to show its writes and reads.
The ready banner lists both datastores, the storage clusters and the command that fails rides'
cluster c0 over:

  bin/schemaless admin promote --topology <data-dir>/topology.yaml --datastore rides --cluster c0

Killing c0's master shows what an async outage does to a mixed cluster: rides is unready
(/readyz?datastore=rides answers 503 naming c0), its strong reads of c0's partitions fail fast
with a retryable 503 and its stale reads are still served; trips, and every node's /readyz,
stay ready.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.storeSet = cmd.Flags().Changed("store")
			return runDev(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", ".data/dev", "directory of the cluster's data and logs")
	fl.IntVar(&f.nodes, "nodes", 3, "number of nodes")
	fl.StringVar(&f.host, "host", "127.0.0.1", "address the nodes listen on")
	fl.IntVar(&f.httpPort, "http-port", 7070, "HTTP port of the first node; the others follow")
	fl.IntVar(&f.raftPort, "raft-port", 7170, "raft port of the first node; the others follow")
	fl.IntVar(&f.adminPort, "admin-port", 0, "admin port (/metrics and /debug/pprof/, see serve --admin-addr) of the first node; the others follow (default 0: none)")
	fl.StringVar(&f.logStore, "raft-log-store", "", "raft log format of the nodes' replicas, as serve --raft-log-store: auto, node, wal or bolt (default serve's, auto)")
	fl.StringVar(&f.quiesce, "quiesce-after", "", "idle time after which the nodes' raft partitions quiesce, as serve --quiesce-after (default serve's, 2s; 0: never)")
	fl.StringVar(&f.splitLoad, "split-load", "", "requests per second above which a raft partition splits on its own, as serve --split-load (default serve's, 2500; 0: never by load)")
	fl.StringVar(&f.commitTick, "commit-timeout", "", "raft commit tick of the nodes' partitions, as serve --commit-timeout (default serve's, 5ms)")
	fl.IntVar(&f.replDepth, "replication-depth", 0, "as serve --replication-depth: pages of one shard on their way to the peer cluster at once (default serve's)")
	fl.BoolVar(&f.commitNotify, "raft-commit-notify", false, "as serve --raft-commit-notify: leaders send followers each new commit index at once")
	fl.IntVar(&f.gossipPort, "gossip-port", 0, "gossip (membership) port of the first node, TCP and UDP; the others follow (default --raft-port+100; -1: no gossip)")
	fl.StringVar(&f.clusterName, "cluster-name", "", "the cluster's name (cluster_name in the topology), needed to replicate to another cluster (docs/operations.md, Two datacenters)")
	fl.IntVar(&f.clusters, "clusters", 1, "clusters to start: 1, or 2 (east on the given ports, west 1000 ports up) replicating trips both ways (docs/operations.md, Two datacenters)")
	fl.DurationVar(&f.peerDelay, "peer-delay", 0, "with --clusters 2: the delay each way between the clusters, through TCP proxies in front of each node (their ports 500 up from the nodes' HTTP ports)")
	fl.StringSliceVar(&f.zones, "zones", nil, "zones of the nodes, node i in the i-th modulo their count (e.g. a,b,c: n1 and n4 in a); placement keeps each partition's voters in distinct zones (default none)")
	fl.IntVar(&f.shards, "shards", 64, "shards of the trips datastore")
	fl.IntVar(&f.partitions, "partitions", 4, "partitions of the trips datastore")
	fl.StringVar(&f.store, "store", storage.EnginePebble, "the nodes' embedded store, as serve --store: pebble (an existing SQLite store of a node is migrated into it) or sqlite; not with --mysql")
	fl.StringVar(&f.mysqlDSN, "mysql", "", "store cells in this MySQL/MariaDB server (DSN) instead of the embedded store")
	fl.BoolVar(&f.fresh, "fresh", false, "delete --data-dir (and the nodes' MySQL databases) before starting")
	fl.StringVar(&f.importPath, "import", "", "after start, import this flights CSV (.csv or .csv.gz) and read it back")
	fl.StringVar(&f.airports, "airports", "testdata/airports.csv", "airports CSV joined into imported trips")
	fl.StringVar(&f.logLevel, "log-level", "info", "nodes' (and triggers') log level")
	fl.BoolVar(&f.triggers, "triggers", true, "run the example trigger groups billing and delay-compensation")
	fl.BoolVar(&f.indexes, "indexes", true, "define the example index flights_by_origin and run example queries after an import")
	fl.BoolVar(&f.schema, "schema", true, "register the JSON Schema of the trips' BASE cells (examples/schemas/trips_base.json) before the import")
	fl.StringVar(&f.mode, "mode", topology.ModeRaft, "mode of the trips datastore: raft, or async (on MariaDB servers dev starts); or mixed: trips in raft mode and rides in async mode")
	fl.IntVar(&f.mariadbPort, "mariadb-port", 7400, "with --mode async or mixed: port of the first MariaDB server; the other 5 follow")
	fl.BoolVar(&f.secure, "secure", false, "run the nodes with TLS (mutual TLS between nodes), bearer tokens with roles and encrypted gossip, from a development CA, certificates, tokens and gossip key created under <data-dir>/certs (kept across runs); the ready banner prints the curl flags")
	f.importOpts.registerTuning(cmd)
	return cmd
}

func (f devFlags) topology() *topology.Topology {
	t := &topology.Topology{ClusterName: f.clusterName}
	for i := 0; i < f.nodes; i++ {
		t.Nodes = append(t.Nodes, topology.NodeSpec{
			ID:       fmt.Sprintf("n%d", i+1),
			RaftAddr: net.JoinHostPort(f.host, strconv.Itoa(f.raftPort+i)),
			HTTPAddr: net.JoinHostPort(f.host, strconv.Itoa(f.httpPort+i)),
		})
		if len(f.zones) > 0 {
			t.Nodes[i].Zone = f.zones[i%len(f.zones)]
		}
		switch gp := f.gossipPort; {
		case gp == 0:
			t.Nodes[i].GossipAddr = net.JoinHostPort(f.host, strconv.Itoa(f.raftPort+100+i))
		case gp > 0:
			t.Nodes[i].GossipAddr = net.JoinHostPort(f.host, strconv.Itoa(gp+i))
		}
	}
	t.Datastores = []topology.DatastoreSpec{{Name: "trips", Mode: topology.ModeRaft, Shards: f.shards, PartitionCount: f.partitions}}
	switch f.mode {
	case topology.ModeAsync:
		t.Datastores = []topology.DatastoreSpec{f.asyncDatastore()}
	case devModeMixed:
		t.Datastores = append(t.Datastores, f.asyncDatastore())
	}
	return t
}

func runDev(ctx context.Context, f devFlags) error {
	if f.nodes < 1 {
		return fmt.Errorf("--nodes %d: want at least 1", f.nodes)
	}
	if f.clusters > 1 || f.clusters < 0 {
		return runDevClusters(ctx, f)
	}
	if f.peerDelay != 0 {
		return errors.New("--peer-delay is for --clusters 2")
	}
	if f.clusterName != "" {
		if err := cells.ValidateClusterName("--cluster-name", f.clusterName); err != nil {
			return fmt.Errorf("--cluster-name %q: want 1 to %d bytes of [a-z0-9-], starting with a letter", f.clusterName, cells.MaxClusterNameLen)
		}
	}
	for _, z := range f.zones {
		if !topology.ZonePattern.MatchString(z) {
			return fmt.Errorf("--zones: %q must match %s", z, topology.ZonePattern)
		}
	}
	switch f.mode {
	case topology.ModeRaft:
	case topology.ModeAsync, devModeMixed:
		if f.mysqlDSN != "" && f.mode == topology.ModeAsync {
			return errors.New("--mysql is for --mode raft: in --mode async the cells live on the MariaDB servers dev starts")
		}
		if f.mariadbPort < 1 || f.mariadbPort+devAsyncClusters*(devAsyncMinions+1)-1 > 65535 {
			return fmt.Errorf("--mariadb-port %d: want 1..%d", f.mariadbPort, 65535-devAsyncClusters*(devAsyncMinions+1)+1)
		}
		if err := f.checkMariadbPorts(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--mode %q: want %s, %s or %s", f.mode, topology.ModeRaft, topology.ModeAsync, devModeMixed)
	}
	if err := f.checkStore(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	top := f.topology()
	if err := f.topology().Normalize(); err != nil { // before --fresh deletes anything
		return err
	}
	if f.fresh {
		if err := os.RemoveAll(f.dataDir); err != nil {
			return err
		}
		if f.mysqlDSN != "" {
			if err := dropDevDatabases(ctx, f.mysqlDSN, top); err != nil {
				return err
			}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The nodes die with this process, even on kill -9. In their own process groups, Ctrl-C
	// reaches only this process, which stops the trigger workers (they leave their groups)
	// before it stops the nodes.
	nodes, err := launcher.New(launcher.Config{Binary: exe, Dir: f.dataDir, Topology: top, Secure: f.secure,
		Args: f.serveArgs, DieWithParent: true})
	if errors.Is(err, launcher.ErrTopologyChanged) {
		return fmt.Errorf("%s holds a cluster with another topology; pass --fresh to start over, or another --data-dir", f.dataDir)
	}
	if err != nil {
		return err
	}
	top, f.sec = nodes.Topology(), nodes.Security()
	var storage *devStorage
	if f.usesMariaDB() {
		if storage, err = startDevStorage(ctx, f); err != nil {
			return err
		}
		// Deferred before the nodes' stop, so it runs after it: nodes first, then MariaDB.
		defer storage.stop()
	}
	defer nodes.Stop()
	if err := nodes.Start(); err != nil {
		return err
	}
	endpoints := nodes.URLs()
	cl, err := client.New(f.clientConfig(endpoints, "trips"))
	if err != nil {
		return err
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = nodes.WaitReady(rctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	store, layout := f.store, ""
	if f.mysqlDSN != "" {
		store = "mysql"
	}
	if f.mode == devModeMixed {
		printMixedReady(f, time.Since(start), store, endpoints)
	} else {
		if storage != nil {
			store, layout = "mariadb", fmt.Sprintf(" on %d storage clusters", devAsyncClusters)
		}
		fmt.Printf("ready: %d nodes in %.1fs, store %s, datastore trips (%s, %d shards, %d partitions%s), http %v, data %s\n",
			f.nodes, time.Since(start).Seconds(), store, f.mode, f.shards, f.partitions, layout, endpoints, f.dataDir)
	}
	if storage != nil {
		storage.print(ctx, top)
	}
	demoCfg := examples.DemoConfig{Client: cl, Out: os.Stdout, Index: f.indexes, Schema: f.schema}
	if f.triggers {
		closeLog, err := f.triggerLog(&demoCfg)
		if err != nil {
			return err
		}
		defer closeLog() // after the groups stop
	}
	demo, err := examples.StartDemo(ctx, demoCfg)
	if err != nil {
		return err
	}
	defer demo.Stop() // before the nodes stop: the workers leave their groups
	if f.importPath != "" {
		err := demo.Import(ctx, f.importPath, f.airports, f.importOpts.limit, func(ctx context.Context) (examples.ImportStats, error) {
			return importFlights(ctx, cl, f.importPath, f.airports, f.importOpts)
		})
		if err != nil {
			return err
		}
		if f.mode == devModeMixed {
			if err := devRidesDemo(ctx, endpoints, f); err != nil {
				return err
			}
		}
	}
	if f.secure {
		printSecureCurls(endpoints, f.sec)
	} else {
		printCurls(endpoints[0])
	}
	if f.mode == devModeMixed {
		printMixedCurls(endpoints[0], storage)
	}
	if storage != nil {
		fmt.Printf("  bin/schemaless admin storage --topology %s\n  %s\n", nodes.TopologyPath(), storage.promoteCommand(0))
	}
	fmt.Println("serving; Ctrl-C to stop")
	if err := nodes.WaitExit(ctx); err != nil {
		return err
	}
	fmt.Println("stopping")
	return nil
}

// checkStore refuses a --store other than pebble and sqlite, and --store given with --mysql.
func (f devFlags) checkStore() error {
	switch {
	case f.mysqlDSN != "" && f.storeSet:
		return fmt.Errorf("--store %s with --mysql: the nodes store cells in MySQL/MariaDB with --mysql; give one of them", f.store)
	case f.store != storage.EnginePebble && f.store != storage.EngineSQLite:
		return fmt.Errorf("--store %q: want %s or %s (or --mysql DSN for MySQL/MariaDB)", f.store, storage.EnginePebble, storage.EngineSQLite)
	}
	return nil
}

// serveArgs are the flags of node i's serve beyond those of the launcher (its topology, id,
// data directory and, with --secure, TLS, principals and gossip key).
func (f devFlags) serveArgs(i int, _ string) []string {
	args := []string{"--log-level", f.logLevel}
	if f.mysqlDSN != "" {
		args = append(args, "--mysql", f.mysqlDSN)
	} else {
		args = append(args, "--store", f.store)
	}
	if f.logStore != "" {
		args = append(args, "--raft-log-store", f.logStore)
	}
	if f.quiesce != "" {
		args = append(args, "--quiesce-after", f.quiesce)
	}
	if f.splitLoad != "" {
		args = append(args, "--split-load", f.splitLoad)
	}
	if f.commitTick != "" {
		args = append(args, "--commit-timeout", f.commitTick)
	}
	if f.commitNotify {
		args = append(args, "--raft-commit-notify")
	}
	if f.replDepth > 0 {
		args = append(args, "--replication-depth", strconv.Itoa(f.replDepth))
	}
	if f.adminPort > 0 {
		args = append(args, "--admin-addr", net.JoinHostPort(f.host, strconv.Itoa(f.adminPort+i)))
	}
	return args
}

// triggerLog sets cfg's trigger groups to log to <data-dir>/triggers.log at --log-level, and
// returns the function that closes the file.
func (f devFlags) triggerLog(cfg *examples.DemoConfig) (func() error, error) {
	cfg.LogPath = filepath.Join(f.dataDir, "triggers.log")
	logFile, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if cfg.Logger, err = (&logFlags{format: "text", level: f.logLevel}).logger(logFile); err != nil {
		logFile.Close()
		return nil, err
	}
	cfg.Triggers = true
	return logFile.Close, nil
}

func printCurls(ep string) {
	row := "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	fmt.Printf(`
try:
  curl -s -X PUT %[1]s/v1/trips/cells/%[2]s/BASE/1 -d '{"date":"2001-01-01T08:00:00","origin":"SFO","destination":"JFK","distance":2586,"delay":0}'
  curl -s -X PUT %[1]s/v1/trips/cells/%[2]s/BASE/2 -d '{"origin":"SFO","distance":-1}'   # 400 schema_violation (--schema)
  curl -s %[1]s/v1/trips/cells/%[2]s/BASE          # latest BASE cell (strong)
  curl -s '%[1]s/v1/trips/cells/%[2]s?consistency=stale'
  curl -s '%[1]s/v1/trips/shards/0/cells?location=0&limit=3'
  curl -s '%[1]s/v1/trips/shards/0/cells?location=0&column_key=STATUS&limit=3&consistency=stale'
  curl -s %[1]s/v1/trips/groups
  curl -s %[1]s/v1/trips/groups/billing
  curl -s %[1]s/v1/cluster
  curl -s %[1]s/v1/admin/nodes                   # gossip membership
  curl -s %[1]s/v1/admin/partitions              # leaders, voters, each replica's lag
  open %[1]s/console                             # the operator console
  bin/schemaless admin partitions
  bin/schemaless triggers status billing
  bin/schemaless triggers tail --column STATUS --limit 5
  bin/schemaless schema list BASE                 # the BASE column's JSON Schema versions
`, ep, row)
}

// dropDevDatabases drops the MySQL databases of every node of top (storage.NodePrefix), so
// that `dev --fresh --mysql` starts empty.
func dropDevDatabases(ctx context.Context, dsn string, top *topology.Topology) error {
	for _, n := range top.Nodes {
		if err := storage.DropMySQLPrefix(ctx, dsn, storage.NodePrefix(n.ID)); err != nil {
			return fmt.Errorf("--mysql: %w", err)
		}
	}
	return nil
}
