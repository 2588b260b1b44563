package fsm

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
)

func groupLog(t *testing.T, index uint64, at time.Time, group string, cmd consumer.Command) *raft.Log {
	t.Helper()
	data, err := EncodeGroupCommand(GroupCommand{Group: group, CreatedAt: at, Cmd: cmd})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func statusJSON(t *testing.T, st Store, group string, at time.Time) string {
	t.Helper()
	g, err := LoadGroup(context.Background(), st, group)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(g.Status(at))
	return string(b)
}

// Group commands mix with cell commands in one batch; a refused command is an error value; a
// batch retried after its transaction failed to begin gives the same results and state as one
// that did not fail; the state is in SQL across a restart, and offsets never move backward.
func TestGroupCommands(t *testing.T) {
	at := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	b := body(t, `{"a":1}`)
	logs := func() []*raft.Log {
		return []*raft.Log{
			cmdLog(t, 1, at, cell(8, 1, "BASE", 1, b)),
			groupLog(t, 2, at, "billing", consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1", Shards: 16, SessionTimeout: time.Minute}),
			groupLog(t, 3, at, "billing", consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16, Commits: []consumer.Offset{{Shard: 99}}}),
			groupLog(t, 4, at.Add(time.Second), "billing", consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16, Commits: []consumer.Offset{{Shard: 8, Epoch: 1, Offset: 1}, {Shard: 9, Epoch: 7, Offset: 1}}}),
			cmdLog(t, 5, at, cell(9, 2, "BASE", 1, b)),
		}
	}
	clean := openSQLite(t)
	want := responses(t, newFSM(t, clean).ApplyBatch(logs()))

	p := openSQLite(t)
	fs := &failingStore{Store: p}
	fs.failures.Store(1) // the first attempt at the batch fails; the retry starts over
	f, err := New(context.Background(), Config{Store: fs, StoreAttempts: 3, StoreBackoff: time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	got := responses(t, f.ApplyBatch(logs()))
	for i, r := range got {
		gj, _ := json.Marshal(r)
		wj, _ := json.Marshal(want[i])
		if string(gj) != string(wj) || (r.Err == nil) != (want[i].Err == nil) {
			t.Errorf("entry %d after a retried batch: got %s (%v), want %s (%v)", i+1, gj, r.Err, wj, want[i].Err)
		}
	}
	if got[0].Err != nil || got[0].Cells[0].Status != cells.StatusCreated || got[4].Cells[0].Status != cells.StatusCreated {
		t.Errorf("cell entries: got %+v and %+v, want created", got[0], got[4])
	}
	if got[1].Group == nil || len(got[1].Group.Assigned) != 16 {
		t.Fatalf("heartbeat: got %+v, want all 16 shards assigned", got[1])
	}
	if !errors.Is(got[2].Err, consumer.ErrBadCommand) || got[2].Group != nil {
		t.Errorf("commit of shard 99: got %+v, want ErrBadCommand", got[2])
	}
	if g := got[3].Group; g == nil || len(g.Accepted) != 2 || !g.Accepted[0] || g.Accepted[1] {
		t.Errorf("commits at epochs 1 and 7: got %+v, want [true false]", got[3])
	}
	if a, b := statusJSON(t, p, "billing", at), statusJSON(t, clean, "billing", at); a != b {
		t.Errorf("group state after a retried batch:\n got %s\nwant %s", a, b)
	}
	// Restart: the state is read back from SQL, and later commands see it.
	f2 := newFSM(t, p)
	out := responses(t, f2.ApplyBatch([]*raft.Log{groupLog(t, 6, at.Add(2*time.Second), "billing",
		consumer.Command{Op: consumer.OpCommit, Worker: "w1", Shards: 16, Commits: []consumer.Offset{{Shard: 8, Epoch: 1, Offset: 0}}})}))
	if out[0].Group == nil || !out[0].Group.Accepted[0] {
		t.Fatalf("commit after restart: got %+v, want accepted", out[0])
	}
	st, err := LoadGroup(context.Background(), p, "billing")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Status(at.Add(2 * time.Second)).Leases {
		if l.Shard == 8 && l.Offset != 1 {
			t.Errorf("shard 8 offset after a lower commit: got %d, want 1 (never backward)", l.Offset)
		}
	}
	names, err := GroupNames(context.Background(), p)
	if err != nil || len(names) != 1 || names[0] != "billing" {
		t.Errorf("GroupNames: got %v, %v, want [billing]", names, err)
	}
}

func TestGroupCommandRoundTrip(t *testing.T) {
	in := GroupCommand{Group: "g", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		Cmd: consumer.Command{Op: consumer.OpCommit, Worker: "w", Shards: 4, Commits: []consumer.Offset{{Shard: 1, Epoch: 2, Offset: 3}}}}
	data, err := EncodeGroupCommand(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeGroupCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	ij, _ := json.Marshal(in)
	oj, _ := json.Marshal(out)
	if string(ij) != string(oj) || !out.CreatedAt.Equal(in.CreatedAt) {
		t.Errorf("round trip: got %s, want %s", oj, ij)
	}
	if _, err := DecodeGroupCommand([]byte{groupCommandVersion, 0xc1}); !errors.Is(err, ErrBadCommand) {
		t.Errorf("garbage: got %v, want ErrBadCommand", err)
	}
	if err := consumer.ValidGroupName("a b"); err == nil {
		t.Error("ValidGroupName(\"a b\"): got nil, want an error")
	}
}
