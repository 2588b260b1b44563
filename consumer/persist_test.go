package consumer

import (
	"flag"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized consumer tests (0: from the clock)")

// testSeed returns the seed of a randomized test and logs it.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}

// sim generates plausible, sometimes stale or malformed, commands for a group from what the
// workers last heard: their leases, revocations and retries, and the parked IDs.
type sim struct {
	rng     *rand.Rand
	now     time.Time
	shards  int
	workers []string
	leases  map[string][]Lease // last Assigned plus Revoke, per worker
	revoke  map[string][]int
	retry   map[string][]ParkedCell
	ids     []uint64
}

func newSim(seed uint64) *sim {
	return &sim{
		rng:     rand.New(rand.NewPCG(seed, 0x636f6e73756d6572)),
		now:     t0,
		shards:  8,
		workers: []string{"w0", "w1", "w2", "w3"},
		leases:  map[string][]Lease{},
		revoke:  map[string][]int{},
		retry:   map[string][]ParkedCell{},
	}
}

func (s *sim) pick(n int) int { return s.rng.IntN(n) }

// commits returns up to 3 commits of w, mostly at its epochs.
func (s *sim) commits(w string) []Offset {
	var cs []Offset
	for range s.pick(4) {
		if ls := s.leases[w]; len(ls) > 0 && s.pick(5) > 0 {
			l := ls[s.pick(len(ls))]
			cs = append(cs, Offset{Shard: l.Shard, Epoch: l.Epoch, Offset: int64(s.pick(100))})
		} else {
			cs = append(cs, Offset{Shard: s.pick(s.shards), Epoch: uint64(s.pick(4)), Offset: int64(s.pick(100))})
		}
	}
	return cs
}

// someIDs returns a few known (and sometimes unknown) parked-cell IDs.
func (s *sim) someIDs() []uint64 {
	var ids []uint64
	for range s.pick(3) {
		if len(s.ids) > 0 && s.pick(4) > 0 {
			ids = append(ids, s.ids[s.pick(len(s.ids))])
		} else {
			ids = append(ids, uint64(s.pick(50)))
		}
	}
	return ids
}

// next returns the time and command of the next step.
func (s *sim) next() (time.Time, Command) {
	if s.pick(20) == 0 {
		s.now = s.now.Add(-time.Duration(s.pick(5000)) * time.Millisecond) // a leader with a late clock
	} else {
		s.now = s.now.Add(time.Duration(s.pick(1500)) * time.Millisecond)
	}
	now := s.now
	if s.pick(4) == 0 {
		now = now.In(time.FixedZone("Z", 3600*(s.pick(5)-2)))
	}
	w := s.workers[s.pick(len(s.workers))]
	if s.pick(100) == 0 {
		s.shards = []int{6, 8, 10}[s.pick(3)]
	}
	switch r := s.pick(100); {
	case r < 40:
		cmd := hb(w, s.shards)
		cmd.SessionTimeout = []time.Duration{0, time.Second, 2 * time.Second, 5 * time.Second}[s.pick(4)]
		cmd.HaltThreshold = []int{0, 2, 3, 3}[s.pick(4)]
		cmd.Start = Start{Kind: []StartKind{"", StartEarliest, StartLatest, StartTimestamp}[s.pick(4)], Time: now.Add(-time.Hour)}
		if s.pick(5) > 0 {
			cmd.Released = s.revoke[w]
		}
		if s.pick(10) == 0 {
			cmd.Released = append(slices.Clone(cmd.Released), s.pick(s.shards))
		}
		cmd.Commits = s.commits(w)
		return now, cmd
	case r < 60:
		return now, Command{Op: OpCommit, Worker: w, Commits: s.commits(w)}
	case r < 72:
		shard, epoch := s.pick(s.shards), uint64(s.pick(4))
		if ls := s.leases[w]; len(ls) > 0 && s.pick(5) > 0 {
			l := ls[s.pick(len(ls))]
			shard, epoch = l.Shard, l.Epoch
		}
		var id uint64
		if rs := s.retry[w]; len(rs) > 0 && s.pick(2) == 0 {
			c := rs[s.pick(len(rs))]
			id, shard = c.ID, c.Shard
		}
		cmd := parkCmd(w, shard, epoch, id, "error "+w)
		cmd.Park.AddedID = int64(s.pick(1000))
		cmd.HaltThreshold = []int{0, 0, 2, 4}[s.pick(4)]
		return now, cmd
	case r < 78:
		cmd := Command{Op: OpResolve, Worker: w, Epoch: uint64(s.pick(4)), IDs: s.someIDs()}
		if rs := s.retry[w]; len(rs) > 0 && s.pick(4) > 0 {
			c := rs[s.pick(len(rs))]
			cmd.IDs = []uint64{c.ID}
			for _, l := range s.leases[w] {
				if l.Shard == c.Shard {
					cmd.Epoch = l.Epoch
				}
			}
		}
		return now, cmd
	case r < 85:
		return now, Command{Op: OpRetry, IDs: s.someIDs(), All: s.pick(4) == 0}
	case r < 90:
		return now, Command{Op: OpDrop, IDs: s.someIDs(), All: s.pick(8) == 0}
	case r < 95:
		return now, Command{Op: OpLeave, Worker: w, Commits: s.commits(w)}
	default:
		bad := []Command{
			{Op: "nope", Worker: w},
			hb(w, 0),
			{Op: OpCommit, Worker: w, Commits: []Offset{{Shard: s.shards + 3}}},
			{Op: OpHeartbeat, Worker: w, Shards: s.shards, SessionTimeout: -1},
			{Op: OpPark, Worker: w},
		}
		return now, bad[s.pick(len(bad))]
	}
}

// observe records what the worker of cmd learned from its result.
func (s *sim) observe(cmd Command, res Result, err error) {
	if err != nil {
		return
	}
	w := cmd.Worker
	switch cmd.Op {
	case OpHeartbeat:
		ls := slices.Clone(res.Assigned)
		for _, shard := range res.Revoke {
			for _, l := range s.leases[w] {
				if l.Shard == shard {
					ls = append(ls, l)
				}
			}
		}
		s.leases[w], s.revoke[w], s.retry[w] = ls, res.Revoke, res.Retry
	case OpLeave:
		delete(s.leases, w)
		delete(s.revoke, w)
		delete(s.retry, w)
	case OpPark:
		if !res.Fenced && !slices.Contains(s.ids, res.Affected) {
			s.ids = append(s.ids, res.Affected)
		}
	}
}

// flush applies g's dirty rows to rows and resets them.
func flush(g *Group, rows map[string][]byte) {
	put, del := g.Dirty()
	for _, k := range del {
		if _, ok := put[k]; ok {
			panic("row " + k + " both put and deleted")
		}
		delete(rows, k)
	}
	for k, v := range put {
		rows[k] = v
	}
	g.ResetDirty()
}

// sameState reports, as "" or a difference, whether a and b hold the same coordinator state
// (dirty sets aside; nil and empty slices are the same).
func sameState(a, b *Group) string {
	ma, mb := a.meta(), b.meta()
	if len(ma.Parked) == 0 && len(mb.Parked) == 0 {
		ma.Parked, mb.Parked = nil, nil
	}
	switch {
	case a.name != b.name || a.exists != b.exists:
		return "name or exists differ"
	case !reflect.DeepEqual(ma, mb):
		return "meta differs"
	case len(a.leases) != len(b.leases) || (len(a.leases) > 0 && !reflect.DeepEqual(a.leases, b.leases)):
		return "leases differ"
	}
	return ""
}

// TestDeterminism applies one random command sequence to two groups (one of them cloned
// midway) and wants the same results and states.
func TestDeterminism(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	for run := range 20 {
		s := newSim(seed + uint64(run))
		a, b := New("g"), New("g")
		for step := range 400 {
			if step == 200 {
				b = b.Clone()
			}
			now, cmd := s.next()
			ra, ea := a.Apply(now, cmd)
			rb, eb := b.Apply(now, cmd)
			require.Equal(t, ra, rb, "seed %d run %d step %d %+v: results of the group and its clone", seed, run, step, cmd)
			require.Equal(t, ea == nil, eb == nil, "seed %d run %d step %d %+v: errors %v and %v, want both or neither",
				seed, run, step, cmd, ea, eb)
			if ea != nil {
				require.ErrorIs(t, ea, ErrBadCommand, "seed %d run %d step %d", seed, run, step)
			}
			s.observe(cmd, ra, ea)
		}
		require.Empty(t, sameState(a, b), "seed %d run %d: want equal states", seed, run)
		st := a.Status(s.now)
		assert.True(t, len(st.Leases) > 0 && a.generation >= 5,
			"seed %d run %d: got %d leases, generation %d: the sequence exercised too little",
			seed, run, len(st.Leases), a.generation)
	}
}

// TestPersistenceRandom applies random commands to a group while accumulating its Dirty rows,
// like the FSM does (sometimes several commands per flush), and wants Load of the rows to give a
// group with the same state, Status and answers to the following commands.
func TestPersistenceRandom(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	exercised := 0
	for run := range 20 {
		s := newSim(seed + uint64(run))
		g := New("g")
		rows := map[string][]byte{}
		var parked, halted bool
		for step := range 500 {
			now, cmd := s.next()
			res, err := g.Apply(now, cmd)
			s.observe(cmd, res, err)
			parked = parked || len(g.parked) > 0
			halted = halted || g.halted
			if s.pick(3) > 0 {
				continue // several commands per FSM batch
			}
			flush(g, rows)
			if step%10 != 0 {
				continue
			}
			loaded, err := Load("g", rows)
			require.NoError(t, err, "seed %d run %d step %d: Load", seed, run, step)
			require.Empty(t, sameState(g, loaded), "seed %d run %d step %d: loaded group: want the same state", seed, run, step)
			for _, at := range []time.Time{now, now.Add(2 * time.Second), t0} {
				require.Equal(t, g.Status(at), loaded.Status(at), "seed %d run %d step %d: Status(%v) of the loaded group", seed, run, step, at)
			}
			// The loaded group answers the next commands like the original (on clones).
			orig, s2 := g.Clone(), *s
			s2.rng = rand.New(rand.NewPCG(seed+uint64(step), uint64(run)))
			for k := range 20 {
				now, cmd := s2.next()
				ro, eo := orig.Apply(now, cmd)
				rl, el := loaded.Apply(now, cmd)
				require.Equal(t, ro, rl, "seed %d run %d step %d+%d %+v: result of the loaded group", seed, run, step, k, cmd)
				require.Equal(t, eo == nil, el == nil, "seed %d run %d step %d+%d %+v: loaded got error %v, want %v",
					seed, run, step, k, cmd, el, eo)
			}
		}
		if parked && halted {
			exercised++
		}
	}
	assert.GreaterOrEqual(t, exercised, 10, "seed %d: runs of 20 that parked and halted", seed)
}

func TestLoadCorrupt(t *testing.T) {
	t.Parallel()
	g := New("g")
	mustApply(t, g, t0, hb("w", 4))
	good := map[string][]byte{}
	flush(g, good)
	with := func(k string, v []byte) map[string][]byte {
		rows := map[string][]byte{}
		for k, v := range good {
			rows[k] = v
		}
		if v == nil {
			delete(rows, k)
		} else {
			rows[k] = v
		}
		return rows
	}
	tests := []struct {
		name string
		rows map[string][]byte
	}{
		{"no meta", with("meta", nil)},
		{"bad meta", with("meta", []byte{0xc1})},
		{"bad shard", with("shard/1", []byte{0xc1})},
		{"unknown key", with("other", good["shard/0"])},
		{"shard out of range", with("shard/4", good["shard/0"])},
		{"shard not canonical", with("shard/01", good["shard/0"])},
		{"negative shard", with("shard/-1", good["shard/0"])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("g", tt.rows)
			assert.ErrorIs(t, err, ErrCorruptRow, "Load")
		})
	}
	for _, rows := range []map[string][]byte{nil, {}} {
		g, err := Load("g", rows)
		if assert.NoError(t, err, "Load(%v)", rows) {
			assert.False(t, g.Exists(), "Load(%v): want a new group", rows)
			assert.Equal(t, "g", g.Name(), "Load(%v): name", rows)
		}
	}
	loaded, err := Load("g", good)
	require.NoError(t, err, "Load(good)")
	require.True(t, loaded.Exists(), "Load(good): want an existing group")
	put, del := loaded.Dirty()
	assert.Empty(t, put, "dirty rows put after Load")
	assert.Empty(t, del, "dirty rows deleted after Load")
}
