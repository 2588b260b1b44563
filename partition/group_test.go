package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testShards = cells.ShardRange{First: 0, Last: 3}

// replica is one member of a test group: its raft dir and SQLite dir survive restarts.
type replica struct {
	id    string
	dir   string
	store *storage.Store
	trans *raft.InmemTransport
	p     *Raft
}

type group struct {
	t        *testing.T
	mu       sync.Mutex // guards replica.p against writers running during stop/start
	replicas []*replica
	tweak    func(*Config)
	logs     *syncBuffer
}

// syncBuffer collects every replica's log lines, for tests that check which path was taken.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	t   *testing.T
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.Log(string(bytes.TrimRight(p, "\n")))
	return b.buf.Write(p)
}

func (b *syncBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.buf.Bytes(), []byte(s))
}

func newGroup(t *testing.T, n int, tweak func(*Config)) *group {
	g := &group{t: t, tweak: tweak, logs: &syncBuffer{t: t}}
	for i := 0; i < n; i++ {
		g.replicas = append(g.replicas, &replica{id: fmt.Sprintf("r%d", i+1), dir: t.TempDir()})
	}
	t.Cleanup(func() {
		for i := range g.replicas {
			g.stop(i)
		}
	})
	for i := range g.replicas {
		g.start(i)
	}
	return g
}

func (g *group) peers() []raft.Server {
	var out []raft.Server
	for _, r := range g.replicas {
		out = append(out, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(r.id), Address: raft.ServerAddress(r.id)})
	}
	return out
}

func (g *group) start(i int) {
	t := g.t
	r := g.replicas[i]
	st, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: filepath.Join(r.dir, "sqlite")})
	require.NoError(t, err, "open the SQLite store of %s", r.id)
	ps, err := st.Partition(context.Background(), storage.PartitionID{Datastore: "trips", Partition: 0}, testShards)
	require.NoError(t, err, "open the partition store of %s", r.id)
	_, r.trans = raft.NewInmemTransport(raft.ServerAddress(r.id))
	for _, o := range g.replicas {
		if o != r && o.p != nil {
			r.trans.Connect(raft.ServerAddress(o.id), o.trans)
			o.trans.Connect(raft.ServerAddress(r.id), r.trans)
		}
	}
	cfg := Config{
		ID: storage.PartitionID{Datastore: "trips", Partition: 0}, Shards: testShards, NodeID: r.id,
		Dir: filepath.Join(r.dir, "raft"), Peers: g.peers(), Transport: r.trans, Store: ps,
		Logger:           slog.New(slog.NewTextHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelWarn})).With("replica", r.id),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		OnFatal: func(err error) { assert.NoError(t, err, "replica %s: fatal", r.id) },
	}
	if g.tweak != nil {
		g.tweak(&cfg)
	}
	p, err := Open(context.Background(), cfg)
	if err != nil {
		st.Close()
	}
	require.NoError(t, err, "open %s", r.id)
	g.mu.Lock()
	r.store, r.p = st, p
	g.mu.Unlock()
}

// stop closes replica i like a crash: no leadership transfer, nothing flushed beyond what is
// committed.
func (g *group) stop(i int) {
	r := g.replicas[i]
	g.mu.Lock()
	p, st := r.p, r.store
	r.p, r.store = nil, nil
	g.mu.Unlock()
	if p == nil {
		return
	}
	for _, o := range g.replicas {
		if o != r && o.trans != nil {
			o.trans.Disconnect(raft.ServerAddress(r.id))
		}
	}
	if err := p.Close(); err != nil {
		g.t.Logf("close %s: %v", r.id, err)
	}
	st.Close()
}

// liveReplica is a running replica as seen at one moment: its id and its open partition.
type liveReplica struct {
	id string
	p  *Raft
}

// running returns the replicas that are running now, in order. Safe on any goroutine.
func (g *group) running() []liveReplica {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []liveReplica
	for _, r := range g.replicas {
		if r.p != nil {
			out = append(out, liveReplica{id: r.id, p: r.p})
		}
	}
	return out
}

// leading returns a running replica that leads now, or false. Safe on any goroutine.
func (g *group) leading() (liveReplica, bool) {
	for _, m := range g.running() {
		if m.p.IsLeader() {
			return m, true
		}
	}
	return liveReplica{}, false
}

// leader waits up to 10s for a replica that leads and returns it; it fails the test if none
// does. Call it from the test's goroutine.
func (g *group) leader() *replica {
	g.t.Helper()
	var found atomic.Pointer[replica]
	require.Eventually(g.t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, r := range g.replicas {
			if r.p != nil && r.p.IsLeader() {
				found.Store(r)
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no replica leads after 10s")
	return found.Load()
}

// testCell returns the cell of row i. Safe on any goroutine: it reports through assert.
func testCell(t testing.TB, i int) command.Cell {
	rk := uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("row", i)))
	b, err := cells.EncodeBody([]byte(fmt.Sprintf(`{"i":%d}`, i)))
	assert.NoError(t, err, "EncodeBody of row %d", i)
	return command.Cell{Shard: cells.ShardOf(rk, 4), Key: cells.Key{RowKey: rk, ColumnKey: "BASE", RefKey: 1}, Body: b}
}

// putTimeout bounds a put whose ctx has no earlier deadline, so that a group without a usable
// leader fails the test rather than hanging it.
const putTimeout = 30 * time.Second

// put writes cells through whichever replica leads, retrying every 10ms while there is no
// leader or leadership moves (as a client would), and returns the results. When ctx ends first,
// or after putTimeout, it returns the context's error and the last attempt's. Safe on any
// goroutine.
func (g *group) put(ctx context.Context, cs ...command.Cell) ([]cells.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, putTimeout)
	defer cancel()
	lastErr := errors.New("no replica leads")
	for {
		if l, ok := g.leading(); ok {
			res, err := l.p.Put(ctx, command.Write{Cells: cs})
			if err == nil {
				return res.Cells, nil
			}
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("put: %w: %w", ctx.Err(), lastErr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// contents returns every cell of replica r, shard by shard in added_id order.
func contents(t require.TestingT, r liveReplica) []cells.Cell {
	var all []cells.Cell
	for s := testShards.First; s <= testShards.Last; s++ {
		cs, err := r.p.Store().ScanShard(context.Background(), s, 0, 1<<30)
		require.NoError(t, err, "replica %s: ScanShard(%d)", r.id, s)
		all = append(all, cs...)
	}
	return all
}

// converge waits up to 20s until the leader has proposed every queued write and every running
// replica has applied the leader's whole log. A Put whose ctx ended leaves its proposal queued
// (its outcome is indeterminate, and it may still commit), so one read index is not enough: the
// wait repeats until the leader's log stops growing, with whichever replica leads (an election
// on a loaded machine loses the barrier's leadership: the wait goes on). A barrier that fails on
// the leader for another reason, or a replica that does not apply the leader's index, ends the
// wait and fails the test at once.
func (g *group) converge() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var fatal atomic.Value // error: ends the wait
	require.EventuallyWithT(g.t, func(c *assert.CollectT) {
		l, ok := g.leading()
		if !assert.True(c, ok, "a replica leads") {
			return
		}
		if !assert.Zero(c, len(l.p.queue), "writes queued on leader %s, not yet proposed", l.id) {
			return
		}
		if err := l.p.Raft().Barrier(10 * time.Second).Error(); err != nil {
			if errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrNotLeader) {
				// An election on a loaded machine: wait for the next leader.
				c.Errorf("barrier on leader %s: %v", l.id, err)
				return
			}
			fatal.Store(fmt.Errorf("barrier on leader %s: %w", l.id, err))
			return
		}
		last := l.p.Raft().LastIndex()
		target := l.p.FSM().Applied().Index
		for _, r := range g.running() {
			if err := r.p.FSM().WaitApplied(ctx, target); err != nil {
				fatal.Store(fmt.Errorf("replica %s did not reach applied %d (at %v): %w", r.id, target, r.p.FSM().Applied(), err))
				return
			}
		}
		assert.Zero(c, len(l.p.queue), "writes queued on leader %s while the replicas applied", l.id)
		assert.Equal(c, last, l.p.Raft().LastIndex(), "last index of leader %s: its log grew while the replicas applied", l.id)
		assert.True(c, l.p.IsLeader(), "replica %s still leads", l.id)
	}, 20*time.Second, 5*time.Millisecond, "the leader's log did not stop growing, or the replicas did not apply it, within 20s")
	if err, ok := fatal.Load().(error); ok {
		require.NoError(g.t, err, "converge")
	}
}

// sameReplicas checks every running replica holds the same cells with the same added_ids. After
// converge a write whose ctx ended may still be held by the leader's batch loop (taken off the
// queue, not yet proposed) and land after it, on one replica before the others: the replicas
// must then agree within 10s.
func (g *group) sameReplicas() []cells.Cell {
	g.t.Helper()
	g.converge()
	var ref []cells.Cell
	require.EventuallyWithT(g.t, func(c *assert.CollectT) {
		ref = nil
		var refID string
		for _, r := range g.running() {
			cs := contents(c, r)
			if ref == nil {
				ref, refID = cs, r.id
				continue
			}
			require.Len(c, cs, len(ref), "replica %s holds %d cells, %s holds %d", r.id, len(cs), refID, len(ref))
			for i := range cs {
				require.True(c, cs[i].Key == ref[i].Key && cs[i].AddedID == ref[i].AddedID && cs[i].CreatedAt.Equal(ref[i].CreatedAt) && bytes.Equal(cs[i].Body, ref[i].Body),
					"replica %s cell %d = %v/%d, %s has %v/%d", r.id, i, cs[i].Key, cs[i].AddedID, refID, ref[i].Key, ref[i].AddedID)
			}
		}
	}, 10*time.Second, 20*time.Millisecond, "the running replicas hold the same cells")
	return ref
}

func TestPutAndReadIndex(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	l := g.leader()
	ctx := context.Background()
	c := testCell(t, 1)
	wres, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{c, c}})
	require.NoError(t, err, "Put on the leader")
	res := wres.Cells
	require.Len(t, res, 2, "one result per cell")
	require.True(t, res[0].Status == cells.StatusCreated && res[1].Status == cells.StatusExists && res[0].AddedID == res[1].AddedID,
		"results %+v, want created then exists with the same added_id", res)
	require.NoError(t, l.p.ReadIndex(ctx), "ReadIndex on the leader")
	got, err := l.p.Store().GetCell(ctx, c.Shard, c.Key)
	require.NoError(t, err, "read after ReadIndex")
	require.Equal(t, res[0].AddedID, got.AddedID, "read after ReadIndex: added_id of %+v", got)
	for _, r := range g.replicas {
		if r == l {
			continue
		}
		_, err := r.p.Put(ctx, command.Write{Cells: []command.Cell{testCell(t, 2)}})
		var nl *NotLeaderError
		require.ErrorAs(t, err, &nl, "Put on follower %s, want NotLeaderError naming %s", r.id, l.id)
		require.Equal(t, l.id, nl.LeaderID, "Put on follower %s: the leader its NotLeaderError names", r.id)
		require.ErrorIs(t, r.p.ReadIndex(ctx), ErrNotLeader, "ReadIndex on follower %s", r.id)
	}
	g.sameReplicas()
}

// Many concurrent Puts are grouped into fewer raft entries than requests.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	l := g.leader()
	before := l.p.Raft().LastIndex()
	var wg sync.WaitGroup
	const n = 400
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.put(context.Background(), testCell(t, i))
			assert.NoError(t, err, "put of row %d", i)
		}()
	}
	wg.Wait()
	entries := l.p.Raft().LastIndex() - before
	t.Logf("%d concurrent puts in %d raft entries", n, entries)
	require.Less(t, entries, uint64(n), "%d puts took %d raft entries, want fewer (grouped)", n, entries)
	require.Len(t, g.sameReplicas(), n, "cells on the replicas")
}

// The leader is killed while writers run: a new leader takes over, writes go on, and every
// acknowledged write is on every surviving replica.
func TestLeaderKilled(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	old := g.leader()
	var mu sync.Mutex
	acked := map[cells.Key]cells.Result{}
	nacked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // writers stop before the group does, even when the test fails early
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i += 4 {
				c := testCell(t, i)
				wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
				res, err := g.put(wctx, c)
				wcancel()
				if err == nil {
					mu.Lock()
					acked[c.Key] = res[0]
					mu.Unlock()
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return nacked() >= 20 }, 10*time.Second, 5*time.Millisecond,
		"20 writes acknowledged before the leader is killed")
	beforeKill := nacked()
	g.stop(indexOf(g, old))
	newLeader := g.leader()
	require.NotSame(t, old, newLeader, "the stopped replica still leads")
	atNewLeader := nacked()
	require.Eventually(t, func() bool { return nacked() >= atNewLeader+20 }, 10*time.Second, 5*time.Millisecond,
		"20 writes acknowledged after %s took over from the killed leader (%d before the kill)", newLeader.id, beforeKill)
	cancel()
	wg.Wait()
	t.Logf("%d writes acknowledged, %d before the kill, %d when the new leader was found", len(acked), beforeKill, atNewLeader)
	stored := map[cells.Key]cells.Cell{}
	for _, c := range g.sameReplicas() {
		stored[c.Key] = c
	}
	for k, r := range acked {
		c, ok := stored[k]
		require.True(t, ok, "acknowledged cell %v lost", k)
		require.Equal(t, r.AddedID, c.AddedID, "added_id of cell %v: stored, acknowledged", k)
	}
	// The old leader comes back and converges.
	g.start(indexOf(g, old))
	g.sameReplicas()
}

func indexOf(g *group, r *replica) int {
	for i, o := range g.replicas {
		if o == r {
			return i
		}
	}
	return -1
}

func TestWholeGroupRestart(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		_, err := g.put(ctx, testCell(t, i))
		require.NoError(t, err, "put of row %d", i)
	}
	before := g.sameReplicas()
	for i := range g.replicas {
		g.stop(i)
	}
	for i := range g.replicas {
		g.start(i)
	}
	g.leader()
	after := g.sameReplicas()
	require.Len(t, after, len(before), "cells after the restart, as before it")
	res, err := g.put(ctx, testCell(t, 1), testCell(t, 1000))
	require.NoError(t, err, "put after the restart")
	require.Len(t, res, 2, "one result per cell")
	require.True(t, res[0].Status == cells.StatusExists && res[1].Status == cells.StatusCreated, "after restart: %+v, want exists then created", res)
}

// A follower that missed more than the leader's log holds catches up by snapshot.
func TestFollowerCatchesUpBySnapshot(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, func(c *Config) { c.TrailingLogs = 10; c.SnapshotThreshold = 1 << 40 })
	ctx := context.Background()
	l := g.leader()
	var follower int
	for i, r := range g.replicas {
		if r != l {
			follower = i
			break
		}
	}
	_, err := g.put(ctx, testCell(t, -1))
	require.NoError(t, err, "put of row -1")
	g.converge()
	g.stop(follower)
	followerApplied := uint64(0)
	for i := 0; i < 200; i++ {
		_, err := g.put(ctx, testCell(t, i))
		require.NoError(t, err, "put of row %d", i)
	}
	l = g.leader()
	require.NoError(t, l.p.Raft().Snapshot().Error(), "snapshot on the leader")
	first, err := l.p.logs.FirstIndex()
	require.NoError(t, err, "FirstIndex of the leader's log")
	require.Greater(t, first, followerApplied+2, "first index of the leader's log: it must be compacted past the follower for this test")
	g.start(follower)
	require.Len(t, g.sameReplicas(), 201, "cells on the replicas")
}

// storeBehind runs the scenario where a replica's store loses commits (restored from an older
// copy) while its raft log and snapshot are ahead, and checks it recovers; compacted picks
// whether the raft log still holds the missing entries.
func storeBehind(t *testing.T, compacted bool) {
	t.Parallel()
	trailing := uint64(100000)
	if compacted {
		trailing = 5
	}
	g := newGroup(t, 3, func(c *Config) { c.TrailingLogs = trailing; c.SnapshotThreshold = 1 << 40 })
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		_, err := g.put(ctx, testCell(t, i))
		require.NoError(t, err, "put of row %d", i)
	}
	g.converge()
	victim := 0
	r := g.replicas[victim]
	g.stop(victim)
	old := filepath.Join(t.TempDir(), "old-sqlite")
	require.NoError(t, copyDir(filepath.Join(r.dir, "sqlite"), old), "copy the store of %s", r.id)
	g.start(victim)
	for i := 30; i < 80; i++ {
		_, err := g.put(ctx, testCell(t, i))
		require.NoError(t, err, "put of row %d", i)
	}
	g.converge()
	require.NoError(t, r.p.Raft().Snapshot().Error(), "snapshot on %s", r.id)
	g.stop(victim)
	require.NoError(t, replaceDir(old, filepath.Join(r.dir, "sqlite")), "put the old store of %s back", r.id)
	g.start(victim)
	want := "replaying from the raft log"
	if compacted {
		want = "restoring the snapshot"
	}
	require.True(t, g.logs.Contains(want), "the replica did not log %q on restart", want)
	require.Len(t, g.sameReplicas(), 80, "cells on the replicas")
}

func TestStoreBehindSnapshotReplaysLog(t *testing.T)       { storeBehind(t, false) }
func TestStoreBehindSnapshotRestoresSnapshot(t *testing.T) { storeBehind(t, true) }

func TestPutAfterClose(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 1, nil)
	l := g.leader()
	p := l.p
	g.stop(0)
	_, err := p.Put(context.Background(), command.Write{Cells: []command.Cell{testCell(t, 1)}})
	require.ErrorIs(t, err, ErrClosed, "Put after Close")
}
