package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/topology"
)

// The replicated MariaDB set of `dev --mode async` and `dev --mode mixed`.
const (
	// devAsyncClusters storage clusters of devAsyncMinions minions and a master each.
	devAsyncClusters = 2
	devAsyncMinions  = 2
	// devAsyncStartTimeout bounds starting the servers, and then setting up replication.
	devAsyncStartTimeout = 2 * time.Minute
)

// mariadbDir is the parent of the servers' data directories.
func (f devFlags) mariadbDir() string { return filepath.Join(f.dataDir, "mariadb") }

// mariadbOptions is the replicated set of `dev --mode async` and `--mode mixed`: under
// <data-dir>/mariadb, on --host, member m (0: the initial master) of storage cluster c on port
// --mariadb-port + c*(minions+1) + m.
func (f devFlags) mariadbOptions() mariadb.ReplicatedOptions {
	opts := mariadb.ReplicatedOptions{
		Clusters: devAsyncClusters, Minions: devAsyncMinions, Dir: f.mariadbDir(), StartTimeout: devAsyncStartTimeout,
	}
	for k := range devAsyncClusters * (devAsyncMinions + 1) {
		opts.Hosts = append(opts.Hosts, f.host)
		opts.Ports = append(opts.Ports, f.mariadbPort+k)
	}
	return opts
}

// asyncName is the name of the datastore on the MariaDB servers: trips in --mode async, rides
// in --mode mixed (trips is in raft mode there).
func (f devFlags) asyncName() string {
	if f.mode == devModeMixed {
		return devMixedAsync
	}
	return "trips"
}

// usesMariaDB reports whether the mode keeps a datastore on MariaDB servers that dev starts.
func (f devFlags) usesMariaDB() bool { return f.mode == topology.ModeAsync || f.mode == devModeMixed }

// asyncDatastore is the async datastore of `dev --mode async` (trips) or `--mode mixed`
// (rides): partition i on storage cluster c(i mod 2), whose members the nodes reach as the
// datastore's user. runDev checks --mariadb-port first.
func (f devFlags) asyncDatastore() topology.DatastoreSpec {
	dsns, err := f.mariadbOptions().DSNs()
	if err != nil {
		panic(fmt.Sprintf("dev: --mariadb-port %d unchecked: %v", f.mariadbPort, err))
	}
	return topology.DatastoreSpec{Name: f.asyncName(), Mode: topology.ModeAsync, Shards: f.shards, PartitionCount: f.partitions,
		StorageClusters: topology.StorageClustersOf(dsns)}
}

// checkMariadbPorts fails when a port of the set is taken, most likely by another dev on the
// same data: runDev checks before --fresh deletes anything, and a server started on the data
// directory of a running one would wait long for its InnoDB lock.
func (f devFlags) checkMariadbPorts() error {
	if err := f.mariadbOptions().CheckPorts(); err != nil {
		return fmt.Errorf("--mariadb-port %d: %w (another dev --mode %s running? stop it, or pass another --mariadb-port)", f.mariadbPort, err, f.mode)
	}
	return nil
}

// devStorage is the running replicated set: its servers are children of this process and die
// with it.
type devStorage struct {
	f       devFlags
	set     *mariadb.ReplicatedSet
	resumed bool // started on existing data, not set up now
	took    time.Duration
	masters []int // by cluster, the member print found to be the master; -1: none
}

// startDevStorage starts the servers under <data-dir>/mariadb on ports --mariadb-port and up
// with mariadb.OpenReplicated: the first time it sets replication up (member 0 of each cluster
// the master, the others its minions); on a restart over existing data it starts every server
// on its data and makes master again, in each cluster, the member that was the master when dev
// stopped. It prints a line for each server that exits while dev runs.
func startDevStorage(ctx context.Context, f devFlags) (*devStorage, error) {
	if _, _, err := mariadb.FindBinaries(); err != nil {
		return nil, fmt.Errorf("--mode %s needs MariaDB installed (mariadbd and mariadb-install-db): %w", f.mode, err)
	}
	start := time.Now()
	opts := f.mariadbOptions()
	set, resumed, err := mariadb.OpenReplicated(ctx, opts)
	switch {
	case errors.Is(err, mariadb.ErrNotResumable):
		return nil, fmt.Errorf("%w; pass --fresh to start over", err)
	case err != nil:
		return nil, fmt.Errorf("start the MariaDB servers of --mode %s (ports %d-%d): %w", f.mode, f.mariadbPort, f.mariadbPort+len(opts.Ports)-1, err)
	}
	s := &devStorage{f: f, set: set, resumed: resumed, took: time.Since(start)}
	set.Watch(s.exited)
	return s, nil
}

// exited reports a server that exits while dev runs (a crash, or a kill to try a failover).
func (s *devStorage) exited(c, m int, inst *mariadb.Instance) {
	fmt.Printf("mariadb c%d-m%d (%s) exited; see %s. If it was the master of c%d, fail over:\n  %s\n",
		c, m, inst.Addr(), inst.ErrorLog(), c, s.promoteCommand(c))
}

func (s *devStorage) promoteCommand(c int) string {
	return fmt.Sprintf("bin/schemaless admin promote --topology %s --datastore %s --cluster c%d",
		filepath.Join(s.f.dataDir, "topology.yaml"), s.f.asyncName(), c)
}

// stop stops every server (SIGTERM, concurrently; each is killed after 60 s) and prints the
// ones that did not stop cleanly (mariadb.CloseProblems); those that had exited before were
// printed by exited.
func (s *devStorage) stop() {
	for _, line := range mariadb.CloseProblems(s.set.Close()) {
		fmt.Println(line)
	}
}

// print prints the storage clusters, each member's current role as probed now (after a
// failover, the master is not the topology's), and how to fail over.
func (s *devStorage) print(ctx context.Context, top *topology.Topology) {
	how := "set up"
	if s.resumed {
		how = "restarted on their data"
	}
	fmt.Printf("storage: %d MariaDB clusters of a master and %d minions, %s in %.1fs, data %s (user %s; admin user root, no password)\n",
		devAsyncClusters, devAsyncMinions, how, s.took.Seconds(), s.f.mariadbDir(), mariadb.DefaultReplicatedUser)
	ds, _ := top.Datastore(s.f.asyncName())
	f := adminFlags{adminUser: "root"}
	s.masters = make([]int, len(ds.StorageClusters))
	for i := range ds.StorageClusters {
		s.masters[i] = -1
		sc := &ds.StorageClusters[i]
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := probeCluster(pctx, ds, sc, f)
		cancel()
		if err != nil {
			fmt.Printf("  %s: %v\n", sc.Name, err)
			continue
		}
		var minions, others []string
		for k, m := range r.Members {
			switch m.Role {
			case replication.RoleMinion:
				minions = append(minions, m.Addr)
			case replication.RoleMaster:
				s.masters[i] = k
			default:
				others = append(others, m.Addr)
			}
		}
		parts := make([]string, len(r.Partitions))
		for k, p := range r.Partitions {
			parts[k] = strconv.Itoa(p)
		}
		line := fmt.Sprintf("  %s (partitions %s): master %s, minions %s", r.Cluster, strings.Join(parts, ","), dash(r.Master), dash(strings.Join(minions, " ")))
		if len(others) > 0 {
			line += ", neither " + strings.Join(others, " ") + " (fenced or down; see admin storage)"
		}
		fmt.Println(line)
	}
	fmt.Printf("fail over: %s\n", s.promoteCommand(0))
}

// masterPidFile returns the pid file of cluster c's master as print found it (relative to the
// working directory when under it), or "" when it found none (or print has not run).
func (s *devStorage) masterPidFile(c int) string {
	if c >= len(s.masters) || s.masters[c] < 0 {
		return ""
	}
	path := filepath.Join(s.set.Instance(c, s.masters[c]).DataDir(), "mysqld.pid")
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return path
}
