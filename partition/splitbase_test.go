package partition

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/hclogslog"
)

// baseFSM is a state machine whose snapshots cannot be restored, as a split's base cannot
// (it holds no data: fsm.ErrSplitBase): a replica lacking the base's state is never repaired
// from it.
type baseFSM struct{}

func (baseFSM) Apply(*raft.Log) any { return nil }

func (baseFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("no snapshot in this test")
}

func (baseFSM) Restore(io.ReadCloser) error { return errors.New("a split's base holds no data") }

// A split's new group whose first entries after the base were appended by a leader that could
// not commit them still commits under the next leader: the follower holding them finds the
// entry at the base's index in its log (storeBaseEntry) and takes the new leader's entries in
// their place. Three replicas start from a base at index 5: the leader-to-be has nothing after
// it; the follower has entries 6 and 7 of term 2, never committed; the third replica has no
// base at all (it only votes). Without the base's entry, the follower refuses every
// AppendEntries after the base, the leader falls back to sending the base's snapshot, which the
// follower cannot restore, and the write never commits, however often it is sent again (shown
// failing with withBase false).
func TestSplitBaseFollowerWithUncommittedEntries(t *testing.T) {
	t.Parallel()
	for _, withBase := range []bool{true, false} {
		t.Run(map[bool]string{true: "base entry", false: "no base entry"}[withBase], func(t *testing.T) {
			t.Parallel()
			committed := splitBaseGroup(t, withBase)
			if withBase {
				assert.True(t, committed, "a write commits under the new leader")
			} else {
				assert.False(t, committed, "without the base's entry the write cannot commit (the check can fail)")
			}
		})
	}
}

// splitBaseGroup runs the scenario of TestSplitBaseFollowerWithUncommittedEntries and reports
// whether the leader's write committed within 5 s.
func splitBaseGroup(t *testing.T, withBase bool) bool {
	const base = 5
	ids := []raft.ServerID{"leader", "follower", "voter"}
	var conf raft.Configuration
	for _, id := range ids {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: id, Address: raft.ServerAddress(id)})
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	trans := make([]*raft.InmemTransport, len(ids))
	for i, id := range ids {
		_, trans[i] = raft.NewInmemTransport(raft.ServerAddress(id))
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(raft.ServerAddress(ids[j]), trans[j])
			}
		}
	}
	dirs := make([]string, len(ids)) // made before the cleanup below, so removed after raft's shutdown
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	var rafts []*raft.Raft
	t.Cleanup(func() {
		for _, r := range rafts {
			_ = r.Shutdown().Error()
		}
	})
	for i, id := range ids {
		store := raft.NewInmemStore()
		snaps, err := raft.NewFileSnapshotStoreWithLogger(dirs[i], 1, hclogslog.New(logger, "raft"))
		require.NoError(t, err)
		if id != "voter" { // the voter has no base: it learned of the split too late
			sink, err := snaps.Create(raft.SnapshotVersionMax, base, 1, conf, base, trans[i])
			require.NoError(t, err)
			require.NoError(t, sink.Close(), "the base snapshot of %s", id)
			if withBase {
				require.NoError(t, storeBaseEntry(store, base), "the base's entry of %s", id)
			}
		}
		if id == "follower" { // a leader of term 2 appended these and lost its leadership
			require.NoError(t, store.StoreLogs([]*raft.Log{{Index: base + 1, Term: 2, Type: raft.LogNoop}, {Index: base + 2, Term: 2, Type: raft.LogCommand, Data: []byte("x")}}))
		}
		if id != "voter" {
			// That leader was the follower, elected with the leader-to-be's vote: both know
			// term 2, so the leader-to-be's first term is 3. (With term 1 here it led term 2
			// too, and its entries 6 and 7 of term 2 matched the follower's by index and term
			// though they differ: the control then committed under its second leader.)
			require.NoError(t, store.SetUint64([]byte("CurrentTerm"), 2))
		}
		rc := raft.DefaultConfig()
		rc.LocalID, rc.Logger = id, hclogslog.New(logger, "raft")
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond, 5*time.Millisecond
		if id != "leader" { // only the leader-to-be campaigns
			rc.HeartbeatTimeout, rc.ElectionTimeout = time.Hour, time.Hour
		}
		rc.NoSnapshotRestoreOnStart = true
		r, err := raft.NewRaft(rc, baseFSM{}, store, store, snaps, trans[i])
		require.NoError(t, err, "start %s", id)
		rafts = append(rafts, r)
	}
	// The leader-to-be may lose its 50 ms lease on a loaded machine (CI) and step down; it is
	// the only replica that campaigns, so it leads again, and the write is sent again.
	deadline := time.After(5 * time.Second)
	for {
		require.Eventually(t, func() bool { return rafts[0].State() == raft.Leader }, 10*time.Second, 10*time.Millisecond, "the leader-to-be elected (the voter's vote)")
		f := rafts[0].Apply([]byte("y"), time.Second)
		done := make(chan error, 1)
		go func() { done <- f.Error() }()
		select {
		case err := <-done:
			if errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrNotLeader) {
				t.Logf("the write: %v; sent again", err)
				continue
			}
			require.NoError(t, err, "the write")
			return true
		case <-deadline:
			return false
		}
	}
}
