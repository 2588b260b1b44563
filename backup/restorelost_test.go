package backup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/backup"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestRestoreCellsLost: a cell written after a backup is never dropped by Restore unless the
// caller names the total of cells lost. Force alone is refused (nothing restored), a dry run
// reports the cell per partition and in total, another total is refused, and the named total
// restores, dropping it.
func TestRestoreCellsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := clustertest.Start(t, clustertest.Options{Partition: restorePC})
	cl := testClient(t, c.URLs(), "trips")
	var writes []client.CellWrite
	for i := 0; i < 40; i++ {
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("lost", i)))
		writes = append(writes, client.CellWrite{Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{"before":true}`)})
	}
	_, err := cl.PutCells(ctx, writes)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "backup")
	m, err := backup.Backup(ctx, cl, "trips", dir)
	require.NoError(t, err)
	require.Len(t, m.Partitions, 2)

	// The cell written after the backup, in partition 1 (shards 8..15).
	var late uuid.UUID
	for i := 0; ; i++ {
		late = uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("late", i)))
		if cells.ShardOf(late, 16) >= 8 {
			break
		}
	}
	_, err = cl.PutCell(ctx, late, "BASE", 1, json.RawMessage(`{"after":true}`))
	require.NoError(t, err)
	lateThere := func(what string) {
		t.Helper()
		_, err := cl.GetCellLatest(ctx, late, "BASE")
		require.NoError(t, err, "%s: the late cell", what)
	}

	wantReport := backup.Report{Datastore: "trips", DryRun: true, Partitions: []backup.PartitionReport{
		{ID: 0, BackupCells: m.Partitions[0].Cells, TargetCells: m.Partitions[0].Cells, CellsLost: 0},
		{ID: 1, BackupCells: m.Partitions[1].Cells, TargetCells: m.Partitions[1].Cells + 1, CellsLost: 1},
	}, TargetCells: int64(len(writes)) + 1, CellsLost: 1}

	// Before issue 19 this restored both partitions and dropped the late cell.
	_, _, err = backup.Restore(ctx, cl, dir, backup.RestoreOptions{Force: true})
	var cle *backup.CellsLostError
	require.ErrorAs(t, err, &cle, "forced restore dropping a cell")
	assert.ErrorIs(t, err, backup.ErrCellsLost)
	assert.Equal(t, wantReport, cle.Report, "forced restore: the dry runs' report")
	assert.ErrorContains(t, err, "would drop 1 cells of trips absent from the backup (1 in partition 1), none accepted")
	lateThere("after the forced restore")

	_, rep, err := backup.Restore(ctx, cl, dir, backup.RestoreOptions{DryRun: true})
	require.NoError(t, err, "dry run")
	assert.Equal(t, wantReport, rep, "dry run")
	lateThere("after the dry run")

	for _, n := range []int64{0, 2} {
		_, _, err = backup.Restore(ctx, cl, dir, backup.RestoreOptions{AcceptLostCells: &n})
		require.ErrorAs(t, err, &cle, "restore accepting %d lost cells", n)
		assert.Equal(t, int64(1), cle.Report.CellsLost, "restore accepting %d lost cells: the count", n)
		lateThere(fmt.Sprintf("after the restore accepting %d", n))
	}
	neg := int64(-1)
	_, _, err = backup.Restore(ctx, cl, dir, backup.RestoreOptions{AcceptLostCells: &neg})
	assert.ErrorContains(t, err, "accept lost cells -1 is negative")

	one := int64(1)
	got, rep, err := backup.Restore(ctx, cl, dir, backup.RestoreOptions{AcceptLostCells: &one})
	require.NoError(t, err, "restore accepting the 1 lost cell")
	assert.Equal(t, m.Partitions, got.Partitions, "the restored manifest")
	wantReport.DryRun = false
	assert.Equal(t, wantReport, rep, "restore accepting the 1 lost cell: report")
	require.Eventually(t, func() bool {
		_, err := cl.GetCellLatest(ctx, late, "BASE")
		return errors.Is(err, client.ErrNotFound)
	}, time.Minute, 50*time.Millisecond, "the late cell is gone")

	// Every cell is in the backup now: Force replaces the datastore, losing none.
	_, rep, err = backup.Restore(ctx, cl, dir, backup.RestoreOptions{Force: true})
	require.NoError(t, err, "forced restore of the same backup")
	assert.Equal(t, int64(0), rep.CellsLost, "forced restore of the same backup: cells lost")
	assert.Equal(t, int64(len(writes)), rep.TargetCells, "forced restore of the same backup: cells replaced")
}
