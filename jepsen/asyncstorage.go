package jepsen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// Async mode: the storage clusters under test.
const (
	// StorageClusters and StorageMinions shape the replicated set of an async run: 2 storage
	// clusters of a master and 2 minions each.
	StorageClusters = 2
	StorageMinions  = 2
	// linkOctetOffset places a member's link address: its bind address with the third octet
	// raised by 100 (127.0.1.2 -> 127.0.101.2).
	linkOctetOffset = 100
	// asyncReplayAfter is partition.AsyncConfig.ReplayAfter's default, which `schemaless serve`
	// uses: a buffered cell missing from its primary cluster for that long is replayed.
	asyncReplayAfter = 2 * time.Second
	// rejoinWait bounds the wait for a restarted old master, repointed at the new master, to
	// replicate without error.
	rejoinWait = 5 * time.Second
)

// StorageConfig places the storage clusters of an async run.
type StorageConfig struct {
	// Dir receives each server's data directory ("c0-m0", ...); it stays after the run.
	Dir string
	// FirstIP is the bind address of c0m0 (cluster 0, member 0); the others follow in the order
	// c0m0, c0m1, c0m2, c1m0, ... (last octet + 1 each).
	FirstIP string
	// Links makes minions reach their master through the master's link address (see Storage),
	// so that partition-master can cut replication alone. It needs iptables (a nat chain named
	// Chain).
	Links bool
	Chain string
	// Logger receives the servers' life events.
	Logger *slog.Logger
}

// Storage is the replicated set of MariaDB servers of an async run (StorageClusters clusters of
// a master and StorageMinions minions), with what the nemesis did to it: the current master of
// each cluster, the members left out after a failover, the paused minions, the failovers.
//
// Addresses: member k (in the order c0m0, c0m1, ...) binds FirstIP+k, and the nodes reach it
// there. Packets between loopback addresses leave from 127.0.0.1 whatever the address dialed,
// so an iptables rule on source and destination addresses cannot tell a minion's replication
// connection from a node's. With Links, each member also has a link address (third octet +
// 100) that a nat rule (OUTPUT, DNAT) sends to its bind address, and minions replicate from
// their master's link address; a cut is then one filter rule matching the connections whose
// original destination is the master's link address (conntrack), both directions.
//
// Methods are safe for concurrent use.
type Storage struct {
	set   *mariadb.ReplicatedSet
	cfg   StorageConfig
	binds []string // by member index k
	links []string // by k; nil without Links
	log   *slog.Logger

	mu        sync.Mutex
	master    []int            // current master per cluster
	out       []map[int]string // members out of their cluster, and why
	paused    map[[2]int]bool  // minions whose replication is paused
	killed    map[[2]int]bool  // members killed, to restart at heal
	busy      []string         // the kind of the fault holding each cluster, "" none
	failovers []FailoverRecord
}

// FailoverRecord is one failover of a run: a cluster's master killed and a minion promoted.
// Times are on the history's clock (nanoseconds).
type FailoverRecord struct {
	Kind      string `json:"kind"`
	Cluster   int    `json:"cluster"`
	OldMaster string `json:"old_master"`
	NewMaster string `json:"new_master,omitempty"`
	// Killed is when the old master was killed; Promoted when Promote returned (with a new
	// master, or with Error and the old master restarted as master).
	Killed   int64 `json:"killed"`
	Promoted int64 `json:"promoted"`
	// CaughtUp is PromoteResult.CaughtUp: the candidate applied what it had received.
	CaughtUp bool   `json:"caught_up"`
	Error    string `json:"error,omitempty"`
	// Rejoined: the old master, restarted at heal and repointed at the new master, replicates
	// without error. Otherwise OutReason says why it was left out (fenced, replicating from
	// nobody).
	Rejoined  bool   `json:"rejoined"`
	OutReason string `json:"out_reason,omitempty"`
}

// Window is the span of the history's clock in which a failover may hide acknowledged writes
// from strong reads: from the kill to the promotion plus the reaper's replay delay and a second.
func (f FailoverRecord) Window() Window {
	return Window{Start: f.Killed, End: f.Promoted + int64(asyncReplayAfter+time.Second),
		Why: fmt.Sprintf("%s of cluster c%d", f.Kind, f.Cluster)}
}

// StartStorage starts the replicated set (several seconds: 6 servers) and, with Links, the
// nat rules of the link addresses, and points every minion at its master's link address. On
// error everything started is stopped.
func StartStorage(ctx context.Context, cfg StorageConfig) (*Storage, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	first := net.ParseIP(cfg.FirstIP).To4()
	n := StorageClusters * (StorageMinions + 1)
	if first == nil || !first.IsLoopback() || int(first[3])+n > 255 || (cfg.Links && int(first[2])+linkOctetOffset > 255) {
		return nil, fmt.Errorf("jepsen: storage first IP %q: want an IPv4 loopback address with room for %d members (and third octet <= %d with links)",
			cfg.FirstIP, n, 255-linkOctetOffset)
	}
	s := &Storage{cfg: cfg, log: cfg.Logger, master: make([]int, StorageClusters), out: make([]map[int]string, StorageClusters),
		paused: map[[2]int]bool{}, killed: map[[2]int]bool{}, busy: make([]string, StorageClusters)}
	for k := 0; k < n; k++ {
		s.binds = append(s.binds, net.IPv4(first[0], first[1], first[2], first[3]+byte(k)).String())
		if cfg.Links {
			s.links = append(s.links, net.IPv4(first[0], first[1], first[2]+linkOctetOffset, first[3]+byte(k)).String())
		}
		if s.out[k/(StorageMinions+1)] == nil {
			s.out[k/(StorageMinions+1)] = map[int]string{}
		}
	}
	if cfg.Links {
		if err := setupLinks(ctx, cfg.Chain, s.links, s.binds); err != nil {
			return nil, err
		}
	}
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: StorageClusters, Minions: StorageMinions,
		Dir: cfg.Dir, Hosts: s.binds})
	if err != nil {
		if cfg.Links {
			_ = teardownLinks(context.Background(), cfg.Chain)
		}
		return nil, fmt.Errorf("jepsen: start the storage clusters: %w", err)
	}
	s.set = set
	if cfg.Links {
		for c := 0; c < StorageClusters; c++ {
			for m := 1; m <= StorageMinions; m++ {
				if err := s.pointAt(ctx, c, m, 0); err != nil {
					s.Close()
					return nil, err
				}
			}
		}
	}
	for c := 0; c < StorageClusters; c++ {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := s.waitCaughtUp(wctx, c)
		cancel()
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close stops every server and removes the nat rules.
func (s *Storage) Close() {
	if err := s.set.Close(); err != nil {
		s.log.Warn("jepsen: stop the storage clusters", "error", err)
	}
	if s.cfg.Links {
		if err := teardownLinks(context.Background(), s.cfg.Chain); err != nil {
			s.log.Warn("jepsen: remove the link rules", "error", err)
		}
	}
}

// User is the datastore's (and the replication) user.
func (s *Storage) User() string { return s.set.User() }

func (s *Storage) index(c, m int) int { return c*(StorageMinions+1) + m }

// Name names member m of cluster c: "c0m1".
func (s *Storage) Name(c, m int) string { return fmt.Sprintf("c%dm%d", c, m) }

// linkAddr is the host members use to replicate from member (c, m): its link address, or its
// bind address without links.
func (s *Storage) linkAddr(c, m int) string {
	if s.links != nil {
		return s.links[s.index(c, m)]
	}
	return s.binds[s.index(c, m)]
}

// promoteDSN is the administrative DSN of (c, m) as Promote must see it: at its link address,
// which becomes the others' MASTER_HOST when it is promoted.
func (s *Storage) promoteDSN(c, m int) string {
	return "root@tcp(" + net.JoinHostPort(s.linkAddr(c, m), strconv.Itoa(s.set.Instance(c, m).Port())) + ")/"
}

// Datastore returns spec as an async datastore on the storage clusters: partition i on cluster
// i, databases prefixed "j<name>", buffered writes unless unsafe.
func (s *Storage) Datastore(spec topology.DatastoreSpec, unsafe bool) topology.DatastoreSpec {
	return topology.DatastoreSpec{Name: spec.Name, Mode: topology.ModeAsync, Shards: spec.Shards, PartitionCount: StorageClusters,
		UnsafeNoBufferedWrites: unsafe, MySQLPrefix: "j" + spec.Name, StorageClusters: topology.StorageClustersOf(s.set.DSNs())}
}

// admin opens an administrative connection to (c, m) at its bind address.
func (s *Storage) admin(c, m int) (*sql.DB, error) { return replication.Open(s.set.AdminDSN(c, m)) }

func (s *Storage) running(c, m int) bool {
	select {
	case <-s.set.Instance(c, m).Done():
		return false
	default:
		return true
	}
}

// pointAt makes (c, m) a minion of (c, master) through the master's link address.
func (s *Storage) pointAt(ctx context.Context, c, m, master int) error {
	db, err := s.admin(c, m)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := replication.ConfigureMinion(ctx, db, s.linkAddr(c, master), s.set.Instance(c, master).Port(), s.User(), ""); err != nil {
		return fmt.Errorf("jepsen: point %s at %s: %w", s.Name(c, m), s.Name(c, master), err)
	}
	return nil
}

// probe returns the replication state of (c, m).
func (s *Storage) probe(ctx context.Context, c, m int) (replication.MemberStatus, error) {
	db, err := s.admin(c, m)
	if err != nil {
		return replication.MemberStatus{}, err
	}
	defer db.Close()
	return replication.Probe(ctx, db, s.set.AdminDSN(c, m))
}

// replicatesFrom reports whether st replicates from (c, master), at its bind or link address.
func (s *Storage) replicatesFrom(st replication.MemberStatus, c, master int) bool {
	port := s.set.Instance(c, master).Port()
	return st.Replicating && st.MasterPort == port &&
		(st.MasterHost == s.binds[s.index(c, master)] || st.MasterHost == s.linkAddr(c, master))
}

// Members returns, for cluster c, its current master and the members that are not out of the
// cluster (the master included), as the harness's bookkeeping has them.
func (s *Storage) Members(c int) (master int, in []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for m := 0; m <= StorageMinions; m++ {
		if _, gone := s.out[c][m]; !gone {
			in = append(in, m)
		}
	}
	return s.master[c], in
}

// waitCaughtUp waits until every member of cluster c that replicates from its current master
// has applied the master's binlog position as of the call. A minion whose replication thread
// stopped with an error fails at once.
func (s *Storage) waitCaughtUp(ctx context.Context, c int) error {
	master, in := s.Members(c)
	st, err := s.probe(ctx, c, master)
	if err != nil {
		return fmt.Errorf("jepsen: master %s: %w", s.Name(c, master), err)
	}
	if !st.IsMaster() {
		return fmt.Errorf("jepsen: %s is not a master (read_only %v, replicating %v)", s.Name(c, master), st.ReadOnly, st.Replicating)
	}
	for _, m := range in {
		if m == master {
			continue
		}
		ms, err := s.probe(ctx, c, m)
		if err != nil {
			return fmt.Errorf("jepsen: minion %s: %w", s.Name(c, m), err)
		}
		if !s.replicatesFrom(ms, c, master) {
			return fmt.Errorf("jepsen: minion %s does not replicate from master %s (it replicates from %s:%d)",
				s.Name(c, m), s.Name(c, master), ms.MasterHost, ms.MasterPort)
		}
		if ms.LastError != "" && (!ms.IORunning || !ms.SQLRunning) {
			return fmt.Errorf("jepsen: minion %s stopped replicating: %s", s.Name(c, m), ms.LastError)
		}
		db, err := s.admin(c, m)
		if err != nil {
			return err
		}
		err = replication.WaitApplied(ctx, db, st.GTIDBinlogPos)
		db.Close()
		if err != nil {
			return fmt.Errorf("jepsen: minion %s did not apply the master's %s: %w", s.Name(c, m), st.GTIDBinlogPos, err)
		}
	}
	return nil
}

// takesMasterDown reports whether kind stops a master (kill-master, failover,
// partition-failover).
func takesMasterDown(kind string) bool {
	return kind == KillMaster || kind == Failover || kind == PartitionFailover
}

// claim reserves a cluster for a fault of kind: a random free one, that has not failed over yet
// if kind is a failover. The guarantees hold with one cluster's master lost at a time (a
// buffered cell has one copy besides its primary), so a fault that takes a master down is
// never started while another one holds a cluster. release frees the cluster.
func (s *Storage) claim(rng *rand.Rand, kind string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var free []int
	for c := 0; c < StorageClusters; c++ {
		if takesMasterDown(kind) && takesMasterDown(s.busy[c]) {
			return -1, fmt.Errorf("the master of c%d is down (%s): one master down at a time", c, s.busy[c])
		}
		if s.busy[c] == "" && ((kind != Failover && kind != PartitionFailover) || !s.failedOver(c)) {
			free = append(free, c)
		}
	}
	if len(free) == 0 {
		return -1, errors.New("no storage cluster eligible: each is held by another fault or, for a failover, failed over already")
	}
	c := free[rng.IntN(len(free))]
	s.busy[c] = kind
	return c, nil
}

func (s *Storage) release(c int) {
	s.mu.Lock()
	s.busy[c] = ""
	s.mu.Unlock()
}

// failedOver reports whether cluster c had a failover in this run. s.mu must be held.
func (s *Storage) failedOver(c int) bool {
	for _, f := range s.failovers {
		if f.Cluster == c {
			return true
		}
	}
	return false
}

// Failovers returns the run's failovers so far.
func (s *Storage) Failovers() []FailoverRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failovers)
}

// Out describes the members left out of their cluster ("c0m0: ...").
func (s *Storage) Out() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for c := range s.out {
		for m := 0; m <= StorageMinions; m++ {
			if why, ok := s.out[c][m]; ok {
				out = append(out, s.Name(c, m)+": "+why)
			}
		}
	}
	return out
}

// kill kills (c, m) with SIGKILL and remembers to restart it at heal.
func (s *Storage) kill(c, m int) error {
	s.mu.Lock()
	s.killed[[2]int{c, m}] = true
	s.mu.Unlock()
	return s.set.Instance(c, m).Kill()
}

// restart starts (c, m) again on its data (read_only=ON, as configured). A member that runs
// is left alone.
func (s *Storage) restart(ctx context.Context, c, m int) error {
	if s.running(c, m) {
		return nil
	}
	if err := s.set.Restart(ctx, c, m); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.killed, [2]int{c, m})
	s.mu.Unlock()
	return nil
}

// unfence makes (c, m) a writable master again (replication.MakeMaster).
func (s *Storage) unfence(ctx context.Context, c, m int) error {
	db, err := s.admin(c, m)
	if err != nil {
		return err
	}
	defer db.Close()
	return replication.MakeMaster(ctx, db)
}

// setPaused pauses or resumes the replication of minion (c, m).
func (s *Storage) setPaused(ctx context.Context, c, m int, pause bool) error {
	db, err := s.admin(c, m)
	if err != nil {
		return err
	}
	defer db.Close()
	if pause {
		err = replication.PauseReplication(ctx, db)
	} else {
		err = replication.ResumeReplication(ctx, db)
	}
	s.mu.Lock()
	if pause && err == nil {
		s.paused[[2]int{c, m}] = true
	} else if !pause {
		delete(s.paused, [2]int{c, m})
	}
	s.mu.Unlock()
	return err
}

// leaveOut fences (c, m) and makes it replicate from nobody, so that no node takes it for a
// minion, and records why it is out.
func (s *Storage) leaveOut(ctx context.Context, c, m int, why string) {
	s.mu.Lock()
	s.out[c][m] = why
	s.mu.Unlock()
	db, err := s.admin(c, m)
	if err != nil {
		return
	}
	defer db.Close()
	for _, stmt := range []string{"SET GLOBAL read_only = 1", "STOP SLAVE", "RESET SLAVE ALL"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			s.log.Warn("jepsen: leave a member out", "member", s.Name(c, m), "statement", stmt, "error", err)
		}
	}
}

// rejoin restarts the old master (c, m) of a failover fenced and tries to make it a minion of
// the current master. It reports whether it replicates without error within rejoinWait; if not,
// it is left out (fenced, replicating from nobody) with the reason.
func (s *Storage) rejoin(ctx context.Context, c, m int) (bool, string) {
	if err := s.restart(ctx, c, m); err != nil {
		why := "restart: " + err.Error()
		s.mu.Lock()
		s.out[c][m] = why
		s.mu.Unlock()
		return false, why
	}
	master, _ := s.Members(c)
	if err := s.pointAt(ctx, c, m, master); err != nil {
		why := err.Error()
		s.leaveOut(ctx, c, m, why)
		return false, why
	}
	// Rejoined once it applied the master's position as of now and still replicates without
	// error (a diverged old master fails in its IO thread, error 1236, and applies nothing).
	var last string
	if ms, err := s.probe(ctx, c, master); err != nil {
		last = "probe the master: " + err.Error()
	} else if db, err := s.admin(c, m); err != nil {
		last = err.Error()
	} else {
		wctx, cancel := context.WithTimeout(ctx, rejoinWait)
		err := replication.WaitApplied(wctx, db, ms.GTIDBinlogPos)
		cancel()
		db.Close()
		st, perr := s.probe(ctx, c, m)
		switch {
		case perr != nil:
			last = perr.Error()
		case err == nil && st.IORunning && st.SQLRunning && st.LastError == "":
			s.mu.Lock()
			delete(s.out[c], m)
			s.mu.Unlock()
			return true, ""
		case st.LastError != "":
			last = st.LastError
		case err != nil:
			last = fmt.Sprintf("did not apply the master's %s in %s: %v", ms.GTIDBinlogPos, rejoinWait, err)
		default:
			last = fmt.Sprintf("io running %v, sql running %v", st.IORunning, st.SQLRunning)
		}
	}
	why := "repointed at the new master, did not replicate: " + last
	s.leaveOut(ctx, c, m, why)
	return false, why
}

// Heal restarts every killed member (the current master of its cluster unfenced, an old master
// of a failover fenced and tried as a minion) and resumes every paused minion.
func (s *Storage) Heal(ctx context.Context) error {
	s.mu.Lock()
	var killed, paused [][2]int
	for k := range s.killed {
		killed = append(killed, k)
	}
	for k := range s.paused {
		paused = append(paused, k)
	}
	s.mu.Unlock()
	var errs []error
	for _, k := range killed {
		c, m := k[0], k[1]
		master, _ := s.Members(c)
		s.mu.Lock()
		_, gone := s.out[c][m]
		s.mu.Unlock()
		switch {
		case m == master:
			if err := s.restart(ctx, c, m); err != nil {
				errs = append(errs, err)
			} else if err := s.unfence(ctx, c, m); err != nil {
				errs = append(errs, err)
			}
		case gone:
			s.rejoin(ctx, c, m)
		default:
			if err := s.restart(ctx, c, m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, k := range paused {
		if err := s.setPaused(ctx, k[0], k[1], false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReadMembers reads every cell of async datastore ds directly from the members of each
// partition's cluster that hold it now: the current master and the minions replicating from it
// (read-only stores as root). The cells are by member name, in added_id order per shard; the
// second map gives each shard's member names, the master first. Members out of their cluster
// are not read.
func (s *Storage) ReadMembers(ctx context.Context, ds *topology.DatastoreSpec) (map[string][]StoredCell, map[int][]string, error) {
	out := map[string][]StoredCell{}
	holders := map[int][]string{}
	for _, p := range ds.Partitions {
		var c int
		if _, err := fmt.Sscanf(p.Cluster, "c%d", &c); err != nil || c < 0 || c >= StorageClusters {
			return nil, nil, fmt.Errorf("jepsen: partition %s/%d: unknown cluster %q", ds.Name, p.ID, p.Cluster)
		}
		master, in := s.Members(c)
		members := []int{master}
		for _, m := range in {
			if m == master {
				continue
			}
			st, err := s.probe(ctx, c, m)
			if err != nil {
				return nil, nil, fmt.Errorf("jepsen: probe %s: %w", s.Name(c, m), err)
			}
			if s.replicatesFrom(st, c, master) {
				members = append(members, m)
			}
		}
		for _, m := range members {
			name := s.Name(c, m)
			cs, err := s.readMember(ctx, c, m, ds, p)
			if err != nil {
				return nil, nil, fmt.Errorf("jepsen: read %s/%d from %s: %w", ds.Name, p.ID, name, err)
			}
			out[name] = append(out[name], cs...)
			for sh := p.FirstShard; sh <= p.LastShard; sh++ {
				holders[sh] = append(holders[sh], name)
			}
		}
	}
	return out, holders, nil
}

func (s *Storage) readMember(ctx context.Context, c, m int, ds *topology.DatastoreSpec, p topology.PartitionSpec) ([]StoredCell, error) {
	st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: s.set.AdminDSN(c, m), Prefix: ds.MySQLPrefix, MaxOpenConns: 2, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ps, err := st.Partition(ctx, storage.PartitionID{Datastore: ds.Name, Partition: p.ID}, p.Shards())
	if err != nil {
		return nil, err
	}
	var out []StoredCell
	for sh := p.FirstShard; sh <= p.LastShard; sh++ {
		var after int64
		for {
			page, err := ps.ScanShard(ctx, sh, after, 1000)
			if err != nil {
				return nil, err
			}
			for _, cell := range page {
				body, err := cell.Body.JSON()
				if err != nil {
					return nil, fmt.Errorf("cell %s: %w", cell.Key, err)
				}
				out = append(out, StoredCell{Node: s.Name(c, m), Shard: sh, RowKey: cell.Key.RowKey.String(), ColumnKey: cell.Key.ColumnKey,
					RefKey: cell.Key.RefKey, Body: string(body), AddedID: cell.AddedID})
			}
			if len(page) == 0 {
				break
			}
			after = page[len(page)-1].AddedID
		}
	}
	return out, nil
}

// memberOf returns the member of cluster c whose DSN (as given to Promote) is dsn, or -1.
func (s *Storage) memberOf(c int, dsn string) int {
	want, err := mysql.ParseDSN(dsn)
	if err != nil {
		return -1
	}
	for m := 0; m <= StorageMinions; m++ {
		got, err := mysql.ParseDSN(s.promoteDSN(c, m))
		if err == nil && got.Addr == want.Addr {
			return m
		}
	}
	return -1
}
