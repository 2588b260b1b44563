package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/storage"
)

var testShards = storage.ShardRange{First: 0, Last: 3}

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
	if err != nil {
		t.Fatal(err)
	}
	ps, err := st.Partition(context.Background(), storage.PartitionID{Datastore: "trips", Partition: 0}, testShards)
	if err != nil {
		t.Fatal(err)
	}
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
		OnFatal: func(err error) { t.Errorf("replica %s: fatal: %v", r.id, err) },
	}
	if g.tweak != nil {
		g.tweak(&cfg)
	}
	p, err := Open(context.Background(), cfg)
	if err != nil {
		st.Close()
		t.Fatalf("open %s: %v", r.id, err)
	}
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

// leader waits up to 10s for a replica that leads.
func (g *group) leader() *replica {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		for _, r := range g.replicas {
			if r.p != nil && r.p.IsLeader() {
				g.mu.Unlock()
				return r
			}
		}
		g.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("no leader after 10s")
	return nil
}

func testCell(t testing.TB, i int) fsm.CommandCell {
	rk := uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("row", i)))
	b, err := cells.EncodeBody([]byte(fmt.Sprintf(`{"i":%d}`, i)))
	if err != nil {
		t.Fatal(err)
	}
	return fsm.CommandCell{Shard: cells.ShardOf(rk, 4), Key: cells.Key{RowKey: rk, ColumnKey: "BASE", RefKey: 1}, Body: b}
}

// put writes cells through whichever replica leads, retrying while leadership moves, and
// returns the results (nil, err when ctx ended first).
func (g *group) put(ctx context.Context, cs ...fsm.CommandCell) ([]cells.Result, error) {
	for {
		var leader *Raft
		g.mu.Lock()
		for _, r := range g.replicas {
			if p := r.p; p != nil && p.IsLeader() {
				leader = p
			}
		}
		g.mu.Unlock()
		if leader != nil {
			res, err := leader.Put(ctx, cs)
			if err == nil {
				return res, nil
			}
			if ctx.Err() != nil {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// contents returns every cell of replica r, shard by shard in added_id order.
func contents(t *testing.T, r *replica) []cells.Cell {
	t.Helper()
	var all []cells.Cell
	for s := testShards.First; s <= testShards.Last; s++ {
		cs, err := r.p.Store().ScanShard(context.Background(), s, 0, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, cs...)
	}
	return all
}

// converge waits until the leader has proposed every queued write and every running replica
// has applied the leader's whole log. A Put whose ctx ended leaves its proposal queued (its
// outcome is indeterminate, and it may still commit), so one read index is not enough: the
// wait repeats until the leader's log stops growing.
func (g *group) converge() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		l := g.leader()
		for len(l.p.queue) > 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		if err := l.p.Raft().Barrier(10 * time.Second).Error(); err != nil {
			g.t.Fatalf("barrier on leader %s: %v", l.id, err)
		}
		last := l.p.Raft().LastIndex()
		target := l.p.FSM().Applied().Index
		for _, r := range g.replicas {
			if r.p == nil {
				continue
			}
			if err := r.p.FSM().WaitApplied(ctx, target); err != nil {
				g.t.Fatalf("replica %s did not reach applied %d: %v (at %v)", r.id, target, err, r.p.FSM().Applied())
			}
		}
		if len(l.p.queue) == 0 && l.p.Raft().LastIndex() == last && l.p.IsLeader() {
			return
		}
	}
}

// sameReplicas checks every running replica holds the same cells with the same added_ids.
func (g *group) sameReplicas() []cells.Cell {
	g.t.Helper()
	g.converge()
	var ref []cells.Cell
	var refID string
	for _, r := range g.replicas {
		if r.p == nil {
			continue
		}
		cs := contents(g.t, r)
		if ref == nil {
			ref, refID = cs, r.id
			continue
		}
		if len(cs) != len(ref) {
			g.t.Fatalf("replica %s holds %d cells, %s holds %d", r.id, len(cs), refID, len(ref))
		}
		for i := range cs {
			if cs[i].Key != ref[i].Key || cs[i].AddedID != ref[i].AddedID || !cs[i].CreatedAt.Equal(ref[i].CreatedAt) || !bytes.Equal(cs[i].Body, ref[i].Body) {
				g.t.Fatalf("replica %s cell %d = %v/%d, %s has %v/%d", r.id, i, cs[i].Key, cs[i].AddedID, refID, ref[i].Key, ref[i].AddedID)
			}
		}
	}
	return ref
}

func TestPutAndReadIndex(t *testing.T) {
	g := newGroup(t, 3, nil)
	l := g.leader()
	ctx := context.Background()
	c := testCell(t, 1)
	res, err := l.p.Put(ctx, []fsm.CommandCell{c, c})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != cells.StatusCreated || res[1].Status != cells.StatusExists || res[0].AddedID != res[1].AddedID {
		t.Fatalf("results %+v, want created then exists with the same added_id", res)
	}
	if err := l.p.ReadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := l.p.Store().GetCell(ctx, c.Shard, c.Key)
	if err != nil || got.AddedID != res[0].AddedID {
		t.Fatalf("read after ReadIndex: %+v, %v", got, err)
	}
	for _, r := range g.replicas {
		if r == l {
			continue
		}
		_, err := r.p.Put(ctx, []fsm.CommandCell{testCell(t, 2)})
		var nl *NotLeaderError
		if !errors.As(err, &nl) || nl.LeaderID != l.id {
			t.Fatalf("Put on follower %s = %v, want NotLeaderError naming %s", r.id, err, l.id)
		}
		if err := r.p.ReadIndex(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("ReadIndex on follower = %v, want ErrNotLeader", err)
		}
	}
	g.sameReplicas()
}

// Many concurrent Puts are grouped into fewer raft entries than requests.
func TestGroupCommit(t *testing.T) {
	g := newGroup(t, 3, nil)
	l := g.leader()
	before := l.p.Raft().LastIndex()
	var wg sync.WaitGroup
	const n = 400
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.put(context.Background(), testCell(t, i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	entries := l.p.Raft().LastIndex() - before
	t.Logf("%d concurrent puts in %d raft entries", n, entries)
	if entries >= n {
		t.Fatalf("%d puts took %d raft entries, want fewer (grouped)", n, entries)
	}
	if got := len(g.sameReplicas()); got != n {
		t.Fatalf("replicas hold %d cells, want %d", got, n)
	}
}

// The leader is killed while writers run: a new leader takes over, writes go on, and every
// acknowledged write is on every surviving replica.
func TestLeaderKilled(t *testing.T) {
	g := newGroup(t, 3, nil)
	old := g.leader()
	var mu sync.Mutex
	acked := map[cells.Key]cells.Result{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
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
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	beforeKill := len(acked)
	mu.Unlock()
	g.stop(indexOf(g, old))
	newLeader := g.leader()
	if newLeader == old {
		t.Fatal("the stopped replica still leads")
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	if len(acked) <= beforeKill {
		t.Fatalf("no write acknowledged after the leader was killed (%d before, %d after)", beforeKill, len(acked))
	}
	t.Logf("%d writes acknowledged, %d before the kill", len(acked), beforeKill)
	stored := map[cells.Key]cells.Cell{}
	for _, c := range g.sameReplicas() {
		stored[c.Key] = c
	}
	for k, r := range acked {
		c, ok := stored[k]
		if !ok {
			t.Fatalf("acknowledged cell %v lost", k)
		}
		if c.AddedID != r.AddedID {
			t.Fatalf("cell %v stored with added_id %d, acknowledged %d", k, c.AddedID, r.AddedID)
		}
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
	g := newGroup(t, 3, nil)
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		if _, err := g.put(ctx, testCell(t, i)); err != nil {
			t.Fatal(err)
		}
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
	if len(after) != len(before) {
		t.Fatalf("after restart %d cells, before %d", len(after), len(before))
	}
	res, err := g.put(ctx, testCell(t, 1), testCell(t, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != cells.StatusExists || res[1].Status != cells.StatusCreated {
		t.Fatalf("after restart: %+v, want exists then created", res)
	}
}

// A follower that missed more than the leader's log holds catches up by snapshot.
func TestFollowerCatchesUpBySnapshot(t *testing.T) {
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
	if _, err := g.put(ctx, testCell(t, -1)); err != nil {
		t.Fatal(err)
	}
	g.converge()
	g.stop(follower)
	followerApplied := uint64(0)
	for i := 0; i < 200; i++ {
		if _, err := g.put(ctx, testCell(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	l = g.leader()
	if err := l.p.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	first, _ := l.p.logs.FirstIndex()
	if first <= followerApplied+2 {
		t.Fatalf("leader's log starts at %d; it must be compacted past the follower for this test", first)
	}
	g.start(follower)
	cs := g.sameReplicas()
	if len(cs) != 201 {
		t.Fatalf("replicas hold %d cells, want 201", len(cs))
	}
}

// storeBehind runs the scenario where a replica's store loses commits (restored from an older
// copy) while its raft log and snapshot are ahead, and checks it recovers; compacted picks
// whether the raft log still holds the missing entries.
func storeBehind(t *testing.T, compacted bool) {
	trailing := uint64(100000)
	if compacted {
		trailing = 5
	}
	g := newGroup(t, 3, func(c *Config) { c.TrailingLogs = trailing; c.SnapshotThreshold = 1 << 40 })
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		if _, err := g.put(ctx, testCell(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	g.converge()
	victim := 0
	r := g.replicas[victim]
	g.stop(victim)
	old := filepath.Join(t.TempDir(), "old-sqlite")
	if err := copyDir(filepath.Join(r.dir, "sqlite"), old); err != nil {
		t.Fatal(err)
	}
	g.start(victim)
	for i := 30; i < 80; i++ {
		if _, err := g.put(ctx, testCell(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	g.converge()
	if err := r.p.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	g.stop(victim)
	if err := replaceDir(old, filepath.Join(r.dir, "sqlite")); err != nil {
		t.Fatal(err)
	}
	g.start(victim)
	want := "replaying from the raft log"
	if compacted {
		want = "restoring the snapshot"
	}
	if !g.logs.Contains(want) {
		t.Fatalf("the replica did not log %q on restart", want)
	}
	if cs := g.sameReplicas(); len(cs) != 80 {
		t.Fatalf("replicas hold %d cells, want 80", len(cs))
	}
}

func TestStoreBehindSnapshotReplaysLog(t *testing.T)       { storeBehind(t, false) }
func TestStoreBehindSnapshotRestoresSnapshot(t *testing.T) { storeBehind(t, true) }

func TestPutAfterClose(t *testing.T) {
	g := newGroup(t, 1, nil)
	l := g.leader()
	p := l.p
	g.stop(0)
	if _, err := p.Put(context.Background(), []fsm.CommandCell{testCell(t, 1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close = %v, want ErrClosed", err)
	}
}
