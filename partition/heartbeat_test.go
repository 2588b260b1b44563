package partition

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingTransport notes whether raft installed a heartbeat fast-path handler.
type recordingTransport struct {
	*raft.InmemTransport
	handlerSet atomic.Bool
}

func (t *recordingTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb != nil {
		t.handlerSet.Store(true)
	}
	t.InmemTransport.SetHeartbeatHandler(cb)
}

// By default raft never gets to install its heartbeat fast path (hashicorp/raft issue 695), and
// the wrapper keeps pre-vote and Close visible; HeartbeatFastPath restores raft's behaviour.
func TestHeartbeatFastPathOffByDefault(t *testing.T) {
	t.Parallel()
	for _, fast := range []bool{false, true} {
		dir := t.TempDir()
		st, err := storage.OpenSQLite(context.Background(), storage.SQLiteConfig{Dir: filepath.Join(dir, "sqlite")})
		require.NoError(t, err, "OpenSQLite")
		ps, err := st.Partition(context.Background(), storage.PartitionID{Datastore: "trips"}, testShards)
		require.NoError(t, err, "Partition")
		_, inmem := raft.NewInmemTransport("r1")
		trans := &recordingTransport{InmemTransport: inmem}
		p, err := Open(context.Background(), Config{
			ID: storage.PartitionID{Datastore: "trips"}, Shards: testShards, NodeID: "r1",
			Dir: filepath.Join(dir, "raft"), Transport: trans, Store: ps,
			Peers:             []raft.Server{{Suffrage: raft.Voter, ID: "r1", Address: "r1"}},
			Logger:            slog.New(slog.DiscardHandler),
			HeartbeatFastPath: fast,
		})
		require.NoError(t, err, "Open with HeartbeatFastPath=%v", fast)
		assert.Equal(t, fast, trans.handlerSet.Load(), "HeartbeatFastPath=%v: raft installed a heartbeat handler", fast)
		p.Close()
		st.Close()
	}
	w := wrapTransport(&recordingTransport{}, true, &voteTracker{})
	assert.Implements(t, (*raft.WithPreVote)(nil), w, "the wrapper of a pre-vote transport hides raft.WithPreVote")
	assert.Implements(t, (*raft.WithClose)(nil), w, "the wrapper hides raft.WithClose")
}
