package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/topology"
)

// The replicated MariaDB set of `dev --mode async`.
const (
	// devAsyncClusters storage clusters of devAsyncMinions minions and a master each.
	devAsyncClusters = 2
	devAsyncMinions  = 2
	// devAsyncMarker is the file of <data-dir>/mariadb written once the set is set up
	// (replication configured): without it, the directory is an interrupted first start.
	devAsyncMarker = "replication-set-up"
	// devAsyncStartTimeout bounds starting the servers, and then setting up replication.
	devAsyncStartTimeout = 2 * time.Minute
)

// devAsyncMarkerText is the marker's content: the set's shape, checked on a restart.
var devAsyncMarkerText = fmt.Sprintf("clusters %d minions %d\n", devAsyncClusters, devAsyncMinions)

// mariadbDir is the parent of the servers' data directories.
func (f devFlags) mariadbDir() string { return filepath.Join(f.dataDir, "mariadb") }

// mariadbHost is the host the servers are reached at: --host, or 127.0.0.1 for a wildcard (as
// mariadbtest does).
func (f devFlags) mariadbHost() string {
	if ip := net.ParseIP(f.host); ip != nil && ip.IsUnspecified() || f.host == "*" {
		return "127.0.0.1"
	}
	return f.host
}

// mariadbAddr is the address of member m (0: the initial master) of storage cluster c: port
// --mariadb-port + c*(minions+1) + m.
func (f devFlags) mariadbAddr(c, m int) string {
	return net.JoinHostPort(f.mariadbHost(), strconv.Itoa(f.mariadbPort+c*(devAsyncMinions+1)+m))
}

// asyncDatastore is the trips datastore of `dev --mode async`: partition i on storage cluster
// c(i mod 2), whose members the nodes reach as the datastore's user.
func (f devFlags) asyncDatastore() topology.DatastoreSpec {
	ds := topology.DatastoreSpec{Name: "trips", Mode: topology.ModeAsync, Shards: f.shards, PartitionCount: f.partitions}
	for c := range devAsyncClusters {
		sc := topology.StorageClusterSpec{Name: fmt.Sprintf("c%d", c), Master: devAsyncDSN(f.mariadbAddr(c, 0))}
		for m := 1; m <= devAsyncMinions; m++ {
			sc.Minions = append(sc.Minions, devAsyncDSN(f.mariadbAddr(c, m)))
		}
		ds.StorageClusters = append(ds.StorageClusters, sc)
	}
	return ds
}

// checkMariadbPorts fails when a port of the set is taken, most likely by another dev on the
// same data: runDev checks before --fresh deletes anything, and a server started on the data
// directory of a running one would wait long for its InnoDB lock.
func (f devFlags) checkMariadbPorts() error {
	for k := range devAsyncClusters * (devAsyncMinions + 1) {
		l, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.mariadbPort+k)))
		if err != nil {
			return fmt.Errorf("--mariadb-port %d: %w (another dev --mode async running? stop it, or pass another --mariadb-port)", f.mariadbPort, err)
		}
		l.Close()
	}
	return nil
}

// devAsyncDSN is the datastore user's DSN of the server at addr (mariadbtest.ReplicatedSet.DSN).
func devAsyncDSN(addr string) string {
	return mariadbtest.DefaultReplicatedUser + "@tcp(" + addr + ")/"
}

// devStorage is the running replicated set: its servers are children of this process and die
// with it.
type devStorage struct {
	f       devFlags
	insts   [][]*mariadbtest.Instance // [cluster][member]; member 0 is the initial master
	resumed bool                      // started on existing data, not set up now
	took    time.Duration
	exiting atomic.Bool // stop has begun: exits are expected
}

// startDevStorage starts the servers under <data-dir>/mariadb on ports --mariadb-port and up.
//
// The first time (no marker file), it starts them with mariadbtest.StartReplicated, which
// initialises the data directories and sets replication up (member 0 of each cluster the
// master, the others its minions), then writes the marker. A directory without the marker is an
// interrupted first start and is deleted first.
//
// On a restart over existing data it does not set replication up again, which would make member
// 0 the master blindly, even after a failover to another member: it starts every server on its
// data (each comes back read_only=ON, its minions resuming from their configured master), then
// in each cluster makes master the one member that replicates from nobody and that the
// replicating members point at: the master when dev stopped, whoever it is now. A fenced old
// master (read_only and replicating from nobody, not pointed at) stays fenced. When that member
// cannot be told, it fails and asks for --fresh.
func startDevStorage(ctx context.Context, f devFlags) (*devStorage, error) {
	if _, _, err := mariadbtest.FindBinaries(); err != nil {
		return nil, fmt.Errorf("--mode async needs MariaDB installed (mariadbd and mariadb-install-db): %w", err)
	}
	s := &devStorage{f: f}
	start := time.Now()
	dir := f.mariadbDir()
	marker, err := os.ReadFile(filepath.Join(dir, devAsyncMarker))
	switch {
	case err == nil:
		if string(marker) != devAsyncMarkerText {
			return nil, fmt.Errorf("%s holds a MariaDB set of another shape (%q); pass --fresh to start over", dir, strings.TrimSpace(string(marker)))
		}
		s.resumed = true
		err = s.resume(ctx)
	case errors.Is(err, os.ErrNotExist):
		err = s.setUp(ctx)
	}
	if err != nil {
		s.stop()
		return nil, err
	}
	s.took = time.Since(start)
	for c := range s.insts {
		for m, inst := range s.insts[c] {
			go s.watch(c, m, inst)
		}
	}
	return s, nil
}

// setUp starts a new set with StartReplicated and writes the marker.
func (s *devStorage) setUp(ctx context.Context) error {
	dir := s.f.mariadbDir()
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	opts := mariadbtest.ReplicatedOptions{
		Clusters: devAsyncClusters, Minions: devAsyncMinions, Dir: dir, StartTimeout: devAsyncStartTimeout,
	}
	for c := range devAsyncClusters {
		for m := range devAsyncMinions + 1 {
			opts.Hosts = append(opts.Hosts, s.f.host)
			opts.Ports = append(opts.Ports, s.f.mariadbPort+c*(devAsyncMinions+1)+m)
		}
	}
	set, err := mariadbtest.StartReplicated(ctx, opts)
	if err != nil {
		return fmt.Errorf("start the MariaDB servers of --mode async (ports %d-%d): %w", s.f.mariadbPort, s.f.mariadbPort+len(opts.Ports)-1, err)
	}
	s.insts = make([][]*mariadbtest.Instance, devAsyncClusters)
	for c := range devAsyncClusters {
		for m := range devAsyncMinions + 1 {
			s.insts[c] = append(s.insts[c], set.Instance(c, m))
			if got, want := set.DSN(c, m), devAsyncDSN(s.f.mariadbAddr(c, m)); got != want {
				return fmt.Errorf("mariadb c%d-m%d: DSN %s, want %s as in the topology", c, m, got, want)
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, devAsyncMarker), []byte(devAsyncMarkerText), 0o644)
}

// resume starts every server on its existing data directory and finds each cluster's master.
func (s *devStorage) resume(ctx context.Context) error {
	per := devAsyncMinions + 1
	s.insts = make([][]*mariadbtest.Instance, devAsyncClusters)
	for c := range s.insts {
		s.insts[c] = make([]*mariadbtest.Instance, per)
	}
	errs := make([]error, devAsyncClusters*per)
	var wg sync.WaitGroup
	for c := range devAsyncClusters {
		for m := range per {
			k := c*per + m
			dataDir := filepath.Join(s.f.mariadbDir(), fmt.Sprintf("c%d-m%d", c, m))
			if fi, err := os.Stat(filepath.Join(dataDir, "mysql")); err != nil || !fi.IsDir() {
				errs[k] = fmt.Errorf("%s holds no server's data; pass --fresh to start over", dataDir)
				continue
			}
			wg.Go(func() {
				inst, err := mariadbtest.Start(ctx, mariadbtest.Options{
					DataDir: dataDir, Port: s.f.mariadbPort + k, BindAddress: s.f.host,
					Args: mariadbtest.ReplicatedServerArgs(k), StartTimeout: devAsyncStartTimeout,
				})
				if err != nil {
					errs[k] = fmt.Errorf("restart mariadb c%d-m%d: %w", c, m, err)
					return
				}
				s.insts[c][m] = inst
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, devAsyncStartTimeout)
	defer cancel()
	for c := range s.insts {
		if err := s.recoverMaster(rctx, c); err != nil {
			return err
		}
	}
	return nil
}

// recoverMaster makes master the member of cluster c that was the master when the set stopped
// (see startDevStorage).
func (s *devStorage) recoverMaster(ctx context.Context, c int) error {
	insts := s.insts[c]
	sts := make([]replication.MemberStatus, len(insts))
	for m, inst := range insts {
		db, err := replication.Open(inst.DSN())
		if err != nil {
			return err
		}
		sts[m], err = replication.Probe(ctx, db, inst.DSN())
		db.Close()
		if err != nil {
			return fmt.Errorf("mariadb c%d-m%d: %w", c, m, err)
		}
		if k := c*len(insts) + m; sts[m].ServerID != uint32(k+1) {
			return fmt.Errorf("mariadb c%d-m%d: server_id %d, want %d: its data belongs to another member; pass --fresh", c, m, sts[m].ServerID, k+1)
		}
	}
	votes := map[string]int{}
	for _, st := range sts {
		if st.Replicating {
			votes[net.JoinHostPort(st.MasterHost, strconv.Itoa(st.MasterPort))]++
		}
	}
	var masters, pointed, free []int
	for m, st := range sts {
		switch {
		case st.IsMaster():
			masters = append(masters, m)
		case !st.Replicating:
			free = append(free, m)
			if votes[insts[m].Addr()] > 0 {
				pointed = append(pointed, m)
			}
		}
	}
	var master int
	switch {
	case len(masters) == 1:
		return nil // already writable: nothing to do
	case len(masters) > 1:
		return fmt.Errorf("mariadb cluster c%d has %d writable members; pass --fresh to start over", c, len(masters))
	case len(pointed) == 1:
		master = pointed[0]
	case len(pointed) == 0 && len(free) == 1:
		master = free[0]
	default:
		return fmt.Errorf("mariadb cluster c%d: cannot tell its master (members replicating from nobody: %v; pointed at by the minions: %v); pass --fresh to start over", c, free, pointed)
	}
	db, err := replication.Open(insts[master].DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	if err := replication.MakeMaster(ctx, db); err != nil {
		return fmt.Errorf("mariadb c%d-m%d: %w", c, master, err)
	}
	return nil
}

// watch reports a server that exits while dev runs (a crash, or a kill to try a failover).
func (s *devStorage) watch(c, m int, inst *mariadbtest.Instance) {
	<-inst.Done()
	if s.exiting.Load() {
		return
	}
	fmt.Printf("mariadb c%d-m%d (%s) exited; see %s. If it was the master of c%d, fail over:\n  %s\n",
		c, m, inst.Addr(), inst.ErrorLog(), c, s.promoteCommand(c))
}

func (s *devStorage) promoteCommand(c int) string {
	return fmt.Sprintf("bin/schemaless admin promote --topology %s --datastore trips --cluster c%d",
		filepath.Join(s.f.dataDir, "topology.yaml"), c)
}

// stop stops every server (SIGTERM, concurrently; each is killed after 60 s) and prints the
// ones that had exited before.
func (s *devStorage) stop() {
	s.exiting.Store(true)
	var wg sync.WaitGroup
	for c := range s.insts {
		for m, inst := range s.insts[c] {
			if inst == nil {
				continue
			}
			wg.Go(func() {
				select {
				case <-inst.Done():
					_ = inst.Stop() // its error only says that it had exited, which watch printed
					return
				default:
				}
				if err := inst.Stop(); err != nil {
					first, _, _ := strings.Cut(err.Error(), "\n")
					fmt.Printf("mariadb c%d-m%d: %s (see %s)\n", c, m, first, inst.ErrorLog())
				}
			})
		}
	}
	wg.Wait()
}

// print prints the storage clusters, each member's current role as probed now (after a
// failover, the master is not the topology's), and how to fail over.
func (s *devStorage) print(ctx context.Context, top *topology.Topology) {
	how := "set up"
	if s.resumed {
		how = "restarted on their data"
	}
	fmt.Printf("storage: %d MariaDB clusters of a master and %d minions, %s in %.1fs, data %s (user %s; admin user root, no password)\n",
		devAsyncClusters, devAsyncMinions, how, s.took.Seconds(), s.f.mariadbDir(), mariadbtest.DefaultReplicatedUser)
	ds, _ := top.Datastore("trips")
	f := adminFlags{adminUser: "root"}
	for i := range ds.StorageClusters {
		sc := &ds.StorageClusters[i]
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := probeCluster(pctx, ds, sc, f)
		cancel()
		if err != nil {
			fmt.Printf("  %s: %v\n", sc.Name, err)
			continue
		}
		var minions, others []string
		for _, m := range r.Members {
			switch m.Role {
			case "minion":
				minions = append(minions, m.Addr)
			case "master":
			default:
				others = append(others, m.Addr)
			}
		}
		parts := make([]string, len(r.Partitions))
		for k, p := range r.Partitions {
			parts[k] = strconv.Itoa(p)
		}
		line := fmt.Sprintf("  %s (partitions %s): master %s, minions %s", r.Cluster, strings.Join(parts, ","), adminDash(r.Master), adminDash(strings.Join(minions, " ")))
		if len(others) > 0 {
			line += ", neither " + strings.Join(others, " ") + " (fenced or down; see admin storage)"
		}
		fmt.Println(line)
	}
	fmt.Printf("fail over: %s\n", s.promoteCommand(0))
}
