package main

import (
	"context"
	"encoding/json"
	"errors"
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
	assert.ErrorContains(t, err, "nothing restored: partitions 0, 1 of trips hold cells; run with --dry-run to see how many a restore would drop, then with --force (none dropped) or --accept-lost-cells N")
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

	// A cell written after the backup: --force refuses to drop it, --dry-run counts it, and
	// --accept-lost-cells restores only with the total the dry run printed.
	late := uuid.NewSHA1(uuid.NameSpaceURL, []byte("adminbackup-late"))
	_, err = cl.PutCell(ctx, late, "BASE", 1, json.RawMessage(`{"late":true}`))
	require.NoError(t, err)
	out, _, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir, "--force")
	assert.ErrorContains(t, err, "nothing restored: the restore would drop 1 cells of trips that the backup does not hold (table above); to drop them, run with --accept-lost-cells 1")
	assert.Contains(t, out, "PARTITION  BACKUP_CELLS  TARGET_CELLS  CELLS_LOST")
	out, errOut, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir, "--dry-run")
	require.NoError(t, err, "admin restore --dry-run: %s", errOut)
	assert.Contains(t, out, "into trips: nothing changed; 1 cells would be lost")
	assert.Regexp(t, fmt.Sprintf(`total\s+%d\s+%d\s+1\n`, len(writes), len(writes)+1), out, "admin restore --dry-run: the totals")
	out, errOut, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir, "--dry-run", "--json")
	require.NoError(t, err, "admin restore --dry-run --json: %s", errOut)
	var dry struct {
		From   string        `json:"from"`
		DryRun backup.Report `json:"dry_run"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &dry))
	assert.Equal(t, int64(1), dry.DryRun.CellsLost, "admin restore --dry-run --json: cells_lost")
	require.Len(t, dry.DryRun.Partitions, 2)
	_, err = cl.GetCellLatest(ctx, late, "BASE")
	require.NoError(t, err, "the late cell after the refused restore and the dry runs")
	_, _, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir, "--accept-lost-cells", "2")
	assert.ErrorContains(t, err, "would drop 1 cells", "admin restore --accept-lost-cells 2")
	out, errOut, err = runCmd(ctx, "admin", "restore", "--endpoints", eps, "--from", dir, "--accept-lost-cells", "1")
	require.NoError(t, err, "admin restore --accept-lost-cells 1: %s", errOut)
	assert.Contains(t, out, fmt.Sprintf("%d cells of the target replaced, 1 of them not in the backup (lost)", len(writes)+1))
	require.Eventually(t, func() bool {
		_, err := cl.GetCellLatest(ctx, late, "BASE")
		return errors.Is(err, client.ErrNotFound)
	}, time.Minute, 50*time.Millisecond, "the late cell is gone after --accept-lost-cells 1")

	// Flags.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "backup", "--endpoints", eps, "--out", dir}, "--datastore is required"},
		{[]string{"admin", "backup", "--endpoints", eps, "--datastore", "trips"}, "--out is required"},
		{[]string{"admin", "restore", "--endpoints", eps}, "--from is required"},
		{[]string{"admin", "restore", "--endpoints", "", "--from", dir}, "--endpoints is empty"},
		{[]string{"admin", "restore", "--endpoints", eps, "--from", dir, "--dry-run", "--force"}, "--dry-run changes nothing"},
		{[]string{"admin", "restore", "--endpoints", eps, "--from", dir, "--accept-lost-cells", "-1"}, "--accept-lost-cells -1: must be a count of cells >= 0"},
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
