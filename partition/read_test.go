package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadKinds runs each kind of typed read on the leader (strong) and on a follower (stale,
// once it applied the writes), and the refusals of a malformed request.
func TestReadKinds(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	l := g.leader()
	ctx := context.Background()
	c1, c2 := testCell(t, 1), testCell(t, 2)
	c1v2 := c1
	c1v2.Key.RefKey = 2
	wres, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{c1, c2, c1v2}})
	res := wres.Cells
	require.NoError(t, err)
	_, err = l.p.ApplyGroup(ctx, "billing", consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", SessionTimeout: time.Hour, Shards: 4})
	require.NoError(t, err)
	missing := c1
	missing.Key.ColumnKey = "NOPE"

	var follower *replica
	for _, r := range g.replicas {
		if r != l {
			follower = r
		}
	}
	g.converge()

	for _, tc := range []struct {
		name string
		p    *Raft
		c    Consistency
	}{{"strong on the leader", l.p, Strong}, {"stale on a follower", follower.p, Stale}} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(req ReadRequest) ReadResult {
				t.Helper()
				out, err := tc.p.Read(ctx, tc.c, req)
				require.NoError(t, err)
				return out
			}
			got := read(ReadRequest{Get: &GetRead{Keys: []GetKey{
				{Shard: c1.Shard, Key: c1.Key},
				{Shard: c1.Shard, Key: c1.Key, Latest: true},
				{Shard: missing.Shard, Key: missing.Key},
			}}}).Get
			require.Len(t, got, 3, "Get: one result per key")
			assert.True(t, got[0].Found && got[0].Cell.AddedID == res[0].AddedID, "Get %s: got %+v, want added_id %d", c1.Key, got[0], res[0].AddedID)
			assert.True(t, got[1].Found && got[1].Cell.Key.RefKey == 2, "Get latest of %s: got %+v, want ref key 2", c1.Key, got[1])
			assert.False(t, got[2].Found, "Get of a key never written: got %+v", got[2])

			row := read(ReadRequest{Row: &RowRead{Shard: c1.Shard, RowKey: c1.Key.RowKey}}).Cells
			require.Len(t, row, 1, "Row: one cell per column")
			assert.Equal(t, int64(2), row[0].Key.RefKey, "Row: the latest cell of the column")

			pages := read(ReadRequest{Log: &LogRead{Shards: []ShardLocation{{Shard: c1.Shard}, {Shard: c2.Shard}}, Limit: 10}}).Pages
			require.Len(t, pages, 2, "Log: one page per shard")
			n := len(pages[0].Cells)
			if c1.Shard != c2.Shard {
				n += len(pages[1].Cells)
			}
			assert.Equal(t, 3, n, "Log: cells of the two shards")

			first := read(ReadRequest{FirstCells: &FirstCellsRead{Shard: c1.Shard, Column: "BASE", RowKeys: []uuid.UUID{c1.Key.RowKey, uuid.New()}}}).Cells
			require.Len(t, first, 1, "FirstCells: the row keys that have the column")
			assert.Equal(t, int64(1), first[0].Key.RefKey, "FirstCells: the first cell appended")

			group := read(ReadRequest{Group: &GroupRead{Group: "billing"}}).Group
			require.NotNil(t, group, "Group: the group a worker joined")
			assert.Nil(t, read(ReadRequest{Group: &GroupRead{Group: "nobody"}}).Group, "Group: a group nobody joined")
			assert.Equal(t, []string{"billing"}, read(ReadRequest{Groups: &GroupsRead{}}).Groups, "Groups")

			cat, err := indexes.DecodeCatalog(read(ReadRequest{Catalog: &CatalogRead{}}).Catalog)
			require.NoError(t, err, "Catalog: the answer decodes")
			assert.NotNil(t, cat, "Catalog")
		})
	}

	t.Run("refused", func(t *testing.T) {
		_, err := l.p.Read(ctx, Strong, ReadRequest{})
		assert.ErrorIs(t, err, ErrBadRead, "a request of no kind")
		_, err = l.p.Read(ctx, Strong, ReadRequest{Groups: &GroupsRead{}, Catalog: &CatalogRead{}})
		assert.ErrorIs(t, err, ErrBadRead, "a request of two kinds")
		_, err = l.p.Read(ctx, Strong, ReadRequest{Row: &RowRead{Shard: testShards.Last + 1, RowKey: uuid.New()}})
		assert.ErrorIs(t, err, command.ErrShardOutOfRange, "a shard outside the partition")
		_, err = follower.p.Read(ctx, Strong, ReadRequest{Groups: &GroupsRead{}})
		var nl *NotLeaderError
		assert.True(t, errors.As(err, &nl), "a strong read on a follower: got %v, want *NotLeaderError", err)
	})
}

// A long-polling log read answers as soon as a write lands in one of its shards.
func TestReadLogWaits(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 1, nil)
	l := g.leader()
	ctx := context.Background()
	c := testCell(t, 7)
	done := make(chan ReadResult, 1)
	go func() {
		res, err := l.p.Read(ctx, Strong, ReadRequest{Log: &LogRead{Shards: []ShardLocation{{Shard: c.Shard}}, Limit: 10, Wait: 30 * time.Second}})
		assert.NoError(t, err)
		done <- res
	}()
	require.Never(t, func() bool { return len(done) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
		"the long poll answered before any write to its shard")
	_, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{c}})
	require.NoError(t, err)
	select {
	case res := <-done:
		require.Len(t, res.Pages, 1)
		assert.Len(t, res.Pages[0].Cells, 1, "the long poll's page: the cell written while it waited")
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not answer within 10s of a write to its shard")
	}
}

// A write whose context ends before it commits is indeterminate, and says why: the context's
// error is in the chain.
func TestPutTimeoutIsIndeterminateWithCause(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	l := g.leader()
	for i, r := range g.replicas {
		if r != l {
			g.stop(i) // no quorum: the entry cannot commit
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := l.p.Put(ctx, command.Write{Cells: []command.Cell{testCell(t, 3)}})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrIndeterminate, "a write proposed and not committed before its deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the cause of %q", err)
	assert.NotErrorIs(t, err, ErrUnavailable, "class of %q: want indeterminate only", err)
}
