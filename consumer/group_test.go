package consumer

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err, "Apply(%v, %+v)", now, cmd)
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
	require.Failf(t, "no settled assignment", "assignment of %d shards to %v did not settle in 10 rounds: owners %v",
		n, workers, owners(g, now))
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
	t.Parallel()
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
			t.Parallel()
			g := New("g")
			for i := range tt.workers {
				settle(t, g, t0, tt.shards, tt.workers[:i+1]...)
			}
			assert.Equal(t, tt.want, counts(g, t0, tt.workers), "shards per worker")
			assert.Equal(t, uint64(len(tt.workers)), g.Status(t0).Generation, "generation")
			seen := map[int]string{}
			for _, w := range tt.workers {
				res := mustApply(t, g, t0, hb(w, tt.shards))
				assert.Empty(t, res.Revoke, "%s: revoke after settling", w)
				for _, l := range res.Assigned {
					other, ok := seen[l.Shard]
					assert.False(t, ok, "shard %d assigned to %s and %s", l.Shard, other, w)
					seen[l.Shard] = w
					assert.True(t, l.Epoch != 0 && l.Offset == -1 && l.Owner == w,
						"%s: lease %+v: got epoch %d offset %d owner %q, want epoch >= 1, offset -1, owner %q",
						w, l, l.Epoch, l.Offset, l.Owner, w)
				}
				for i, m := range res.Members {
					assert.True(t, m.ID == tt.workers[slices.Index(tt.workers, m.ID)] && (i == 0 || res.Members[i-1].ID < m.ID),
						"members: got %v, want sorted by ID", res.Members)
				}
			}
			assert.Len(t, seen, tt.shards, "shards assigned")
		})
	}
}

func TestStickiness(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
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
				assert.Equal(t, tt.joiner, after[s], "shard %d moved from %s: got a move between old members, want moves only to the joiner",
					s, before[s])
			}
			assert.Equal(t, tt.wantMoved, moved, "shards moved")
			assert.Equal(t, tt.want, counts(g, t0, all), "shards per member")
		})
	}
}

func TestRevokeReleaseGrant(t *testing.T) {
	t.Parallel()
	g := New("g")
	res := mustApply(t, g, t0, hb("w1", 4))
	want := []Lease{{0, "w1", 1, -1}, {1, "w1", 1, -1}, {2, "w1", 1, -1}, {3, "w1", 1, -1}}
	require.Equal(t, want, res.Assigned, "w1 assigned")
	res = mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w1", Commits: []Offset{{0, 1, 10}, {1, 1, 11}, {2, 1, 12}, {3, 1, 13}}})
	require.Equal(t, []bool{true, true, true, true}, res.Accepted, "commits")

	res = mustApply(t, g, at(time.Second), hb("w2", 4))
	require.Empty(t, res.Assigned, "w2 joining: assigned (w1 still owns every shard)")
	require.Equal(t, uint64(2), res.Generation, "w2 joining: generation")

	res = mustApply(t, g, at(time.Second), hb("w1", 4))
	assert.Equal(t, []int{0, 1}, shardsOf(res.Assigned), "w1 assigned")
	assert.Equal(t, []int{2, 3}, res.Revoke, "w1 revoke")
	// w1 still owns the revoked shards until it releases them: its commits are accepted, and
	// commits come before releases in one heartbeat.
	cmd := hb("w1", 4)
	cmd.Commits = []Offset{{2, 1, 20}}
	cmd.Released = []int{2, 3}
	res = mustApply(t, g, at(2*time.Second), cmd)
	assert.Equal(t, []bool{true}, res.Accepted, "w1 release: accepted commits")
	assert.Empty(t, res.Revoke, "w1 release: revoke")
	res = mustApply(t, g, at(2*time.Second), hb("w2", 4))
	assert.Equal(t, []Lease{{2, "w2", 2, 20}, {3, "w2", 2, 13}}, res.Assigned, "w2 assigned")
	// The old epoch no longer commits.
	res = mustApply(t, g, at(2*time.Second), Command{Op: OpCommit, Worker: "w1", Commits: []Offset{{3, 1, 99}}})
	assert.Equal(t, []bool{false}, res.Accepted, "w1 commit after release")
	want2 := []Member{{ID: "w1", Expires: at(5 * time.Second), Shards: 2}, {ID: "w2", Expires: at(5 * time.Second), Shards: 2}}
	assert.Equal(t, want2, res.Members, "members")
}

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	g := New("g")
	settle(t, g, t0, 4, "w1", "w2")
	before := map[int]Lease{}
	for _, l := range g.Status(t0).Leases {
		before[l.Shard] = l
	}
	// w2 last heartbeat at t0: its session ends at t0+3s (expired when now >= Expires).
	res := mustApply(t, g, at(2999*time.Millisecond), hb("w1", 4))
	require.Len(t, res.Assigned, 2, "before w2 expires: w1's shards")
	require.Len(t, res.Members, 2, "before w2 expires: members")
	st := g.Status(at(3 * time.Second))
	if assert.Len(t, st.Members, 1, "status at w2's expiry: members (want only w1)") {
		assert.Equal(t, "w1", st.Members[0].ID, "status at w2's expiry: the member left")
	}
	assert.Equal(t, uint64(3), st.Generation, "status at w2's expiry: generation")
	got := g.Status(at(2 * time.Second))
	assert.Len(t, got.Members, 2, "status must not change the group: members")
	assert.Equal(t, uint64(2), got.Generation, "status must not change the group: generation")
	res = mustApply(t, g, at(3*time.Second), hb("w1", 4))
	require.Len(t, res.Assigned, 4, "after w2 expired: w1's shards")
	require.Equal(t, uint64(3), res.Generation, "after w2 expired: generation")
	require.Len(t, res.Members, 1, "after w2 expired: members (want [w1])")
	for _, l := range res.Assigned {
		want := before[l.Shard].Epoch
		if before[l.Shard].Owner == "w2" { // regranted: a new epoch
			want++
		}
		assert.Equal(t, want, l.Epoch, "shard %d (owned by %s) epoch", l.Shard, before[l.Shard].Owner)
	}
}

func TestFencing(t *testing.T) {
	t.Parallel()
	t.Run("old owner after reassignment", func(t *testing.T) {
		t.Parallel()
		g := New("g")
		mustApply(t, g, t0, hb("w1", 2))
		mustApply(t, g, t0, hb("w2", 2))
		res := mustApply(t, g, at(4*time.Second), hb("w2", 2)) // w1 expired at t0+3s
		require.Equal(t, []Lease{{0, "w2", 2, -1}, {1, "w2", 2, -1}}, res.Assigned, "w2 assigned")
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
			assert.Equal(t, []bool{tt.want}, res.Accepted, "%s: accepted", tt.name)
		}
		assert.Equal(t, int64(5), g.Status(at(4 * time.Second)).Leases[0].Offset, "offset")
	})
	t.Run("expired member heartbeats again", func(t *testing.T) {
		t.Parallel()
		g := New("g")
		mustApply(t, g, t0, hb("w1", 2))
		cmd := hb("w1", 2)
		cmd.Commits = []Offset{{0, 1, 99}, {1, 1, 98}}
		res := mustApply(t, g, at(10*time.Second), cmd)
		assert.Equal(t, []bool{false, false}, res.Accepted, "old-epoch commits")
		assert.Equal(t, uint64(3), res.Generation, "generation: join, expiry, rejoin")
		assert.Equal(t, []Lease{{0, "w1", 2, -1}, {1, "w1", 2, -1}}, res.Assigned, "assigned")
	})
}

func TestOffsetsNeverBackward(t *testing.T) {
	t.Parallel()
	g := New("g")
	mustApply(t, g, t0, hb("w", 1))
	tests := []struct {
		offset int64
		want   int64
	}{{10, 10}, {5, 10}, {-1, 10}, {12, 12}, {12, 12}}
	for _, tt := range tests {
		res := mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{0, 1, tt.offset}}})
		assert.Equal(t, []bool{true}, res.Accepted, "commit %d: accepted", tt.offset)
		assert.Equal(t, tt.want, g.Status(t0).Leases[0].Offset, "after commit %d: offset", tt.offset)
	}
}

func TestGroupSettings(t *testing.T) {
	t.Parallel()
	g := New("g")
	zone := time.FixedZone("X", 3600)
	start := Start{Kind: StartTimestamp, Time: time.Date(2024, 1, 1, 1, 0, 0, 0, zone)}
	cmd := hb("w", 4)
	cmd.Start = start
	cmd.HaltThreshold = 5
	mustApply(t, g, t0, cmd)
	st := g.Status(t0)
	assert.Equal(t, StartTimestamp, st.Start.Kind, "start kind")
	assert.True(t, st.Start.Time.Equal(start.Time), "start time: got %v, want %v", st.Start.Time, start.Time)
	assert.Equal(t, time.UTC, st.Start.Time.Location(), "start time: location")
	assert.Equal(t, 5, st.HaltThreshold, "halt threshold")
	cmd = hb("w", 4)
	cmd.Start = Start{Kind: StartLatest}
	cmd.HaltThreshold = 2
	mustApply(t, g, t0, cmd)
	st = g.Status(t0)
	assert.Equal(t, StartTimestamp, st.Start.Kind, "start after a second heartbeat: want the first one kept")
	assert.Equal(t, 2, st.HaltThreshold, "halt threshold after a second heartbeat: latest wins")
}

func TestShardCountChange(t *testing.T) {
	t.Parallel()
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
	require.Len(t, res.Assigned, 4, "4 shards: assigned")
	flush()
	res = mustApply(t, g, t0, hb("w", 8))
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, shardsOf(res.Assigned), "8 shards: assigned")
	mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{6, 1, 60}}})
	flush()
	res = mustApply(t, g, t0, hb("w", 3))
	assert.Equal(t, []int{0, 1, 2}, shardsOf(res.Assigned), "3 shards: assigned")
	assert.Empty(t, res.Revoke, "3 shards: revoke")
	_, del := g.Dirty()
	assert.Equal(t, []string{"shard/3", "shard/4", "shard/5", "shard/6", "shard/7"}, del, "deleted rows")
	_, err := g.Apply(t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{6, 1, 61}}})
	assert.ErrorIs(t, err, ErrBadCommand, "commit on a removed shard")
	flush()
	loaded, err := Load("g", rows)
	require.NoError(t, err, "Load")
	assert.Equal(t, g.Status(t0), loaded.Status(t0), "loaded status")
	res = mustApply(t, g, t0, hb("w", 8))
	l := res.Assigned[6]
	assert.Equal(t, uint64(1), l.Epoch, "regrown shard 6: epoch (a new shard)")
	assert.Equal(t, int64(-1), l.Offset, "regrown shard 6: offset (a new shard)")
}

// parkCmd returns a park of a cell of shard s by w at epoch.
func parkCmd(w string, s int, epoch uint64, id uint64, errText string) Command {
	return Command{Op: OpPark, Worker: w, Epoch: epoch, Park: &ParkedCell{
		ID: id, Shard: s, AddedID: 42, RowKey: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
		ColumnKey: "c", RefKey: 1, Error: errText, Attempts: 3,
	}}
}

func TestParkHaltRetryDrop(t *testing.T) {
	t.Parallel()
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
		{"park again of a cell that is gone stores nothing", parkCmd("w1", l1.Shard, l1.Epoch, 99, "e3"), want{halted: true, parked: 2}},
		{"park a third", parkCmd("w1", l1.Shard, l1.Epoch, 0, "e3"), want{affected: 3, halted: true, parked: 3}},
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
		require.Equal(t, st.want, got, st.name)
		if st.want.fenced && st.cmd.Op == OpPark {
			assert.Equal(t, before.parked, g.parked, "%s: fenced park changed the parked cells", st.name)
		}
	}
	want1 := ParkedCell{ID: 4, Shard: l1.Shard, AddedID: 42, RowKey: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
		ColumnKey: "c", RefKey: 1, Error: "e4", Attempts: 3, Worker: "w1", ParkedAt: t0}
	assert.Equal(t, []ParkedCell{want1}, g.Status(t0).Parked, "parked")
}

func TestRetryDeliveredToOwner(t *testing.T) {
	t.Parallel()
	g := New("g")
	settle(t, g, t0, 2, "w1", "w2")
	lease := map[string]Lease{}
	for _, l := range g.Status(t0).Leases {
		lease[l.Owner] = l
	}
	l1 := lease["w1"]
	res := mustApply(t, g, t0, parkCmd("w1", l1.Shard, l1.Epoch, 0, "boom"))
	id := res.Affected
	assert.Empty(t, mustApply(t, g, t0, hb("w1", 2)).Retry, "retry list before OpRetry")
	mustApply(t, g, at(time.Second), Command{Op: OpRetry, IDs: []uint64{id}})
	assert.Empty(t, mustApply(t, g, at(time.Second), hb("w2", 2)).Retry, "retry list of the other worker")
	got := mustApply(t, g, at(time.Second), hb("w1", 2)).Retry
	require.True(t, len(got) == 1 && got[0].ID == id && got[0].Retry && got[0].Error == "boom",
		"retry list of the owner: got %+v, want cell %d marked for retry", got, id)
	// The retried cell fails again: parked in place with its new error.
	res = mustApply(t, g, at(2*time.Second), parkCmd("w1", l1.Shard, l1.Epoch, id, "boom again"))
	assert.Equal(t, id, res.Affected, "park again: affected")
	assert.Equal(t, 1, res.Parked, "park again: parked")
	assert.Empty(t, mustApply(t, g, at(2*time.Second), hb("w1", 2)).Retry, "retry list after parking again")
	st := g.Status(at(2 * time.Second))
	c := st.Parked[0]
	assert.Equal(t, "boom again", c.Error, "parked again: error")
	assert.True(t, c.ParkedAt.Equal(at(2*time.Second)), "parked again: parked at %v, want %v", c.ParkedAt, at(2*time.Second))
	assert.False(t, c.Retry, "parked again: still marked for retry")
}

func TestMissingGroup(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			g := New("g")
			res := mustApply(t, g, t0, tt.cmd)
			assert.Equal(t, tt.want, res, "result")
			assert.False(t, g.Exists(), "exists")
			put, del := g.Dirty()
			assert.Empty(t, put, "dirty rows put")
			assert.Empty(t, del, "dirty rows deleted")
			assert.Equal(t, New("g"), g, "group changed: want a new group")
		})
	}
	g := New("g")
	mustApply(t, g, t0, hb("w", 1))
	assert.True(t, g.Exists(), "exists after a heartbeat")
}

func TestBadCommands(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			g := base.Clone()
			_, err := g.Apply(at(time.Second), tt.cmd)
			require.ErrorIs(t, err, ErrBadCommand)
			assert.ErrorContains(t, err, tt.field, "error: want it to name the field")
			assert.Equal(t, base, g, "group changed")
			put, del := g.Dirty()
			assert.Empty(t, put, "dirty rows put")
			assert.Empty(t, del, "dirty rows deleted")
		})
	}
}

func TestTimeMonotonic(t *testing.T) {
	t.Parallel()
	g := New("g")
	cmd := hb("w", 2)
	cmd.SessionTimeout = 3 * time.Second
	res := mustApply(t, g, at(100*time.Second), cmd)
	require.True(t, res.SessionExpires.Equal(at(103*time.Second)), "session expires: got %v, want %v", res.SessionExpires, at(103*time.Second))
	// A new leader whose clock is 60s behind: the group's time stays at 100s.
	res = mustApply(t, g, at(40*time.Second), cmd)
	assert.True(t, res.SessionExpires.Equal(at(103*time.Second)),
		"session expires with an earlier now: got %v, want %v", res.SessionExpires, at(103*time.Second))
	mustApply(t, g, at(41*time.Second), parkCmd("w", 0, 1, 0, "e"))
	got := g.Status(t0).Parked[0].ParkedAt
	assert.True(t, got.Equal(at(100*time.Second)), "parked at with an earlier now: got %v, want %v", got, at(100*time.Second))
	assert.Len(t, g.Status(t0).Members, 1, "status at an earlier now: members (want w live at the group's clock)")
	// Time moves on from the group's clock: at 103s the session has ended.
	res = mustApply(t, g, at(103*time.Second), Command{Op: OpRetry})
	assert.Empty(t, res.Members, "at 103s: members")
	assert.Equal(t, uint64(2), res.Generation, "at 103s: generation")
	// Times are stored in UTC without a monotonic reading.
	g2 := New("g")
	res = mustApply(t, g2, time.Now().In(time.FixedZone("Y", -7200)), hb("w", 1))
	assert.Equal(t, time.UTC, res.SessionExpires.Location(), "session expires %#v: location", res.SessionExpires)
	assert.True(t, res.SessionExpires == res.SessionExpires.Round(0), "session expires %#v: got a monotonic reading", res.SessionExpires)
}

func TestLeave(t *testing.T) {
	t.Parallel()
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
	require.Equal(t, []bool{true}, res.Accepted, "leave: accepted commits")
	require.Equal(t, uint64(3), res.Generation, "leave: generation")
	require.Len(t, res.Members, 1, "leave: members (want [w2])")
	res = mustApply(t, g, t0, hb("w2", 4))
	if assert.Len(t, res.Assigned, 4, "w2 after w1 left: shards") {
		got := res.Assigned[w1.Shard]
		assert.Equal(t, int64(7), got.Offset, "shard %d after leave: offset", w1.Shard)
		assert.Equal(t, w1.Epoch+1, got.Epoch, "shard %d after leave: epoch", w1.Shard)
	}
	res = mustApply(t, g, t0, Command{Op: OpLeave, Worker: "w1"})
	assert.Equal(t, uint64(3), res.Generation, "second leave: generation (a no-op)")
}

func TestCloneIsDeep(t *testing.T) {
	t.Parallel()
	g := New("g")
	mustApply(t, g, t0, hb("w", 2))
	mustApply(t, g, t0, parkCmd("w", 0, 1, 0, "e"))
	g.ResetDirty()
	mustApply(t, g, t0, Command{Op: OpCommit, Worker: "w", Commits: []Offset{{0, 1, 3}}})
	wantStatus := g.Status(t0)
	wantPut, wantDel := g.Dirty()

	c := g.Clone()
	put, del := c.Dirty()
	assert.Equal(t, wantPut, put, "clone's dirty rows put")
	assert.Equal(t, wantDel, del, "clone's dirty rows deleted")
	mustApply(t, c, at(time.Second), Command{Op: OpRetry, All: true})
	mustApply(t, c, at(time.Second), Command{Op: OpCommit, Worker: "w", Commits: []Offset{{1, 1, 9}}})
	mustApply(t, c, at(time.Second), hb("x", 2))
	mustApply(t, c, at(time.Second), hb("w", 3))
	c.ResetDirty()
	assert.Equal(t, wantStatus, g.Status(t0), "original after changing the clone")
	put, del = g.Dirty()
	assert.Equal(t, wantPut, put, "original's dirty rows put after changing the clone")
	assert.Equal(t, wantDel, del, "original's dirty rows deleted after changing the clone")
}

func TestStatusOfNewGroup(t *testing.T) {
	t.Parallel()
	want := Status{Group: "g", Members: []Member{}, Leases: []Lease{}, Parked: []ParkedCell{}}
	assert.Equal(t, want, New("g").Status(t0), "status")
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
