package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// putRecords stores n new request records created at at in p, in one committed transaction
// (with upsert, IDs may be stored already: their records are replaced), and returns them.
func putRecords(t *testing.T, p *PartitionStore, ids []uuid.UUID, at time.Time, tag string) []RequestRecord {
	ctx := context.Background()
	rs := make([]RequestRecord, len(ids))
	for i, id := range ids {
		rs[i] = RequestRecord{ID: id, CreatedAt: at.UTC().Truncate(time.Microsecond), Record: []byte(fmt.Sprintf("%s %d", tag, i))}
	}
	tx, err := p.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutRequests(ctx, rs))
	require.NoError(t, tx.Commit())
	return rs
}

func newIDs(n int) []uuid.UUID {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	return ids
}

// heldRequests returns every request record of p, in ID order, from a snapshot.
func heldRequests(t *testing.T, p *PartitionStore) []RequestRecord {
	snap, err := p.BeginSnapshot(context.Background())
	require.NoError(t, err)
	defer snap.Close()
	var out []RequestRecord
	require.NoError(t, snap.ScanRequests(context.Background(), func(r RequestRecord) error { out = append(out, r); return nil }))
	return out
}

// timeOrdered counts the entries of p's request records in time order, and those among them
// that name no record or not its created_at (stale): a stale entry left by a copy would have a
// prune delete the record of a newer write under its ID.
func timeOrdered(t *testing.T, p *PartitionStore) (entries, stale int) {
	pp := p.pb
	pre := pp.key(tagRequestTime, 0)
	it, err := pp.db.NewIter(nil)
	require.NoError(t, err)
	defer it.Close()
	for ok := it.SeekGE(pre); ok && bytes.HasPrefix(it.Key(), pre); ok = it.Next() {
		k := it.Key()
		require.Len(t, k, len(pre)+24)
		id, _ := uuid.FromBytes(k[len(pre)+8:])
		v, ok, err := getCopy(pp.db, pp.requestKey(id))
		require.NoError(t, err)
		if !ok || !bytes.Equal(k[len(pre):len(pre)+8], appendI64(nil, int64(binary.BigEndian.Uint64(v)))) {
			stale++
		}
		entries++
	}
	return entries, stale
}

// generationKeys counts the keys under generation gen.
func generationKeys(t *testing.T, s *Store, gen uint64) int {
	it, err := s.pebble.db.NewIter(nil)
	require.NoError(t, err)
	defer it.Close()
	n := 0
	for ok := it.SeekGE(dataPrefix(gen)); ok && bytes.Compare(it.Key(), dataPrefix(gen+1)) < 0; ok = it.Next() {
		n++
	}
	return n
}

// A split on pebble that starts from a pre-copy of the parent's request records
// (PrepareSplit) made while the parent kept writing them: records stored after the pre-copy,
// a record replaced under its ID (an expired one whose ID came back) and records pruned
// reach the right half as the split's snapshot holds them, with the time order matching. A
// pre-copy voided by a merge into the parent, or outdated by a restore, is not used; one not
// used within its keep is dropped with its generation. Both with the records written as one
// table and cut into parts written at once (ingestCopy).
func TestPrecopyPebble(t *testing.T) {
	for _, c := range []struct {
		name  string
		split uint64
	}{{"one table", 1 << 62}, {"in parts", 0}} {
		t.Run(c.name, func(t *testing.T) {
			defer func(b uint64) { copySplitBytes = b }(copySplitBytes)
			copySplitBytes = c.split
			testPrecopyPebble(t)
		})
	}
}

func testPrecopyPebble(t *testing.T) {
	ctx := context.Background()
	defer func(keep time.Duration) { precopyKeep = keep }(precopyKeep)
	precopyKeep = 5 * time.Minute
	env := pebbleEnv(t)
	s := env.open(t)
	parent := openPartition(t, s, "pre", 0, 0, 7)
	added := map[int]int64{}
	cellsBefore := fillShards(t, parent, 0, 500, added)
	now := time.Now()
	old := putRecords(t, parent, newIDs(300), now.Add(-20*time.Minute), "old")
	recent := putRecords(t, parent, newIDs(300), now.Add(-time.Minute), "recent")
	require.NoError(t, s.Flush())

	require.NoError(t, parent.PrepareSplit(ctx, 1), "the pre-copy for partition 1")
	require.NoError(t, parent.PrepareSplit(ctx, 1), "asked again: the same pre-copy")
	// After the pre-copy: new records, one replaced under its ID, the old ones pruned.
	putRecords(t, parent, newIDs(200), now, "new")
	putRecords(t, parent, []uuid.UUID{recent[7].ID, old[0].ID}, now.Add(time.Second), "again")
	tx, err := parent.Begin(ctx)
	require.NoError(t, err)
	pruned, err := tx.PruneRequests(ctx, now.Add(-10*time.Minute), 1000)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.EqualValues(t, 299, pruned, "the old records, less the one stored again")
	want := heldRequests(t, parent)
	require.Len(t, want, 300+200+1)

	right := openPartition(t, s, "pre", 1, 4, 7)
	used := s.precopiesUsed.Load()
	split(t, parent, right, cells.ShardRange{First: 4, Last: 7}, AppliedState{Index: 9, Term: 1})
	assert.Equal(t, used+1, s.precopiesUsed.Load(), "the split started from the pre-copy")
	assert.Equal(t, want, heldRequests(t, right), "the right half's request records: the split's snapshot's")
	entries, stale := timeOrdered(t, right)
	assert.Equal(t, len(want), entries, "the right half's time order: one entry per record")
	assert.Zero(t, stale, "entries of the right half's time order that name no record or not its time")
	assert.Equal(t, keysOnly(cellsBefore, cells.ShardRange{First: 4, Last: 7}), heldCells(t, right), "the right half's cells")

	// Restarted, the right half holds the same.
	s = env.open(t)
	parent, right = openPartition(t, s, "pre", 0, 0, 3), openPartition(t, s, "pre", 1, 4, 7)
	assert.Equal(t, want, heldRequests(t, right), "the right half's request records after a restart")

	// A merge into the parent voids a pre-copy: the absorbed records are not noted by ID.
	require.NoError(t, parent.PrepareSplit(ctx, 2))
	snap, err := right.BeginSnapshot(ctx)
	require.NoError(t, err)
	tx, err = parent.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.AbsorbShards(ctx, snap, cells.ShardRange{First: 4, Last: 7}, nil, nil))
	require.NoError(t, tx.Commit())
	require.NoError(t, snap.Close())
	parent.SetShards(cells.ShardRange{First: 0, Last: 7})
	reset(t, right)
	assert.Nil(t, parent.takePrecopy(ctx, 2), "a pre-copy voided by a merge")

	// A restore of the parent after the pre-copy (its state in a new generation): the split
	// copies the records the restore left (none), not the pre-copy's.
	require.NoError(t, parent.PrepareSplit(ctx, 3))
	reset(t, parent)
	right3 := openPartition(t, s, "pre", 3, 4, 7)
	used = s.precopiesUsed.Load()
	split(t, parent, right3, cells.ShardRange{First: 4, Last: 7}, AppliedState{Index: 30, Term: 2})
	assert.Equal(t, used, s.precopiesUsed.Load(), "a pre-copy of the state before a restore is not used")
	assert.Empty(t, heldRequests(t, right3), "the right half of a restored parent")

	// Not used within its keep: dropped, with its generation.
	precopyKeep = 100 * time.Millisecond
	putRecords(t, parent, newIDs(50), now, "later")
	require.NoError(t, parent.PrepareSplit(ctx, 4))
	parent.precopies.mu.Lock()
	gen := parent.precopies.m[4].pebble.gen
	parent.precopies.mu.Unlock()
	require.NotZero(t, gen)
	require.Equal(t, 2*50, generationKeys(t, s, gen), "the pre-copy's records and their time order")
	require.Eventually(t, func() bool { return generationKeys(t, s, gen) == 0 }, 5*time.Second, 10*time.Millisecond,
		"an unused pre-copy's generation is deleted")
}

// BenchmarkPrecopyPebble measures PrepareSplit on pebble for a partition holding 10,000
// request records of 2.5 KB (a partition that took a million cells in put_cells of 100 within
// the request window), flushed to tables: the copy a split's entry no longer makes.
func BenchmarkPrecopyPebble(b *testing.B) {
	ctx := context.Background()
	s := pebbleEnv(b).open(b)
	p := openPartition(b, s, "pre", 0, 0, 7)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		rs := make([]RequestRecord, 100)
		for i := range rs {
			rec := make([]byte, 2500)
			for j := range rec {
				rec[j] = byte(rng.IntN(16))
			}
			rs[i] = RequestRecord{ID: uuid.Must(uuid.NewV7()), CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Record: rec}
		}
		tx, err := p.Begin(ctx)
		require.NoError(b, err)
		require.NoError(b, tx.PutRequests(ctx, rs))
		require.NoError(b, tx.Commit())
	}
	require.NoError(b, s.Flush())
	b.ResetTimer()
	for i := range b.N {
		require.NoError(b, p.PrepareSplit(ctx, i+1))
	}
	b.StopTimer()
	p.dropPrecopies()
}
