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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	c := clustertest.Start(t, clustertest.Options{Engine: clustertest.Async, ReplicatedSet: set, Partitions: 2,
		AsyncCluster: func(set *mariadb.ReplicatedSet) *localcluster.AsyncOptions {
			return &localcluster.AsyncOptions{Prefix: "sl",
				Cluster:   partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond, BreakerTimeout: time.Second},
				Partition: partition.AsyncConfig{ReapInterval: 100 * time.Millisecond, ReplayAfter: 500 * time.Millisecond}}
		}})
	spec := &c.Topology.Datastores[0]
	if len(spec.StorageClusters) != 3 || spec.Partitions[0].Cluster != "c0" || spec.Partitions[1].Cluster != "c1" {
		t.Fatalf("topology: %d storage clusters, partitions on %s and %s; want 3, on c0 and c1", len(spec.StorageClusters), spec.Partitions[0].Cluster, spec.Partitions[1].Cluster)
	}
	return c, set
}

// moveLoad writes cells to both partitions from one goroutine per node until stopped,
// retrying a write that failed retryably (unavailable, indeterminate) until it is acknowledged
// or 30 s have passed; failures counts the writes never acknowledged and those answered
// otherwise than created, exists or buffered.
type moveLoad struct {
	l                  *ledger
	writes, retries    atomic.Int64
	buffered, failures atomic.Int64
	firstFailure       atomic.Value // string
	stop               chan struct{}
	wg                 sync.WaitGroup
}

func startMoveLoad(t *testing.T, nodes []*cluster.Node, rows [][]uuid.UUID, l *ledger) *moveLoad {
	ld := &moveLoad{l: l, stop: make(chan struct{})}
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
				c := newCell(t, row, "LOAD", int64(w*1_000_000+i), fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				ld.put(n, c)
			}
		}()
	}
	return ld
}

func (ld *moveLoad) put(n *cluster.Node, c cells.Cell) {
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
				return
			}
			err = fmt.Errorf("status %v", res[0].Status)
		}
		if (errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate)) && time.Now().Before(deadline) {
			ld.retries.Add(1)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		ld.failures.Add(1)
		ld.firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s through %s: %v", c.Key, n.ID(), err))
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
	shards  storage.ShardRange
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
	if err != nil || len(res.Assigned) != spec.Shards {
		t.Fatalf("join group %s: got %d shards, %v; want all %d", group, len(res.Assigned), err, spec.Shards)
	}
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
					e := fsm.IndexEntry{Shard: int32(shard), RowKey: uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("entry", i))),
						Values: []any{int64(i)}, Refs: map[string]int64{"LOAD": 1}}
					_, err = n.PutIndexEntries(ctx, ds, moveIndexTable, k.fields, []fsm.IndexEntry{e})
					if err == nil {
						k.entries++
					}
				}
				cancel()
				if err == nil {
					break
				}
				if try > 100 || !(errors.Is(err, partition.ErrUnavailable) || errors.Is(err, partition.ErrIndeterminate)) {
					k.fails = append(k.fails, fmt.Sprintf("command %d through %s: %v", i, n.ID(), err))
					break
				}
				time.Sleep(20 * time.Millisecond)
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
		t.Fatalf("%d group or index commands failed during the move; first: %s", len(k.fails), k.fails[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, n := range nodes {
		st, err := n.GroupStatus(ctx, ds, k.group, cluster.Strong)
		if err != nil {
			t.Fatalf("GroupStatus through %s: %v", n.ID(), err)
		}
		for _, l := range st.Leases {
			if l.Offset != k.offset {
				t.Fatalf("group %s through %s: shard %d at offset %d, want the last acknowledged commit %d", k.group, n.ID(), l.Shard, l.Offset, k.offset)
			}
		}
	}
	waitUntil(t, 20*time.Second, "the index entries are all there", func() bool {
		st, err := nodes[0].IndexTableStats(ctx, ds, moveIndexTable, k.fields)
		return err == nil && st.Entries == k.entries
	})
	t.Logf("group %s at offset %d and %d index entries, as acknowledged", k.group, k.offset, k.entries)
}

// requireAcked reads every acknowledged cell strongly through n: each is there with its body,
// and a cell acknowledged created or exists has the added_id and created_at it was
// acknowledged with (a buffered one gets its added_id when replayed).
func requireAcked(t *testing.T, n *cluster.Node, l *ledger, timeout time.Duration) {
	t.Helper()
	var lastErr error
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		lastErr = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			want := l.all()
			keys := make([]cluster.GetKey, len(want))
			for i, a := range want {
				keys[i] = cluster.GetKey{Key: a.key}
			}
			res, err := n.GetCells(ctx, ds, keys, cluster.Strong)
			if err != nil {
				return err
			}
			for i, a := range want {
				r := res[i]
				if !r.Found {
					return fmt.Errorf("%s not found, want the acknowledged cell (added_id %d)", a.key, a.addedID)
				}
				body, _ := r.Cell.Body.JSON()
				if string(body) != a.body || (a.addedID != 0 && (r.Cell.AddedID != a.addedID || !r.Cell.CreatedAt.Equal(a.created))) {
					return fmt.Errorf("%s: got added_id %d created_at %v body %s, want added_id %d created_at %v body %s",
						a.key, r.Cell.AddedID, r.Cell.CreatedAt, body, a.addedID, a.created, a.body)
				}
			}
			return nil
		}()
		if lastErr == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("acknowledged cells through %s: %v", n.ID(), lastErr)
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
			if err != nil {
				t.Fatalf("ScanShard(%d) through %s: %v", s, n.ID(), err)
			}
			got = append(got, page...)
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].AddedID
		}
		seen := map[cells.Key]bool{}
		for i, c := range got {
			if c.AddedID != int64(i+1) {
				t.Fatalf("shard %d: cell %d has added_id %d, want %d (dense from 1)", s, i, c.AddedID, i+1)
			}
			if seen[c.Key] {
				t.Fatalf("shard %d: %s stored twice", s, c.Key)
			}
			seen[c.Key] = true
			if !want[s][c.Key] {
				t.Fatalf("shard %d: %s stored but never acknowledged", s, c.Key)
			}
		}
		if len(got) != len(want[s]) {
			t.Fatalf("shard %d: %d cells stored, want the %d acknowledged", s, len(got), len(want[s]))
		}
	}
}

// masterDB opens cluster c's initial master as the admin user.
func masterDB(t *testing.T, set *mariadb.ReplicatedSet, c int) *sql.DB {
	t.Helper()
	db, err := replication.Open(set.AdminDSN(c, 0))
	if err != nil {
		t.Fatal(err)
	}
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
	case err != nil:
		t.Fatalf("look %s up in shard %d: %v", k, shard, err)
	}
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

	// Cells before the move, some in every shard of partition 0.
	var before []cells.Cell
	for i := 0; i < 400; i++ {
		before = append(before, newCell(t, rows[0][i%16], "BASE", int64(i), fmt.Sprintf(`{"before":%d}`, i)))
	}
	for i := 0; i < len(before); i += 100 {
		putAsync(t, nodes[i/100%3], l, before[i:i+100])
	}

	// Consumer-group and index state of partition 0 (KV rows and index tables), changed
	// throughout the move too.
	group := ""
	for i := 0; group == "" || partitionIndex(spec, cluster.CoordinatorShard(group, spec.Shards)) != 0; i++ {
		group = fmt.Sprintf("billing%d", i)
	}
	ks := startKVLoad(t, nodes, spec, group)

	ld := startMoveLoad(t, nodes, rows, l)
	time.Sleep(time.Second)
	logger := slog.New(slog.NewTextHandler(clustertest.NewTestWriter(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := cluster.MoveAsyncPartition(ctx, cluster.AsyncMove{Datastore: spec, Partition: 0, To: "c2",
		Cluster: partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond, Logger: logger},
		Move:    partition.MoveConfig{DropOld: true, DropGrace: 2 * time.Second, DrainTimeout: time.Minute, Logger: logger}})
	if err != nil {
		t.Fatalf("MoveAsyncPartition: %v", err)
	}
	t.Logf("moved in %s: %+v", time.Since(start).Round(time.Millisecond), res)
	time.Sleep(time.Second) // writes after the move, through every node
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
	if n := ld.failures.Load(); n != 0 {
		t.Fatalf("%d writes failed during the move, want 0; first: %v", n, ld.firstFailure.Load())
	}
	if res.From != "c0" || res.To != "c2" || res.Epoch != 1 || !res.Drained || !res.Dropped || res.CopiedCells < int64(len(before)) {
		t.Fatalf("move result: got from %s to %s epoch %d drained %v dropped %v copied %d; want c0 to c2, epoch 1, drained, dropped, at least %d copied",
			res.From, res.To, res.Epoch, res.Drained, res.Dropped, res.CopiedCells, len(before))
	}

	// Every node serves partition 0 from c2, partition 1 from c1.
	for _, n := range nodes {
		for _, r := range n.Replicas() {
			want := map[int]string{0: "c2", 1: "c1"}[r.Partition]
			if r.Async == nil || r.Async.Cluster != want {
				t.Fatalf("node %s partition %d: got cluster %v, want %s", n.ID(), r.Partition, r.Async, want)
			}
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
	if r.Status != cells.StatusCreated || cellOn(t, c2, shard, cell.Key) != r.AddedID || cellOn(t, c0, shard, cell.Key) != 0 {
		t.Fatalf("write after the move: got %v added_id %d, on c2 %d, on c0 %d; want created, on c2 only",
			r.Status, r.AddedID, cellOn(t, c2, shard, cell.Key), cellOn(t, c0, shard, cell.Key))
	}
	if id := cellOn(t, c0, cells.ShardOf(before[0].RowKey, spec.Shards), before[0].Key); id != 0 {
		t.Fatalf("old copy on c0 after --drop-old: %s still there (added_id %d)", before[0].Key, id)
	}

	// The fence: a write to the old copy through a store fails with ErrMoved, before the batch
	// (ApplyShared's check) and inside the write transaction (Begin's locking read).
	st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: set.DSN(0, 0), Prefix: "sl"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old, err := st.Partition(ctx, storage.PartitionID{Datastore: ds, Partition: 0}, spec.Partitions[0].Shards())
	if err != nil {
		t.Fatal(err)
	}
	old.SetFence("c0")
	if _, err := old.Begin(ctx); !errors.Is(err, storage.ErrMoved) {
		t.Fatalf("Begin on the old copy: got %v, want ErrMoved", err)
	}
	f, err := fsm.New(ctx, fsm.Config{Store: old, StoreAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	data, err := fsm.EncodeCommand(fsm.Command{CreatedAt: time.Now().UTC(), Cells: []fsm.CommandCell{{Shard: shard, Key: cells.Key{RowKey: cell.RowKey, ColumnKey: "FENCED", RefKey: 1}, Body: cell.Body}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ApplyShared(ctx, [][]byte{data}); !errors.Is(err, storage.ErrMoved) {
		t.Fatalf("ApplyShared on the old copy: got %v, want ErrMoved", err)
	}
	// Without the fence the same write would have gone through: the fence is what stops it.
	old.SetFence("")
	tx, err := old.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin on the old copy without a fence: %v", err)
	}
	tx.Rollback()

	// A stale node: it never reads the placement, so it still writes to c0. Its write is
	// refused there, answered buffered, and the other nodes' reapers replay it into c2.
	var clusters []*partition.StorageCluster
	for _, sc := range spec.StorageClusters {
		sc, err := partition.OpenCluster(partition.ClusterConfig{Name: sc.Name, Members: sc.Members(), Prefix: "sl", ProbeInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		clusters = append(clusters, sc)
	}
	stale, err := partition.OpenAsync(partition.AsyncConfig{Datastore: ds, Partition: 0, Shards: spec.Partitions[0].Shards(),
		Primary: clusters[0], Buffers: clusters[1:], BufferCopies: 1, ReapInterval: time.Hour, MovedWait: 500 * time.Millisecond,
		Placement: stalePlacement{}})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	sc := newCell(t, rows[0][1], "STALE", 1, `{"stale":true}`)
	sshard := cells.ShardOf(sc.RowKey, spec.Shards)
	sres, err := stale.Put(ctx, []fsm.CommandCell{{Shard: sshard, Key: sc.Key, Body: sc.Body}})
	if err != nil || sres[0].Status != cells.StatusBuffered {
		t.Fatalf("write through the stale node: got %v, %v; want buffered (the old copy refuses it)", sres, err)
	}
	if _, err := stale.Read(ctx, partition.Strong, partition.ReadRequest{Groups: &partition.GroupsRead{}}); !errors.Is(err, partition.ErrUnavailable) || !errors.Is(err, storage.ErrMoved) {
		t.Fatalf("strong read through the stale node: got %v, want ErrUnavailable wrapping ErrMoved", err)
	}
	if id := cellOn(t, c0, sshard, sc.Key); id != 0 {
		t.Fatalf("the stale node's write reached the old copy (added_id %d)", id)
	}
	body, _ := sc.Body.JSON()
	l.add(acked{key: sc.Key, body: string(body)})
	requireAcked(t, nodes[2], l, 30*time.Second)
	if cellOn(t, c2, sshard, sc.Key) == 0 {
		t.Fatalf("the stale node's buffered write was not replayed into c2")
	}
	requireDenseLogs(t, spec, 0, nodes[0], l)

	t.Run("FenceOrdersWithSwitch", func(t *testing.T) { testFenceOrdersWithSwitch(t, set) })

	// Rerunning the move finds the partition there.
	again, err := cluster.MoveAsyncPartition(ctx, cluster.AsyncMove{Datastore: spec, Partition: 0, To: "c2",
		Cluster: partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond}, Move: partition.MoveConfig{Logger: logger}})
	if err != nil || !again.AlreadyThere || again.Epoch != 1 {
		t.Fatalf("rerun of the move: got %+v, %v; want already there at epoch 1", again, err)
	}

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
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		pl := storage.Placement{Datastore: ds, Partition: 1, Cluster: "c1", State: storage.PlacementMoving}
		if sc.Name == "c1" {
			pl = storage.Placement{Datastore: ds, Partition: 1, Cluster: "c0", Epoch: 1, State: storage.PlacementActive}
		}
		if ok, err := st.WritePlacement(ctx, pl); err != nil || !ok {
			t.Fatalf("placement on %s: %v, %v", sc.Name, ok, err)
		}
	}
	var during []cells.Cell
	for i := 0; i < 3; i++ {
		during = append(during, newCell(t, rows[1][i], "INTERRUPTED", 1, fmt.Sprintf(`{"i":%d}`, i)))
	}
	for _, r := range putAsync(t, nodes[1], l, during) {
		if r.Status != cells.StatusBuffered {
			t.Fatalf("write to partition 1 while both copies are fenced: got %v, want buffered", r.Status)
		}
	}
	res, err := cluster.MoveAsyncPartition(ctx, cluster.AsyncMove{Datastore: spec, Partition: 1, To: "c0",
		Cluster: partition.ClusterConfig{ProbeInterval: 200 * time.Millisecond},
		Move:    partition.MoveConfig{DrainTimeout: time.Minute, Logger: logger}})
	if err != nil || !res.Resumed || res.From != "c1" || res.Epoch != 1 || res.FinalCells == 0 || !res.Drained {
		t.Fatalf("rerun of the interrupted move: got %+v, %v; want resumed from c1 at epoch 1, cells copied, drained", res, err)
	}
	t.Logf("resumed: %d cells copied from the fenced copy in %s", res.FinalCells, res.Took.Round(time.Millisecond))
	for _, n := range nodes {
		requireAcked(t, n, l, 30*time.Second)
	}
	requireDenseLogs(t, spec, 1, nodes[2], l)
	waitUntil(t, 10*time.Second, "every node serves partition 1 from c0", func() bool {
		for _, n := range nodes {
			for _, r := range n.Replicas() {
				if r.Partition == 1 && r.Async.Cluster != "c0" {
					return false
				}
			}
		}
		return true
	})
}

// testFenceOrdersWithSwitch shows the fence inside the write transaction: a transaction that
// passed the check holds the placement row, so a switch (WritePlacement naming another
// cluster) waits for it to end; once the switch is written, the next transaction is refused.
// A writer that lost the partition's named lock can therefore never commit after the switch.
func testFenceOrdersWithSwitch(t *testing.T, set *mariadb.ReplicatedSet) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: set.DSN(1, 0), Prefix: "sl"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const scratch = "fencetest"
	if ok, err := st.WritePlacement(ctx, storage.Placement{Datastore: scratch, Cluster: "c1", State: storage.PlacementActive}); err != nil || !ok {
		t.Fatalf("WritePlacement epoch 0: got %v, %v; want written", ok, err)
	}
	ps, err := st.Partition(ctx, storage.PartitionID{Datastore: scratch}, storage.ShardRange{First: 0, Last: 0})
	if err != nil {
		t.Fatal(err)
	}
	ps.SetFence("c1")
	tx, err := ps.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin while the placement names c1: %v", err)
	}
	switched := make(chan error, 1)
	go func() {
		_, err := st.WritePlacement(ctx, storage.Placement{Datastore: scratch, Cluster: "c2", Epoch: 1, State: storage.PlacementActive})
		switched <- err
	}()
	select {
	case err := <-switched:
		t.Fatalf("the switch went through while a fenced write transaction was open (%v); want it to wait", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := tx.SetApplied(ctx, storage.AppliedState{Index: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit of the transaction that began before the switch: %v", err)
	}
	if err := <-switched; err != nil {
		t.Fatalf("the switch after the transaction: %v", err)
	}
	if _, err := ps.Begin(ctx); !errors.Is(err, storage.ErrMoved) {
		t.Fatalf("Begin after the switch: got %v, want ErrMoved", err)
	}
	// Backwards writes of the placement are ignored.
	if ok, err := st.WritePlacement(ctx, storage.Placement{Datastore: scratch, Cluster: "c1", State: storage.PlacementActive}); err != nil || ok {
		t.Fatalf("WritePlacement of an older epoch: got %v, %v; want not written", ok, err)
	}
}
