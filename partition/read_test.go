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

			group := read(ReadRequest{Group: &GroupRead{Group: "billing", Shards: 4}}).Group
			require.NotNil(t, group, "Group: the group a worker joined")
			assert.Nil(t, read(ReadRequest{Group: &GroupRead{Group: "nobody", Shards: 4}}).Group, "Group: a group nobody joined")
			assert.Equal(t, []string{"billing"}, read(ReadRequest{Groups: &GroupsRead{}}).Groups, "Groups")
			assert.Equal(t, []string{"billing"}, read(ReadRequest{Groups: &GroupsRead{Shards: 4}}).Groups, "Groups coordinated by the partition's shards")
			// Of 16 shards, billing's coordinator is shard 12: another partition's, whose copy
			// this one is not.
			assert.Empty(t, read(ReadRequest{Groups: &GroupsRead{Shards: 16}}).Groups, "Groups coordinated by shards 0..3 of 16")
			_, err := tc.p.Read(ctx, tc.c, ReadRequest{Group: &GroupRead{Group: "billing", Shards: 16}})
			assert.ErrorIs(t, err, command.ErrShardOutOfRange, "Group: a group coordinated by shard 12, outside 0..3")

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
		_, err = l.p.Read(ctx, Strong, ReadRequest{Group: &GroupRead{Group: "billing", Shards: -1}})
		assert.ErrorIs(t, err, ErrBadRead, "a group read with a negative shard count")
		_, err = l.p.ApplyGroup(ctx, "billing", consumer.Command{Op: consumer.OpHeartbeat, Worker: "w2", SessionTimeout: time.Hour, Shards: 16})
		assert.ErrorIs(t, err, command.ErrShardOutOfRange, "a group command for a group coordinated by shard 12 of 16, outside 0..3")
		st, err := l.p.Read(ctx, Strong, ReadRequest{Group: &GroupRead{Group: "billing", Shards: 4}})
		require.NoError(t, err)
		assert.Len(t, st.Group.Members, 1, "the refused command added no member: %+v", st.Group.Members)
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

// A catalog read answers from the last one while the replica's state machine has applied
// nothing since, and reads the store again once it applies an entry.
func TestCatalogReadFollowsApplies(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3, nil)
	l := g.leader()
	ctx := context.Background()
	g.converge()
	var f *replica
	for _, r := range g.replicas {
		if r != l {
			f = r
		}
	}
	catalog := func(p *Raft, c Consistency) *indexes.Catalog {
		t.Helper()
		res, err := p.Read(ctx, c, ReadRequest{Catalog: &CatalogRead{}})
		require.NoError(t, err, "catalog read")
		cat, err := indexes.DecodeCatalog(res.Catalog)
		require.NoError(t, err, "the catalog read's answer decodes")
		return cat
	}
	def := func(name string) indexes.Definition {
		d, err := indexes.ParseDefinition([]byte("table: " + name + "\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: city, type: string}\n"))
		require.NoError(t, err, "ParseDefinition of %s", name)
		return d
	}
	require.Empty(t, catalog(f.p, Stale).Active(), "index versions before any definition")

	// A catalog written to the store behind the state machine's back: the applied index has
	// not moved, so the read does not see it.
	behind := indexes.NewCatalog()
	_, err := behind.Apply(indexes.Command{Op: indexes.OpDefine, Name: "behind", Definition: def("behind"), Now: time.Now()})
	require.NoError(t, err, "define behind")
	enc, err := indexes.EncodeCatalog(behind)
	require.NoError(t, err, "EncodeCatalog")
	tx, err := f.p.Store().Begin(ctx)
	require.NoError(t, err, "Begin")
	require.NoError(t, tx.PutKV(ctx, "index/catalog", enc), "PutKV of the catalog")
	require.NoError(t, tx.Commit(), "Commit")
	assert.Empty(t, catalog(f.p, Stale).Active(), "index versions read with the applied index unchanged, want the last read's answer")

	// A definition through raft: every replica reads it once it applied it.
	_, err = l.p.ApplyIndex(ctx, command.Index{Op: command.IndexCatalog, Catalog: indexes.Command{Op: indexes.OpDefine, Name: "by_city", Definition: def("by_city")}})
	require.NoError(t, err, "define by_city through raft")
	target := l.p.FSM().Applied().Index
	for _, r := range g.replicas {
		require.NoError(t, r.p.FSM().WaitApplied(ctx, target), "replica %s applies index %d", r.id, target)
		c := Stale
		if r == l {
			c = Strong
		}
		var names []string
		for _, v := range catalog(r.p, c).Active() {
			names = append(names, v.Definition.Table)
		}
		assert.Contains(t, names, "by_city", "index versions replica %s reads after applying the definition", r.id)
	}
}
