package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/storage"
)

// Errors of Put and ReadIndex. NotLeaderError and IndeterminateError carry details.
var (
	// ErrNotLeader: this replica is not the leader; nothing was done. See NotLeaderError.
	ErrNotLeader = errors.New("partition: not the leader")
	// ErrUnavailable: the partition cannot serve now (no leader known, queue full, shutting
	// down before the request was proposed); nothing was done and a retry is safe.
	ErrUnavailable = errors.New("partition: unavailable")
	// ErrIndeterminate: the write was proposed but its outcome is unknown (ctx ended, leadership
	// was lost, or raft shut down before it committed). It may still commit; a retry is safe
	// because writes are idempotent.
	ErrIndeterminate = errors.New("partition: write outcome unknown")
	// ErrClosed: the partition was closed.
	ErrClosed = errors.New("partition: closed")
)

// NotLeaderError says who the leader is, as far as this replica knows (empty when unknown).
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

// Error says the replica does not lead, naming the leader it knows (id and address) if any.
func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "partition: not the leader (leader unknown)"
	}
	return fmt.Sprintf("partition: not the leader (leader %s at %s)", e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Config configures a raft-mode partition replica.
type Config struct {
	// ID names the partition; Shards is its shard range.
	ID     storage.PartitionID
	Shards cells.ShardRange
	// NodeID is this replica's raft server ID (the node id).
	NodeID string
	// Dir holds this replica's raft log (raft.db or wal/, see LogStore) and snapshots. Created
	// if missing.
	Dir string
	// Peers is the initial configuration, used to bootstrap the group when Dir holds no raft
	// state. Every replica bootstraps with the same list.
	Peers []raft.Server
	// Transport carries the group's raft traffic (one per partition; see package transport).
	Transport raft.Transport
	// Store holds the replica's tables.
	Store *storage.PartitionStore
	// Logger is the node's logger. Default slog.Default().
	Logger *slog.Logger
	// OnFatal is called when the FSM's store keeps failing; it should stop the node.
	OnFatal func(error)
	// NewStateMachine, when set, builds the state machine instead of fsm.New over Store. The
	// benchmark's raft-noop baseline uses it (fsm.Noop); a replica then skips the store
	// catch-up at start.
	NewStateMachine func(ctx context.Context) (StateMachine, error)
	// SplitStore, OnSplitStart and OnSplit are handed to the state machine (fsm.Config): the
	// store of the right half of a split of this partition, what to do when a split begins to
	// apply (PrepareSplitReplica) and once it is applied. Nil SplitStore: this replica
	// refuses splits.
	SplitStore   func(ctx context.Context, right int, shards cells.ShardRange) (fsm.Store, func() error, error)
	OnSplitStart func(fsm.SplitEvent)
	OnSplit      func(fsm.SplitEvent)
	// MergeSource and OnMerge are handed to the state machine (fsm.Config): this node's store
	// of the frozen right partition of a merge into this one, and what to do once a merge is
	// applied. Nil MergeSource: this replica refuses merges.
	MergeSource func(ctx context.Context, right int) (fsm.Store, func() error, error)
	OnMerge     func(fsm.MergeEvent)

	// Raft timing (see raft.Config). Defaults: 1s, 1s, 500ms, 5ms. CommitTimeout is the commit
	// tick: a follower that may lack the leader's commit index gets it within CommitTimeout to
	// twice that after the last write of a burst (the tick sends nothing to followers that
	// have it, third_party/raft/PATCHES.md); hashicorp/raft's 50 ms made follower reads and
	// the streams between clusters wait 50 to 100 ms for a lone write.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// QuiesceAfter makes a leader that has had nothing to do for this long, with every
	// follower caught up, quiesce: the group then sends no heartbeats and arms no timers until
	// it has work again (raft.Config.QuiesceTimeout; third_party/raft/quiesce.go). A quiesced
	// follower starts no election on its own: whoever runs the replica must call Wake when the
	// leader's node is reported down (the cluster does it from gossip). Zero, the default,
	// disables quiescence.
	QuiesceAfter time.Duration
	// QuiesceDown reports whether a node is believed down (node-level liveness: gossip). A
	// leader then quiesces without waiting for the followers on down nodes, as long as the
	// other voters, caught up, are a quorum (raft.Config.QuiesceDown). Nil: every follower must
	// be caught up, so a group with a replica on a dead node never quiesces.
	QuiesceDown func(node string) bool
	// CommitNotify has the leader send the followers each new commit index at once
	// (raft.Config.CommitNotify, third_party/raft/PATCHES.md), so that stale, learner and
	// follower reads, log tails and the streams between clusters see a write about when the
	// leader applies it rather than at the next entries or commit tick (CommitTimeout to twice
	// that). It costs an AppendEntries per follower per commit that carries no new entry:
	// 4 to 12% more CPU per write in BENCHMARKS.md. False, the default: the commit tick alone.
	CommitNotify bool
	// LeaderReadIndex, when set, asks the partition's leader, wherever it runs, for its
	// LeaderReadIndex. It lets a follower (a learner too) serve strong reads after a read index
	// learned from the leader (FollowerReadIndex) and reads with a bound on their staleness
	// (BoundedStale); nil: a follower refuses strong reads (*NotLeaderError) and bounded ones
	// (ErrTooStale).
	LeaderReadIndex func(ctx context.Context) (uint64, error)
	// FollowerStrongReads lets every follower serve strong reads after the leader's read index
	// (FollowerReadIndex); false, the default, lets only a learner (a nonvoter) do so, and a
	// voter that does not lead refuses them (*NotLeaderError) for the node to send them to the
	// leader. Bounded stale reads use LeaderReadIndex on every replica either way.
	FollowerStrongReads bool
	// MaxAppendEntries bounds entries per AppendEntries and per group commit. Default 128.
	MaxAppendEntries int
	// SnapshotThreshold, SnapshotInterval and TrailingLogs control log compaction. Defaults:
	// 16384 entries, 5 minutes, 16384 entries.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// SnapshotRetain is how many snapshots are kept on disk. Default 2.
	SnapshotRetain int

	// MaxBatchCells bounds the cells grouped into one raft entry. Default 1000.
	MaxBatchCells int
	// MaxBatchBytes bounds the encoded bodies grouped into one raft entry. Default 4 MiB.
	MaxBatchBytes int
	// MaxInflight is how many entries may be proposed and not yet applied at once; requests
	// arriving meanwhile are grouped into the next one. Default 1: on the benchmark machine one
	// entry in flight made the largest entries and the most writes per second (BENCHMARKS.md).
	MaxInflight int
	// QueueSize is how many Put calls may wait for a batch slot; more get ErrUnavailable.
	// Default 4096.
	QueueSize int
	// EnqueueTimeout bounds handing an entry to raft. Default 5s.
	EnqueueTimeout time.Duration
	// LogCacheEntries is how many of the latest raft entries are kept in memory (raft's
	// LogCache) for replication to followers; older ones are read from the log. An entry
	// holds a batch of up to MaxBatchCells cells (MaxBatchBytes), so the cache can hold that
	// much per entry. Default 64.
	LogCacheEntries int
	// LogStore is the raft log's format: LogStoreAuto (the default: a replica directory that
	// holds a log keeps its format, a new replica gets LogStoreWAL), LogStoreWAL
	// (hashicorp/raft-wal v0.4.0 with the fix of third_party/raft-wal/PATCHES.md, wal/: segment
	// files read with pread, one fdatasync per append), LogStoreNode (the node's shared log,
	// NodeLog: one pebble store per node whose fsyncs cover the appends of all its partitions
	// at once; see package raftlog and BENCHMARKS.md for when it pays) or LogStoreBolt
	// (raft-boltdb/v2, raft.db: a B+tree file mapped whole, two fdatasync calls per append). A
	// named format is the one new replicas get; an existing replica directory in another
	// format fails to open (ErrLogStoreMismatch) rather than start an empty log. A replica
	// moves to another format only by being removed and added back (its data then comes from
	// a snapshot).
	LogStore string
	// NodeLog is the node's shared raft log store, used by LogStoreNode and by LogStoreAuto
	// for a replica directory whose log is there (InNodeLog); nil for none. The caller opens it once per node, shares it between
	// the node's replicas and closes it after them.
	NodeLog *raftlog.Store
	// HeartbeatFastPath lets raft's transport handle heartbeats on their connection's goroutine,
	// concurrently with raft's main goroutine, as hashicorp/raft does by default. Off (false) by
	// default, because that race can diverge the logs of a deposed leader after a network
	// partition heals (hashicorp/raft issue 695; see heartbeat.go). Turning it on trades that
	// safety for heartbeats that never wait behind a disk write.
	HeartbeatFastPath bool
}

// DefaultConfig returns the tunables' defaults; the identity fields are left empty.
func DefaultConfig() Config {
	return Config{
		Logger:             slog.Default(),
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		MaxAppendEntries:   128,
		SnapshotThreshold:  16384,
		SnapshotInterval:   5 * time.Minute,
		TrailingLogs:       16384,
		SnapshotRetain:     2,
		MaxBatchCells:      1000,
		MaxBatchBytes:      4 << 20,
		MaxInflight:        1,
		QueueSize:          4096,
		EnqueueTimeout:     5 * time.Second,
		LogStore:           LogStoreAuto,
		LogCacheEntries:    64,
	}
}

// EnsureDefaults fills every zero tunable with its default.
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	set := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	seti := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setu := func(p *uint64, v uint64) {
		if *p == 0 {
			*p = v
		}
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	set(&c.HeartbeatTimeout, d.HeartbeatTimeout)
	set(&c.ElectionTimeout, d.ElectionTimeout)
	set(&c.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	set(&c.CommitTimeout, d.CommitTimeout)
	set(&c.SnapshotInterval, d.SnapshotInterval)
	set(&c.EnqueueTimeout, d.EnqueueTimeout)
	seti(&c.MaxAppendEntries, d.MaxAppendEntries)
	seti(&c.SnapshotRetain, d.SnapshotRetain)
	seti(&c.MaxBatchCells, d.MaxBatchCells)
	seti(&c.MaxBatchBytes, d.MaxBatchBytes)
	seti(&c.MaxInflight, d.MaxInflight)
	seti(&c.QueueSize, d.QueueSize)
	seti(&c.LogCacheEntries, d.LogCacheEntries)
	setu(&c.SnapshotThreshold, d.SnapshotThreshold)
	setu(&c.TrailingLogs, d.TrailingLogs)
	if c.OnFatal == nil {
		c.OnFatal = func(error) {}
	}
	if c.LogStore == "" {
		c.LogStore = d.LogStore
	}
}

// Validate reports every missing field.
func (c Config) Validate() error {
	var errs []error
	if c.ID.Datastore == "" {
		errs = append(errs, errors.New("partition: Config.ID.Datastore is required"))
	}
	if c.Shards.First < 0 || c.Shards.Last < c.Shards.First {
		errs = append(errs, fmt.Errorf("partition: Config.Shards %d..%d is not a range", c.Shards.First, c.Shards.Last))
	}
	if c.NodeID == "" {
		errs = append(errs, errors.New("partition: Config.NodeID is required"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("partition: Config.Dir is required"))
	}
	if c.Transport == nil {
		errs = append(errs, errors.New("partition: Config.Transport is required"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("partition: Config.Store is required"))
	}
	if err := checkLogStore(c.LogStore, c.NodeLog); err != nil {
		errs = append(errs, fmt.Errorf("partition: Config.LogStore: %w", err))
	}
	if c.MaxInflight < 1 || c.MaxBatchCells < 1 || c.QueueSize < 1 {
		errs = append(errs, errors.New("partition: MaxInflight, MaxBatchCells and QueueSize must be positive"))
	}
	return errors.Join(errs...)
}

// StateMachine is what a replica applies committed entries to: *fsm.FSM, or fsm.Noop.
type StateMachine interface {
	raft.BatchingFSM
	// Applied returns what the state reflects; WaitApplied blocks until Applied().Index reaches
	// index; Failed reports a stopped state machine.
	Applied() storage.AppliedState
	WaitApplied(ctx context.Context, index uint64) error
	Failed() error
	// HighWater returns a shard's highest added_id when known without I/O; AppliedChanged a
	// channel closed when the applied index next advances (for long polls).
	HighWater(shard int) (int64, bool)
	AppliedChanged() <-chan struct{}
}

var (
	_ StateMachine = (*fsm.FSM)(nil)
	_ StateMachine = (*fsm.Noop)(nil)
)

// Raft is one replica of a raft-mode partition.
type Raft struct {
	cfg       Config
	log       *slog.Logger
	baseIndex uint64     // the index of a split's base when it is the latest snapshot at Open (catchUpStore)
	load      *shardLoad // requests served per shard (ShardLoad)
	raft      *raft.Raft
	fsm       StateMachine
	stable    raft.StableStore // the raft log store (node, wal or bolt), which also holds raft's stable state
	closeLog  func() error
	logs      raft.LogStore
	queue     chan *proposal
	slots     chan struct{}
	// restoreGate is read-locked around each proposal of a write batch (propose) and locked
	// by RestoreBackup from its count of the partition's cells until raft's restore ends.
	restoreGate sync.RWMutex
	stop        chan struct{}
	wg          sync.WaitGroup
	closed      atomic.Bool
	// readyTerm is the last term in which this leader saw an entry of its own term committed.
	readyTerm atomic.Uint64
	// known is the last read index this replica learned from its leader (followerread.go).
	known knownIndex
	// catalog is the last catalog read's answer (readCatalog).
	catalog   atomic.Pointer[catalogRead]
	closeOnce sync.Once
	closeErr  error
	metrics   *raftMetrics // see metrics.go
	votes     voteTracker  // the vote requests of its elections (Votes)
	// baseWanted is closed (once: baseWant) when raft would send a split's base to a follower
	// (baseSnapshots): snapshotPastBase then takes a real snapshot. Nil unless the latest
	// snapshot at Open was a split's base.
	baseWanted chan struct{}
	baseWant   sync.Once
}

// Open starts the replica: opens the raft log and snapshots under cfg.Dir, brings the store up
// to the latest snapshot if it is behind (see the package documentation), starts raft, and
// bootstraps the group from cfg.Peers if Dir held no raft state. It does not wait for a leader.
func Open(ctx context.Context, cfg Config) (*Raft, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s/%d", cfg.ID.Datastore, cfg.ID.Partition)
	logger := cfg.Logger.With("partition", name)
	began := time.Now()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("partition %s: %w", name, err)
	}
	store, stable, closeLog, err := openLogStore(cfg.Dir, cfg.LogStore, cfg.NodeLog, LogName(cfg.ID))
	if err != nil {
		return nil, fmt.Errorf("partition %s: open raft log: %w", name, err)
	}
	p := &Raft{cfg: cfg, log: logger, load: newShardLoad(cfg.Shards), stable: stable, closeLog: closeLog, stop: make(chan struct{}), metrics: newRaftMetrics(cfg.ID)}
	ok := false
	defer func() {
		if !ok {
			_ = closeLog()
		}
	}()
	logs, err := raft.NewLogCache(cfg.LogCacheEntries, store)
	if err != nil {
		return nil, fmt.Errorf("partition %s: %w", name, err)
	}
	p.logs = logs
	logOpened := time.Now()
	hlog := hclogslog.New(logger, "raft")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain, hlog)
	if err != nil {
		return nil, fmt.Errorf("partition %s: snapshot store: %w", name, err)
	}
	if cfg.NewStateMachine != nil {
		if p.fsm, err = cfg.NewStateMachine(ctx); err != nil {
			return nil, fmt.Errorf("partition %s: %w", name, err)
		}
	} else {
		f, err := fsm.New(ctx, fsm.Config{Store: cfg.Store, Logger: logger, OnFatal: cfg.OnFatal, SplitStore: cfg.SplitStore, OnSplit: cfg.OnSplit,
			OnSplitStart: cfg.OnSplitStart, MergeSource: cfg.MergeSource, OnMerge: cfg.OnMerge})
		if err != nil {
			return nil, fmt.Errorf("partition %s: %w", name, err)
		}
		p.fsm = f
		if err := p.catchUpStore(snaps, f); err != nil {
			return nil, fmt.Errorf("partition %s: %w", name, err)
		}
		if err := storeBaseEntry(p.logs, p.baseIndex); err != nil {
			return nil, fmt.Errorf("partition %s: %w", name, err)
		}
	}

	fsmOpened := time.Now()
	rc := RaftConfig(cfg, hlog)
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("partition %s: %w", name, err)
	}
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("partition %s: %w", name, err)
	}
	trans := wrapTransport(cfg.Transport, !cfg.HeartbeatFastPath, &p.votes)
	var raftSnaps raft.SnapshotStore = snaps
	if p.baseIndex > 0 {
		p.baseWanted = make(chan struct{})
		raftSnaps = baseSnapshots{SnapshotStore: snaps, p: p}
	}
	r, err := raft.NewRaft(rc, p.fsm, logs, stable, raftSnaps, trans)
	if err != nil {
		return nil, fmt.Errorf("partition %s: start raft: %w", name, err)
	}
	p.raft = r
	r.RegisterObserver(p.metrics.leaderObserver())
	if !existing && len(cfg.Peers) > 0 {
		if err := r.BootstrapCluster(raft.Configuration{Servers: cfg.Peers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = r.Shutdown().Error()
			return nil, fmt.Errorf("partition %s: bootstrap: %w", name, err)
		}
		logger.Info("bootstrapped raft group", "peers", len(cfg.Peers))
	}
	if p.baseIndex > 0 {
		logger.Info("opened a split's new replica from its base", "base", p.baseIndex,
			"log_ms", msSince(began, logOpened), "state_machine_ms", msSince(logOpened, fsmOpened), "raft_ms", msSince(fsmOpened, time.Now()))
		// The latest snapshot is a split's base, which a replica lacking the copy cannot
		// restore: take a real one once raft would send the base (baseSnapshots).
		p.wg.Add(1)
		go p.snapshotPastBase(p.baseIndex)
	}
	p.queue = make(chan *proposal, cfg.QueueSize)
	p.slots = make(chan struct{}, cfg.MaxInflight)
	p.wg.Add(1)
	go p.batchLoop()
	ok = true
	return p, nil
}

// storeBaseEntry puts, into the empty raft log logs of a replica that starts from a split's
// base at index base (0: none), an entry at the base's index and term (1) that the state
// machine never applies (raft applies only the entries after the latest snapshot, which is the
// base). raft checks an AppendEntries against the entry before its first one, which it reads
// from the log unless it is the follower's last: without this entry, a follower that had
// appended entries after the base in a term that did not commit them refused a leader whose
// entries follow the base (no entry at the base's index in its log), the leader fell back to
// sending a snapshot, and the base, which holds no data, cannot be sent: the group stalled. A
// log that holds entries is left as it is.
func storeBaseEntry(logs raft.LogStore, base uint64) error {
	if base == 0 {
		return nil
	}
	last, err := logs.LastIndex()
	if err != nil || last > 0 {
		return err
	}
	if err := logs.StoreLog(&raft.Log{Index: base, Term: 1, Type: raft.LogNoop}); err != nil {
		return fmt.Errorf("store the split base's entry %d: %w", base, err)
	}
	return nil
}

// catchUpStore brings the store up to the latest snapshot when the store is behind it: raft
// with NoSnapshotRestoreOnStart will not replay entries at or below the snapshot's index.
func (p *Raft) catchUpStore(snaps *raft.FileSnapshotStore, f *fsm.FSM) error {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return err
	}
	latest := metas[0]
	meta, rc, err := snaps.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", latest.ID, err)
	}
	hdr, err := fsm.ReadSnapshotHeader(rc)
	rc.Close()
	if errors.Is(err, fsm.ErrSplitBase) {
		// A split's base holds no data: the store must hold the split's copy.
		if f.Applied().Index < hdr.Applied.Index {
			return fmt.Errorf("snapshot %s: the store (applied %d) lacks the split's copy it starts from (%d)", latest.ID, f.Applied().Index, hdr.Applied.Index)
		}
		p.baseIndex = hdr.Applied.Index
		return nil
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", latest.ID, err)
	}
	applied := f.Applied().Index
	if applied >= hdr.Applied.Index {
		return nil // the store holds everything the snapshot holds
	}
	first, err := p.logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := p.logs.LastIndex()
	if err != nil {
		return err
	}
	if first != 0 && first <= applied+1 && last >= meta.Index {
		p.log.Warn("store is behind the latest snapshot, replaying from the raft log", "store_applied", applied, "snapshot_index", meta.Index)
		return p.replay(f, applied+1, meta.Index)
	}
	p.log.Warn("store is behind the latest snapshot and the log is compacted, restoring the snapshot", "store_applied", applied, "snapshot_index", meta.Index, "first_log", first)
	_, rc, err = snaps.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", latest.ID, err)
	}
	return f.Restore(rc)
}

// replay applies log entries [from, to] (all committed: they are covered by a snapshot) to
// the FSM as raft would, in batches.
func (p *Raft) replay(f *fsm.FSM, from, to uint64) error {
	const batch = 256
	var logs []*raft.Log
	flush := func() error {
		if len(logs) == 0 {
			return nil
		}
		f.ApplyBatch(logs)
		logs = logs[:0]
		return f.Failed()
	}
	for i := from; i <= to; i++ {
		l := new(raft.Log)
		if err := p.logs.GetLog(i, l); err != nil {
			return fmt.Errorf("replay log %d: %w", i, err)
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			logs = append(logs, l)
		}
		if len(logs) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// Shards returns the shard range the replica holds now: the state machine's, which a split
// shrinks (fsm.FSM.Shards), or Config.Shards for a state machine without one.
func (p *Raft) Shards() cells.ShardRange {
	if s, ok := p.fsm.(interface{ Shards() cells.ShardRange }); ok {
		return s.Shards()
	}
	return p.cfg.Shards
}

// FSM returns the replica's state machine (its applied index, WaitApplied).
func (p *Raft) FSM() StateMachine { return p.fsm }

// Store returns the replica's tables, for reads.
func (p *Raft) Store() *storage.PartitionStore { return p.cfg.Store }

// Config returns the replica's configuration, with defaults filled in.
func (p *Raft) Config() Config { return p.cfg }

// Raft returns the underlying raft instance, for status and admin operations.
func (p *Raft) Raft() *raft.Raft { return p.raft }

// IsLeader reports whether this replica believes it is the leader.
func (p *Raft) IsLeader() bool { return p.raft.State() == raft.Leader }

// Leader returns the leader's server id and raft address as this replica knows them (empty if
// unknown).
func (p *Raft) Leader() (id, addr string) {
	a, i := p.raft.LeaderWithID()
	return string(i), string(a)
}

// Wake ends the replica's quiescence (Config.QuiesceAfter): a quiesced leader resumes its
// heartbeats; a quiesced follower resumes its election timer and starts an election at once
// if it has not heard from the leader for HeartbeatTimeout. Call it when the leader's node is
// believed down. It never blocks and does nothing on a replica that is not quiesced.
func (p *Raft) Wake() { p.raft.Wake() }

// Quiesced reports whether the replica is a quiesced leader or follower.
func (p *Raft) Quiesced() bool { return p.raft.Quiesced() }

func (p *Raft) notLeader() error {
	id, addr := p.Leader()
	return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// RaftConfig returns the hashicorp/raft configuration of a replica of c: its NodeID as the
// server id, c's timeouts, batch and snapshot settings, batched applies, no snapshot restore at
// start (the store is the state machine's state) and no legacy telemetry (no go-metrics names
// holding peer ids). logger receives raft's logs. Open uses it; so does the benchmark's
// raft-raw baseline, to run hashicorp/raft alone with the partitions' settings.
func RaftConfig(c Config, logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.Logger = logger
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.QuiesceTimeout = c.QuiesceAfter
	rc.CommitNotify = c.CommitNotify
	if down := c.QuiesceDown; down != nil {
		rc.QuiesceDown = func(id raft.ServerID) bool { return down(string(id)) }
	}
	rc.MaxAppendEntries = c.MaxAppendEntries
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	rc.NoSnapshotRestoreOnStart = true
	rc.NoLegacyTelemetry = true
	return rc
}

// NotLeader returns the *NotLeaderError this replica answers a leader-only request with: the
// leader it knows, if any.
func (p *Raft) NotLeader() error { return p.notLeader() }

// Close stops the replica: pending Puts fail with ErrClosed or ErrIndeterminate, raft shuts down
// and the raft log is closed. The store and the transport are the caller's to close. Idempotent.
//
// Raft shuts down before the replica's goroutines are waited for: a write's waiter holds its
// raft future, which a leader whose entries reach no follower never resolves (it keeps leading
// on heartbeats alone) until the shutdown fails it.
func (p *Raft) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.stop)
		err := p.raft.Shutdown().Error()
		p.wg.Wait()
		if cerr := p.closeLog(); err == nil {
			err = cerr
		}
		p.closeErr = err
		p.metrics.forget()
	})
	return p.closeErr
}

// msSince is the time from a to b in milliseconds with a tenth's precision, for log lines.
func msSince(a, b time.Time) float64 { return float64(b.Sub(a).Round(100*time.Microsecond)) / 1e6 }
