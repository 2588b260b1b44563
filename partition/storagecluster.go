package partition

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/sony/gobreaker/v2"
)

// ClusterConfig configures a StorageCluster: one MySQL master with its minions, as async mode
// uses it. Name, Members and Prefix are required.
type ClusterConfig struct {
	// Name names the cluster in logs, errors and metrics.
	Name string
	// Members are the DSNs of every member (go-sql-driver/mysql; the database part is
	// ignored), the configured master first. Connection timeouts the DSN does not set are
	// filled in: timeout 1s, readTimeout and writeTimeout 5s (1s for probes).
	Members []string
	// Prefix is the datastore's database prefix (storage.MySQLConfig.Prefix).
	Prefix string
	// ProbeInterval is how often every member is probed (read_only, replication). Default 500ms.
	ProbeInterval time.Duration
	// MaxOpenConns bounds each member's connection pools (storage.MySQLConfig). Default 32.
	MaxOpenConns int
	// BreakerFailures is how many consecutive connection failures open a member's circuit
	// breaker; BreakerTimeout how long it stays open before one trial request. Defaults 3 and 2s.
	BreakerFailures int
	BreakerTimeout  time.Duration
	// Logger receives master changes and probe failures. Default slog.Default().
	Logger *slog.Logger
}

func (c *ClusterConfig) ensureDefaults() {
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = 500 * time.Millisecond
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = storage.DefaultMySQLMaxOpenConns
	}
	if c.BreakerFailures <= 0 {
		c.BreakerFailures = 3
	}
	if c.BreakerTimeout <= 0 {
		c.BreakerTimeout = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// StorageCluster is one MySQL storage cluster as a node sees it: its members, which of them is
// the master (found by probing: the one member with read_only OFF that replicates from nobody;
// none while two claim it), which are minions, and a circuit breaker (sony/gobreaker) per
// member. A promotion (replication.Promote) is picked up by the next probe, with no
// configuration change. Safe for concurrent use.
type StorageCluster struct {
	cfg     ClusterConfig
	members []*member
	stop    chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex
	master  int   // index in members, -1 when none
	minions []int // reachable members replicating from someone
	probed  chan struct{}
	once    sync.Once
	soon    chan struct{} // a send asks probeLoop for a round now (probeSoon)
}

// member is one MySQL server of a cluster.
type member struct {
	dsn   string
	name  string // "<cluster>/<index>"
	admin *sql.DB
	// cb is the member's circuit breaker; a successful probe replaces one that is not closed
	// (open or half-open) by a closed one, so that a server that is back serves at once.
	cb atomic.Pointer[gobreaker.CircuitBreaker[struct{}]]

	probing atomic.Bool // a probe of the member is running

	storeMu sync.Mutex     // guards ro and rw
	ro      *storage.Store // reads, opened on first use
	rw      *storage.Store // writes, opened when the member is first used as master

	mu     sync.Mutex // guards status and err
	status replication.MemberStatus
	err    error // the last probe's error
}

// OpenCluster starts probing the members of cfg and returns at once; Master and Minion wait
// for the first probe round (up to ctx). Close stops it.
func OpenCluster(cfg ClusterConfig) (*StorageCluster, error) {
	cfg.ensureDefaults()
	if cfg.Name == "" || len(cfg.Members) == 0 || cfg.Prefix == "" {
		return nil, errors.New("partition: ClusterConfig needs Name, Members and Prefix")
	}
	c := &StorageCluster{cfg: cfg, stop: make(chan struct{}), master: -1, probed: make(chan struct{}), soon: make(chan struct{}, 1)}
	for i, dsn := range cfg.Members {
		dsn, err := withTimeouts(dsn, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("partition: cluster %s member %d: %w", cfg.Name, i, err)
		}
		// Probes give up sooner: a stalled server (one that accepts connections but answers
		// nothing) must stop being the master within a probe or two.
		probeDSN, _ := withTimeouts(cfg.Members[i], time.Second)
		admin, err := replication.Open(probeDSN)
		if err != nil {
			return nil, fmt.Errorf("partition: cluster %s member %d: %w", cfg.Name, i, err)
		}
		m := &member{dsn: dsn, admin: admin, name: fmt.Sprintf("%s/%d", cfg.Name, i)}
		m.cb.Store(newBreaker(m.name, cfg))
		c.members = append(c.members, m)
	}
	c.wg.Add(1)
	go c.probeLoop()
	return c, nil
}

// newBreaker returns a closed circuit breaker for the member named name.
func newBreaker(name string, cfg ClusterConfig) *gobreaker.CircuitBreaker[struct{}] {
	return gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: 1,
		Timeout:     cfg.BreakerTimeout,
		ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= uint32(cfg.BreakerFailures) },
		IsSuccessful: func(err error) bool {
			return err == nil || !connectionFailure(err)
		},
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			cfg.Logger.Warn("partition: storage circuit breaker", "member", name, "from", from.String(), "to", to.String())
		},
	})
}

// withTimeouts fills the connection timeouts a DSN leaves unset: 1s to connect, io for reads
// and writes (which also bounds the handshake with a server that accepted the connection).
func withTimeouts(dsn string, io time.Duration) (string, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	if mc.Timeout == 0 {
		mc.Timeout = time.Second
	}
	if mc.ReadTimeout == 0 {
		mc.ReadTimeout = io
	}
	if mc.WriteTimeout == 0 {
		mc.WriteTimeout = io
	}
	return mc.FormatDSN(), nil
}

// connectionFailure reports whether err counts against a member's circuit breaker: the server
// could not be reached, answered nothing, or refuses writes as read-only (a fenced old
// master). Other SQL errors prove the server alive; a lock wait is contention, not failure.
func connectionFailure(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1290 || me.Number == 1836
	}
	return !errors.Is(err, storage.ErrLockTimeout)
}

var errNoMaster = errors.New("no master")

func (c *StorageCluster) probeLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.ProbeInterval)
	defer t.Stop()
	for {
		c.probe()
		select {
		case <-t.C:
		case <-c.soon:
		case <-c.stop:
			return
		}
	}
}

// probeSoon asks for a probe round now, when a member the cluster takes for its master was
// found read-only: the round after the one running, if one is. It does not block.
func (c *StorageCluster) probeSoon() {
	select {
	case c.soon <- struct{}{}:
	default:
	}
}

// probe asks every member for its state and recomputes the master and the minions. A member
// whose probe has not answered within the round's 2 s (or whose previous probe still hangs)
// counts as unreachable for this round.
func (c *StorageCluster) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan struct{}, len(c.members))
	started := 0
	for _, m := range c.members {
		if !m.probing.CompareAndSwap(false, true) {
			m.mu.Lock()
			m.err = errors.New("previous probe still running")
			m.mu.Unlock()
			continue
		}
		started++
		go func() {
			defer func() { m.probing.Store(false); done <- struct{}{} }()
			st, err := replication.Probe(ctx, m.admin, m.dsn)
			if err == nil && m.cb.Load().State() != gobreaker.StateClosed {
				// Open, or half-open: a half-open breaker lets one trial request through and
				// refuses the others meanwhile, so a member that is back would still refuse
				// most requests after the round that publishes it as master.
				c.cfg.Logger.Info("partition: storage circuit breaker closed after a successful probe", "member", m.name)
				m.cb.Store(newBreaker(m.name, c.cfg))
			}
			m.mu.Lock()
			m.status, m.err = st, err
			m.mu.Unlock()
		}()
	}
	for ; started > 0; started-- {
		select {
		case <-done:
		case <-ctx.Done():
			for _, m := range c.members {
				if m.probing.Load() {
					m.mu.Lock()
					m.err = fmt.Errorf("probe: %w", ctx.Err())
					m.mu.Unlock()
				}
			}
			started = 1 // stop waiting
		}
	}
	master, masters := -1, 0
	var minions []int
	for i, m := range c.members {
		m.mu.Lock()
		st, err := m.status, m.err
		m.mu.Unlock()
		switch {
		case err != nil:
		case st.IsMaster():
			master, masters = i, masters+1
		case st.Replicating && !brokenReplica(st):
			minions = append(minions, i)
		}
	}
	if masters > 1 {
		c.cfg.Logger.Error("partition: more than one member of a storage cluster is writable; no master until it is resolved", "cluster", c.cfg.Name)
		master = -1
	}
	c.mu.Lock()
	if master != c.master && c.master < 0 {
		c.cfg.Logger.Info("partition: storage cluster master found", "cluster", c.cfg.Name, "master", c.memberName(master))
	} else if master != c.master {
		c.cfg.Logger.Warn("partition: storage cluster master changed", "cluster", c.cfg.Name, "from", c.memberName(c.master), "to", c.memberName(master))
	}
	c.master, c.minions = master, minions
	c.mu.Unlock()
	c.once.Do(func() { close(c.probed) })
}

// brokenReplica reports whether a member's replication stopped for good: its SQL thread failed
// to apply an event, or its master refused its position (error 1236: a diverged old master).
// It then serves no stale reads. An IO thread that is only reconnecting to a master that is
// away is not broken: that minion is what stale reads need then.
func brokenReplica(st replication.MemberStatus) bool {
	return strings.Contains(st.LastError, "sql:") || strings.Contains(st.LastError, "1236")
}

func (c *StorageCluster) memberName(i int) string {
	if i < 0 {
		return "none"
	}
	mc, err := mysql.ParseDSN(c.members[i].dsn)
	if err != nil {
		return fmt.Sprint(i)
	}
	return mc.Addr
}

func (c *StorageCluster) waitProbed(ctx context.Context) error {
	select {
	case <-c.probed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// masterMember returns the current master, or errNoMaster.
func (c *StorageCluster) masterMember(ctx context.Context) (int, *member, error) {
	if err := c.waitProbed(ctx); err != nil {
		return -1, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.master < 0 {
		return -1, nil, fmt.Errorf("%w of storage cluster %s", errNoMaster, c.cfg.Name)
	}
	return c.master, c.members[c.master], nil
}

// minionMembers returns the reachable minions in a random order.
func (c *StorageCluster) minionMembers(ctx context.Context) ([]*member, error) {
	if err := c.waitProbed(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	idx := append([]int(nil), c.minions...)
	c.mu.Unlock()
	rand.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	out := make([]*member, len(idx))
	for i, k := range idx {
		out[i] = c.members[k]
	}
	return out, nil
}

// HasMaster reports whether the last probe found a master.
func (c *StorageCluster) HasMaster() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.master >= 0
}

// HasMinions reports whether the cluster is configured with minions.
func (c *StorageCluster) HasMinions() bool { return len(c.members) > 1 }

// readStore returns the member's read-only store, opening it on first use. The open (network
// I/O) runs under storeMu only, never under mu, which probes need.
func (m *member) readStore(ctx context.Context, c *StorageCluster) (*storage.Store, error) {
	return m.openStore(ctx, c, &m.ro, true)
}

// writeStore returns the member's writable store (creating the meta and buffer tables),
// opening it on first use; only for the master.
func (m *member) writeStore(ctx context.Context, c *StorageCluster) (*storage.Store, error) {
	return m.openStore(ctx, c, &m.rw, false)
}

func (m *member) openStore(ctx context.Context, c *StorageCluster, slot **storage.Store, readOnly bool) (*storage.Store, error) {
	m.storeMu.Lock()
	defer m.storeMu.Unlock()
	if *slot != nil {
		return *slot, nil
	}
	st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: m.dsn, Prefix: c.cfg.Prefix, MaxOpenConns: c.cfg.MaxOpenConns, ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	*slot = st
	return st, nil
}

// run runs fn through the member's circuit breaker: at once ErrUnavailable while it is open.
func (m *member) run(fn func() error) error {
	_, err := m.cb.Load().Execute(func() (struct{}, error) { return struct{}{}, fn() })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return fmt.Errorf("%w: circuit breaker of %s is open", ErrUnavailable, m.name)
	}
	return err
}

// MemberStatus is what a node knows of one member of a storage cluster.
type MemberStatus struct {
	Addr    string
	Role    string // "master", "minion" or "unknown" (unreachable, or neither)
	Breaker string // "closed", "half-open" or "open"
	Probe   replication.MemberStatus
	Err     string // the last probe's error
}

// Status returns every member's state as last probed, in member order.
func (c *StorageCluster) Status() []MemberStatus {
	c.mu.Lock()
	master, minions := c.master, append([]int(nil), c.minions...)
	c.mu.Unlock()
	out := make([]MemberStatus, len(c.members))
	for i, m := range c.members {
		m.mu.Lock()
		st, err := m.status, m.err
		m.mu.Unlock()
		s := MemberStatus{Addr: c.memberName(i), Role: "unknown", Breaker: m.cb.Load().State().String(), Probe: st}
		if err != nil {
			s.Err = err.Error()
		}
		if i == master {
			s.Role = "master"
		}
		for _, k := range minions {
			if k == i {
				s.Role = "minion"
			}
		}
		out[i] = s
	}
	return out
}

// Name returns the cluster's name.
func (c *StorageCluster) Name() string { return c.cfg.Name }

// Close stops probing and closes every connection pool.
func (c *StorageCluster) Close() error {
	close(c.stop)
	c.wg.Wait()
	var errs []error
	for _, m := range c.members {
		m.storeMu.Lock()
		if m.ro != nil {
			errs = append(errs, m.ro.Close())
		}
		if m.rw != nil {
			errs = append(errs, m.rw.Close())
		}
		m.storeMu.Unlock()
		errs = append(errs, m.admin.Close())
	}
	return errors.Join(errs...)
}
