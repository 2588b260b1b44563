package mariadb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/replication"
)

// Defaults of ReplicatedOptions.
const (
	// DefaultReplicatedClusters is the number of storage clusters StartReplicated starts.
	DefaultReplicatedClusters = 2
	// DefaultReplicatedMinions is the number of minions per cluster.
	DefaultReplicatedMinions = 2
	// DefaultReplicatedUser is the datastore's (and the replication) user.
	DefaultReplicatedUser = "schemaless"
)

// userName is what ReplicatedOptions.User may be, so it needs no quoting.
var userName = regexp.MustCompile(`^[A-Za-z0-9_]{1,80}$`)

// ReplicatedOptions configures StartReplicated and OpenReplicated. The zero value starts (with
// StartReplicated) 2 clusters of a master and 2 minions each, on free ports of 127.0.0.1, in a
// temporary directory.
type ReplicatedOptions struct {
	// Clusters is the number of storage clusters (default 2).
	Clusters int
	// Minions is the number of minions per cluster (default 2); each cluster has Minions+1
	// instances.
	Minions int
	// Dir is the parent of every instance's data directory, "<Dir>/c<i>-m<j>" (j=0 is the
	// initial master), kept after Close. Empty: a temporary directory, removed by Close
	// (OpenReplicated requires one).
	Dir string
	// Hosts is the bind address of each instance in the order c0m0, c0m1, ..., c1m0, ...
	// (Clusters*(Minions+1) entries), e.g. 127.0.0.2 and up for tests that cut one instance off
	// with iptables. Empty: all 127.0.0.1. Minions reach their master at its bind address.
	Hosts []string
	// Ports are fixed ports in the same order; empty or 0: a free port (OpenReplicated
	// requires every port fixed).
	Ports []int
	// User is the datastore's user, created on every master as 'User'@'%' with ALL PRIVILEGES
	// ON *.* WITH GRANT OPTION except READ_ONLY ADMIN (so read_only fences it; see the
	// replication package), no password; also the replication user. Default "schemaless".
	User string
	// StartTimeout bounds each instance's start and, separately, the initial catch-up of the
	// minions (default 60 s).
	StartTimeout time.Duration
}

// ReplicatedCluster is one storage cluster of a ReplicatedSet.
type ReplicatedCluster struct {
	// Instances are the cluster's servers; [0] is the initial master. Restart replaces an entry.
	Instances []*Instance
}

// ReplicatedSet is a set of storage clusters of real servers replicating asynchronously (one
// master, N minions each, GTID replication as the replication package configures it).
// Its methods are safe for concurrent use, except that Restart must not run concurrently for the
// same member, and that reading Clusters directly races with Restart: use Instance then.
type ReplicatedSet struct {
	// Clusters are the storage clusters, in order.
	Clusters []ReplicatedCluster

	user      string
	removeDir string      // the temporary parent directory to remove on Close, or ""
	opts      [][]Options // each instance's Options, with its port, to restart it

	mu      sync.Mutex  // guards Clusters' instances
	closing atomic.Bool // Close has begun: exits are expected
}

// normalize returns o with its defaults filled in, or an error naming the first bad field.
func (o ReplicatedOptions) normalize() (ReplicatedOptions, error) {
	if o.Clusters <= 0 {
		o.Clusters = DefaultReplicatedClusters
	}
	if o.Minions < 0 {
		return o, fmt.Errorf("mariadb: ReplicatedOptions.Minions %d < 0", o.Minions)
	}
	if o.Minions == 0 {
		o.Minions = DefaultReplicatedMinions
	}
	if o.User == "" {
		o.User = DefaultReplicatedUser
	}
	if !userName.MatchString(o.User) {
		return o, fmt.Errorf("mariadb: ReplicatedOptions.User %q: want %s", o.User, userName)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	n := o.Clusters * (o.Minions + 1)
	if len(o.Hosts) != 0 && len(o.Hosts) != n {
		return o, fmt.Errorf("mariadb: ReplicatedOptions.Hosts has %d entries, want 0 or %d", len(o.Hosts), n)
	}
	if len(o.Ports) != 0 && len(o.Ports) != n {
		return o, fmt.Errorf("mariadb: ReplicatedOptions.Ports has %d entries, want 0 or %d", len(o.Ports), n)
	}
	return o, nil
}

// member returns the Options of the k-th server (in the order of Hosts) of a set in dir.
func (o ReplicatedOptions) member(dir string, k int) Options {
	per := o.Minions + 1
	m := Options{
		DataDir:      filepath.Join(dir, fmt.Sprintf("c%d-m%d", k/per, k%per)),
		BindAddress:  DefaultBindAddress,
		StartTimeout: o.StartTimeout,
		Args:         ReplicatedServerArgs(k),
	}
	if len(o.Hosts) != 0 {
		m.BindAddress = o.Hosts[k]
	}
	if len(o.Ports) != 0 {
		m.Port = o.Ports[k]
	}
	return m
}

// StartReplicated starts Clusters*(Minions+1) servers concurrently (a few seconds each), each
// with log-bin, binlog_format=ROW, log_slave_updates, read_only=ON, GTID domain 0, a unique
// server_id (1-based, in the order of Hosts) and slave_net_timeout=5 s. On each cluster's first
// server it then creates User and makes it the master (replication.MakeMaster); every other
// server becomes a minion of its cluster's master (replication.ConfigureMinion, as User). It
// returns once every minion has caught up (WaitCaughtUp). On failure every started server is
// stopped and a temporary directory removed; the error says which server failed.
func StartReplicated(ctx context.Context, opts ReplicatedOptions) (*ReplicatedSet, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	s := &ReplicatedSet{user: opts.User}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "mariadb-repl-")
		if err != nil {
			return nil, fmt.Errorf("mariadb: %w", err)
		}
		dir, s.removeDir = d, d
	}
	if err := s.startMembers(ctx, opts, dir, "start"); err != nil {
		return nil, errors.Join(err, s.Close())
	}

	sctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	for c := range s.Clusters {
		if err := s.setUp(sctx, c); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	for c := range s.Clusters {
		if err := s.WaitCaughtUp(sctx, c); err != nil {
			return nil, errors.Join(fmt.Errorf("mariadb: initial catch-up: %w", err), s.Close())
		}
	}
	return s, nil
}

// startMembers starts every member of the set described by opts in dir concurrently and fills
// s.Clusters and s.opts; what names the step in errors ("start", "restart").
func (s *ReplicatedSet) startMembers(ctx context.Context, opts ReplicatedOptions, dir, what string) error {
	per := opts.Minions + 1
	s.Clusters = make([]ReplicatedCluster, opts.Clusters)
	s.opts = make([][]Options, opts.Clusters)
	for c := range s.Clusters {
		s.Clusters[c].Instances = make([]*Instance, per)
		s.opts[c] = make([]Options, per)
	}
	var wg sync.WaitGroup
	errs := make([]error, opts.Clusters*per)
	for k := range errs {
		c, m, o := k/per, k%per, opts.member(dir, k)
		wg.Go(func() {
			inst, err := Start(ctx, o)
			if err != nil {
				errs[k] = fmt.Errorf("mariadb: %s c%d-m%d: %w", what, c, m, err)
				return
			}
			o.Port = inst.Port()
			s.mu.Lock()
			s.Clusters[c].Instances[m], s.opts[c][m] = inst, o
			s.mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// setUp creates the user on cluster c's first server, makes it the master and points the others
// at it.
func (s *ReplicatedSet) setUp(ctx context.Context, c int) error {
	insts := s.Clusters[c].Instances
	master := insts[0]
	db, err := replication.Open(master.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range []string{
		"CREATE USER IF NOT EXISTS '" + s.user + "'@'%'",
		"GRANT ALL PRIVILEGES ON *.* TO '" + s.user + "'@'%' WITH GRANT OPTION",
		"REVOKE READ_ONLY ADMIN ON *.* FROM '" + s.user + "'@'%'",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("mariadb: c%d-m0: %s: %w", c, stmt, err)
		}
	}
	if err := replication.MakeMaster(ctx, db); err != nil {
		return fmt.Errorf("mariadb: c%d-m0: %w", c, err)
	}
	for m, inst := range insts[1:] {
		mdb, err := replication.Open(inst.DSN())
		if err != nil {
			return err
		}
		err = replication.ConfigureMinion(ctx, mdb, master.host, master.port, s.user, "")
		mdb.Close()
		if err != nil {
			return fmt.Errorf("mariadb: c%d-m%d: %w", c, m+1, err)
		}
	}
	return nil
}

// User returns the datastore's user (ReplicatedOptions.User).
func (s *ReplicatedSet) User() string { return s.user }

// Instance returns the current server of member (0 is the initial master) of cluster. It panics
// on indexes out of range.
func (s *ReplicatedSet) Instance(cluster, member int) *Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Clusters[cluster].Instances[member]
}

// DSN returns the DSN of member of cluster for the datastore's user, with no database:
// "schemaless@tcp(host:port)/". That user cannot write while the member is read-only.
func (s *ReplicatedSet) DSN(cluster, member int) string {
	inst := s.Instance(cluster, member)
	return userDSN(s.user, inst.host, inst.port)
}

// AdminDSN returns the DSN of member of cluster for root, who may change read_only and
// replication (what replication.Promote needs): "root@tcp(host:port)/".
func (s *ReplicatedSet) AdminDSN(cluster, member int) string {
	return s.Instance(cluster, member).DSN()
}

// Restart starts member of cluster again on its data directory, port and flags, once it has
// exited (after Stop, Kill or a crash; otherwise it returns an error and does nothing). It
// blocks until the server answers, like Start. The server comes back read_only=ON: a restarted
// master is fenced; a restarted minion resumes replicating from its configured master.
func (s *ReplicatedSet) Restart(ctx context.Context, cluster, member int) error {
	old := s.Instance(cluster, member)
	select {
	case <-old.Done():
	default:
		return fmt.Errorf("mariadb: restart c%d-m%d: still running (pid %d); Stop or Kill it first", cluster, member, old.Pid())
	}
	_ = old.Kill() // marks it stopped and removes its private tmpdir; its data stays
	inst, err := Start(ctx, s.opts[cluster][member])
	if err != nil {
		return fmt.Errorf("mariadb: restart c%d-m%d: %w", cluster, member, err)
	}
	s.mu.Lock()
	s.Clusters[cluster].Instances[member] = inst
	s.mu.Unlock()
	return nil
}

// WaitCaughtUp blocks until every running minion of cluster that replicates from the cluster's
// current master (the one running member with replication.MemberStatus.IsMaster) has applied
// the master's gtid_binlog_pos as of the call. It fails at once if the cluster has no master or
// several, if a running member does not answer, or if such a minion's SQL thread is stopped
// (quoting its last error); otherwise it waits as long as ctx allows.
func (s *ReplicatedSet) WaitCaughtUp(ctx context.Context, cluster int) error {
	s.mu.Lock()
	insts := append([]*Instance(nil), s.Clusters[cluster].Instances...)
	s.mu.Unlock()
	type member struct {
		inst *Instance
		st   replication.MemberStatus
	}
	var members []member
	master := -1
	for m, inst := range insts {
		select {
		case <-inst.Done():
			continue
		default:
		}
		db, err := replication.Open(inst.DSN())
		if err != nil {
			return err
		}
		st, err := replication.Probe(ctx, db, inst.DSN())
		db.Close()
		if err != nil {
			return fmt.Errorf("mariadb: c%d-m%d: %w", cluster, m, err)
		}
		members = append(members, member{inst, st})
		if st.IsMaster() {
			if master >= 0 {
				return fmt.Errorf("mariadb: cluster %d has two masters: %s and %s", cluster, members[master].inst.Addr(), inst.Addr())
			}
			master = len(members) - 1
		}
	}
	if master < 0 {
		return fmt.Errorf("mariadb: cluster %d has no running master", cluster)
	}
	mi, pos := members[master].inst, members[master].st.GTIDBinlogPos
	for _, m := range members {
		if !m.st.Replicating || m.st.MasterHost != mi.host || m.st.MasterPort != mi.port {
			continue
		}
		if !m.st.SQLRunning {
			return fmt.Errorf("mariadb: minion %s: SQL thread stopped (last error: %q)", m.inst.Addr(), m.st.LastError)
		}
		db, err := replication.Open(m.inst.DSN())
		if err != nil {
			return err
		}
		err = replication.WaitApplied(ctx, db, pos)
		db.Close()
		if err != nil {
			return fmt.Errorf("mariadb: minion %s: %w", m.inst.Addr(), err)
		}
	}
	return nil
}

// Close stops every server (SIGTERM, concurrently; each is killed after 60 s) and removes the
// temporary parent directory if StartReplicated made one. It returns the errors of the stops
// joined, one *MemberError per member that did not stop cleanly (one that had already exited
// by itself wraps ErrExited). Members exiting after Close has begun are not reported to Watch.
func (s *ReplicatedSet) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for c, cl := range s.Clusters {
		for m, inst := range cl.Instances {
			if inst == nil {
				continue
			}
			wg.Go(func() {
				if err := inst.Stop(); err != nil {
					emu.Lock()
					errs = append(errs, &MemberError{Cluster: c, Member: m, Instance: inst, Err: err})
					emu.Unlock()
				}
			})
		}
	}
	s.mu.Unlock()
	wg.Wait()
	if s.removeDir != "" {
		if err := os.RemoveAll(s.removeDir); err != nil {
			errs = append(errs, fmt.Errorf("mariadb: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CloseProblems lists, one line each, what a Close error says went wrong: for a member that
// did not stop cleanly "mariadb c0-m1: <the first line of its error> (see <its error log>)",
// any other error as it is. Members that had exited by themselves (ErrExited) are left out:
// Watch reported them when they exited. A nil error has no line.
func CloseProblems(err error) []string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var lines []string
	for _, err := range errs {
		var me *MemberError
		switch {
		case err == nil || errors.Is(err, ErrExited):
		case errors.As(err, &me):
			first, _, _ := strings.Cut(me.Err.Error(), "\n")
			lines = append(lines, fmt.Sprintf("mariadb c%d-m%d: %s (see %s)", me.Cluster, me.Member, first, me.Instance.ErrorLog()))
		default:
			lines = append(lines, err.Error())
		}
	}
	return lines
}

// MemberError is the failure of one member of a ReplicatedSet.
type MemberError struct {
	// Cluster and Member locate the member (member 0 is the cluster's initial master).
	Cluster, Member int
	// Instance is the member's server.
	Instance *Instance
	// Err is what failed.
	Err error
}

// Error says which member failed and how: "mariadb: c0-m1: ...".
func (e *MemberError) Error() string {
	return fmt.Sprintf("mariadb: c%d-m%d: %v", e.Cluster, e.Member, e.Err)
}

// Unwrap returns Err.
func (e *MemberError) Unwrap() error { return e.Err }

// Watch calls exited, each time from a new goroutine, when a member running now exits before
// Close begins (a crash, or a kill from outside), with the member's place and server. Members
// started later by Restart are not watched. Call it at most once.
func (s *ReplicatedSet) Watch(exited func(cluster, member int, inst *Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, cl := range s.Clusters {
		for m, inst := range cl.Instances {
			go func() {
				<-inst.Done()
				if !s.closing.Load() {
					exited(c, m, inst)
				}
			}()
		}
	}
}

// ReplicatedServerArgs are the server flags StartReplicated gives its k-th server (in the order
// of ReplicatedOptions.Hosts, 0-based): a unique server_id, row-based binary logs, GTID domain 0,
// read_only=ON. A server restarted on its data with them keeps its identity.
func ReplicatedServerArgs(k int) []string {
	return []string{
		"--server-id=" + strconv.Itoa(k+1),
		"--log-bin=mysql-bin",
		"--binlog-format=ROW",
		"--log-slave-updates=ON",
		"--read-only=ON",
		"--relay-log=relay-bin",
		"--gtid-domain-id=0",
		"--slave-net-timeout=5",
		// Faster start and writes; a process crash (kill -9) loses nothing with these, only an
		// OS crash would.
		"--innodb-buffer-pool-size=64M",
		"--innodb-doublewrite=0",
		"--sync-binlog=0",
	}
}
