package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/backup"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
)

// TestAdminBackupRestore runs the commands `admin backup`, `admin backup verify` and `admin
// restore` against one cluster: their output, their JSON, and the refusals they word for
// their flags. (The backup package's tests cover backups, checks and restores in depth.)
func TestAdminBackupRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The production raft timeouts: see backup's tests (a restore installs a snapshot on
	// every follower).
	pc := partition.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond}
	a := clustertest.Start(t, clustertest.Options{Partition: pc})
	eps := strings.Join(a.URLs(), ",")
	cl := testClient(t, a.URLs())
	var writes []client.CellWrite
	for i := 0; i < 200; i++ {
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("adminbackup", i)))
		writes = append(writes, client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	_, err := cl.PutCells(ctx, writes)
	require.NoError(t, err)

	dir := filepath.Join(t.TempDir(), "backup")
	out, errOut, err := runCmd(ctx, "admin", "backup", "--endpoints", eps, "--datastore", "trips", "--out", dir, "--json")
	require.NoError(t, err, "admin backup: %s", errOut)
	var m backup.Manifest
	require.NoError(t, json.Unmarshal([]byte(out), &m), "admin backup --json: %q", out)
	assert.Equal(t, "trips", m.Datastore)
	assert.Equal(t, 16, m.Shards)
	require.Len(t, m.Partitions, 2)
	assert.Equal(t, int64(len(writes)), m.Partitions[0].Cells+m.Partitions[1].Cells)
	onDisk, err := backup.ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, onDisk, m, "--json prints the manifest written")

	_, errOut, err = runCmd(ctx, "admin", "backup", "--endpoints", a.URLs()[0], "--datastore", "trips", "--out", dir)
	assert.ErrorContains(t, err, "--out "+dir+" is not empty", "admin backup into a non-empty directory: %s", errOut)
	out, _, err = runCmd(ctx, "admin", "backup", "verify", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "backup of trips (16 shards) in "+dir+": every file checks out")
	assert.Contains(t, out, "PARTITION  SHARDS  FILE")
	assert.Contains(t, out, "trips-p1.snap")
	out, _, err = runCmd(ctx, "admin", "backup", "verify", dir, "--json")
	require.NoError(t, err)
	var verified backup.Manifest
	require.NoError(t, json.Unmarshal([]byte(out), &verified))
	assert.Equal(t, m, verified, "verify --json prints the manifest")

	// A changed byte: verify and restore refuse the file (SHA-256) before any node is asked.
	bad := filepath.Join(t.TempDir(), "bad")
	require.NoError(t, os.MkdirAll(bad, 0o755))
	for _, name := range []string{backup.ManifestName, m.Partitions[0].File, m.Partitions[1].File} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		if name == m.Partitions[1].File {
			b[len(b)/2] ^= 0x01
		}
		require.NoError(t, os.WriteFile(filepath.Join(bad, name), b, 0o644))
	}
	_, _, err = runCmd(ctx, "admin", "backup", "verify", bad)
	assert.ErrorContains(t, err, "SHA-256", "admin backup verify of a changed file")
	_, _, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", bad)
	assert.ErrorContains(t, err, "SHA-256", "admin restore of a changed file")

	// Restoring into the datastore it came from: refused while it holds cells, then forced.
	_, _, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir)
	assert.ErrorContains(t, err, "nothing restored: partitions 0, 1 of trips hold cells; restore with --force to replace them")
	out, errOut, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir, "--force")
	require.NoError(t, err, "admin restore --force: %s", errOut)
	assert.Contains(t, out, "restored the backup of trips taken at "+m.StartedAt.Format(time.RFC3339)+" into trips in ")
	out, errOut, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir, "--force", "--json")
	require.NoError(t, err, "admin restore --force --json: %s", errOut)
	var restored struct {
		Datastore string             `json:"datastore"`
		From      string             `json:"from"`
		Restored  []backup.Partition `json:"restored"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &restored))
	assert.Equal(t, "trips", restored.Datastore)
	assert.Equal(t, dir, restored.From)
	assert.Equal(t, m.Partitions, restored.Restored)
	got, err := cl.GetCellLatest(ctx, writes[7].Key.RowKey, "BASE")
	require.NoError(t, err)
	assert.JSONEq(t, `{"i":7}`, string(got.Body), "a cell after the restores")

	// Flags.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "backup", "--endpoints", eps, "--out", dir}, "--datastore is required"},
		{[]string{"admin", "backup", "--endpoints", eps, "--datastore", "trips"}, "--out is required"},
		{[]string{"admin", "restore", "--endpoints", eps}, "--from is required"},
		{[]string{"admin", "restore", "--endpoints", "", "--from", dir}, "--endpoints is empty"},
	} {
		_, _, err := runCmd(ctx, tc.args...)
		assert.ErrorContains(t, err, tc.want, strings.Join(tc.args, " "))
	}
}

// testClient is a client of endpoints for datastore trips.
func testClient(t *testing.T, endpoints []string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err)
	return cl
}
