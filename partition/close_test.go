package partition

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/command"
)

// entriesRefused is a replica's transport that, while refuse is set, fails every AppendEntries
// carrying entries and passes the others (heartbeats, commit indexes): the followers stay in
// touch with the leader, which keeps leading, but no entry reaches them.
type entriesRefused struct {
	*raft.InmemTransport
	refuse *atomic.Bool
}

func (t *entriesRefused) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if len(args.Entries) > 0 && t.refuse.Load() {
		return errors.New("entries refused by the test")
	}
	return t.InmemTransport.AppendEntries(id, target, args, resp)
}

func (t *entriesRefused) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// Close returns while a write waits for a commit that cannot come: the leader is in touch with
// its followers (it keeps leading) but no entry reaches them, so raft never resolves the
// write's future; shutting raft down fails it (ErrIndeterminate). Close used to wait for the
// write's waiter before shutting raft down, and hung.
func TestCloseWithAWriteThatCannotCommit(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	g := newGroup(t, 3, func(c *Config) {
		c.Transport = &entriesRefused{InmemTransport: c.Transport.(*raft.InmemTransport), refuse: &refuse}
	})
	_, err := g.put(context.Background(), testCell(t, 0))
	require.NoError(t, err, "a first write, every entry passing")
	l := g.leader()
	refuse.Store(true)
	defer refuse.Store(false) // a Close that hangs ends once the entry commits
	wrote := make(chan error, 1)
	go func() {
		_, err := l.p.Put(context.Background(), command.Write{Cells: []command.Cell{testCell(t, 1)}})
		wrote <- err
	}()
	select {
	case err := <-wrote:
		require.FailNow(t, "the write was answered with no entry reaching a follower", "error %v", err)
	case <-time.After(time.Second): // four leader lease timeouts
	}
	require.True(t, l.p.IsLeader(), "%s still leads: its followers hear its heartbeats", l.id)
	closed := make(chan error, 1)
	go func() { closed <- l.p.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "Close did not return within 5 s while a write waited for its commit")
	}
	select {
	case err := <-wrote:
		assert.ErrorIs(t, err, ErrIndeterminate, "the waiting write's answer")
	case <-time.After(5 * time.Second):
		assert.Fail(t, "the waiting write was not answered once the replica closed")
	}
}
