package storage

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// A lineage of SQLite splits: the right half of a split (a clone, which dropped the other
// shards' tables: its file is full of free pages) splits again. The second clone leaves those
// free pages out of its copy (holes in the file: it takes fewer disk blocks than its size), and
// every file passes SQLite's integrity check and holds exactly its shards' cells, before and
// after more writes and a restart.
func TestCloneSQLiteLineage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := sqliteEnv(t)
	s := env.open(t)
	parent := openPartition(t, s, "lineage", 0, 0, 7)
	require.NoError(t, parent.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	added := map[int]int64{}
	all := fillShards(t, parent, 0, 4000, added)

	mid := openPartition(t, s, "lineage", 1, 4, 7)
	split(t, parent, mid, cells.ShardRange{First: 4, Last: 7}, AppliedState{Index: 9, Term: 1})
	all = merge(all, fillShards(t, mid, 10_000, 200, added))
	_, err := mid.write.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)") // the pages into the file
	require.NoError(t, err)
	var free int
	require.NoError(t, mid.read.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free))
	require.Greater(t, free, 50, "free pages in the first clone, left by the parent's other shards")

	last := openPartition(t, s, "lineage", 2, 6, 7)
	split(t, mid, last, cells.ShardRange{First: 6, Last: 7}, AppliedState{Index: 12, Term: 1})
	path := sqlitePath(s.sqliteDir, last.ID())
	st, err := os.Stat(path)
	t.Logf("second clone: %d bytes, %d of them on disk; %d free pages in its parent", st.Size(), st.Sys().(*syscall.Stat_t).Blocks*512, free)
	require.NoError(t, err)
	blocks := st.Sys().(*syscall.Stat_t).Blocks * 512
	assert.Less(t, blocks, st.Size()-int64(free/2)*4096, "disk blocks of the second clone (%d bytes long): its parent's free pages are holes", st.Size())

	check := func(when string) {
		t.Helper()
		checkSQLiteParts(t, when, all, parent, mid, last)
	}
	check("after the splits")
	all = merge(all, fillShards(t, last, 20_000, 300, added), fillShards(t, mid, 30_000, 100, added))
	check("after more writes")
	s = env.open(t)
	parent, mid, last = openPartition(t, s, "lineage", 0, 0, 3), openPartition(t, s, "lineage", 1, 4, 5), openPartition(t, s, "lineage", 2, 6, 7)
	check(fmt.Sprintf("after a restart (%d cells)", count(all)))
}

// walLength counts the header and the frames of the log's current generation: a log whose
// frames after the first 3 carry other salts (an older generation) is 3 frames long; a missing
// or headerless log has none.
func TestWALLength(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const pageSize = 512
	hdr := make([]byte, 32)
	copy(hdr, []byte{0x37, 0x7f, 0x06, 0x82})
	hdr[10], hdr[11] = pageSize>>8, pageSize&0xff
	copy(hdr[16:24], "saltsalt")
	frame := func(salt string) []byte {
		f := make([]byte, 24+pageSize)
		copy(f[8:16], salt)
		return f
	}
	b := append([]byte{}, hdr...)
	for range 3 {
		b = append(b, frame("saltsalt")...)
	}
	b = append(b, frame("oldsalt!")...)
	b = append(b, frame("saltsalt")...) // after a stale frame: not replayed
	path := dir + "/a.db-wal"
	require.NoError(t, os.WriteFile(path, b, 0o600))
	n, ok, err := walLength(path)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, int64(32+3*(24+pageSize)), n, "bytes of the current generation")

	_, ok, err = walLength(dir + "/missing-wal")
	require.NoError(t, err)
	assert.False(t, ok, "no log")
	require.NoError(t, os.WriteFile(path, hdr[:10], 0o600))
	_, ok, err = walLength(path)
	require.NoError(t, err)
	assert.False(t, ok, "a torn header")
}

// checkSQLiteParts requires that each of parts passes SQLite's integrity check and holds
// exactly the cells of all in its range (when: at which step of the test).
func checkSQLiteParts(t *testing.T, when string, all map[int][]cells.Cell, parts ...*PartitionStore) {
	t.Helper()
	for _, p := range parts {
		var ok string
		require.NoError(t, p.read.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&ok))
		assert.Equal(t, "ok", ok, "integrity of partition %d %s", p.ID().Partition, when)
		assert.Equal(t, keysOnly(all, p.Shards()), heldCells(t, p), "cells of partition %d %s", p.ID().Partition, when)
	}
}

// PartitionForSplit on SQLite creates no file for a split's new partition: the store it
// returns reports applied index 0, refuses other calls without creating the file, and closes
// without one; its ShareShards clones the parent's file into place and opens it. When the
// parent's writer is busy (no clone), ShareShards creates the file and copies the tables into
// it. A partition whose file exists opens as with Partition.
func TestPartitionForSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := sqliteEnv(t)
	s := env.open(t)
	parent := openPartition(t, s, "forsplit", 0, 0, 7)
	require.NoError(t, parent.EnsureShards(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	all := fillShards(t, parent, 0, 400, map[int]int64{})
	id := func(p int) PartitionID { return PartitionID{Datastore: "forsplit", Partition: p} }
	missing := func(p int, when string) {
		t.Helper()
		_, err := os.Stat(sqlitePath(s.sqliteDir, id(p)))
		assert.ErrorIs(t, err, os.ErrNotExist, "the file of partition %d %s", p, when)
	}

	unused, err := s.PartitionForSplit(ctx, id(3), cells.ShardRange{First: 6, Last: 7})
	require.NoError(t, err)
	a, err := unused.Applied(ctx)
	require.NoError(t, err)
	assert.Zero(t, a, "applied state of a split's new partition with no file")
	_, err = unused.MaxAddedID(ctx, 6)
	assert.Error(t, err, "a read of a split's new partition with no file")
	require.NoError(t, unused.Close())
	missing(3, "after a read and a close")

	right := cells.ShardRange{First: 4, Last: 7}
	dst, err := s.PartitionForSplit(ctx, id(1), right)
	require.NoError(t, err)
	missing(1, "before its ShareShards")
	split(t, parent, dst, right, AppliedState{Index: 9, Term: 1})
	checkSQLiteParts(t, "after a split into a store of PartitionForSplit", all, parent, dst)
	a, err = dst.Applied(ctx)
	require.NoError(t, err)
	assert.Equal(t, AppliedState{Index: 9, Term: 1}, a, "the right half's applied state")
	require.NoError(t, dst.Close())
	again, err := s.PartitionForSplit(ctx, id(1), right)
	require.NoError(t, err)
	a, err = again.Applied(ctx)
	require.NoError(t, err)
	assert.Equal(t, AppliedState{Index: 9, Term: 1}, a, "PartitionForSplit of a partition with a file reads its state")
	require.NoError(t, again.Close())

	// The parent's writer is held: no clone, the tables are copied into a file created for it
	// (the copy's transaction waits for the parent's file, released 200 ms later).
	busy, err := s.PartitionForSplit(ctx, id(2), cells.ShardRange{First: 2, Last: 3})
	require.NoError(t, err)
	snap, err := parent.BeginSnapshot(ctx)
	require.NoError(t, err)
	held, err := parent.Begin(ctx)
	require.NoError(t, err)
	released := make(chan error, 1)
	go func() { time.Sleep(200 * time.Millisecond); released <- held.Rollback() }()
	require.NoError(t, busy.ShareShards(ctx, snap, cells.ShardRange{First: 2, Last: 3}, nil, AppliedState{Index: 12, Term: 1}), "ShareShards with the parent's writer held")
	require.NoError(t, <-released)
	require.NoError(t, snap.Close())
	checkSQLiteParts(t, "after a copy into a store of PartitionForSplit", all, busy)
	a, err = busy.Applied(ctx)
	require.NoError(t, err)
	assert.Equal(t, AppliedState{Index: 12, Term: 1}, a, "the copied right half's applied state")
}
