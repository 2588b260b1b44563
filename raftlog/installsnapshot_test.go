package raftlog

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// restoreFSM accepts any snapshot and applies nothing: the test is about the log.
type restoreFSM struct{}

func (restoreFSM) Apply(*raft.Log) interface{}         { return nil }
func (restoreFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, io.EOF }
func (restoreFSM) Restore(rc io.ReadCloser) error {
	_, err := io.Copy(io.Discard, rc)
	return err
}

// TestInstallSnapshotOverConflictingEntry is hashicorp/raft issue 697 on a follower whose log
// holds entries 1-5 of term 1 (a deposed leader's, 5 never committed) when the leader of term 2
// installs a snapshot up to index 4 of term 2, and then sends entry 5 after it. The follower
// must take it: its last entry is the snapshot's. Unpatched, raft kept its last log index at 5
// (our monotonic store, whose whole log raft removes) or kept the entries of term 1 (a
// non-monotonic store), refused the AppendEntries ("log not found", or a term mismatch), and
// the leader would send the snapshot again, forever (third_party/raft/PATCHES.md).
func TestInstallSnapshotOverConflictingEntry(t *testing.T) {
	stores := map[string]func(t *testing.T) (raft.LogStore, raft.StableStore){
		"raftlog (monotonic)": func(t *testing.T) (raft.LogStore, raft.StableStore) {
			g, err := openStore(t, t.TempDir()).Group("p0")
			require.NoError(t, err)
			return g, g
		},
		"inmem (not monotonic)": func(t *testing.T) (raft.LogStore, raft.StableStore) {
			s := raft.NewInmemStore()
			return s, s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			logs, stable := open(t)
			for i := uint64(1); i <= 5; i++ {
				require.NoError(t, logs.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogNoop}))
			}
			require.NoError(t, stable.SetUint64([]byte("CurrentTerm"), 1))

			_, ftrans := raft.NewInmemTransport("follower")
			_, ltrans := raft.NewInmemTransport("leader")
			ltrans.Connect("follower", ftrans)
			ftrans.Connect("leader", ltrans)
			conf := raft.DefaultConfig()
			conf.LocalID = "follower"
			conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Minute, time.Minute, time.Second
			conf.Logger = hclog.NewNullLogger()
			r, err := raft.NewRaft(conf, restoreFSM{}, logs, stable, raft.NewInmemSnapshotStore(), ftrans)
			require.NoError(t, err)
			t.Cleanup(func() { _ = r.Shutdown().Error() })
			require.Equal(t, uint64(5), r.LastIndex(), "the follower's log before the snapshot")

			header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"), Addr: []byte("leader")}
			servers := raft.Configuration{Servers: []raft.Server{
				{Suffrage: raft.Voter, ID: "leader", Address: "leader"},
				{Suffrage: raft.Voter, ID: "follower", Address: "follower"},
			}}
			data := []byte("the state up to index 4")
			var sresp raft.InstallSnapshotResponse
			require.NoError(t, ltrans.InstallSnapshot("follower", "follower", &raft.InstallSnapshotRequest{
				RPCHeader: header, SnapshotVersion: raft.SnapshotVersionMax, Term: 2, Leader: []byte("leader"),
				LastLogIndex: 4, LastLogTerm: 2, Configuration: raft.EncodeConfiguration(servers), ConfigurationIndex: 4,
				Size: int64(len(data)),
			}, &sresp, bytes.NewReader(data)), "install the snapshot")
			require.True(t, sresp.Success, "the snapshot installed")
			assert.Equal(t, uint64(4), r.LastIndex(), "the follower's last index after the snapshot, want the snapshot's")

			var aresp raft.AppendEntriesResponse
			require.NoError(t, ltrans.AppendEntries("follower", "follower", &raft.AppendEntriesRequest{
				RPCHeader: header, Term: 2, Leader: []byte("leader"), PrevLogEntry: 4, PrevLogTerm: 2,
				Entries: []*raft.Log{{Index: 5, Term: 2, Type: raft.LogNoop}}, LeaderCommitIndex: 4,
			}, &aresp), "append entry 5 after the snapshot")
			assert.True(t, aresp.Success, "the follower takes the entry after the snapshot (last log %d), want it to, not to ask for the snapshot again", aresp.LastLog)
			assert.Equal(t, uint64(5), r.LastIndex(), "the follower's last index after the append")
			var got raft.Log
			require.NoError(t, logs.GetLog(5, &got), "entry 5 stored")
			assert.Equal(t, uint64(2), got.Term, "entry 5 is the leader's, of term 2")
		})
	}
}
