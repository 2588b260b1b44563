package raftlog

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyFutureAnswersAfterShutdown is hashicorp/raft issue 498 with BatchApplyCh, which
// schemaless's partitions set: the apply channel is buffered, so an Apply racing a Shutdown
// (or made after it) may leave its future in the buffer, where nothing reads it, and its
// Error() would block for ever: a write's waiter held a node's Close for good in CI. Every
// future that Apply or Barrier returns must answer once raft has shut down: with its outcome,
// or ErrRaftShutdown (third_party/raft/PATCHES.md). Unpatched, about half of the 40 calls
// made after Shutdown returned a future that never answered.
func TestApplyFutureAnswersAfterShutdown(t *testing.T) {
	store := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport("solo")
	conf := raft.DefaultConfig()
	conf.LocalID = "solo"
	conf.BatchApplyCh = true
	conf.Logger = hclog.NewNullLogger()
	require.NoError(t, raft.BootstrapCluster(conf, store, store, raft.NewInmemSnapshotStore(), trans,
		raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "solo", Address: "solo"}}}))
	r, err := raft.NewRaft(conf, restoreFSM{}, store, store, raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.State() == raft.Leader }, 10*time.Second, 10*time.Millisecond, "the single voter leads")
	require.NoError(t, r.Apply([]byte("before"), time.Second).Error(), "an entry applied before the shutdown")
	require.NoError(t, r.Shutdown().Error())

	var futures []raft.Future
	for i := 0; i < 20; i++ {
		futures = append(futures, r.Apply([]byte("after"), time.Second), r.Barrier(time.Second))
	}
	for i, f := range futures {
		errc := make(chan error, 1)
		go func() { errc <- f.Error() }()
		select {
		case err := <-errc:
			assert.True(t, errors.Is(err, raft.ErrRaftShutdown), "call %d after the shutdown: %v, want ErrRaftShutdown", i, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d after the shutdown: its future did not answer in 5 s", i)
		}
	}
}
