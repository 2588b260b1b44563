package fsm

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func groupLog(t *testing.T, index uint64, at time.Time, group string, cmd consumer.Command) *raft.Log {
	t.Helper()
	data, err := command.Encode(&command.Group{Group: group, CreatedAt: at, Cmd: cmd})
	require.NoError(t, err, "command.Encode")
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func statusJSON(t *testing.T, st Store, group string, at time.Time) string {
	t.Helper()
	g, err := LoadGroup(context.Background(), st, group)
	require.NoError(t, err, "LoadGroup(%s)", group)
	b, err := json.Marshal(g.Status(at))
	require.NoError(t, err, "marshal the status of %s", group)
	return string(b)
}

// Group commands mix with cell commands in one batch; a refused command is an error value; a
// batch retried after its transaction failed to begin gives the same results and state as one
// that did not fail; the state is in SQL across a restart, and offsets never move backward.
func TestGroupCommands(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	b := body(t, `{"a":1}`)
	logs := func() []*raft.Log {
		return []*raft.Log{
			cmdLog(t, 1, at, cell(8, 1, "BASE", 1, b)),
			groupLog(t, 2, at, "audit", consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", Shards: 16, SessionTimeout: time.Minute}),
			groupLog(t, 3, at, "audit", consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16, Commits: []consumer.Offset{{Shard: 99}}}),
			groupLog(t, 4, at.Add(time.Second), "audit", consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16, Commits: []consumer.Offset{{Shard: 8, Epoch: 1, Offset: 1}, {Shard: 9, Epoch: 7, Offset: 1}}}),
			cmdLog(t, 5, at, cell(9, 2, "BASE", 1, b)),
		}
	}
	clean := openStore(t)
	want := responses(t, newFSM(t, clean).ApplyBatch(logs()))

	p := openStore(t)
	fs := &failingStore{Store: p}
	fs.failures.Store(1) // the first attempt at the batch fails; the retry starts over
	f, err := New(context.Background(), Config{Store: fs, StoreAttempts: 3, StoreBackoff: time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err, "New")
	got := responses(t, f.ApplyBatch(logs()))
	require.Len(t, got, len(want), "one response per entry")
	for i, r := range got {
		gj, err := json.Marshal(r)
		require.NoError(t, err, "marshal response %d", i+1)
		wj, err := json.Marshal(want[i])
		require.NoError(t, err, "marshal response %d", i+1)
		assert.True(t, string(gj) == string(wj) && (r.Err == nil) == (want[i].Err == nil),
			"entry %d after a retried batch: got %s (%v), want %s (%v)", i+1, gj, r.Err, wj, want[i].Err)
	}
	assert.NoError(t, got[0].Err, "cell entry 1")
	if assert.Len(t, got[0].writes()[0].Cells, 1, "cell entry 1") && assert.Len(t, got[4].writes()[0].Cells, 1, "cell entry 5") {
		assert.Equal(t, cells.StatusCreated, got[0].writes()[0].Cells[0].Status, "cell entry 1: %+v", got[0])
		assert.Equal(t, cells.StatusCreated, got[4].writes()[0].Cells[0].Status, "cell entry 5: %+v", got[4])
	}
	require.NotNil(t, got[1].group(), "heartbeat: got %+v, want all 16 shards assigned", got[1])
	require.Len(t, got[1].group().Assigned, 16, "heartbeat: want all 16 shards assigned")
	assert.ErrorIs(t, got[2].Err, consumer.ErrBadCommand, "commit of shard 99")
	assert.Nil(t, got[2].group(), "commit of shard 99: got %+v, want ErrBadCommand", got[2])
	if g := got[3].group(); assert.NotNil(t, g, "commits at epochs 1 and 7: got %+v", got[3]) {
		assert.Equal(t, []bool{true, false}, g.Accepted, "commits at epochs 1 and 7: accepted")
	}
	assert.Equal(t, statusJSON(t, clean, "audit", at), statusJSON(t, p, "audit", at), "group state after a retried batch")
	// Restart: the state is read back from SQL, and later commands see it.
	f2 := newFSM(t, p)
	out := responses(t, f2.ApplyBatch([]*raft.Log{groupLog(t, 6, at.Add(2*time.Second), "audit",
		consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16, Commits: []consumer.Offset{{Shard: 8, Epoch: 1, Offset: 0}}})}))
	require.NotNil(t, out[0].group(), "commit after restart: got %+v, want accepted", out[0])
	require.Equal(t, []bool{true}, out[0].group().Accepted, "commit after restart: accepted")
	st, err := LoadGroup(context.Background(), p, "audit")
	require.NoError(t, err, "LoadGroup after restart")
	for _, l := range st.Status(at.Add(2 * time.Second)).Leases {
		if l.Shard == 8 {
			assert.Equal(t, int64(1), l.Offset, "shard 8 offset after a lower commit (never backward)")
		}
	}
	names, err := GroupNames(context.Background(), p)
	require.NoError(t, err, "GroupNames")
	assert.Equal(t, []string{"audit"}, names, "GroupNames")
}
