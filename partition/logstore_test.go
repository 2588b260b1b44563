package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/schemaless-db/schemaless/cells"
)

// TestWALLogStore runs a group on hashicorp/raft-wal: writes, a follower that misses more than
// the leader keeps (so raft-wal's head truncation and a snapshot install), a restart of the
// whole group, and then the refusal to open the replica's directory with the other format.
func TestWALLogStore(t *testing.T) {
	g := newGroup(t, 3, func(c *Config) {
		c.LogStore = LogStoreWAL
		c.TrailingLogs = 10
		c.SnapshotThreshold = 1 << 40
	})
	ctx := context.Background()
	for _, r := range g.replicas {
		if _, err := os.Stat(filepath.Join(r.dir, "raft", "wal")); err != nil {
			t.Fatalf("replica %s has no wal directory: %v", r.id, err)
		}
		if _, err := os.Stat(filepath.Join(r.dir, "raft", "raft.db")); err == nil {
			t.Fatalf("replica %s has a bolt raft.db beside its wal", r.id)
		}
	}
	if _, err := g.put(ctx, testCell(t, -1)); err != nil {
		t.Fatal(err)
	}
	g.converge()
	l := g.leader()
	follower := (indexOf(g, l) + 1) % len(g.replicas)
	g.stop(follower)
	for i := 0; i < 200; i++ {
		if _, err := g.put(ctx, testCell(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	l = g.leader()
	if err := l.p.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if first, _ := l.p.logs.FirstIndex(); first < 100 {
		t.Fatalf("leader's wal starts at %d after the snapshot; want it truncated past the follower", first)
	}
	g.start(follower)
	if cs := g.sameReplicas(); len(cs) != 201 {
		t.Fatalf("replicas hold %d cells, want 201", len(cs))
	}
	for i := range g.replicas {
		g.stop(i)
	}
	for i := range g.replicas {
		g.start(i)
	}
	res, err := g.put(ctx, testCell(t, 1), testCell(t, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != cells.StatusExists || res[1].Status != cells.StatusCreated {
		t.Fatalf("after restart: %+v, want exists then created", res)
	}
	if cs := g.sameReplicas(); len(cs) != 202 {
		t.Fatalf("after restart replicas hold %d cells, want 202", len(cs))
	}

	// The other format on the same directory is refused, not opened empty.
	dir := filepath.Join(g.replicas[0].dir, "raft")
	g.stop(0)
	if _, _, _, err := openLogStore(dir, LogStoreBolt); !errors.Is(err, ErrLogStoreMismatch) {
		t.Fatalf("opening a wal replica as bolt: got %v, want ErrLogStoreMismatch", err)
	}
	other := t.TempDir()
	b, _, closeB, err := openLogStore(other, LogStoreBolt)
	if err != nil {
		t.Fatal(err)
	}
	_ = b
	_ = closeB()
	if _, _, _, err := openLogStore(other, LogStoreWAL); !errors.Is(err, ErrLogStoreMismatch) {
		t.Fatalf("opening a bolt replica as wal: got %v, want ErrLogStoreMismatch", err)
	}
	if !HasLog(dir) || !HasLog(other) || HasLog(t.TempDir()) {
		t.Fatal("HasLog does not tell a replica directory with a log from an empty one")
	}
}
