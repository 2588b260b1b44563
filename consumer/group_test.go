package consumer

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// t0 is the base time of the tests.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// hb returns a heartbeat of worker w for a datastore of n shards.
func hb(w string, n int) Command { return Command{Op: OpHeartbeat, Worker: w, Shards: n} }

// mustApply applies cmd at now and fails the test on an error.
func mustApply(t *testing.T, g *Group, now time.Time, cmd Command) Result {
	t.Helper()
	res, err := g.Apply(now, cmd)
	if err != nil {
		t.Fatalf("Apply(%v, %+v): got error %v, want nil", now, cmd, err)
	}
	return res
}

// owners returns each shard's owner ("" when free) as Status reports it at now.
func owners(g *Group, now time.Time) []string {
	out := make([]string, g.shards)
	for _, l := range g.Status(now).Leases {
		out[l.Shard] = l.Owner
	}
	return out
}

// counts returns how many shards each of workers owns, in that order.
func counts(g *Group, now time.Time, workers []string) []int {
	n := make([]int, len(workers))
	for _, o := range owners(g, now) {
		if i := slices.Index(workers, o); i >= 0 {
			n[i]++
		}
	}
	return n
}

// settle heartbeats workers in rounds at now, each releasing what the previous round revoked,
// until a round revokes nothing and changes no owner; it fails the test after 10 rounds.
func settle(t *testing.T, g *Group, now time.Time, n int, workers ...string) {
	t.Helper()
	revoke := map[string][]int{}
	for round := 0; round < 10; round++ {
		before := owners(g, now)
		revoked := false
		for _, w := range workers {
			cmd := hb(w, n)
			cmd.Released = revoke[w]
			res := mustApply(t, g, now, cmd)
			revoke[w] = res.Revoke
			revoked = revoked || len(res.Revoke) > 0
		}
		// Joins happen in round 0; the next round shows what they revoke.
		if round > 0 && !revoked && slices.Equal(before, owners(g, now)) {
			return
		}
	}
	t.Fatalf("assignment of %d shards to %v did not settle in 10 rounds: owners %v", n, workers, owners(g, now))
}

// shardsOf returns the shard numbers of leases.
func shardsOf(leases []Lease) []int {
	var s []int
	for _, l := range leases {
		s = append(s, l.Shard)
	}
	return s
}

func TestJoinBalanced(t *testing.T) {
	tests := []struct {
		name    string
		shards  int
		workers []string
		want    []int
	}{
		{"one worker", 16, []string{"a"}, []int{16}},
		{"two workers", 16, []string{"a", "b"}, []int{8, 8}},
		{"three workers", 16, []string{"a", "b", "c"}, []int{6, 5, 5}},
		{"three workers joined in reverse", 16, []string{"c", "b", "a"}, []int{5, 5, 6}},
		{"more workers than shards", 2, []string{"a", "b", "c"}, []int{1, 1, 0}},
		{"four workers ten shards", 10, []string{"a", "b", "c", "d"}, []int{3, 3, 2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New("g")
			for i := range tt.workers {
				settle(t, g, t0, tt.shards, tt.workers[:i+1]...)
			}
			if got := counts(g, t0, tt.workers); !slices.Equal(got, tt.want) {
				t.Errorf("shards per worker: got %v, want %v", got, tt.want)
			}
			if got, want := g.Status(t0).Generation, uint64(len(tt.workers)); got != want {
				t.Errorf("generation: got %d, want %d", got, want)
			}
			seen := map[int]string{}
			for _, w := range tt.workers {
				res := mustApply(t, g, t0, hb(w, tt.shards))
				if len(res.Revoke) != 0 {
					t.Errorf("%s: revoke after settling: got %v, want none", w, res.Revoke)
				}
				for _, l := range res.Assigned {
					if other, ok := seen[l.Shard]; ok {
						t.Errorf("shard %d assigned to %s and %s", l.Shard, other, w)
					}
					seen[l.Shard] = w
					if l.Epoch == 0 || l.Offset != -1 || l.Owner != w {
						t.Errorf("%s: lease %+v: got epoch %d offset %d owner %q, want epoch >= 1, offset -1, owner %q",
							w, l, l.Epoch, l.Offset, l.Owner, w)
					}
				}
				for i, m := range res.Members {
					if m.ID != tt.workers[slices.Index(tt.workers, m.ID)] || (i > 0 && res.Members[i-1].ID >= m.ID) {
						t.Errorf("members: got %v, want sorted by ID", res.Members)
					}
				}
			}
			if len(seen) != tt.shards {
				t.Errorf("shards assigned: got %d, want %d", len(seen), tt.shards)
			}
		})
	}
}

func TestStickiness(t *testing.T) {
	tests := []struct {
		name      string
		shards    int
		members   []string
		joiner    string
		want      []int // shards per member after the join, joiner last
		wantMoved int
	}{
		{"joiner sorts last", 16, []string{"a", "b", "c"}, "d", []int{4, 4, 4, 4}, 4},
		{"joiner sorts first", 16, []string{"b", "c", "d"}, "a", []int{4, 4, 4, 4}, 4},
		{"odd shards", 7, []string{"a", "b"}, "c", []int{3, 2, 2}, 2},
		{"joiner gets nothing", 2, []string{"a", "b"}, "c", []int{1, 1, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New("g")
			settle(t, g, t0, tt.shards, tt.members...)
			before := owners(g, t0)
			all := append(slices.Clone(tt.members), tt.joiner)
			settle(t, g, t0, tt.shards, all...)
			after := owners(g, t0)
			moved := 0
			for s := range after {
				if after[s] == before[s] {
					continue
				}
				moved++
				if after[s] != tt.joiner {
					t.Errorf("shard %d moved from %s to %s: got a move between old members, want moves only to %s",
						s, before[s], after[s], tt.joiner)
				}
			}
			if moved != tt.wantMoved {
				t.Errorf("shards moved: got %d, want %d", moved, tt.wantMoved)
			}
			if got := counts(g, t0, all); !slices.Equal(got, tt.want) {
				t.Errorf("shards per member: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRevokeReleaseGrant(t *testing.T) {
	g := New("g")
	res := mustApply(t, g, t0, hb("w1", 4))
	want := []Lease{{0, "w1", 1, -1}, {1, "w1", 1, -1}, {2, "w1", 1, -1}, {3, "w1", 1, -1}}
	if !reflect.DeepEqual(res.Assigned, want) {
		t.Fatalf("w1 assigned: got %+v, want %+v", res.Assigned, want)
	}
	res = mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w1", Commits: []Offset{{0, 1, 10}, {1, 1, 11}, {2, 1, 12}, {3, 1, 13}}})
	if want := []bool{true, true, true, true}; !slices.Equal(res.Accepted, want) {
		t.Fatalf("commits: got %v, want %v", res.Accepted, want)
	}

	res = mustApply(t, g, at(time.Second), hb("w2", 4))
	if len(res.Assigned) != 0 || res.Generation != 2 {
		t.Fatalf("w2 joining: got assigned %+v generation %d, want none (w1 still owns) and 2", res.Assigned, res.Generation)
	}

	res = mustApply(t, g, at(time.Second), hb("w1", 4))
	if got := shardsOf(res.Assigned); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("w1 assigned: got %v, want [0 1]", got)
	}
	if !slices.Equal(res.Revoke, []int{2, 3}) {
		t.Errorf("w1 revoke: got %v, want [2 3]", res.Revoke)
	}
	// w1 still owns the revoked shards until it releases them: its commits are accepted, and
	// commits come before releases in one heartbeat.
	cmd := hb("w1", 4)
	cmd.Commits = []Offset{{2, 1, 20}}
	cmd.Released = []int{2, 3}
	res = mustApply(t, g, at(2*time.Second), cmd)
	if !slices.Equal(res.Accepted, []bool{true}) || len(res.Revoke) != 0 {
		t.Errorf("w1 release: got accepted %v revoke %v, want [true] and none", res.Accepted, res.Revoke)
	}
	res = mustApply(t, g, at(2*time.Second), hb("w2", 4))
	want = []Lease{{2, "w2", 2, 20}, {3, "w2", 2, 13}}
	if !reflect.DeepEqual(res.Assigned, want) {
		t.Errorf("w2 assigned: got %+v, want %+v", res.Assigned, want)
	}
	// The old epoch no longer commits.
	res = mustApply(t, g, at(2*time.Second), Command{Op: OpCommit, Worker: "w1", Commits: []Offset{{3, 1, 99}}})
	if !slices.Equal(res.Accepted, []bool{false}) {
		t.Errorf("w1 commit after release: got %v, want [false]", res.Accepted)
	}
	want2 := []Member{{ID: "w1", Expires: at(5 * time.Second), Shards: 2}, {ID: "w2", Expires: at(5 * time.Second), Shards: 2}}
	if !reflect.DeepEqual(res.Members, want2) {
		t.Errorf("members: got %+v, want %+v", res.Members, want2)
	}
}

func TestSessionExpiry(t *testing.T) {
	g := New("g")
	settle(t, g, t0, 4, "w1", "w2")
	before := map[int]Lease{}
	for _, l := range g.Status(t0).Leases {
		before[l.Shard] = l
	}
	// w2 last heartbeat at t0: its session ends at t0+3s (expired when now >= Expires).
	res := mustApply(t, g, at(2999*time.Millisecond), hb("w1", 4))
	if len(res.Assigned) != 2 || len(res.Members) != 2 {
		t.Fatalf("before w2 expires: got %d shards, %d members, want 2 and 2", len(res.Assigned), len(res.Members))
	}
	st := g.Status(at(3 * time.Second))
	if len(st.Members) != 1 || st.Generation != 3 {
		t.Errorf("status at w2's expiry: got members %+v generation %d, want only w1 and 3", st.Members, st.Generation)
	}
	if got := g.Status(at(2 * time.Second)); len(got.Members) != 2 || got.Generation != 2 {
		t.Errorf("status must not change the group: got members %+v generation %d, want 2 members, 2", got.Members, got.Generation)
	}
	res = mustApply(t, g, at(3*time.Second), hb("w1", 4))
	if len(res.Assigned) != 4 || res.Generation != 3 || len(res.Members) != 1 {
		t.Fatalf("after w2 expired: got assigned %+v generation %d members %+v, want 4 shards, 3, [w1]",
			res.Assigned, res.Generation, res.Members)
	}
	for _, l := range res.Assigned {
		want := before[l.Shard].Epoch
		if before[l.Shard].Owner == "w2" { // regranted: a new epoch
			want++
		}
		if l.Epoch != want {
			t.Errorf("shard %d (owned by %s) epoch: got %d, want %d", l.Shard, before[l.Shard].Owner, l.Epoch, want)
		}
	}
}

func TestFencing(t *testing.T) {
	t.Run("old owner after reassignment", func(t *testing.T) {
		g := New("g")
		mustApply(t, g, t0, hb("w1", 2))
		mustApply(t, g, t0, hb("w2", 2))
		res := mustApply(t, g, at(4*time.Second), hb("w2", 2)) // w1 expired at t0+3s
		if want := []Lease{{0, "w2", 2, -1}, {1, "w2", 2, -1}}; !reflect.DeepEqual(res.Assigned, want) {
			t.Fatalf("w2 assigned: got %+v, want %+v", res.Assigned, want)
		}
		tests := []struct {
			name   string
			worker string
			commit Offset
			want   bool
		}{
			{"expired old owner", "w1", Offset{0, 1, 5}, false},
			{"new owner old epoch", "w2", Offset{0, 1, 5}, false},
			{"new owner future epoch", "w2", Offset{0, 3, 5}, false},
			{"not a member", "w9", Offset{0, 2, 5}, false},
			{"new owner", "w2", Offset{0, 2, 5}, true},
		}
		for _, tt := range tests {
			res := mustApply(t, g, at(4*time.Second), Command{Op: OpCommit, Worker: tt.worker, Commits: []Offset{tt.commit}})
			if !slices.Equal(res.Accepted, []bool{tt.want}) {
				t.Errorf("%s: accepted got %v, want [%v]", tt.name, res.Accepted, tt.want)
			}
		}
		if got := g.Status(at(4 * time.Second)).Leases[0].Offset; got != 5 {
			t.Errorf("offset: got %d, want 5", got)
		}
	})
	t.Run("expired member heartbeats again", func(t *testing.T) {
		g := New("g")
		mustApply(t, g, t0, hb("w1", 2))
		cmd := hb("w1", 2)
		cmd.Commits = []Offset{{0, 1, 99}, {1, 1, 98}}
		res := mustApply(t, g, at(10*time.Second), cmd)
		if !slices.Equal(res.Accepted, []bool{false, false}) {
			t.Errorf("old-epoch commits: got %v, want [false false]", res.Accepted)
		}
		if res.Generation != 3 { // join, expiry, rejoin
			t.Errorf("generation: got %d, want 3", res.Generation)
		}
		if want := []Lease{{0, "w1", 2, -1}, {1, "w1", 2, -1}}; !reflect.DeepEqual(res.Assigned, want) {
			t.Errorf("assigned: got %+v, want %+v", res.Assigned, want)
		}
	})
}

func TestOffsetsNeverBackward(t *testing.T) {
	g := New("g")
	mustApply(t, g, t0, hb("w", 1))
	tests := []struct {
		offset int64
		want   int64
	}{{10, 10}, {5, 10}, {-1, 10}, {12, 12}, {12, 12}}
	for _, tt := range tests {
		res := mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{0, 1, tt.offset}}})
		if !slices.Equal(res.Accepted, []bool{true}) {
			t.Errorf("commit %d: accepted got %v, want [true]", tt.offset, res.Accepted)
		}
		if got := g.Status(t0).Leases[0].Offset; got != tt.want {
			t.Errorf("after commit %d: offset got %d, want %d", tt.offset, got, tt.want)
		}
	}
}

func TestGroupSettings(t *testing.T) {
	g := New("g")
	zone := time.FixedZone("X", 3600)
	start := Start{Kind: StartTimestamp, Time: time.Date(2024, 1, 1, 1, 0, 0, 0, zone)}
	cmd := hb("w", 4)
	cmd.Start = start
	cmd.HaltThreshold = 5
	mustApply(t, g, t0, cmd)
	st := g.Status(t0)
	if st.Start.Kind != StartTimestamp || !st.Start.Time.Equal(start.Time) || st.Start.Time.Location() != time.UTC {
		t.Errorf("start: got %+v, want %+v in UTC", st.Start, start)
	}
	if st.HaltThreshold != 5 {
		t.Errorf("halt threshold: got %d, want 5", st.HaltThreshold)
	}
	cmd = hb("w", 4)
	cmd.Start = Start{Kind: StartLatest}
	cmd.HaltThreshold = 2
	mustApply(t, g, t0, cmd)
	st = g.Status(t0)
	if st.Start.Kind != StartTimestamp {
		t.Errorf("start after a second heartbeat: got %+v, want the first one kept", st.Start)
	}
	if st.HaltThreshold != 2 {
		t.Errorf("halt threshold after a second heartbeat: got %d, want 2 (latest wins)", st.HaltThreshold)
	}
}

func TestShardCountChange(t *testing.T) {
	g := New("g")
	rows := map[string][]byte{}
	flush := func() {
		put, del := g.Dirty()
		for k, v := range put {
			rows[k] = v
		}
		for _, k := range del {
			delete(rows, k)
		}
		g.ResetDirty()
	}
	res := mustApply(t, g, t0, hb("w", 4))
	if len(res.Assigned) != 4 {
		t.Fatalf("4 shards: got %d assigned, want 4", len(res.Assigned))
	}
	flush()
	res = mustApply(t, g, t0, hb("w", 8))
	if got := shardsOf(res.Assigned); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("8 shards: got assigned %v, want 0..7", got)
	}
	mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{6, 1, 60}}})
	flush()
	res = mustApply(t, g, t0, hb("w", 3))
	if got := shardsOf(res.Assigned); !slices.Equal(got, []int{0, 1, 2}) || len(res.Revoke) != 0 {
		t.Errorf("3 shards: got assigned %v revoke %v, want [0 1 2] and none", got, res.Revoke)
	}
	_, del := g.Dirty()
	if want := []string{"shard/3", "shard/4", "shard/5", "shard/6", "shard/7"}; !slices.Equal(del, want) {
		t.Errorf("deleted rows: got %v, want %v", del, want)
	}
	if _, err := g.Apply(t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{6, 1, 61}}}); !errors.Is(err, ErrBadCommand) {
		t.Errorf("commit on a removed shard: got %v, want ErrBadCommand", err)
	}
	flush()
	loaded, err := Load("g", rows)
	if err != nil {
		t.Fatalf("Load: got %v, want nil", err)
	}
	if got, want := loaded.Status(t0), g.Status(t0); !reflect.DeepEqual(got, want) {
		t.Errorf("loaded status: got %+v, want %+v", got, want)
	}
	res = mustApply(t, g, t0, hb("w", 8))
	if l := res.Assigned[6]; l.Epoch != 1 || l.Offset != -1 {
		t.Errorf("regrown shard 6: got epoch %d offset %d, want 1 and -1 (a new shard)", l.Epoch, l.Offset)
	}
}

// parkCmd returns a park of a cell of shard s by w at epoch.
func parkCmd(w string, s int, epoch uint64, id uint64, errText string) Command {
	return Command{Op: OpPark, Worker: w, Epoch: epoch, Park: &ParkedCell{
		ID: id, Shard: s, AddedID: 42, RowKey: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
		ColumnKey: "c", RefKey: 1, Error: errText, Attempts: 3,
	}}
}

func TestParkHaltRetryDrop(t *testing.T) {
	g := New("g")
	settle(t, g, t0, 2, "w1", "w2")
	lease := map[string]Lease{}
	for _, l := range g.Status(t0).Leases {
		lease[l.Owner] = l
	}
	l1, l2 := lease["w1"], lease["w2"]

	type want struct {
		fenced   bool
		affected uint64
		halted   bool
		parked   int
	}
	steps := []struct {
		name string
		cmd  Command
		want want
	}{
		{"park fenced by epoch", parkCmd("w1", l1.Shard, l1.Epoch+1, 0, "e"), want{fenced: true}},
		{"park fenced by owner", parkCmd("w2", l1.Shard, l1.Epoch, 0, "e"), want{fenced: true}},
		{"park first sets the threshold", func() Command { c := parkCmd("w1", l1.Shard, l1.Epoch, 0, "e1"); c.HaltThreshold = 2; return c }(), want{affected: 1, parked: 1}},
		{"park second halts", parkCmd("w2", l2.Shard, l2.Epoch, 0, "e2"), want{affected: 2, halted: true, parked: 2}},
		{"retry un-halts", Command{Op: OpRetry, IDs: []uint64{1}}, want{affected: 1, parked: 1}},
		{"retry again changes nothing", Command{Op: OpRetry, IDs: []uint64{1, 77}}, want{parked: 1}},
		{"park again in place re-halts", parkCmd("w1", l1.Shard, l1.Epoch, 1, "e1 again"), want{affected: 1, halted: true, parked: 2}},
		{"park with an unknown ID gets a new one", parkCmd("w1", l1.Shard, l1.Epoch, 99, "e3"), want{affected: 3, halted: true, parked: 3}},
		{"threshold raised by park", func() Command { c := parkCmd("w1", l1.Shard, l1.Epoch, 3, "e3"); c.HaltThreshold = 10; return c }(), want{affected: 3, parked: 3}},
		{"threshold lowered by heartbeat", func() Command { c := hb("w2", 2); c.HaltThreshold = 3; return c }(), want{halted: true, parked: 3}},
		{"resolve fenced", Command{Op: OpResolve, Worker: "w2", Epoch: l2.Epoch, IDs: []uint64{1}}, want{fenced: true, halted: true, parked: 3}},
		{"resolve", Command{Op: OpResolve, Worker: "w1", Epoch: l1.Epoch, IDs: []uint64{1, 1, 55}}, want{affected: 1, parked: 2}},
		{"drop one", Command{Op: OpDrop, IDs: []uint64{2}}, want{affected: 1, parked: 1}},
		{"retry all", Command{Op: OpRetry, All: true}, want{affected: 1}},
		{"drop all", Command{Op: OpDrop, All: true}, want{affected: 1}},
		{"park IDs are never reused", parkCmd("w1", l1.Shard, l1.Epoch, 0, "e4"), want{affected: 4, parked: 1}},
	}
	for _, st := range steps {
		before := g.Clone()
		res := mustApply(t, g, t0, st.cmd)
		got := want{fenced: res.Fenced, affected: res.Affected, halted: res.Halted, parked: res.Parked}
		if got != st.want {
			t.Fatalf("%s: got %+v, want %+v", st.name, got, st.want)
		}
		if st.want.fenced && st.cmd.Op == OpPark && !reflect.DeepEqual(before.parked, g.parked) {
			t.Errorf("%s: fenced park changed the parked cells: got %+v, want %+v", st.name, g.parked, before.parked)
		}
	}
	parked := g.Status(t0).Parked
	want1 := ParkedCell{ID: 4, Shard: l1.Shard, AddedID: 42, RowKey: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
		ColumnKey: "c", RefKey: 1, Error: "e4", Attempts: 3, Worker: "w1", ParkedAt: t0}
	if !reflect.DeepEqual(parked, []ParkedCell{want1}) {
		t.Errorf("parked: got %+v, want %+v", parked, []ParkedCell{want1})
	}
}

func TestRetryDeliveredToOwner(t *testing.T) {
	g := New("g")
	settle(t, g, t0, 2, "w1", "w2")
	lease := map[string]Lease{}
	for _, l := range g.Status(t0).Leases {
		lease[l.Owner] = l
	}
	l1 := lease["w1"]
	res := mustApply(t, g, t0, parkCmd("w1", l1.Shard, l1.Epoch, 0, "boom"))
	id := res.Affected
	if got := mustApply(t, g, t0, hb("w1", 2)).Retry; len(got) != 0 {
		t.Errorf("retry list before OpRetry: got %+v, want none", got)
	}
	mustApply(t, g, at(time.Second), Command{Op: OpRetry, IDs: []uint64{id}})
	if got := mustApply(t, g, at(time.Second), hb("w2", 2)).Retry; len(got) != 0 {
		t.Errorf("retry list of the other worker: got %+v, want none", got)
	}
	got := mustApply(t, g, at(time.Second), hb("w1", 2)).Retry
	if len(got) != 1 || got[0].ID != id || !got[0].Retry || got[0].Error != "boom" {
		t.Fatalf("retry list of the owner: got %+v, want cell %d marked for retry", got, id)
	}
	// The retried cell fails again: parked in place with its new error.
	res = mustApply(t, g, at(2*time.Second), parkCmd("w1", l1.Shard, l1.Epoch, id, "boom again"))
	if res.Affected != id || res.Parked != 1 {
		t.Errorf("park again: got affected %d parked %d, want %d and 1", res.Affected, res.Parked, id)
	}
	if got := mustApply(t, g, at(2*time.Second), hb("w1", 2)).Retry; len(got) != 0 {
		t.Errorf("retry list after parking again: got %+v, want none", got)
	}
	st := g.Status(at(2 * time.Second))
	if c := st.Parked[0]; c.Error != "boom again" || !c.ParkedAt.Equal(at(2*time.Second)) || c.Retry {
		t.Errorf("parked again: got %+v, want error %q parked at %v not retrying", c, "boom again", at(2*time.Second))
	}
}

func TestMissingGroup(t *testing.T) {
	tests := []struct {
		name string
		cmd  Command
		want Result
	}{
		{"commit", Command{Op: OpCommit, Worker: "w", Commits: []Offset{{0, 1, 5}, {1, 1, 5}}},
			Result{Members: []Member{}, Accepted: []bool{false, false}}},
		{"park", parkCmd("w", 0, 1, 0, "e"), Result{Members: []Member{}, Fenced: true}},
		{"resolve", Command{Op: OpResolve, Worker: "w", Epoch: 1, IDs: []uint64{1}}, Result{Members: []Member{}, Fenced: true}},
		{"retry", Command{Op: OpRetry, All: true}, Result{Members: []Member{}}},
		{"drop", Command{Op: OpDrop, IDs: []uint64{1}}, Result{Members: []Member{}}},
		{"leave", Command{Op: OpLeave, Worker: "w"}, Result{Members: []Member{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New("g")
			res := mustApply(t, g, t0, tt.cmd)
			if !reflect.DeepEqual(res, tt.want) {
				t.Errorf("result: got %+v, want %+v", res, tt.want)
			}
			if g.Exists() {
				t.Errorf("exists: got true, want false")
			}
			if put, del := g.Dirty(); len(put) != 0 || len(del) != 0 {
				t.Errorf("dirty: got %v %v, want nothing", put, del)
			}
			if !reflect.DeepEqual(g, New("g")) {
				t.Errorf("group changed: got %+v, want a new group", g)
			}
		})
	}
	g := New("g")
	mustApply(t, g, t0, hb("w", 1))
	if !g.Exists() {
		t.Errorf("exists after a heartbeat: got false, want true")
	}
}

func TestBadCommands(t *testing.T) {
	tests := []struct {
		name  string
		cmd   Command
		field string
	}{
		{"unknown op", Command{Op: "nap", Worker: "w"}, "op"},
		{"empty op", Command{Worker: "w"}, "op"},
		{"heartbeat without worker", hb("", 4), "worker"},
		{"commit without worker", Command{Op: OpCommit}, "worker"},
		{"leave without worker", Command{Op: OpLeave}, "worker"},
		{"park without worker", parkCmd("", 0, 1, 0, "e"), "worker"},
		{"resolve without worker", Command{Op: OpResolve, IDs: []uint64{1}}, "worker"},
		{"heartbeat without shards", hb("w", 0), "shards"},
		{"negative shards", Command{Op: OpRetry, Shards: -1}, "shards"},
		{"negative session timeout", func() Command { c := hb("w", 4); c.SessionTimeout = -time.Second; return c }(), "session_timeout"},
		{"negative halt threshold", func() Command { c := hb("w", 4); c.HaltThreshold = -1; return c }(), "halt_threshold"},
		{"negative halt threshold in park", func() Command { c := parkCmd("w", 0, 1, 0, "e"); c.HaltThreshold = -1; return c }(), "halt_threshold"},
		{"unknown start", func() Command { c := hb("w", 4); c.Start.Kind = "soon"; return c }(), "start.kind"},
		{"released out of range", func() Command { c := hb("w", 4); c.Released = []int{0, 4}; return c }(), "released[1]"},
		{"released negative", func() Command { c := hb("w", 4); c.Released = []int{-1}; return c }(), "released[0]"},
		{"heartbeat commit out of range", func() Command { c := hb("w", 4); c.Commits = []Offset{{9, 1, 1}}; return c }(), "commits[0].shard"},
		{"commit out of range", Command{Op: OpCommit, Worker: "w", Commits: []Offset{{0, 1, 1}, {4, 1, 1}}}, "commits[1].shard"},
		{"leave commit out of range", Command{Op: OpLeave, Worker: "w", Commits: []Offset{{-1, 1, 1}}}, "commits[0].shard"},
		{"park missing", Command{Op: OpPark, Worker: "w", Epoch: 1}, "park"},
		{"park out of range", parkCmd("w", 4, 1, 0, "e"), "park.shard"},
		{"park with another cell's ID", parkCmd("w", 1, 1, 1, "e"), "park.shard"},
	}
	base := New("g")
	mustApply(t, base, t0, hb("w", 4))
	mustApply(t, base, t0, parkCmd("w", 0, 1, 0, "e"))
	base.ResetDirty()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := base.Clone()
			_, err := g.Apply(at(time.Second), tt.cmd)
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("error: got %v, want ErrBadCommand", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error: got %q, want it to name %q", err, tt.field)
			}
			if !reflect.DeepEqual(g, base) {
				t.Errorf("group changed: got %+v, want %+v", g, base)
			}
			if put, del := g.Dirty(); len(put) != 0 || len(del) != 0 {
				t.Errorf("dirty: got %v %v, want nothing", put, del)
			}
		})
	}
}

func TestTimeMonotonic(t *testing.T) {
	g := New("g")
	cmd := hb("w", 2)
	cmd.SessionTimeout = 3 * time.Second
	res := mustApply(t, g, at(100*time.Second), cmd)
	if want := at(103 * time.Second); !res.SessionExpires.Equal(want) {
		t.Fatalf("session expires: got %v, want %v", res.SessionExpires, want)
	}
	// A new leader whose clock is 60s behind: the group's time stays at 100s.
	res = mustApply(t, g, at(40*time.Second), cmd)
	if want := at(103 * time.Second); !res.SessionExpires.Equal(want) {
		t.Errorf("session expires with an earlier now: got %v, want %v", res.SessionExpires, want)
	}
	res = mustApply(t, g, at(41*time.Second), parkCmd("w", 0, 1, 0, "e"))
	if got := g.Status(t0).Parked[0].ParkedAt; !got.Equal(at(100 * time.Second)) {
		t.Errorf("parked at with an earlier now: got %v, want %v", got, at(100*time.Second))
	}
	if st := g.Status(t0); len(st.Members) != 1 {
		t.Errorf("status at an earlier now: got members %+v, want w live at the group's clock", st.Members)
	}
	// Time moves on from the group's clock: at 103s the session has ended.
	res = mustApply(t, g, at(103*time.Second), Command{Op: OpRetry})
	if len(res.Members) != 0 || res.Generation != 2 {
		t.Errorf("at 103s: got members %+v generation %d, want none and 2", res.Members, res.Generation)
	}
	// Times are stored in UTC without a monotonic reading.
	g2 := New("g")
	res = mustApply(t, g2, time.Now().In(time.FixedZone("Y", -7200)), hb("w", 1))
	if res.SessionExpires.Location() != time.UTC || res.SessionExpires != res.SessionExpires.Round(0) {
		t.Errorf("session expires %#v: got a local or monotonic time, want UTC", res.SessionExpires)
	}
}

func TestLeave(t *testing.T) {
	g := New("g")
	settle(t, g, t0, 4, "w1", "w2")
	l := g.Status(t0).Leases
	var w1 Lease
	for _, x := range l {
		if x.Owner == "w1" {
			w1 = x
			break
		}
	}
	res := mustApply(t, g, t0, Command{Op: OpLeave, Worker: "w1", Commits: []Offset{{w1.Shard, w1.Epoch, 7}}})
	if !slices.Equal(res.Accepted, []bool{true}) || res.Generation != 3 || len(res.Members) != 1 {
		t.Fatalf("leave: got accepted %v generation %d members %+v, want [true], 3, [w2]", res.Accepted, res.Generation, res.Members)
	}
	res = mustApply(t, g, t0, hb("w2", 4))
	if len(res.Assigned) != 4 {
		t.Errorf("w2 after w1 left: got %d shards, want 4", len(res.Assigned))
	}
	if got := res.Assigned[w1.Shard]; got.Offset != 7 || got.Epoch != w1.Epoch+1 {
		t.Errorf("shard %d after leave: got %+v, want offset 7 epoch %d", w1.Shard, got, w1.Epoch+1)
	}
	res = mustApply(t, g, t0, Command{Op: OpLeave, Worker: "w1"})
	if res.Generation != 3 {
		t.Errorf("second leave: got generation %d, want 3 (no-op)", res.Generation)
	}
}

func TestCloneIsDeep(t *testing.T) {
	g := New("g")
	mustApply(t, g, t0, hb("w", 2))
	mustApply(t, g, t0, parkCmd("w", 0, 1, 0, "e"))
	g.ResetDirty()
	mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{0, 1, 3}}})
	wantStatus := g.Status(t0)
	wantPut, wantDel := g.Dirty()

	c := g.Clone()
	if put, del := c.Dirty(); !reflect.DeepEqual(put, wantPut) || !reflect.DeepEqual(del, wantDel) {
		t.Errorf("clone's dirty rows: got %v %v, want %v %v", put, del, wantPut, wantDel)
	}
	mustApply(t, c, at(time.Second), Command{Op: OpRetry, All: true})
	mustApply(t, c, at(time.Second), Command{Op: OpCommit, Worker: "w", Commits: []Offset{{1, 1, 9}}})
	mustApply(t, c, at(time.Second), hb("x", 2))
	mustApply(t, c, at(time.Second), hb("w", 3))
	c.ResetDirty()
	if got := g.Status(t0); !reflect.DeepEqual(got, wantStatus) {
		t.Errorf("original after changing the clone: got %+v, want %+v", got, wantStatus)
	}
	if put, del := g.Dirty(); !reflect.DeepEqual(put, wantPut) || !reflect.DeepEqual(del, wantDel) {
		t.Errorf("original's dirty rows after changing the clone: got %v %v, want %v %v", put, del, wantPut, wantDel)
	}
}

func TestStatusOfNewGroup(t *testing.T) {
	st := New("g").Status(t0)
	want := Status{Group: "g", Members: []Member{}, Leases: []Lease{}, Parked: []ParkedCell{}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status: got %+v, want %+v", st, want)
	}
}

func ExampleGroup_Apply() {
	g := New("billing")
	res, _ := g.Apply(t0, Command{Op: OpHeartbeat, Worker: "w1", Shards: 4})
	fmt.Println(res.Generation, shardsOf(res.Assigned), res.Assigned[0].Epoch, res.Assigned[0].Offset)
	res, _ = g.Apply(t0, Command{Op: OpCommit, Worker: "w1", Commits: []Offset{{Shard: 0, Epoch: 1, Offset: 17}}})
	fmt.Println(res.Accepted)
	res, _ = g.Apply(t0, Command{Op: OpHeartbeat, Worker: "w2", Shards: 4})
	fmt.Println(res.Generation, len(res.Assigned))
	res, _ = g.Apply(t0, Command{Op: OpHeartbeat, Worker: "w1", Shards: 4})
	fmt.Println(shardsOf(res.Assigned), res.Revoke)
	// Output:
	// 1 [0 1 2 3] 1 -1
	// [true]
	// 2 0
	// [0 1] [2 3]
}
