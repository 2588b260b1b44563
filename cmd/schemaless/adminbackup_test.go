package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
)

// TestAdminBackupRestore runs `admin backup` against a cluster taking writes, `admin backup
// verify`, and `admin restore` into a new cluster, compares the two cell by cell, and shows
// that the restore refuses a changed file, another layout and a target holding cells.
func TestAdminBackupRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The production raft timeouts: a restore installs a snapshot on every follower, whose
	// main loop answers no heartbeat until it is done; the tests' 250 ms leader lease made a
	// loaded machine's leader step down during the restore's commit.
	pc := partition.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond}
	a := clustertest.Start(t, clustertest.Options{Partition: pc})
	cl := testClient(t, a.URLs())
	var writes []client.CellWrite
	for i := 0; i < 600; i++ {
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("adminbackup", i)))
		writes = append(writes,
			client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))},
			client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: int64(i % 3)}, Body: json.RawMessage(`{"s":"ok"}`)},
			client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: 10}, Body: json.RawMessage(`{"s":"done"}`)})
	}
	for i := 0; i < len(writes); i += 500 {
		if _, err := cl.PutCells(ctx, writes[i:min(i+500, len(writes))]); err != nil {
			t.Fatalf("PutCells: %v", err)
		}
	}
	// Writes go on during the backup.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("adminbackup-live", i)))
			if _, err := cl.PutCell(ctx, row, "LIVE", 1, json.RawMessage(`{"live":true}`)); err != nil {
				t.Errorf("live write: %v", err)
				return
			}
		}
	}()
	dir := filepath.Join(t.TempDir(), "backup")
	out, errOut, err := runCmd(ctx, "admin", "backup", "--endpoints", strings.Join(a.URLs(), ","), "--datastore", "trips", "--out", dir, "--json")
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("admin backup: %v\n%s", err, errOut)
	}
	var m backupManifest
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("admin backup --json: %v in %q", err, out)
	}
	if m.Datastore != "trips" || m.Shards != 16 || len(m.Partitions) != 2 || m.Partitions[0].Cells+m.Partitions[1].Cells < int64(len(writes)) {
		t.Fatalf("manifest: got %+v, want trips, 16 shards, 2 partitions, at least %d cells", m, len(writes))
	}
	for _, p := range m.Partitions {
		if _, err := os.Stat(filepath.Join(dir, p.File)); err != nil || p.SHA256 == "" || p.AppliedIndex == 0 {
			t.Fatalf("partition %d: file %s (%v), sha256 %q, applied index %d", p.ID, p.File, err, p.SHA256, p.AppliedIndex)
		}
	}
	if _, errOut, err := runCmd(ctx, "admin", "backup", "--endpoints", a.URLs()[0], "--datastore", "trips", "--out", dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("admin backup into a non-empty directory: got %v (%s), want refused", err, errOut)
	}
	if out, _, err := runCmd(ctx, "admin", "backup", "verify", dir); err != nil || !strings.Contains(out, "every file checks out") {
		t.Fatalf("admin backup verify: got %v, %q", err, out)
	}

	// A changed byte: verify and restore refuse the file (SHA-256), and nothing is restored.
	bad := filepath.Join(t.TempDir(), "bad")
	copyDir(t, dir, bad)
	snap := filepath.Join(bad, m.Partitions[1].File)
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(snap, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b := clustertest.Start(t, clustertest.Options{Partition: pc})
	bURLs := strings.Join(b.URLs(), ",")
	if _, _, err := runCmd(ctx, "admin", "backup", "verify", bad); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("admin backup verify of a changed file: got %v, want a SHA-256 mismatch", err)
	}
	if _, _, err := runCmd(ctx, "admin", "restore", "--endpoints", bURLs, "--from", bad); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("admin restore of a changed file: got %v, want a SHA-256 mismatch", err)
	}
	// Another layout: 8 shards.
	c8 := clustertest.Start(t, clustertest.Options{Shards: 8, Partition: pc})
	if _, _, err := runCmd(ctx, "admin", "restore", "--endpoints", strings.Join(c8.URLs(), ","), "--from", dir); err == nil || !strings.Contains(err.Error(), "8 shards, the backup 16") {
		t.Errorf("admin restore into 8 shards: got %v, want a shard count mismatch", err)
	}
	c8.StopAll()
	for shard := 0; shard < 16; shard++ {
		if got := nodeShard(t, ctx, b.Node(0), shard, cluster.Strong); len(got) != 0 {
			t.Fatalf("after refused restores, B's shard %d holds %d cells", shard, len(got))
		}
	}

	// The restore.
	out, errOut, err = runCmd(ctx, "admin", "restore", "--endpoints", bURLs, "--from", dir)
	if err != nil {
		t.Fatalf("admin restore: %v\n%s", err, errOut)
	}
	t.Logf("admin restore:\n%s", out)
	compareShards(t, ctx, a, b, m)
	if _, _, err := runCmd(ctx, "admin", "restore", "--endpoints", bURLs, "--from", dir); err == nil || !strings.Contains(err.Error(), "hold cells") {
		t.Errorf("admin restore into a datastore holding cells: got %v, want refused", err)
	}
	if _, errOut, err := runCmd(ctx, "admin", "restore", "--endpoints", bURLs, "--from", dir, "--force"); err != nil {
		t.Fatalf("admin restore --force: %v\n%s", err, errOut)
	}
	compareShards(t, ctx, a, b, m)
}

// testClient is a client of endpoints for datastore trips.
func testClient(t *testing.T, endpoints []string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// nodeShard reads every cell of shard of trips through n.
func nodeShard(t *testing.T, ctx context.Context, n *cluster.Node, shard int, c cluster.Consistency) []cells.Cell {
	t.Helper()
	var out []cells.Cell
	for after := int64(0); ; {
		page, err := n.ScanShard(ctx, "trips", shard, after, 1000, c)
		if err != nil {
			t.Fatalf("ScanShard(%d) through %s: %v", shard, n.ID(), err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].AddedID
	}
}

// compareShards checks, shard by shard, that B holds exactly A's cells up to the backup's
// highest added_id: same count, added_id, key, body and created_at.
func compareShards(t *testing.T, ctx context.Context, a, b *clustertest.Cluster, m backupManifest) {
	t.Helper()
	for _, p := range m.Partitions {
		for _, s := range p.ShardStats {
			var want []cells.Cell
			for _, c := range nodeShard(t, ctx, a.Node(1), s.Shard, cluster.Strong) {
				if c.AddedID <= s.MaxAddedID {
					want = append(want, c)
				}
			}
			got := nodeShard(t, ctx, b.Node(2), s.Shard, cluster.Strong)
			if int64(len(want)) != s.Cells || len(got) != len(want) {
				t.Fatalf("shard %d: B holds %d cells, A %d up to added_id %d, the manifest counts %d", s.Shard, len(got), len(want), s.MaxAddedID, s.Cells)
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.AddedID != w.AddedID || g.Key != w.Key || !g.CreatedAt.Equal(w.CreatedAt) || !bytes.Equal(g.Body, w.Body) {
					t.Fatalf("shard %d cell %d: B holds %s added_id %d at %v, want %s added_id %d at %v", s.Shard, i, g.Key, g.AddedID, g.CreatedAt, w.Key, w.AddedID, w.CreatedAt)
				}
			}
		}
	}
}
