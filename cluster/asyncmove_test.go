package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startAsyncSpare starts a private replicated set of 3 storage clusters (a master and 1 minion
// each) and a 3-node cluster whose async datastore "trips" has 2 partitions, on c0 and c1: c2
// is a spare cluster holding no partition.
func startAsyncSpare(t *testing.T) (*clustertest.Cluster, *mariadb.ReplicatedSet) {
	t.Helper()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 3, Minions: 1})
	require.NoError(t, err, "start a replicated set")
	t.Cleanup(func() { _ = set.Close() })
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Async, ReplicatedSet: set, Partitions: 2,
		AsyncCluster: func(set *mariadb.ReplicatedSet) *localcluster.AsyncOptions {
			return &localcluster.AsyncOptions{Prefix: "sl",
				Cluster:   partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond, BreakerTimeout: time.Second},
				Partition: partition.AsyncConfig{ReapInterval: 100 * time.Millisecond, ReplayAfter: 500 * time.Millisecond}}
		}})
	spec := &c.Topology.Datastores[0]
	require.Len(t, spec.StorageClusters, 3, "topology: storage clusters")
	require.Equal(t, "c0", spec.Partitions[0].Cluster, "topology: cluster of partition 0")
	require.Equal(t, "c1", spec.Partitions[1].Cluster, "topology: cluster of partition 1")
	return c, set
}

// moveLoad writes cells to both partitions from one goroutine per node until stopped,
// retrying a write that failed retryably (unavailable, indeterminate) until it is acknowledged
// or 30 s have passed, as a client would; failures counts the writes never acknowledged and
// those answered otherwise than created, exists or buffered.
type moveLoad struct {
	l                  *ledger
	writes, retries    atomic.Int64
	buffered, failures atomic.Int64
	acks               []atomic.Int64 // acknowledged writes per node
	firstFailure       atomic.Value   // string
	stop               chan struct{}
	wg                 sync.WaitGroup
}

func startMoveLoad(nodes []*cluster.Node, rows [][]uuid.UUID, l *ledger) *moveLoad {
	ld := &moveLoad{l: l, acks: make([]atomic.Int64, len(nodes)), stop: make(chan struct{})}
	for w, n := range nodes {
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-ld.stop:
					return
				default:
				}
				p := i % 4 / 3 // three writes to partition 0 for one to partition 1
				row := rows[p][i%len(rows[p])]
				c, err := encodeCell(row, "LOAD", int64(w*1_000_000+i), fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				if err != nil {
					ld.fail(err.Error())
					return
				}
				ld.put(w, n, c)
			}
		}()
	}
	return ld
}

func (ld *moveLoad) fail(what string) {
	ld.failures.Add(1)
	ld.firstFailure.CompareAndSwap(nil, what)
}

// acked returns the number of writes acknowledged so far through each node.
func (ld *moveLoad) acked() []int64 {
	out := make([]int64, len(ld.acks))
	for w := range ld.acks {
		out[w] = ld.acks[w].Load()
	}
	return out
}

// requireAcks waits until the load through every node has had at least n more writes
// acknowledged than since (from acked), saying when.
func (ld *moveLoad) requireAcks(t *testing.T, since []int64, n int64, when string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for w := range ld.acks {
			if ld.acks[w].Load() < since[w]+n {
				return false
			}
		}
		return true
	}, opTimeout, 10*time.Millisecond, "%d writes acknowledged through every node %s", n, when)
}

// put writes c through node w (n) until it is acknowledged, retrying as a client does.
func (ld *moveLoad) put(w int, n *cluster.Node, c cells.Cell) {
	ld.writes.Add(1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := n.PutCells(ctx, ds, []cells.Cell{c})
		cancel()
		if err == nil {
			switch res[0].Status {
			case cells.StatusCreated, cells.StatusExists, cells.StatusBuffered:
				if res[0].Status == cells.StatusBuffered {
					ld.buffered.Add(1)
				}
				body, _ := c.Body.JSON()
				ld.l.add(acked{key: c.Key, body: string(body), addedID: res[0].AddedID, created: res[0].CreatedAt})
				ld.acks[w].Add(1)
				return
			}
			err = fmt.Errorf("status %v", res[0].Status)
		}
		if (errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate)) && time.Now().Before(deadline) {
			ld.retries.Add(1)
			time.Sleep(20 * time.Millisecond) // the load's backoff between retries, as a client's
			continue
		}
		ld.fail(fmt.Sprintf("%s through %s: %v", c.Key, n.ID(), err))
		return
	}
}

func (ld *moveLoad) halt() {
	close(ld.stop)
	ld.wg.Wait()
}

// kvLoad commits offsets of a consumer group coordinated by partition 0 and upserts entries
// of an index table into partition 0's shards, from one goroutine, until stopped: state held in
// the partition's KV rows and index tables, changing while it moves.
type kvLoad struct {
	group   string
	fields  []indexes.Field
	shards  cells.ShardRange
	offset  int64 // the last offset committed and acknowledged
	entries int64 // index entries acknowledged
	fails   []string
	stop    chan struct{}
	done    chan struct{}
}

const moveIndexTable = "movetest_v1"

func startKVLoad(t *testing.T, nodes []*cluster.Node, spec *topology.DatastoreSpec, group string) *kvLoad {
	t.Helper()
	k := &kvLoad{group: group, fields: []indexes.Field{{Name: "n", Type: indexes.TypeInt, Column: "LOAD"}},
		shards: spec.Partitions[0].Shards(), stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := nodes[0].GroupApply(ctx, ds, group, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: 10 * time.Minute})
	require.NoError(t, err, "join group %s", group)
	require.Len(t, res.Assigned, spec.Shards, "join group %s: shards assigned, want all", group)
	leases := res.Assigned
	go func() {
		defer close(k.done)
		for i := 1; ; i++ {
			select {
			case <-k.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n := nodes[i%len(nodes)]
			// Retry until acknowledged: both commands are idempotent.
			for try := 0; ; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var err error
				if i%2 == 0 {
					commits := make([]consumer.Offset, len(leases))
					for j, l := range leases {
						commits[j] = consumer.Offset{Shard: l.Shard, Epoch: l.Epoch, Offset: int64(i)}
					}
					_, err = n.GroupApply(ctx, ds, group, consumer.Command{Op: consumer.OpHeartbeat, Worker: "a", SessionTimeout: 10 * time.Minute, Commits: commits})
					if err == nil {
						k.offset = int64(i)
					}
				} else {
					shard := k.shards.First + i%k.shards.Len()
					e := command.IndexEntry{Shard: int32(shard), RowKey: uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("entry", i))),
						Values: []any{int64(i)}, Refs: map[string]int64{"LOAD": 1}}
					_, err = n.PutIndexEntries(ctx, ds, moveIndexTable, k.fields, []command.IndexEntry{e})
					if err == nil {
						k.entries++
					}
				}
				cancel()
				if err == nil {
					break
				}
				// ErrClosed: the partition closed under the command (a merge retired it), which
				// the API answers as 503 unavailable: a client retries.
				if try > 100 || !(errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate) || errors.Is(err, partition.ErrClosed)) {
					k.fails = append(k.fails, fmt.Sprintf("command %d through %s: %v", i, n.ID(), err))
					break
				}
				time.Sleep(20 * time.Millisecond) // the load's backoff between retries, as a client's
			}
		}
	}()
	return k
}

func (k *kvLoad) halt() {
	close(k.stop)
	<-k.done
}

// check requires every acknowledged commit and index entry to be there after the move.
func (k *kvLoad) check(t *testing.T, nodes []*cluster.Node) {
	t.Helper()
	if len(k.fails) > 0 {
		require.Failf(t, "group or index commands failed during the move", "%d failed; first: %s", len(k.fails), k.fails[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, n := range nodes {
		st, err := n.GroupStatus(ctx, ds, k.group, cluster.Strong)
		require.NoError(t, err, "GroupStatus through %s", n.ID())
		for _, l := range st.Leases {
			require.Equal(t, k.offset, l.Offset, "group %s through %s: offset of shard %d, want the last acknowledged commit", k.group, n.ID(), l.Shard)
		}
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		st, err := nodes[0].IndexTableStats(ctx, ds, moveIndexTable, k.fields)
		require.NoError(ct, err, "IndexTableStats")
		assert.Equal(ct, k.entries, st.Entries, "index entries, want every acknowledged one")
	}, 20*time.Second, 10*time.Millisecond, "the index entries are all there")
	t.Logf("group %s at offset %d and %d index entries, as acknowledged", k.group, k.offset, k.entries)
}

// loadPartitionZero writes n cells in the rows of partition 0 (rows[0], some in every shard),
// then starts the consumer-group and index commands of a group coordinated by partition 0
// (its KV rows and index tables, changed throughout) and the writes of moveLoad, and waits
// until 20 writes were acknowledged through every node (when names the moment).
func loadPartitionZero(t *testing.T, nodes []*cluster.Node, spec *topology.DatastoreSpec, rows [][]uuid.UUID, l *ledger, n int, when string) ([]cells.Cell, *kvLoad, *moveLoad) {
	t.Helper()
	var before []cells.Cell
	for i := 0; i < n; i++ {
		before = append(before, newCell(t, rows[0][i%len(rows[0])], "BASE", int64(i), fmt.Sprintf(`{"before":%d}`, i)))
	}
	for i := 0; i < len(before); i += 100 {
		putAsync(t, nodes[i/100%len(nodes)], l, before[i:min(i+100, len(before))])
	}
	group := ""
	for i := 0; group == "" || partitionIndex(spec, cluster.CoordinatorShard(group, spec.Shards)) != 0; i++ {
		group = fmt.Sprintf("billing%d", i)
	}
	ks := startKVLoad(t, nodes, spec, group)
	ld := startMoveLoad(nodes, rows, l)
	ld.requireAcks(t, ld.acked(), 20, when)
	return before, ks, ld
}

// requireAcked reads every acknowledged cell strongly through n: each is there with its body,
// and a cell acknowledged created or exists has the added_id and created_at it was
// acknowledged with (a buffered one gets its added_id when replayed).
func requireAcked(t *testing.T, n *cluster.Node, l *ledger, timeout time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		want := l.all()
		keys := make([]cluster.GetKey, len(want))
		for i, a := range want {
			keys[i] = cluster.GetKey{Key: a.key}
		}
		res, err := n.GetCells(ctx, ds, keys, cluster.Strong)
		require.NoError(ct, err, "strong read")
		for i, a := range want {
			r := res[i]
			require.True(ct, r.Found, "%s not found, want the acknowledged cell (added_id %d)", a.key, a.addedID)
			body, _ := r.Cell.Body.JSON()
			require.True(ct, string(body) == a.body && (a.addedID == 0 || (r.Cell.AddedID == a.addedID && r.Cell.CreatedAt.Equal(a.created))),
				"%s: got added_id %d created_at %v body %s, want added_id %d created_at %v body %s",
				a.key, r.Cell.AddedID, r.Cell.CreatedAt, body, a.addedID, a.created, a.body)
		}
	}, timeout, 200*time.Millisecond, "acknowledged cells through %s", n.ID())
}

// requireDenseLogs scans every shard of partition p strongly through n: added_ids are 1..N
// without gap or repeat, and the shard holds exactly the acknowledged cells of the shard.
func requireDenseLogs(t *testing.T, spec *topology.DatastoreSpec, p int, n *cluster.Node, l *ledger) {
	t.Helper()
	want := map[int]map[cells.Key]bool{}
	for _, a := range l.all() {
		s := cells.ShardOf(a.key.RowKey, spec.Shards)
		if want[s] == nil {
			want[s] = map[cells.Key]bool{}
		}
		want[s][a.key] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ps := spec.Partitions[p]
	for s := ps.FirstShard; s <= ps.LastShard; s++ {
		var got []cells.Cell
		for after := int64(0); ; {
			page, err := n.ScanShard(ctx, ds, s, after, 1000, cluster.Strong)
			require.NoError(t, err, "ScanShard(%d) through %s", s, n.ID())
			got = append(got, page...)
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].AddedID
		}
		seen := map[cells.Key]bool{}
		for i, c := range got {
			require.Equal(t, int64(i+1), c.AddedID, "shard %d: added_id of cell %d (dense from 1)", s, i)
			require.False(t, seen[c.Key], "shard %d: %s stored twice", s, c.Key)
			seen[c.Key] = true
			require.True(t, want[s][c.Key], "shard %d: %s stored but never acknowledged", s, c.Key)
		}
		require.Len(t, got, len(want[s]), "shard %d: cells stored, want the acknowledged ones", s)
	}
}

// masterDB opens cluster c's initial master as the admin user.
func masterDB(t *testing.T, set *mariadb.ReplicatedSet, c int) *sql.DB {
	t.Helper()
	db, err := replication.Open(set.AdminDSN(c, 0))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// cellOn returns the added_id of key in shard on db's server, 0 when absent (or when the
// shard's database is gone).
func cellOn(t *testing.T, db *sql.DB, shard int, k cells.Key) int64 {
	t.Helper()
	var id int64
	err := db.QueryRow(fmt.Sprintf("SELECT added_id FROM `sl_trips_%04d`.`entity` WHERE row_key = ? AND column_name = ? AND ref_key = ?", shard),
		k.RowKey[:], k.ColumnKey, k.RefKey).Scan(&id)
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0
	case errors.As(err, &me) && (me.Number == 1049 || me.Number == 1146): // no database, no table
		return 0
	}
	require.NoError(t, err, "look %s up in shard %d", k, shard)
	return id
}

// stalePlacement is a PlacementSource that never reads a record: a node that keeps the
// topology's placement whatever happens (fault injection).
type stalePlacement struct{}

func (stalePlacement) ReadPlacement(context.Context) (storage.Placement, bool, error) {
	return storage.Placement{}, false, nil
}

// TestAsyncMovePartition moves partition 0 from c0 to the spare cluster c2 under continuous
// writes through every node, and checks: no write fails; every acknowledged cell is readable
// (strong) afterwards with the added_id and created_at it was acknowledged with, and every
// shard's log is dense and holds exactly the acknowledged cells; every node serves the
// partition from c2 and new writes land on c2's master; the old copy, dropped, is fenced:
// writes to it through a store fail with storage.ErrMoved, inside the write transaction too;
// and a stale node (one that never reads the placement) cannot write the old copy: its write
// is buffered and replayed into c2 by the others' reapers.
func TestAsyncMovePartition(t *testing.T) {
	c, set := startAsyncSpare(t)
	spec := &c.Topology.Datastores[0]
	nodes := running(c)
	rows := rowsPerPartition(t, spec, t.Name(), 16)
	l := newLedger()

	before, ks, ld := loadPartitionZero(t, nodes, spec, rows, l, 400, "before the move")
	logger := slog.New(slog.NewTextHandler(clustertest.NewTestWriter(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := partition.MoveAsync(ctx, partition.AsyncMove{Datastore: spec, Partition: 0, To: "c2",
		Cluster: partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond, Logger: logger},
		Move:    partition.MoveConfig{DropOld: true, DropGrace: 2 * time.Second, DrainTimeout: time.Minute, Logger: logger}})
	require.NoError(t, err, "MoveAsync")
	t.Logf("moved in %s: %+v", time.Since(start).Round(time.Millisecond), res)
	ld.requireAcks(t, ld.acked(), 20, "after the move")
	ld.halt()
	ks.halt()
	var moved int64
	for _, n := range nodes {
		for _, r := range n.Replicas() {
			if r.Async != nil {
				moved += r.Async.Moved
			}
		}
	}
	t.Logf("load: %d writes, %d retried by the client, %d buffered, %d failed; %d operations refused as moved and retried by the nodes",
		ld.writes.Load(), ld.retries.Load(), ld.buffered.Load(), ld.failures.Load(), moved)
	require.Zero(t, ld.failures.Load(), "writes failed during the move; first: %v", ld.firstFailure.Load())
	require.True(t, res.From == "c0" && res.To == "c2" && res.Epoch == 1 && res.Drained && res.Dropped && res.CopiedCells >= int64(len(before)),
		"move result: got from %s to %s epoch %d drained %v dropped %v copied %d; want c0 to c2, epoch 1, drained, dropped, at least %d copied",
		res.From, res.To, res.Epoch, res.Drained, res.Dropped, res.CopiedCells, len(before))

	// Every node serves partition 0 from c2, partition 1 from c1.
	for _, n := range nodes {
		for _, r := range n.Replicas() {
			want := map[int]string{0: "c2", 1: "c1"}[r.Partition]
			require.NotNil(t, r.Async, "node %s partition %d: async status", n.ID(), r.Partition)
			require.Equal(t, want, r.Async.Cluster, "node %s partition %d: storage cluster", n.ID(), r.Partition)
		}
	}
	for _, n := range nodes {
		requireAcked(t, n, l, 30*time.Second)
	}
	requireDenseLogs(t, spec, 0, nodes[0], l)
	requireDenseLogs(t, spec, 1, nodes[1], l)
	ks.check(t, nodes)

	// A new write lands on c2's master; c0's copy is gone.
	c0, c2 := masterDB(t, set, 0), masterDB(t, set, 2)
	cell := newCell(t, rows[0][0], "AFTER", 1, `{"after":true}`)
	r := putAsync(t, nodes[1], l, []cells.Cell{cell})[0]
	shard := cells.ShardOf(cell.RowKey, spec.Shards)
	require.Equal(t, cells.StatusCreated, r.Status, "write after the move")
	require.Equal(t, r.AddedID, cellOn(t, c2, shard, cell.Key), "write after the move: added_id on c2's master")
	require.Zero(t, cellOn(t, c0, shard, cell.Key), "write after the move: added_id on c0's master, want none")
	require.Zero(t, cellOn(t, c0, cells.ShardOf(before[0].RowKey, spec.Shards), before[0].Key),
		"old copy on c0 after --drop-old: added_id of %s, want none", before[0].Key)

	// The fence: a write to the old copy through a store fails with ErrMoved, before the batch
	// (ApplyShared's check) and inside the write transaction (Begin's locking read).
	st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: set.DSN(0, 0), Prefix: "sl"})
	require.NoError(t, err)
	defer st.Close()
	old, err := st.Partition(ctx, storage.PartitionID{Datastore: ds, Partition: 0}, spec.Partitions[0].Shards())
	require.NoError(t, err)
	old.SetFence("c0")
	_, err = old.Begin(ctx)
	require.ErrorIs(t, err, storage.ErrMoved, "Begin on the old copy")
	f, err := fsm.New(ctx, fsm.Config{Store: old, StoreAttempts: 1})
	require.NoError(t, err)
	data, err := command.Encode(&command.Append{CreatedAt: time.Now().UTC(), Writes: []command.Write{{Cells: []command.Cell{{Shard: shard, Key: cells.Key{RowKey: cell.RowKey, ColumnKey: "FENCED", RefKey: 1}, Body: cell.Body}}}}})
	require.NoError(t, err)
	_, err = f.ApplyShared(ctx, [][]byte{data})
	require.ErrorIs(t, err, storage.ErrMoved, "ApplyShared on the old copy")
	// Without the fence the same write would have gone through: the fence is what stops it.
	old.SetFence("")
	tx, err := old.Begin(ctx)
	require.NoError(t, err, "Begin on the old copy without a fence")
	tx.Rollback()

	// A stale node: it never reads the placement, so it still writes to c0. Its write is
	// refused there, answered buffered, and the other nodes' reapers replay it into c2.
	var clusters []*partition.StorageCluster
	for _, sc := range spec.StorageClusters {
		sc, err := partition.OpenCluster(partition.ClusterConfig{Name: sc.Name, Members: sc.Members(), Prefix: "sl", ProbeInterval: 200 * time.Millisecond})
		require.NoError(t, err)
		defer sc.Close()
		clusters = append(clusters, sc)
	}
	stale, err := partition.OpenAsync(partition.AsyncConfig{Datastore: ds, Partition: 0, Shards: spec.Partitions[0].Shards(),
		Primary: clusters[0], Buffers: clusters[1:], BufferCopies: 1, ReapInterval: time.Hour, MovedWait: 500 * time.Millisecond,
		Placement: stalePlacement{}})
	require.NoError(t, err)
	defer stale.Close()
	sc := newCell(t, rows[0][1], "STALE", 1, `{"stale":true}`)
	sshard := cells.ShardOf(sc.RowKey, spec.Shards)
	sres, err := stale.Put(ctx, command.Write{Cells: []command.Cell{{Shard: sshard, Key: sc.Key, Body: sc.Body}}})
	require.NoError(t, err, "write through the stale node")
	require.Equal(t, cells.StatusBuffered, sres.Cells[0].Status, "write through the stale node: want buffered (the old copy refuses it)")
	_, err = stale.Read(ctx, partition.Strong, partition.ReadRequest{Groups: &partition.GroupsRead{}})
	require.ErrorIs(t, err, partition.ErrUnavailable, "strong read through the stale node")
	require.ErrorIs(t, err, storage.ErrMoved, "strong read through the stale node: want ErrUnavailable wrapping ErrMoved")
	require.Zero(t, cellOn(t, c0, sshard, sc.Key), "added_id of the stale node's write on the old copy, want none")
	body, _ := sc.Body.JSON()
	l.add(acked{key: sc.Key, body: string(body)})
	requireAcked(t, nodes[2], l, 30*time.Second)
	require.NotZero(t, cellOn(t, c2, sshard, sc.Key), "the stale node's buffered write replayed into c2")
	requireDenseLogs(t, spec, 0, nodes[0], l)

	t.Run("FenceOrdersWithSwitch", func(t *testing.T) { testFenceOrdersWithSwitch(t, set) })

	// Rerunning the move finds the partition there.
	again, err := partition.MoveAsync(ctx, partition.AsyncMove{Datastore: spec, Partition: 0, To: "c2",
		Cluster: partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond}, Move: partition.MoveConfig{Logger: logger}})
	require.NoError(t, err, "rerun of the move")
	require.True(t, again.AlreadyThere && again.Epoch == 1, "rerun of the move: got %+v, want already there at epoch 1", again)

	t.Run("InterruptedSwitchResumed", func(t *testing.T) { testInterruptedSwitch(t, spec, nodes, rows, l, logger) })
}

// testInterruptedSwitch leaves partition 1 as a move to c0 interrupted right after fencing
// its old copy leaves it (c1's placement names c0 at epoch 1, c0's names c1: both copies
// refuse writes, nothing is copied yet). Writes meanwhile are answered buffered, never
// failed; rerunning the move finishes the switch from the fenced copy, and every cell,
// acknowledged before or during the interruption, is then on c0.
func testInterruptedSwitch(t *testing.T, spec *topology.DatastoreSpec, nodes []*cluster.Node, rows [][]uuid.UUID, l *ledger, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sc := range spec.StorageClusters {
		st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: sc.Master, Prefix: "sl"})
		require.NoError(t, err)
		defer st.Close()
		pl := storage.Placement{Datastore: ds, Partition: 1, Cluster: "c1", State: storage.PlacementMoving}
		if sc.Name == "c1" {
			pl = storage.Placement{Datastore: ds, Partition: 1, Cluster: "c0", Epoch: 1, State: storage.PlacementActive}
		}
		ok, err := st.WritePlacement(ctx, pl)
		require.NoError(t, err, "placement on %s", sc.Name)
		require.True(t, ok, "placement on %s written", sc.Name)
	}
	var during []cells.Cell
	for i := 0; i < 3; i++ {
		during = append(during, newCell(t, rows[1][i], "INTERRUPTED", 1, fmt.Sprintf(`{"i":%d}`, i)))
	}
	for _, r := range putAsync(t, nodes[1], l, during) {
		require.Equal(t, cells.StatusBuffered, r.Status, "write to partition 1 while both copies are fenced")
	}
	res, err := partition.MoveAsync(ctx, partition.AsyncMove{Datastore: spec, Partition: 1, To: "c0",
		Cluster: partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond},
		Move:    partition.MoveConfig{DrainTimeout: time.Minute, Logger: logger}})
	require.NoError(t, err, "rerun of the interrupted move")
	require.True(t, res.Resumed && res.From == "c1" && res.Epoch == 1 && res.FinalCells != 0 && res.Drained,
		"rerun of the interrupted move: got %+v, want resumed from c1 at epoch 1, cells copied, drained", res)
	t.Logf("resumed: %d cells copied from the fenced copy in %s", res.FinalCells, res.Took.Round(time.Millisecond))
	for _, n := range nodes {
		requireAcked(t, n, l, 30*time.Second)
	}
	requireDenseLogs(t, spec, 1, nodes[2], l)
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			for _, r := range n.Replicas() {
				if r.Partition == 1 && r.Async.Cluster != "c0" {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "every node serves partition 1 from c0")
}

// testFenceOrdersWithSwitch shows the fence inside the write transaction: a transaction that
// passed the check holds the placement row, so a switch (WritePlacement naming another
// cluster) waits for it to end; once the switch is written, the next transaction is refused.
// A writer that lost the partition's named lock can therefore never commit after the switch.
func testFenceOrdersWithSwitch(t *testing.T, set *mariadb.ReplicatedSet) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: set.DSN(1, 0), Prefix: "sl"})
	require.NoError(t, err)
	defer st.Close()
	const scratch = "fencetest"
	ok, err := st.WritePlacement(ctx, storage.Placement{Datastore: scratch, Cluster: "c1", State: storage.PlacementActive})
	require.NoError(t, err, "WritePlacement epoch 0")
	require.True(t, ok, "WritePlacement epoch 0 written")
	ps, err := st.Partition(ctx, storage.PartitionID{Datastore: scratch}, cells.ShardRange{First: 0, Last: 0})
	require.NoError(t, err)
	ps.SetFence("c1")
	tx, err := ps.Begin(ctx)
	require.NoError(t, err, "Begin while the placement names c1")
	switched := make(chan error, 1)
	go func() {
		_, err := st.WritePlacement(ctx, storage.Placement{Datastore: scratch, Cluster: "c2", Epoch: 1, State: storage.PlacementActive})
		switched <- err
	}()
	// Time passing is the point: the switch waits for the open transaction.
	require.Never(t, func() bool { return len(switched) > 0 }, 500*time.Millisecond, 10*time.Millisecond,
		"the switch went through while a fenced write transaction was open; want it to wait")
	require.NoError(t, tx.SetApplied(ctx, storage.AppliedState{Index: 1}))
	require.NoError(t, tx.Commit(), "Commit of the transaction that began before the switch")
	require.NoError(t, <-switched, "the switch after the transaction")
	_, err = ps.Begin(ctx)
	require.ErrorIs(t, err, storage.ErrMoved, "Begin after the switch")
	// Backwards writes of the placement are ignored.
	ok, err = st.WritePlacement(ctx, storage.Placement{Datastore: scratch, Cluster: "c1", State: storage.PlacementActive})
	require.NoError(t, err, "WritePlacement of an older epoch")
	require.False(t, ok, "WritePlacement of an older epoch written")
}
