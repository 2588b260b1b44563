package catalog

import (
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/cells"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized catalog tests (0: from the clock)")

var now = time.Date(2026, 11, 28, 12, 0, 0, 123456789, time.UTC)

func mustApply(t *testing.T, c *Catalog, cmd Command) Result {
	t.Helper()
	res, err := c.Apply(cmd)
	require.NoError(t, err, "Apply(%+v)", cmd)
	require.NoError(t, c.Check(), "Check after %s", cmd.Op)
	return res
}

func trips(t *testing.T) *Catalog {
	t.Helper()
	c := New()
	mustApply(t, c, Command{Op: OpCreate, Now: now, Create: Spec{Name: "trips", Mode: ModeRaft, Shards: 64, PartitionCount: 4,
		Replicas: []string{"n1", "n2", "n3"}}})
	return c
}

// ranges returns the shard ranges of d's partitions, by ID.
func ranges(d *Datastore) map[int]cells.ShardRange {
	out := map[int]cells.ShardRange{}
	for _, p := range d.Partitions {
		out[p.ID] = p.Shards
	}
	return out
}

func TestCreate(t *testing.T) {
	c := trips(t)
	d := c.Datastores["trips"]
	require.NotNil(t, d)
	assert.Equal(t, uint64(1), c.Generation, "generation after one create")
	assert.Equal(t, map[int]cells.ShardRange{0: {First: 0, Last: 15}, 1: {First: 16, Last: 31}, 2: {First: 32, Last: 47}, 3: {First: 48, Last: 63}}, ranges(d))
	assert.Equal(t, 4, d.NextID)
	assert.Equal(t, now.Truncate(time.Microsecond), d.CreatedAt, "created at, to the microsecond")
	for _, p := range d.Partitions {
		assert.Equal(t, []string{"n1", "n2", "n3"}, p.Replicas, "partition %d replicas", p.ID)
		assert.Equal(t, -1, p.Parent, "partition %d parent", p.ID)
		assert.Equal(t, uint64(1), p.Generation, "partition %d generation", p.ID)
	}
	assert.Equal(t, 2, d.PartitionOf(40).ID, "partition of shard 40")
	assert.Nil(t, d.PartitionOf(64), "partition of shard 64 of 64")
	assert.Nil(t, d.PartitionOf(-1), "partition of shard -1")

	_, err := c.Apply(Command{Op: OpCreate, Create: Spec{Name: "trips", Mode: ModeRaft, Shards: 8, Replicas: []string{"n1"}}})
	assert.ErrorIs(t, err, ErrExists, "a second create of trips")

	async := mustApply(t, c, Command{Op: OpCreate, Create: Spec{Name: "rides", Mode: ModeAsync, Shards: 6, PartitionCount: 3, Clusters: []string{"c1", "c2"}}})
	assert.Equal(t, []string{"c1", "c2", "c1"}, []string{async.Partitions[0].Cluster, async.Partitions[1].Cluster, async.Partitions[2].Cluster}, "async clusters, round robin")

	listed := mustApply(t, c, Command{Op: OpCreate, Create: Spec{Name: "listed", Mode: ModeRaft, Shards: 10, Partitions: []Partition{
		{Shards: cells.ShardRange{First: 0, Last: 2}, Replicas: []string{"a"}}, {Shards: cells.ShardRange{First: 3, Last: 9}, Replicas: []string{"b", "c"}}}}})
	assert.Equal(t, []int{0, 1}, []int{listed.Partitions[0].ID, listed.Partitions[1].ID}, "listed partitions get IDs in order")
	assert.Equal(t, []string{"listed", "rides", "trips"}, c.Names())
}

// Every malformed create is refused with ErrBadCommand and changes nothing.
func TestCreateRefused(t *testing.T) {
	r := []string{"n1"}
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"bad name", Spec{Name: "Trips", Mode: ModeRaft, Shards: 4, Replicas: r}},
		{"empty name", Spec{Name: "", Mode: ModeRaft, Shards: 4, Replicas: r}},
		{"bad mode", Spec{Name: "t", Mode: "paxos", Shards: 4, Replicas: r}},
		{"no shard", Spec{Name: "t", Mode: ModeRaft, Shards: 0, Replicas: r}},
		{"too many shards", Spec{Name: "t", Mode: ModeRaft, Shards: cells.MaxShards + 1, Replicas: r}},
		{"more partitions than shards", Spec{Name: "t", Mode: ModeRaft, Shards: 4, PartitionCount: 5, Replicas: r}},
		{"negative partitions", Spec{Name: "t", Mode: ModeRaft, Shards: 4, PartitionCount: -1, Replicas: r}},
		{"no replica", Spec{Name: "t", Mode: ModeRaft, Shards: 4}},
		{"replica twice", Spec{Name: "t", Mode: ModeRaft, Shards: 4, Replicas: []string{"n1", "n1"}}},
		{"too many replicas", Spec{Name: "t", Mode: ModeRaft, Shards: 4, Replicas: []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}}},
		{"async without clusters", Spec{Name: "t", Mode: ModeAsync, Shards: 4}},
		{"async with replicas", Spec{Name: "t", Mode: ModeAsync, Shards: 4, Partitions: []Partition{{Shards: cells.ShardRange{First: 0, Last: 3}, Cluster: "c", Replicas: r}}}},
		{"gap", Spec{Name: "t", Mode: ModeRaft, Shards: 4, Partitions: []Partition{
			{Shards: cells.ShardRange{First: 0, Last: 1}, Replicas: r}, {Shards: cells.ShardRange{First: 3, Last: 3}, Replicas: r}}}},
		{"short", Spec{Name: "t", Mode: ModeRaft, Shards: 4, Partitions: []Partition{{Shards: cells.ShardRange{First: 0, Last: 2}, Replicas: r}}}},
		{"overlap", Spec{Name: "t", Mode: ModeRaft, Shards: 4, Partitions: []Partition{
			{Shards: cells.ShardRange{First: 0, Last: 2}, Replicas: r}, {Shards: cells.ShardRange{First: 2, Last: 3}, Replicas: r}}}},
	} {
		c := New()
		_, err := c.Apply(Command{Op: OpCreate, Create: tc.spec})
		assert.ErrorIs(t, err, ErrBadCommand, tc.name)
		assert.Empty(t, c.Datastores, "%s: nothing created", tc.name)
		assert.Zero(t, c.Generation, "%s: generation unchanged", tc.name)
	}
}

func TestSplitAndMerge(t *testing.T) {
	c := trips(t)
	res := mustApply(t, c, Command{Op: OpSplit, Datastore: "trips", Partition: 1, AtShard: 20, Now: now})
	require.Len(t, res.Partitions, 2)
	left, right := res.Partitions[0], res.Partitions[1]
	assert.Equal(t, uint64(2), res.Generation)
	assert.Equal(t, Partition{ID: 1, Shards: cells.ShardRange{First: 16, Last: 19}, Origin: cells.ShardRange{First: 16, Last: 31},
		Replicas: []string{"n1", "n2", "n3"}, Generation: 2, Parent: -1}, left, "the left half keeps its origin")
	assert.Equal(t, Partition{ID: 4, Shards: cells.ShardRange{First: 20, Last: 31}, Origin: cells.ShardRange{First: 20, Last: 31},
		Replicas: []string{"n1", "n2", "n3"}, Generation: 2, Parent: 1}, right, "the right half's origin is its range")
	d := c.Datastores["trips"]
	assert.Equal(t, []int{0, 1, 4, 2, 3}, ids(d), "partitions in shard order")
	assert.Equal(t, 4, d.PartitionOf(20).ID)
	assert.Equal(t, 1, d.PartitionOf(19).ID)
	assert.Equal(t, uint64(1), d.Partition(0).Generation, "an untouched partition keeps its generation")

	// The split's bounds: each half keeps a shard.
	for _, at := range []int{16, 15, 32, 64} {
		_, err := c.Apply(Command{Op: OpSplit, Datastore: "trips", Partition: 4, AtShard: at})
		assert.ErrorIs(t, err, ErrBadCommand, "split partition 4 (20..31) at %d", at)
	}
	// A decision taken on an older view is refused.
	_, err := c.Apply(Command{Op: OpSplit, Datastore: "trips", Partition: 4, AtShard: 25, ExpectGeneration: 1})
	assert.ErrorIs(t, err, ErrStale, "split of a partition changed after the expected generation")
	mustApply(t, c, Command{Op: OpSplit, Datastore: "trips", Partition: 4, AtShard: 25, ExpectGeneration: 2})
	assert.Equal(t, []int{0, 1, 4, 5, 2, 3}, ids(d))

	// Merges: neighbours only, same replicas only.
	_, err = c.Apply(Command{Op: OpMerge, Datastore: "trips", Partition: 1, Right: 5})
	assert.ErrorIs(t, err, ErrBadCommand, "merge of partitions that are not neighbours")
	_, err = c.Apply(Command{Op: OpMerge, Datastore: "trips", Partition: 4, Right: 1})
	assert.ErrorIs(t, err, ErrBadCommand, "merge with the left neighbour as the right")
	mustApply(t, c, Command{Op: OpSetReplicas, Datastore: "trips", Partition: 5, Replicas: []string{"n1", "n2", "n4"}})
	_, err = c.Apply(Command{Op: OpMerge, Datastore: "trips", Partition: 4, Right: 5})
	assert.ErrorIs(t, err, ErrBadCommand, "merge of partitions on different replicas")
	mustApply(t, c, Command{Op: OpSetReplicas, Datastore: "trips", Partition: 5, Replicas: []string{"n3", "n2", "n1"}})
	gen := c.Generation
	res = mustApply(t, c, Command{Op: OpMerge, Datastore: "trips", Partition: 4, Right: 5, ExpectGeneration: gen, Now: now})
	assert.Equal(t, cells.ShardRange{First: 20, Last: 31}, res.Partitions[0].Shards, "merged range")
	assert.Equal(t, []int{0, 1, 4, 2, 3}, ids(d))
	assert.Nil(t, d.Partition(5), "the right partition is gone")
	again, err := c.Apply(Command{Op: OpMerge, Datastore: "trips", Partition: 4, Right: 5, ExpectGeneration: gen, Now: now})
	require.NoError(t, err, "the same merge again")
	assert.Equal(t, res, again, "the same merge again answers the merged partition")
	assert.Equal(t, gen+1, c.Generation, "and changes nothing")
	_, err = c.Apply(Command{Op: OpMerge, Datastore: "trips", Partition: 1, Right: 5, ExpectGeneration: gen})
	assert.ErrorIs(t, err, ErrNotFound, "a merge of the gone partition into another")
	_, err = c.Apply(Command{Op: OpSplit, Datastore: "trips", Partition: 5, AtShard: 26})
	assert.ErrorIs(t, err, ErrNotFound, "split of a merged-away partition")
	// IDs are never reused.
	res = mustApply(t, c, Command{Op: OpSplit, Datastore: "trips", Partition: 4, AtShard: 30})
	assert.Equal(t, 6, res.Partitions[1].ID, "the next split's new ID")

	require.Len(t, d.History, 4, "history: three splits and a merge")
	assert.Equal(t, Event{Op: OpMerge, Generation: gen + 1, At: now.Truncate(time.Microsecond), Left: 4, Right: 5, AtShard: 20}, d.History[2])
}

func TestDrop(t *testing.T) {
	c := trips(t)
	_, err := c.Apply(Command{Op: OpDrop, Datastore: "trips", Confirm: "trip"})
	assert.ErrorIs(t, err, ErrBadCommand, "drop without the name repeated")
	require.NotNil(t, c.Datastores["trips"])
	_, err = c.Apply(Command{Op: OpDrop, Datastore: "nope", Confirm: "nope"})
	assert.ErrorIs(t, err, ErrNotFound)
	mustApply(t, c, Command{Op: OpDrop, Datastore: "trips", Confirm: "trips"})
	assert.Empty(t, c.Datastores)
	assert.Equal(t, uint64(2), c.Generation)
	_, err = c.Apply(Command{Op: "rename", Datastore: "trips"})
	assert.ErrorIs(t, err, ErrBadCommand, "an unknown op")
}

func ids(d *Datastore) []int {
	var out []int
	for _, p := range d.Partitions {
		out = append(out, p.ID)
	}
	return out
}

// Random splits, merges and replica changes keep every invariant: the partitions cover the
// shards without gap or overlap, each shard maps to exactly one partition, IDs are never reused,
// the generation rises with every accepted command and a refused one changes nothing (bytes
// compared). The encoding round-trips, and replaying the commands gives the same bytes.
func TestRandomCommands(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 7))
	c := trips(t)
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	var applied []Command
	used := map[int]bool{0: true, 1: true, 2: true, 3: true}
	for i := range 2000 {
		d := c.Datastores["trips"]
		p := d.Partitions[r.IntN(len(d.Partitions))]
		var cmd Command
		switch r.IntN(5) {
		case 4:
			cmd = Command{Op: OpAddLearner, Datastore: "trips", Partition: p.ID, Learner: nodes[r.IntN(len(nodes))]}
			if r.IntN(3) == 0 {
				cmd.Op = OpRemoveLearner
			}
		case 0, 1:
			cmd = Command{Op: OpSplit, Datastore: "trips", Partition: p.ID, AtShard: p.Shards.First + r.IntN(p.Shards.Len()+1)}
		case 2:
			cmd = Command{Op: OpMerge, Datastore: "trips", Partition: p.ID, Right: r.IntN(d.NextID + 1)}
		default:
			rs := slices.Clone(nodes)
			r.Shuffle(len(rs), func(a, b int) { rs[a], rs[b] = rs[b], rs[a] })
			cmd = Command{Op: OpSetReplicas, Datastore: "trips", Partition: p.ID, Replicas: rs[:3]}
		}
		if r.IntN(5) == 0 {
			cmd.ExpectGeneration = c.Generation - uint64(r.IntN(3))
		}
		cmd.Now = now.Add(time.Duration(i) * time.Second)
		before, err := Encode(c)
		require.NoError(t, err)
		gen := c.Generation
		res, err := c.Apply(cmd)
		if err != nil {
			after, eerr := Encode(c)
			require.NoError(t, eerr)
			require.Equal(t, before, after, "seed %d step %d: a refused %s (%v) changed the catalog", seed, i, cmd.Op, err)
			continue
		}
		if cmd.Op == OpMerge && c.Generation == gen {
			// The same merge again, after it was applied: answered as done, nothing changed.
			after, eerr := Encode(c)
			require.NoError(t, eerr)
			require.Equal(t, before, after, "seed %d step %d: a repeated merge changed the catalog", seed, i)
			require.Equal(t, cmd.Partition, res.Partitions[0].ID, "seed %d step %d: the repeated merge's answer", seed, i)
			continue
		}
		applied = append(applied, cmd)
		require.Equal(t, gen+1, c.Generation, "seed %d step %d: generation after %s", seed, i, cmd.Op)
		require.NoError(t, c.Check(), "seed %d step %d: after %s", seed, i, cmd.Op)
		if cmd.Op == OpSplit {
			id := res.Partitions[1].ID
			require.False(t, used[id], "seed %d step %d: split reused ID %d", seed, i, id)
			used[id] = true
		}
		d = c.Datastores["trips"]
		for s := range d.Shards {
			n := 0
			for _, q := range d.Partitions {
				if q.Shards.Contains(s) {
					n++
				}
			}
			require.Equal(t, 1, n, "seed %d step %d: shard %d in %d partitions", seed, i, s, n)
			require.True(t, d.PartitionOf(s).Shards.Contains(s), "seed %d step %d: PartitionOf(%d)", seed, i, s)
		}
	}
	require.NotEmpty(t, applied, "seed %d: some commands were accepted", seed)

	b, err := Encode(c)
	require.NoError(t, err)
	back, err := Decode(b)
	require.NoError(t, err, "Decode")
	again, err := Encode(back)
	require.NoError(t, err)
	assert.Equal(t, b, again, "seed %d: the encoding round-trips", seed)

	replay := trips(t)
	for _, cmd := range applied {
		_, err := replay.Apply(cmd)
		require.NoError(t, err, "seed %d: replaying %+v", seed, cmd)
	}
	rb, err := Encode(replay)
	require.NoError(t, err)
	assert.Equal(t, b, rb, "seed %d: a replica applying the same commands holds the same bytes", seed)

	clone := c.Clone()
	_, err = clone.Apply(Command{Op: OpDrop, Datastore: "trips", Confirm: "trips"})
	require.NoError(t, err)
	assert.NotNil(t, c.Datastores["trips"], "a change to a clone leaves the original")
}

// Decode refuses bytes that are not a catalog, and catalogs that break an invariant.
func TestDecodeRefuses(t *testing.T) {
	c := trips(t)
	b, err := Encode(c)
	require.NoError(t, err)
	_, err = Decode(b[:len(b)-3])
	assert.ErrorIs(t, err, ErrCorrupt, "truncated")
	_, err = Decode(append(slices.Clone(b), 0))
	assert.ErrorIs(t, err, ErrCorrupt, "trailing byte")

	broken := c.Clone()
	broken.Datastores["trips"].Partitions[1].Shards.First = 17 // a gap at shard 16
	bb, err := Encode(broken)
	require.NoError(t, err)
	_, err = Decode(bb)
	assert.ErrorIs(t, err, ErrCorrupt, "a gap between partitions")

	empty, err := Decode(nil)
	require.NoError(t, err)
	assert.Empty(t, empty.Datastores, "no bytes: an empty catalog")
}

// An import creates a topology's datastores at generation 1 with their partition IDs and
// Created 0, into an empty catalog only, all or none; a later create gets Created > 0.
func TestImport(t *testing.T) {
	specs := []Spec{
		{Name: "trips", Mode: ModeRaft, Shards: 8, Partitions: []Partition{
			{ID: 5, Shards: cells.ShardRange{First: 0, Last: 3}, Replicas: []string{"n1"}},
			{ID: 2, Shards: cells.ShardRange{First: 4, Last: 7}, Replicas: []string{"n2"}}}},
		{Name: "rides", Mode: ModeAsync, Shards: 4, Partitions: []Partition{{ID: 0, Shards: cells.ShardRange{First: 0, Last: 3}, Cluster: "c0"}}},
	}
	c := New()
	res := mustApply(t, c, Command{Op: OpImport, Now: now, Import: specs})
	assert.Equal(t, uint64(1), res.Generation)
	assert.Equal(t, uint64(1), c.Generation)
	require.Len(t, res.Partitions, 3, "every imported partition in the result")
	d := c.Datastores["trips"]
	require.NotNil(t, d)
	assert.Equal(t, []int{5, 2}, []int{d.Partitions[0].ID, d.Partitions[1].ID}, "IDs kept")
	assert.Equal(t, 6, d.NextID, "next ID above the largest kept")
	assert.Zero(t, d.Created, "imported: Created 0")
	assert.Equal(t, uint64(1), d.Partitions[1].Generation)

	_, err := c.Apply(Command{Op: OpImport, Now: now, Import: specs})
	assert.ErrorIs(t, err, ErrExists, "a second import")
	created := mustApply(t, c, Command{Op: OpCreate, Now: now, Create: Spec{Name: "users", Mode: ModeRaft, Shards: 2, Replicas: []string{"n1"}}})
	assert.Equal(t, created.Generation, c.Datastores["users"].Created, "a create records its generation")

	b, err := Encode(c)
	require.NoError(t, err)
	back, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, c, back, "Created survives the encoding")

	empty := New()
	bad := append(slices.Clone(specs), Spec{Name: "x", Mode: ModeRaft, Shards: 2, Partitions: []Partition{
		{ID: 1, Shards: cells.ShardRange{First: 0, Last: 0}, Replicas: []string{"n1"}},
		{ID: 1, Shards: cells.ShardRange{First: 1, Last: 1}, Replicas: []string{"n1"}}}})
	_, err = empty.Apply(Command{Op: OpImport, Now: now, Import: bad})
	assert.ErrorIs(t, err, ErrBadCommand, "an ID given twice")
	assert.Zero(t, empty.Generation, "a refused import changes nothing")
	assert.Empty(t, empty.Datastores, "a refused import changes nothing")
	_, err = empty.Apply(Command{Op: OpImport, Now: now})
	assert.ErrorIs(t, err, ErrBadCommand, "an import of nothing")
}

// An automatic split or merge is recorded as such, survives encoding, and a manual one's
// encoding has no trace of the flag (catalogs encoded before it existed decode the same).
func TestAutoEvents(t *testing.T) {
	c := trips(t)
	mustApply(t, c, Command{Op: OpSplit, Datastore: "trips", Partition: 1, AtShard: 20, Now: now})
	manual, err := Encode(c)
	require.NoError(t, err)
	var raw struct {
		D []struct {
			H []map[string]any `msgpack:"h"`
		} `msgpack:"d"`
	}
	require.NoError(t, msgpack.Unmarshal(manual, &raw))
	require.Len(t, raw.D, 1)
	require.Len(t, raw.D[0].H, 1)
	assert.NotContains(t, raw.D[0].H[0], "a", "a manual split's event is encoded without the auto key: %v", raw.D[0].H[0])
	mustApply(t, c, Command{Op: OpSplit, Datastore: "trips", Partition: 2, AtShard: 40, Now: now, Auto: true})
	mustApply(t, c, Command{Op: OpMerge, Datastore: "trips", Partition: 2, Right: 5, Now: now, Auto: true})
	h := c.Datastores["trips"].History
	require.Len(t, h, 3)
	assert.Equal(t, []bool{false, true, true}, []bool{h[0].Auto, h[1].Auto, h[2].Auto}, "auto flags of a manual split, an automatic split and an automatic merge")
	b, err := Encode(c)
	require.NoError(t, err)
	back, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, h, back.Datastores["trips"].History, "history after encoding")
}

// An async partition's split may place its right half on another storage cluster (the one its
// placement records name) and names the right half's id it prepared; a raft partition refuses
// a cluster, and a stale id is refused. An async merge names the cluster both partitions are
// on now, whatever clusters the catalog lists.
func TestSplitAsyncCluster(t *testing.T) {
	c := New()
	res := mustApply(t, c, Command{Op: OpCreate, Now: now, Create: Spec{Name: "rides", Mode: ModeAsync, Shards: 16, PartitionCount: 2, Clusters: []string{"c0", "c1"}}})
	require.Len(t, res.Partitions, 2, "partitions created")
	_, err := c.Apply(Command{Op: OpSplit, Datastore: "rides", Partition: 0, AtShard: 4, Right: 7, Cluster: "c2"})
	require.ErrorIs(t, err, ErrStale, "a right half prepared as partition 7, the next id being 2")
	res = mustApply(t, c, Command{Op: OpSplit, Datastore: "rides", Partition: 0, AtShard: 4, Right: 2, Cluster: "c2", Now: now})
	assert.Equal(t, "c0", res.Partitions[0].Cluster, "the left half's cluster")
	assert.Equal(t, Partition{ID: 2, Shards: cells.ShardRange{First: 4, Last: 7}, Origin: cells.ShardRange{First: 4, Last: 7},
		Cluster: "c2", Generation: res.Generation, Parent: 0}, res.Partitions[1], "the right half on the cluster named")
	require.NoError(t, c.Check(), "the catalog's invariants")
	res = mustApply(t, c, Command{Op: OpSplit, Datastore: "rides", Partition: 1, AtShard: 12, Now: now})
	assert.Equal(t, "c1", res.Partitions[1].Cluster, "without a cluster: the parent's")

	r := trips(t)
	_, err = r.Apply(Command{Op: OpSplit, Datastore: "trips", Partition: 1, AtShard: 20, Cluster: "c2"})
	require.ErrorIs(t, err, ErrBadCommand, "a raft partition's split naming a storage cluster")

	// Merges: partitions the catalog places on c0 and c2 merge when the command names the
	// cluster both are on now (their placement records'), which the merged one gets.
	_, err = c.Apply(Command{Op: OpMerge, Datastore: "rides", Partition: 0, Right: 2})
	require.ErrorIs(t, err, ErrBadCommand, "a merge of partitions the catalog places on two clusters, naming none")
	res = mustApply(t, c, Command{Op: OpMerge, Datastore: "rides", Partition: 0, Right: 2, Cluster: "c0", Now: now})
	assert.Equal(t, Partition{ID: 0, Shards: cells.ShardRange{First: 0, Last: 7}, Origin: res.Partitions[0].Origin, Cluster: "c0",
		Generation: res.Generation, Parent: -1}, res.Partitions[0], "the merged partition")
	require.NoError(t, c.Check(), "the catalog's invariants")
	assert.True(t, c.Datastores["rides"].Merged(0, 2), "the merge in the history")
	_, err = r.Apply(Command{Op: OpMerge, Datastore: "trips", Partition: 0, Right: 1, Cluster: "c0"})
	require.ErrorIs(t, err, ErrBadCommand, "a raft partitions' merge naming a storage cluster")
}

// The catalog records its own group's voters: set-voters replaces them, refuses a list that
// repeats an id, is empty or too long, and the voters survive Encode and Decode.
func TestSetVoters(t *testing.T) {
	c := trips(t)
	gen := c.Generation
	for _, bad := range [][]string{nil, {"n1", "n1"}, {""}, {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}} {
		_, err := c.Apply(Command{Op: OpSetVoters, Voters: bad})
		require.ErrorIs(t, err, ErrBadCommand, "voters %q", bad)
	}
	res := mustApply(t, c, Command{Op: OpSetVoters, Voters: []string{"n2", "n3", "n4"}})
	assert.Equal(t, gen+1, res.Generation, "generation after set-voters")
	assert.Equal(t, []string{"n2", "n3", "n4"}, c.Voters)
	b, err := Encode(c)
	require.NoError(t, err)
	back, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, c.Voters, back.Voters, "voters after Encode and Decode")
	b2, err := Encode(back)
	require.NoError(t, err)
	assert.Equal(t, b, b2, "the same bytes again")
	empty, err := Encode(trips(t))
	require.NoError(t, err)
	back, err = Decode(empty)
	require.NoError(t, err)
	assert.Empty(t, back.Voters, "a catalog whose voters never moved")
}

// TestSettings: OpSettings replaces a datastore's settings and raises the generation, leaving
// its partitions and their generations as they were; settings too large, or of an unknown
// datastore, are refused and change nothing.
func TestSettings(t *testing.T) {
	c := trips(t)
	before := slices.Clone(c.Datastores["trips"].Partitions)
	gen := c.Generation
	res := mustApply(t, c, Command{Op: OpSettings, Datastore: "trips", Settings: []byte(`{"LeaderZone":"b"}`)})
	assert.Equal(t, gen+1, res.Generation, "generation after settings")
	assert.Equal(t, []byte(`{"LeaderZone":"b"}`), c.Datastores["trips"].Settings)
	assert.Equal(t, before, c.Datastores["trips"].Partitions, "partitions unchanged")

	_, err := c.Apply(Command{Op: OpSettings, Datastore: "nope", Settings: []byte(`{}`)})
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = c.Apply(Command{Op: OpSettings, Datastore: "trips", Settings: make([]byte, MaxSettingsBytes+1)})
	assert.ErrorIs(t, err, ErrBadCommand)
	assert.Equal(t, gen+1, c.Generation, "refused commands change nothing")
	assert.Equal(t, []byte(`{"LeaderZone":"b"}`), c.Datastores["trips"].Settings)
}
