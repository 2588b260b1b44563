package backup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/backup"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
)

// The production raft timeouts: a restore installs a snapshot on every follower, whose main
// loop answers no heartbeat until it is done; the tests' 250 ms leader lease made a loaded
// machine's leader step down during the restore's commit.
var restorePC = partition.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond}

// TestBackupRestore backs a datastore up while it takes writes, verifies the backup, restores
// it into a new cluster and compares the two cell by cell, and shows that the restore refuses
// a changed file, another layout and a target holding cells, changing nothing.
func TestBackupRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := clustertest.Start(t, clustertest.Options{Partition: restorePC})
	cl := testClient(t, a.URLs(), "trips")
	var writes []client.CellWrite
	for i := 0; i < 600; i++ {
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("adminbackup", i)))
		writes = append(writes,
			client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))},
			client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: int64(i % 3)}, Body: json.RawMessage(`{"s":"ok"}`)},
			client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: 10}, Body: json.RawMessage(`{"s":"done"}`)})
	}
	for i := 0; i < len(writes); i += 500 {
		_, err := cl.PutCells(ctx, writes[i:min(i+500, len(writes))])
		require.NoError(t, err)
	}
	// Writes go on during the backup.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("adminbackup-live", i)))
			if _, err := cl.PutCell(ctx, row, "LIVE", 1, json.RawMessage(`{"live":true}`)); err != nil {
				t.Errorf("live write: %v", err)
				return
			}
		}
	})
	dir := filepath.Join(t.TempDir(), "backup")
	m, err := backup.Backup(ctx, cl, "trips", dir)
	stop.Store(true)
	wg.Wait()
	require.NoError(t, err)
	assert.Equal(t, "trips", m.Datastore)
	assert.Equal(t, 16, m.Shards)
	require.Len(t, m.Partitions, 2)
	assert.GreaterOrEqual(t, m.Partitions[0].Cells+m.Partitions[1].Cells, int64(len(writes)), "every cell written before the backup")
	for _, p := range m.Partitions {
		_, err := os.Stat(filepath.Join(dir, p.File))
		assert.NoError(t, err, "partition %d's file", p.ID)
		assert.NotEmpty(t, p.SHA256, "partition %d", p.ID)
		assert.NotZero(t, p.AppliedIndex, "partition %d", p.ID)
	}
	read, err := backup.ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, m.Partitions, read.Partitions, "the manifest on disk")
	_, err = backup.Backup(ctx, cl, "trips", dir)
	assert.ErrorIs(t, err, backup.ErrDirNotEmpty)
	require.NoError(t, backup.Verify(dir, read))

	// A changed byte: Verify and Restore refuse the file (SHA-256), and nothing is restored.
	bad := filepath.Join(t.TempDir(), "bad")
	copyDir(t, dir, bad)
	snap := filepath.Join(bad, m.Partitions[1].File)
	data, err := os.ReadFile(snap)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x01
	require.NoError(t, os.WriteFile(snap, data, 0o644))
	b := clustertest.Start(t, clustertest.Options{Partition: restorePC})
	bcl := testClient(t, b.URLs(), "")
	assert.ErrorContains(t, backup.Verify(bad, read), "SHA-256", "verify of a changed file")
	_, _, err = backup.Restore(ctx, bcl, bad, backup.RestoreOptions{})
	assert.ErrorContains(t, err, "SHA-256", "restore of a changed file")
	// Another layout: 8 shards.
	c8 := clustertest.Start(t, clustertest.Options{Shards: 8, Partition: restorePC})
	_, _, err = backup.Restore(ctx, testClient(t, c8.URLs(), ""), dir, backup.RestoreOptions{})
	assert.ErrorContains(t, err, "8 shards, the backup 16", "restore into 8 shards")
	c8.StopAll()
	for shard := 0; shard < 16; shard++ {
		require.Empty(t, nodeShard(t, ctx, b.Node(0), shard), "after refused restores, B's shard %d", shard)
	}

	// The restore.
	got, _, err := backup.Restore(ctx, bcl, dir, backup.RestoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, read, got, "Restore returns the backup's manifest")
	compareShards(t, ctx, a, b, m)
	_, _, err = backup.Restore(ctx, bcl, dir, backup.RestoreOptions{})
	var ne *backup.NotEmptyError
	require.ErrorAs(t, err, &ne, "restore into a datastore holding cells")
	assert.ErrorIs(t, err, backup.ErrTargetNotEmpty)
	assert.Equal(t, backup.NotEmptyError{Datastore: "trips", Partitions: []int{0, 1}}, *ne)
	_, _, err = backup.Restore(ctx, bcl, dir, backup.RestoreOptions{Force: true})
	require.NoError(t, err, "restore with Force")
	compareShards(t, ctx, a, b, m)
}

// TestBackupRefusals: an async datastore, an unknown one, and a manifest this build did not
// write are refused.
func TestBackupRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 1, Partitions: 1})
	cl := testClient(t, c.URLs(), "")
	_, err := backup.Backup(ctx, cl, "nope", filepath.Join(t.TempDir(), "b"))
	assert.ErrorContains(t, err, `datastore "nope": no such datastore in the cluster (it has: trips)`)

	dir := t.TempDir()
	for _, tc := range []struct{ manifest, want string }{
		{`{"format":2,"mode":"raft","partitions":[{}]}`, "format 2, this build reads format 1"},
		{`{"format":1,"mode":"async","partitions":[{}]}`, `a backup of "async" with 1 partitions is not one this build wrote`},
		{`{"format":1,"mode":"raft","partitions":[]}`, "with 0 partitions"},
		{`{`, "unexpected end of JSON input"},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, backup.ManifestName), []byte(tc.manifest), 0o644))
		_, err := backup.ReadManifest(dir)
		assert.ErrorContains(t, err, tc.want, "manifest %s", tc.manifest)
		_, _, err = backup.Restore(ctx, cl, dir, backup.RestoreOptions{})
		assert.ErrorContains(t, err, tc.want, "restore of manifest %s", tc.manifest)
	}
	_, err = backup.ReadManifest(t.TempDir())
	assert.ErrorContains(t, err, "no readable backup manifest")
	assert.ErrorContains(t, backup.Verify(dir, backup.Manifest{Partitions: []backup.Partition{{ID: 3, File: "../x.snap"}}}),
		`partition 3: file "../x.snap": not a file name`)
}

// testClient is a client of endpoints for datastore ds.
func testClient(t *testing.T, endpoints []string, ds string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = ds
	cl, err := client.New(cfg)
	require.NoError(t, err)
	return cl
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o755))
	ents, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o644))
	}
}

// nodeShard reads every cell of shard of trips through n, strongly.
func nodeShard(t *testing.T, ctx context.Context, n *cluster.Node, shard int) []cells.Cell {
	t.Helper()
	var out []cells.Cell
	for after := int64(0); ; {
		page, err := n.ScanShard(ctx, "trips", shard, after, 1000, cluster.Strong)
		require.NoError(t, err, "ScanShard(%d) through %s", shard, n.ID())
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].AddedID
	}
}

// compareShards checks, shard by shard, that B holds exactly A's cells up to the backup's
// highest added_id: same count, added_id, key, body and created_at.
func compareShards(t *testing.T, ctx context.Context, a, b *clustertest.Cluster, m backup.Manifest) {
	t.Helper()
	for _, p := range m.Partitions {
		for _, s := range p.ShardStats {
			var want []cells.Cell
			for _, c := range nodeShard(t, ctx, a.Node(1), s.Shard) {
				if c.AddedID <= s.MaxAddedID {
					want = append(want, c)
				}
			}
			got := nodeShard(t, ctx, b.Node(2), s.Shard)
			require.Equal(t, s.Cells, int64(len(want)), "shard %d: A's cells up to added_id %d, and the manifest's count", s.Shard, s.MaxAddedID)
			require.Len(t, got, len(want), "shard %d: B's cells, and A's up to added_id %d", s.Shard, s.MaxAddedID)
			for i := range want {
				g, w := got[i], want[i]
				if g.AddedID != w.AddedID || g.Key != w.Key || !g.CreatedAt.Equal(w.CreatedAt) || !bytes.Equal(g.Body, w.Body) {
					require.Failf(t, "cells differ", "shard %d cell %d: B holds %s added_id %d at %v, want %s added_id %d at %v",
						s.Shard, i, g.Key, g.AddedID, g.CreatedAt, w.Key, w.AddedID, w.CreatedAt)
				}
			}
		}
	}
}
