package storage

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// A split on SQLite that starts from a pre-copy (PrepareSplit) made while the parent kept
// writing, and checkpointed its log into its file twice (as far as the pre-copy's pinned
// reader lets it), before the split: both halves pass
// SQLite's integrity check and hold exactly their shards' cells, written before the pre-copy
// and after it, before and after more writes and a restart. The pre-copy is used (and its file
// gone); one the split does not use is dropped after its keep, and one of a partition that
// closes, with its file.
func TestPrecopySQLite(t *testing.T) {
	ctx := context.Background()
	// The writes between the pre-copy and the split take longer than PrecopyKeep under -race
	// on a loaded machine (CI): the pre-copy must not be dropped before the split uses it.
	defer func(keep time.Duration) { precopyKeep = keep }(precopyKeep)
	precopyKeep = 5 * time.Minute
	env := sqliteEnv(t)
	s := env.open(t)
	parent := openPartition(t, s, "pre", 0, 0, 7)
	require.NoError(t, parent.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	added := map[int]int64{}
	all := fillShards(t, parent, 0, 3000, added)
	// A reader of an older state keeps the pre-copy's checkpoint from writing the whole log
	// into the file: the pin then reads frames of the log, and the checkpoints below write
	// into the parent's file pages that the pre-copy has in their older state.
	old, err := parent.read.BeginTx(ctx, nil)
	require.NoError(t, err)
	var n int
	require.NoError(t, old.QueryRowContext(ctx, "SELECT count(*) FROM entity_0001").Scan(&n))
	all = merge(all, fillShards(t, parent, 5_000, 1000, added))

	require.NoError(t, parent.PrepareSplit(ctx, 1), "the pre-copy for partition 1")
	require.NoError(t, old.Rollback())
	pre := sqlitePath(s.sqliteDir, PartitionID{Datastore: "pre", Partition: 1}) + precopySuffix
	require.FileExists(t, pre)
	require.NoError(t, parent.PrepareSplit(ctx, 1), "asked again: the same pre-copy")
	checkpoint := func() {
		var busy, logged, done int
		require.NoError(t, parent.write.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &done))
		t.Logf("the parent's checkpoint: %d frames in its log, %d in its file", logged, done)
	}
	for i := range 4 {
		all = merge(all, fillShards(t, parent, 10_000*(i+1), 1500, added))
		if i%2 == 1 {
			checkpoint() // writes into the parent's file what the pre-copy was taken before
		}
	}

	right := openPartition(t, s, "pre", 1, 4, 7)
	used := s.precopiesUsed.Load()
	split(t, parent, right, cells.ShardRange{First: 4, Last: 7}, AppliedState{Index: 9, Term: 1})
	assert.Equal(t, used+1, s.precopiesUsed.Load(), "the split's clone started from the pre-copy")
	assert.NoFileExists(t, pre, "the pre-copy became the right half's file")

	check := func(when string) {
		t.Helper()
		checkSQLiteParts(t, when, all, parent, right)
	}
	check("after the split")
	all = merge(all, fillShards(t, right, 90_000, 300, added), fillShards(t, parent, 95_000, 300, added))
	check("after more writes")

	// Not used: dropped after its keep, its pin released (a truncating checkpoint completes).
	precopyKeep = 100 * time.Millisecond
	require.NoError(t, parent.PrepareSplit(ctx, 2))
	pre2 := sqlitePath(s.sqliteDir, PartitionID{Datastore: "pre", Partition: 2}) + precopySuffix
	require.FileExists(t, pre2)
	require.Eventually(t, func() bool { _, err := os.Stat(pre2); return os.IsNotExist(err) }, 5*time.Second, 10*time.Millisecond, "an unused pre-copy is dropped")
	var busy, logged, done int
	require.NoError(t, parent.write.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &done))
	assert.Zero(t, busy, "no reader pinned by the dropped pre-copy holds the log")

	// A partition that closes drops its pre-copies.
	precopyKeep = time.Minute
	require.NoError(t, parent.PrepareSplit(ctx, 3))
	pre3 := sqlitePath(s.sqliteDir, PartitionID{Datastore: "pre", Partition: 3}) + precopySuffix
	require.FileExists(t, pre3)
	require.NoError(t, parent.Close())
	assert.NoFileExists(t, pre3, "the pre-copy of a partition that closed")
	require.NoError(t, right.Close())

	s = env.open(t)
	parent, right = openPartition(t, s, "pre", 0, 0, 3), openPartition(t, s, "pre", 1, 4, 7)
	check("after a restart")
}

// A pre-copy restarts the parent's log: what the split copies then is the commits made after the
// pre-copy, not every frame since the log last restarted. A reader on the parent's log when the
// pre-copy begins (a read of an older state) keeps the log from restarting until it ends; the
// pre-copy waits for it (restartWait), then the log restarts. With a passive checkpoint
// alone, a commit made while that reader still read appended its frames after the older ones,
// and the log kept them all.
func TestPrecopyRestartsTheLog(t *testing.T) {
	ctx := context.Background()
	s := sqliteEnv(t).open(t)
	parent := openPartition(t, s, "log", 0, 0, 7)
	require.NoError(t, parent.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	added := map[int]int64{}
	all := map[int][]cells.Cell{}
	for i := range 20 {
		all = merge(all, fillShards(t, parent, 1000*i, 50, added))
	}
	wal := sqlitePath(s.sqliteDir, parent.id) + "-wal"
	before, ok, err := walLength(wal)
	require.NoError(t, err)
	require.True(t, ok, "the parent has a log")

	defer func(w time.Duration) { restartWait = w }(restartWait)
	restartWait = 5 * time.Second
	reader, err := parent.read.BeginTx(ctx, nil)
	require.NoError(t, err)
	var n int
	require.NoError(t, reader.QueryRowContext(ctx, "SELECT count(*) FROM entity_0001").Scan(&n), "a reader on the log")
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(300 * time.Millisecond)
		assert.NoError(t, reader.Rollback())
	}()
	require.NoError(t, parent.PrepareSplit(ctx, 1), "the pre-copy for partition 1")
	all = merge(all, fillShards(t, parent, 50_000, 10, added)) // a commit after the pre-copy
	<-released
	after, ok, err := walLength(wal)
	require.NoError(t, err)
	require.True(t, ok)
	t.Logf("the parent's log: %d bytes before the pre-copy, %d after it and one commit", before, after)
	assert.Less(t, after, before/4, "the log the split copies holds the commits after the pre-copy alone")

	right := openPartition(t, s, "log", 1, 4, 7)
	used := s.precopiesUsed.Load()
	split(t, parent, right, cells.ShardRange{First: 4, Last: 7}, AppliedState{Index: 9, Term: 1})
	assert.Equal(t, used+1, s.precopiesUsed.Load(), "the split's clone started from the pre-copy")
	checkSQLiteParts(t, "after the split", all, parent, right)
}
