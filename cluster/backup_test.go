package cluster_test

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

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackupRestore backs up a cluster while it takes writes, restores the backup into a new
// cluster and compares the two cell by cell, on each engine.
func TestBackupRestore(t *testing.T) {
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL} {
		t.Run(string(engine), func(t *testing.T) { testBackupRestore(t, engine, partition.LogStoreBolt) })
	}
	// raft-wal refuses a gap in the log; raft clears the log of a monotonic store on restore.
	t.Run("sqlite-wal", func(t *testing.T) { testBackupRestore(t, clustertest.SQLite, partition.LogStoreWAL) })
}

func testBackupRestore(t *testing.T, engine clustertest.Engine, logStore string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The production raft timeouts: a restore installs a snapshot on every follower, whose
	// main loop then answers no heartbeat until it is done; under the test timeouts (a 250 ms
	// leader lease) a loaded machine made the leader step down during the restore's commit.
	pc := partition.Config{LogStore: logStore, HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond}
	a := clustertest.Start(t, clustertest.Options{Engine: engine, Partition: pc})
	spec := &a.Topology.Datastores[0]
	aNodes := running(a)

	// A few thousand cells: 250 rows per partition, each with several columns and ref keys.
	rows := flatten(rowsPerPartition(t, spec, t.Name(), 250))
	for i := 0; i < len(rows); i += 50 {
		var cs []cells.Cell
		for j, row := range rows[i:min(i+50, len(rows))] {
			cs = append(cs,
				newCell(t, row, "BASE", 1, fmt.Sprintf(`{"row":%d,"city":"c%d"}`, i+j, (i+j)%7)),
				newCell(t, row, "STATUS", 1, `{"state":"requested"}`),
				newCell(t, row, "STATUS", 2, `{"state":"accepted"}`),
				newCell(t, row, "FARE", int64(100+j), fmt.Sprintf(`{"fare":%d.5}`, j)))
		}
		putAll(t, aNodes[i/50%len(aNodes)], nil, cs)
	}
	// A consumer group (its state is KV rows of the coordinator's partition) and an index
	// definition (the catalog, a KV row of the partition holding shard 0).
	const group = "billing"
	_, err := aNodes[0].GroupApply(ctx, ds, group, consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", SessionTimeout: time.Hour})
	require.NoError(t, err, "join group")
	def, err := indexes.ParseDefinition([]byte("table: by_city\nshard_field: city\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: city, type: string}\n"))
	require.NoError(t, err)
	def.Datastore = ds
	_, err = aNodes[1].CatalogApply(ctx, ds, indexes.Command{Op: indexes.OpDefine, Name: def.Table, Definition: def})
	require.NoError(t, err, "define index")
	wantGroup, err := aNodes[0].GroupStatus(ctx, ds, group, cluster.Strong)
	require.NoError(t, err)
	wantCatalog, err := aNodes[0].Catalog(ctx, ds, cluster.Strong)
	require.NoError(t, err)

	// Writes go on during the backup. Every write acknowledged before a partition's backup
	// started must be in it.
	var (
		mu       sync.Mutex
		ackedMax = map[int]int64{} // shard -> highest added_id acknowledged so far
		stop     atomic.Bool
		wg       sync.WaitGroup
		written  atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			var cs []cells.Cell
			for j := 0; j < 5; j++ {
				row := rows[(i*7+j)%len(rows)]
				c, err := encodeCell(row, "LIVE", int64(i), fmt.Sprintf(`{"i":%d,"j":%d}`, i, j))
				if !assert.NoError(t, err) {
					return
				}
				cs = append(cs, c)
			}
			wctx, wcancel := context.WithTimeout(ctx, opTimeout)
			res, err := aNodes[i%len(aNodes)].PutCells(wctx, ds, cs)
			wcancel()
			if !assert.NoError(t, err, "live write %d", i) {
				return
			}
			mu.Lock()
			for k, r := range res {
				s := cells.ShardOf(cs[k].RowKey, spec.Shards)
				ackedMax[s] = max(ackedMax[s], r.AddedID)
			}
			mu.Unlock()
			written.Add(int64(len(cs)))
		}
	}()
	require.Eventually(t, func() bool { return written.Load() >= 50 }, opTimeout, 10*time.Millisecond, "live writes start")

	dir := t.TempDir()
	infos := make([]fsm.BackupInfo, len(spec.Partitions))
	for p := range spec.Partitions {
		mu.Lock()
		before := map[int]int64{}
		for s, id := range ackedMax {
			before[s] = id
		}
		mu.Unlock()
		// Partition 0 through a node that does not lead it (relayed over the node RPC),
		// partition 1 on its leader.
		via := a.Node(a.LeaderOf(p))
		if p == 0 {
			via = a.Node((a.LeaderOf(p) + 1) % len(aNodes))
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("p%d.snap", p)))
		require.NoError(t, err)
		start := time.Now()
		infos[p], err = via.Backup(ctx, ds, spec.Partitions[p].ID, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		require.NoError(t, err, "Backup of partition %d through %s", p, via.ID())
		t.Logf("partition %d: %d cells, %d KV rows, %d bytes at index %d in %v (through %s)", p, infos[p].Cells, infos[p].KVs,
			infos[p].Bytes, infos[p].Header.Applied.Index, time.Since(start).Round(time.Millisecond), via.ID())
		for _, si := range infos[p].Shards {
			assert.GreaterOrEqual(t, si.MaxAddedID, before[si.Shard], "partition %d shard %d: last added_id of the backup, want every one acknowledged before it started", p, si.Shard)
			assert.Equal(t, si.MaxAddedID, si.Cells, "partition %d shard %d: cells up to added_id %d, want dense ids", p, si.Shard, si.MaxAddedID)
		}
		if spec.Partitions[p].Shards().Contains(cluster.CatalogShard) {
			assert.NotZero(t, infos[p].KVs, "partition %d holds the index catalog: KV rows in its backup", p)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d live cells written during the backups", written.Load())
	for p := range spec.Partitions {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p%d.snap", p)))
		require.NoError(t, err)
		got, err := fsm.VerifySnapshot(bytes.NewReader(b))
		require.NoError(t, err, "VerifySnapshot of partition %d's file", p)
		require.Equal(t, infos[p], got, "VerifySnapshot of partition %d's file", p)
	}

	// Cluster B, same layout, empty. Faulty restores first: each must change nothing.
	b := clustertest.Start(t, clustertest.Options{Engine: engine, Partition: pc})
	bNodes := running(b)
	file := func(p int) []byte {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p%d.snap", p)))
		require.NoError(t, err)
		return data
	}
	restore := func(via *cluster.Node, p int, data []byte, force bool) (fsm.BackupInfo, error) {
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		defer rcancel()
		res, err := via.Restore(rctx, ds, spec.Partitions[p].ID, bytes.NewReader(data), partition.RestoreOptions{Force: force})
		return res.Backup, err
	}
	cut := file(0)
	cut = cut[:len(cut)/2]
	_, err = restore(bNodes[0], 0, cut, false)
	require.ErrorIs(t, err, fsm.ErrBadSnapshot, "restore of a truncated stream")
	_, err = restore(bNodes[1], 1, file(0), false)
	require.ErrorIs(t, err, fsm.ErrBadSnapshot, "restore of partition 0's backup into partition 1")
	for shard := 0; shard < spec.Shards; shard++ {
		require.Empty(t, scanShard(t, ctx, bNodes[0], shard, cluster.Strong), "after refused restores, B's shard %d: cells", shard)
	}

	// The restores: partition 0 on its leader, partition 1 through a node that does not lead
	// it (the stream goes over the node RPC).
	for p := range spec.Partitions {
		via := b.Node(b.LeaderOf(p))
		if p == 1 {
			via = b.Node((b.LeaderOf(p) + 1) % len(bNodes))
		}
		start := time.Now()
		info, err := restore(via, p, file(p), false)
		require.NoError(t, err, "Restore of partition %d through %s", p, via.ID())
		assert.Equal(t, infos[p], info, "Restore of partition %d: info", p)
		t.Logf("restored partition %d in %v", p, time.Since(start).Round(time.Millisecond))
	}
	compareWithBackup(t, ctx, a, infos, cluster.Strong, bNodes[0])
	gotGroup, err := bNodes[2].GroupStatus(ctx, ds, group, cluster.Strong)
	if assert.NoError(t, err, "B's consumer group") {
		assertSameLeases(t, wantGroup, gotGroup, "B's consumer group")
	}
	gotCatalog, err := bNodes[1].Catalog(ctx, ds, cluster.Strong)
	if assert.NoError(t, err, "B's index catalog") {
		assert.Equal(t, wantCatalog, gotCatalog, "B's index catalog")
	}

	// A second restore is refused without force (B holds cells now), and with force it
	// replaces the partition again, with the same result.
	_, err = restore(bNodes[2], 0, file(0), false)
	require.ErrorIs(t, err, partition.ErrNotEmpty, "restore into a partition holding cells")
	_, err = restore(bNodes[2], 0, file(0), true)
	require.NoError(t, err, "forced restore")
	compareWithBackup(t, ctx, a, infos, cluster.Strong, bNodes[2])

	// Every replica of B holds the restored state: followers installed the snapshot (stale
	// reads of each node's own replica).
	for _, n := range bNodes {
		waitSame(t, ctx, a, n, infos, nil, "after the restore")
	}

	// New writes into B take added_ids after the restored ones.
	var fresh []cells.Cell
	for j, row := range rows[:40] {
		fresh = append(fresh, newCell(t, row, "AFTER", 1, fmt.Sprintf(`{"j":%d}`, j)))
	}
	l := newLedger()
	for i, r := range putAll(t, bNodes[1], l, fresh) {
		s := cells.ShardOf(fresh[i].RowKey, spec.Shards)
		assert.Equal(t, cells.StatusCreated, r.Status, "new cell in shard %d", s)
		assert.Greater(t, r.AddedID, backupMax(infos, s), "new cell in shard %d: added_id, want after the restored ones", s)
	}

	// B restarts: the restored state and the new cells stay, on every replica.
	for i := range b.Topology.Nodes {
		b.StopNode(i)
	}
	for i := range b.Topology.Nodes {
		b.StartNode(i)
	}
	b.WaitReady()
	bNodes = running(b)
	requireStrong(t, l, bNodes...)
	for _, n := range bNodes {
		waitSame(t, ctx, a, n, infos, l, "after the restart")
		requireStale(t, l, n)
	}
}

// waitSame requires node n's own replicas to hold what the backups hold (stale reads, which
// may lag: polled for up to opTimeout).
func waitSame(t *testing.T, ctx context.Context, a *clustertest.Cluster, n *cluster.Node, infos []fsm.BackupInfo, later *ledger, when string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.NoError(ct, sameAsBackup(ctx, a, n, infos, cluster.Stale, later))
	}, opTimeout, 50*time.Millisecond, "%s, replica %s holds the backup", when, n.ID())
}

// backupMax returns shard's highest added_id in the backups.
func backupMax(infos []fsm.BackupInfo, shard int) int64 {
	for _, info := range infos {
		for _, si := range info.Shards {
			if si.Shard == shard {
				return si.MaxAddedID
			}
		}
	}
	return 0
}

// scanShard reads every cell of shard through n.
func scanShard(t *testing.T, ctx context.Context, n *cluster.Node, shard int, c cluster.Consistency) []cells.Cell {
	t.Helper()
	got, err := scanShardErr(ctx, n, shard, c)
	require.NoError(t, err)
	return got
}

func scanShardErr(ctx context.Context, n *cluster.Node, shard int, c cluster.Consistency) ([]cells.Cell, error) {
	var out []cells.Cell
	after := int64(0)
	for {
		page, err := n.ScanShard(ctx, ds, shard, after, 1000, c)
		if err != nil {
			return nil, fmt.Errorf("ScanShard(%d, after %d) through %s: %w", shard, after, n.ID(), err)
		}
		if len(page) == 0 {
			return out, nil
		}
		out = append(out, page...)
		after = page[len(page)-1].AddedID
	}
}

// compareWithBackup fails the test unless B, read through bn, holds exactly what the backups
// of A hold.
func compareWithBackup(t *testing.T, ctx context.Context, a *clustertest.Cluster, infos []fsm.BackupInfo, c cluster.Consistency, bn *cluster.Node) {
	t.Helper()
	require.NoError(t, sameAsBackup(ctx, a, bn, infos, c, nil))
}

// sameAsBackup compares, for every shard, A's cells up to the backup's highest added_id with
// B's (read through bn with consistency c): same count, and cell by cell the same added_id,
// row key, column, ref key, body and created_at. Beyond the backup, B holds exactly the cells of
// later (written into B after the restore; nil: none). It reads A strongly.
func sameAsBackup(ctx context.Context, a *clustertest.Cluster, bn *cluster.Node, infos []fsm.BackupInfo, c cluster.Consistency, later *ledger) error {
	an := a.Node(0)
	for _, info := range infos {
		for _, si := range info.Shards {
			all, err := scanShardErr(ctx, an, si.Shard, cluster.Strong)
			if err != nil {
				return err
			}
			var want []cells.Cell
			for _, x := range all {
				if x.AddedID <= si.MaxAddedID {
					want = append(want, x)
				}
			}
			all, err = scanShardErr(ctx, bn, si.Shard, c)
			if err != nil {
				return err
			}
			var got, beyond []cells.Cell
			for _, x := range all {
				if x.AddedID <= si.MaxAddedID {
					got = append(got, x)
				} else {
					beyond = append(beyond, x)
				}
			}
			var wantBeyond []acked
			if later != nil {
				for _, l := range later.all() {
					if cells.ShardOf(l.key.RowKey, a.Topology.Datastores[0].Shards) == si.Shard {
						wantBeyond = append(wantBeyond, l)
					}
				}
			}
			if len(beyond) != len(wantBeyond) {
				return fmt.Errorf("shard %d: B (%s, %s) holds %d cells after the backup's added_id %d, want %d", si.Shard, bn.ID(), c, len(beyond), si.MaxAddedID, len(wantBeyond))
			}
			if int64(len(want)) != si.Cells || len(got) != len(want) {
				return fmt.Errorf("shard %d: B (%s, %s) holds %d cells, A %d up to added_id %d, the backup counts %d",
					si.Shard, bn.ID(), c, len(got), len(want), si.MaxAddedID, si.Cells)
			}
			for i := range want {
				w, g := want[i], got[i]
				if g.AddedID != w.AddedID || g.Key != w.Key || !g.CreatedAt.Equal(w.CreatedAt) || !bytes.Equal(g.Body, w.Body) {
					gj, _ := json.Marshal(g)
					wj, _ := json.Marshal(w)
					return fmt.Errorf("shard %d cell %d: B (%s) holds %s, want A's %s", si.Shard, i, bn.ID(), gj, wj)
				}
			}
		}
	}
	return nil
}
