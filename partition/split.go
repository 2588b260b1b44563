package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/hclogslog"
	"github.com/schemaless-db/schemaless/raftlog"
	"github.com/schemaless-db/schemaless/storage"
)

// A partition made by a split starts on every replica that applied the split from the copy of
// the right half in its store (fsm.SplitOrigin), not from an empty log: its raft group begins
// with a snapshot at the index of the split in the parent's log, holding that copy and the
// voters the split named. No entry precedes it, so a replica that lacks the copy (one that
// learned of the split from a snapshot of the parent) gets the snapshot from the leader, never
// entries to apply on an empty store (CockroachDB starts the right-hand range of a split the
// same way, from the split trigger's state rather than a log).

// WriteSplitBase writes, into the replica directory dir, the raft snapshot the right half of a
// split starts from, when dir holds no raft log and no snapshot yet and store holds a split's
// copy (fsm.ReadSplitOrigin) applied up to the split. It reports whether dir now holds a base
// to start from (written now or before). trans encodes the voters' addresses into the
// snapshot's metadata. It blocks while the snapshot's files are written and synced.
func WriteSplitBase(ctx context.Context, dir string, store *storage.PartitionStore, trans raft.Transport, logger *slog.Logger) (bool, error) {
	if HasLog(dir) {
		return false, nil
	}
	snaps, has, err := snapshotStore(dir, logger)
	if err != nil || has {
		return has, err
	}
	origin, ok, err := fsm.ReadSplitOrigin(ctx, store)
	if err != nil || !ok {
		return false, err
	}
	applied, err := store.Applied(ctx)
	if err != nil {
		return false, err
	}
	if applied.Index < origin.Index {
		return false, nil
	}
	if err := writeBase(snaps, applied.Index, store.Shards(), origin.Voters, trans); err != nil {
		return false, err
	}
	return true, nil
}

// snapshotStore opens the raft snapshot store of replica directory dir (raft checks that it
// can write there: a file created and removed) and reports whether it holds a snapshot.
func snapshotStore(dir string, logger *slog.Logger) (*raft.FileSnapshotStore, bool, error) {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogslog.New(logger, "raft"))
	if err != nil {
		return nil, false, err
	}
	metas, err := snaps.List()
	return snaps, len(metas) > 0, err
}

// writeBase writes the base snapshot of a split's right half into snaps: at index, in term 1 (as
// the copy's applied state: the group's first leader, term 1 or more, never appends below its
// log's last term), configuration voters, holding no data (fsm.ErrSplitBase; writing the copy
// again here would double the split's work: the replica takes a real snapshot once a follower
// needs one, baseSnapshots), only shards and the applied state.
func writeBase(snaps *raft.FileSnapshotStore, index uint64, shards cells.ShardRange, voters []command.Voter, trans raft.Transport) error {
	var conf raft.Configuration
	for _, v := range voters {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(v.ID), Address: raft.ServerAddress(v.Addr), Suffrage: raft.Voter})
	}
	if len(conf.Servers) == 0 {
		return fmt.Errorf("partition: the split's copy names no voter")
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, conf, index, trans)
	if err != nil {
		return err
	}
	if err := fsm.WriteSplitBase(sink, shards, storage.AppliedState{Index: index, Term: 1}); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// SplitBase is what a split's right half starts from on a replica that applies the split: the
// split entry's index in the parent's log, the right half's shards and first voters
// (fsm.SplitEvent of Config.OnSplitStart), and Self, the preparing node's id. The first voter
// is the group's first candidate (Split puts the proposing leader first): every other voter's
// preparation records its vote for it in term 1 (PrepareSplitReplica).
type SplitBase struct {
	Index  uint64
	Shards cells.ShardRange
	Voters []command.Voter
	Self   string
}

// PrepareSplitReplica writes what the right half's replica in directory dir starts from, while
// this node's replica of the parent still applies the split (copies the right half's shards
// into its store): a marker naming the base's index (SplitPrepared), then at once the base
// snapshot (writeBase) and, in a raft log of format kind opened and closed here (openLogStore;
// nodeLog and name as Config.NodeLog and LogName), the base's entry. Open finds both and writes
// neither again, so its replica starts the moment the store is ready: the files' syncs run
// beside the copy instead of after it (BENCHMARKS.md). A dir that holds a raft log already is
// left alone (nil). The base is the one WriteSplitBase writes from the store once it holds the
// copy.
//
// A voter other than the first (the proposing leader, which campaigns once its replica opens)
// also records in its stable store its vote for the first voter in term 1: its current term 1,
// its last vote that term for that voter's address, as raft's own vote would. The first
// election then costs the voter no write: raft grants a repeated request of the candidate it
// voted for in the term without writing again (each write of the term and the vote is a synced
// one: the candidate's own took 15 to 20 ms on the loaded nodes of BENCHMARKS.md). Raft's rule of one vote
// per term holds: the vote is cast once, before the replica answers anyone, and for term 1
// only, which no other candidate can then win; a voter that campaigns itself, or a first
// voter whose election fails, goes on in term 2 as before. Blocks on I/O.
func PrepareSplitReplica(dir, kind string, nodeLog *raftlog.Store, name string, base SplitBase, logger *slog.Logger) error {
	if HasLog(dir) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(dir, preparedMarker), strconv.FormatUint(base.Index, 10)); err != nil {
		return fmt.Errorf("partition: the split's marker: %w", err)
	}
	// The marker is durable: the base and the log are written at once (on a loaded node each
	// is several synced writes: 3 to 15 ms for the base, 10 to 45 for the log's, 2026-12-03).
	var wg sync.WaitGroup
	var baseErr error
	wg.Go(func() {
		snaps, has, err := snapshotStore(dir, logger)
		if err == nil && !has {
			err = writeBase(snaps, base.Index, base.Shards, base.Voters, addrEncoder{})
		}
		if err != nil {
			baseErr = fmt.Errorf("partition: the split's base: %w", err)
		}
	})
	err := prepareSplitLog(dir, kind, nodeLog, name, base)
	wg.Wait()
	return errors.Join(baseErr, err)
}

// prepareSplitLog is PrepareSplitReplica's raft log: the base's entry and, for a voter other
// than the first, its vote, written at once (synced writes of a shared node log then share a
// sync).
func prepareSplitLog(dir, kind string, nodeLog *raftlog.Store, name string, base SplitBase) error {
	logs, stable, closeLog, err := openLogStore(dir, kind, nodeLog, name)
	if err != nil {
		return fmt.Errorf("partition: open raft log: %w", err)
	}
	var wg sync.WaitGroup
	var voteErr error
	if len(base.Voters) > 1 && base.Voters[0].ID != base.Self && slices.ContainsFunc(base.Voters, func(v command.Voter) bool { return v.ID == base.Self }) {
		wg.Go(func() { voteErr = preVote(stable, base.Voters[0].Addr) })
	}
	err = storeBaseEntry(logs, base.Index)
	wg.Wait()
	return errors.Join(err, voteErr, closeLog())
}

// Raft's stable-store keys of the current term and the last vote (hashicorp/raft's
// keyCurrentTerm, keyLastVoteTerm, keyLastVoteCand).
var (
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
	keyLastVoteCand = []byte("LastVoteCand")
)

// preVote records, in a new replica's stable store, its vote in term 1 for the candidate at raft
// address addr (encoded as raft.NetworkTransport encodes a peer: the address's bytes), as raft
// records a vote it grants: the vote first, then the term, so that a crash in between leaves a
// vote that binds the replica once it takes term 1. A store that holds a term already is left
// alone.
func preVote(stable raft.StableStore, addr string) error {
	if term, err := stable.GetUint64(keyCurrentTerm); err == nil && term > 0 {
		return nil
	}
	if err := stable.Set(keyLastVoteCand, []byte(addr)); err != nil {
		return err
	}
	if err := stable.SetUint64(keyLastVoteTerm, 1); err != nil {
		return err
	}
	return stable.SetUint64(keyCurrentTerm, 1)
}

// preparedMarker names the file PrepareSplitReplica leaves in a replica directory until the
// replica first opens (SplitPrepared): the base's index, in decimal.
const preparedMarker = "split-prepared"

// SplitPrepared checks a replica directory before its replica opens: when PrepareSplitReplica
// prepared it, and store holds the split's copy at the prepared base (fsm.ReadSplitOrigin, its
// applied index at or past it), the marker is removed and it reports false: the replica opens
// from what was prepared. It reports stale (true) when store lacks that copy: this node's
// replica of the parent did not finish the split it began (it learned of it from a snapshot
// after a crash, say), and the caller removes the directory's log and snapshot before the
// replica opens as one that did not apply the split. A directory never prepared reports false.
func SplitPrepared(ctx context.Context, dir string, store *storage.PartitionStore) (stale bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, preparedMarker))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	index, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return true, nil // a marker cut short by a crash: the preparation did not finish either
	}
	origin, ok, err := fsm.ReadSplitOrigin(ctx, store)
	if err != nil {
		return false, err
	}
	applied, err := store.Applied(ctx)
	if err != nil {
		return false, err
	}
	if !ok || origin.Index != index || applied.Index < index {
		return true, nil
	}
	return false, os.Remove(filepath.Join(dir, preparedMarker))
}

// addrEncoder encodes a voter's address as raft.NetworkTransport does (its EncodePeer), for a
// snapshot's metadata written with no transport open; nothing else of raft.Transport is used.
type addrEncoder struct{ raft.Transport }

func (addrEncoder) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// Split proposes splitting this partition at s.AtShard into the new partition s.Right
// (command.Split), filling in the voters of this replica's raft configuration, and waits until
// the entry is applied here. It must be called on the leader (else *NotLeaderError, nothing
// done). Errors: *NotLeaderError and ErrUnavailable (nothing applied); ErrIndeterminate (maybe
// applied: retrying is refused as out of range once it was); command.ErrShardOutOfRange wrapped
// when AtShard does not split the partition's current range in two (split already, say);
// command.ErrBadCommand when a replica cannot split.
func (p *Raft) Split(ctx context.Context, s command.Split) (command.SplitResult, error) {
	f := p.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return command.SplitResult{}, fmt.Errorf("%w: raft configuration: %w", ErrUnavailable, err)
	}
	s.Voters = nil
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			s.Voters = append(s.Voters, command.Voter{ID: string(srv.ID), Addr: string(srv.Address)})
		}
	}
	// This leader first: the right half's first candidate, whom the other voters' preparations
	// vote for (PrepareSplitReplica).
	if i := slices.IndexFunc(s.Voters, func(v command.Voter) bool { return v.ID == p.cfg.NodeID }); i > 0 {
		s.Voters[0], s.Voters[i] = s.Voters[i], s.Voters[0]
	}
	return applyAlone[command.SplitResult](ctx, p, &s, command.ErrShardOutOfRange, command.ErrBadCommand)
}

// Freeze proposes freezing this partition for a merge into partition f.Into, or thawing it
// (command.Freeze), and waits until the entry is applied here. It must be called on the leader.
// Errors: *NotLeaderError and ErrUnavailable (nothing applied); ErrIndeterminate (maybe
// applied: a freeze sent again answers the first one's index); command.ErrBadCommand wrapped
// for a thaw of a partition that is not frozen for f.Into.
func (p *Raft) Freeze(ctx context.Context, f command.Freeze) (command.FreezeResult, error) {
	return applyAlone[command.FreezeResult](ctx, p, &f, command.ErrBadCommand)
}

// Merge proposes that this partition take the shards of the frozen partition m.Right
// (command.Merge), and waits until the entry is applied here. It must be called on the leader.
// Errors: *NotLeaderError and ErrUnavailable (nothing applied); ErrIndeterminate (maybe
// applied: sent again, it is refused as out of range once it was); command.ErrShardOutOfRange
// wrapped when m's shards do not follow the partition's range (merged already, say);
// command.ErrBadCommand when a replica cannot merge.
func (p *Raft) Merge(ctx context.Context, m command.Merge) (command.MergeResult, error) {
	return applyAlone[command.MergeResult](ctx, p, &m, command.ErrShardOutOfRange, command.ErrBadCommand)
}

// applyAlone proposes c, a command the state machine applies on its own (a split, freeze or
// merge), waits until it is applied here, and returns its outcome; refusals lists the
// deterministic refusals returned as they are.
func applyAlone[T any](ctx context.Context, p *Raft, c command.Command, refusals ...error) (T, error) {
	var res T
	err := p.applyOne(ctx, func(time.Time) ([]byte, error) {
		return command.Encode(c)
	}, func(af raft.ApplyFuture) (err error) {
		res, err = fsm.ResultOf[T](af)
		return err
	}, refusals...)
	if err != nil {
		var zero T
		return zero, err // res may still be written by the abandoned wait
	}
	return res, nil
}

// Campaign makes this replica start an election now, as the target of a leadership transfer
// does (raft's TimeoutNow, sent to itself through its transport): a group that has just
// started needs no election timeout to pass before it takes requests. Voters grant the vote
// even when they know a leader. Used on the node that led the parent of a split, for the new
// partition. Blocks for one local RPC. A replica that leads does nothing; one that wins its
// election before the TimeoutNow arrives ignores it (without that raft patch it stepped down
// and elected again: the new group's writes then waited for a second election, 15 to 70 ms on
// a loaded machine).
func (p *Raft) Campaign() error {
	if p.raft.State() == raft.Leader {
		return nil
	}
	return p.timeoutNowToSelf()
}

// timeoutNowToSelf sends this replica a TimeoutNow through its transport, whatever its state
// (Campaign's, once it found the replica not leading). A replica that leads by the time it
// arrives ignores it (third_party/raft/PATCHES.md, "A leader ignores a TimeoutNow").
func (p *Raft) timeoutNowToSelf() error {
	trans := p.cfg.Transport
	addr := trans.LocalAddr()
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(p.cfg.NodeID), Addr: trans.EncodePeer(raft.ServerID(p.cfg.NodeID), addr)}}
	return trans.TimeoutNow(raft.ServerID(p.cfg.NodeID), addr, req, &raft.TimeoutNowResponse{})
}

// snapshotPastBase takes a real snapshot of a replica whose latest snapshot is a split's base
// (which a replica lacking the split's copy cannot restore), once raft would send the base to
// a follower (baseSnapshots) and an entry past the base is applied, retrying until it succeeds
// or the replica closes. Runs on its own goroutine. Until then the replica takes no snapshot
// of its own unless raft's thresholds ask for one: a voter that applied the split holds the
// copy and catches up from the log, and a snapshot of the right half streams every cell of it
// through the state machine (six splits of a SQLite partition of 500,000 cells on three loaded
// nodes: 2.5 to 4.6 CPU-seconds per split in all, and its writes on the disk the new group's
// first rounds sync to: BENCHMARKS.md). A follower that needs a snapshot waits for this one: raft sends it
// again after a backoff that doubles from 10 ms.
func (p *Raft) snapshotPastBase(base uint64) {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	select {
	case <-p.baseWanted:
	case <-ctx.Done():
		return
	}
	backoff := 100 * time.Millisecond
	for {
		if err := p.fsm.WaitApplied(ctx, base+1); err != nil {
			return
		}
		if p.lastSnapshotPast(base) {
			return // raft took one of its own meanwhile
		}
		err := p.raft.Snapshot().Error()
		if err == nil || errors.Is(err, raft.ErrNothingNewToSnapshot) && p.fsm.Applied().Index > base && p.lastSnapshotPast(base) {
			p.log.Info("took a snapshot past the split's base", "base_index", base)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// errBaseNotSent refuses raft the split's base as the snapshot to send a follower
// (baseSnapshots).
var errBaseNotSent = errors.New("partition: the latest snapshot is a split's base, which holds no data: a snapshot past it is being taken, send again then")

// baseSnapshots is the snapshot store raft uses for a replica whose latest snapshot was a
// split's base at Open: opening that base, which raft does only to send it to a follower (the
// replica restores nothing at start: NoSnapshotRestoreOnStart), asks snapshotPastBase for a
// real snapshot and fails; raft sends again after its backoff, by then the real one.
type baseSnapshots struct {
	raft.SnapshotStore
	p *Raft
}

// Open opens snapshot id, unless it is the split's base (see baseSnapshots).
func (s baseSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil || meta.Index != s.p.baseIndex {
		return meta, rc, err
	}
	_ = rc.Close()
	s.p.baseWant.Do(func() {
		s.p.log.Info("a follower needs a snapshot: taking one past the split's base", "base_index", s.p.baseIndex)
		close(s.p.baseWanted)
	})
	return nil, nil, errBaseNotSent
}

// lastSnapshotPast reports whether raft's latest snapshot is above index.
func (p *Raft) lastSnapshotPast(index uint64) bool {
	idx, err := strconv.ParseUint(p.raft.Stats()["last_snapshot_index"], 10, 64)
	return err == nil && idx > index
}
